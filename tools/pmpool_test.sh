#!/bin/sh
# CLI test of pmpool (run by ctest as pmpool_cli): good pools work, and every
# bad-pool case prints exactly one "pmpool: ..." line on stderr, exits
# non-zero and leaves the file's bytes and mtime unchanged.
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

state() { # bytes and mtime of a file
  if [ -e "$1" ]; then echo "$(sha256sum <"$1") $(stat -c %Y.%y "$1")"; else echo absent; fi
}

# expect_ok CMD... : exit 0.
expect_ok() {
  if ! "$@" >"$DIR/out" 2>"$DIR/err"; then fail "expected success: $* ($(cat "$DIR/err"))"; fi
}

# expect_refused FILE PATTERN CMD... : non-zero exit, one stderr line
# starting with "pmpool: " and matching PATTERN, FILE unchanged.
expect_refused() {
  file=$1 pattern=$2
  shift 2
  before=$(state "$file")
  if "$@" >"$DIR/out" 2>"$DIR/err"; then fail "expected failure: $*"; return; fi
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
expect_refused "$DIR/small.pool" "minimum" "$PMPOOL" create "$DIR/small.pool" --kind "$KIND" --size 1M
expect_refused "$DIR/x.pool" "unknown index kind" "$PMPOOL" create "$DIR/x.pool" --kind no-such-kind
expect_refused "$DIR/x.pool" "--size" "$PMPOOL" create "$DIR/x.pool" --kind "$KIND" --size 12Q

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
