#include "client/driver.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "client/records.h"
#include "server/key_slot.h"

namespace pmindex::client {

using workload::Op;
using workload::OpStream;
using workload::OpType;

// Whether key a comes before key b in the order a scan returns keys:
// pmserver's SCAN walks (hash slot, key), as its store keeps them
// (docs/server.md, SCAN); a sorted set of score 0 is in bytewise order.
static bool ScanOrderLess(ScanMode m, const std::string& a, const std::string& b) {
  if (m == ScanMode::kRange) {
    const uint16_t sa = server::KeySlot(a), sb = server::KeySlot(b);
    if (sa != sb) return sa < sb;
  }
  return a < b;
}

const char* ScanModeName(ScanMode m) {
  switch (m) {
    case ScanMode::kNone:
      return "none";
    case ScanMode::kRange:
      return "range";
    case ScanMode::kZset:
      return "zset";
  }
  return "?";
}

std::string SkipReason(const ClientConfig& cfg, const workload::Mix& mix) {
  if (!mix.has(OpType::kScan) || cfg.scan_mode != ScanMode::kNone) return {};
  return cfg.protocol == Protocol::kMemcached
             ? "memcached has no ordered range command (YCSB-E scans)"
             : "--scan-mode none: scans not supported";
}

namespace {

using Clock = std::chrono::steady_clock;

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

// What one client thread saw in one phase (or the load).
struct ThreadResult {
  uint64_t ops = 0, errors = 0, misses = 0;
  double cpu_s = 0;
  std::string first_error;
  Status fatal;  // OK unless the connection failed
  std::vector<uint64_t> lat_ns;
};

bool IsStatus(const Reply& r, std::string_view text) {
  return r.kind == Reply::Kind::kStatus && r.text == text;
}
bool IsInteger(const Reply& r, int64_t v) {
  return r.kind == Reply::Kind::kInteger && r.integer == v;
}

// One client thread's connection, and what it needs to turn workload ops
// into requests and check their replies.
class Session {
 public:
  Session(const ClientConfig& cfg, std::unique_ptr<Connection> conn, bool keep_zset)
      : cfg_(cfg), conn_(std::move(conn)), zset_(keep_zset), slots_(cfg.pipeline) {}

  // Runs ops[0, n) as one batch (REQUIRES n <= cfg.pipeline): the first
  // request of every op is sent at once, the replies read, then the second
  // requests of the ops that have one. Wrong results are counted in *r;
  // lat[i] is op i's time from the batch's start to its last reply, in ns.
  // An error Status means the connection is no longer usable.
  Status RunBatch(const Op* ops, size_t n, bool pristine, ThreadResult* r, uint64_t* lat) {
    r_ = r;
    pristine_ = pristine;
    for (size_t i = 0; i < n; ++i) {
      Slot& s = slots_[i];
      s.op = &ops[i];
      s.failed = false;
      s.key.resize(kKeyBytes);
      FormatKey(ops[i].key, s.key.data());
      s.scan_keys.clear();
    }
    const uint64_t start = NowNs();
    for (int stage = 0; stage < kMaxStages; ++stage) {
      out_.clear();
      expect_.clear();
      for (size_t i = 0; i < n; ++i) Encode(i, stage);
      if (expect_.empty()) break;
      if (Status s = conn_->Send(out_); !s.ok()) return s;
      for (const Expect& e : expect_) {
        if (Status s = conn_->Receive(cfg_.protocol, e.shape, &reply_); !s.ok()) return s;
        lat[e.slot] = NowNs() - start;
        Absorb(e.slot, stage, reply_);
      }
    }
    r->ops += n;
    return Status::OK();
  }

  // One request outside the measured loops; *reply is its reply.
  Status Call(std::string_view request, McShape shape, Reply* reply) {
    if (Status s = conn_->Send(request); !s.ok()) return s;
    return conn_->Receive(cfg_.protocol, shape, reply);
  }

 private:
  static constexpr int kMaxStages = 2;
  struct Slot {
    const Op* op = nullptr;
    std::string key;                     // the op's key name
    std::vector<std::string> scan_keys;  // scan: the keys the first request returned
    bool failed = false;                 // a reply was wrong: send nothing more for this op
  };
  struct Expect {
    size_t slot;
    McShape shape;
  };
  bool resp() const { return cfg_.protocol == Protocol::kResp; }

  void Request(size_t slot, McShape shape) { expect_.push_back(Expect{slot, shape}); }

  void Get(size_t slot) {
    const std::string& k = slots_[slot].key;
    if (resp()) AppendResp(&out_, {"GET", k});
    else AppendMcRetrieve(&out_, "get", k);
    Request(slot, McShape::kValues);
  }

  // set (update, rmw's write) or add / SET NX (insert).
  void Store(size_t slot, bool fresh) {
    const Slot& s = slots_[slot];
    FormatValue(s.op->key, fresh ? 0 : VersionOf(*s.op), cfg_.value_size, &value_);
    if (resp()) {
      if (fresh) AppendResp(&out_, {"SET", s.key, value_, "NX"});
      else AppendResp(&out_, {"SET", s.key, value_});
    } else {
      AppendMcStore(&out_, fresh ? "add" : "set", s.key, 0, 0, value_);
    }
    Request(slot, McShape::kLine);
  }

  // Appends the op's request of `stage`, if it has one.
  void Encode(size_t slot, int stage) {
    Slot& s = slots_[slot];
    if (s.failed) return;
    const std::string& k = s.key;
    switch (s.op->type) {
      case OpType::kLookup:
        if (stage == 0) Get(slot);
        return;
      case OpType::kUpdate:
        if (stage == 0) Store(slot, false);
        return;
      case OpType::kReadModifyWrite:
        if (stage == 0) Get(slot);
        else Store(slot, false);
        return;
      case OpType::kInsert:
        if (stage == 0) Store(slot, true);
        else if (zset_) {
          AppendResp(&out_, {"ZADD", cfg_.zset_key, "0", k});
          Request(slot, McShape::kLine);
        }
        return;
      case OpType::kDelete:
        if (stage == 0) {
          if (resp()) AppendResp(&out_, {"DEL", k});
          else AppendMcDelete(&out_, k);
          Request(slot, McShape::kLine);
        } else if (zset_) {
          AppendResp(&out_, {"ZREM", cfg_.zset_key, k});
          Request(slot, McShape::kLine);
        }
        return;
      case OpType::kScan: {
        const std::string len = std::to_string(s.op->scan_len);
        if (stage == 0 && cfg_.scan_mode == ScanMode::kRange) {
          AppendResp(&out_, {"SCAN", PmserverScanCursor(k), "COUNT", len});
        } else if (stage == 0) {
          const std::string from = "[" + k;
          AppendResp(&out_, {"ZRANGEBYLEX", cfg_.zset_key, from, "+", "LIMIT", "0", len});
        } else {
          if (s.scan_keys.empty()) return;
          args_.assign({"MGET"});
          for (const std::string& key : s.scan_keys) args_.push_back(key);
          AppendResp(&out_, args_);
        }
        Request(slot, McShape::kLine);
        return;
      }
    }
  }

  // Counts a wrong result of the op in `slot`; sends nothing more for it.
  void Wrong(size_t slot, const char* what, bool miss, const Reply* reply = nullptr) {
    Slot& s = slots_[slot];
    s.failed = true;
    ++r_->errors;
    if (miss) ++r_->misses;
    if (r_->first_error.empty()) {
      r_->first_error = std::string(workload::OpTypeName(s.op->type)) + " of key " + s.key + ": " +
                        what;
      if (reply != nullptr) r_->first_error += " (reply: " + reply->Describe() + ")";
    }
  }

  void CheckValue(size_t slot, Key k, std::string_view value) {
    if (!cfg_.check) return;
    if (const char* why = client::CheckValue(value, k, cfg_.value_size, pristine_))
      Wrong(slot, why, false);
  }

  // A get's reply: the value of the op's key, checked.
  void AbsorbGet(size_t slot, const Reply& rep) {
    const Slot& s = slots_[slot];
    if (resp() ? rep.kind == Reply::Kind::kNil
               : rep.kind == Reply::Kind::kArray && rep.size == 0)
      return Wrong(slot, "present key not found", true);
    if (resp() && rep.kind == Reply::Kind::kBulk) return CheckValue(slot, s.op->key, rep.text);
    if (!resp() && rep.kind == Reply::Kind::kArray && rep.size == 1 && rep.at(0).key == s.key)
      return CheckValue(slot, s.op->key, rep.at(0).text);
    Wrong(slot, "unexpected reply to a get", false, &rep);
  }

  // A store's reply: stored, or (fresh) refused because the key exists.
  void AbsorbStore(size_t slot, const Reply& rep, bool fresh) {
    if (IsStatus(rep, resp() ? "OK" : "STORED")) return;
    if (fresh && (resp() ? rep.kind == Reply::Kind::kNil : IsStatus(rep, "NOT_STORED")))
      return Wrong(slot, "insert of an absent key refused: the key is present", false);
    Wrong(slot, fresh ? "insert failed" : "update of a present key failed", false, &rep);
  }

  // A scan's key list: starts at the op's key, ascends, at most scan_len.
  void AbsorbScanKeys(size_t slot, const Reply& rep) {
    Slot& s = slots_[slot];
    const Reply* keys = &rep;
    if (cfg_.scan_mode == ScanMode::kRange) {  // [cursor, [key...]]
      if (rep.kind != Reply::Kind::kArray || rep.size != 2 || rep.at(1).kind != Reply::Kind::kArray)
        return Wrong(slot, "unexpected reply to SCAN", false, &rep);
      keys = &rep.at(1);
    } else if (rep.kind != Reply::Kind::kArray) {
      return Wrong(slot, "unexpected reply to ZRANGEBYLEX", false, &rep);
    }
    if (keys->size == 0) return Wrong(slot, "scan from a present key returned nothing", true);
    if (keys->size > s.op->scan_len) return Wrong(slot, "scan returned more keys than asked", false);
    for (size_t i = 0; i < keys->size; ++i) {
      const Reply& k = keys->at(i);
      if (k.kind != Reply::Kind::kBulk) return Wrong(slot, "scan key not a bulk string", false, &k);
      if (i == 0 && k.text != s.key)
        return Wrong(slot, "scan did not start at the present key", false);
      if (i > 0 && !ScanOrderLess(cfg_.scan_mode, s.scan_keys.back(), k.text))
        return Wrong(slot, "scan keys not in ascending order", false);
      s.scan_keys.push_back(k.text);
    }
  }

  // The MGET of a scan's keys: every key has its value.
  void AbsorbScanValues(size_t slot, const Reply& rep) {
    const Slot& s = slots_[slot];
    if (rep.kind != Reply::Kind::kArray || rep.size != s.scan_keys.size())
      return Wrong(slot, "unexpected reply to MGET", false, &rep);
    for (size_t i = 0; i < rep.size; ++i) {
      Key k;
      if (!ParseKeyName(s.scan_keys[i], &k)) return Wrong(slot, "scan returned a foreign key", false);
      if (rep.at(i).kind != Reply::Kind::kBulk)
        return Wrong(slot, "a key the scan returned has no value", true, &rep.at(i));
      CheckValue(slot, k, rep.at(i).text);
      if (s.failed) return;
    }
  }

  void Absorb(size_t slot, int stage, const Reply& rep) {
    if (rep.kind == Reply::Kind::kError) return Wrong(slot, "server error", false, &rep);
    switch (slots_[slot].op->type) {
      case OpType::kLookup:
        return AbsorbGet(slot, rep);
      case OpType::kUpdate:
        return AbsorbStore(slot, rep, false);
      case OpType::kReadModifyWrite:
        return stage == 0 ? AbsorbGet(slot, rep) : AbsorbStore(slot, rep, false);
      case OpType::kInsert:
        if (stage == 0) return AbsorbStore(slot, rep, true);
        if (!IsInteger(rep, 1)) Wrong(slot, "ZADD of a fresh key added nothing", false, &rep);
        return;
      case OpType::kDelete:
        if (stage == 1) {
          if (!IsInteger(rep, 1)) Wrong(slot, "ZREM of a present key removed nothing", false, &rep);
          return;
        }
        if (IsStatus(rep, "DELETED") || IsInteger(rep, 1)) return;
        if (IsStatus(rep, "NOT_FOUND") || IsInteger(rep, 0))
          return Wrong(slot, "delete of a present key found nothing", true);
        return Wrong(slot, "unexpected reply to a delete", false, &rep);
      case OpType::kScan:
        return stage == 0 ? AbsorbScanKeys(slot, rep) : AbsorbScanValues(slot, rep);
    }
  }

  const ClientConfig& cfg_;
  std::unique_ptr<Connection> conn_;
  const bool zset_;  // keep the sorted set of keys (--scan-mode zset)
  std::vector<Slot> slots_;
  std::vector<Expect> expect_;  // the requests of the current stage, in order
  std::string out_, value_;
  std::vector<std::string_view> args_;
  Reply reply_;
  ThreadResult* r_ = nullptr;
  bool pristine_ = false;
};

// Runs fn(t) on T threads started together; returns the wall seconds from
// the start to the last thread's end.
template <class Fn>
double RunThreads(unsigned T, Fn fn) {
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < T; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      fn(t);
    });
  }
  while (ready.load() != T) std::this_thread::yield();
  const Clock::time_point t0 = Clock::now();
  go.store(true, std::memory_order_release);
  for (auto& th : threads) th.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct PhaseRun {
  uint64_t ops = 0, errors = 0, misses = 0;
  double seconds = 0, cpu_s = 0;
  bench::LatencyNs lat;
  std::string first_error;
};

// Sums the threads' results; the first fatal error, if any.
Result<PhaseRun> Gather(std::vector<ThreadResult>& results, double seconds) {
  PhaseRun run;
  run.seconds = seconds;
  std::vector<uint64_t> lat;
  for (ThreadResult& r : results) {
    if (!r.fatal.ok()) return r.fatal;
    run.ops += r.ops;
    run.cpu_s += r.cpu_s;
    run.errors += r.errors;
    run.misses += r.misses;
    if (run.first_error.empty()) run.first_error = r.first_error;
    lat.insert(lat.end(), r.lat_ns.begin(), r.lat_ns.end());
  }
  run.lat = bench::Percentiles(std::move(lat), 1.0);
  return run;
}

// Each thread runs the ops `next(t, op)` gives it, in batches.
template <class Next>
Result<PhaseRun> RunOps(const ClientConfig& cfg, std::vector<std::unique_ptr<Session>>& sessions,
                        bool pristine, Next next) {
  const unsigned T = cfg.threads;
  std::vector<ThreadResult> results(T);
  std::atomic<bool> stop{false};
  const double secs = RunThreads(T, [&](unsigned t) {
    ThreadResult& r = results[t];
    std::vector<Op> batch(cfg.pipeline);
    std::vector<uint64_t> lat(cfg.pipeline);
    uint64_t i = 0;
    const double cpu0 = bench::ThreadCpuSeconds();
    while (!stop.load(std::memory_order_relaxed)) {
      size_t n = 0;
      while (n < batch.size() && next(t, &batch[n])) ++n;
      if (n == 0) break;
      if (Status s = sessions[t]->RunBatch(batch.data(), n, pristine, &r, lat.data()); !s.ok()) {
        r.fatal = s;
        stop.store(true);
        break;
      }
      for (size_t j = 0; j < n; ++j, ++i)
        if (i % cfg.latency_every == 0) r.lat_ns.push_back(lat[j]);
    }
    r.cpu_s = bench::ThreadCpuSeconds() - cpu0;
  });
  return Gather(results, secs);
}

// Empties the server: memcached flush_all, RESP FLUSHALL.
Status Flush(const ClientConfig& cfg, Session& s) {
  std::string req;
  if (cfg.protocol == Protocol::kResp) AppendResp(&req, {"FLUSHALL"});
  else req = "flush_all\r\n";
  Reply rep;
  if (Status st = s.Call(req, McShape::kLine, &rep); !st.ok()) return st;
  if (!IsStatus(rep, "OK"))
    return Status::InvalidArgument("the server refused to flush: " + rep.Describe());
  return Status::OK();
}

// What the server says it is: memcached "version" (the version alone:
// memcached and pmserver both answer "VERSION <version>"), RESP "INFO
// server" ("redis <redis_version>", or pmserver's "<server> <version>").
// "" if it does not say.
Result<std::string> ServerVersion(const ClientConfig& cfg, Session& s) {
  Reply rep;
  std::string req;
  if (cfg.protocol == Protocol::kMemcached) {
    if (Status st = s.Call("version\r\n", McShape::kLine, &rep); !st.ok()) return st;
    if (rep.kind == Reply::Kind::kStatus && rep.text.starts_with("VERSION "))
      return rep.text.substr(8);
    return std::string();
  }
  AppendResp(&req, {"INFO", "server"});
  if (Status st = s.Call(req, McShape::kLine, &rep); !st.ok()) return st;
  if (rep.kind != Reply::Kind::kBulk) return std::string();
  auto field = [&](std::string_view name) {
    const std::string tag = "\n" + std::string(name) + ":";
    const std::string text = "\n" + rep.text;
    const size_t at = text.find(tag);
    if (at == std::string::npos) return std::string();
    const size_t b = at + tag.size(), e = text.find_first_of("\r\n", b);
    return text.substr(b, e == std::string::npos ? std::string::npos : e - b);
  };
  if (std::string v = field("redis_version"); !v.empty()) return "redis " + v;
  std::string name = field("server"), v = field("version");
  return name + (name.empty() || v.empty() ? "" : " ") + v;
}

bool KeepsZset(const ClientConfig& cfg, const workload::Workload& w) {
  if (cfg.scan_mode != ScanMode::kZset) return false;
  for (const workload::PhaseSpec& p : w.config().phases)
    if (p.mix.has(OpType::kScan)) return true;
  return false;
}

// One repeat: flush and load (if cfg.load), then the phases.
Status RunRepeat(const ClientConfig& cfg, std::shared_ptr<const workload::Workload> w,
                 std::vector<std::unique_ptr<Session>>& sessions, PhaseRun* load,
                 std::vector<PhaseRun>* phases) {
  const unsigned T = cfg.threads;
  workload::State state = w->InitialState();
  bool pristine = cfg.load;
  if (cfg.load) {
    if (cfg.flush)
      if (Status s = Flush(cfg, *sessions[0]); !s.ok()) return s;
    // Thread t inserts ranks [N*t/T, N*(t+1)/T), in rank order (random
    // key order in the random key space).
    const uint64_t N = cfg.records;
    std::vector<uint64_t> pos(T), end(T);
    for (unsigned t = 0; t < T; ++t) {
      pos[t] = N * t / T;
      end[t] = N * (t + 1) / T;
    }
    const workload::KeySpace& ks = w->keyspace();
    auto run = RunOps(cfg, sessions, true, [&](unsigned t, Op* op) {
      if (pos[t] == end[t]) return false;
      op->type = OpType::kInsert;
      op->key = ks.key(pos[t]++);
      op->value = workload::ValueFor(op->key);
      op->expect_present = false;
      return true;
    });
    if (!run.ok()) return run.status();
    *load = run.value();
  }
  for (size_t p = 1; p <= w->config().phases.size(); ++p) {
    const workload::Mix& mix = w->config().phases[p - 1].mix;
    if (!SkipReason(cfg, mix).empty()) {
      phases->push_back(PhaseRun{});
      continue;
    }
    if (mix.has(OpType::kUpdate) || mix.has(OpType::kReadModifyWrite)) pristine = false;
    auto plan = w->Plan(state, p, T, false);
    if (!plan.ok()) return plan.status();
    std::vector<std::unique_ptr<OpStream>> streams;
    for (unsigned t = 0; t < T; ++t) streams.push_back(std::make_unique<OpStream>(w, plan.value(), t));
    auto run = RunOps(cfg, sessions, pristine,
                      [&](unsigned t, Op* op) { return streams[t]->Next(op); });
    if (!run.ok()) return run.status();
    std::vector<const OpStream*> sp;
    for (auto& s : streams) sp.push_back(s.get());
    w->Commit(&state, plan.value(), sp);
    phases->push_back(run.value());
  }
  return Status::OK();
}

}  // namespace

Status CheckPlans(const ClientConfig& cfg, std::shared_ptr<const workload::Workload> w) {
  workload::State state = w->InitialState();
  for (size_t p = 1; p <= w->config().phases.size(); ++p) {
    if (!SkipReason(cfg, w->config().phases[p - 1].mix).empty()) continue;
    auto plan = w->Plan(state, p, cfg.threads, false);
    if (!plan.ok()) return plan.status();
    std::vector<std::unique_ptr<OpStream>> streams;
    std::vector<const OpStream*> sp;
    for (unsigned t = 0; t < cfg.threads; ++t) {
      streams.push_back(std::make_unique<OpStream>(w, plan.value(), t));
      Op op;
      while (streams.back()->Next(&op)) {
      }
      sp.push_back(streams.back().get());
    }
    w->Commit(&state, plan.value(), sp);
  }
  return Status::OK();
}

Result<ClientReport> RunClient(const ClientConfig& cfg, std::shared_ptr<const workload::Workload> w) {
  const bool zset = KeepsZset(cfg, *w);
  std::vector<std::unique_ptr<Session>> sessions;
  for (unsigned t = 0; t < cfg.threads; ++t) {
    auto conn = Connection::Open(cfg.host, cfg.port, cfg.timeout_ms);
    if (!conn.ok()) return conn.status();
    sessions.push_back(std::make_unique<Session>(cfg, std::move(conn).value(), zset));
  }
  ClientReport report;
  auto version = ServerVersion(cfg, *sessions[0]);
  if (!version.ok()) return version.status();
  report.server_version = version.value();

  const size_t nphases = w->config().phases.size();
  std::vector<PhaseRun> loads;
  std::vector<std::vector<PhaseRun>> reps;
  for (unsigned r = 0; r < cfg.repeat; ++r) {
    PhaseRun load;
    std::vector<PhaseRun> phases;
    if (Status s = RunRepeat(cfg, w, sessions, &load, &phases); !s.ok()) return s;
    loads.push_back(load);
    reps.push_back(std::move(phases));
  }

  std::vector<double> load_s, load_tput;
  for (const PhaseRun& l : loads) {
    load_s.push_back(l.seconds);
    load_tput.push_back(l.seconds > 0 ? static_cast<double>(l.ops) / l.seconds : 0);
    report.load_errors += l.errors;
    if (report.load_first_error.empty()) report.load_first_error = l.first_error;
  }
  report.load_s = bench::Median(load_s);
  report.load_ops_s = bench::Median(load_tput);

  for (size_t p = 0; p < nphases; ++p) {
    const workload::PhaseSpec& spec = w->config().phases[p];
    PhaseReport rep;
    rep.phase = spec.mix.name;
    rep.phase_no = p + 1;
    rep.skip_reason = SkipReason(cfg, spec.mix);
    rep.dist = !spec.mix.reads() ? ""
               : spec.mix.force_latest ? "latest"
               : spec.dist ? spec.dist->ToString()
                           : w->config().dist.ToString();
    std::vector<double> tput, secs, cput;
    std::vector<uint64_t> ops;
    std::vector<bench::LatencyNs> lat;
    for (const std::vector<PhaseRun>& phases : reps) {
      const PhaseRun& run = phases[p];
      tput.push_back(run.seconds > 0 ? static_cast<double>(run.ops) / run.seconds : 0);
      secs.push_back(run.seconds);
      cput.push_back(run.cpu_s > 0 ? static_cast<double>(run.ops) / run.cpu_s : 0);
      ops.push_back(run.ops);
      lat.push_back(run.lat);
      rep.errors += run.errors;
      rep.misses += run.misses;
      if (rep.first_error.empty()) rep.first_error = run.first_error;
    }
    rep.throughput_runs = tput;
    rep.throughput_ops_s = bench::Median(tput);
    rep.seconds = bench::Median(secs);
    rep.ops_per_cpu_s = bench::Median(cput);
    rep.ops = bench::Median(ops);
    rep.latency = bench::MedianLatency(lat);
    report.phases.push_back(std::move(rep));
  }
  return report;
}

// ----------------------------------------------------------------- report
namespace {

std::string Label(const ClientConfig& cfg) {
  return cfg.label.empty() ? ProtocolName(cfg.protocol) : cfg.label;
}

}  // namespace

void PrintTable(const ClientReport& report, const ClientConfig& cfg) {
  std::printf("pmclient: %s %s%s%s, %llu records x %zu B, dist %s, %u thread(s), pipeline %u, "
              "scan %s, median of %u\n",
              ProtocolName(cfg.protocol), cfg.server.c_str(),
              report.server_version.empty() ? "" : " (",
              report.server_version.empty() ? "" : (report.server_version + ")").c_str(),
              static_cast<unsigned long long>(cfg.records), cfg.value_size, cfg.dist.c_str(),
              cfg.threads, cfg.pipeline, ScanModeName(cfg.scan_mode), cfg.repeat);
  if (cfg.load)
    std::printf("load: %llu records in %.2f s (%s ops/s), %llu errors\n",
                static_cast<unsigned long long>(cfg.records), report.load_s,
                bench::Human(report.load_ops_s).c_str(),
                static_cast<unsigned long long>(report.load_errors));
  std::printf("%-14s %-14s %2s %9s %9s %9s %9s %9s %9s %9s %6s\n", "server", "phase", "#", "ops",
              "ops/s", "ops/cpu-s", "p50ns", "p90ns", "p99ns", "p999ns", "errors");
  const std::string label = Label(cfg);
  for (const PhaseReport& r : report.phases) {
    std::string phase = r.phase.size() > 14 ? r.phase.substr(0, 13) + "~" : r.phase;
    if (!r.skip_reason.empty()) {
      std::printf("%-14s %-14s %2zu skipped: %s\n", label.c_str(), phase.c_str(), r.phase_no,
                  r.skip_reason.c_str());
      continue;
    }
    std::printf("%-14s %-14s %2zu %9s %9s %9s %9.0f %9.0f %9.0f %9.0f %6llu\n", label.c_str(),
                phase.c_str(), r.phase_no, bench::Human(static_cast<double>(r.ops)).c_str(),
                bench::Human(r.throughput_ops_s).c_str(), bench::Human(r.ops_per_cpu_s).c_str(),
                r.latency.p50, r.latency.p90, r.latency.p99, r.latency.p999,
                static_cast<unsigned long long>(r.errors));
  }
  std::fflush(stdout);
}

Status WriteJson(const std::string& path, const ClientReport& report, const ClientConfig& cfg) {
  using nlohmann::json;
  json machine = {
      {"cpu", bench::CpuModel()},
      {"cores", std::thread::hardware_concurrency()},
      {"date", bench::UtcNow()},
      {"compiler", __VERSION__},
  };
  json config = {
      {"tool", "pmclient"},
      {"server", cfg.server},
      {"protocol", ProtocolName(cfg.protocol)},
      {"label", Label(cfg)},
      {"server_version", report.server_version},
      {"records", cfg.records},
      {"keys", cfg.records},
      {"value_size", cfg.value_size},
      {"key_format", "user + 20-digit zero-padded decimal of the 64-bit key"},
      {"workload", cfg.workload},
      {"ops", cfg.ops},
      {"dist", cfg.dist},
      {"threads", cfg.threads},
      {"repeat", cfg.repeat},
      {"load", cfg.load},
      {"flush", cfg.flush},
      {"pipeline", cfg.pipeline},
      {"scan_mode", ScanModeName(cfg.scan_mode)},
      {"scan_len", cfg.scan_len},
      {"latency_every", cfg.latency_every},
      {"check", cfg.check},
      {"timeout_ms", cfg.timeout_ms},
      {"seed", cfg.seed},
  };
  json runs = json::array();
  for (const PhaseReport& r : report.phases) {
    runs.push_back({
        {"index", Label(cfg)},
        {"server", cfg.server},
        {"protocol", ProtocolName(cfg.protocol)},
        {"phase", r.phase},
        {"phase_no", r.phase_no},
        {"threads", cfg.threads},
        {"ops", r.ops},
        {"repeat", cfg.repeat},
        {"throughput_ops_s", r.throughput_ops_s},
        {"throughput_runs", r.throughput_runs},
        {"seconds", r.seconds},
        {"ops_per_cpu_s", r.ops_per_cpu_s},
        {"latency_ns",
         {{"p50", r.latency.p50}, {"p90", r.latency.p90}, {"p99", r.latency.p99},
          {"p999", r.latency.p999}}},
        {"load_s", report.load_s},
        {"load_ops_s", report.load_ops_s},
        {"load_errors", report.load_errors},
        {"errors", r.errors},
        {"misses", r.misses},
        {"first_error", r.first_error},
        {"dist", r.dist},
        {"skipped", !r.skip_reason.empty()},
        {"skip_reason", r.skip_reason},
    });
  }
  json doc = {{"machine", machine}, {"config", config}, {"runs", runs}};
  return bench::WriteFileAtomically(path, doc.dump(2) + "\n", "--json");
}

}  // namespace pmindex::client
