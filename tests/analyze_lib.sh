# Helpers for the analyzer tests (sourced). Each tampered input must be
# rejected with exit status 1 and exactly one line on stderr naming the
# defect class; a good input must pass with status 0.
#   needs: GEM (the gem binary), WORK (a scratch directory)
passed=0
failed=0

# python3 (the tests call it a few hundred times, for tamper.py and small edits) as the
# interpreter's own path, resolved once: through a version manager's shim each call costs
# another shell and process before Python starts.
GEM_TEST_PYTHON=$(command python3 -c 'import sys; print(sys.executable)')
python3() { "$GEM_TEST_PYTHON" "$@"; }

# expect_fail NAME CLASS COMMAND...
expect_fail() {
  local name="$1" cls="$2"
  shift 2
  local rc=0
  GEM_QUIET=1 "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
  local lines
  lines=$(wc -l <"$WORK/err.txt")
  if [ "$rc" -eq 1 ] && [ "$lines" -eq 1 ] && grep -qF -- "$cls" "$WORK/err.txt"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL $name: wanted exit 1 and one line with '$cls'; got exit $rc, $lines line(s):" >&2
    sed 's/^/     /' "$WORK/err.txt" >&2
  fi
}

# expect_usage NAME TEXT COMMAND...: a usage, input or I/O problem: exit 2 and
# exactly one line on stderr holding TEXT.
expect_usage() {
  local name="$1" text="$2"
  shift 2
  local rc=0
  GEM_QUIET=1 "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
  local lines
  lines=$(wc -l <"$WORK/err.txt")
  if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -qF -- "$text" "$WORK/err.txt"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL $name: wanted exit 2 and one line with '$text'; got exit $rc, $lines line(s):" >&2
    sed 's/^/     /' "$WORK/err.txt" >&2
  fi
}

# no_control FILE: FILE holds no byte below 0x20 other than newline, and no DEL.
no_control() {
  ! LC_ALL=C grep -q "$(printf '[\001-\011\013-\037\177]')" "$1"
}

# expect_pass NAME COMMAND...
expect_pass() {
  local name="$1"
  shift
  local rc=0
  GEM_QUIET=1 "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
  if [ "$rc" -eq 0 ] && grep -q ": pass" "$WORK/out.txt"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL $name: wanted a pass, got exit $rc:" >&2
    sed 's/^/     /' "$WORK/err.txt" "$WORK/out.txt" >&2
  fi
}

# check NAME CONDITION-COMMAND...
check() {
  local name="$1"
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $name" >&2; fi
}

summary() {
  echo "$1: $passed passed, $failed failed"
  [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
}
