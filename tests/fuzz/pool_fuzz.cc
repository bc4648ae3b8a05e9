// pool_fuzz: damages pool files on purpose and checks that opening them is
// safe (docs/crash-testing.md "Pool fuzzer").
//
// Corpus: for every persistent index kind in the registry, three base pools
// are generated here, deterministically from --seed:
//   clean    N keys inserted, index and pool closed;
//   crashed  N keys inserted and the pool synced, then the files copied while
//            the index is still open (the state a kill -9 leaves: clean = 0,
//            DRAM state lost);
//   grown    enough keys that the pool added segment files PATH.1, PATH.2
//            (small first size and segment size), then closed.
// Each base is damaged by every mutation class (truncation, bit flips in the
// header, the root slots, the page table and the heap, byte overwrites,
// zeroed 4 KiB and 256 KiB pages, zeroed or hole-punched heap ranges up to
// the whole heap, damaged / truncated / removed segment
// files, forged headers with a valid checksum, forged root slots: both copies
// valid, holding a wrong value).
//
// Oracle, per mutant (run in a child process, so a crash or a hang is
// reported as such and the run goes on):
//   refused  Pool::Open or open_index returned an error with a message, and
//            every file is byte for byte as the mutant wrote it;
//   intact   the index opened, verify() passed, stats().entries equals N and
//            every key has its value;
//   FAILED   anything else: a refusal that changed a file, an open that lost
//            or changed a key, a failed verify, a crash (signal), a hang.
//
// Known failures: the (base, class) pairs listed in kKnownFailures below
// fail for every kind by design (docs/crash-testing.md, "The crashed-pool content limit"): a
// damaged key or value of a pool that crashed. They are counted, printed
// with --verbose and marked "k"; any other failure fails the run.
//
// KvStore pools: the same three bases of a key-value store (KvStore) over
// the kinds of --kv-kinds (default lbtree and fptree), through the same
// classes, opened with KvStore::Open (see "KvStore pools" below).
//
// Usage: pool_fuzz [--budget N] [--seed S] [--index KIND] [--keys N]
//                  [--class NAME] [--kv-kinds LIST] [--kv-only]
//                  [--timeout SEC] [--verbose] [--strict] [--no-salvage]
//   --budget   mutants per (index, base, class); default 2 (CI budget)
//   --strict   every failure fails the run, known or not
// Exit status: 0 pass, 1 failures, 2 usage error.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "index/index.h"
#include "index/registry.h"
#include "index/salvage.h"
#include "pm/pool.h"
#include "pm/pool_format.h"
#include "pmindex/kv.h"
#include "support/kinds.h"

namespace pmindex {
namespace {

namespace fs = std::filesystem;

// ------------------------------------------------------------ known failures
// (base, class) pairs whose failures are expected, for every kind. Keep in
// sync with docs/crash-testing.md ("Pool fuzzer", "Known failures").
// A key or a value damaged in a pool that was closed cleanly is refused:
// every kind sums its pairs into the content record (root slot 6) when it
// closes and compares at open. A pool that crashed has no such record (no
// sum is kept as pairs are written: that would cost every insert), so a
// damaged key or value there opens as a different key or value. Structural
// damage (zeroed leaves and nodes, broken headers, cut lists, keys outside
// an nvtree LN's fences) is refused in every base: leaf checks and
// verify()'s node checks run in recovery, the clean-close record (root
// slot 7) and the hints catch shortened leaf lists, and every tree checks
// the allocator's bound before its first write.
const std::set<std::string> kKnownFailures = {
    "crashed/flip-heap",
    "crashed/overwrite",
};

// --------------------------------------------------------------------- rng
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
uint64_t HashStr(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t Next() { return Mix(s++ * 0x2545F4914F6CDD1Dull + 1); }
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }
};

// ------------------------------------------------------------------ config
struct Config {
  int budget = 2;
  uint64_t seed = 1;
  std::string only_index;
  std::string kv_kinds = "lbtree,fptree";  // KvStore pools over these ("none": no KvStore pools)
  bool kv_only = false;                    // only the KvStore pools
  std::string only_class;
  int keys = 2000;
  int timeout_s = 60;
  bool verbose = false;
  bool strict = false;
};

// A pool's files in memory: [0] is PATH, [i] is PATH.i.
struct FileSet {
  std::vector<std::string> files;
};

struct Base {
  std::string name;  // clean | crashed | grown
  FileSet fs;
  std::vector<KV> keys;
  uint64_t heap_begin = 0;
  uint64_t mirror = 0;  // offset of the page table's copy B
  std::vector<uint64_t> used_pages;  // heap page indexes with a nonzero page word
};

std::string ReadFile(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
void WriteFile(const std::string& p, const std::string& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
  if (!out) {
    std::fprintf(stderr, "pool_fuzz: cannot write %s\n", p.c_str());
    std::exit(2);
  }
}
std::string SegPath(const std::string& path, size_t i) {
  return i == 0 ? path : path + "." + std::to_string(i);
}
void RemovePoolFiles(const std::string& dir) {
  for (auto& e : fs::directory_iterator(dir)) fs::remove_all(e.path());
}
FileSet ReadPool(const std::string& path) {
  FileSet f;
  for (size_t i = 0;; ++i) {
    std::string p = SegPath(path, i);
    if (!fs::exists(p)) break;
    f.files.push_back(ReadFile(p));
  }
  return f;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "pool_fuzz: %s\n", what.c_str());
  std::exit(2);
}

std::vector<KV> MakeKeys(uint64_t seed, int n) {
  std::set<Key> seen;
  std::vector<KV> kv;
  Rng r(seed);
  while (static_cast<int>(kv.size()) < n) {
    Key k = r.Next();
    if (!seen.insert(k).second) continue;
    kv.push_back({k, Mix(k ^ 0x5eed)});
  }
  return kv;
}

void Insert(Index* idx, const std::vector<KV>& kv, size_t from, size_t to, const char* what) {
  for (size_t i = from; i < to; ++i) {
    Status s = idx->insert(kv[i].key, kv[i].value);
    if (!s.ok()) Die(std::string(what) + ": insert: " + s.ToString());
  }
}

void Analyze(Base* b) {
  const std::string& f = b->fs.files[0];
  pm::PoolHeader h;
  std::memcpy(&h, f.data(), sizeof h);
  b->heap_begin = h.heap_begin;
  b->mirror = pm::PageTableMirrorOffset(h.max_size);
  size_t total = 0;
  for (auto& s : b->fs.files) total += s.size();
  const size_t mapped_pages = (total - h.heap_begin) / pm::kPoolPageSize;
  for (size_t i = 0; i < mapped_pages; ++i) {
    uint64_t w;
    std::memcpy(&w, f.data() + pm::kHeaderSize + 8 * i, 8);
    if (w != 0) b->used_pages.push_back(i);
  }
  if (b->used_pages.empty()) Die(b->name + ": no page in use");
}

// Builds the three bases of `kind` in `dir`.
std::vector<Base> BuildBases(const std::string& kind, const Config& cfg, const std::string& dir) {
  std::vector<Base> out;
  const uint64_t kseed = Mix(cfg.seed ^ HashStr(kind));
  PoolOptions po;
  po.size = 4ull << 20;
  po.max_size = 256ull << 20;
  const std::string path = dir + "/base";

  // clean
  {
    RemovePoolFiles(dir);
    Base b;
    b.name = "clean";
    b.keys = MakeKeys(kseed, cfg.keys);
    auto pool = create_pool_for(kind, "", path, po);
    if (!pool.ok()) Die(kind + ": create: " + pool.status().ToString());
    auto idx = create_index(kind, "", pool.value().get());
    if (!idx.ok()) Die(kind + ": create_index: " + idx.status().ToString());
    Insert(idx.value().get(), b.keys, 0, b.keys.size(), "clean");
    if (Status s = idx.value()->close(); !s.ok()) Die(kind + ": close: " + s.ToString());
    idx.value().reset();
    if (Status s = pool.value()->Close(); !s.ok()) Die(kind + ": pool close: " + s.ToString());
    b.fs = ReadPool(path);
    out.push_back(std::move(b));
  }
  // crashed: the files as they are while the index is open (after a sync).
  {
    RemovePoolFiles(dir);
    Base b;
    b.name = "crashed";
    b.keys = MakeKeys(kseed + 1, cfg.keys);
    auto pool = create_pool_for(kind, "", path, po);
    if (!pool.ok()) Die(kind + ": create: " + pool.status().ToString());
    auto idx = create_index(kind, "", pool.value().get());
    if (!idx.ok()) Die(kind + ": create_index: " + idx.status().ToString());
    Insert(idx.value().get(), b.keys, 0, b.keys.size(), "crashed");
    // Some removals and re-inserts, so recovery has more than appends to see.
    for (size_t i = 0; i < b.keys.size(); i += 7) {
      if (!idx.value()->remove(b.keys[i].key).ok()) Die(kind + ": remove");
      if (!idx.value()->insert(b.keys[i].key, b.keys[i].value).ok()) Die(kind + ": reinsert");
    }
    if (Status s = pool.value()->Sync(); !s.ok()) Die(kind + ": sync: " + s.ToString());
    b.fs = ReadPool(path);
    idx.value().reset();
    if (Status s = pool.value()->Close(); !s.ok()) Die(kind + ": close: " + s.ToString());
    out.push_back(std::move(b));
  }
  // grown: first segment 4 MiB, segments of 1 MiB, until there are >= 3.
  {
    RemovePoolFiles(dir);
    Base b;
    b.name = "grown";
    PoolOptions g = po;
    g.segment_size = 1ull << 20;
    auto pool = create_pool_for(kind, "", path, g);
    if (!pool.ok()) Die(kind + ": create: " + pool.status().ToString());
    auto idx = create_index(kind, "", pool.value().get());
    if (!idx.ok()) Die(kind + ": create_index: " + idx.status().ToString());
    std::vector<KV> all = MakeKeys(kseed + 2, 0);
    Rng r(kseed + 3);
    std::set<Key> seen;
    while (pool.value()->info().segments < 3) {
      if (all.size() > 4'000'000) Die(kind + ": pool does not grow");
      for (int i = 0; i < 2000;) {
        Key k = r.Next();
        if (!seen.insert(k).second) continue;
        all.push_back({k, Mix(k ^ 0x5eed)});
        ++i;
      }
      Insert(idx.value().get(), all, all.size() - 2000, all.size(), "grown");
    }
    b.keys = std::move(all);
    if (Status s = idx.value()->close(); !s.ok()) Die(kind + ": close: " + s.ToString());
    idx.value().reset();
    if (Status s = pool.value()->Close(); !s.ok()) Die(kind + ": pool close: " + s.ToString());
    b.fs = ReadPool(path);
    out.push_back(std::move(b));
  }
  for (auto& b : out) Analyze(&b);
  return out;
}

// ------------------------------------------------------------- mutations
struct Mutant {
  FileSet fs;
  std::string desc;
  bool applicable = true;
};

void FlipBit(std::string& f, uint64_t off, int bit) { f[off] = static_cast<char>(f[off] ^ (1 << bit)); }

// Offset (in the whole pool) -> (file, offset in file).
std::pair<size_t, uint64_t> Locate(const FileSet& fs, uint64_t off) {
  for (size_t i = 0; i < fs.files.size(); ++i) {
    if (off < fs.files[i].size()) return {i, off};
    off -= fs.files[i].size();
  }
  return {fs.files.size() - 1, fs.files.back().size() - 1};
}
char* At(FileSet& fs, uint64_t off) {
  auto [i, o] = Locate(fs, off);
  return fs.files[i].data() + o;
}
uint64_t TotalSize(const FileSet& fs) {
  uint64_t t = 0;
  for (auto& f : fs.files) t += f.size();
  return t;
}
std::string Hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%#llx", static_cast<unsigned long long>(v));
  return b;
}

// A random offset in the heap pages in use.
uint64_t UsedHeapOffset(const Base& b, Rng& r) {
  uint64_t page = b.used_pages[r.Below(b.used_pages.size())];
  return b.heap_begin + page * pm::kPoolPageSize + r.Below(pm::kPoolPageSize);
}

using MutateFn = void (*)(const Base&, Rng&, Mutant&, const std::vector<std::string>& kinds);

// The control: an undamaged base must open intact (a refusal is a failure).
void MNone(const Base&, Rng&, Mutant& m, const std::vector<std::string>&) {
  m.desc = "no damage (control)";
}

void MTruncMain(const Base&, Rng& r, Mutant& m, const std::vector<std::string>&) {
  std::string& f = m.fs.files[0];
  uint64_t len;
  switch (r.Below(4)) {
    case 0: len = r.Below(pm::kHeaderSize); break;
    case 1: len = f.size() - 1 - r.Below(4096); break;
    case 2: len = f.size() - pm::kPoolPageSize; break;
    default: len = r.Below(f.size()); break;
  }
  f.resize(len);
  m.desc = "truncate PATH to " + std::to_string(len);
}
void MTruncSeg(const Base& b, Rng& r, Mutant& m, const std::vector<std::string>&) {
  if (b.fs.files.size() < 2) { m.applicable = false; return; }
  size_t i = 1 + r.Below(b.fs.files.size() - 1);
  std::string& f = m.fs.files[i];
  uint64_t len = r.Below(2) ? r.Below(f.size()) : f.size() - 1 - r.Below(4096);
  f.resize(len);
  m.desc = "truncate PATH." + std::to_string(i) + " to " + std::to_string(len);
}
void MRemoveSeg(const Base& b, Rng& r, Mutant& m, const std::vector<std::string>&) {
  if (b.fs.files.size() < 2) { m.applicable = false; return; }
  // Removing the last one keeps the numbering; an earlier one leaves a gap.
  size_t i = r.Below(2) ? b.fs.files.size() - 1 : 1 + r.Below(b.fs.files.size() - 1);
  // A marker, so the files after a gap keep their names (WriteFiles skips it).
  m.fs.files[i] = std::string("\x01REMOVED", 8);
  m.desc = "remove PATH." + std::to_string(i);
}
void MDamageSeg(const Base& b, Rng& r, Mutant& m, const std::vector<std::string>&) {
  if (b.fs.files.size() < 2) { m.applicable = false; return; }
  size_t i = 1 + r.Below(b.fs.files.size() - 1);
  std::string& f = m.fs.files[i];
  switch (r.Below(3)) {
    case 0:
      std::fill(f.begin(), f.end(), '\0');
      m.desc = "zero all of PATH." + std::to_string(i);
      break;
    case 1: {
      for (auto& c : f) c = static_cast<char>(r.Next());
      m.desc = "random bytes in all of PATH." + std::to_string(i);
      break;
    }
    default: {
      uint64_t o = r.Below(f.size() / 4096) * 4096;
      for (uint64_t k = 0; k < 4096; ++k) f[o + k] = static_cast<char>(r.Next());
      m.desc = "random 4 KiB at PATH." + std::to_string(i) + "+" + std::to_string(o);
      break;
    }
  }
}
void MFlipHeader(const Base&, Rng& r, Mutant& m, const std::vector<std::string>&) {
  uint64_t o = r.Below(pm::kMutableOffset);
  int bit = static_cast<int>(r.Below(8));
  FlipBit(m.fs.files[0], o, bit);
  m.desc = "flip bit " + std::to_string(bit) + " of header byte " + std::to_string(o);
}
// The root slots' two copies with the clean flag and segment count between.
constexpr uint64_t kRootAreaBytes =
    offsetof(pm::PoolHeader, root_b) + sizeof(pm::PoolHeader::root_b) - pm::kMutableOffset;

void MFlipRoot(const Base&, Rng& r, Mutant& m, const std::vector<std::string>&) {
  uint64_t o = pm::kMutableOffset + r.Below(kRootAreaBytes);  // root slots, clean, segments
  int bit = static_cast<int>(r.Below(r.Below(2) ? 8 : 6) + 0);
  FlipBit(m.fs.files[0], o, bit);
  m.desc = "flip bit " + std::to_string(bit) + " of root-area byte " + std::to_string(o);
}
void MFlipPageTable(const Base& b, Rng& r, Mutant& m, const std::vector<std::string>&) {
  // Mostly the words of pages in use; sometimes a free one.
  uint64_t page = r.Below(4) != 0 ? b.used_pages[r.Below(b.used_pages.size())]
                                  : r.Below(b.used_pages.back() + 4);
  const bool copy_b = r.Below(2) != 0;
  uint64_t o = (copy_b ? b.mirror : pm::kHeaderSize) + page * 8 + r.Below(8);
  int bit = static_cast<int>(r.Below(8));
  FlipBit(m.fs.files[0], o, bit);
  m.desc = "flip bit " + std::to_string(bit) + " of page-table byte " + std::to_string(o) +
           " (page " + std::to_string(page) + ", copy " + (copy_b ? "B" : "A") + ")";
}
void MFlipHeap(const Base& b, Rng& r, Mutant& m, const std::vector<std::string>&) {
  uint64_t o = UsedHeapOffset(b, r);
  int bit = static_cast<int>(r.Below(8));
  char* p = At(m.fs, o);
  *p = static_cast<char>(*p ^ (1 << bit));
  m.desc = "flip bit " + std::to_string(bit) + " of heap byte " + std::to_string(o);
}
void MOverwrite(const Base& b, Rng& r, Mutant& m, const std::vector<std::string>&) {
  uint64_t total = TotalSize(m.fs);
  uint64_t o = r.Below(2) ? UsedHeapOffset(b, r) : r.Below(b.heap_begin);
  uint64_t n = 1 + r.Below(r.Below(2) ? 8 : 64);
  int mode = static_cast<int>(r.Below(3));
  for (uint64_t k = 0; k < n && o + k < total; ++k) {
    char v = mode == 0 ? '\xff' : mode == 1 ? '\0' : static_cast<char>(r.Next());
    *At(m.fs, o + k) = v;
  }
  m.desc = "overwrite " + std::to_string(n) + " bytes at " + std::to_string(o) + " with " +
           (mode == 0 ? "0xff" : mode == 1 ? "0x00" : "random");
}
void ZeroRange(FileSet& fs, uint64_t o, uint64_t n) {
  uint64_t total = TotalSize(fs);
  for (uint64_t k = 0; k < n && o + k < total; ++k) *At(fs, o + k) = 0;
}
void MZero4k(const Base& b, Rng& r, Mutant& m, const std::vector<std::string>&) {
  uint64_t o;
  if (r.Below(4) == 0) {
    o = pm::kHeaderSize + r.Below((b.heap_begin - pm::kHeaderSize) / 4096) * 4096;  // page table
  } else {
    o = UsedHeapOffset(b, r) / 4096 * 4096;
  }
  ZeroRange(m.fs, o, 4096);
  m.desc = "zero the 4 KiB page at " + std::to_string(o);
}
void MZero256k(const Base& b, Rng& r, Mutant& m, const std::vector<std::string>&) {
  uint64_t page = b.used_pages[r.Below(b.used_pages.size())];
  uint64_t o = b.heap_begin + page * pm::kPoolPageSize;
  ZeroRange(m.fs, o, pm::kPoolPageSize);
  m.desc = "zero the 256 KiB heap page " + std::to_string(page) + " at " + std::to_string(o);
}
void MForgeHeader(const Base& b, Rng& r, Mutant& m, const std::vector<std::string>& kinds) {
  pm::PoolHeader h;
  std::memcpy(&h, m.fs.files[0].data(), sizeof h);
  switch (r.Below(10)) {
    case 0: {
      std::string k = kinds[r.Below(kinds.size())];
      std::memset(h.kind, 0, sizeof h.kind);
      std::memcpy(h.kind, k.data(), k.size());
      m.desc = "forged header: kind " + k;
      break;
    }
    case 1: {
      static const char* kOpts[] = {"node=256", "node=512", "node=1024", "node=4096", "node=128",
                                    "node=512,adaptive=off", "bogus=1"};
      std::string o = kOpts[r.Below(std::size(kOpts))];
      std::memset(h.options, 0, sizeof h.options);
      std::memcpy(h.options, o.data(), o.size());
      m.desc = "forged header: options " + o;
      break;
    }
    case 2:
      h.pool_id = static_cast<uint16_t>(h.pool_id + 1 + r.Below(100));
      m.desc = "forged header: pool_id " + std::to_string(h.pool_id);
      break;
    case 3:
      h.first_size += pm::kPoolPageSize * (r.Below(2) ? 1 : -1);
      m.desc = "forged header: first_size " + std::to_string(h.first_size);
      break;
    case 4:
      h.segment_size = r.Below(2) ? h.segment_size * 2 : pm::kPoolPageSize;
      m.desc = "forged header: segment_size " + std::to_string(h.segment_size);
      break;
    case 5:
      h.max_size = r.Below(2) ? h.max_size * 2 : h.first_size;
      m.desc = "forged header: max_size " + std::to_string(h.max_size);
      break;
    case 6:
      h.heap_begin += pm::kPoolPageSize;
      m.desc = "forged header: heap_begin " + std::to_string(h.heap_begin);
      break;
    case 7:
      h.incompat_flags |= uint64_t{1} << r.Below(64);
      m.desc = "forged header: incompat_flags " + Hex(h.incompat_flags);
      break;
    case 8:
      h.format_version = std::array<uint32_t, 3>{0, pm::kPoolFormatVersion - 1,
                                                 pm::kPoolFormatVersion + 1}[r.Below(3)];
      m.desc = "forged header: format_version " + std::to_string(h.format_version);
      break;
    default:
      h.uuid[r.Below(16)] ^= 0x5a;
      h.create_time = r.Next();
      m.desc = "forged header: uuid and create_time";
      break;
  }
  (void)b;
  h.checksum = pm::HeaderChecksum(h);
  std::memcpy(m.fs.files[0].data(), &h, pm::kChecksumOffset + 4);
}
void MRootDamage(const Base& b, Rng& r, Mutant& m, const std::vector<std::string>&) {
  std::string& f = m.fs.files[0];
  unsigned slot = static_cast<unsigned>(r.Below(r.Below(2) ? 3 : 8));
  uint64_t v;
  pm::PoolHeader h;
  std::memcpy(&h, f.data(), sizeof h);
  v = h.root_a[slot].value;
  const uint64_t id = v >> 48;
  uint64_t nv;
  std::string how;
  switch (r.Below(7)) {
    case 0: nv = 0; how = "null"; break;
    case 1: nv = v + 8; how = "+8 (misaligned)"; break;
    case 2: nv = v + (r.Below(2) ? 64 : 256); how = "next block"; break;
    case 3: nv = v ^ (uint64_t{1 + r.Below(3)} << 48); how = "other pool id"; break;
    case 4: {
      uint64_t o = UsedHeapOffset(b, r) / 64 * 64;
      nv = (id == 0 ? uint64_t{1} : id) << 48 | o;
      how = "another heap block";
      break;
    }
    case 5: {
      unsigned other = (slot + 1 + static_cast<unsigned>(r.Below(7))) % 8;
      nv = h.root_a[other].value;
      how = "copy of slot " + std::to_string(other);
      break;
    }
    default: nv = r.Next(); how = "random"; break;
  }
  // A forged slot: both copies valid, one write ahead of the old record
  // (what a program with a wrong pointer would have written), so the
  // trees' pointer checks see it.
  const pm::RootRecord rec = pm::MakeRootRecord(slot, pm::RootSeq(h.root_a[slot]) + 1, nv);
  std::memcpy(f.data() + offsetof(pm::PoolHeader, root_a) + sizeof rec * slot, &rec, sizeof rec);
  std::memcpy(f.data() + offsetof(pm::PoolHeader, root_b) + sizeof rec * slot, &rec, sizeof rec);
  m.desc = "forged root slot " + std::to_string(slot) + " " + Hex(v) + " -> " + Hex(nv) + " (" + how + ")";
}

// ------------------------------------------- zeroed or hole-punched heaps
// What a punched hole, a sparse or partial copy, or `truncate -s` down and
// back up leaves: a range of the heap reads as zeros (the header and page
// tables intact). Recovery must refuse it, or find every key; above all it
// must not open an empty or shortened index and mark it clean. The crashed
// base only (the cleanly closed ones have their clean-close and content
// records, which zero-4k and zero-256k exercise), to keep the CI budget.
void MZeroHeap(const Base& b, Rng& r, Mutant& m, const std::vector<std::string>&) {
  if (b.name != "crashed") {
    m.applicable = false;
    return;
  }
  const uint64_t total = TotalSize(m.fs);
  uint64_t from, len;
  switch (r.Below(3)) {
    case 0:  // the whole heap (truncate to the page tables, then back)
      from = b.heap_begin;
      len = total - from;
      m.desc = "zero the whole heap from " + std::to_string(from);
      break;
    case 1:  // from a point in the pages in use to the end (a partial copy)
      from = UsedHeapOffset(b, r) / 4096 * 4096;
      len = total - from;
      m.desc = "zero the heap from " + std::to_string(from) + " to the end";
      break;
    default:  // a hole of 1 to 64 pages of 4 KiB in the pages in use
      from = UsedHeapOffset(b, r) / 4096 * 4096;
      len = 4096 * (1 + r.Below(64));
      m.desc = "punch a hole of " + std::to_string(len) + " bytes at " + std::to_string(from);
      break;
  }
  ZeroRange(m.fs, from, len);
}

struct MutationClass {
  const char* name;
  MutateFn fn;
};
const MutationClass kClasses[] = {
    {"none", MNone},
    {"trunc-main", MTruncMain},     {"trunc-seg", MTruncSeg},     {"remove-seg", MRemoveSeg},
    {"damage-seg", MDamageSeg},     {"flip-header", MFlipHeader}, {"flip-root", MFlipRoot},
    {"flip-ptable", MFlipPageTable}, {"flip-heap", MFlipHeap},    {"overwrite", MOverwrite},
    {"zero-4k", MZero4k},           {"zero-256k", MZero256k},     {"forge-header", MForgeHeader},
    {"root-slot", MRootDamage},
    {"zero-heap", MZeroHeap},
};

bool IsRemoved(const std::string& f) { return f.size() == 8 && f == std::string("\x01REMOVED", 8); }

void WriteFiles(const std::string& path, const FileSet& fs) {
  for (size_t i = 0; i < fs.files.size(); ++i) {
    if (IsRemoved(fs.files[i])) continue;
    WriteFile(SegPath(path, i), fs.files[i]);
  }
}

// Empty if the files in the directory are exactly `fs`; else what differs.
std::string CompareFiles(const std::string& dir, const std::string& path, const FileSet& fs) {
  size_t expected = 0;
  for (size_t i = 0; i < fs.files.size(); ++i) {
    std::string p = SegPath(path, i);
    if (IsRemoved(fs.files[i])) {
      if (fs::exists(p)) return p + " appeared";
      continue;
    }
    ++expected;
    if (!fs::exists(p)) return p + " vanished";
    std::string now = ReadFile(p);
    if (now.size() != fs.files[i].size())
      return p + " changed size " + std::to_string(fs.files[i].size()) + " -> " +
             std::to_string(now.size());
    if (now != fs.files[i]) {
      size_t k = 0;
      while (now[k] == fs.files[i][k]) ++k;
      return p + " changed at byte " + std::to_string(k);
    }
  }
  size_t present = 0;
  for (auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++present;
  }
  if (present != expected + 1)  // + the child's stderr file
    return "the directory holds " + std::to_string(present - 1) + " files, not " +
           std::to_string(expected);
  return "";
}

// ------------------------------------------------------------ the oracle
enum class Outcome { kRefused, kIntact, kFailed };

// `pmpool salvage`'s reading half (ReadForSalvage) on the mutant as
// written, before the oracle's open: it must return or refuse with a
// message (a crash or a hang is the child's, and reported as salvage's when
// no line came first), and what it cannot copy of `keys` (an index pool's
// keys; empty for a KvStore pool, which salvage refuses) it must report
// (SalvageRead::ReportsLoss). Writes one line "S ok|refused|silent|F ..."
// to fd and returns. It writes no file by construction (read-only maps of
// the files, a copy in memory); the oracle's own refusal compares the files.
bool g_no_salvage = false;  // --no-salvage: skip the stage (to measure its cost)

void SalvageStage(const std::string& path, const std::vector<KV>& keys, int fd) {
  if (g_no_salvage) return;
  auto line = [fd](const std::string& s) {
    std::string l = "S " + s + "\n";
    ssize_t n = write(fd, l.data(), l.size());
    (void)n;
  };
  auto r = ReadForSalvage(path);
  if (!r.ok()) {
    line(r.status().message().empty() ? "F salvage refused with an empty message" : "refused");
    return;
  }
  const SalvageRead& sr = r.value();
  if (keys.empty()) {
    line("ok");
    return;
  }
  std::vector<KV> want = keys;
  std::sort(want.begin(), want.end(), [](const KV& x, const KV& y) { return x.key < y.key; });
  size_t missing = 0, wrong = 0, j = 0;
  for (const KV& kv : want) {  // both ascending
    while (j < sr.entries.size() && sr.entries[j].key < kv.key) ++j;
    if (j == sr.entries.size() || sr.entries[j].key != kv.key) {
      ++missing;
    } else if (sr.entries[j].value != kv.value) {
      ++wrong;
    }
  }
  if (missing == 0 && wrong == 0) {
    line("ok");
  } else if (sr.ReportsLoss()) {
    line("ok");  // it says that entries may be missing or changed
  } else {
    line("silent copied " + std::to_string(sr.entries.size()) + " entries, " +
         std::to_string(missing) + " of " + std::to_string(keys.size()) + " keys missing, " +
         std::to_string(wrong) + " wrong values, and reported nothing");
  }
}

// Runs in the child: writes one line "R msg" / "O" / "F msg" to fd.
[[noreturn]] void Child(const std::string& path, const std::vector<KV>& keys, int fd) {
  auto report = [fd](const std::string& s) {
    std::string line = s + "\n";
    ssize_t n = write(fd, line.data(), line.size());
    (void)n;
    _exit(0);
  };
  SalvageStage(path, keys, fd);
  auto pool = Pool::Open(path);
  if (!pool.ok()) {
    if (pool.status().message().empty()) report("F Pool::Open refused with an empty message");
    report("R Pool::Open: " + pool.status().ToString());
  }
  std::unique_ptr<Pool> p = std::move(pool).value();
  auto idx = open_index(p.get());
  if (!idx.ok()) {
    IgnoreError(p->Close(), "the refusal is the outcome; the caller compares the files next");
    if (idx.status().message().empty()) report("F open_index refused with an empty message");
    report("R open_index: " + idx.status().ToString());
  }
  std::unique_ptr<Index> index = std::move(idx).value();
  Status v = index->verify();
  if (!v.ok()) report("F opened, but verify says " + v.ToString());
  IndexStats st = index->stats();
  size_t missing = 0, wrong = 0;
  std::string first;
  for (const KV& kv : keys) {
    auto got = index->lookup(kv.key);
    if (!got) {
      if (missing++ == 0 && wrong == 0) first = "key " + Hex(kv.key) + " missing";
    } else if (*got != kv.value) {
      if (wrong++ == 0 && missing == 0) first = "key " + Hex(kv.key) + " has a wrong value";
    }
  }
  if (missing != 0 || wrong != 0 || st.entries != keys.size()) {
    report("F opened and verify passed, but " + std::to_string(missing) + " of " +
           std::to_string(keys.size()) + " keys missing, " + std::to_string(wrong) +
           " wrong values, entries " + std::to_string(st.entries) + (first.empty() ? "" : "; " + first));
  }
  if (Status s = index->close(); !s.ok()) report("F close: " + s.ToString());
  index.reset();
  if (Status s = p->Close(); !s.ok()) report("F pool close: " + s.ToString());
  report("O");
  _exit(0);  // not reached: report exits
}

struct Result1 {
  Outcome outcome;
  std::string detail;
  // The salvage stage: "" ok or refused with a message, "silent ..." a
  // shortfall it did not report, "F ..." a failure (the run fails).
  std::string salvage = {};
};

// The child's oracle: writes its one line to fd and exits (Child's, or the
// KvStore block's KvChild).
using ChildFn = std::function<void(const std::string& path, int fd)>;

Result1 RunMutant(const std::string& dir, const std::string& path, const Mutant& m,
                  const std::vector<KV>& keys, const Config& cfg, const ChildFn& child = {}) {
  RemovePoolFiles(dir);
  WriteFiles(path, m.fs);
  const std::string err_path = dir + "/child.stderr";
  int pfd[2];
  if (pipe(pfd) != 0) Die("pipe failed");
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) Die("fork failed");
  if (pid == 0) {
    close(pfd[0]);
    int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (e >= 0) {
      dup2(e, 2);
      close(e);
    }
    if (child) {
      child(path, pfd[1]);
      _exit(3);  // not reached: a child reports and exits
    }
    Child(path, keys, pfd[1]);
  }
  close(pfd[1]);
  std::string msg;
  bool hung = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(cfg.timeout_s);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      hung = true;
      break;
    }
    struct pollfd pf = {pfd[0], POLLIN, 0};
    int pr = poll(&pf, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    char buf[4096];
    ssize_t n = read(pfd[0], buf, sizeof buf);
    if (n <= 0) break;
    msg.append(buf, static_cast<size_t>(n));
  }
  close(pfd[0]);
  if (hung) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  auto child_err = [&]() {
    std::string e = ReadFile(err_path);
    if (e.size() > 1500) e = e.substr(0, 1500) + "...";
    return e.empty() ? std::string() : "\n    child stderr: " + e;
  };
  // The salvage stage's line comes first; without it, the child died in it.
  std::string salvage;
  const bool salvaged = msg.size() >= 2 && msg[0] == 'S' && msg[1] == ' ';
  if (salvaged) {
    const size_t nl = msg.find('\n');
    const std::string sl = msg.substr(2, nl == std::string::npos ? std::string::npos : nl - 2);
    if (sl.rfind("F ", 0) == 0 || sl.rfind("silent", 0) == 0) salvage = sl;
    msg = nl == std::string::npos ? "" : msg.substr(nl + 1);
  }
  const std::string in = salvaged ? "" : " (in pmpool salvage's ReadForSalvage)";
  const std::string died = salvaged ? salvage : "F the child died in ReadForSalvage";
  if (hung) {
    return {Outcome::kFailed, "hang (killed after " + std::to_string(cfg.timeout_s) + " s)" + in,
            died};
  }
  if (WIFSIGNALED(status)) {
    return {Outcome::kFailed,
            "crash: signal " + std::to_string(WTERMSIG(status)) + in + child_err(), died};
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || msg.empty())
    return {Outcome::kFailed,
            "child exited with status " + std::to_string(WEXITSTATUS(status)) + in + child_err(),
            died};
  if (!msg.empty() && msg.back() == '\n') msg.pop_back();
  if (msg[0] == 'O') return {Outcome::kIntact, "", salvage};
  if (msg[0] == 'F') return {Outcome::kFailed, msg.substr(2), salvage};
  std::string diff = CompareFiles(dir, path, m.fs);
  if (!diff.empty()) {
    return {Outcome::kFailed, "refused (" + msg.substr(2) + ") but " + diff, salvage};
  }
  return {Outcome::kRefused, msg.substr(2), salvage};
}

// The salvage stage's tallies over the whole run.
struct SalvageTally {
  int failed = 0, silent = 0;
};
SalvageTally g_salvage;

void NoteSalvage(const std::string& label, const Result1& res) {
  if (res.salvage.empty()) return;
  if (res.salvage[0] == 'F') {
    ++g_salvage.failed;
    std::printf("SALVAGE FAILED %s: %s\n", label.c_str(), res.salvage.c_str() + 2);
  } else {
    ++g_salvage.silent;
    std::printf("salvage %s: %s\n", label.c_str(), res.salvage.c_str());
  }
}

// ------------------------------------------------------------------ main
struct Cell {
  int refused = 0, intact = 0, failed = 0;
  int unknown = 0;  // failures outside kKnownFailures
};

const char* const kHelp =
    "usage: pool_fuzz [--budget N] [--seed S] [--index KIND] [--class NAME] [--keys N]\n"
    "                 [--kv-kinds LIST] [--kv-only] [--timeout SEC] [--verbose] [--strict]\n"
    "                 [--no-salvage]\n"
    "Damages pools of every persistent index kind (clean, crashed and grown bases) with\n"
    "every mutation class and opens each mutant in a child process: it must be refused\n"
    "with its files unchanged, or open intact (verify passes, every key has its value).\n"
    "  --budget N     mutants per (index, base, class) (default 2)\n"
    "  --seed S       seed of the keys and the mutations (default 1)\n"
    "  --index KIND   only this index kind\n"
    "  --class NAME   only this mutation class (none, trunc-main, trunc-seg, remove-seg,\n"
    "                 damage-seg, flip-header, flip-root, flip-ptable, flip-heap, overwrite,\n"
    "                 zero-4k, zero-256k, forge-header, root-slot, zero-heap)\n"
    "  --keys N       keys in the clean and crashed bases (default 2000)\n"
    "  --kv-kinds L   also KvStore pools over these kinds, a comma list (default\n"
    "                 lbtree,fptree; none: no KvStore pools); --index filters them too\n"
    "  --kv-only      only the KvStore pools\n"
    "  --timeout SEC  a child running longer is a hang, a failure (default 60)\n"
    "  --verbose      print every mutant and its outcome\n"
    "  --strict       every failure fails the run, known or not\n"
    "  --no-salvage   skip pmpool salvage's ReadForSalvage before each open\n"
    "Known failures, for every kind: a damaged key or value of the crashed base (a pool\n"
    "that crashed has no content record).\n"
    "Exit status: 0 pass; 1 a failure that is not a known one; 2 usage.\n";

int Usage(const char* msg) {
  std::fprintf(stderr,
               "pool_fuzz: %s\nusage: pool_fuzz [--budget N] [--seed S] [--index KIND] "
               "[--class NAME] [--keys N] [--kv-kinds LIST] [--kv-only] [--timeout SEC] "
               "[--verbose] [--strict] [--no-salvage]\n",
               msg);
  return 2;
}

// ------------------------------------------------------- KvStore pools
// The same classes over key-value store pools (KvStore, pmindex/kv.h) on the
// kinds of --kv-kinds (default lbtree and fptree): clean, crashed and grown
// stores of string keys (some under one 8-byte prefix: buckets and
// directories), values of 0 to 300 bytes and two in value blocks, keys
// written twice (two versions) and removed. Oracle as above, through
// KvStore::Open: refused with the files unchanged, or open intact (Verify
// passes, Count and every Get match). The known failures are the index
// kinds' (kKnownFailures): a damaged key or value of a crashed store, and
// in the crashed base also any class that only changed values (a zeroed
// page that held nothing but a value block's bytes); a cleanly closed
// store is covered by its content record (root slot 4).
using KvPairs = std::vector<std::pair<std::string, std::string>>;

struct KvBase {
  Base base;      // files and geometry for the mutation classes (no KV keys)
  KvPairs pairs;  // what the store holds, ascending
};

std::string KvKey(Rng& r, uint64_t i) {
  char b[48];
  switch (i % 3) {
    case 0:  // one shared prefix "user:000"
      std::snprintf(b, sizeof b, "user:%08llu", static_cast<unsigned long long>(i));
      return b;
    case 1:  // a prefix of its own
      std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(r.Next()));
      return b;
    default: {  // longer keys
      std::snprintf(b, sizeof b, "item/%llu/", static_cast<unsigned long long>(i));
      std::string k = b;
      k.append(r.Below(40), static_cast<char>('a' + i % 26));
      return k;
    }
  }
}
std::string KvValue(Rng& r, uint64_t i, bool big) {
  std::string v = "v" + std::to_string(i) + ":";
  const size_t n = big ? (150u << 10) : r.Below(300);
  while (v.size() < n) v.push_back(static_cast<char>('A' + r.Below(26)));
  return v;
}

// Puts `n` new pairs (every 7th key written twice, every 11th removed).
void KvFill(KvStore& kv, Rng& r, uint64_t from, uint64_t n,
            std::map<std::string, std::string>* model, const std::string& what) {
  for (uint64_t i = from; i < from + n; ++i) {
    const std::string k = KvKey(r, i);
    const std::string v = KvValue(r, i, i == from + 5 || i == from + n / 2);
    if (Status s = kv.Put(k, v); !s.ok()) Die(what + ": put: " + s.ToString());
    (*model)[k] = v;
    if (i % 7 == 0) {
      const std::string v2 = KvValue(r, i + 1, false);
      if (Status s = kv.Put(k, v2); !s.ok()) Die(what + ": put again: " + s.ToString());
      (*model)[k] = v2;
    }
    if (i % 11 == 0) {
      if (Status s = kv.Remove(k); !s.ok()) Die(what + ": remove: " + s.ToString());
      model->erase(k);
    }
  }
}

std::vector<KvBase> BuildKvBases(const std::string& kind, const Config& cfg,
                                 const std::string& dir) {
  std::vector<KvBase> out;
  const uint64_t kseed = Mix(cfg.seed ^ HashStr("kv/" + kind));
  DbOptions o;
  o.size = 4ull << 20;
  o.max_size = 256ull << 20;
  const std::string path = dir + "/base";
  for (const char* name : {"clean", "crashed", "grown"}) {
    RemovePoolFiles(dir);
    const std::string base_name = name;
    DbOptions opts = o;
    if (base_name == "grown") opts.segment_size = 1ull << 20;
    auto kv = KvStore::Create(path, kind, "", opts);
    if (!kv.ok()) Die("kv/" + kind + ": create: " + kv.status().ToString());
    Rng r(kseed + out.size());
    std::map<std::string, std::string> model;
    KvBase b;
    b.base.name = base_name;
    if (base_name == "grown") {
      uint64_t n = 0;
      while (!fs::exists(path + ".2")) {
        if (n > 2'000'000) Die("kv/" + kind + ": the pool does not grow");
        KvFill(*kv.value(), r, n, 1000, &model, "kv/" + kind + "/grown");
        n += 1000;
      }
    } else {
      KvFill(*kv.value(), r, 0, static_cast<uint64_t>(cfg.keys), &model,
             "kv/" + kind + "/" + base_name);
    }
    if (base_name == "crashed") {
      // The files as a kill -9 leaves them (after a sync): clean flag 0.
      if (Status s = kv.value()->Sync(); !s.ok()) Die("kv/" + kind + ": sync: " + s.ToString());
      b.base.fs = ReadPool(path);
    }
    if (Status s = kv.value()->Close(); !s.ok()) Die("kv/" + kind + ": close: " + s.ToString());
    if (base_name != "crashed") b.base.fs = ReadPool(path);
    b.pairs.assign(model.begin(), model.end());
    Analyze(&b.base);
    out.push_back(std::move(b));
  }
  return out;
}

// KvChild's failure when every key is there and only values differ: in the
// crashed base, the known limit whatever the class (a zeroed page may hold
// nothing but the bytes of a value block).
constexpr const char* kValuesDamaged = "values damaged, every key present";

[[noreturn]] void KvChild(const std::string& path, const KvPairs& pairs, int fd) {
  auto report = [fd](const std::string& s) {
    std::string line = s + "\n";
    ssize_t n = write(fd, line.data(), line.size());
    (void)n;
    _exit(0);
  };
  SalvageStage(path, {}, fd);
  auto kv = KvStore::Open(path);
  if (!kv.ok()) {
    if (kv.status().message().empty()) report("F KvStore::Open refused with an empty message");
    report("R KvStore::Open: " + kv.status().ToString());
  }
  KvStore& s = *kv.value();
  if (Status v = s.Verify(); !v.ok()) report("F opened, but Verify says " + v.ToString());
  size_t missing = 0, wrong = 0;
  std::string first;
  for (const auto& [k, v] : pairs) {
    auto got = s.Get(k);
    if (!got.ok()) {
      if (missing++ == 0 && wrong == 0)
        first = "key '" + k + "' missing: " + got.status().ToString();
    } else if (got.value() != v) {
      if (wrong++ == 0 && missing == 0) first = "key '" + k + "' has a wrong value";
    }
  }
  const uint64_t count = s.Count();
  if (missing == 0 && wrong != 0 && count == pairs.size()) {
    report("F " + std::string(kValuesDamaged) + ": " + std::to_string(wrong) + " of " +
           std::to_string(pairs.size()) + " values differ; " + first);
  }
  if (missing != 0 || wrong != 0 || count != pairs.size()) {
    report("F opened and Verify passed, but " + std::to_string(missing) + " of " +
           std::to_string(pairs.size()) + " keys missing, " + std::to_string(wrong) +
           " wrong values, Count " + std::to_string(count) + (first.empty() ? "" : "; " + first));
  }
  if (Status c = s.Close(); !c.ok()) report("F close: " + c.ToString());
  report("O");
  _exit(0);  // not reached: report exits
}

struct KvTotals {
  int mutants = 0, failed = 0, unexpected = 0;
};

// Runs every class over the KvStore bases of `kv_kinds`; prints its table.
KvTotals RunKvBlock(const Config& cfg, const std::vector<std::string>& kv_kinds,
                    const std::vector<std::string>& all_kinds, const std::string& dir,
                    const std::string& path) {
  KvTotals t;
  std::map<std::pair<std::string, std::string>, Cell> cells;
  for (const std::string& kind : kv_kinds) {
    for (const KvBase& kb : BuildKvBases(kind, cfg, dir)) {
      const Base& b = kb.base;
      if (cfg.verbose)
        std::printf("kv/%s/%s: %zu pairs, %zu files, %zu pages in use\n", kind.c_str(),
                    b.name.c_str(), kb.pairs.size(), b.fs.files.size(), b.used_pages.size());
      const ChildFn child = [&kb](const std::string& p, int fd) { KvChild(p, kb.pairs, fd); };
      for (const MutationClass& mc : kClasses) {
        if (!cfg.only_class.empty() && cfg.only_class != mc.name) continue;
        for (int n = 0; n < cfg.budget; ++n) {
          Rng r(Mix(cfg.seed ^ HashStr("kv/" + kind + "/" + b.name + "/" + mc.name)) + n);
          Mutant m;
          m.fs = b.fs;
          mc.fn(b, r, m, all_kinds);
          if (!m.applicable) break;
          if (mc.fn == MNone && n > 0) break;  // one control per base
          ++t.mutants;
          Result1 res = RunMutant(dir, path, m, {}, cfg, child);
          NoteSalvage("kv/" + kind + "/" + b.name + "/" + mc.name + " #" + std::to_string(n), res);
          if (mc.fn == MNone && res.outcome == Outcome::kRefused)
            res = {Outcome::kFailed, "an undamaged store was refused: " + res.detail};
          Cell& c = cells[{kind, mc.name}];
          switch (res.outcome) {
            case Outcome::kRefused: ++c.refused; break;
            case Outcome::kIntact: ++c.intact; break;
            case Outcome::kFailed: ++c.failed; break;
          }
          const bool known = kKnownFailures.count(b.name + "/" + mc.name) != 0 ||
                             (b.name == "crashed" && res.detail.rfind(kValuesDamaged, 0) == 0);
          if (res.outcome == Outcome::kFailed && !known) ++c.unknown;
          if (res.outcome == Outcome::kFailed && (cfg.verbose || !known || cfg.strict)) {
            std::printf("FAILED%s kv/%s/%s/%s #%d (seed %llu): %s\n    %s\n",
                        known ? " (known)" : "", kind.c_str(), b.name.c_str(), mc.name, n,
                        static_cast<unsigned long long>(cfg.seed), m.desc.c_str(),
                        res.detail.c_str());
          } else if (cfg.verbose) {
            std::printf("%s kv/%s/%s/%s #%d: %s%s%s\n",
                        res.outcome == Outcome::kRefused ? "refused" : "intact ", kind.c_str(),
                        b.name.c_str(), mc.name, n, m.desc.c_str(),
                        res.detail.empty() ? "" : " -> ", res.detail.c_str());
          }
          std::fflush(stdout);
        }
      }
    }
  }
  std::printf("\n%-12s", "KvStore over");
  for (auto& k : kv_kinds) std::printf(" %-14s", k.c_str());
  std::printf("\n");
  for (const MutationClass& mc : kClasses) {
    if (!cfg.only_class.empty() && cfg.only_class != mc.name) continue;
    std::printf("%-12s", mc.name);
    for (auto& k : kv_kinds) {
      auto it = cells.find({k, mc.name});
      if (it == cells.end()) {
        std::printf(" %-14s", "-");
        continue;
      }
      const Cell& c = it->second;
      char buf[40];
      std::snprintf(buf, sizeof buf, "%d/%d/%d%s", c.refused, c.intact, c.failed,
                    c.failed != 0 ? (c.unknown == 0 ? "k" : "!") : "");
      std::printf(" %-14s", buf);
      t.failed += c.failed;
      if (c.unknown != 0 || (c.failed != 0 && cfg.strict)) ++t.unexpected;
    }
    std::printf("\n");
  }
  return t;
}


int Main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "pool_fuzz: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (a == "--budget") {
        cfg.budget = std::stoi(val());
      } else if (a == "--seed") {
        cfg.seed = std::stoull(val());
      } else if (a == "--index") {
        cfg.only_index = val();
      } else if (a == "--kv-kinds") {
        cfg.kv_kinds = val();
      } else if (a == "--kv-only") {
        cfg.kv_only = true;
      } else if (a == "--class") {
        cfg.only_class = val();
      } else if (a == "--keys") {
        cfg.keys = std::stoi(val());
      } else if (a == "--timeout") {
        cfg.timeout_s = std::stoi(val());
      } else if (a == "--verbose") {
        cfg.verbose = true;
      } else if (a == "--strict") {
        cfg.strict = true;
      } else if (a == "--no-salvage") {
        g_no_salvage = true;
      } else if (a == "--help" || a == "-h") {
        std::printf("%s", kHelp);
        return 0;
      } else {
        return Usage(("unknown argument " + a).c_str());
      }
    } catch (const std::exception&) {
      return Usage(("bad value for " + a).c_str());
    }
  }
  if (cfg.budget < 1 || cfg.keys < 1 || cfg.timeout_s < 1) return Usage("values must be >= 1");

  std::vector<std::string> kinds, all_kinds;
  for (const IndexInfo* info : pmindex::testing::TestKinds::Get().NonFixtures()) {
    if (!info->persistent || !info->stores_data) continue;
    all_kinds.push_back(info->name);
    if (cfg.only_index.empty() || cfg.only_index == info->name) kinds.push_back(info->name);
  }
  if (kinds.empty()) return Usage(("no persistent index kind " + cfg.only_index).c_str());
  bool class_found = cfg.only_class.empty();
  for (auto& c : kClasses) class_found |= cfg.only_class == c.name;
  if (!class_found) return Usage(("no mutation class " + cfg.only_class).c_str());

  std::string tmpl = (fs::temp_directory_path() / "pool_fuzz-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) Die("mkdtemp failed");
  const std::string dir = tmpl;
  const std::string path = dir + "/pool";

  std::printf("pool_fuzz: seed %llu, budget %d per (index, base, class), %d keys per base\n",
              static_cast<unsigned long long>(cfg.seed), cfg.budget, cfg.keys);
  auto t0 = std::chrono::steady_clock::now();
  std::map<std::pair<std::string, std::string>, Cell> cells;
  int mutants = 0;
  for (const std::string& kind : kinds) {
    if (cfg.kv_only) break;
    auto bases = BuildBases(kind, cfg, dir);
    for (const Base& b : bases) {
      if (cfg.verbose)
        std::printf("%s/%s: %zu keys, %zu files, %zu pages in use\n", kind.c_str(), b.name.c_str(),
                    b.keys.size(), b.fs.files.size(), b.used_pages.size());
      for (const MutationClass& mc : kClasses) {
        if (!cfg.only_class.empty() && cfg.only_class != mc.name) continue;
        for (int n = 0; n < cfg.budget; ++n) {
          uint64_t mseed = Mix(cfg.seed ^ HashStr(kind + "/" + b.name + "/" + mc.name)) + n;
          Rng r(mseed);
          Mutant m;
          m.fs = b.fs;
          mc.fn(b, r, m, all_kinds);
          if (!m.applicable) break;
          if (mc.fn == MNone && n > 0) break;  // one control per base
          ++mutants;
          Result1 res = RunMutant(dir, path, m, b.keys, cfg);
          NoteSalvage(kind + "/" + b.name + "/" + mc.name + " #" + std::to_string(n) + " (" +
                          m.desc + ")",
                      res);
          if (mc.fn == MNone && res.outcome == Outcome::kRefused) {
            res = {Outcome::kFailed, "an undamaged pool was refused: " + res.detail};
          }
          Cell& c = cells[{kind, mc.name}];
          switch (res.outcome) {
            case Outcome::kRefused: ++c.refused; break;
            case Outcome::kIntact: ++c.intact; break;
            case Outcome::kFailed: ++c.failed; break;
          }
          const bool known = kKnownFailures.count(b.name + "/" + mc.name) != 0;
          if (res.outcome == Outcome::kFailed && !known) ++c.unknown;
          if (res.outcome == Outcome::kFailed && (cfg.verbose || !known || cfg.strict)) {
            std::printf("FAILED%s %s/%s/%s #%d (seed %llu): %s\n    %s\n", known ? " (known)" : "",
                        kind.c_str(), b.name.c_str(), mc.name, n,
                        static_cast<unsigned long long>(cfg.seed), m.desc.c_str(),
                        res.detail.c_str());
          } else if (cfg.verbose) {
            std::printf("%s %s/%s/%s #%d: %s%s%s\n",
                        res.outcome == Outcome::kRefused ? "refused" : "intact ", kind.c_str(),
                        b.name.c_str(), mc.name, n, m.desc.c_str(),
                        res.detail.empty() ? "" : " -> ", res.detail.c_str());
          }
          std::fflush(stdout);
        }
      }
    }
  }
  // KvStore pools over the --kv-kinds that --index selects.
  std::vector<std::string> kv_kinds;
  for (size_t at = 0; cfg.kv_kinds != "none" && at <= cfg.kv_kinds.size();) {
    const size_t comma = std::min(cfg.kv_kinds.find(',', at), cfg.kv_kinds.size());
    const std::string k = cfg.kv_kinds.substr(at, comma - at);
    at = comma + 1;
    if (k.empty()) continue;
    if (std::find(all_kinds.begin(), all_kinds.end(), k) == all_kinds.end()) {
      fs::remove_all(dir);
      return Usage(("--kv-kinds: no persistent index kind " + k).c_str());
    }
    if (cfg.only_index.empty() || cfg.only_index == k) kv_kinds.push_back(k);
  }
  KvTotals kvt;
  if (!kv_kinds.empty()) kvt = RunKvBlock(cfg, kv_kinds, all_kinds, dir, path);
  std::error_code ec;
  fs::remove_all(dir, ec);

  // The table: refused / opened-intact / FAILED per index x class.
  if (!cfg.kv_only) {
    std::printf("\n%-12s", "class");
    for (auto& k : kinds) std::printf(" %-14s", k.c_str());
    std::printf("\n");
  }
  int unexpected = 0, total_failed = 0;
  for (const MutationClass& mc : kClasses) {
    if (cfg.kv_only) break;
    if (!cfg.only_class.empty() && cfg.only_class != mc.name) continue;
    std::printf("%-12s", mc.name);
    for (auto& k : kinds) {
      auto it = cells.find({k, mc.name});
      if (it == cells.end()) {
        std::printf(" %-14s", "-");
        continue;
      }
      const Cell& c = it->second;
      char buf[40];
      std::snprintf(buf, sizeof buf, "%d/%d/%d%s", c.refused, c.intact, c.failed,
                    c.failed != 0 ? (c.unknown == 0 ? "k" : "!") : "");
      std::printf(" %-14s", buf);
      total_failed += c.failed;
      if (c.unknown != 0 || (c.failed != 0 && cfg.strict)) ++unexpected;
    }
    std::printf("\n");
  }
  mutants += kvt.mutants;
  total_failed += kvt.failed;
  unexpected += kvt.unexpected;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "\ncells: refused/opened-intact/FAILED; k = known failure (kKnownFailures), ! = unexpected\n"
      "%d mutants, %d failed, %.1f s\n",
      mutants, total_failed, secs);
  std::printf("salvage (ReadForSalvage on every mutant before its open): %d crashed, hung or "
              "refused without a message; %d copied less than the base held without saying so\n",
              g_salvage.failed, g_salvage.silent);
  if (unexpected != 0 || g_salvage.failed != 0) {
    std::printf("pool_fuzz: FAIL (%d failing cells outside the known failures, %d salvage "
                "failures)\n",
                unexpected, g_salvage.failed);
    return 1;
  }
  std::printf("pool_fuzz: ok\n");
  return 0;
}

}  // namespace
}  // namespace pmindex

int main(int argc, char** argv) { return pmindex::Main(argc, argv); }
