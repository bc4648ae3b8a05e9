// A driver for cosmoss-jigu/pactree (PACTree, SOSP 2021), whose own
// main.cpp generates its keys. Written for pmindex's scripts/peers (no
// PACTree code): scripts/peers/pactree.sh compiles it with their library
// sources and drives their API class `pactree` (include/pactree.h) as
// shipped, on one NUMA node (`pactree(1)`), with its worker (search-layer
// updater) and combiner threads running.
// Command language and output: driver_util.h. `pool DIR MB` comes first:
// DIR is a new directory (it must not exist) that takes the six PMDK pool
// files their initPT creates under /mnt/pmem0 and /mnt/pmem1 (pactree.sh
// rewrites those paths in its copy of pactree.cpp to calls of
// pmindex_peer_path below); MB is ignored (their pool sizes are fixed, 1
// GiB each). `load` inserts the keys one by one in file order (PACTree
// has no bulk load). Values are the keys (their lookup returns 0 for "not
// found", so keys must be non-zero). `scan N KEYFILE L` runs N scans of
// L pairs from each key (their `scan(start, L, values)`); ok counts the
// scans that returned at least L values. In the counting build
// (-DPMINDEX_PEER_COUNT, see pactree.sh), run with scripts/peers/shim's
// libpmem counter preloaded, every phase also prints
// "lines_flushed <n> fences <n>" (their background threads' write-backs
// during the phase included).
#include <sys/stat.h>

#include <string>

#include "driver_util.h"
#include "pactree.h"

static std::string g_pool_dir;

#ifdef PMINDEX_PEER_COUNT
unsigned long long pmindex_peer_lines = 0, pmindex_peer_fences = 0;
#endif

// Called by their initPT (as rewritten by pactree.sh) for each pool file:
// "0dl", "0sl", "0log", "1dl", "1sl", "1log".
const char* pmindex_peer_path(const char* name) {
  static std::string paths[8];
  static int used = 0;
  if (used == 8) peers::Die("too many pool paths asked for:", name);
  paths[used] = g_pool_dir + "/" + name;
  return paths[used++].c_str();
}

int main(int argc, char** argv) {
  pactree* tree = nullptr;
  for (int i = 1; i < argc;) {
    const std::string cmd = argv[i];
    if (cmd == "pool") {
      if (i + 2 >= argc) peers::Die("usage:", "pool DIR MB");
      if (tree != nullptr) peers::Die("pool given twice", argv[i + 1]);
      struct stat st;
      if (stat(argv[i + 1], &st) == 0)
        peers::Die("pool directory exists (PACTree would recover its pools):", argv[i + 1]);
      if (mkdir(argv[i + 1], 0755) != 0) peers::Die("cannot create pool directory", argv[i + 1]);
      g_pool_dir = argv[i + 1];
      tree = new pactree(1);
      tree->registerThread();
      i += 3;
    } else if (cmd == "load" || cmd == "insert" || cmd == "lookup" || cmd == "del" ||
               cmd == "scan") {
      if (tree == nullptr) peers::Die("no pool given before", cmd.c_str());
      const int args = cmd == "scan" ? 3 : 2;
      if (i + args >= argc) peers::Die("usage:", (cmd + " N KEYFILE [LEN]").c_str());
      const long long n = atoll(argv[i + 1]);
      const int len = cmd == "scan" ? atoi(argv[i + 3]) : 0;
      std::vector<uint64_t> keys = peers::ReadKeys(argv[i + 2], n);
      std::vector<Val_t> values;
      values.reserve(static_cast<size_t>(len) + 128);
      long long ok = 0;
      unsigned long long lines0 = 0, fences0 = 0, lines1 = 0, fences1 = 0;
      const bool counting = peers::AllCounts(&lines0, &fences0);
      const long long c0 = peers::CpuNs();
      const long long t0 = peers::NowNs();
      if (cmd == "load" || cmd == "insert") {
        for (long long j = 0; j < n; ++j) ok += tree->insert(keys[j], keys[j]);
      } else if (cmd == "lookup") {
        for (long long j = 0; j < n; ++j) ok += tree->lookup(keys[j]) == keys[j];
      } else if (cmd == "del") {
        for (long long j = 0; j < n; ++j) ok += tree->remove(keys[j]) != 0;
      } else {
        for (long long j = 0; j < n; ++j)
          ok += tree->scan(keys[j], len, values) >= static_cast<uint64_t>(len);
      }
      const long long t1 = peers::NowNs();
      const long long c1 = peers::CpuNs();
      peers::Report(cmd.c_str(), n, argv[i + 2], t1 - t0, ok, c1 - c0);
      if (counting && peers::AllCounts(&lines1, &fences1))
        printf("lines_flushed %llu fences %llu\n", lines1 - lines0, fences1 - fences0);
      i += args + 1;
    } else {
      peers::Die("unknown command", argv[i]);
    }
  }
  // Their background threads never stop on their own; the process exit
  // ends them (no clean shutdown of the pools is measured).
  fflush(stdout);
  _exit(0);
}
