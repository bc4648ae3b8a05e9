// The key-value store as a crash-tested workload (issue 11;
// docs/crash-testing.md "Key-value store workloads"): kv::Store over the
// index under test, a std::map oracle of byte strings, and the checks of a
// recovered image: Verify(); every completed call visible, the call or
// transaction in flight all or nothing, nothing else; reads agree with the
// scan; the allocator holds exactly the blocks the index and the store
// reach; then further calls and transactions against the oracle, with new
// versions above every recovered one.
//
// Workloads (deterministic in ops and seed):
//   kv     single calls: Put, PutIfAbsent, PutIfPresent, Remove, Get, over
//          keys that share 8-byte prefixes (a tree of buckets and
//          directories of fanout 3), tie on 16 bytes,
//          carry NUL bytes or map to index key UINT64_MAX, values empty,
//          small, or too large to sit in their version (value blocks),
//          with a restart every ops/4;
//   kv-tx  transactions of 2-4 writes among single calls, and commits
//          stopped where a crash would stop them (after some of their
//          versions are linked; after their commit word), each followed by
//          a restart whose recovery repairs them under the tracer.
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "crash_workload.h"
#include "kv/store.h"
#include "pm/pool_format.h"
#include "subject.h"

namespace pmindex::crash {

bool IsKvWorkload(std::string_view name) { return name == "kv" || name == "kv-tx"; }

namespace {

using Model = std::map<std::string, std::string>;

// The clock's reservation (root slot 5) moves every 3 commits, so its
// persist points run in every workload.
constexpr uint64_t kClockChunk = 3;

// The smallest fanout: the 8 keys of "user0000" fill a tree of buckets
// and directories two levels high, so splits, merges, root splits and
// collapses run in every workload.
constexpr uint32_t kFanout = 3;

kv::StoreOptions StoreOpts() {
  kv::StoreOptions o;
  o.clock_chunk = kClockChunk;
  o.fanout = kFanout;
  return o;
}

struct KvOp {
  enum Type { kCreate, kPut, kPutIfAbsent, kPutIfPresent, kRemove, kGet, kTxn, kStopBefore, kStopAfter, kReopen };
  Type type = kPut;
  std::string key, value;
  kv::Store::Writes writes;  // transactions
  size_t links = 0;          // kStopBefore: versions linked before the stop
};

KvOp OpOf(KvOp::Type t) {
  KvOp op;
  op.type = t;
  return op;
}

std::string Printable(std::string_view k) {
  std::string s;
  for (char c : k.substr(0, 20)) {
    if (c >= 33 && c < 127) {
      s += c;
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", static_cast<unsigned char>(c));
      s += b;
    }
  }
  if (k.size() > 20) s += "...";
  return s;
}

std::string DescribeOp(const KvOp& op) {
  auto kv = [&](const char* verb) {
    return std::string(verb) + " " + Printable(op.key) + " (" + std::to_string(op.value.size()) + " bytes)";
  };
  auto txn = [&](const char* verb) {
    std::string d = verb;
    for (const auto& [k, v] : op.writes) {
      d.append(" ").append(Printable(k));
      d.append(v ? "=" : "=del");
      if (v) d.append(std::to_string(v->size())).append("B");
    }
    return d;
  };
  switch (op.type) {
    case KvOp::kCreate: return "create store";
    case KvOp::kPut: return kv("put");
    case KvOp::kPutIfAbsent: return kv("put_if_absent");
    case KvOp::kPutIfPresent: return kv("put_if_present");
    case KvOp::kRemove: return "remove " + Printable(op.key);
    case KvOp::kGet: return "get " + Printable(op.key);
    case KvOp::kTxn: return txn("commit");
    case KvOp::kStopBefore: return txn(("commit stopped after " + std::to_string(op.links) + " links:").c_str());
    case KvOp::kStopAfter: return txn("commit stopped after its commit word:");
    case KvOp::kReopen: return "reopen (recovery)";
  }
  return "?";
}

// The workload's keys: a tree of 8 keys under "user0000", keys alone on
// their prefix, two keys equal in their first 16 bytes, NUL bytes, the
// prefix UINT64_MAX; besides, two keys that hold large values and a hot key.
std::vector<std::string> Keys() {
  std::vector<std::string> k;
  for (char c = '1'; c <= '8'; ++c) k.push_back(std::string("user0000000") + c);
  for (char c = '1'; c <= '5'; ++c) k.push_back(std::string("k") + c);
  k.push_back("same-16-bytes-xxA");
  k.push_back("same-16-bytes-xxB");
  k.push_back(std::string("n\0l\0", 4));
  k.push_back(std::string(9, '\xff'));
  k.push_back(std::string(300, 'L'));
  return k;
}
const std::vector<std::string> kBig = {"big1", "big2"};
const std::string kHot = "hot";

class KvGen {
 public:
  KvGen(uint64_t seed, bool large) : rng_(Mix64(seed ^ 0x6B76)), keys_(Keys()), large_(large) {}
  uint64_t Roll(uint64_t n) { return rng_() % n; }
  const std::string& AnyKey() { return keys_[Roll(keys_.size())]; }
  std::string PresentKey() {
    if (present_.empty()) return AnyKey();
    auto it = present_.begin();
    std::advance(it, Roll(present_.size()));
    return *it;
  }
  std::string Value() {
    const uint64_t r = Roll(100);
    const size_t len = r < 10 ? 0 : r < 88 ? 8 + Roll(50) : 200 + Roll(700);
    return Fill(len);
  }
  std::string BigValue() { return Fill(kv::Version::kMaxInline + 1 + Roll(2000)); }
  void Single(std::vector<KvOp>& w, KvOp::Type t) {
    KvOp op;
    op.type = t;
    const bool big = large_ && (t == KvOp::kPut) && Roll(25) == 0;
    // A hot key overwritten with values of one size: the version a put cuts
    // off its chain is the block the next put reuses (reclamation's order).
    const bool hot = !big && t == KvOp::kPut && Roll(5) == 0;
    if (big) {
      op.key = kBig[Roll(2)];
    } else if (hot) {
      op.key = kHot;
    } else {
      op.key = (t == KvOp::kRemove || t == KvOp::kPutIfPresent) && Roll(5) != 0 ? PresentKey() : AnyKey();
    }
    if (t != KvOp::kRemove && t != KvOp::kGet) op.value = big ? BigValue() : hot ? Fill(16) : Value();
    const bool has = present_.count(op.key) != 0;
    if (t == KvOp::kPut || (t == KvOp::kPutIfAbsent && !has)) present_.insert(op.key);
    if (t == KvOp::kRemove) present_.erase(op.key);
    w.push_back(std::move(op));
  }
  // A transaction of 2-4 writes; removes only of keys present when it runs.
  KvOp Txn(KvOp::Type t) {
    KvOp op;
    op.type = t;
    const size_t n = 2 + Roll(3);
    std::set<std::string> now = present_;
    while (op.writes.size() < n) {
      const std::string k = AnyKey();
      if (op.writes.count(k)) continue;
      if (now.count(k) && Roll(3) == 0) {
        op.writes.emplace(k, std::nullopt);
        now.erase(k);
      } else {
        op.writes.emplace(k, Value());
        now.insert(k);
      }
    }
    op.links = Roll(n);
    if (t != KvOp::kStopBefore) present_ = now;
    return op;
  }

 private:
  std::string Fill(size_t len) {
    std::string v(len, '\0');
    const uint64_t tag = ++values_;
    for (size_t i = 0; i < len; ++i) v[i] = static_cast<char>(Mix64(tag * 1000003 + i / 8) >> (8 * (i % 8)));
    return v;
  }

  std::mt19937_64 rng_;
  std::vector<std::string> keys_;
  bool large_;
  std::set<std::string> present_;
  uint64_t values_ = 0;
};

std::vector<KvOp> MakeKvWorkload(std::string_view name, uint64_t ops, uint64_t seed) {
  const bool tx = name == "kv-tx";
  KvGen g(seed, !tx);
  std::vector<KvOp> w;
  w.push_back(OpOf(KvOp::kCreate));
  const uint64_t reopen_every = std::max<uint64_t>(ops / 4, 2);
  for (uint64_t i = 0; i < ops; ++i) {
    if (!tx && i > 0 && i % reopen_every == 0) w.push_back(OpOf(KvOp::kReopen));
    const uint64_t r = g.Roll(100);
    if (i < ops / 5) {
      g.Single(w, KvOp::kPut);
    } else if (!tx) {
      g.Single(w, r < 40 ? KvOp::kPut
                  : r < 50 ? KvOp::kPutIfAbsent
                  : r < 58 ? KvOp::kPutIfPresent
                  : r < 90 ? KvOp::kRemove
                           : KvOp::kGet);
    } else if (r < 55) {
      w.push_back(g.Txn(KvOp::kTxn));
    } else if (r < 65) {
      w.push_back(g.Txn(KvOp::kStopBefore));
      w.push_back(OpOf(KvOp::kReopen));
    } else if (r < 72) {
      w.push_back(g.Txn(KvOp::kStopAfter));
      w.push_back(OpOf(KvOp::kReopen));
    } else {
      g.Single(w, r < 85 ? KvOp::kPut : r < 95 ? KvOp::kRemove : KvOp::kGet);
    }
  }
  return w;
}

// What the store holds at its visible timestamp.
Status Contents(kv::Store& s, Model* out) {
  out->clear();
  return s.ScanAt(s.visible_ts(), "", std::nullopt, [out](std::string_view k, std::string_view v) {
    out->emplace(std::string(k), std::string(v));
    return true;
  });
}

std::string Diff(const Model& got, const Model& want) {
  std::ostringstream os;
  int items = 0;
  for (const auto& [k, v] : got) {
    if (items >= 3) break;
    auto it = want.find(k);
    if (it == want.end()) {
      os << (items++ ? "; " : "") << "key " << Printable(k) << " present (" << v.size() << " bytes) but not expected";
    } else if (it->second != v) {
      os << (items++ ? "; " : "") << "key " << Printable(k) << " has another value (" << v.size() << " bytes, "
         << it->second.size() << " expected)";
    }
  }
  for (const auto& [k, v] : want) {
    if (items >= 3) break;
    if (!got.count(k)) os << (items++ ? "; " : "") << "key " << Printable(k) << " missing";
  }
  os << " [" << got.size() << " keys found, " << want.size() << " expected]";
  return os.str();
}

void Apply(const KvOp& op, Model* m) {
  switch (op.type) {
    case KvOp::kPut:
      (*m)[op.key] = op.value;
      break;
    case KvOp::kPutIfAbsent:
      m->emplace(op.key, op.value);
      break;
    case KvOp::kPutIfPresent:
      if (m->count(op.key)) (*m)[op.key] = op.value;
      break;
    case KvOp::kRemove:
      m->erase(op.key);
      break;
    case KvOp::kTxn:
    case KvOp::kStopAfter:
      for (const auto& [k, v] : op.writes) {
        if (v) {
          (*m)[k] = *v;
        } else {
          m->erase(k);
        }
      }
      break;
    default:
      break;
  }
}

// Runs a single call or a transaction on `s` and checks its status
// against the model before it (which it then updates): "" or what
// disagrees.
std::string RunOp(kv::Store& s, const KvOp& op, Model* m) {
  const bool has = m->count(op.key) != 0;
  Status st;
  bool ok = true;
  const std::string_view v = op.value;
  switch (op.type) {
    case KvOp::kPut:
      st = s.Write(op.key, &v, kv::Store::Cond::kNone, 0);
      ok = st.ok();
      break;
    case KvOp::kPutIfAbsent:
      st = s.Write(op.key, &v, kv::Store::Cond::kAbsent, 0);
      ok = has ? st.is_already_exists() : st.ok();
      break;
    case KvOp::kPutIfPresent:
      st = s.Write(op.key, &v, kv::Store::Cond::kPresent, 0);
      ok = has ? st.ok() : st.is_not_found();
      break;
    case KvOp::kRemove:
      st = s.Write(op.key, nullptr, kv::Store::Cond::kPresent, 0);
      ok = has ? st.ok() : st.is_not_found();
      break;
    case KvOp::kGet: {
      auto r = s.Read(op.key, true);
      ok = has ? (r.ok() && r.value().value == m->at(op.key)) : r.status().is_not_found();
      st = r.status();
      break;
    }
    case KvOp::kTxn:
    case KvOp::kStopBefore:
    case KvOp::kStopAfter:
      if (op.type == KvOp::kStopBefore) s.StopNextCommit({kv::CommitStop::kBeforeCommit, op.links});
      if (op.type == KvOp::kStopAfter) s.StopNextCommit({kv::CommitStop::kAfterCommit, 0});
      st = s.Commit(s.visible_ts(), op.writes);
      s.StopNextCommit({});
      ok = op.type == KvOp::kStopBefore ? st.IsAborted() : st.ok();
      break;
    default:
      break;
  }
  if (!ok) return "returned " + st.ToString() + ", oracle disagrees";
  Apply(op, m);
  return "";
}

class KvSubject final : public Subject {
 public:
  Status Prepare(const Config& cfg) override {
    cfg_ = &cfg;
    ops_ = MakeKvWorkload(cfg.workload, cfg.ops, cfg.seed);
    return Status::OK();
  }
  size_t ops() const override { return ops_.size(); }
  OpClass ClassOf(size_t i) const override {
    if (ops_[i].type == KvOp::kCreate) return OpClass::kCreate;
    if (ops_[i].type == KvOp::kReopen) return OpClass::kReopen;
    return OpClass::kOther;
  }
  std::string Describe(size_t i) const override { return DescribeOp(ops_[i]); }
  void AdjustPool(PoolOptions* po) const override { po->incompat_flags |= pm::kIncompatKvStore; }

  void BeginOp(size_t i) override {
    after_ = oracle_;
    Apply(ops_[i], &after_);
  }
  Status Create(Pool* pool) override {
    auto s = kv::Store::Create(pool, cfg_->index, cfg_->options, StoreOpts());
    if (!s.ok()) return s.status();
    store_ = std::move(s).value();
    return Status::OK();
  }
  Status Reopen(Pool* pool) override {
    auto s = kv::Store::Open(pool, StoreOpts());
    if (!s.ok()) return s.status();
    store_ = std::move(s).value();
    return Status::OK();
  }
  std::string Run(size_t i) override {
    Model m = oracle_;
    std::string bad = RunOp(*store_, ops_[i], &m);
    // Retired blocks are freed at once: the earliest reuse a real run can see
    // (once the session's concurrent reader is done).
    if (before_reclaim) before_reclaim();
    store_->allocator()->Reclaim();
    return bad;
  }
  // The store's guarantee (docs/layout/kv.md "Concurrency"): a reader reads
  // at the visible timestamp, which a commit publishes only once its
  // versions are linked and durable, whatever the index kind beneath.
  bool ReadsMaySeeUndurable() const override { return false; }
  bool ReadInFlight(size_t i) override {
    const KvOp& op = ops_[i];
    std::set<std::string> keys;
    if (!op.key.empty()) keys.insert(op.key);
    for (const auto& [k, v] : op.writes) keys.insert(k);
    for (const std::string& k : keys) {
      auto b = oracle_.find(k);
      auto a = after_.find(k);
      const bool had = b != oracle_.end(), has = a != after_.end();
      if (had == has && (!has || b->second == a->second)) continue;  // not changed by op i
      auto r = store_->Read(k, true);
      if (has ? (r.ok() && r.value().value == a->second) : r.status().is_not_found()) return true;
    }
    return false;
  }
  bool EndOp() override {
    const bool changed = after_ != oracle_;
    oracle_.swap(after_);
    return changed;
  }
  // Without Close: the pool is dropped with it (a restart, or the end).
  void Drop() override { store_.reset(); }
  Status Verify() override { return store_->Verify(); }
  alloc::Allocator* allocator() override { return store_ ? store_->allocator() : nullptr; }
  Status ForEachBlock(const std::function<void(PPtr)>& fn) override { return store_->ForEachBlock(fn); }

  std::string CheckImage(Pool& pool, const Expect& e, uint64_t seed) override;

 private:
  const Config* cfg_ = nullptr;
  std::vector<KvOp> ops_;
  Model oracle_, after_;
  std::unique_ptr<kv::Store> store_;
};

std::string StoreBlocks(kv::Store& s, bool leaks) {
  s.index()->quiesce();
  return CheckBlocks(*s.allocator(), [&s](const std::function<void(PPtr)>& fn) { return s.ForEachBlock(fn); },
                     leaks);
}

std::string KvSubject::CheckImage(Pool& pool, const Expect& e, uint64_t seed) {
  auto opened = kv::Store::Open(&pool, StoreOpts());
  if (!opened.ok()) {
    // Inside the create, the pool need not open until the index published
    // root slot 0; from then on it must (a store with slot 5 still 0 opens
    // empty).
    if (e.create_mid && pool.root(0) == 0) return "";
    return "recovery (kv::Store::Open) failed: " + opened.status().ToString();
  }
  kv::Store& s = *opened.value();
  Status st = s.Verify();
  if (!st.ok()) return "Verify() after recovery: " + st.ToString();
  Model got;
  st = Contents(s, &got);
  if (!st.ok()) return "scan after recovery: " + st.ToString();
  Model model;
  if (got == after_) {
    model = after_;
  } else if (!e.after_only && got == oracle_) {
    model = oracle_;
    if (e.seen) {
      // Forbidden for the store (ReadsMaySeeUndurable).
      return "read visibility: a Get before the crash returned the effect of op #" +
             std::to_string(e.op) + " (" + DescribeOp(ops_[e.op]) + "), which the crash lost";
    }
  } else if (e.after_only) {
    return "completed calls not all visible: " + Diff(got, after_);
  } else {
    return "the call or transaction in flight is not all-or-nothing: vs before: " + Diff(got, oracle_) +
           "; vs after: " + Diff(got, after_);
  }
  // Reads agree with the scan; the keys of the op in flight are right.
  uint64_t newest = 0;
  std::set<std::string> probe;
  for (const auto& [k, v] : model) probe.insert(k);
  probe.insert(ops_[e.op].key);
  for (const auto& [k, v] : ops_[e.op].writes) probe.insert(k);
  for (const std::string& k : probe) {
    if (k.empty()) continue;
    auto r = s.Read(k, true);
    auto it = model.find(k);
    if (it == model.end()) {
      if (!r.status().is_not_found()) return "Get(" + Printable(k) + ") finds a key the scan does not";
    } else if (!r.ok() || r.value().value != it->second) {
      return "Get(" + Printable(k) + ") disagrees with the scan: " + (r.ok() ? "another value" : r.status().ToString());
    } else {
      newest = std::max(newest, r.value().version);
    }
  }
  std::string a = StoreBlocks(s, true);
  if (!a.empty()) return "after recovery: " + a;

  // Further calls and transactions, against the oracle; each new version
  // above every recovered one.
  KvGen g(seed, false);
  for (int j = 0; j < cfg_->further_ops; ++j) {
    std::vector<KvOp> w;
    const uint64_t r = g.Roll(10);
    if (r < 2) {
      w.push_back(g.Txn(KvOp::kTxn));
    } else {
      g.Single(w, r < 6 ? KvOp::kPut : r < 8 ? KvOp::kRemove : KvOp::kGet);
    }
    const KvOp& op = w[0];
    std::string bad = RunOp(s, op, &model);
    if (!bad.empty()) return "after recovery, " + DescribeOp(op) + " " + bad;
    if (op.type == KvOp::kPut) {
      auto v = s.Read(op.key, false);
      if (!v.ok() || v.value().version <= newest)
        return "after recovery, a new version (" + (v.ok() ? std::to_string(v.value().version) : v.status().ToString()) +
               ") is not above the recovered ones (" + std::to_string(newest) + "): the clock went back";
      newest = v.value().version;
    }
  }
  st = s.Verify();
  if (!st.ok()) return "Verify() after further calls: " + st.ToString();
  st = Contents(s, &got);
  if (!st.ok() || got != model) return "after further calls: " + (st.ok() ? Diff(got, model) : st.ToString());
  a = StoreBlocks(s, false);
  if (!a.empty()) return "after further calls: " + a;
  return "";
}

}  // namespace

std::unique_ptr<Subject> MakeKvSubject() { return std::make_unique<KvSubject>(); }

}  // namespace pmindex::crash
