// pmpool: create, inspect, verify and dump pmindex pool files, and read and
// fill the index in one (docs/architecture.md section 7,
// docs/pool-format.md).
//
//   pmpool create PATH --kind K [--options S] [--size 64M] [--max-size 64G]
//                      [--segment-size S] [--pool-id N] [--kv]
//   pmpool info PATH     header fields; never writes
//   pmpool verify PATH   opens, recovers, runs the index's verify() (a
//                        store's pool: the store's), checks reachable
//                        against allocated blocks
//   pmpool dump PATH     header and page-table summary; never writes
//   pmpool salvage SRC DST [--fill F]   copies what is reachable in SRC into
//                        a new pool DST; never writes SRC
//   pmpool get PATH KEY... [--hex]         prints "KEY VALUE" per key
//   pmpool put PATH KEY VALUE [--no-overwrite]
//   pmpool del PATH KEY... [--ignore-missing]
//   pmpool scan PATH [--from K] [--to K] [--limit N] [--hex]
//   pmpool load PATH [FILE|-] [--no-overwrite]   "KEY VALUE" lines
//
// Every failure prints one line "pmpool: ..." on stderr and exits 1;
// command-line errors (unknown command or option, missing argument, a bad
// value: --size 12Q, --size 1M, an unknown --kind, bad --options, a key or
// value that is not a number in 0..2^64-1, a malformed line of load input)
// exit 2 before the pool is opened. get and del report each absent key on
// its own line ("pmpool: PATH: key K: not found"), still do the other keys,
// and then exit 1.
// info and dump open the files read-only; no command opens a path that is
// not a regular file (a FIFO or a device is refused at once). verify closes
// the pool properly on every path and leaves a pool whose recovery failed
// marked unclean. salvage maps SRC read-only and recovers a copy in memory.
// create, get/put/del/scan/load and salvage's new pool go through the user
// API (pmindex/db.h; verify and salvage's source need the internals, see
// Verify), and get/put/del/scan/load close the Db on every path after it
// opened, so the pool is marked clean again even when they fail. SIGINT or
// SIGTERM stops load after the pair it is writing, with the Db closed:
// exit 128 + the signal (130, 143), the count of pairs written on stderr.
// A key-value store's pool (create --kv, pmindex/kv.h) is shown by info
// ("holds: a key-value store"), verified by verify (the store's recovery
// and Verify, and the same block check over the index's and the store's
// blocks), and refused by salvage and the index commands (WrongKind: the
// index's values are the store's pointers; nothing is written).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <functional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "alloc/allocator.h"
#include "alloc/page_word.h"
#include "alloc/size_classes.h"
#include "pm/pool_format.h"
#include "index/index.h"
#include "index/salvage.h"
#include "kv/store.h"
#include "pm/pool.h"
#include "pmindex/db.h"
#include "pmindex/kv.h"
#include "pmindex/version.h"

namespace pmindex {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "pmpool: %s\n", what.c_str());
  std::exit(1);
}

[[noreturn]] void Fail(const std::string& ctx, const Status& s) { Fail(ctx + ": " + s.ToString()); }

// A command-line error found after parsing (exit 2, like CLI11's).
[[noreturn]] void UsageFail(const std::string& what) {
  std::fprintf(stderr, "pmpool: %s (see --help)\n", what.c_str());
  std::exit(2);
}

// "4194304", "64M", "64MiB", "1G", "512k" (binary multiples).
std::optional<uint64_t> ParseBytes(const std::string& s) {
  size_t i = 0;
  uint64_t v = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::string suffix = s.substr(i);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (!suffix.empty()) {
    switch (suffix[0]) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      case 'B': shift = 0; break;
      default: return std::nullopt;
    }
    std::string rest = suffix.substr(1);
    if (suffix[0] == 'B' ? !rest.empty() : !(rest.empty() || rest == "B" || rest == "IB")) {
      return std::nullopt;
    }
  }
  if (shift > 0 && v > (UINT64_MAX >> shift)) return std::nullopt;
  return v << shift;
}

std::string Human(uint64_t b) {
  char buf[64];
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double d = static_cast<double>(b);
  while (d >= 1024 && u < 4) {
    d /= 1024;
    ++u;
  }
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " B", b);
  } else {
    std::snprintf(buf, sizeof(buf), "%.4g %s (%" PRIu64 " bytes)", d, units[u], b);
  }
  return buf;
}

uint64_t BytesOption(const std::string& name, const std::string& text) {
  auto v = ParseBytes(text);
  if (!v) UsageFail("bad value '" + text + "' for --" + name + " (expected BYTES or e.g. 64M, 1G)");
  return *v;
}

// ------------------------------------------------------------------ create

struct CreateArgs {
  std::string path, kind, options, size = "64M", max_size = "64G", segment_size = "0";
  uint16_t pool_id = 1;
  bool kv = false;  // an empty key-value store over the index (KvStore::Create)
};

// create: through the user API, Db::Create, which validates kind, options
// and sizes before it writes a file and removes the pool again if the index
// cannot be created in it. Its InvalidArgument (a bad --kind, --options or
// size) is a command-line error like the ones CLI11 finds (exit 2). A
// volatile kind is refused the same way before Db::Create, whose message
// for it names a C++ call. The printed line reads the new header back, as
// `info` does.
int Create(const CreateArgs& a) {
  DbOptions o;
  o.size = BytesOption("size", a.size);
  o.max_size = BytesOption("max-size", a.max_size);
  o.segment_size = BytesOption("segment-size", a.segment_size);
  o.pool_id = a.pool_id;
  for (const KindInfo& k : Db::Kinds()) {
    if (k.name == a.kind && !k.persistent) {
      UsageFail("create " + a.path + ": " +
                Status::InvalidArgument("index kind \"" + k.name + "\" is volatile and has no pool")
                    .ToString());
    }
  }
  if (a.kv) {
    auto kv = KvStore::Create(a.path, a.kind, a.options, o);
    if (kv.status().is_invalid_argument()) UsageFail("create " + a.path + ": " + kv.status().ToString());
    if (!kv.ok()) Fail("create " + a.path, kv.status());
    if (Status s = kv.value()->Close(); !s.ok()) Fail("create " + a.path, s);
  } else {
    auto db = Db::Create(a.path, a.kind, a.options, o);
    if (db.status().is_invalid_argument()) {
      UsageFail("create " + a.path + ": " + db.status().ToString());
    }
    if (!db.ok()) Fail("create " + a.path, db.status());
    if (Status s = db.value()->Close(); !s.ok()) Fail("create " + a.path, s);
  }
  auto info = Pool::Inspect(a.path);
  if (!info.ok()) Fail("create " + a.path, info.status());
  std::printf("created %s: kind %s, options '%s', size %s, max size %s, %s\n", a.path.c_str(),
              info->kind.c_str(), info->index_options.c_str(), Human(info->size).c_str(),
              Human(info->max_size).c_str(), DurabilityName(info->durability));
  return 0;
}

// -------------------------------------------------------------------- info

void PrintInfo(const std::string& path, const Pool::Info& i) {
  std::printf("pool:          %s\n", path.c_str());
  std::printf("format:        version %u\n", i.format_version);
  std::printf("incompat:      0x%" PRIx64 "\n", i.incompat_flags);
  std::printf("uuid:          %s\n", i.uuid.c_str());
  std::printf("pool id:       %u\n", i.pool_id);
  std::printf("holds:         %s\n", (i.incompat_flags & pm::kIncompatKvStore) != 0
                                          ? "a key-value store (pmindex/kv.h) over the index below"
                                          : "an index (pmindex/db.h)");
  std::printf("kind:          %s\n", i.kind.empty() ? "(none)" : i.kind.c_str());
  std::printf("options:       %s\n", i.index_options.empty() ? "(none)" : i.index_options.c_str());
  std::printf("size:          %s in %u segment%s\n", Human(i.size).c_str(), i.segments,
              i.segments == 1 ? "" : "s");
  std::printf("segment size:  %s\n", Human(i.segment_size).c_str());
  std::printf("max size:      %s\n", Human(i.max_size).c_str());
  std::printf("durability:    %s\n", DurabilityName(i.durability));
  std::printf("clean:         %s\n",
              i.clean ? "yes (closed cleanly)" : "no (open now, or not closed cleanly)");
}

int Info(const std::string& path) {
  auto info = Pool::Inspect(path);
  if (!info.ok()) Fail(path, info.status());
  PrintInfo(path, info.value());
  return 0;
}

// ------------------------------------------------------------------ verify

// What verify checked besides the index's own verify(): the blocks
// reachable from the index's roots (Index::for_each_block) against the
// blocks the allocator holds after recovery, and what recovery found
// allocated but unreachable (alloc::RecoveryReport).
struct BlockCheck {
  uint64_t walked = 0, walked_bytes = 0;  // reachable, as the index walks them
  uint64_t not_blocks = 0;                // walked pointers that are no allocated block
  Status walk;                            // the walk's own Status
  alloc::AllocStats alloc;                // the allocator's blocks in use
};

// `walk` calls its function for every reachable block (Index::
// for_each_block, or kv::Store::ForEachBlock: the index's and the store's).
BlockCheck CheckBlocks(alloc::Allocator* a, const std::function<Status(const std::function<void(PPtr)>&)>& walk) {
  BlockCheck c;
  c.walk = walk([&](PPtr p) {
    ++c.walked;
    if (a->IsLive(p)) {
      c.walked_bytes += a->BlockSize(p);
    } else {
      ++c.not_blocks;
    }
  });
  c.alloc = a->stats();
  return c;
}

// The units recovery gave back, as one phrase.
std::string Units(const alloc::RecoveryReport& r) {
  return std::to_string(r.units()) + " allocated unit(s) unreachable (" +
         std::to_string(r.unreachable_pages) + " of " + std::to_string(r.class_pages) +
         " class pages without a reachable block, " + std::to_string(r.unreachable_spans) +
         " large block(s), " + std::to_string(r.orphan_runs) + " orphan span run(s))";
}

// verify stays on the library's internal API (Pool, open_index, Index, the
// allocator) instead of Db: it opens with a recovery bound
// (ReclaimBound::kAsIfClean) and compares the blocks the index reaches
// (Index::for_each_block) with the allocator's blocks in use and its
// recovery report, none of which a user of Db has or needs.
//
// Every path closes what it opened before exiting: the index (if it
// opened) and then the pool. The pool marks itself clean only after an
// index opened successfully and was closed; after a failed open_index it
// stays unclean (and, if nothing was written yet, unchanged).
//
// Recovery may give back only what a clean close leaves (IndexInfo::
// unreachable_after_clean: none, nvtree its snapshot block), even after a
// crash (ReclaimBound::kAsIfClean): more is refused before any write, so a
// pool whose reachable data was cut off fails instead of passing with the
// rest. After the open, every block reachable from the index must be an
// allocated block and every allocated block reachable.
// The hint for a refused open of a pool that was not closed cleanly.
std::string ReclaimHint(bool was_clean, const Status& s) {
  if (was_clean || s.message().find("would reclaim") == std::string_view::npos) return "";
  return " (verify allows only what a clean close leaves, also after a crash; this pool"
         " was not closed cleanly, so some may be allocations a crash left in flight, which"
         " any other open gives back; pmpool salvage copies what is reachable without"
         " writing the pool)";
}

void PrintBlocks(const BlockCheck& blocks, const alloc::RecoveryReport& rep) {
  std::printf("  reachable:   %" PRIu64 " blocks, %s (walked from the index's roots)\n",
              blocks.walked, Human(blocks.walked_bytes).c_str());
  std::printf("  allocated:   %" PRIu64 " blocks, %s in %" PRIu64 " pages (after recovery)\n",
              blocks.alloc.blocks_in_use, Human(blocks.alloc.bytes_in_use).c_str(),
              blocks.alloc.pages_owned);
  std::printf("  recovery:    %" PRIu64 " pages owned; gave back %s, at most %" PRIu64
              " allowed\n",
              rep.pages_owned, Units(rep).c_str(), rep.bound);
}

// Every walked block allocated, and every allocated block walked.
Status CompareBlocks(const BlockCheck& blocks) {
  if (!blocks.walk.ok()) return blocks.walk;
  if (blocks.not_blocks != 0)
    return Status::Corruption(std::to_string(blocks.not_blocks) + " of " + std::to_string(blocks.walked) +
                              " blocks reachable from the index are not allocated blocks");
  if (blocks.walked != blocks.alloc.blocks_in_use || blocks.walked_bytes != blocks.alloc.bytes_in_use)
    return Status::Corruption(std::to_string(blocks.walked) + " blocks (" + std::to_string(blocks.walked_bytes) +
                              " bytes) reachable from the index, but the allocator holds " +
                              std::to_string(blocks.alloc.blocks_in_use) + " (" +
                              std::to_string(blocks.alloc.bytes_in_use) + " bytes)");
  return Status::OK();
}

// verify of a key-value store's pool: the store's recovery (kv::Store::Open,
// which validates every block the index's values reach before anything is
// written) under the same bound, then the store's Verify (the index's,
// every record's chain, key order) and the same block comparison over the
// index's and the store's blocks.
int VerifyStore(const std::string& path, std::unique_ptr<Pool> p) {
  const bool was_clean = p->was_clean();
  auto opened = kv::Store::Open(p.get(), {}, ReclaimBound::kAsIfClean);
  if (!opened.ok()) {
    Status c = p->Close();
    if (!c.ok()) std::fprintf(stderr, "pmpool: %s: close: %s\n", path.c_str(), c.ToString().c_str());
    Fail(path + ": open the key-value store: " + opened.status().ToString() +
         ReclaimHint(was_clean, opened.status()));
  }
  std::unique_ptr<kv::Store> store = std::move(opened).value();
  const alloc::RecoveryReport rep = store->allocator()->recovery_report();
  Status v = store->Verify();
  KvStats st;
  BlockCheck blocks;
  if (v.ok()) {
    st = store->Stats();
    blocks = CheckBlocks(store->allocator(),
                         [&](const std::function<void(PPtr)>& fn) { return store->ForEachBlock(fn); });
    v = CompareBlocks(blocks);
  }
  Status s = store->Close();
  store.reset();
  Status c = p->Close();
  if (!v.ok()) Fail(path + ": verify", v);
  if (!s.ok()) Fail(path + ": close", s);
  if (!c.ok()) Fail(path + ": close", c);
  std::printf("%s: ok, key-value store over kind %s, %" PRIu64 " keys, %" PRIu64 " versions, %" PRIu64
              " index entries%s\n",
              path.c_str(), std::string(p->kind()).c_str(), st.keys, st.versions, st.index.entries,
              was_clean ? "" : " (recovered after an unclean shutdown)");
  PrintBlocks(blocks, rep);
  return 0;
}

int Verify(const std::string& path) {
  auto pool = Pool::Open(path);
  if (!pool.ok()) Fail(path, pool.status());
  std::unique_ptr<Pool> p = std::move(pool).value();
  if ((p->incompat_flags() & pm::kIncompatKvStore) != 0) return VerifyStore(path, std::move(p));
  bool was_clean = p->was_clean();
  auto idx = open_index(p.get(), {.bound = ReclaimBound::kAsIfClean});
  if (!idx.ok()) {
    Status c = p->Close();
    if (!c.ok()) std::fprintf(stderr, "pmpool: %s: close: %s\n", path.c_str(), c.ToString().c_str());
    Fail(path + ": open_index: " + idx.status().ToString() + ReclaimHint(was_clean, idx.status()));
  }
  std::unique_ptr<Index> index = std::move(idx).value();
  const alloc::RecoveryReport rep = index->allocator()->recovery_report();
  Status v = index->verify();
  IndexStats st;
  BlockCheck blocks;
  if (v.ok()) {
    st = index->stats();
    blocks = CheckBlocks(index->allocator(),
                         [&](const std::function<void(PPtr)>& fn) { return index->for_each_block(fn); });
    v = CompareBlocks(blocks);
  }
  Status s = index->close();
  index.reset();
  Status c = p->Close();
  if (!v.ok()) Fail(path + ": verify", v);
  if (!s.ok()) Fail(path + ": close", s);
  if (!c.ok()) Fail(path + ": close", c);
  std::printf("%s: ok, kind %s, %" PRIu64 " entries, height %u, %" PRIu64 " leaves, %" PRIu64
              " inner nodes%s\n",
              path.c_str(), std::string(p->kind()).c_str(), st.entries, st.height,
              st.leaves, st.inner_nodes, was_clean ? "" : " (recovered after an unclean shutdown)");
  PrintBlocks(blocks, rep);
  return 0;
}

// ----------------------------------------------------------------- salvage

struct SalvageArgs {
  std::string src, dst;
  std::string fill = "1";
};

// Removes DST and its segment files (a salvage that failed after creating
// it leaves nothing behind).
void RemovePool(const std::string& path) {
  for (uint64_t i = 1;; ++i) {
    std::string sp = path + "." + std::to_string(i);
    if (unlink(sp.c_str()) != 0) break;
  }
  unlink(path.c_str());
}

// salvage reads SRC through the internal API like verify
// (pmindex::ReadForSalvage, src/index/salvage.h, which the pool fuzzer runs
// on every mutant): it opens the index on a read-only image copy (Pool::OpenImage) without the recovery
// bound (ReclaimBound::kNone) and reports what recovery gave back (the
// allocator's report), which Db::Open cannot do. DST is an ordinary new
// pool, written through Db (Create, BulkLoad, Verify, Count, Close).
//
// salvage: copies every entry reachable in SRC into a new pool DST of the
// same kind, options and sizes. SRC is never written: its files are mapped
// read-only and copied into an in-memory image (Pool::OpenImage), and the
// index is opened and recovered on that copy without the recovery bound
// (ReclaimBound::kNone), so damage that cut data off loses only what it cut
// off. What the kind's own validation refuses (a bad node header, a bad
// root) cannot be opened and nothing is copied.
int Salvage(const SalvageArgs& a) {
  char* end = nullptr;
  errno = 0;
  const double fill = std::strtod(a.fill.c_str(), &end);
  if (errno != 0 || end == a.fill.c_str() || *end != '\0' || !(fill > 0 && fill <= 1)) {
    UsageFail("bad value '" + a.fill + "' for --fill (expected a number in (0, 1])");
  }
  struct stat dst_st;
  if (lstat(a.dst.c_str(), &dst_st) == 0) Fail(a.dst + ": already exists (salvage writes a new pool)");
  bool image_opened = false;
  auto read = ReadForSalvage(a.src, &image_opened);
  if (!read.ok()) {
    if (!image_opened) Fail(a.src, read.status());
    Fail(a.src + ": the index cannot be opened even without the recovery bound, nothing was "
                 "copied: " + read.status().ToString());
  }
  const SalvageRead& r = read.value();
  const std::vector<KV>& kv = r.entries;
  pm::PoolHeader h;  // the sizes and pool id of DST (ReadForSalvage checked it)
  {
    int fd = open(a.src.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) Fail("cannot open " + a.src + ": " + std::strerror(errno));
    ssize_t n = pread(fd, &h, sizeof(h), 0);
    close(fd);
    if (n != static_cast<ssize_t>(sizeof(h))) Fail("cannot read the header of " + a.src);
  }

  DbOptions o;
  o.size = h.first_size;
  o.max_size = h.max_size;
  o.segment_size = h.segment_size;
  o.pool_id = h.pool_id;
  // Db::Create removes what it made if it fails.
  auto dst = Db::Create(a.dst, r.kind, r.index_options, o);
  if (!dst.ok()) Fail("create " + a.dst, dst.status());
  Db& out = *dst.value();
  auto failed = [&](const std::string& what, const Status& s) {
    dst.value().reset();
    RemovePool(a.dst);
    Fail(a.dst + ": " + what + ": " + s.ToString() + "; " + a.dst + " was removed");
  };
  Status s = out.BulkLoad(kv, fill);
  if (s.ok()) s = out.Verify();
  if (s.ok()) {
    if (uint64_t n = out.Count(); n != kv.size()) {
      s = Status::Corruption("holds " + std::to_string(n) + " entries after loading " +
                             std::to_string(kv.size()));
    }
  }
  if (!s.ok()) failed("load", s);
  if (s = out.Close(); !s.ok()) failed("close", s);

  std::printf("%s -> %s: copied %zu entries (kind %s, options '%s')\n", a.src.c_str(),
              a.dst.c_str(), kv.size(), r.kind.c_str(), r.index_options.c_str());
  std::printf("  source:      read-only; the index was opened and recovered on a copy in memory "
              "(clean flag: %s)\n",
              r.clean ? "yes" : "no");
  if (r.repeated != 0) {
    std::printf("  repeated:    %" PRIu64 " keys scanned more than once (the first value kept)\n",
                r.repeated);
  }
  std::printf("  reached:     %" PRIu64 " entries scanned; the index counted %" PRIu64 "\n",
              static_cast<uint64_t>(kv.size() + r.repeated), r.index_entries);
  if (!r.scan_cut.empty()) {
    std::printf("  walk cut:    %s; entries after that point were not copied\n",
                r.scan_cut.c_str());
  }
  if (r.cut_subtrees != 0) {
    std::printf("  cut off:     %" PRIu64 " subtree(s) whose node failed its checks (not copied)\n",
                r.cut_subtrees);
  }
  if (r.content_differs) {
    std::printf("  content:     the record of the last clean close disagrees with the entries "
                "copied: some key or value was damaged or lost\n");
  }
  if (r.leaf_floor > r.leaves) {
    std::printf("  leaf floor:  %" PRIu64 " leaves were on the list before the crash, %" PRIu64
                " reached: entries of the others could not be copied\n",
                r.leaf_floor, r.leaves);
  }
  if (r.recorded != 0) {
    const uint64_t recorded = r.recorded;
    std::printf("  recorded:    %" PRIu64 " entries at the last clean close; %s\n", recorded,
                recorded > kv.size()
                    ? (std::to_string(recorded - kv.size()) + " could not be copied").c_str()
                    : "all were copied");
  }
  std::printf("  unreachable: %s; blocks in pages that also hold reachable ones are not "
              "counted\n",
              Units(r.report).c_str());
  std::printf("  source verify: %s\n", r.verify.ok() ? "ok" : r.verify.ToString().c_str());
  return 0;
}

// -------------------------------------------------------------------- dump

int Dump(const std::string& path) {
  auto info = Pool::Inspect(path);  // validates header, sizes and segments
  if (!info.ok()) Fail(path, info.status());
  PrintInfo(path, info.value());

  // Inspect refused anything but a regular file; O_NONBLOCK in case the
  // path was replaced by a FIFO since.
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) Fail("cannot open " + path + ": " + std::strerror(errno));
  struct stat fst;
  if (fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode)) Fail(path + " is not a regular file");
  pm::PoolHeader h;
  if (pread(fd, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h))) {
    Fail("cannot read the header of " + path);
  }
  // Both page-table copies (pool format 2), resolved word by word with the
  // rule open uses (alloc/page_word.h), so a damaged copy A is counted as
  // open would see the page.
  std::vector<uint64_t> table(h.page_table_entries), mirror(h.page_table_entries);
  size_t want = table.size() * sizeof(uint64_t);
  if (pread(fd, table.data(), want, pm::kHeaderSize) != static_cast<ssize_t>(want)) {
    Fail("cannot read the page table of " + path);
  }
  if (pread(fd, mirror.data(), want, static_cast<off_t>(pm::PageTableMirrorOffset(h.max_size))) !=
      static_cast<ssize_t>(want)) {
    Fail("cannot read the page table's second copy of " + path);
  }
  close(fd);

  std::time_t created = static_cast<std::time_t>(h.create_time);
  char when[64] = "?";
  if (std::tm tm; gmtime_r(&created, &tm) != nullptr) {
    std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
  }
  std::printf("created:       %s\n", when);
  std::printf("heap begins:   offset %" PRIu64 "\n", h.heap_begin);
  std::printf("root slots:   ");
  for (unsigned i = 0; i < pm::kRootSlotCount; ++i) {  // two copies each (pool_format.h)
    pm::RootRecord r{};
    bool repair = false;
    if (pm::ResolveRoot(i, h.root_a[i], h.root_b[i], &r, &repair)) std::printf(" 0x%" PRIx64, r.value);
  }
  std::printf("\n");

  uint64_t mapped = (info->size - h.heap_begin) / PoolOptions::kPageSize;
  uint64_t free_pages = 0, head_pages = 0, tail_pages = 0, spans = 0, bad = 0, beyond = 0;
  uint64_t differ = 0;
  std::map<int, uint64_t> per_class;
  std::map<int, uint64_t> per_node;
  for (uint64_t i = 0; i < table.size(); ++i) {
    uint64_t word = 0;
    const auto copies = alloc::PageWord::Resolve(table[i], mirror[i], alloc::kNumClasses, &word);
    if (copies != alloc::PageWord::Copies::kAgree) ++differ;
    alloc::PageWord w;
    if (copies == alloc::PageWord::Copies::kCorrupt || !alloc::PageWord::Decode(word, alloc::kNumClasses, &w)) {
      ++bad;
      continue;
    }
    if (i >= mapped) {
      if (w.kind != alloc::PageKind::kFree) ++beyond;
      continue;
    }
    if (w.kind != alloc::PageKind::kFree) ++per_node[w.node];
    switch (w.kind) {
      case alloc::PageKind::kFree: ++free_pages; break;
      case alloc::PageKind::kClass: ++per_class[w.size_class]; break;
      case alloc::PageKind::kSpanHead: ++spans; ++head_pages; break;
      case alloc::PageKind::kSpanTail: ++tail_pages; break;
    }
  }
  std::printf("pages:         %" PRIu64 " mapped of %zu possible (256 KiB each)\n", mapped,
              table.size());
  std::printf("  free:        %" PRIu64 "\n", free_pages);
  for (auto [c, n] : per_class) {
    std::printf("  class %2d:    %" PRIu64 " page%s of %u-byte blocks\n", c, n, n == 1 ? "" : "s",
                alloc::ClassSize(c));
  }
  std::printf("  large spans: %" PRIu64 " (%" PRIu64 " pages)\n", spans, head_pages + tail_pages);
  for (auto [node, n] : per_node) std::printf("  node %d:      %" PRIu64 " pages owned\n", node, n);
  if (differ != 0) std::printf("  words whose two copies differ: %" PRIu64 " (open repairs them)\n", differ);
  if (bad != 0) std::printf("  malformed page words: %" PRIu64 "\n", bad);
  if (beyond != 0) std::printf("  owned words beyond the mapped size: %" PRIu64 "\n", beyond);
  return 0;
}

// ------------------------------------------------- get/put/del/scan/load

// Keys and values: every uint64_t, written in decimal ("0",
// "18446744073709551615") or in hex with a 0x prefix ("0xffffffffffffffff").
// Nothing else: no sign, no spaces, no suffix, no overflow.
std::optional<uint64_t> ParseNumber(std::string_view s) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    unsigned d;
    if (c >= '0' && c <= '9') {
      d = static_cast<unsigned>(c - '0');
    } else if (base == 16 && c >= 'a' && c <= 'f') {
      d = static_cast<unsigned>(c - 'a' + 10);
    } else if (base == 16 && c >= 'A' && c <= 'F') {
      d = static_cast<unsigned>(c - 'A' + 10);
    } else {
      return std::nullopt;
    }
    if (v > (UINT64_MAX - d) / static_cast<unsigned>(base)) return std::nullopt;
    v = v * static_cast<unsigned>(base) + d;
  }
  return v;
}

constexpr const char* kNumberHint = "expected 0..18446744073709551615, decimal or 0x hex";

// A token quoted for a one-line message: control bytes shown as '?', long
// tokens cut.
std::string Quoted(std::string_view t) {
  std::string q = "'";
  for (size_t i = 0; i < t.size() && i < 40; ++i) {
    unsigned char c = static_cast<unsigned char>(t[i]);
    q += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
  }
  if (t.size() > 40) q += "...";
  return q + "'";
}

uint64_t NumberArg(const std::string& what, const std::string& text) {
  auto v = ParseNumber(text);
  if (!v) UsageFail("bad " + what + " " + Quoted(text) + " (" + kNumberHint + ")");
  return *v;
}

std::string Num(uint64_t v, bool hex) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), hex ? "0x%" PRIx64 : "%" PRIu64, v);
  return buf;
}

std::unique_ptr<Db> OpenDb(const std::string& path) {
  auto db = Db::Open(path);
  if (!db.ok()) Fail(path, db.status());
  return std::move(db).value();
}

// Closes the Db (so the pool is marked clean) and fails with one line that
// also carries a failed close's Status.
[[noreturn]] void FailClosing(std::unique_ptr<Db> db, const std::string& what) {
  Status c = db->Close();
  db.reset();
  Fail(c.ok() ? what : what + " (and close: " + c.ToString() + ")");
}

// stdout failed (errno = err) while the Db is open. A reader that went
// away (EPIPE: "pmpool scan P | head") ends the command quietly with the
// status a SIGPIPE death would give (128 + 13), the pool closed cleanly;
// any other error (a full disk) is a failure.
[[noreturn]] void StdoutFailed(std::unique_ptr<Db> db, const std::string& path, int err) {
  if (err == EPIPE) {
    Status c = db->Close();
    db.reset();
    if (!c.ok()) Fail(path + ": close", c);
    std::_Exit(128 + SIGPIPE);
  }
  FailClosing(std::move(db), std::string("cannot write to stdout: ") + std::strerror(err));
}

// The normal end of a command: stdout flushed, then the Db closed.
void Finish(std::unique_ptr<Db> db, const std::string& path) {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    StdoutFailed(std::move(db), path, errno != 0 ? errno : EIO);
  }
  Status c = db->Close();
  db.reset();
  if (!c.ok()) Fail(path + ": close", c);
}

// "KEY VALUE\n" on stdout.
void PrintPair(std::unique_ptr<Db>& db, const std::string& path, Key k, Value v, bool hex) {
  errno = 0;
  if (std::printf("%s %s\n", Num(k, hex).c_str(), Num(v, hex).c_str()) < 0) {
    StdoutFailed(std::move(db), path, errno != 0 ? errno : EIO);
  }
}

struct KeyArgs {
  std::string path;
  std::vector<std::string> keys;
  bool hex = false;
  bool ignore_missing = false;
};

// get: every key is parsed before the pool is opened. Prints "KEY VALUE"
// for each key found, in argument order; each absent key is one
// "pmpool: PATH: key K: not found" line, and the status is then 1.
int Get(const KeyArgs& a) {
  std::vector<Key> keys;
  for (const auto& t : a.keys) keys.push_back(NumberArg("key", t));
  auto db = OpenDb(a.path);
  int missing = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto v = db->Get(keys[i]);
    if (v.ok()) {
      PrintPair(db, a.path, keys[i], v.value(), a.hex);
    } else if (v.status().is_not_found()) {
      std::fprintf(stderr, "pmpool: %s: key %s: not found\n", a.path.c_str(), a.keys[i].c_str());
      ++missing;
    } else {
      FailClosing(std::move(db), a.path + ": key " + a.keys[i] + ": " + v.status().ToString());
    }
  }
  Finish(std::move(db), a.path);
  return missing == 0 ? 0 : 1;
}

// del: removes each key; an absent key is reported like get's (unless
// --ignore-missing) and the others are still removed.
int Del(const KeyArgs& a) {
  std::vector<Key> keys;
  for (const auto& t : a.keys) keys.push_back(NumberArg("key", t));
  auto db = OpenDb(a.path);
  int missing = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    Status s = db->Remove(keys[i]);
    if (s.is_not_found()) {
      if (a.ignore_missing) continue;
      std::fprintf(stderr, "pmpool: %s: key %s: not found\n", a.path.c_str(), a.keys[i].c_str());
      ++missing;
    } else if (!s.ok()) {
      FailClosing(std::move(db), a.path + ": key " + a.keys[i] + ": " + s.ToString());
    }
  }
  Finish(std::move(db), a.path);
  return missing == 0 ? 0 : 1;
}

struct PutArgs {
  std::string path, key, value;
  bool no_overwrite = false;
};

// put: an upsert; with --no-overwrite an insert, and a present key is a
// failure ("already exists") that changes nothing.
int Put(const PutArgs& a) {
  Key k = NumberArg("key", a.key);
  Value v = NumberArg("value", a.value);
  auto db = OpenDb(a.path);
  Status s = a.no_overwrite ? db->Insert(k, v) : db->Upsert(k, v);
  if (!s.ok()) FailClosing(std::move(db), a.path + ": key " + a.key + ": " + s.ToString());
  Finish(std::move(db), a.path);
  return 0;
}

struct ScanArgs {
  std::string path, from, to, limit;
  CLI::Option* from_opt = nullptr;
  CLI::Option* to_opt = nullptr;
  CLI::Option* limit_opt = nullptr;
  bool hex = false;
};

// scan: "KEY VALUE" lines in ascending key order for from <= KEY < to, at
// most --limit of them. --from above --to is a command-line error; equal
// bounds give an empty range.
int Scan(const ScanArgs& a) {
  Key from = a.from_opt->count() != 0 ? NumberArg("--from", a.from) : 0;
  std::optional<Key> to;
  if (a.to_opt->count() != 0) to = NumberArg("--to", a.to);
  uint64_t limit = a.limit_opt->count() != 0 ? NumberArg("--limit", a.limit) : UINT64_MAX;
  if (to && from > *to) UsageFail("--from " + a.from + " is above --to " + a.to);
  auto db = OpenDb(a.path);
  {
    std::unique_ptr<Iterator> it = db->NewIterator();
    uint64_t n = 0;
    for (it->Seek(from); n < limit && it->Valid(); it->Next(), ++n) {
      Key k = it->key();
      if (to && k >= *to) break;
      PrintPair(db, a.path, k, it->value(), a.hex);
    }
  }  // the iterator must not outlive the Db
  Finish(std::move(db), a.path);
  return 0;
}

struct LoadArgs {
  std::string path, input = "-";
  bool no_overwrite = false;
};

// The parsed input of load: the pairs in input order, each pair's line
// number (for messages), and whether the keys strictly ascend. The pairs
// are a vector of KV so that a bulk load takes them as they are.
struct LoadInput {
  std::vector<KV> pairs;
  std::vector<uint64_t> lines;
  bool ascending = true;
};

// Reads every "KEY VALUE" line of the input. A '#' starts a comment that
// runs to the end of its line; blank lines are skipped; fields are
// separated by spaces or tabs (a CR before the newline is allowed). A
// malformed line is a command-line error naming it (exit 2); an input that
// cannot be read is a failure (exit 1). Either way nothing was opened yet.
LoadInput ReadLoadInput(const std::string& input, const std::string& name) {
  FILE* f = stdin;
  if (input != "-") {
    f = std::fopen(input.c_str(), "re");
    if (f == nullptr) Fail(input + ": " + std::strerror(errno));
  }
  LoadInput in;
  char* buf = nullptr;
  size_t cap = 0;
  uint64_t lineno = 0;
  ssize_t len;
  errno = 0;
  while ((len = getline(&buf, &cap, f)) >= 0) {
    ++lineno;
    std::string_view line(buf, static_cast<size_t>(len));
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    std::vector<std::string_view> fields;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
      size_t start = i;
      while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
      if (i > start) fields.push_back(line.substr(start, i - start));
    }
    if (fields.empty()) continue;
    std::optional<Key> k;
    std::optional<Value> v;
    if (fields.size() == 2) {
      k = ParseNumber(fields[0]);
      v = ParseNumber(fields[1]);
    }
    if (!k || !v) {
      // The message is built while `fields` (views into buf) are valid.
      std::string what = name + ":" + std::to_string(lineno) + ": ";
      if (fields.size() != 2) {
        what += (fields.size() == 1 ? std::string("a key without a value")
                                    : std::to_string(fields.size()) + " fields") +
                " (expected 'KEY VALUE')";
      } else {
        what += std::string("bad ") + (!k ? "key " : "value ") + Quoted(!k ? fields[0] : fields[1]) +
                " (" + kNumberHint + ")";
      }
      std::free(buf);
      if (f != stdin) std::fclose(f);
      UsageFail(what + "; nothing was written");
    }
    if (!in.pairs.empty() && in.pairs.back().key >= *k) in.ascending = false;
    in.pairs.push_back({*k, *v});
    in.lines.push_back(lineno);
    errno = 0;
  }
  int err = errno;
  bool failed = std::ferror(f) != 0;
  std::free(buf);
  if (f != stdin) std::fclose(f);
  if (failed) Fail(name + ": cannot read: " + std::strerror(err != 0 ? err : EIO));
  return in;
}

// The signal that asked load to stop (SIGINT or SIGTERM), 0 if none. The
// handler only stores it: nothing else is async-signal-safe here.
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void OnStopSignal(int sig) { g_stop_signal = sig; }

// From now on SIGINT and SIGTERM only ask load to stop (g_stop_signal),
// once: the handler is reset after it ran (SA_RESETHAND), so a second
// signal ends the process at once, as it would without the handler.
// SA_RESTART: a system call under the pool (growing it) is not cut short.
void CatchStopSignals() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_RESTART;
  for (int sig : {SIGINT, SIGTERM}) {
    if (sigaction(sig, &sa, nullptr) != 0) Fail(std::string("sigaction: ") + std::strerror(errno));
  }
}

bool StopRequested() { return g_stop_signal != 0; }

// load: the whole input is read and checked first (nothing is opened
// before it parsed); then each pair is upserted in input order (a key
// given twice ends with its last value). With --no-overwrite every key
// must be new: a key given twice is a command-line error, and a key already
// in the pool fails before anything is written.
//
// When the index is empty and the keys strictly ascend (a sorted dump, a
// generated key range) the pairs go in with one Db::BulkLoad instead
// (nodes full, fill 1): far fewer flushes and no splits, and all or
// nothing (an index's bulk load takes all its space before it links
// anything, so out of space writes no pair). It reads no more memory than
// the upserts: both use the pairs already read, which load holds in
// memory anyway so that a malformed line is found before any write.
//
// SIGINT or SIGTERM (from the open on) stops it after the pair being
// written (a bulk load completes first): the Db is closed as on every
// other path, one line on stderr says how many pairs were written (durable:
// each completed upsert is, and the close syncs), and the exit status is
// 128 + the signal (130, 143), as a death by that signal would give.
int Load(const LoadArgs& a) {
  std::string name = a.input == "-" ? "stdin" : a.input;
  LoadInput in = ReadLoadInput(a.input, name);
  const std::vector<KV>& pairs = in.pairs;
  auto at = [&](size_t i) { return name + ":" + std::to_string(in.lines[i]); };
  if (a.no_overwrite && !in.ascending) {
    std::unordered_map<Key, size_t> first;
    first.reserve(pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i) {
      auto [it, fresh] = first.emplace(pairs[i].key, i);
      if (!fresh) {
        UsageFail(at(i) + ": key " + Num(pairs[i].key, false) + " repeats line " +
                  std::to_string(in.lines[it->second]) + " (--no-overwrite); nothing was written");
      }
    }
  }
  CatchStopSignals();
  auto db = OpenDb(a.path);
  std::vector<KV> probe;
  const bool bulk = !pairs.empty() && in.ascending && !StopRequested() &&
                    db->Range(0, std::nullopt, 1, &probe) == 0;
  if (a.no_overwrite && !bulk) {
    for (size_t i = 0; i < pairs.size() && !StopRequested(); ++i) {
      if (db->Exists(pairs[i].key)) {
        FailClosing(std::move(db), a.path + ": key " + Num(pairs[i].key, false) + " (" + at(i) +
                                       ") already exists (--no-overwrite); nothing was written");
      }
    }
  }
  uint64_t inserted = 0, replaced = 0;
  if (bulk) {
    Status s = db->BulkLoad(pairs);
    if (!s.ok()) {
      FailClosing(std::move(db), a.path + ": bulk load into the empty index: " + s.ToString() +
                                     "; 0 of " + std::to_string(pairs.size()) + " pairs written");
    }
    inserted = pairs.size();
  } else {
    for (size_t i = 0; i < pairs.size() && !StopRequested(); ++i) {
      const KV& p = pairs[i];
      Status s = db->Insert(p.key, p.value);
      if (s.is_already_exists() && !a.no_overwrite) {
        s = db->Upsert(p.key, p.value);
        if (s.ok()) ++replaced;
      } else if (s.ok()) {
        ++inserted;
      }
      if (!s.ok()) {
        FailClosing(std::move(db), a.path + ": key " + Num(p.key, false) + " (" + at(i) + "): " +
                                       s.ToString() + "; " + std::to_string(inserted + replaced) +
                                       " of " + std::to_string(pairs.size()) + " pairs written");
      }
    }
  }
  if (const int sig = g_stop_signal; sig != 0) {
    char what[160];
    std::snprintf(what, sizeof(what),
                  "interrupted by %s after %" PRIu64 " of %zu pairs (%" PRIu64 " inserted, %" PRIu64
                  " replaced)",
                  sig == SIGINT ? "SIGINT" : "SIGTERM", inserted + replaced, pairs.size(), inserted,
                  replaced);
    Status c = db->Close();
    db.reset();
    if (!c.ok()) Fail(a.path + ": " + what + "; close: " + c.ToString());
    std::fprintf(stderr, "pmpool: %s: %s; they are durable and the pool was closed cleanly\n",
                 a.path.c_str(), what);
    std::exit(128 + sig);
  }
  Finish(std::move(db), a.path);
  std::printf("%s: loaded %zu pair%s (%" PRIu64 " inserted, %" PRIu64 " replaced%s)\n",
              a.path.c_str(), pairs.size(), pairs.size() == 1 ? "" : "s", inserted, replaced,
              bulk ? "; one bulk load" : "");
  if (std::fflush(stdout) != 0) Fail(std::string("cannot write to stdout: ") + std::strerror(errno));
  return 0;
}

}  // namespace
}  // namespace pmindex

int main(int argc, char** argv) {
  using namespace pmindex;
  CLI::App app{
      "pmpool: create, inspect, verify, dump and salvage pmindex pools; read and fill their index"};
  app.set_version_flag("--version", std::string("pmpool (pmindex) ") + version(),
                       "Print the pmindex version and exit");
  app.require_subcommand(1);
  app.footer(
      "Keys and values are numbers in 0..18446744073709551615, decimal or 0x hex; output is\n"
      "decimal (--hex: hex). load reads lines \"KEY VALUE\" (spaces or tabs between, blank\n"
      "lines and # comments allowed) from FILE or stdin (no FILE, or -).\n"
      "verify fails (1) if the index's verify() does, if a block reachable from the index is\n"
      "not an allocated block or an allocated block is not reachable, or if recovery would\n"
      "give back more allocated-but-unreachable pages than a clean close leaves (none; nvtree\n"
      "1), also after a crash (refused before anything is written); it prints what it\n"
      "checked. salvage SRC DST maps SRC read-only, opens and recovers its index on a copy in\n"
      "memory without that bound, and bulk-loads every entry it reaches into a new pool DST of\n"
      "the same kind, options and sizes (DST must not exist; removed again if the load fails).\n"
      "Exit status: 0 success; 1 the pool cannot be created, opened, read or written, or\n"
      "verified, or (get, del) a key is absent, or (put, load --no-overwrite) present (one\n"
      "line \"pmpool: ...\" on stderr, one per absent key); 2 a command-line error: unknown\n"
      "command or option, missing argument, bad value (--size 12Q, a size below 4M, an\n"
      "unknown or volatile --kind, bad --options, a key that is not a number), a malformed\n"
      "line of load input (named by its number); the pool is not opened then; 130 or 143\n"
      "load stopped by SIGINT (Ctrl-C) or SIGTERM.\n"
      "load writes the pairs in input order, each as an upsert; into an empty index a\n"
      "strictly ascending input goes in as one bulk load instead (nodes full; all or\n"
      "nothing). SIGINT or SIGTERM stops load after the pair it is writing: it closes the\n"
      "pool cleanly, says on stderr how many pairs it wrote (all durable) and exits 130\n"
      "(SIGINT) or 143 (SIGTERM); a second signal ends it at once (the next open recovers).\n"
      "info and dump never write, nor does salvage to SRC; get and scan open the pool like\n"
      "any writer (recovery runs if it was not closed cleanly) and, like put, del and load,\n"
      "close it cleanly on every path. A path that is not a regular file (FIFO, device,\n"
      "socket, directory) is refused without being opened.");
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("pmpool: ") + e.what() + " (see --help)\n";
  });
  // A reader of stdout that goes away ("pmpool scan P | head") must not
  // kill pmpool with the pool open: writes then fail with EPIPE instead.
  std::signal(SIGPIPE, SIG_IGN);

  CreateArgs ca;
  auto* create = app.add_subcommand("create", "create a pool holding an empty index");
  create->add_option("PATH", ca.path, "pool file (must not exist)")->required();
  create->add_option("--kind", ca.kind, "index kind (see pmbench --list)")->required();
  create->add_option("--options", ca.options, "index options, key=value,...");
  create->add_option("--size", ca.size, "first segment size: BYTES, 64M, 1G (minimum 4M)")
      ->capture_default_str();
  create->add_option("--max-size", ca.max_size, "growth limit over all segments")
      ->capture_default_str();
  create->add_option("--segment-size", ca.segment_size, "size of added segments (0 = --size)")
      ->capture_default_str();
  create->add_option("--pool-id", ca.pool_id, "pool id stored in every pointer")
      ->capture_default_str();
  create->add_flag("--kv", ca.kv, "an empty key-value store over the index (pmindex/kv.h) instead");

  std::string path;
  auto* info = app.add_subcommand("info", "print the header (read-only)");
  info->add_option("PATH", path, "pool file")->required();
  auto* verify = app.add_subcommand(
      "verify",
      "open, recover and verify the index (or the key-value store); check reachable against allocated blocks");
  verify->add_option("PATH", path, "pool file")->required();
  auto* dump = app.add_subcommand("dump", "header and page-table summary (read-only)");
  dump->add_option("PATH", path, "pool file")->required();
  SalvageArgs va;
  auto* salvage = app.add_subcommand(
      "salvage", "copy every entry reachable in SRC into a new pool DST (SRC is never written)");
  salvage->add_option("SRC", va.src, "damaged pool file (read only)")->required();
  salvage->add_option("DST", va.dst, "new pool file (must not exist)")->required();
  salvage->add_option("--fill", va.fill, "node fill of DST's bulk load, in (0, 1]")
      ->capture_default_str();

  KeyArgs ga;
  auto* get = app.add_subcommand("get", "print \"KEY VALUE\" for each KEY (1 if one is absent)");
  get->add_option("PATH", ga.path, "pool file")->required();
  get->add_option("KEY", ga.keys, "keys to look up")->required();
  get->add_flag("--hex", ga.hex, "print keys and values in hex");

  PutArgs pa;
  auto* put = app.add_subcommand("put", "store VALUE under KEY (replacing an existing value)");
  put->add_option("PATH", pa.path, "pool file")->required();
  put->add_option("KEY", pa.key, "key")->required();
  put->add_option("VALUE", pa.value, "value")->required();
  put->add_flag("--no-overwrite", pa.no_overwrite, "fail if KEY is present (nothing changes)");

  KeyArgs da;
  auto* del = app.add_subcommand("del", "remove each KEY (1 if one was absent; the rest go)");
  del->add_option("PATH", da.path, "pool file")->required();
  del->add_option("KEY", da.keys, "keys to remove")->required();
  del->add_flag("--ignore-missing", da.ignore_missing, "an absent key is not an error");

  ScanArgs sa;
  auto* scan = app.add_subcommand("scan", "print \"KEY VALUE\" lines, ascending, from <= KEY < to");
  scan->add_option("PATH", sa.path, "pool file")->required();
  sa.from_opt = scan->add_option("--from", sa.from, "first key (default 0)");
  sa.to_opt = scan->add_option("--to", sa.to, "end key, not included (default: no end)");
  sa.limit_opt = scan->add_option("--limit", sa.limit, "print at most N pairs (default: all)");
  scan->add_flag("--hex", sa.hex, "print keys and values in hex");

  LoadArgs la;
  auto* load = app.add_subcommand(
      "load",
      "upsert \"KEY VALUE\" lines of FILE or stdin, or bulk-load them (all checked before any write)");
  load->add_option("PATH", la.path, "pool file")->required();
  load->add_option("FILE", la.input, "input file; - or none: stdin");
  load->footer(
      "The whole input is read and checked before the pool is opened (a malformed line: exit\n"
      "2, nothing written). The pairs are then written in input order, each as an upsert; into\n"
      "an empty index a strictly ascending input goes in as one bulk load (nodes full; all or\n"
      "nothing). SIGINT (Ctrl-C) or SIGTERM stops load after the pair it is writing: it closes\n"
      "the pool cleanly, prints on stderr how many pairs it wrote (all of them durable) and\n"
      "exits 130 (SIGINT) or 143 (SIGTERM); a second signal ends it at once, as after a crash\n"
      "(the next open recovers the pairs written).");
  load->add_flag("--no-overwrite", la.no_overwrite,
                 "insert only: a key present in the pool or given twice fails before any write");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (create->parsed()) return Create(ca);
  if (info->parsed()) return Info(path);
  if (verify->parsed()) return Verify(path);
  if (dump->parsed()) return Dump(path);
  if (salvage->parsed()) return Salvage(va);
  if (get->parsed()) return Get(ga);
  if (put->parsed()) return Put(pa);
  if (del->parsed()) return Del(da);
  if (scan->parsed()) return Scan(sa);
  if (load->parsed()) return Load(la);
  return 2;
}
