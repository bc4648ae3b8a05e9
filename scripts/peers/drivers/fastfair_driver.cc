// A driver for DICL FAST_FAIR's single-threaded B+-tree (public repository
// DICL/FAST_FAIR, single/src/btree.h), whose own test program reads text
// keys and times only inserts and searches of the same keys. Written for
// pmindex's scripts/peers (no FAST_FAIR code): scripts/peers/fastfair.sh
// compiles it with -include of their btree.h (a build-time copy, see
// there). Command language and output: driver_util.h. Nodes are their
// `new page` in DRAM (their single/ variant has no PM mapping; it persists
// with cache-line flushes, made clwb by fastfair.sh). `load` inserts the
// keys one by one in file order (FAST_FAIR has no bulk load). Values are
// the keys (btree_search returns the value, NULL for "not found", so keys
// must be non-zero). Extra output per phase: "lines_flushed <n>" (their
// clflush_cnt counter, non-zero only in the counting build).
#include "driver_util.h"

int main(int argc, char** argv) {
  btree* bt = new btree();
  for (int i = 1; i < argc;) {
    const std::string cmd = argv[i];
    if (cmd == "load" || cmd == "insert" || cmd == "lookup" || cmd == "del") {
      if (i + 2 >= argc) peers::Die("usage:", (cmd + " N KEYFILE").c_str());
      const long long n = atoll(argv[i + 1]);
      std::vector<uint64_t> keys = peers::ReadKeys(argv[i + 2], n);
      long long ok = 0;
      const int flushed0 = clflush_cnt;
      const long long c0 = peers::CpuNs();
      const long long t0 = peers::NowNs();
      if (cmd == "load" || cmd == "insert") {
        for (long long j = 0; j < n; ++j) bt->btree_insert((entry_key_t)keys[j], (char*)keys[j]);
        ok = n;  // btree_insert returns nothing
      } else if (cmd == "lookup") {
        for (long long j = 0; j < n; ++j) ok += bt->btree_search((entry_key_t)keys[j]) == (char*)keys[j];
      } else {
        for (long long j = 0; j < n; ++j) bt->btree_delete((entry_key_t)keys[j]);
        ok = n;  // btree_delete returns nothing
      }
      const long long t1 = peers::NowNs();
      const long long c1 = peers::CpuNs();
      peers::Report(cmd.c_str(), n, argv[i + 2], t1 - t0, ok, c1 - c0);
      printf("lines_flushed %d\n", clflush_cnt - flushed0);
      i += 3;
    } else {
      peers::Die("unknown command", argv[i]);
    }
  }
  return 0;
}
