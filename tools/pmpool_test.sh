#!/bin/sh
# CLI test of pmpool (run by ctest as pmpool_cli): good pools work, and every
# bad-pool case prints exactly one "pmpool: ..." line on stderr, exits 1
# and leaves the file's bytes and mtime unchanged; command-line errors exit
# 2; a FIFO or a device is refused at once.
#   usage: pmpool_test.sh PATH/TO/pmpool [KIND]
set -u
PMPOOL=$1
KIND=${2:-lbtree}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/pmpool-test-XXXXXX")
trap 'rm -rf "$DIR"' EXIT
FAILURES=0

fail() {
  echo "FAIL: $*" >&2
  FAILURES=$((FAILURES + 1))
}

state() { # bytes (regular files) and mtime of a file
  if [ -f "$1" ]; then echo "$(sha256sum <"$1") $(stat -c %Y.%y "$1")"
  elif [ -e "$1" ]; then stat -c %F.%Y.%y "$1"
  else echo absent; fi
}

# expect_ok CMD... : exit 0.
expect_ok() {
  if ! "$@" >"$DIR/out" 2>"$DIR/err"; then fail "expected success: $* ($(cat "$DIR/err"))"; fi
}

# expect_refused FILE PATTERN CMD... : exit 1, one stderr line starting
# with "pmpool: " and matching PATTERN, FILE unchanged. (expect_usage: the
# same with exit 2, a command-line error.) Every command runs under a
# timeout, so one that blocks fails instead of hanging the test.
expect_refused() { expect_exit 1 "$@"; }
expect_usage() { expect_exit 2 "$@"; }
expect_exit() {
  code=$1 file=$2 pattern=$3
  shift 3
  before=$(state "$file")
  timeout 20 "$@" >"$DIR/out" 2>"$DIR/err"
  rc=$?
  if [ "$rc" -eq 0 ]; then fail "expected failure: $*"; return; fi
  [ "$rc" -eq "$code" ] || fail "$*: exit status $rc, expected $code ($(cat "$DIR/err"))"
  lines=$(wc -l <"$DIR/err")
  [ "$lines" -eq 1 ] || fail "$*: $lines stderr lines: $(cat "$DIR/err")"
  grep -q '^pmpool: ' "$DIR/err" || fail "$*: stderr lacks 'pmpool: ': $(cat "$DIR/err")"
  grep -qi -- "$pattern" "$DIR/err" || fail "$*: stderr lacks '$pattern': $(cat "$DIR/err")"
  [ "$(state "$file")" = "$before" ] || fail "$*: changed $file"
}

# expect_readonly FILE CMD... : success and FILE unchanged.
expect_readonly() {
  file=$1
  shift
  before=$(state "$file")
  expect_ok "$@"
  [ "$(state "$file")" = "$before" ] || fail "$*: changed $file"
}

# patch FILE OFFSET BYTE-ESCAPE : overwrite one byte in place.
patch() { printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }

P="$DIR/good.pool"
# --version: the project's version (PMINDEX_VERSION, set by ctest), exit 0.
if [ -n "${PMINDEX_VERSION:-}" ]; then
  out=$("$PMPOOL" --version 2>&1) || fail "pmpool --version exited non-zero: $out"
  [ "$out" = "pmpool (pmindex) $PMINDEX_VERSION" ] || fail "pmpool --version printed: $out"
fi
expect_ok "$PMPOOL" create "$P" --kind "$KIND" --size 8M --max-size 1G
grep -q "created" "$DIR/out" || fail "create printed nothing"
expect_readonly "$P" "$PMPOOL" info "$P"
grep -q "kind: *$KIND" "$DIR/out" || fail "info lacks the kind"
grep -q "clean: *yes" "$DIR/out" || fail "info lacks the clean flag"
grep -q "durability:" "$DIR/out" || fail "info lacks durability"
expect_readonly "$P" "$PMPOOL" dump "$P"
grep -q "pages:" "$DIR/out" || fail "dump lacks the page summary"
expect_ok "$PMPOOL" verify "$P"
grep -q "0 entries" "$DIR/out" || fail "verify lacks the entry count: $(cat "$DIR/out")"

# Creation errors leave nothing behind.
expect_refused "$P" "already exists" "$PMPOOL" create "$P" --kind "$KIND"
# Command-line errors: exit 2.
expect_usage "$DIR/small.pool" "minimum" "$PMPOOL" create "$DIR/small.pool" --kind "$KIND" --size 1M
expect_usage "$DIR/x.pool" "unknown index kind" "$PMPOOL" create "$DIR/x.pool" --kind no-such-kind
expect_usage "$DIR/x.pool" "--size" "$PMPOOL" create "$DIR/x.pool" --kind "$KIND" --size 12Q
expect_usage "$DIR/x.pool" "--max-size" "$PMPOOL" create "$DIR/x.pool" --kind "$KIND" --max-size -1
expect_usage "$DIR/x.pool" "--kind" "$PMPOOL" create "$DIR/x.pool"
expect_usage "$DIR/x.pool" "no-such-flag" "$PMPOOL" info "$DIR/x.pool" --no-such-flag
expect_usage "$DIR/x.pool" "subcommand" "$PMPOOL"
expect_usage "$DIR/x.pool" "PATH" "$PMPOOL" verify
[ ! -e "$DIR/x.pool" ] && [ ! -e "$DIR/small.pool" ] || fail "a refused create left a file"
"$PMPOOL" --help | grep -q "Exit status" || fail "--help lacks the exit status"

# Bad pools, for every subcommand.
printf 'just some text\n' >"$DIR/text"
: >"$DIR/empty"
head -c 65536 /dev/urandom >"$DIR/random"
cp "$P" "$DIR/trunc.pool" && truncate -s 4M "$DIR/trunc.pool"
cp "$P" "$DIR/sum.pool" && patch "$DIR/sum.pool" 200 'Z'
cp "$P" "$DIR/ver.pool" && patch "$DIR/ver.pool" 8 '\011'
cp "$P" "$DIR/flag.pool" && patch "$DIR/flag.pool" 23 '\200'
for cmd in info verify dump; do
  expect_refused "$DIR/missing" "not found" "$PMPOOL" $cmd "$DIR/missing"
  expect_refused "$DIR/text" "not a pmindex pool" "$PMPOOL" $cmd "$DIR/text"
  expect_refused "$DIR/empty" "not a pmindex pool" "$PMPOOL" $cmd "$DIR/empty"
  expect_refused "$DIR/random" "not a pmindex pool" "$PMPOOL" $cmd "$DIR/random"
  expect_refused "$DIR/trunc.pool" "truncated" "$PMPOOL" $cmd "$DIR/trunc.pool"
  expect_refused "$DIR/sum.pool" "checksum" "$PMPOOL" $cmd "$DIR/sum.pool"
  expect_refused "$DIR/ver.pool" "version" "$PMPOOL" $cmd "$DIR/ver.pool"
  expect_refused "$DIR/flag.pool" "incompatible" "$PMPOOL" $cmd "$DIR/flag.pool"
done

# Not regular files: refused at once (an O_RDONLY open of a FIFO would wait
# for a writer forever), for every subcommand.
mkfifo "$DIR/fifo"
mkdir "$DIR/dir.pool"
for cmd in info verify dump; do
  expect_refused "$DIR/fifo" "a FIFO" "$PMPOOL" $cmd "$DIR/fifo"
  expect_refused "$DIR/dir.pool" "a directory" "$PMPOOL" $cmd "$DIR/dir.pool"
  expect_refused /dev/null "a character device" "$PMPOOL" $cmd /dev/null
done

# A crashed pool (clean flag 0) that open_index refuses: verify closes it
# and leaves it unclean and unchanged (the page table is read, and found
# malformed, before anything is written).
cp "$P" "$DIR/crashed.pool" && patch "$DIR/crashed.pool" 2112 '\000'
patch "$DIR/crashed.pool" 4177 '\001' # page 10's word: tag 0 with other bits
expect_refused "$DIR/crashed.pool" "page 10 has an invalid page word" "$PMPOOL" verify "$DIR/crashed.pool"
"$PMPOOL" info "$DIR/crashed.pool" | grep -q "clean: *no" || fail "verify marked a refused pool clean"
# The same damage on a clean pool: still clean, bytes and mtime unchanged.
cp "$P" "$DIR/damaged.pool" && patch "$DIR/damaged.pool" 4177 '\001'
expect_refused "$DIR/damaged.pool" "invalid page word" "$PMPOOL" verify "$DIR/damaged.pool"
"$PMPOOL" info "$DIR/damaged.pool" | grep -q "clean: *yes" || fail "a refused verify changed the clean flag"
# Damage the index finds itself (root slot 0, the index's first pointer,
# made misaligned) on a cleanly closed pool: refused before recovery writes
# anything, the clean flag included (bytes and mtime unchanged).
cp "$P" "$DIR/root.pool" && patch "$DIR/root.pool" 2048 '\377'
expect_refused "$DIR/root.pool" "misaligned" "$PMPOOL" verify "$DIR/root.pool"
"$PMPOOL" info "$DIR/root.pool" | grep -q "clean: *yes" || fail "a refused open_index cleared the clean flag"

# A pool locked by another process (flock(1) takes the same lock).
if command -v flock >/dev/null 2>&1; then
  flock "$P" sleep 3 &
  sleep 0.5
  expect_refused "$P" "open in another process" "$PMPOOL" verify "$P"
  kill $! 2>/dev/null
  wait 2>/dev/null
fi

if [ "$FAILURES" -ne 0 ]; then
  echo "$FAILURES failure(s)" >&2
  exit 1
fi
echo "pmpool CLI: all checks passed"
