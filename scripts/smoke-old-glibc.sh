#!/usr/bin/env bash
# Install a built x86_64 wheel into an old userland (Debian 11 "bullseye", glibc 2.31) and
# smoke-test its import and its CLI there: the manylinux2014 tag must hold on machines older
# than the one that built it. .ci/run runs it on every CI run.
#
#   scripts/smoke-old-glibc.sh WHEEL [ROOT]
#
# ROOT (default: $TMPDIR/pi-condense-bullseye) is kept between runs: the first run makes it
# with debootstrap from deb.debian.org and builds CPython 3.11 inside it from Debian's own
# python3.11 source package (bullseye ships 3.9 and pi-condense needs >= 3.11; no registry this
# project may use has a prebuilt CPython 3.11 for glibc < 2.34). The interpreter is used from
# its build tree (no `make install`, which would byte-compile the standard library three
# times). Measured on 2 cores: 6 minutes from nothing (3.5 min of it CPU: the CPython build;
# 11 minutes when other jobs share the cores), 30-40 s with ROOT kept. Needs root
# (debootstrap, chroot, mount), deb.debian.org, and a host python3 whose pip reaches PyPI.
set -euo pipefail

wheel="$(realpath "${1:?usage: scripts/smoke-old-glibc.sh WHEEL [ROOT]}")"
root="${2:-${TMPDIR:-/tmp}/pi-condense-bullseye}"
mirror="http://deb.debian.org/debian"
python_tree=/src/python3.11

step() { printf '\n==> %s (%d s)\n' "$*" "$SECONDS"; }
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root "$@"; }

case "$(basename "$wheel")" in
    *-abi3-*x86_64*.whl) ;;
    *) echo "$wheel: expected an abi3 x86_64 wheel" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "needs root (debootstrap, chroot)" >&2; exit 2; }

if [ ! -e "$root/.debootstrap-done" ]; then
    step "debootstrap bullseye into $root"
    command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap
    mkdir -p "$root"
    debootstrap --variant=minbase \
        --include=build-essential,zlib1g-dev,libffi-dev,libssl-dev,libbz2-dev,liblzma-dev,libsqlite3-dev,xz-utils,ca-certificates \
        bullseye "$root" "$mirror"
    touch "$root/.debootstrap-done"
fi

mounted=()
cleanup() {
    local m
    for m in "${mounted[@]}"; do umount "$m" 2>/dev/null || true; done
}
trap cleanup EXIT
for fs in proc dev; do
    if ! mountpoint -q "$root/$fs"; then
        if [ "$fs" = proc ]; then mount -t proc proc "$root/proc"; else mount --bind /dev "$root/dev"; fi
        mounted+=("$root/$fs")
    fi
done
cp /etc/resolv.conf "$root/etc/resolv.conf"

if [ ! -x "$root$python_tree/python" ]; then
    step "CPython 3.11 from Debian's python3.11 source package (bookworm), built in the root"
    echo "deb-src $mirror bookworm main" >"$root/etc/apt/sources.list.d/bookworm-src.list"
    in_root apt-get update -qq
    in_root sh -c 'mkdir -p /src && cd /src && apt-get source --download-only -qq python3.11'
    in_root sh -c "cd /src && rm -rf Python-3.11.* $python_tree && tar -xf python3.11_*.orig.tar.* \
        && mv Python-3.11.* $python_tree && cd $python_tree \
        && ./configure -q --without-ensurepip --disable-test-modules \
        && make -s -j\"\$(nproc)\" >/dev/null"
fi

step "install the wheel into a fresh venv in the root (dependencies fetched by the host's pip)"
# The host's pip (its proxy and CA settings) downloads manylinux2014 wheels of the
# dependencies; the root installs them offline.
rm -rf "$root/opt/venv" "$root/opt/wheels"
mkdir -p "$root/opt/wheels"
cp "$wheel" "$root/opt/wheels/"
python3 -m pip download -q --only-binary=:all: --platform manylinux2014_x86_64 \
    --python-version 3.11 --implementation cp -d "$root/opt/wheels" "$wheel" pip
# A venv of the build tree's interpreter (it finds its standard library in the tree's Lib/).
in_root "$python_tree/python" -m venv --without-pip /opt/venv
# No ensurepip in the root's build: pip's own wheel runs as a zip (python pip.whl/pip).
pip_wheel="$(cd "$root/opt/wheels" && ls pip-*.whl)"
in_root /opt/venv/bin/python "/opt/wheels/$pip_wheel/pip" install -q --no-index \
    --find-links /opt/wheels --disable-pip-version-check "/opt/wheels/$(basename "$wheel")"

step "smoke test: glibc, import, CLI"
ldd_line="$(in_root ldd --version | sed -n 1p)"
echo "$ldd_line"
glibc="$(grep -oE '[0-9]+\.[0-9]+$' <<<"$ldd_line")"
case "$glibc" in
    2.3[4-9] | 2.[4-9]*) echo "the root's glibc is $glibc: not old enough to test" >&2; exit 1 ;;
esac
in_root /opt/venv/bin/python -c '
import pi_condense, pi_condense._core as core
from pi_condense.cli._common import EXAMPLE_SESSION
from pi_condense.session import SessionFile
n = len(SessionFile.load(EXAMPLE_SESSION).build_context().messages)
assert n > 400, n
print("import ok:", pi_condense.__version__, core.__file__, n, "messages in the example")
'
in_root /opt/venv/bin/pi-condense --version
in_root sh -c 'cd /tmp && rm -rf smoke && mkdir smoke && cd smoke \
    && /opt/venv/bin/pi-condense condense --example >out.txt && sed -n "1p;10,13p" out.txt \
    && /opt/venv/bin/pi-condense status example-session.condensed.jsonl >status.txt \
    && sed -n 1,4p status.txt'
echo
echo "smoke test passed on glibc $glibc ($SECONDS s)"
