#!/usr/bin/env bash
# Runs the binding's memory-safety checks under valgrind (memcheck), so a use-after-free
# fails a build instead of waiting for a crash (issue 37).
#
#   scripts/valgrind-binding.sh [WHEEL]
#
# WHEEL: a built pi-condense abi3 wheel (CI passes the one it built); without it the script
# builds one with maturin (release, into a temporary directory). The Python that runs the
# checks is $PYTHON (default: python3) and must have the package's dependencies (orjson,
# pydantic, ...): CI runs the script inside its test venv. It checks, each under valgrind:
#
# - tests/support/render_hostile_child.py: a native render while a finalizer, a host thread or
#   hostile subclasses (`__eq__`, `__hash__`, `__float__`, `__index__`) try to free the
#   rendered list's items, with lone-surrogate ids and timestamps beyond the double range;
#   it must exit 0 having run none of that code during the render;
# - the binding's Rust tests (rust/py/tests, an embedded interpreter).
#
# Python runs with PYTHONMALLOC=malloc (every object a malloc block, so valgrind sees each
# free) and memcheck reports addressing errors only (invalid reads and writes, bad frees:
# --undef-value-errors=no; CPython's own uninitialised-value reports are not the binding's).
# scripts/valgrind-python.supp holds the few reports that are not ours (glibc over-reads).
# Any report fails the script. Nothing is written into the checkout.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
python="${PYTHON:-python3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/pi-condense-valgrind.XXXXXX")"
trap 'rm -rf "$work"' EXIT

if ! command -v valgrind >/dev/null 2>&1; then
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq valgrind
fi
valgrind --version

wheel="${1:-}"
if [ -z "$wheel" ]; then
    maturin="$(command -v maturin || true)"
    if [ -z "$maturin" ]; then
        "$python" -m venv "$work/build"
        "$work/build/bin/pip" install -q "maturin>=1.5,<2"
        maturin="$work/build/bin/maturin"
    fi
    "$maturin" build --release --out "$work/wheels"
    wheel="$(ls "$work"/wheels/pi_condense-*-abi3-*.whl)"
fi
echo "wheel: $wheel"
# The package from the wheel, importable from a directory of its own (not the checkout).
"$python" -m zipfile -e "$wheel" "$work/site"

memcheck=(
    valgrind --tool=memcheck --error-exitcode=99 --leak-check=no --undef-value-errors=no
    --num-callers=40 --suppressions="$repo/scripts/valgrind-python.supp"
)
started=$SECONDS
for scenario in finalizer thread hooks; do
    echo "==> render under valgrind: $scenario (lone surrogates and ints beyond the double range)"
    PYTHONMALLOC=malloc PYTHONPATH="$work/site" "${memcheck[@]}" --log-file="$work/valgrind.log" \
        "$python" tests/support/render_hostile_child.py "$scenario" both >"$work/out.json" || {
        status=$?
        cat "$work/valgrind.log" >&2
        echo "valgrind: the render ($scenario) failed with exit $status" >&2
        exit 1
    }
    "$python" -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["pruned"] and r["fired"] == 0, r["fired"]' "$work/out.json"
done

echo "==> the binding's Rust tests under valgrind"
py_libdir="$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")')"
PYO3_PYTHON="$(command -v "$python")"
export PYO3_PYTHON LD_LIBRARY_PATH="$py_libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tests="$(cargo test -p pi-condense-py --tests --no-run --message-format=json 2>/dev/null |
    "$python" -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])')"
if [ -z "$tests" ]; then
    echo "valgrind: no Rust test binary of pi-condense-py was built" >&2
    exit 1
fi
for test in $tests; do
    PYTHONMALLOC=malloc "${memcheck[@]}" --log-file="$work/valgrind.log" "$test" --quiet --test-threads=1 || {
        status=$?
        cat "$work/valgrind.log" >&2
        echo "valgrind: $(basename "$test") failed with exit $status" >&2
        exit 1
    }
done
echo "valgrind: no invalid read or write in $((SECONDS - started)) s"
