#!/usr/bin/env bash
# Run the musllinux x86_64 wheel under a musl CPython 3.11: import, the example session, the
# CLI. No registry this project may use has a musl CPython, so one is built here from Debian's
# own python3.11 and zlib source packages with Debian's musl-gcc (package musl-tools), its
# extension modules linked in (Modules/Setup.local), zlib static.
#
#   scripts/smoke-musl.sh WHEEL DEBIAN_ROOT [PYTHON_DIR]
#
# DEBIAN_ROOT is the Debian root scripts/smoke-old-glibc.sh made (its apt fetches the
# sources). PYTHON_DIR (default: $TMPDIR/pi-condense-musl-python) keeps the built interpreter
# between runs. Needs root (chroot), musl-tools, and a host python3 whose pip reaches PyPI.
set -euo pipefail

wheel="$(realpath "${1:?usage: scripts/smoke-musl.sh WHEEL DEBIAN_ROOT [PYTHON_DIR]}")"
root="$(realpath "${2:?usage: scripts/smoke-musl.sh WHEEL DEBIAN_ROOT [PYTHON_DIR]}")"
build="${3:-${TMPDIR:-/tmp}/pi-condense-musl-python}"

step() { printf '\n==> %s (%d s)\n' "$*" "$SECONDS"; }

case "$(basename "$wheel")" in
    *-abi3-musllinux_*_x86_64.whl) ;;
    *) echo "$wheel: expected an abi3 musllinux x86_64 wheel" >&2; exit 2 ;;
esac
command -v musl-gcc >/dev/null || { echo "needs musl-gcc (apt-get install musl-tools)" >&2; exit 2; }

python="$build/cpython/python"
if [ ! -x "$python" ]; then
    step "CPython 3.11 and zlib from Debian's source packages, built with musl-gcc"
    chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root sh -c \
        'mkdir -p /src && cd /src && apt-get source --download-only -qq python3.11 zlib' 2>/dev/null
    rm -rf "$build" && mkdir -p "$build/inc"
    # musl-gcc sees only musl's headers; CPython also includes a few of the kernel's.
    for dir in linux asm-generic; do ln -s "/usr/include/$dir" "$build/inc/$dir"; done
    ln -s /usr/include/x86_64-linux-gnu/asm "$build/inc/asm"
    cat >"$build/cc" <<EOF
#!/bin/sh
# configure compares the compiler's multiarch with its own triplet (musl here)
[ "\$1" = "--print-multiarch" ] && { echo x86_64-linux-musl; exit 0; }
exec musl-gcc -isystem "$build/inc" "\$@"
EOF
    chmod +x "$build/cc"
    tar -xf "$root"/src/zlib_*.orig.tar.* -C "$build"
    (cd "$build"/zlib-* && CC=musl-gcc CFLAGS="-O2 -fPIC" ./configure --static \
        --prefix="$build/zlib" >/dev/null && make -s -j"$(nproc)" >/dev/null && make -s install >/dev/null)
    tar -xf "$root"/src/python3.11_*.orig.tar.* -C "$build"
    mv "$build"/Python-3.11.* "$build/cpython"
    cd "$build/cpython"
    modules="array|_asyncio|_bisect|_contextvars|_csv|_heapq|_json|_opcode|_pickle|_queue|_random"
    modules+="|_struct|_typing|_zoneinfo|math|cmath|_statistics|_datetime|binascii|_md5|_sha1"
    modules+="|_sha256|_sha512|_sha3|_blake2|unicodedata|fcntl|grp|mmap|_posixsubprocess|resource"
    modules+="|select|_socket|termios|_posixshmem|_multiprocessing"
    {
        echo '*static*'
        # The standard library's extension modules that need no library but libc (and zlib).
        sed 's/^@MODULE_[A-Z0-9_]*_TRUE@//' Modules/Setup.stdlib.in | grep -E "^($modules) "
        echo "zlib zlibmodule.c -I$build/zlib/include $build/zlib/lib/libz.a"
    } >Modules/Setup.local
    CC="$build/cc" ./configure -q --without-ensurepip --disable-test-modules
    # binascii's crc32 from zlib would need -lz at link time: its own crc32 does.
    sed -i 's/-DUSE_ZLIB_CRC32//; s/^MODULE_BINASCII_LDFLAGS=.*/MODULE_BINASCII_LDFLAGS=/; s/^MODULE_ZLIB_LDFLAGS=.*/MODULE_ZLIB_LDFLAGS=/' Makefile
    make -s -j"$(nproc)" python >"$build/make.log" 2>&1 || { tail -n 20 "$build/make.log"; exit 1; }
    cd - >/dev/null
fi

step "the wheel and its dependencies (musllinux wheels) into a directory"
rm -rf "$build/site" "$build/run" && mkdir -p "$build/run"
python3 -m pip install -q --target "$build/site" --only-binary=:all: --no-compile \
    --platform musllinux_1_2_x86_64 --platform musllinux_1_1_x86_64 \
    --python-version 3.11 --implementation cp "$wheel"

step "smoke test: musl, import, CLI"
export PYTHONPATH="$build/site" PYTHONDONTWRITEBYTECODE=1
cd "$build/run"
"$python" -c '
import pi_condense, pi_condense._core as core
from pi_condense.cli._common import EXAMPLE_SESSION
from pi_condense.session import SessionFile
n = len(SessionFile.load(EXAMPLE_SESSION).build_context().messages)
assert n > 400, n
libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if ".so" in l})
assert any("x86_64-linux-musl/libc.so" in l or "ld-musl" in l for l in libs), libs
assert not any("libc.so.6" in l for l in libs), libs
print("import ok:", pi_condense.__version__, core.__file__, n, "messages in the example")
print("loaded:", " ".join(libs))
'
"$python" -c 'from pi_condense.cli import main; main()' condense --example >out.txt
sed -n "1p;10,13p" out.txt
"$python" -c 'from pi_condense.cli import main; main()' status example-session.condensed.jsonl | sed -n 1,4p
echo
echo "musl smoke test passed ($SECONDS s)"
