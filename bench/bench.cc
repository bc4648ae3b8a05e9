#include "bench.h"
#include "cli.h"

#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <thread>

#include "alloc/allocator.h"
#include "alloc/numa_meter.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "pmindex/db.h"

namespace pmindex::bench {

namespace fs = std::filesystem;
using workload::Op;
using workload::OpStream;
using workload::OpType;

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Prints "<what> ..." on stderr if the step (a load, a phase) takes longer
// than `after`, and the time taken when it ends, so that a long run does
// not look hung. The waiting thread sleeps on a condition variable: it
// takes no CPU time from the step it watches.
class Progress {
 public:
  explicit Progress(std::string what, std::chrono::milliseconds after = std::chrono::seconds(1))
      : what_(std::move(what)), t0_(Clock::now()) {
    th_ = std::thread([this, after] {
      std::unique_lock<std::mutex> l(mu_);
      if (!cv_.wait_for(l, after, [this] { return done_; })) {
        std::fprintf(stderr, "pmbench: %s ...\n", what_.c_str());
        printed_ = true;
      }
    });
  }
  ~Progress() { Finish(); }
  double Finish() {
    if (th_.joinable()) {
      {
        std::lock_guard<std::mutex> l(mu_);
        done_ = true;
      }
      cv_.notify_all();
      th_.join();
      secs_ = SecondsSince(t0_);
      if (printed_) std::fprintf(stderr, "pmbench: %s done in %.2f s\n", what_.c_str(), secs_);
    }
    return secs_;
  }

 private:
  std::string what_;
  Clock::time_point t0_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false, printed_ = false;
  double secs_ = 0;
  std::thread th_;
};

struct ThreadResult {
  uint64_t ops = 0, errors = 0, misses = 0;
  double cpu_s = 0;
  bool fatal = false;
  std::string first_error, fatal_error;
  std::vector<uint64_t> lat_ticks;
};

struct Checker {
  bool check;          // the index stores data: verify results
  bool values_pristine;  // no update ran yet: a lookup returns ValueFor(key)
};

void Wrong(ThreadResult& r, const Op& op, const char* what, bool miss) {
  ++r.errors;
  if (miss) ++r.misses;
  if (r.first_error.empty()) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s of key %llu: %s", workload::OpTypeName(op.type),
                  static_cast<unsigned long long>(op.key), what);
    r.first_error = buf;
  }
}

// What one op returned, recorded while the block runs and checked after
// it (Check), so that no checking work sits between two index operations.
struct OpResult {
  Value value;       // lookup, rmw: the value found
  uint64_t n;        // scan: entries returned
  Key first;         // scan: the first key returned
  Status::Code code; // insert, update, delete, rmw's update
  bool found;        // lookup, rmw
};

// The two ways the driver reaches an index (--api): the plug-in interface
// itself (index: a Pool and an Index), or the user's handle pmindex::Db
// (db), which owns both. The classes have the same members, and the phase
// loop is compiled once for each.
class IndexApi {
 public:
  // A new index; for a persistent kind in a new pool at `path`.
  static Result<IndexApi> Create(const IndexInfo& info, const std::string& options,
                                 const std::string& path, const PoolOptions& po) {
    IndexApi a;
    if (info.persistent) {
      auto p = create_pool_for(info.name, options, path, po);
      if (!p.ok()) return p.status();
      a.pool_ = std::move(p).value();
    }
    auto idx = create_index(info.name, options, a.pool_.get());
    if (!idx.ok()) return idx.status();
    a.idx_ = std::move(idx).value();
    a.tree_ = &TreeOf(*a.idx_);
    return a;
  }
  // Opens the pool at `path` and its index; *recovery_s: open_index alone.
  static Result<IndexApi> Open(const std::string& path, double* recovery_s) {
    IndexApi a;
    auto p = Pool::Open(path);
    if (!p.ok()) return p.status();
    a.pool_ = std::move(p).value();
    Clock::time_point t0 = Clock::now();
    auto idx = open_index(a.pool_.get());
    *recovery_s = SecondsSince(t0);
    if (!idx.ok()) return idx.status();
    a.idx_ = std::move(idx).value();
    a.tree_ = &TreeOf(*a.idx_);
    return a;
  }

  Status insert(Key k, Value v) { return tree_->insert(k, v); }
  std::optional<Value> lookup(Key k) { return tree_->lookup(k); }
  Status update(Key k, Value v) { return tree_->update(k, v); }
  Status remove(Key k) { return tree_->remove(k); }
  // buf holds at least n pairs.
  size_t scan(Key from, size_t n, std::vector<KV>& buf) { return tree_->scan(from, n, buf.data()); }
  Status bulk_load(std::span<const KV> pairs, double fill) { return idx_->bulk_load(pairs, fill); }
  Status verify() { return idx_->verify(); }
  IndexStats stats() {
    IndexStats st = idx_->stats();
    if (st.pm_bytes == 0 && idx_->allocator() != nullptr)
      st.pm_bytes = idx_->allocator()->stats().bytes_in_use;
    return st;
  }
  // The index, then its pool.
  Status close() {
    Status s = idx_->close();
    idx_.reset();
    Status ps = pool_ != nullptr ? pool_->Close() : Status::OK();
    pool_.reset();
    return s.ok() ? ps : s;
  }

 private:
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Index> idx_;  // destroyed before pool_
  // The tree inside idx_: the timed operations call it without the
  // handle's forwarding call.
  Index* tree_ = nullptr;
};

class DbApi {
 public:
  // Db::Create for a persistent kind, Db::CreateInMemory for a volatile one.
  static Result<DbApi> Create(const IndexInfo& info, const std::string& options,
                              const std::string& path, const PoolOptions& po) {
    DbOptions o;
    o.size = po.size;
    o.max_size = po.max_size;
    o.segment_size = po.segment_size;
    auto db = info.persistent ? Db::Create(path, info.name, options, o)
                              : Db::CreateInMemory(info.name, options);
    if (!db.ok()) return db.status();
    return DbApi(std::move(db).value());
  }
  // *recovery_s: the whole Db::Open (pool file included).
  static Result<DbApi> Open(const std::string& path, double* recovery_s) {
    Clock::time_point t0 = Clock::now();
    auto db = Db::Open(path);
    *recovery_s = SecondsSince(t0);
    if (!db.ok()) return db.status();
    return DbApi(std::move(db).value());
  }

  Status insert(Key k, Value v) { return db_->Insert(k, v); }
  std::optional<Value> lookup(Key k) {
    Result<Value> v = db_->Get(k);
    return v.ok() ? std::optional<Value>(v.value()) : std::nullopt;
  }
  Status update(Key k, Value v) { return db_->Update(k, v); }
  Status remove(Key k) { return db_->Remove(k); }
  size_t scan(Key from, size_t n, std::vector<KV>& buf) {
    buf.clear();
    return db_->Range(from, std::nullopt, n, &buf);
  }
  Status bulk_load(std::span<const KV> pairs, double fill) { return db_->BulkLoad(pairs, fill); }
  Status verify() { return db_->Verify(); }
  IndexStats stats() { return db_->Stats(); }
  Status close() { return db_->Close(); }

 private:
  explicit DbApi(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  std::unique_ptr<Db> db_;
};

// Runs one op and records its result. Returns false on a fatal error (out
// of space during an insert). Always inlined: GCC otherwise inlines it into
// one API's phase loop and not the other's (it did not for DbApi once
// Db::Get became inline), and a call per operation in one loop only would
// be measured as a cost of that API.
template <class Api>
[[gnu::always_inline]] inline bool Run(Api& idx, const Op& op, std::vector<KV>& buf, OpResult& res,
                                       ThreadResult& r) {
  switch (op.type) {
    case OpType::kInsert: {
      Status s = idx.insert(op.key, op.value);
      res.code = s.code();
      if (s.is_out_of_space()) {
        r.fatal = true;
        r.fatal_error = "out of space during insert: " + s.ToString();
        return false;
      }
      break;
    }
    case OpType::kLookup: {
      std::optional<Value> v = idx.lookup(op.key);
      res.found = v.has_value();
      res.value = v.value_or(0);
      break;
    }
    case OpType::kUpdate:
      res.code = idx.update(op.key, op.value).code();
      break;
    case OpType::kDelete:
      res.code = idx.remove(op.key).code();
      break;
    case OpType::kScan:
      res.n = idx.scan(op.key, op.scan_len, buf);
      res.first = res.n != 0 ? buf[0].key : 0;
      break;
    case OpType::kReadModifyWrite: {
      std::optional<Value> v = idx.lookup(op.key);
      res.found = v.has_value();
      res.code = v ? idx.update(op.key, op.value).code() : Status::Code::kOk;
      break;
    }
  }
  return true;
}

// Checks one recorded result against what the workload expects.
inline void Check(const Op& op, const OpResult& res, const Checker& c, ThreadResult& r) {
  using Code = Status::Code;
  switch (op.type) {
    case OpType::kInsert:
      if (res.code != Code::kOk) Wrong(r, op, "insert of an absent key failed", false);
      break;
    case OpType::kLookup:
      if (!res.found) Wrong(r, op, "present key not found", true);
      else if (c.values_pristine && res.value != workload::ValueFor(op.key))
        Wrong(r, op, "wrong value", false);
      break;
    case OpType::kUpdate:
      if (res.code != Code::kOk) Wrong(r, op, "update of a present key failed", res.code == Code::kNotFound);
      break;
    case OpType::kDelete:
      if (res.code != Code::kOk) Wrong(r, op, "delete of a present key failed", res.code == Code::kNotFound);
      break;
    case OpType::kScan:
      if (res.n == 0 || res.first != op.key)
        Wrong(r, op, "scan did not start at the present key", res.n == 0);
      break;
    case OpType::kReadModifyWrite:
      if (!res.found) Wrong(r, op, "present key not found", true);
      else if (res.code != Code::kOk)
        Wrong(r, op, "update of a present key failed", res.code == Code::kNotFound);
      break;
  }
}

// Ops per generated block (bench loop).
constexpr size_t kOpBlock = 1024;

struct PhaseRun {
  uint64_t ops = 0;
  double seconds = 0;
  double cpu_s = 0;  // CPU time of the worker threads, summed
  LatencyNs lat;
  pm::Counters counters;
  uint64_t errors = 0, misses = 0;
  std::string first_error;
  IndexStats stats;
};

// a - b for the counters both name (in a's order).
std::vector<std::pair<std::string, double>> ExtraDelta(
    const std::vector<std::pair<std::string, double>>& a,
    const std::vector<std::pair<std::string, double>>& b) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [k, v] : a) {
    double before = 0;
    for (const auto& [k2, v2] : b)
      if (k2 == k) before = v2;
    out.emplace_back(k, v - before);
  }
  return out;
}

// Runs one planned phase with plan.threads threads.
template <class Api>
Result<PhaseRun> RunPhase(Api& idx, std::shared_ptr<const workload::Workload> w,
                          const workload::PhasePlan& plan, const BenchConfig& cfg,
                          const Checker& checker, workload::State* state) {
  const unsigned T = plan.threads;
  std::vector<std::unique_ptr<OpStream>> streams;
  for (unsigned t = 0; t < T; ++t) streams.push_back(std::make_unique<OpStream>(w, plan, t));
  std::vector<ThreadResult> results(T);
  std::atomic<unsigned> ready{0}, finished{0};
  std::atomic<bool> go{false}, stop{false};
  const uint64_t every = std::max<uint32_t>(1, cfg.latency_every);
  const size_t scan_buf = std::max<uint32_t>(1, cfg.scan_len);

  pm::ResetCounters();
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < T; ++t) {
    threads.emplace_back([&, t] {
      if (cfg.numa_nodes > 1) {
        // Cannot fail: t % nodes is a node of the simulated topology.
        (void)alloc::Topology::Default()->place_this_thread(static_cast<int>(t % cfg.numa_nodes));
      }
      OpStream& st = *streams[t];
      ThreadResult& r = results[t];
      std::vector<KV> buf(scan_buf);
      r.lat_ticks.reserve(plan.time_mode ? 1 << 16 : plan.thread_ops[t] / every + 1);
      // Ops are generated a block at a time and then run back to back: the
      // generator's work between two index operations would otherwise take
      // the CPU's out-of-order window that lets one operation's cache misses
      // overlap the next one's (measured on 10M-key lbtree lookups: about
      // 30% of the time, docs/RESULTS.md issue 14). One op in `every` is
      // timed with rdtsc.
      std::vector<Op> block(kOpBlock);
      std::vector<OpResult> outcome(kOpBlock);
      uint64_t i = 0, untimed = 0;  // ops to run before the next timed one
      bool failed = false;
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const double cpu0 = ThreadCpuSeconds();
      while (!failed) {
        if (plan.time_mode && stop.load(std::memory_order_relaxed)) break;
        const size_t n = st.Fill(block.data(), block.size());
        if (n == 0) break;
        size_t j = 0;
        while (j < n) {
          if (untimed == 0) {
            const uint64_t t0 = __rdtsc();
            const bool ok = Run(idx, block[j], buf, outcome[j], r);
            r.lat_ticks.push_back(__rdtsc() - t0);
            ++j;
            untimed = every - 1;
            if (!ok) {
              failed = true;
              break;
            }
            continue;
          }
          const size_t end = j + std::min<uint64_t>(n - j, untimed);
          untimed -= end - j;
          for (; j < end; ++j) {
            if (!Run(idx, block[j], buf, outcome[j], r)) {
              ++j;
              failed = true;
              break;
            }
          }
          if (failed) break;
        }
        // The fatal op (if any) is not checked.
        if (checker.check)
          for (size_t q = 0; q < j - (failed ? 1 : 0); ++q) Check(block[q], outcome[q], checker, r);
        i += j;
      }
      if (failed) stop.store(true);
      r.ops = i;
      r.cpu_s = ThreadCpuSeconds() - cpu0;
      finished.fetch_add(1);
    });
  }
  while (ready.load() != T) std::this_thread::yield();
  Clock::time_point t0 = Clock::now();
  go.store(true, std::memory_order_release);
  if (plan.time_mode) {
    // Until the duration is over, or every thread is done (a delete
    // reservation ran out) or failed.
    while (SecondsSince(t0) < cfg.duration_s && !stop.load() && finished.load() != T) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    stop.store(true);
  }
  for (auto& th : threads) th.join();
  PhaseRun run;
  run.seconds = SecondsSince(t0);
  run.counters = pm::GlobalCounters();

  std::vector<const OpStream*> sp;
  for (auto& s : streams) sp.push_back(s.get());
  w->Commit(state, plan, sp);

  std::vector<uint64_t> lat;
  for (ThreadResult& r : results) {
    if (r.fatal) return Status::OutOfSpace(r.fatal_error);
    run.ops += r.ops;
    run.cpu_s += r.cpu_s;
    run.errors += r.errors;
    run.misses += r.misses;
    if (run.first_error.empty()) run.first_error = r.first_error;
    lat.insert(lat.end(), r.lat_ticks.begin(), r.lat_ticks.end());
  }
  run.lat = Percentiles(std::move(lat), pm::TscTicksPerNs());
  run.stats = idx.stats();
  return run;
}

std::string OptionsOf(const BenchConfig& cfg, const std::string& name) {
  auto it = cfg.index_options.find(name);
  return it == cfg.index_options.end() ? std::string() : it->second;
}

uint64_t PoolSizeBytes(const BenchConfig& cfg) {
  if (cfg.pool_size_mb != 0) return cfg.pool_size_mb << 20;
  // About 40 bytes per loaded key at the fill factor, in whole MiB, at
  // least 64 MiB; the pool grows by segments beyond that.
  double est = static_cast<double>(cfg.keys) * 40.0 / std::max(cfg.fill, 0.1);
  uint64_t mb = static_cast<uint64_t>(est / (1 << 20)) + 1;
  return std::max<uint64_t>(64, mb) << 20;
}

struct RepeatResult {
  std::vector<PhaseRun> phases;
  std::vector<std::vector<std::pair<std::string, double>>> extra_delta;  // per phase
  std::vector<std::string> dists;                                        // per phase
  double load_s = 0;
  double recovery_s = 0;
  double crash_recovery_s = 0;
};

// Copies every segment file of the pool at `from` (open, mapped shared) to
// `to`: what a process killed at this moment leaves behind (every store is
// in the file; the clean flag, cleared by Open, is not set). A different
// path, so the original's flock does not stop the copy from opening.
Status CopyPoolFiles(const std::string& from, const std::string& to) {
  std::error_code ec;
  for (uint64_t i = 0;; ++i) {
    std::string src = i == 0 ? from : from + "." + std::to_string(i);
    std::string dst = i == 0 ? to : to + "." + std::to_string(i);
    if (!fs::exists(src, ec)) {
      if (i == 0) return Status::IOError("crash image: no pool file " + src);
      return Status::OK();
    }
    fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::IOError("crash image: copy " + src + ": " + ec.message());
  }
}

// Samples 1000 present keys; returns how many `idx` does not find.
template <class Api>
uint64_t MissingAfterReopen(Api& idx, const BenchConfig& cfg, const workload::Workload& w,
                            const workload::State& state) {
  workload::Rng rng(cfg.seed ^ 0x7265636f76ull);
  uint64_t missing = 0;
  for (int i = 0; i < 1000; ++i) {
    Key k = w.keyspace().key(state.present.at(rng.Below(state.present.size())));
    if (!idx.lookup(k)) ++missing;
  }
  return missing;
}

void NoteMissing(PhaseRun& last, uint64_t missing, const char* when) {
  if (missing == 0) return;
  last.errors += missing;
  last.misses += missing;
  if (last.first_error.empty())
    last.first_error = std::to_string(missing) + " of 1000 sampled present keys missing after " + when;
}

// One run through Api (IndexApi or DbApi), a local: on every return the
// index is destroyed before its pool.
template <class Api>
Result<RepeatResult> RunOnceIn(const IndexInfo& info, const BenchConfig& cfg,
                               std::shared_ptr<const workload::Workload> w,
                               const std::vector<KV>& pairs, const std::string& path) {
  RepeatResult out;
  PoolOptions po;
  if (info.persistent) {
    po.size = PoolSizeBytes(cfg);
    po.segment_size = po.size;
    if (cfg.pool_max_mb != 0) {
      po.max_size = cfg.pool_max_mb << 20;
      po.size = std::min(po.size, po.max_size);
      po.segment_size = std::min<uint64_t>(po.segment_size, std::max<uint64_t>(po.max_size / 4, PoolOptions::kMinSize));
    }
  }
  auto created = Api::Create(info, OptionsOf(cfg, info.name), path, po);
  if (!created.ok()) return Status(created.status());
  Api& idx = created.value();

  {
    char what[200];
    std::snprintf(what, sizeof what, "loading %s (%llu keys, fill %.2f)", info.name.c_str(),
                  static_cast<unsigned long long>(pairs.size()), cfg.fill);
    Progress progress(what);
    if (!pairs.empty()) {
      Status s = idx.bulk_load(pairs, cfg.fill);
      if (!s.ok()) return Status(s.code() == Status::Code::kOutOfSpace
                                     ? Status::OutOfSpace("bulk load: " + s.ToString())
                                     : Status::InvalidArgument("bulk load: " + s.ToString()));
    }
    out.load_s = progress.Finish();
  }

  workload::State state = w->InitialState();
  Checker checker{cfg.check && info.stores_data, true};
  const size_t nphases = w->config().phases.size();
  // The index's own counters before the first phase (after the load).
  std::vector<std::pair<std::string, double>> extra_before = idx.stats().extra;
  for (size_t p = 1; p <= nphases; ++p) {
    const workload::Mix& mix = w->config().phases[p - 1].mix;
    if (mix.has(OpType::kUpdate) || mix.has(OpType::kReadModifyWrite)) checker.values_pristine = false;
    auto plan = w->Plan(state, p, cfg.threads, cfg.duration_s > 0);
    if (!plan.ok()) return plan.status();
    out.dists.push_back(plan.value().file_keys != nullptr ? std::string("file")
                        : plan.value().mix.reads()       ? plan.value().dist.ToString()
                                                         : "");
    // A phase's progress only on a terminal: with stderr redirected, an
    // error stays the one line on stderr that the CLI contract promises
    // (docs/benchmarking.md), however long the phase ran.
    std::optional<Progress> progress;
    if (isatty(STDERR_FILENO)) {
      char what[200];
      std::snprintf(what, sizeof what, "%s: phase %zu of %zu (%s)", info.name.c_str(), p,
                    nphases, mix.name.c_str());
      progress.emplace(what, std::chrono::seconds(3));
    }
    auto run = RunPhase(idx, w, plan.value(), cfg, checker, &state);
    if (progress) progress->Finish();
    if (!run.ok()) return Status(run.status());
    out.extra_delta.push_back(ExtraDelta(run.value().stats.extra, extra_before));
    extra_before = run.value().stats.extra;
    out.phases.push_back(std::move(run.value()));
  }

  if (cfg.verify) {
    Status s = idx.verify();
    if (!s.ok() && !s.is_not_supported())
      return Status::Corruption(info.name + ": verify() failed after the run: " + s.ToString());
  }

  if (info.persistent && cfg.crash_reopen) {
    // As after a crash: no close(); open a copy of the pool files as they
    // are now, timing open_index (rebuild from the persistent part).
    const std::string crash_path = path + "-crash";
    RemovePoolFiles(crash_path);
    Status s = CopyPoolFiles(path, crash_path);
    if (!s.ok()) return s;
    {
      auto image = Pool::Inspect(crash_path);
      if (!image.ok()) return Status::IOError("crash image: " + image.status().ToString());
      if (image.value().clean)
        return Status::Corruption("crash image: the clean flag is set in an open pool");
      auto opened = Api::Open(crash_path, &out.crash_recovery_s);
      if (!opened.ok())
        return Status::Corruption("open of a crash image: " + opened.status().ToString());
      if (checker.check && !state.present.empty())
        NoteMissing(out.phases.back(), MissingAfterReopen(opened.value(), cfg, *w, state),
                    "a crash");
      if (Status cs = opened.value().close(); !cs.ok())
        return Status::IOError("close of a crash image: " + cs.ToString());
    }
    RemovePoolFiles(crash_path);
  }

  if (info.persistent) {
    Status s = idx.close();
    if (!s.ok()) return Status::IOError("close: " + s.ToString());
    auto opened = Api::Open(path, &out.recovery_s);
    if (!opened.ok()) return Status::Corruption("open after close: " + opened.status().ToString());
    // The reopened index must hold the keys present at the end of the run.
    if (checker.check && !state.present.empty())
      NoteMissing(out.phases.back(), MissingAfterReopen(opened.value(), cfg, *w, state), "reopen");
    if (Status cs = opened.value().close(); !cs.ok())
      return Status::IOError("close after reopen: " + cs.ToString());
  }
  return out;
}

Result<RepeatResult> RunOnce(const IndexInfo& info, const BenchConfig& cfg,
                             std::shared_ptr<const workload::Workload> w,
                             const std::vector<KV>& pairs, unsigned rep) {
  std::string path;
  if (info.persistent) {
    path = (fs::path(cfg.pool_dir) / (info.name + "-r" + std::to_string(rep) + ".pool")).string();
    RemovePoolFiles(path);
  }
  auto res = cfg.api == "db" ? RunOnceIn<DbApi>(info, cfg, std::move(w), pairs, path)
                             : RunOnceIn<IndexApi>(info, cfg, std::move(w), pairs, path);
  if (info.persistent) RemovePoolFiles(path);
  return res;
}

}  // namespace

Result<std::vector<PhaseReport>> RunAll(const BenchConfig& cfg,
                                        std::shared_ptr<const workload::Workload> w) {
  std::vector<KV> pairs;
  {
    Progress progress("generating " + std::to_string(cfg.keys) + " keys");
    pairs = w->LoadPairs();
  }
  std::vector<PhaseReport> reports;
  const size_t nphases = w->config().phases.size();
  for (const std::string& name : cfg.indexes) {
    const IndexInfo* info = Registry::Get().Find(name);
    std::vector<RepeatResult> reps;
    for (unsigned r = 1; r <= cfg.repeat; ++r) {
      auto res = RunOnce(*info, cfg, w, pairs, r);
      if (!res.ok()) return Status(res.status().code() == Status::Code::kOutOfSpace
                                       ? Status::OutOfSpace(name + ": " + std::string(res.status().message()))
                                       : Status::InvalidArgument(name + ": " + res.status().ToString()));
      reps.push_back(std::move(res.value()));
    }
    for (size_t p = 0; p < nphases; ++p) {
      PhaseReport rep;
      rep.index = name;
      rep.options = OptionsOf(cfg, name);
      rep.phase = w->config().phases[p].mix.name;
      rep.phase_no = p + 1;
      rep.persistent = info->persistent;
      rep.threads = cfg.threads;
      rep.repeat = cfg.repeat;
      std::vector<double> tput, cput, secs, p50, p90, p99, p999, lf, fe, nw, nl, nr, load, rec, crec;
      std::vector<double> mb, ml, mm;
      std::map<std::string, std::vector<double>> xd, xt;
      std::vector<std::string> xnames;
      std::vector<uint64_t> ops, pmb, drb;
      for (const RepeatResult& rr : reps) {
        const PhaseRun& run = rr.phases[p];
        double n = static_cast<double>(std::max<uint64_t>(run.ops, 1));
        tput.push_back(run.seconds > 0 ? static_cast<double>(run.ops) / run.seconds : 0);
        secs.push_back(run.seconds);
        cput.push_back(run.cpu_s > 0 ? static_cast<double>(run.ops) / run.cpu_s : 0);
        ops.push_back(run.ops);
        p50.push_back(run.lat.p50);
        p90.push_back(run.lat.p90);
        p99.push_back(run.lat.p99);
        p999.push_back(run.lat.p999);
        lf.push_back(static_cast<double>(run.counters.lines_flushed) / n);
        fe.push_back(static_cast<double>(run.counters.fences) / n);
        nw.push_back(static_cast<double>(run.counters.naws) / n);
        nl.push_back(static_cast<double>(run.counters.numa_local_visits) / n);
        nr.push_back(static_cast<double>(run.counters.numa_remote_visits) / n);
        mb.push_back(static_cast<double>(run.counters.media_blocks_written * pm::kXplineBlock) / n);
        ml.push_back(static_cast<double>(run.counters.model_lines_read) / n);
        mm.push_back(static_cast<double>(run.counters.model_read_misses) / n);
        pmb.push_back(run.stats.pm_bytes);
        drb.push_back(run.stats.dram_bytes);
        load.push_back(rr.load_s);
        rec.push_back(rr.recovery_s);
        crec.push_back(rr.crash_recovery_s);
        for (const auto& [k, v] : rr.extra_delta[p]) {
          if (!xd.count(k)) xnames.push_back(k);
          xd[k].push_back(v);
        }
        for (const auto& [k, v] : run.stats.extra) xt[k].push_back(v);
        rep.errors += run.errors;
        rep.misses += run.misses;
        if (rep.first_error.empty()) rep.first_error = run.first_error;
      }
      rep.throughput_runs = tput;
      rep.throughput_ops_s = Median(tput);
      rep.seconds = Median(secs);
      rep.ops_per_cpu_s = Median(cput);
      rep.ops = Median(ops);
      rep.latency = LatencyNs{Median(p50), Median(p90), Median(p99), Median(p999)};
      rep.lines_flushed = Median(lf);
      rep.fences = Median(fe);
      rep.naws = Median(nw);
      rep.numa_local = Median(nl);
      rep.numa_remote = Median(nr);
      rep.media_bytes = Median(mb);
      rep.model_lines = Median(ml);
      rep.model_misses = Median(mm);
      rep.pm_bytes = Median(pmb);
      rep.dram_bytes = Median(drb);
      rep.load_s = Median(load);
      rep.recovery_s = (info->persistent && p + 1 == nphases) ? Median(rec) : 0.0;
      rep.crash_recovery_s =
          (info->persistent && cfg.crash_reopen && p + 1 == nphases) ? Median(crec) : 0.0;
      rep.dist = reps.empty() ? std::string() : reps[0].dists[p];
      for (const std::string& k : xnames) {
        rep.index_stats.emplace_back(k, Median(xd[k]));
        rep.index_stats_total.emplace_back(k, Median(xt[k]));
      }
      reports.push_back(std::move(rep));
    }
  }
  return reports;
}

// ----------------------------------------------------------------- report
namespace {

std::string Mib(uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(b) / (1 << 20));
  return buf;
}

}  // namespace

void PrintTable(const std::vector<PhaseReport>& reports, const BenchConfig& cfg) {
  const bool xpline = cfg.pm_model == "xpline";
  std::string model;
  if (xpline) {
    model = ", model xpline (" + std::to_string(cfg.pm_block_write_ns) + " ns/256 B block, read " +
            std::to_string(cfg.pm_read_ns) + "+" + std::to_string(cfg.pm_read_seq_ns) +
            " ns/line, cache " + std::to_string(cfg.pm_cache_kb) + " KiB)";
  } else if (cfg.pm_model == "dram") {
    model = ", model dram";
  } else if (cfg.pm_write_ns != 0) {
    model = ", +" + std::to_string(cfg.pm_write_ns) + " ns/line";
  }
  std::printf(
      "pmbench: %llu keys (fill %.2f, %s), dist %s, %u thread(s), median of %u, flush %s%s%s%s\n",
      static_cast<unsigned long long>(cfg.keys), cfg.fill,
      cfg.keys_file.empty() ? cfg.keyspace.c_str() : ("from " + cfg.keys_file).c_str(),
      cfg.dist.c_str(), cfg.threads, cfg.repeat, pm::FlushKindName(pm::ActiveFlushKind()),
      cfg.eadr ? ", eADR" : "", model.c_str(), cfg.api == "db" ? ", api db" : "");
  std::printf("%-12s %-14s %2s %9s %9s %9s %8s %8s %8s %8s %7s %7s %7s %9s %9s %8s %6s\n", "index",
              "phase", "#", "ops", "ops/s", "ops/cpu-s", "p50ns", "p90ns", "p99ns", "p999ns", "lines", "fences",
              "naws", "PM MiB", "DRAM MiB", "recov s", "errors");
  for (const PhaseReport& r : reports) {
    std::string phase = r.phase.size() > 14 ? r.phase.substr(0, 13) + "~" : r.phase;
    std::printf("%-12s %-14s %2zu %9s %9s %9s %8.0f %8.0f %8.0f %8.0f %7.2f %7.2f %7.2f %9s %9s %8s %6llu\n",
                r.index.c_str(), phase.c_str(), r.phase_no, Human(static_cast<double>(r.ops)).c_str(),
                Human(r.throughput_ops_s).c_str(), Human(r.ops_per_cpu_s).c_str(), r.latency.p50, r.latency.p90, r.latency.p99,
                r.latency.p999, r.lines_flushed, r.fences, r.naws, Mib(r.pm_bytes).c_str(),
                Mib(r.dram_bytes).c_str(),
                r.persistent && r.recovery_s > 0 ? std::to_string(r.recovery_s).substr(0, 7).c_str() : "-",
                static_cast<unsigned long long>(r.errors));
  }
  for (const PhaseReport& r : reports) {
    if (xpline && r.persistent) {
      const double line_bytes = r.lines_flushed * static_cast<double>(pm::kCacheLine);
      std::printf(
          "%-12s phase %zu: xpline per op: media bytes %.1f "
          "(%.2fx the flushed lines' bytes), PM lines read %.2f, missed %.2f\n",
          r.index.c_str(), r.phase_no, r.media_bytes,
          line_bytes > 0 ? r.media_bytes / line_bytes : 0.0, r.model_lines, r.model_misses);
    }
    if (cfg.numa_nodes > 1 && r.numa_local + r.numa_remote > 0) {
      std::printf("%-12s phase %zu: NUMA node visits per op: %.2f local, %.2f remote (%.1f%% remote)\n",
                  r.index.c_str(), r.phase_no, r.numa_local, r.numa_remote,
                  100.0 * r.numa_remote / (r.numa_local + r.numa_remote));
    }
    if (r.crash_recovery_s > 0)
      std::printf("%-12s phase %zu: recovery after a crash (%s of a crash image) %.6f s\n",
                  r.index.c_str(), r.phase_no, cfg.api == "db" ? "Db::Open" : "open_index",
                  r.crash_recovery_s);
    if (r.index_stats.empty()) continue;
    std::string line;
    char buf[96];
    for (size_t i = 0; i < r.index_stats.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%s%s %g (total %g)", line.empty() ? "" : ", ",
                    r.index_stats[i].first.c_str(), r.index_stats[i].second,
                    r.index_stats_total[i].second);
      line += buf;
    }
    std::printf("%-12s phase %zu index stats (this phase): %s\n", r.index.c_str(), r.phase_no,
                line.c_str());
  }
  std::fflush(stdout);
}

Status WriteJson(const std::string& path, const std::vector<PhaseReport>& reports,
                 const BenchConfig& cfg) {
  using nlohmann::json;
  json machine = {
      {"cpu", CpuModel()},
      {"cores", std::thread::hardware_concurrency()},
      {"flush", pm::FlushKindName(pm::ActiveFlushKind())},
      {"tsc_ticks_per_ns", pm::TscTicksPerNs()},
      {"date", UtcNow()},
      {"compiler", __VERSION__},
  };
  json config = {
      {"index", cfg.indexes},
      {"keys", cfg.keys},
      {"fill", cfg.fill},
      {"workload", cfg.workload},
      {"ops", cfg.ops},
      {"duration_s", cfg.duration_s},
      {"dist", cfg.dist},
      {"keyspace", cfg.keyspace},
      {"threads", cfg.threads},
      {"repeat", cfg.repeat},
      {"pm_write_ns", cfg.pm_write_ns},
      {"eadr", cfg.eadr},
      {"pm_model", cfg.pm_model},
      {"pm_block_write_ns", cfg.pm_block_write_ns},
      {"pm_read_ns", cfg.pm_read_ns},
      {"pm_read_seq_ns", cfg.pm_read_seq_ns},
      {"pm_cache_kb", cfg.pm_cache_kb},
      {"numa_nodes", cfg.numa_nodes},
      {"remote_ns", cfg.remote_ns},
      {"pool", cfg.pool_dir_is_temp ? std::string() : cfg.pool_dir},
      {"pool_size_mb", cfg.pool_size_mb},
      {"pool_max_mb", cfg.pool_max_mb},
      {"opt", cfg.opt_args},
      {"index_options", cfg.index_options},
      {"seed", cfg.seed},
      {"scan_len", cfg.scan_len},
      {"latency_every", cfg.latency_every},
      {"check", cfg.check},
      {"verify", cfg.verify},
      {"crash_reopen", cfg.crash_reopen},
      {"keys_file", cfg.keys_file},
      {"op_keys", cfg.op_keys},
      {"api", cfg.api},
  };
  json runs = json::array();
  for (const PhaseReport& r : reports) {
    json xs = json::object(), xt = json::object();
    for (const auto& [k, v] : r.index_stats) xs[k] = v;
    for (const auto& [k, v] : r.index_stats_total) xt[k] = v;
    runs.push_back({
        {"index", r.index},
        {"options", r.options},
        {"phase", r.phase},
        {"phase_no", r.phase_no},
        {"persistent", r.persistent},
        {"threads", r.threads},
        {"ops", r.ops},
        {"repeat", r.repeat},
        {"throughput_ops_s", r.throughput_ops_s},
        {"throughput_runs", r.throughput_runs},
        {"seconds", r.seconds},
        {"ops_per_cpu_s", r.ops_per_cpu_s},
        {"latency_ns",
         {{"p50", r.latency.p50},
          {"p90", r.latency.p90},
          {"p99", r.latency.p99},
          {"p999", r.latency.p999}}},
        {"per_op",
         {{"lines_flushed", r.lines_flushed},
          {"fences", r.fences},
          {"naws", r.naws},
          {"numa_local_visits", r.numa_local},
          {"numa_remote_visits", r.numa_remote},
          {"media_bytes", r.media_bytes},
          {"model_lines_read", r.model_lines},
          {"model_read_misses", r.model_misses}}},
        {"pm_bytes", r.pm_bytes},
        {"dram_bytes", r.dram_bytes},
        {"recovery_s", r.recovery_s},
        {"load_s", r.load_s},
        {"errors", r.errors},
        {"misses", r.misses},
        {"first_error", r.first_error},
        {"crash_recovery_s", r.crash_recovery_s},
        {"dist", r.dist},
        {"index_stats", xs},
        {"index_stats_total", xt},
    });
  }
  json doc = {{"machine", machine}, {"config", config}, {"runs", runs}};
  return WriteFileAtomically(path, doc.dump(2) + "\n", "--json");
}

}  // namespace pmindex::bench
