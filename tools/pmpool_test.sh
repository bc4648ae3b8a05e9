#!/bin/sh
# CLI test of pmpool (run by ctest as pmpool_cli): good pools work, and every
# bad-pool case prints exactly one "pmpool: ..." line on stderr, exits 1
# and leaves the file's bytes and mtime unchanged; command-line errors exit
# 2; a FIFO or a device is refused at once. get/put/del/scan/load: round
# trips across reopens, full-range keys, scan bounds, load from a file or
# stdin, a sorted load into an empty index as one bulk load, out of space
# either way, SIGINT/SIGTERM in the middle of a load (clean stop, exit
# 130/143), and bad numbers or malformed load input refused before the pool
# is opened. verify fails on allocated pages nothing reaches (also after a
# crash); salvage copies every reachable entry into a new pool and leaves
# its source byte for byte unchanged.
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
  if [ -f "$1" ]; then echo "$(cksum <"$1") $(stat -c %Y.%y "$1")"
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

# expect_out TEXT WHAT : the last command's stdout is exactly TEXT.
expect_out() {
  [ "$(cat "$DIR/out")" = "$1" ] || fail "$2: printed '$(cat "$DIR/out")', expected '$1'"
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
# dump resolves the page table's two copies as open does: with copy A's
# words zeroed (copy B intact) it counts the same pages and says how many
# words differ.
grep -E '^  (free|class|large)' "$DIR/out" >"$DIR/dump.pages"
grep -q "class" "$DIR/dump.pages" || fail "dump of a new pool lists no class page"
cp "$P" "$DIR/pta.pool"
dd if=/dev/zero of="$DIR/pta.pool" bs=4096 seek=1 count=1 conv=notrunc status=none
expect_readonly "$DIR/pta.pool" "$PMPOOL" dump "$DIR/pta.pool"
grep -E '^  (free|class|large)' "$DIR/out" | cmp -s - "$DIR/dump.pages" ||
  fail "dump with page-table copy A zeroed counts other pages: $(cat "$DIR/out")"
grep -q "two copies differ: [1-9]" "$DIR/out" || fail "dump does not report the differing copies: $(cat "$DIR/out")"
grep -q "malformed" "$DIR/out" && fail "dump with copy A zeroed reports malformed words"
rm -f "$DIR/pta.pool"
expect_ok "$PMPOOL" verify "$P"
grep -q "0 entries" "$DIR/out" || fail "verify lacks the entry count: $(cat "$DIR/out")"

# Creation errors leave nothing behind.
expect_refused "$P" "already exists" "$PMPOOL" create "$P" --kind "$KIND"
# Command-line errors: exit 2.
expect_usage "$DIR/small.pool" "minimum" "$PMPOOL" create "$DIR/small.pool" --kind "$KIND" --size 1M
expect_usage "$DIR/x.pool" "unknown index kind" "$PMPOOL" create "$DIR/x.pool" --kind no-such-kind
expect_usage "$DIR/x.pool" "dram-btree\" is volatile and has no pool" "$PMPOOL" create "$DIR/x.pool" --kind dram-btree
expect_usage "$DIR/x.pool" "no-such-option" "$PMPOOL" create "$DIR/x.pool" --kind "$KIND" --options no-such-option=1
expect_usage "$DIR/x.pool" "--size" "$PMPOOL" create "$DIR/x.pool" --kind "$KIND" --size 12Q
expect_usage "$DIR/x.pool" "--max-size" "$PMPOOL" create "$DIR/x.pool" --kind "$KIND" --max-size -1
expect_usage "$DIR/x.pool" "--kind" "$PMPOOL" create "$DIR/x.pool"
expect_usage "$DIR/x.pool" "no-such-flag" "$PMPOOL" info "$DIR/x.pool" --no-such-flag
expect_usage "$DIR/x.pool" "subcommand" "$PMPOOL"
expect_usage "$DIR/x.pool" "PATH" "$PMPOOL" verify
[ ! -e "$DIR/x.pool" ] && [ ! -e "$DIR/small.pool" ] || fail "a refused create left a file"
# --pool-id goes into the header; the printed line reads the header back.
expect_ok "$PMPOOL" create "$DIR/id.pool" --kind "$KIND" --size 8M --max-size 1G --pool-id 77
grep -q "^created $DIR/id.pool: kind $KIND, options '.*', size 8 MiB (8388608 bytes), max size 1 GiB" "$DIR/out" ||
  fail "create printed: $(cat "$DIR/out")"
"$PMPOOL" info "$DIR/id.pool" | grep -q "pool id: *77$" || fail "create --pool-id 77: $("$PMPOOL" info "$DIR/id.pool")"
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

# A key-value store's pool (create --kv): info says so; verify checks it as
# a store; salvage and the index commands refuse it (its index values are
# the store's pointers) with one line and leave it unchanged.
expect_ok "$PMPOOL" create "$DIR/store.pool" --kind "$KIND" --size 8M --max-size 1G --kv
expect_readonly "$DIR/store.pool" "$PMPOOL" info "$DIR/store.pool"
grep -q "holds: *a key-value store" "$DIR/out" || fail "info of a store's pool: $(cat "$DIR/out")"
"$PMPOOL" info "$P" | grep -q "holds: *an index" || fail "info of an index pool lacks 'holds: an index'"
expect_ok "$PMPOOL" verify "$DIR/store.pool"
grep -q "ok, key-value store over kind $KIND, 0 keys" "$DIR/out" || fail "verify of a store's pool: $(cat "$DIR/out")"
expect_refused "$DIR/store.pool" "key-value store" "$PMPOOL" get "$DIR/store.pool" 1
expect_refused "$DIR/store.pool" "key-value store" "$PMPOOL" put "$DIR/store.pool" 1 2
expect_refused "$DIR/store.pool" "key-value store" "$PMPOOL" scan "$DIR/store.pool"
expect_refused "$DIR/store.pool" "key-value store" "$PMPOOL" salvage "$DIR/store.pool" "$DIR/store-copy.pool"
[ -e "$DIR/store-copy.pool" ] && fail "salvage of a store's pool left $DIR/store-copy.pool"

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
cp "$P" "$DIR/crashed.pool" && patch "$DIR/crashed.pool" 2176 '\000'
patch "$DIR/crashed.pool" 4177 '\001' # page 10's word: tag 0 with other bits,
patch "$DIR/crashed.pool" 36945 '\001' # in both copies of the table (B at 4096 + 32 KiB)
expect_refused "$DIR/crashed.pool" "page 10 has an invalid page word" "$PMPOOL" verify "$DIR/crashed.pool"
"$PMPOOL" info "$DIR/crashed.pool" | grep -q "clean: *no" || fail "verify marked a refused pool clean"
# The same damage on a clean pool: still clean, bytes and mtime unchanged.
cp "$P" "$DIR/damaged.pool" && patch "$DIR/damaged.pool" 4177 '\001'
patch "$DIR/damaged.pool" 36945 '\001'
expect_refused "$DIR/damaged.pool" "invalid page word" "$PMPOOL" verify "$DIR/damaged.pool"
"$PMPOOL" info "$DIR/damaged.pool" | grep -q "clean: *yes" || fail "a refused verify changed the clean flag"
# Root slot 0 (the index's first pointer) damaged in both of its copies
# (bytes 2048 and 2240, pool format 2) on a cleanly closed pool: refused
# before anything is written, the clean flag included (bytes and mtime
# unchanged).
cp "$P" "$DIR/root.pool" && patch "$DIR/root.pool" 2048 '\377' && patch "$DIR/root.pool" 2240 '\377'
expect_refused "$DIR/root.pool" "root slot 0" "$PMPOOL" verify "$DIR/root.pool"
expect_refused "$DIR/root.pool" "root slot 0" "$PMPOOL" info "$DIR/root.pool"

# ---------------------------------------------------------------------------
# verify checks reachable against allocated blocks; salvage copies what is
# reachable into a new pool and never writes the source (issue 15).
V="$DIR/v.pool"
NKEYS=60000
seq 1 $NKEYS | awk '{ print $1 * 7, $1 }' >"$DIR/v.txt"
expect_ok "$PMPOOL" create "$V" --kind "$KIND" --size 8M --max-size 1G
# Ascending keys into an empty index: one bulk load.
expect_ok "$PMPOOL" load "$V" "$DIR/v.txt"
expect_out "$V: loaded $NKEYS pairs ($NKEYS inserted, 0 replaced; one bulk load)" "load of sorted keys"
expect_ok "$PMPOOL" verify "$V"
grep -q " $NKEYS entries" "$DIR/out" || fail "verify of $NKEYS keys: $(cat "$DIR/out")"
reach=$(awk '/^  reachable:/ { print $2 }' "$DIR/out")
alloc=$(awk '/^  allocated:/ { print $2 }' "$DIR/out")
[ -n "$reach" ] && [ "$reach" = "$alloc" ] && [ "$reach" -gt 0 ] ||
  fail "verify: reachable '$reach' vs allocated '$alloc' blocks: $(cat "$DIR/out")"
grep -q "^  recovery: .*gave back 0 allocated unit" "$DIR/out" ||
  [ "$KIND" = nvtree ] || fail "verify of a clean pool gave something back: $(cat "$DIR/out")"
"$PMPOOL" scan "$V" >"$DIR/v.scan" || fail "scan of $V"

# word N : the page-table word of heap page N (the table starts at 4096).
word() { od -An -t u8 -j $((4096 + 8 * $2)) -N 8 "$1" | tr -d ' '; }
# An allocated page nothing reaches: page 0's word (a page in use) copied
# onto the word of the last mapped page (8M pool: pages 0..30), a free one.
[ "$(word "$V" 30)" = 0 ] && [ "$(word "$V" 0)" != 0 ] || fail "page 0 free or page 30 used"
cp "$V" "$DIR/extra.pool"
dd if="$V" of="$DIR/extra.pool" bs=8 skip=$((4096 / 8)) seek=$(((4096 + 8 * 30) / 8)) count=1 \
  conv=notrunc status=none
expect_refused "$DIR/extra.pool" "would reclaim" "$PMPOOL" verify "$DIR/extra.pool"
# The same pool not closed cleanly, with five such pages (26..30): a
# crash's bound would let recovery give them back, but verify allows only
# what a clean close leaves plus what one writer's crash can (nvtree: 4).
cp "$DIR/extra.pool" "$DIR/extra-crashed.pool" && patch "$DIR/extra-crashed.pool" 2176 '\000'
for pg in 26 27 28 29; do
  [ "$(word "$V" $pg)" = 0 ] || fail "page $pg used"
  dd if="$V" of="$DIR/extra-crashed.pool" bs=8 skip=$((4096 / 8)) seek=$(((4096 + 8 * pg) / 8)) \
    count=1 conv=notrunc status=none
done
expect_refused "$DIR/extra-crashed.pool" "would reclaim.*not closed cleanly" \
  "$PMPOOL" verify "$DIR/extra-crashed.pool"
# salvage: every entry, the source unchanged (bytes and mtime).
for src in extra extra-crashed; do
  before=$(state "$DIR/$src.pool")
  expect_ok "$PMPOOL" salvage "$DIR/$src.pool" "$DIR/$src.salvaged"
  grep -q "copied $NKEYS entries" "$DIR/out" || fail "salvage of $src: $(cat "$DIR/out")"
  grep -q "unreachable: [1-9][0-9]* allocated unit" "$DIR/out" ||
    fail "salvage of $src does not report the unreachable page: $(cat "$DIR/out")"
  [ "$(state "$DIR/$src.pool")" = "$before" ] || fail "salvage changed its source $src.pool"
  "$PMPOOL" scan "$DIR/$src.salvaged" | cmp -s - "$DIR/v.scan" ||
    fail "salvage of $src: the new pool's entries differ"
done
"$PMPOOL" info "$DIR/extra.salvaged" >"$DIR/out"
grep -q "kind: *$KIND" "$DIR/out" || fail "salvage made another kind: $(cat "$DIR/out")"
# A good pool salvages to the same entries; the new pool verifies.
before=$(state "$V")
expect_ok "$PMPOOL" salvage "$V" "$DIR/v.salvaged"
[ "$(state "$V")" = "$before" ] || fail "salvage changed its source"
grep -q "copied $NKEYS entries" "$DIR/out" || fail "salvage of a good pool: $(cat "$DIR/out")"
"$PMPOOL" scan "$DIR/v.salvaged" | cmp -s - "$DIR/v.scan" || fail "salvage: entries differ"
expect_ok "$PMPOOL" verify "$DIR/v.salvaged"
# Refusals: DST exists (left as it was), a missing or non-regular SRC (no
# DST made), a bad --fill (exit 2).
expect_refused "$DIR/v.salvaged" "already exists" "$PMPOOL" salvage "$V" "$DIR/v.salvaged"
expect_refused "$V" "already exists" "$PMPOOL" salvage "$V" "$V"
expect_refused "$DIR/new.pool" "not found" "$PMPOOL" salvage "$DIR/missing" "$DIR/new.pool"
expect_refused "$DIR/new.pool" "a FIFO" "$PMPOOL" salvage "$DIR/fifo" "$DIR/new.pool"
expect_refused "$DIR/new.pool" "checksum" "$PMPOOL" salvage "$DIR/sum.pool" "$DIR/new.pool"
expect_usage "$DIR/new.pool" "--fill" "$PMPOOL" salvage "$V" "$DIR/new.pool" --fill 0
expect_usage "$DIR/new.pool" "DST" "$PMPOOL" salvage "$V"
# Leaf-list trees: a zeroed 4 KiB page in the middle of the leaves cuts the
# list; verify refuses (before this, a crashed lbtree/fptree/wbtree pool
# passed with the rest; now their hints, which name leaves past the cut,
# or the allocator's bound refuse it; nvtree refuses the zeroed LN itself), salvage
# copies the part still reachable and leaves the source unchanged.
case $KIND in
  lbtree | fptree | wbtree | nvtree)
    cp "$V" "$DIR/cut.pool"
    dd if=/dev/zero of="$DIR/cut.pool" bs=4096 seek=$(((262144 + 3 * 262144) / 4096 + 10)) \
      count=1 conv=notrunc status=none
    patch "$DIR/cut.pool" 2176 '\000'
    expect_refused "$DIR/cut.pool" "would reclaim\|bad header\|hinted leaves" "$PMPOOL" verify "$DIR/cut.pool"
    before=$(state "$DIR/cut.pool")
    expect_ok "$PMPOOL" salvage "$DIR/cut.pool" "$DIR/cut.salvaged"
    [ "$(state "$DIR/cut.pool")" = "$before" ] || fail "salvage changed the cut pool"
    n=$(sed -n 's/.*copied \([0-9]*\) entries.*/\1/p' "$DIR/out")
    [ -n "$n" ] && [ "$n" -gt 0 ] && [ "$n" -lt $NKEYS ] || fail "salvage of a cut list: $(cat "$DIR/out")"
    "$PMPOOL" scan "$DIR/cut.salvaged" | cmp -s - "$DIR/v.scan" && fail "the cut pool lost nothing"
    # What it copied is a part of the original, unchanged.
    "$PMPOOL" scan "$DIR/cut.salvaged" | sort >"$DIR/cut.scan"
    sort "$DIR/v.scan" | comm -23 "$DIR/cut.scan" - | grep -q . && fail "salvage invented entries"
    expect_ok "$PMPOOL" verify "$DIR/cut.salvaged"
    ;;
esac

# cddstree: salvage of a pool with a zeroed 4 KiB page (four 1 KiB nodes)
# or a zeroed 256 KiB page, clean or not closed cleanly, never
# crashes: it copies what is reachable past the damage and says how much
# it could not copy (clean: against the count the close recorded), or
# refuses with one line (the root itself was zeroed); the source is
# unchanged either way.
case $KIND in
  cddstree)
    for dmg in 4k:4096:$(((262144 + 2 * 262144) / 4096 + 10)) 256k:262144:2; do
      name=${dmg%%:*} rest=${dmg#*:}
      for st in clean crashed; do
        Z="$DIR/zero-$name-$st.pool"
        cp "$V" "$Z"
        dd if=/dev/zero of="$Z" bs=${rest%%:*} seek=${rest#*:} count=1 conv=notrunc status=none
        [ "$st" = crashed ] && patch "$Z" 2176 '\000'
        before=$(state "$Z")
        timeout 60 "$PMPOOL" salvage "$Z" "$Z.salvaged" >"$DIR/out" 2>"$DIR/err"
        rc=$?
        [ "$(state "$Z")" = "$before" ] || fail "salvage changed $Z"
        if [ "$rc" -eq 0 ]; then
          n=$(sed -n 's/.*copied \([0-9]*\) entries.*/\1/p' "$DIR/out")
          [ -n "$n" ] && [ "$n" -lt $NKEYS ] || fail "salvage of $Z: $(cat "$DIR/out")"
          if [ "$st" = clean ]; then
            grep -q "^  recorded: *$NKEYS entries.* $((NKEYS - n)) could not be copied" "$DIR/out" ||
              fail "salvage of $Z does not say what it could not copy: $(cat "$DIR/out")"
          fi
          "$PMPOOL" scan "$Z.salvaged" | sort >"$DIR/z.scan"
          sort "$DIR/v.scan" | comm -23 "$DIR/z.scan" - | grep -q . &&
            fail "salvage of $Z invented entries"
        elif [ "$rc" -eq 1 ]; then
          [ "$(wc -l <"$DIR/err")" -eq 1 ] || fail "salvage of $Z: $(cat "$DIR/err")"
          [ -e "$Z.salvaged" ] && fail "a refused salvage of $Z left $Z.salvaged"
        else
          fail "salvage of $Z: exit status $rc: $(cat "$DIR/err")"
        fi
      done
    done
    ;;
esac

# A pool locked by another process (flock(1) takes the same lock).
if command -v flock >/dev/null 2>&1; then
  flock "$P" sleep 3 &
  sleep 0.5
  expect_refused "$P" "open in another process" "$PMPOOL" verify "$P"
  expect_refused "$P" "open in another process" "$PMPOOL" salvage "$P" "$DIR/locked.salvaged"
  kill $! 2>/dev/null
  wait 2>/dev/null
fi

# ---------------------------------------------------------------------------
# get / put / del / scan / load: the index through the user API (Db). These
# open the pool, so their failures are checked against an absent file
# ($NOFILE) and the pool's clean flag instead of its mtime; refusals before
# the open (bad numbers, malformed load input) leave it wholly unchanged.
NOFILE="$DIR/no-such-file"
MAX=18446744073709551615
is_clean() { "$PMPOOL" info "$1" | grep -q "clean: *yes" || fail "$2: $1 was left unclean"; }

K="$DIR/kv.pool"
expect_ok "$PMPOOL" create "$K" --kind "$KIND" --size 8M --max-size 1G
expect_ok "$PMPOOL" put "$K" 5 50
expect_ok "$PMPOOL" put "$K" 0 0
expect_ok "$PMPOOL" put "$K" "$MAX" "$MAX"
expect_ok "$PMPOOL" put "$K" 0x10 0XfF
expect_out "" "put"
is_clean "$K" put
# Every value across a reopen (each command is a process of its own).
expect_ok "$PMPOOL" get "$K" 5 0 "$MAX" 16
expect_out "5 50
0 0
$MAX $MAX
16 255" "get"
expect_ok "$PMPOOL" get --hex "$K" 16 "$MAX" 0
expect_out "0x10 0xff
0xffffffffffffffff 0xffffffffffffffff
0x0 0x0" "get --hex"
# put replaces; --no-overwrite refuses a present key and changes nothing.
expect_ok "$PMPOOL" put "$K" 5 51
expect_refused "$NOFILE" "key 5: already exists" "$PMPOOL" put "$K" 5 52 --no-overwrite
is_clean "$K" "put --no-overwrite"
expect_ok "$PMPOOL" put "$K" 6 60 --no-overwrite
expect_ok "$PMPOOL" get "$K" 5 6
expect_out "5 51
6 60" "put over a present key"
# get: an absent key is one line and exit 1; the others still print.
expect_refused "$NOFILE" "key 7: not found" "$PMPOOL" get "$K" 5 7
expect_out "5 51" "get with an absent key"
is_clean "$K" "get of an absent key"
# del: an absent key is one line and exit 1, the others are still removed;
# --ignore-missing accepts it.
expect_ok "$PMPOOL" del "$K" 6
expect_refused "$NOFILE" "key 6: not found" "$PMPOOL" get "$K" 6
expect_refused "$NOFILE" "key 6: not found" "$PMPOOL" del "$K" 6
expect_ok "$PMPOOL" del --ignore-missing "$K" 6
expect_refused "$NOFILE" "key 77: not found" "$PMPOOL" del "$K" 77 0
expect_refused "$NOFILE" "key 0: not found" "$PMPOOL" get "$K" 0
is_clean "$K" "del of an absent key"
expect_ok "$PMPOOL" scan "$K"
expect_out "5 51
16 255
$MAX $MAX" "scan after put and del"
expect_ok "$PMPOOL" verify "$K"
grep -q " 3 entries" "$DIR/out" || fail "verify after put/del: $(cat "$DIR/out")"

# Bad numbers: exit 2 before the pool is opened (bytes and mtime unchanged).
for bad in 18446744073709551616 0x10000000000000000 99999999999999999999 12x 0x 0xg +5 \
  1e3 0b1 " 5" "5 " "" 1.5; do
  expect_usage "$K" "bad key" "$PMPOOL" get "$K" "$bad"
  expect_usage "$K" "bad key" "$PMPOOL" del "$K" 1 "$bad"
  expect_usage "$K" "bad key" "$PMPOOL" put "$K" "$bad" 1
  expect_usage "$K" "bad value" "$PMPOOL" put "$K" 1 "$bad"
  expect_usage "$K" "bad --from" "$PMPOOL" scan "$K" --from "$bad"
  expect_usage "$K" "bad --limit" "$PMPOOL" scan "$K" --limit "$bad"
done
expect_usage "$K" "" "$PMPOOL" get "$K" -1
expect_usage "$K" "" "$PMPOOL" put "$K" 1 -1
expect_usage "$K" "KEY" "$PMPOOL" get "$K"
expect_usage "$K" "VALUE" "$PMPOOL" put "$K" 1
expect_usage "$K" "above --to" "$PMPOOL" scan "$K" --from 10 --to 9

# scan: ascending, [from, to), --limit; load from a file.
S="$DIR/scan.pool"
expect_ok "$PMPOOL" create "$S" --kind "$KIND" --size 8M --max-size 1G
{ echo "# keys 0, 3, ..., 300 and the largest key"; seq 300 -3 0 | awk '{ print $1, 2 * $1 }'
  echo "$MAX 7"; } >"$DIR/scan.txt"
expect_ok "$PMPOOL" load "$S" "$DIR/scan.txt"
expect_out "$S: loaded 102 pairs (102 inserted, 0 replaced)" "load"
is_clean "$S" load
{ seq 0 3 300 | awk '{ print $1, 2 * $1 }'; echo "$MAX 7"; } >"$DIR/scan.want"
expect_ok "$PMPOOL" scan "$S"
cmp -s "$DIR/out" "$DIR/scan.want" || fail "scan of the loaded pool differs from its input"
expect_ok "$PMPOOL" scan "$S" --from 10 --to 31
expect_out "12 24
15 30
18 36
21 42
24 48
27 54
30 60" "scan --from 10 --to 31"
expect_ok "$PMPOOL" scan "$S" --from 9 --to 12
expect_out "9 18" "scan [9, 12)"
expect_ok "$PMPOOL" scan "$S" --limit 3
expect_out "0 0
3 6
6 12" "scan --limit 3"
expect_ok "$PMPOOL" scan "$S" --from 299 --limit 5
expect_out "300 600
$MAX 7" "scan --from 299 --limit 5"
for empty in "--limit 0" "--from 10 --to 10" "--to 0" "--from 301 --to $MAX"; do
  expect_ok "$PMPOOL" scan "$S" $empty
  expect_out "" "scan $empty"
done
expect_ok "$PMPOOL" scan "$S" --from "$MAX"
expect_out "$MAX 7" "scan --from MAX"
expect_ok "$PMPOOL" scan "$S" --hex --from 0xfffffffffffffffe
expect_out "0xffffffffffffffff 0x7" "scan --hex"
# A reader that stops early, and a stdout that fails: the pool is closed
# cleanly either way (a closed pipe ends the scan quietly; /dev/full is
# one line and exit 1).
seq 1 40000 | awk '{ print $1, $1 }' | "$PMPOOL" load "$S" >/dev/null 2>&1 || fail "load of 40000 pairs"
"$PMPOOL" scan "$S" 2>"$DIR/err" | head -n 1 >/dev/null
[ -s "$DIR/err" ] && fail "scan into a closed pipe printed: $(cat "$DIR/err")"
is_clean "$S" "scan into a closed pipe"
if [ -w /dev/full ]; then
  expect_refused "$NOFILE" "cannot write to stdout" sh -c '"$1" scan "$2" >/dev/full' sh "$PMPOOL" "$S"
  is_clean "$S" "scan to /dev/full"
fi

# load from stdin: blank lines, comments, tabs, CRLF, hex; a key given twice
# ends with its last value.
L="$DIR/load.pool"
expect_ok "$PMPOOL" create "$L" --kind "$KIND" --size 8M --max-size 1G
printf '# a header\n\n  1 10\n2\t20   # trailing comment\n0x3 0x1E\r\n1 11\n   \n#\n' >"$DIR/in.txt"
expect_ok sh -c '"$1" load "$2" <"$3"' sh "$PMPOOL" "$L" "$DIR/in.txt"
expect_out "$L: loaded 4 pairs (3 inserted, 1 replaced)" "load from stdin"
printf '4 40\n1 12\n' | "$PMPOOL" load "$L" - >"$DIR/out" 2>"$DIR/err" || fail "load - : $(cat "$DIR/err")"
expect_out "$L: loaded 2 pairs (1 inserted, 1 replaced)" "load -"
expect_ok "$PMPOOL" scan "$L"
expect_out "1 12
2 20
3 30
4 40" "scan after load"
# An input FIFO is fine (only the pool must be a regular file).
mkfifo "$DIR/in.fifo"
printf '5 50\n' >"$DIR/in.fifo" &
expect_ok timeout 20 "$PMPOOL" load "$L" "$DIR/in.fifo"
wait
expect_out "$L: loaded 1 pair (1 inserted, 0 replaced)" "load from a FIFO"
# Empty input: nothing to do, but the pool is still checked.
expect_ok "$PMPOOL" load "$L" /dev/null
expect_out "$L: loaded 0 pairs (0 inserted, 0 replaced)" "load of nothing"
# --no-overwrite: a present key fails before anything is written; a key
# given twice in the input is refused before the pool is opened.
"$PMPOOL" scan "$L" >"$DIR/before.txt"
printf '100 1\n2 21\n' >"$DIR/dup.txt"
expect_refused "$NOFILE" "key 2 (.*dup.txt:2) already exists" "$PMPOOL" load --no-overwrite "$L" "$DIR/dup.txt"
"$PMPOOL" scan "$L" | cmp -s - "$DIR/before.txt" || fail "a refused load --no-overwrite wrote"
is_clean "$L" "load --no-overwrite"
printf '100 1\n101 1\n100 2\n' >"$DIR/dup.txt"
expect_usage "$L" "dup.txt:3: key 100 repeats line 1" "$PMPOOL" load --no-overwrite "$L" "$DIR/dup.txt"
printf '100 1\n101 1\n' >"$DIR/new.txt"
expect_ok "$PMPOOL" load --no-overwrite "$L" "$DIR/new.txt"
expect_out "$L: loaded 2 pairs (2 inserted, 0 replaced)" "load --no-overwrite"

# Malformed load input: exit 2 naming the line, before the pool is opened:
# the pool stays byte-identical (and its mtime too).
cp "$L" "$DIR/load.copy"
check_malformed() { # PATTERN CONTENT
  printf "$2" >"$DIR/bad.txt"
  expect_usage "$L" "$1" "$PMPOOL" load "$L" "$DIR/bad.txt"
  printf "$2" >"$DIR/bad.txt"
  expect_usage "$L" "stdin:" sh -c '"$1" load "$2" <"$3"' sh "$PMPOOL" "$L" "$DIR/bad.txt"
}
check_malformed "bad.txt:3: a key without a value" '1 1\n2 2\n3\n4 4\n'
check_malformed "bad.txt:2: 3 fields" '1 1\n1 2 3\n'
check_malformed "bad.txt:4: bad value '-2'" '1 1\n\n# x\n1 -2\n'
check_malformed "bad.txt:1: bad key 'x'" 'x 1\n'
check_malformed "bad.txt:2: bad key '18446744073709551616'" '1 1\n18446744073709551616 1\n'
check_malformed "bad.txt:1: bad value '2x'" '1 2x\n'
check_malformed "bad.txt:1: bad value '0x'" '1 0x\n'
check_malformed "bad.txt:2: bad key '1,'" '1 1\n1, 2\n'
cmp -s "$L" "$DIR/load.copy" || fail "a malformed load changed the pool"
expect_refused "$L" "No such file" "$PMPOOL" load "$L" "$DIR/no-such-input"
expect_refused "$L" "directory" "$PMPOOL" load "$L" "$DIR"
cmp -s "$L" "$DIR/load.copy" || fail "a load of an unreadable input changed the pool"
expect_ok "$PMPOOL" verify "$L"
grep -q " 7 entries" "$DIR/out" || fail "verify after load: $(cat "$DIR/out")"

# A pool too small for the input: out of space, one line naming how much
# was written; the pool is closed cleanly and still verifies. Upserts
# (descending keys) write a part; a bulk load (ascending keys into the empty
# index) writes nothing.
T="$DIR/tiny.pool"
expect_ok "$PMPOOL" create "$T" --kind "$KIND" --size 4M --max-size 4M
seq 400000 -1 1 | awk '{ print $1 * 7, $1 }' >"$DIR/big.txt"
expect_refused "$NOFILE" "key .*: out of space.* [1-9][0-9]* of 400000 pairs written" "$PMPOOL" load "$T" "$DIR/big.txt"
is_clean "$T" "load out of space"
expect_ok "$PMPOOL" verify "$T"
T2="$DIR/tiny2.pool"
expect_ok "$PMPOOL" create "$T2" --kind "$KIND" --size 4M --max-size 4M
seq 1 400000 | awk '{ print $1 * 7, $1 }' >"$DIR/big-sorted.txt"
expect_refused "$NOFILE" "bulk load into the empty index: out of space.*; 0 of 400000 pairs written" \
  "$PMPOOL" load "$T2" "$DIR/big-sorted.txt"
is_clean "$T2" "bulk load out of space"
expect_ok "$PMPOOL" verify "$T2"
grep -q " 0 entries" "$DIR/out" || fail "a failed bulk load left entries: $(cat "$DIR/out")"

# SIGINT (Ctrl-C) or SIGTERM in the middle of a long load: it stops after
# the pair it is writing, closes the pool cleanly, names how many pairs it
# wrote and exits 128 + the signal; those pairs are exactly the input's
# first N (descending keys: upserts in input order).
NINT=300000
seq $NINT -1 1 | awk '{ print $1 * 3, $1 }' >"$DIR/int.txt"
for sig in INT TERM; do
  I="$DIR/int-$sig.pool"
  expect_ok "$PMPOOL" create "$I" --kind "$KIND" --size 4M --max-size 1G
  "$PMPOOL" load "$I" "$DIR/int.txt" >"$DIR/out" 2>"$DIR/err" &
  pid=$!
  # Signal it once the pool has grown into its first added segment: pairs
  # have been written then, and most of the input (which needs several
  # times 4 MiB) is still to come.
  tries=0
  while [ ! -e "$I.1" ] && [ $tries -lt 6000 ] && kill -0 $pid 2>/dev/null; do
    sleep 0.01
    tries=$((tries + 1))
  done
  kill -$sig $pid
  wait $pid
  rc=$?
  want=130
  [ $sig = TERM ] && want=143
  [ "$rc" -eq $want ] || fail "load stopped by SIG$sig: exit status $rc, expected $want ($(cat "$DIR/err"))"
  [ "$(wc -l <"$DIR/err")" -eq 1 ] || fail "load stopped by SIG$sig: stderr: $(cat "$DIR/err")"
  grep -q "^pmpool: $I: interrupted by SIG$sig after [0-9]* of $NINT pairs .*closed cleanly$" "$DIR/err" ||
    fail "load stopped by SIG$sig: stderr: $(cat "$DIR/err")"
  [ -s "$DIR/out" ] && fail "load stopped by SIG$sig printed on stdout: $(cat "$DIR/out")"
  n=$(sed -n 's/.* after \([0-9]*\) of .*/\1/p' "$DIR/err")
  [ -n "$n" ] && [ "$n" -gt 0 ] && [ "$n" -lt $NINT ] ||
    fail "load stopped by SIG$sig not in the middle: $(cat "$DIR/err")"
  is_clean "$I" "load stopped by SIG$sig"
  "$PMPOOL" scan "$I" >"$DIR/int.scan" || fail "scan after SIG$sig"
  head -n "${n:-0}" "$DIR/int.txt" | sort -n | cmp -s - "$DIR/int.scan" ||
    fail "after SIG$sig the pool does not hold exactly the first $n pairs"
  expect_ok "$PMPOOL" verify "$I"
  grep -q " $n entries" "$DIR/out" || fail "verify after SIG$sig: $(cat "$DIR/out")"
done

# Bad pools: refused by get/put/del/scan/load with one line, exit 1, no
# byte changed (the refusals come before any write).
printf '1 1\n' >"$DIR/one.txt"
for f in missing text empty random trunc.pool sum.pool ver.pool flag.pool fifo dir.pool root.pool; do
  F="$DIR/$f"
  case $f in
    missing) pat="not found" ;; fifo) pat="a FIFO" ;; dir.pool) pat="a directory" ;;
    root.pool) pat="root slot 0" ;; *) pat="" ;;
  esac
  expect_refused "$F" "$pat" "$PMPOOL" get "$F" 1
  expect_refused "$F" "$pat" "$PMPOOL" put "$F" 1 1
  expect_refused "$F" "$pat" "$PMPOOL" del "$F" 1
  expect_refused "$F" "$pat" "$PMPOOL" scan "$F"
  expect_refused "$F" "$pat" "$PMPOOL" load "$F" "$DIR/one.txt"
done
expect_refused /dev/null "a character device" "$PMPOOL" put /dev/null 1 1
[ ! -e "$DIR/missing" ] || fail "a command on a missing pool created it"
if command -v flock >/dev/null 2>&1; then
  flock "$K" sleep 3 &
  sleep 0.5
  expect_refused "$K" "open in another process" "$PMPOOL" put "$K" 1 1
  expect_refused "$K" "open in another process" "$PMPOOL" scan "$K"
  kill $! 2>/dev/null
  wait 2>/dev/null
fi

if [ "$FAILURES" -ne 0 ]; then
  echo "$FAILURES failure(s)" >&2
  exit 1
fi
echo "pmpool CLI: all checks passed"
