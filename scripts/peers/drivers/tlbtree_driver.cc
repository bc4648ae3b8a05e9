// A driver for ypluo/TLBtree's single-threaded variant (public repository
// ypluo/TLBtree, Single/), whose own test programs generate their keys and
// time YCSB-style mixes. Written for pmindex's scripts/peers (no TLBtree
// code): scripts/peers/tlbtree.sh compiles it with their
// Single/include/tlbtree.h, whose wrapper class TLBtree (TLBtreeImpl<2,2>:
// two-level subindexes, a top-layer rebuild when an insert walks more than
// two subindex roots, in a background thread) it drives as shipped.
// Command language and output: driver_util.h; the pool is a new PMDK pool
// of MB megabytes at FILE (`pool FILE MB` first; the file must not exist:
// their constructor recovers from an existing one). `load` inserts the
// keys one by one in file order (TLBtree has no bulk load). Values are
// the keys (their lookup returns 0 for "not found", so keys must be
// non-zero). In the counting build (-DPMINDEX_PEER_COUNT, see
// tlbtree.sh) every phase also prints "lines_flushed <n> fences <n>".
#include <string>

#include "driver_util.h"
#include "tlbtree.h"

#ifdef PMINDEX_PEER_COUNT
unsigned long long pmindex_peer_lines = 0, pmindex_peer_fences = 0;
#endif

int main(int argc, char** argv) {
  TLBtree* tree = nullptr;
  for (int i = 1; i < argc;) {
    const std::string cmd = argv[i];
    if (cmd == "pool") {
      if (i + 2 >= argc) peers::Die("usage:", "pool FILE MB");
      if (tree != nullptr) peers::Die("pool given twice", argv[i + 1]);
      if (file_exist(argv[i + 1]))
        peers::Die("pool file exists (TLBtree would recover it):", argv[i + 1]);
      tree = new TLBtree(argv[i + 1], static_cast<uint64_t>(atoll(argv[i + 2])) << 20);
      i += 3;
    } else if (cmd == "load" || cmd == "insert" || cmd == "lookup" || cmd == "del") {
      if (tree == nullptr) peers::Die("no pool given before", cmd.c_str());
      if (i + 2 >= argc) peers::Die("usage:", (cmd + " N KEYFILE").c_str());
      const long long n = atoll(argv[i + 1]);
      std::vector<uint64_t> keys = peers::ReadKeys(argv[i + 2], n);
      long long ok = 0;
#ifdef PMINDEX_PEER_COUNT
      const unsigned long long lines0 = pmindex_peer_lines, fences0 = pmindex_peer_fences;
#endif
      const long long c0 = peers::CpuNs();
      const long long t0 = peers::NowNs();
      if (cmd == "load" || cmd == "insert") {
        for (long long j = 0; j < n; ++j) tree->insert(static_cast<_key_t>(keys[j]), keys[j]);
        ok = n;  // their insert returns nothing
      } else if (cmd == "lookup") {
        for (long long j = 0; j < n; ++j)
          ok += tree->lookup(static_cast<_key_t>(keys[j])) == keys[j];
      } else {
        for (long long j = 0; j < n; ++j) ok += tree->remove(static_cast<_key_t>(keys[j]));
      }
      const long long t1 = peers::NowNs();
      const long long c1 = peers::CpuNs();
      peers::Report(cmd.c_str(), n, argv[i + 2], t1 - t0, ok, c1 - c0);
#ifdef PMINDEX_PEER_COUNT
      printf("lines_flushed %llu fences %llu\n", pmindex_peer_lines - lines0,
             pmindex_peer_fences - fences0);
#endif
      i += 3;
    } else {
      peers::Die("unknown command", argv[i]);
    }
  }
  // No destructor call: their ~TLBtreeImpl saves the top layer's pending
  // entries for a later open, which this benchmark never does, and a
  // background rebuild may still run.
  return 0;
}
