#!/usr/bin/env bash
# Inputs and outputs of every analyzer, by class: an input that is missing, a
# directory, a device, a FIFO (which must not hang) or larger than the limit
# exits 2 with one line; an output that is a device, a directory, a symlink to
# either, a symlink to nothing, in a missing directory, or one of the inputs
# (by name, hard link or symlink) exits 2 with one line before any work and
# leaves the target untouched; an output over a regular file replaces it
# atomically and keeps its mode; control characters in file names and
# receipts never reach the terminal; and each input file is opened once, so
# the bytes parsed are the bytes digested.
#   usage: bash test_analyze_io.sh <gem> <source-dir>
set -euo pipefail
GEM="$1"
SRC="$2"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
. "$SRC/tests/analyze_lib.sh"
python3 "$SRC/tests/gen_records.py" "$GEM" "$WORK" resources profiles
MR="$SRC/results/cpu/merge-check.json"
RR="$WORK/resources.json"
P64="$WORK/profile-64k.json"
P128="$WORK/profile-128k.json"
ROOT="$WORK/root"

# The analyzers, each as a function of (input, output): the input replaces
# its first input file. A hang (a FIFO read) is cut after 20 s and fails.
merge() { timeout 20 "$GEM" analyze merge-boundary "$1" --out "$2"; }
res() { timeout 20 "$GEM" analyze resources "$1" --root "$ROOT" --out "$2"; }
ceil() { timeout 20 "$GEM" analyze ceiling "$1" "$P128" --out "$2"; }
good_input() {
  case "$1" in merge) echo "$MR" ;; res) echo "$RR" ;; ceil) echo "$P64" ;; esac
}

# Bad inputs.
mkdir "$WORK/a-dir"
mkfifo "$WORK/a-fifo"
truncate -s 65M "$WORK/huge.json"
for a in merge res ceil; do
  expect_usage "$a-input-missing" "No such file" "$a" "$WORK/missing.json" "$WORK/o.json"
  expect_usage "$a-input-dir" "is a directory" "$a" "$WORK/a-dir" "$WORK/o.json"
  expect_usage "$a-input-dev" "is a character device" "$a" /dev/zero "$WORK/o.json"
  expect_usage "$a-input-fifo" "is a FIFO" "$a" "$WORK/a-fifo" "$WORK/o.json"
  expect_usage "$a-input-huge" "more than the limit" "$a" "$WORK/huge.json" "$WORK/o.json"
done
check nothing-written [ ! -e "$WORK/o.json" ]

# Bad outputs, each refused before any work (one line even with progress on).
ln -s /dev/null "$WORK/link-to-null"
ln -s "$WORK/a-dir" "$WORK/link-to-dir"
ln -s "$WORK/nothing" "$WORK/link-to-nothing"
for a in merge res ceil; do
  in=$(good_input "$a")
  cp "$in" "$WORK/in-$a.json"
  ln "$WORK/in-$a.json" "$WORK/hard-$a.json"
  ln -s "$WORK/in-$a.json" "$WORK/sym-$a.json"
  for bad in /dev/null "$WORK/link-to-null" "$WORK/a-dir" "$WORK/link-to-dir" \
             "$WORK/link-to-nothing" "$WORK/no-dir/out.json" "$WORK/in-$a.json" \
             "$WORK/hard-$a.json" "$WORK/sym-$a.json"; do
    rc=0
    start=$SECONDS
    "$a" "$WORK/in-$a.json" "$bad" >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
    lines=$(wc -l <"$WORK/err.txt")
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && [ $((SECONDS - start)) -lt 5 ]; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
      echo "FAIL $a-out $bad: wanted exit 2 and one line at once; got $rc, $lines line(s)" >&2
      sed 's/^/     /' "$WORK/err.txt" >&2
    fi
  done
  check "$a-input-untouched" cmp -s "$in" "$WORK/in-$a.json"
done
check dev-null-still-a-device test -c /dev/null
check link-still-a-link test -L "$WORK/link-to-null"
check dir-still-a-dir test -d "$WORK/a-dir"

# A regular output is replaced atomically, keeping its mode; no temporary file
# is left behind.
echo old >"$WORK/old.json"
chmod 640 "$WORK/old.json"
expect_pass replace-regular res "$RR" "$WORK/old.json"
check replaced grep -q '"gem.analysis.resources.v1"' "$WORK/old.json"
check mode-kept [ "$(stat -c %a "$WORK/old.json")" = 640 ]
check no-temporary-left bash -c "! ls -a '$WORK' | grep -q '\.tmp\.'"
# Through a symlink to a regular file: the file is replaced, the link kept.
ln -s "$WORK/old.json" "$WORK/link-to-old"
expect_pass replace-through-link res "$RR" "$WORK/link-to-old"
check link-kept test -L "$WORK/link-to-old"

# Control characters from file names and receipt strings are escaped.
evil="$WORK/$(printf 'evil\n\033[31mname\007').json"
printf '{"schema": ' >"$evil"
expect_fail evil-name "malformed document" "$GEM" analyze merge-boundary "$evil"
check evil-name-escaped no_control "$WORK/err.txt"
check evil-name-shown grep -qF '\x1b[31m' "$WORK/err.txt"
python3 "$SRC/tests/tamper.py" "$RR" "$WORK/evil-role.json" set kernels.2.role \
  '"\u001b]0;title\u0007\u009b31m"'
expect_fail evil-string "wrong value" "$GEM" analyze resources "$WORK/evil-role.json" --root "$ROOT"
check evil-string-escaped no_control "$WORK/err.txt"
check evil-c1-escaped bash -c "! grep -q $'\xc2\x9b' '$WORK/err.txt'"
python3 "$SRC/tests/tamper.py" "$RR" "$WORK/evil-key.json" add "$(printf 'k\033[2J')" 1
expect_fail evil-key "unexpected field" "$GEM" analyze resources "$WORK/evil-key.json" --root "$ROOT"
check evil-key-escaped no_control "$WORK/err.txt"
expect_usage evil-usage "unexpected argument" "$GEM" analyze resources "$RR" "$(printf 'x\033[2J')"
check evil-usage-escaped no_control "$WORK/err.txt"

# Each input is opened once: the bytes parsed are the bytes digested.
# (The leak checker of a sanitizer build cannot run under ptrace; it is off
# for these two runs only.)
if command -v strace >/dev/null 2>&1 && strace -f -o /dev/null true 2>/dev/null; then
  opens() { grep -c "open.*\"$1\"" "$WORK/trace.txt" || true; }
  traced() { GEM_QUIET=1 ASAN_OPTIONS=detect_leaks=0 strace -o "$WORK/trace.txt" \
               -e trace=open,openat "$@" >/dev/null 2>&1; }
  check ceiling-traced traced "$GEM" analyze ceiling "$P64" "$P128" --out "$WORK/c.json"
  check ceiling-opens-64k-once [ "$(opens "$P64")" -eq 1 ]
  check ceiling-opens-128k-once [ "$(opens "$P128")" -eq 1 ]
  check resources-traced traced "$GEM" analyze resources "$RR" --root "$ROOT" --out "$WORK/r.json"
  check resources-opens-once [ "$(opens "$RR")" -eq 1 ]
  check analysis-digest-of-bytes grep -q "$(sha256sum "$RR" | cut -c1-64)" "$WORK/r.json"
fi

summary test_analyze_io
