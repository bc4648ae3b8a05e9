// A driver for the sfu-dis FPTree (public repository sfu-dis/FPTree), which
// ships only a PiBench wrapper (fetched from the network by its CMake) and
// an interactive test. Written for pmindex's scripts/peers (no FPTree
// code): it calls FPTree's public API (fptree.h) on keys read from raw
// key files; scripts/peers/fptree.sh compiles it together with their
// fptree.cpp. Command language and output: driver_util.h, plus
//   pool FILE MB   create the libpmemobj pool (FPtree::pmemInit); FILE must not exist
//   fill           print the leaves' average occupancy ("leaf fill <f> (<keys>/<leaves*64>)")
// Run with LD_PRELOAD=libpmemcount.so (shim/pmem_count.c, built by
// fptree.sh) it also prints the lines flushed and fences libpmem was asked
// for in each phase.
// FPTree has no bulk load from keys (its bulkLoad() rebuilds the inner
// nodes from the persistent leaf list at recovery), so `load` inserts the
// keys one by one, in file order; values are the keys (FPTree's find
// returns 0 for "not found", so keys must be non-zero).
#include "fptree.h"
#include "driver_util.h"

int main(int argc, char** argv) {
  FPtree* tree = new FPtree();
  bool pooled = false;
  for (int i = 1; i < argc;) {
    const std::string cmd = argv[i];
    if (cmd == "pool") {
      if (i + 2 >= argc) peers::Die("usage:", "pool FILE MB");
      if (access(argv[i + 1], F_OK) == 0) peers::Die("pool file exists (remove it first):", argv[i + 1]);
      tree->pmemInit(argv[i + 1], atoll(argv[i + 2]) << 20);
      if (pop == nullptr) peers::Die("pmemobj_create failed for", argv[i + 1]);
      pooled = true;
      i += 3;
    } else if (cmd == "fill") {
      TOID(struct List) head = POBJ_ROOT(pop, struct List);
      TOID(struct LeafNode) leaf = D_RO(head)->head;
      unsigned long long leaves = 0, keys = 0;
      while (!TOID_IS_NULL(leaf)) {
        ++leaves;
        keys += __builtin_popcountll(D_RO(leaf)->bitmap.bits);
        leaf = D_RO(leaf)->p_next;
      }
      printf("leaf fill %.4f (%llu keys in %llu leaves of %d slots)\n",
             leaves ? static_cast<double>(keys) / (leaves * MAX_LEAF_SIZE) : 0.0, keys, leaves,
             MAX_LEAF_SIZE);
      i += 1;
    } else if (cmd == "load" || cmd == "insert" || cmd == "lookup" || cmd == "del") {
      if (i + 2 >= argc) peers::Die("usage:", (cmd + " N KEYFILE").c_str());
      if (!pooled) peers::Die("no pool:", "'pool FILE MB' must come first");
      const long long n = atoll(argv[i + 1]);
      std::vector<uint64_t> keys = peers::ReadKeys(argv[i + 2], n);
      long long ok = 0;
      unsigned long long lines0 = 0, fences0 = 0, lines1 = 0, fences1 = 0;
      const bool counting = peers::AllCounts(&lines0, &fences0);
      const long long c0 = peers::CpuNs();
      const long long t0 = peers::NowNs();
      if (cmd == "load" || cmd == "insert") {
        for (long long j = 0; j < n; ++j) ok += tree->insert(KV(keys[j], keys[j]));
      } else if (cmd == "lookup") {
        for (long long j = 0; j < n; ++j) ok += tree->find(keys[j]) == keys[j];
      } else {
        for (long long j = 0; j < n; ++j) ok += tree->deleteKey(keys[j]);
      }
      const long long t1 = peers::NowNs();
      const long long c1 = peers::CpuNs();
      peers::Report(cmd.c_str(), n, argv[i + 2], t1 - t0, ok, c1 - c0);
      if (counting && peers::AllCounts(&lines1, &fences1))
        printf("lines_flushed %llu fences %llu\n", lines1 - lines0, fences1 - fences0);
      i += 3;
    } else {
      peers::Die("unknown command", argv[i]);
    }
  }
  // No close: the pool file is removed by the caller (pmemobj_close would
  // only add time after the last phase).
  return 0;
}
