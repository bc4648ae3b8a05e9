// A driver for ROART (public repository madsys-dev/ROART: ART/ the tree,
// nvm_mgr/ its DCMM allocator), whose own benchmark (perf/main.cpp,
// benchmark/coordinator.h) generates its keys and runs timed mixes.
// Written for pmindex's scripts/peers (no ROART code):
// scripts/peers/roart.sh compiles it with their ART/ and nvm_mgr/ sources
// and drives PART_ns::Tree as shipped.
//
// Command language and output: driver_util.h, plus
//   pool PREFIX      ROART's PM file is PREFIX.part.data (their nvm_dir,
//                    made a variable by roart.sh's one edit); it must not
//                    exist (their constructor would recover it) and is
//                    removed at exit.
//   scan M KEYFILE L M range scans of L pairs from each key (their
//                    lookupRange up to the largest key), ok = scans that
//                    returned L pairs.
// Keys are 8-byte big-endian strings (ROART's keys are byte strings; the
// big-endian form keeps the integer order, so scans are ordered as
// pmindex's), values 8 bytes (the key). `load` inserts the keys one by one
// in file order (ROART has no bulk load). In the counting build
// (-DPMINDEX_PEER_COUNT, see roart.sh), run with scripts/peers/shim's
// libpmem counter preloaded, every phase also prints
// "lines_flushed <n> fences <n>": ROART's own write-backs and fences plus
// libpmemobj's.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>

#include "Tree.h"
#include "driver_util.h"

const char* nvm_dir = nullptr;  // declared extern by roart.sh's copy of their config.h

#ifdef PMINDEX_PEER_COUNT
unsigned long long pmindex_peer_lines = 0, pmindex_peer_fences = 0;
#endif

namespace {

void BigEndian(uint64_t k, unsigned char* out) {
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<unsigned char>(k & 0xff);
    k >>= 8;
  }
}

}  // namespace

int main(int argc, char** argv) {
  PART_ns::Tree* tree = nullptr;
  std::string file;
  PART_ns::Key* k = new PART_ns::Key();
  PART_ns::Key* maxkey = new PART_ns::Key();
  unsigned char maxbytes[8];
  memset(maxbytes, 0xff, sizeof maxbytes);
  uint64_t maxval = ~0ull;
  maxkey->Init(reinterpret_cast<char*>(maxbytes), 8, reinterpret_cast<char*>(&maxval), 8);
  std::vector<PART_ns::Leaf*> found(1024);
  for (int i = 1; i < argc;) {
    const std::string cmd = argv[i];
    if (cmd == "pool") {
      if (i + 1 >= argc) peers::Die("usage:", "pool PREFIX");
      if (tree != nullptr) peers::Die("pool given twice", argv[i + 1]);
      const std::string prefix = std::string(argv[i + 1]) + ".";
      file = prefix + "part.data";
      if (access(file.c_str(), F_OK) == 0)
        peers::Die("PM file exists (ROART would recover it):", file.c_str());
      nvm_dir = strdup(prefix.c_str());
      tree = new PART_ns::Tree();
      i += 2;
    } else if (cmd == "load" || cmd == "insert" || cmd == "lookup" || cmd == "del" ||
               cmd == "scan") {
      if (tree == nullptr) peers::Die("no pool given before", cmd.c_str());
      const int args = cmd == "scan" ? 3 : 2;
      if (i + args >= argc) peers::Die("usage:", (cmd + " N KEYFILE [LEN]").c_str());
      const long long n = atoll(argv[i + 1]);
      const size_t len = cmd == "scan" ? static_cast<size_t>(atoll(argv[i + 3])) : 0;
      if (len > found.size()) peers::Die("scan length above 1024:", argv[i + 3]);
      std::vector<uint64_t> keys = peers::ReadKeys(argv[i + 2], n);
      long long ok = 0;
      unsigned char kb[8];
      uint64_t val = 0;
      unsigned long long lines0 = 0, fences0 = 0, lines1 = 0, fences1 = 0;
      const bool counting = peers::AllCounts(&lines0, &fences0);
      const long long c0 = peers::CpuNs();
      const long long t0 = peers::NowNs();
      for (long long j = 0; j < n; ++j) {
        BigEndian(keys[j], kb);
        val = keys[j];
        k->Init(reinterpret_cast<char*>(kb), 8, reinterpret_cast<char*>(&val), 8);
        if (cmd == "load" || cmd == "insert") {
          ok += tree->insert(k) == PART_ns::Tree::OperationResults::Success;
        } else if (cmd == "lookup") {
          PART_ns::Leaf* l = tree->lookup(k);
          ok += l != nullptr && memcmp(l->GetValue(), &keys[j], 8) == 0;
        } else if (cmd == "del") {
          ok += tree->remove(k) == PART_ns::Tree::OperationResults::Success;
        } else {
          size_t got = 0;
          tree->lookupRange(k, maxkey, nullptr, found.data(), len, got);
          ok += got == len;
        }
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
  // No destructor call (their ~Tree and the allocator's teardown are not
  // what is measured); the PM file is removed.
  if (!file.empty()) unlink(file.c_str());
  return 0;
}
