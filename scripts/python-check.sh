#!/usr/bin/env bash
# The Python package as a user installs it: `pip install .` into a fresh virtual environment
# (scikit-build-core builds libgem for this machine; numpy and ml_dtypes come with the "test"
# extra), then the package's tests against that installed copy, numpy's tests included.
#
#   scripts/python-check.sh          the environment in build-python/venv (made anew)
#
# Needs PyPI (pip) and, as root, installs Debian's python3-venv when python3 has no venv.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "") ;;
  -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "python-check.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
esac
if ! python3 -m venv --help >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "python-check: python3 has no venv module and installing python3-venv needs root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
venv="$PWD/build-python/venv"
rm -rf "$venv"
python3 -m venv "$venv"
echo "python-check: pip install .[test] into ${venv#$PWD/}" >&2
start=$(date +%s)
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check ".[test]"
echo "python-check: installed in $(( $(date +%s) - start )) s" >&2
where=$(cd /tmp && "$venv/bin/python" -c 'import gem; print(gem.__file__)')
case "$where" in
  "$venv"/*) ;;
  *) echo "python-check: the package imported from $where, not from the environment" >&2; exit 1 ;;
esac
# the tests against the installed package: python/tests only, python/gem not on the path
(cd python/tests && env -u GEM_LIBRARY "$venv/bin/python" -m unittest discover -v -s . -p 'test_*.py' 2>&1) |
  tee build-python/unittest.log | tail -n 3
grep -q '^OK' build-python/unittest.log || { echo "python-check: the tests failed" >&2; exit 1; }
# numpy's and ml_dtypes' tests must run here (the test extra installs them); JAX's and torch's
# run where those are installed
if grep -qE "skipped '(numpy|ml_dtypes) is not installed'" build-python/unittest.log; then
  echo "python-check: numpy or ml_dtypes tests were skipped although the test extra installs them" >&2
  exit 1
fi
# the example a user starts from
"$venv/bin/python" examples/decode_loop.py 32 >build-python/decode_loop.log 2>&1 ||
  { cat build-python/decode_loop.log; echo "python-check: examples/decode_loop.py failed" >&2; exit 1; }
tail -n 1 build-python/decode_loop.log
"$venv/bin/python" examples/generate.py -n 16 >build-python/generate.log 2>&1 ||
  { cat build-python/generate.log; echo "python-check: examples/generate.py failed" >&2; exit 1; }
tail -n 1 build-python/generate.log
echo "python-check: the installed package passes its tests (numpy's included) and runs the examples"
