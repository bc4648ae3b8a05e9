// pmpool: create, inspect, verify and dump pmindex pool files
// (docs/architecture.md section 7, docs/pool-format.md).
//
//   pmpool create PATH --kind K [--options S] [--size 64M] [--max-size 64G]
//                      [--segment-size S] [--pool-id N]
//   pmpool info PATH     header fields; never writes
//   pmpool verify PATH   opens, recovers, runs the index's verify()
//   pmpool dump PATH     header and page-table summary; never writes
//
// Every failure prints one line "pmpool: ..." on stderr and exits 1;
// command-line errors (unknown command or option, missing argument, a bad
// value: --size 12Q, --size 1M, an unknown --kind, bad --options) exit 2.
// info and dump open the files read-only; no command opens a path that is
// not a regular file (a FIFO or a device is refused at once). verify closes the pool properly on every path and leaves a pool
// whose recovery failed marked unclean.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "alloc/page_word.h"
#include "alloc/size_classes.h"
#include "pm/pool_format.h"
#include "index/index.h"
#include "pm/pool.h"
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
};

int Create(const CreateArgs& a) {
  PoolOptions po;
  po.size = BytesOption("size", a.size);
  po.max_size = BytesOption("max-size", a.max_size);
  po.segment_size = BytesOption("segment-size", a.segment_size);
  po.pool_id = a.pool_id;
  auto pool = create_pool_for(a.kind, a.options, a.path, po);
  // InvalidArgument: a bad --kind, --options or size, found before any file
  // is written; a command-line error like the ones CLI11 finds.
  if (pool.status().is_invalid_argument()) {
    UsageFail("create " + a.path + ": " + pool.status().ToString());
  }
  if (!pool.ok()) Fail("create " + a.path, pool.status());
  auto idx = create_index(a.kind, a.options, pool.value().get());
  if (!idx.ok()) {
    // The file is ours and holds no index: do not leave it behind.
    (void)pool.value()->Close();
    unlink(a.path.c_str());
    Fail("create " + a.path, idx.status());
  }
  Status s = idx.value()->close();
  idx.value().reset();
  if (s.ok()) s = pool.value()->Close();
  if (!s.ok()) Fail("create " + a.path, s);
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

// Every path closes what it opened before exiting: the index (if it
// opened) and then the pool. The pool marks itself clean only after an
// index opened successfully and was closed; after a failed open_index it
// stays unclean (and, if nothing was written yet, unchanged).
int Verify(const std::string& path) {
  auto pool = Pool::Open(path);
  if (!pool.ok()) Fail(path, pool.status());
  std::unique_ptr<Pool> p = std::move(pool).value();
  bool was_clean = p->was_clean();
  auto idx = open_index(p.get());
  if (!idx.ok()) {
    Status c = p->Close();
    if (!c.ok()) std::fprintf(stderr, "pmpool: %s: close: %s\n", path.c_str(), c.ToString().c_str());
    Fail(path + ": open_index", idx.status());
  }
  std::unique_ptr<Index> index = std::move(idx).value();
  Status v = index->verify();
  IndexStats st;
  if (v.ok()) st = index->stats();
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
  std::vector<uint64_t> table(h.page_table_entries);
  size_t want = table.size() * sizeof(uint64_t);
  if (pread(fd, table.data(), want, pm::kHeaderSize) != static_cast<ssize_t>(want)) {
    Fail("cannot read the page table of " + path);
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
  for (uint64_t r : h.root) std::printf(" 0x%" PRIx64, r);
  std::printf("\n");

  uint64_t mapped = (info->size - h.heap_begin) / PoolOptions::kPageSize;
  uint64_t free_pages = 0, head_pages = 0, tail_pages = 0, spans = 0, bad = 0, beyond = 0;
  std::map<int, uint64_t> per_class;
  std::map<int, uint64_t> per_node;
  for (uint64_t i = 0; i < table.size(); ++i) {
    alloc::PageWord w;
    if (!alloc::PageWord::Decode(table[i], alloc::kNumClasses, &w)) {
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
  if (bad != 0) std::printf("  malformed page words: %" PRIu64 "\n", bad);
  if (beyond != 0) std::printf("  owned words beyond the mapped size: %" PRIu64 "\n", beyond);
  return 0;
}

}  // namespace
}  // namespace pmindex

int main(int argc, char** argv) {
  using namespace pmindex;
  CLI::App app{"pmpool: create, inspect, verify and dump pmindex pools"};
  app.set_version_flag("--version", std::string("pmpool (pmindex) ") + version(),
                       "Print the pmindex version and exit");
  app.require_subcommand(1);
  app.footer(
      "Exit status: 0 success; 1 the pool cannot be created, read or verified (one line\n"
      "\"pmpool: ...\" on stderr); 2 a command-line error: unknown command or option, missing\n"
      "argument, bad value (--size 12Q, a size below 4M, an unknown --kind, bad --options).\n"
      "info and dump never write; a path that is not a regular file (FIFO, device, socket,\n"
      "directory) is refused without being opened.");
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("pmpool: ") + e.what() + " (see --help)\n";
  });

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

  std::string path;
  auto* info = app.add_subcommand("info", "print the header (read-only)");
  info->add_option("PATH", path, "pool file")->required();
  auto* verify = app.add_subcommand("verify", "open, recover and verify the index");
  verify->add_option("PATH", path, "pool file")->required();
  auto* dump = app.add_subcommand("dump", "header and page-table summary (read-only)");
  dump->add_option("PATH", path, "pool file")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (create->parsed()) return Create(ca);
  if (info->parsed()) return Info(path);
  if (verify->parsed()) return Verify(path);
  if (dump->parsed()) return Dump(path);
  return 2;
}
