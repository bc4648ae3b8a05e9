// pmbench: runs registered indexes on one generated workload and reports
// throughput, sampled latency, per-operation persistence costs, space and
// recovery time (docs/architecture.md section 7, docs/benchmarking.md).
//
// Exit status: 0 success; 1 some phase returned wrong results (a present
// key not found, an insert of a fresh key refused, ...); 2 a usage or
// environment error (one line on stderr), including out of space in a pool
// and out of memory (e.g. --keys beyond what the process may allocate).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "bench.h"
#include "cli.h"
#include "alloc/allocator.h"
#include "alloc/numa_meter.h"
#include "pm/persist.h"
#include "index/options.h"
#include "pm/pool.h"
#include "index/registry.h"
#include "pmindex/version.h"
#include "workload.h"

namespace {

namespace fs = std::filesystem;
using pmindex::Registry;
using pmindex::Status;
using pmindex::bench::BenchConfig;

[[noreturn]] void Fail(const std::string& msg) {
  std::fprintf(stderr, "pmbench: error: %s\n", msg.c_str());
  std::exit(2);
}

// A temporary pool directory removed when main returns.
struct TempDir {
  std::string path;
  ~TempDir() {
    if (!path.empty()) {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  }
};

std::string KnownIndexes() {
  std::string s;
  for (const pmindex::IndexInfo* i : Registry::Get().All()) s += (s.empty() ? "" : ", ") + i->name;
  return s;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  while (true) {
    size_t e = s.find(sep, b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

// Reads the first `want` 8-byte little-endian keys of `path` (all of them
// if want is UINT64_MAX). Errors: missing/unreadable file, a size that is
// not a multiple of 8, fewer keys than wanted.
std::vector<pmindex::Key> ReadKeyFile(const std::string& path, uint64_t want, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(path, ec)) Fail(what + " '" + path + "' does not exist");
  if (fs::is_directory(path, ec)) Fail(what + " '" + path + "' is a directory");
  const uint64_t bytes = fs::file_size(path, ec);
  if (ec) Fail(what + " '" + path + "': " + ec.message());
  if (bytes % 8 != 0)
    Fail(what + " '" + path + "' has " + std::to_string(bytes) +
         " bytes, not a whole number of 8-byte keys (raw little-endian uint64 expected)");
  const uint64_t have = bytes / 8;
  if (want == UINT64_MAX) want = have;
  if (have < want)
    Fail(what + " '" + path + "' has " + std::to_string(have) + " keys, " + std::to_string(want) +
         " needed");
  std::vector<pmindex::Key> keys(want);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) Fail(what + " '" + path + "' cannot be opened");
  const size_t got = want == 0 ? 0 : std::fread(keys.data(), 8, want, f);
  std::fclose(f);
  if (got != want) Fail(what + " '" + path + "': short read");
  if constexpr (std::endian::native != std::endian::little)
    for (auto& k : keys) k = __builtin_bswap64(k);
  return keys;
}

// --write-keys: N distinct random keys in [1, 2^63) (below 2^63 so that
// programs comparing keys as signed 64-bit integers order them as pmbench
// does; never 0, which some originals treat as "no value"), in random
// order, raw little-endian uint64.
int WriteKeys(const std::string& path, uint64_t n, uint64_t seed) {
  namespace wl = pmindex::workload;
  wl::Rng rng(wl::DeriveSeed(seed, 0x6b657966696c65ull));
  std::vector<uint64_t> keys;
  keys.reserve(n);
  while (keys.size() < n) {
    while (keys.size() < n) {
      uint64_t k = rng.Next() >> 1;
      if (k != 0) keys.push_back(k);
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  }
  for (uint64_t i = n; i > 1; --i) std::swap(keys[i - 1], keys[rng.Below(i)]);
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) Fail("cannot write --write-keys file '" + path + "'");
  if constexpr (std::endian::native != std::endian::little)
    for (auto& k : keys) k = __builtin_bswap64(k);
  const bool ok = (n == 0 || std::fwrite(keys.data(), 8, n, f) == n) && std::fclose(f) == 0;
  std::error_code ec;
  if (!ok) {
    fs::remove(tmp, ec);
    Fail("cannot write --write-keys file '" + path + "'");
  }
  fs::rename(tmp, path, ec);
  if (ec) Fail("cannot write --write-keys file '" + path + "': " + ec.message());
  std::printf("pmbench: wrote %llu distinct random keys in [1, 2^63) to %s (raw little-endian uint64)\n",
              static_cast<unsigned long long>(n), path.c_str());
  return 0;
}

void ResolveIndexes(BenchConfig& cfg) {
  std::set<std::string> seen;
  for (const std::string& raw : Split(cfg.index_arg, ',')) {
    if (raw == "all") {
      for (const pmindex::IndexInfo* i : Registry::Get().All())
        if (seen.insert(i->name).second) cfg.indexes.push_back(i->name);
      continue;
    }
    if (raw.empty()) Fail("bad --index '" + cfg.index_arg + "': empty name");
    const pmindex::IndexInfo* info = Registry::Get().Find(raw);
    if (info == nullptr) Fail("unknown index '" + raw + "' (known: " + KnownIndexes() + ")");
    if (seen.insert(raw).second) cfg.indexes.push_back(raw);
  }
  if (cfg.indexes.empty()) Fail("no index selected (known: " + KnownIndexes() + ")");
}

// --opt k=v,...        applies to every selected index that takes options
// --opt INDEX:k=v,...  applies to INDEX only (and overrides the above)
void ResolveOptions(BenchConfig& cfg) {
  std::string common;
  std::map<std::string, std::string> specific;
  for (const std::string& a : cfg.opt_args) {
    auto colon = a.find(':');
    auto eq = a.find('=');
    if (colon != std::string::npos && (eq == std::string::npos || colon < eq)) {
      std::string name = a.substr(0, colon);
      if (std::find(cfg.indexes.begin(), cfg.indexes.end(), name) == cfg.indexes.end())
        Fail("--opt '" + a + "' names index '" + name + "', which is not in --index");
      std::string& dst = specific[name];
      dst += (dst.empty() ? "" : ",") + a.substr(colon + 1);
    } else {
      common += (common.empty() ? "" : ",") + a;
    }
  }
  for (const std::string& name : cfg.indexes) {
    const pmindex::IndexInfo* info = Registry::Get().Find(name);
    std::string text;
    if (info->validate || specific.count(name)) text = common;
    if (specific.count(name)) {
      // Specific keys override common ones.
      auto sp = pmindex::Options::Parse(specific[name]);
      if (!sp.ok()) Fail("bad --opt for " + name + ": " + sp.status().ToString());
      auto cm = pmindex::Options::Parse(text);
      if (!cm.ok()) Fail("bad --opt: " + cm.status().ToString());
      pmindex::Options merged;
      for (const auto& [k, v] : cm.value().items())
        if (!sp.value().has(k)) merged.set(k, v);
      for (const auto& [k, v] : sp.value().items()) merged.set(k, v);
      text = merged.ToString();
    }
    auto parsed = pmindex::Options::Parse(text);
    if (!parsed.ok()) Fail("bad --opt for " + name + ": " + parsed.status().ToString());
    if (!parsed.value().items().empty()) {
      if (!info->validate) Fail("index " + name + " takes no options (got '" + text + "')");
      Status s = info->validate(parsed.value());
      if (!s.ok())
        Fail("bad --opt for " + name + ": " + std::string(s.message().empty() ? s.ToString() : s.message()) +
             (info->options_help.empty() ? "" : " (accepted: " + info->options_help + ")"));
    }
    cfg.index_options[name] = parsed.value().ToString();
  }
}

void PreparePoolDir(BenchConfig& cfg, TempDir& tmp) {
  bool any_persistent = false;
  for (const std::string& n : cfg.indexes) any_persistent |= Registry::Get().Find(n)->persistent;
  if (cfg.pool_dir.empty()) {
    if (!any_persistent) return;
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/pmbench-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) Fail("cannot create a temporary pool directory in " + templ);
    cfg.pool_dir = tmp.path = buf.data();
    cfg.pool_dir_is_temp = true;
    return;
  }
  std::error_code ec;
  if (!fs::exists(cfg.pool_dir, ec)) {
    fs::create_directories(cfg.pool_dir, ec);
    if (ec) Fail("cannot create --pool directory '" + cfg.pool_dir + "': " + ec.message());
  }
  if (!fs::is_directory(cfg.pool_dir, ec)) Fail("--pool '" + cfg.pool_dir + "' is not a directory");
  // Probe by creating a file: access() says yes to root on read-only trees.
  std::string probe = (fs::path(cfg.pool_dir) / ".pmbench-probe-XXXXXX").string();
  std::vector<char> pb(probe.begin(), probe.end());
  pb.push_back('\0');
  int fd = mkstemp(pb.data());
  if (access(cfg.pool_dir.c_str(), W_OK | X_OK) != 0 || fd < 0)
    Fail("--pool directory '" + cfg.pool_dir + "' is not writable");
  close(fd);
  unlink(pb.data());
}

// Plans every phase once (generating the ops, executing nothing) so that a
// workload the key set cannot serve fails before any index is loaded.
void DryRun(const BenchConfig& cfg, std::shared_ptr<const pmindex::workload::Workload> w) {
  using namespace pmindex::workload;
  State s = w->InitialState();
  const bool time_mode = cfg.duration_s > 0;
  const KeySpace& ks = w->keyspace();
  for (size_t p = 1; p <= w->config().phases.size(); ++p) {
    auto plan = w->Plan(s, p, cfg.threads, time_mode);
    if (!plan.ok()) Fail(std::string(plan.status().message()));
    std::vector<std::unique_ptr<OpStream>> streams;
    std::vector<const OpStream*> sp;
    if (!time_mode) {
      for (unsigned t = 0; t < cfg.threads; ++t) {
        streams.push_back(std::make_unique<OpStream>(w, plan.value(), t));
        Op op;
        while (streams.back()->Next(&op)) {
          // A generated insert must not hit a key of --keys-file (random
          // 64-bit keys: only by a ~N*M/2^64 chance).
          if (op.type == OpType::kInsert && plan.value().file_keys == nullptr &&
              ks.table_size() != 0 && ks.in_table(op.key))
            Fail("a generated insert key is a --keys-file key (" + std::to_string(op.key) +
                 "); use another --seed");
        }
        sp.push_back(streams.back().get());
      }
    }
    w->Commit(&s, plan.value(), sp);
  }
}

int Main(int argc, char** argv) {
  BenchConfig cfg;
  bool list = false;
  std::string fill_text = "0.7";
  CLI::App app{
      "pmbench: runs persistent-memory indexes on one generated workload and reports throughput,\n"
      "latency percentiles, cache lines flushed / fences / NAWs per operation, PM and DRAM bytes\n"
      "and recovery time (docs/benchmarking.md)."};
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", std::string("pmbench (pmindex) ") + pmindex::version(),
                       "Print the pmindex version and exit");
  app.add_flag("--list", list, "Print the registered indexes (name, persistent|volatile, options) and exit");
  app.add_option("--index", cfg.index_arg, "Comma list of indexes, or 'all'");
  app.add_option("--keys", cfg.keys, "Keys bulk-loaded before the first phase");
  app.add_option("--fill", fill_text, "Bulk-load fill factor, in (0, 1]");
  app.add_option("--workload", cfg.workload,
                 "insert|lookup|update|delete|scan|rmw|ycsb-a..ycsb-f|dense-insert|"
                 "mix:insert=50,lookup=50, or a phase sequence insert:1000000,lookup:500000; "
                 "PHASE@DIST gives one phase its own --dist (update:100000@hotrange:0.05:0.95:0.5)");
  app.add_option("--ops", cfg.ops, "Operations per phase (phases without their own :OPS)");
  app.add_option("--duration", cfg.duration_s,
                 "Time mode: run each phase for SECS seconds instead of --ops operations");
  app.add_option("--dist", cfg.dist,
                 "uniform|zipf[:THETA]|latest|sequential|hotspot:F[:P]|hotrange:F[:P[:S]] "
                 "(hotspot: F*n hot keys scattered over the key space; hotrange: F*n hot keys "
                 "contiguous in key order from position S*n, and a share P of inserts get fresh keys in that "
                 "range; P = their share of reads, default 0.95)|threadrange[:P[:K]] (thread t of T reads the "
                 "key-order slice (t+K) mod T of the present keys with probability P)");
  app.add_option("--keyspace", cfg.keyspace,
                 "random (distinct random 64-bit keys) or dense (1..N); dense-insert implies dense");
  app.add_option("--threads", cfg.threads, "Worker threads per phase");
  app.add_option("--repeat", cfg.repeat, "Runs per index, each on a fresh index; medians reported");
  app.add_option("--pm-write-ns", cfg.pm_write_ns,
                 "Emulated extra PM write latency per flushed line (the fixed model's constant)");
  app.add_option("--pm-model", cfg.pm_model,
                 "PM cost model: dram (no cost), fixed (--pm-write-ns per flushed line; the "
                 "default), "
                 "xpline (Optane: per 256 B block written back between fences, per PM line read "
                 "missing from a modelled cache; docs/persistence-model.md)");
  app.add_option("--pm-block-write-ns", cfg.pm_block_write_ns,
                 "xpline: cost of one 256 B media block write (default 111)");
  app.add_option("--pm-read-ns", cfg.pm_read_ns,
                 "xpline: cost of the first missed PM line of a node visit (default 224)");
  app.add_option("--pm-read-seq-ns", cfg.pm_read_seq_ns,
                 "xpline: cost of each further missed line of the same visit (default 90)");
  app.add_option("--pm-cache-kb", cfg.pm_cache_kb,
                 "xpline: modelled CPU cache (shared by the threads) in KiB (default 39936, "
                 "39 MiB; 0: none)");
  app.add_flag("--eadr", cfg.eadr, "eADR mode: flushes are no-ops, fences stay");
  app.add_option("--numa-nodes", cfg.numa_nodes,
                 "Simulate N NUMA nodes (2..64): pools' pages split among them, worker thread t on node "
                 "t % N, PM node visits of the indexes that meter them counted local or remote "
                 "(default: the machine's nodes, unmetered)");
  app.add_option("--remote-ns", cfg.remote_ns,
                 "With --numa-nodes: emulated extra latency per remote PM node visit");
  app.add_option("--pool", cfg.pool_dir,
                 "Directory for pool files (default: a fresh temporary directory, removed at exit)");
  app.add_option("--pool-size-mb", cfg.pool_size_mb, "First pool segment in MiB (0: sized from --keys)");
  app.add_option("--pool-max-mb", cfg.pool_max_mb,
                 "Growth limit of each pool in MiB (0: the pool default, 64 GiB)");
  app.add_option("--opt", cfg.opt_args,
                 "Index options k=v,... for every index that takes options, or INDEX:k=v,... for one; "
                 "repeatable");
  app.add_option("--json", cfg.json_path, "Write the results as JSON to this file");
  app.add_option("--seed", cfg.seed, "Workload seed (same seed, same keys and operations)");
  app.add_option("--scan-len", cfg.scan_len, "Pairs per scan operation");
  app.add_option("--latency-every", cfg.latency_every, "Time one operation in every N");
  bool no_check = false;
  app.add_flag("--no-check", no_check, "Do not check operation results");
  app.add_flag("--verify", cfg.verify, "Run verify() on each index after its last phase");
  app.add_option("--keys-file", cfg.keys_file,
                 "Bulk-load the first --keys keys (all if --keys is not given) of FILE, raw "
                 "little-endian uint64 (the originals' key files); sorted and deduplicated");
  app.add_option("--op-keys", cfg.op_keys_args,
                 "TYPE=FILE[,TYPE=FILE...] (TYPE: lookup, insert, update, delete, scan, rmw): every "
                 "phase named TYPE (TYPE, TYPE:OPS) takes its keys from FILE in file order, not from "
                 "the generator (later phases continue where earlier ones stopped); repeatable");
  std::string write_keys;
  app.add_option("--write-keys", write_keys,
                 "Write --keys distinct random keys in [1, 2^63) (seed --seed) to FILE in that raw "
                 "format and exit");
  app.add_option("--api", cfg.api,
                 "index (default): drive each index through the plug-in interface (create_pool_for, "
                 "create_index, open_index); db: through the user's handle pmindex::Db (Db::Create, "
                 "CreateInMemory for volatile kinds, Db::Open), to compare the two");
  app.add_flag("--crash-reopen", cfg.crash_reopen,
               "Persistent indexes: after the last phase, also open a copy of the still-open pool "
               "(as a killed process leaves it: no close, clean flag unset) and report the time "
               "of open_index as crash_recovery_s");

  pmindex::bench::RequireNotNegative(
      app,
      {"--keys", "--ops", "--threads", "--repeat", "--pm-write-ns", "--numa-nodes", "--remote-ns",
       "--pool-size-mb", "--pool-max-mb", "--seed", "--scan-len", "--latency-every",
       "--pm-block-write-ns", "--pm-read-ns", "--pm-read-seq-ns", "--pm-cache-kb"});

  if (!pmindex::bench::ParseCommandLine(app, argc, argv, "pmbench")) return 0;
  cfg.check = !no_check;
  const bool keys_given = app.count("--keys") != 0;
  if (!write_keys.empty()) {
    if (cfg.keys > (uint64_t{1} << 34)) Fail("bad --keys: at most 2^34 keys");
    return WriteKeys(write_keys, cfg.keys, cfg.seed);
  }

  if (list) {
    for (const pmindex::IndexInfo* i : Registry::Get().All())
      std::printf("%s %s %s\n", i->name.c_str(), i->persistent ? "persistent" : "volatile",
                  i->options_help.c_str());
    return 0;
  }

  char* end = nullptr;
  cfg.fill = std::strtod(fill_text.c_str(), &end);
  if (fill_text.empty() || *end != '\0' || !(cfg.fill > 0 && cfg.fill <= 1))
    Fail("bad --fill '" + fill_text + "': must be a number in (0, 1]");
  if (cfg.threads < 1 || cfg.threads > 1024) Fail("bad --threads: must be in [1, 1024]");
  if (cfg.repeat < 1 || cfg.repeat > 1000) Fail("bad --repeat: must be in [1, 1000]");
  if (cfg.ops < 1) Fail("bad --ops: must be >= 1");
  if (!(cfg.duration_s >= 0) || cfg.duration_s > 86400) Fail("bad --duration: must be in [0, 86400] seconds");
  if (cfg.scan_len < 1 || cfg.scan_len > 1000000) Fail("bad --scan-len: must be in [1, 1000000]");
  if (cfg.latency_every < 1) Fail("bad --latency-every: must be >= 1");
  if (cfg.pm_write_ns > 100000) Fail("bad --pm-write-ns: must be <= 100000");
  pmindex::pm::PmModel pm_model = pmindex::pm::PmModel::kFixed;
  if (!pmindex::pm::ParsePmModel(cfg.pm_model.c_str(), &pm_model))
    Fail("bad --pm-model '" + cfg.pm_model + "': must be dram, fixed or xpline");
  if (cfg.pm_write_ns != 0 && pm_model != pmindex::pm::PmModel::kFixed)
    Fail("bad --pm-write-ns: it is the fixed model's constant (--pm-model fixed)");
  if (cfg.pm_block_write_ns > 100000 || cfg.pm_read_ns > 100000 || cfg.pm_read_seq_ns > 100000)
    Fail("bad --pm-block-write-ns / --pm-read-ns / --pm-read-seq-ns: must be <= 100000");
  if (cfg.pm_cache_kb > (uint64_t{1} << 24))
    Fail("bad --pm-cache-kb: must be <= 16777216 (16 GiB)");
  if (cfg.numa_nodes > 64) Fail("bad --numa-nodes: must be <= 64");
  if (cfg.remote_ns > 100000) Fail("bad --remote-ns: must be <= 100000");
  if (cfg.remote_ns > 0 && cfg.numa_nodes < 2) Fail("bad --remote-ns: needs --numa-nodes 2 or more");
  if (cfg.api != "index" && cfg.api != "db") Fail("bad --api '" + cfg.api + "': must be index or db");
  if (cfg.keyspace != "random" && cfg.keyspace != "dense")
    Fail("bad --keyspace '" + cfg.keyspace + "': must be random or dense");
  if (cfg.keys > (uint64_t{1} << 34)) Fail("bad --keys: at most 2^34 keys");
  if (cfg.pool_max_mb != 0 && cfg.pool_max_mb < (pmindex::PoolOptions::kMinSize >> 20))
    Fail("bad --pool-max-mb: at least " + std::to_string(pmindex::PoolOptions::kMinSize >> 20) + " MiB");
  if (cfg.pool_size_mb != 0 && cfg.pool_size_mb < (pmindex::PoolOptions::kMinSize >> 20))
    Fail("bad --pool-size-mb: at least " + std::to_string(pmindex::PoolOptions::kMinSize >> 20) + " MiB");

  ResolveIndexes(cfg);
  ResolveOptions(cfg);

  namespace wl = pmindex::workload;
  auto dist = wl::ParseDistribution(cfg.dist);
  if (!dist.ok()) Fail(std::string(dist.status().message()));
  auto phases = wl::ParseWorkload(cfg.workload);
  if (!phases.ok()) Fail(std::string(phases.status().message()));
  wl::WorkloadConfig wc;
  wc.keys = cfg.keys;
  wc.key_kind = cfg.keyspace == "dense" ? wl::KeyKind::kDense : wl::KeyKind::kRandom;
  wc.dist = dist.value();
  wc.phases = phases.value();
  wc.default_ops = cfg.ops;
  wc.scan_len = cfg.scan_len;
  wc.seed = cfg.seed;
  if (!cfg.keys_file.empty()) {
    if (cfg.keyspace != "random") Fail("--keys-file needs --keyspace random");
    std::vector<pmindex::Key> keys =
        ReadKeyFile(cfg.keys_file, keys_given ? cfg.keys : UINT64_MAX, "--keys-file");
    const uint64_t asked = keys.size();
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    if (keys.size() != asked) {
      if (keys_given)
        Fail("--keys-file '" + cfg.keys_file + "': its first " + std::to_string(asked) + " keys hold only " +
             std::to_string(keys.size()) + " distinct keys");
      std::fprintf(stderr, "pmbench: --keys-file '%s': %llu duplicate keys dropped, %llu distinct keys\n",
                   cfg.keys_file.c_str(), static_cast<unsigned long long>(asked - keys.size()),
                   static_cast<unsigned long long>(keys.size()));
    }
    cfg.keys = wc.keys = keys.size();
    wc.key_file = std::make_shared<const std::vector<pmindex::Key>>(std::move(keys));
  }
  // --op-keys: per op type, a file read once; phases of that single type
  // take consecutive slices of it.
  std::map<std::string, std::shared_ptr<const std::vector<pmindex::Key>>> op_files;
  {
    std::map<std::string, std::string> files;
    for (const std::string& arg : cfg.op_keys_args) {
      for (const std::string& item : Split(arg, ',')) {
        auto eq = item.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
          Fail("bad --op-keys '" + arg + "': expected TYPE=FILE[,TYPE=FILE...]");
        std::string type = item.substr(0, eq);
        auto mix = wl::ParseMix(type);
        if (type == "dense-insert" || !mix.ok() || type.find(':') != std::string::npos ||
            type.starts_with("ycsb"))
          Fail("bad --op-keys '" + arg + "': unknown operation '" + type +
               "' (expected lookup, insert, update, delete, scan or rmw)");
        if (files.count(type)) Fail("bad --op-keys: '" + type + "' given twice");
        files[type] = item.substr(eq + 1);
      }
    }
    // A phase uses the file of its type if it is named exactly that type
    // ("lookup", "lookup:1000", "lookup@zipf"; not ycsb-c or mix:lookup=1).
    for (const auto& [type, file] : files) {
      uint64_t need = 0;
      for (const wl::PhaseSpec& p : wc.phases)
        if (p.mix.name == type) need += p.ops != 0 ? p.ops : cfg.ops;
      if (need == 0) Fail("--op-keys " + type + "=" + file + ": no " + type + " phase in --workload");
      if (cfg.duration_s > 0) Fail("--op-keys needs an op count per phase, not --duration");
      op_files[type] = std::make_shared<const std::vector<pmindex::Key>>(
          ReadKeyFile(file, need, "--op-keys " + type + " file"));
      cfg.op_keys[type] = file;
    }
    std::map<std::string, uint64_t> cursor;
    for (wl::PhaseSpec& p : wc.phases) {
      if (!op_files.count(p.mix.name)) continue;
      p.op_keys = op_files[p.mix.name];
      p.op_keys_begin = cursor[p.mix.name];
      cursor[p.mix.name] += p.ops != 0 ? p.ops : cfg.ops;
    }
  }
  auto w = wl::Workload::Make(wc);
  if (!w.ok()) Fail(std::string(w.status().message()));
  if (w.value()->keyspace().kind() == wl::KeyKind::kDense) cfg.keyspace = "dense";
  DryRun(cfg, w.value());

  if (!cfg.json_path.empty() && !pmindex::bench::CanWriteFile(cfg.json_path))
    Fail("cannot write --json file '" + cfg.json_path + "'");

  TempDir tmp;
  PreparePoolDir(cfg, tmp);
  pmindex::pm::SetEadr(cfg.eadr);
  pmindex::pm::SetPmWriteNs(cfg.pm_write_ns);
  pmindex::pm::XplineParams xp;
  xp.block_write_ns = cfg.pm_block_write_ns;
  xp.read_ns = cfg.pm_read_ns;
  xp.read_seq_ns = cfg.pm_read_seq_ns;
  xp.cache_bytes = cfg.pm_cache_kb << 10;
  pmindex::pm::SetPmModel(pm_model, xp);
  if (cfg.numa_nodes > 1) {
    auto topo = pmindex::alloc::Topology::Simulated(static_cast<int>(cfg.numa_nodes));
    pmindex::alloc::Topology::SetDefault(topo);
    (void)topo->place_this_thread(0);  // the loader and the recovery run on node 0
    pmindex::alloc::SetNumaMetering(true);
    pmindex::pm::SetRemoteAccessNs(cfg.remote_ns);
  }

  auto reports = pmindex::bench::RunAll(cfg, w.value());
  if (!reports.ok()) {
    std::fprintf(stderr, "pmbench: error: %s\n", std::string(reports.status().message()).c_str());
    return 2;
  }
  pmindex::bench::PrintTable(reports.value(), cfg);
  if (!cfg.json_path.empty()) {
    Status s = pmindex::bench::WriteJson(cfg.json_path, reports.value(), cfg);
    if (!s.ok()) {
      std::fprintf(stderr, "pmbench: error: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  int rc = 0;
  for (const auto& r : reports.value()) {
    if (r.errors != 0) {
      std::fprintf(stderr, "pmbench: %s phase %zu (%s): %llu wrong results (%llu misses); first: %s\n",
                   r.index.c_str(), r.phase_no, r.phase.c_str(),
                   static_cast<unsigned long long>(r.errors),
                   static_cast<unsigned long long>(r.misses), r.first_error.c_str());
      rc = 1;
    }
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  // Memory runs out in the main thread while keys, pairs or op streams are
  // generated (--keys 4000000000 under a memory limit): one line, exit 2.
  try {
    return Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "pmbench: error: out of memory (std::bad_alloc); lower --keys or --ops, or raise "
                 "the memory limit\n");
    return 2;
  }
}
