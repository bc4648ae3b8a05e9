// The index workloads' Subject (subject.h): operations of crash_workload.h
// on an index, a std::map oracle, and the checks of a recovered image
// (docs/crash-testing.md "Checks on each image").
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "crash_workload.h"
#include "index/index.h"
#include "index/options.h"
#include "index/registry.h"
#include "subject.h"

namespace pmindex::crash {

std::string Hex(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

std::string CheckBlocks(alloc::Allocator& a, const std::function<Status(const std::function<void(PPtr)>&)>& walk,
                        bool leaks) {
  // Retired blocks are unreachable but still live until reclaimed; no
  // other thread runs, so reclaiming here frees all of them.
  a.Reclaim();
  std::set<uint64_t> reach;
  std::string dup;
  Status st = walk([&](PPtr p) {
    if (!reach.insert(p.raw()).second && dup.empty()) dup = Hex(p.raw());
  });
  if (st.is_not_supported()) return "";
  if (!st.ok()) return "for_each_block: " + st.ToString();
  if (!dup.empty()) return "for_each_block reported block " + dup + " twice (shared block)";
  std::vector<std::pair<uint64_t, size_t>> live;
  a.ForEachLiveBlock([&](PPtr p, size_t n) { live.emplace_back(p.raw(), n); });
  std::sort(live.begin(), live.end());
  for (size_t i = 1; i < live.size(); ++i) {
    if (PPtr(live[i - 1].first).offset() + live[i - 1].second > PPtr(live[i].first).offset()) {
      return "allocator blocks overlap: " + Hex(live[i - 1].first) + " (+" + std::to_string(live[i - 1].second) +
             ") and " + Hex(live[i].first);
    }
  }
  std::set<uint64_t> live_set;
  for (const auto& [p, n] : live) live_set.insert(p);
  for (uint64_t p : reach) {
    if (!live_set.count(p)) return "reachable block " + Hex(p) + " is free in the allocator (would be handed out again)";
  }
  for (uint64_t p : live_set) {
    if (leaks && !reach.count(p)) return "leak: live block " + Hex(p) + " is not reachable from the index";
  }
  return "";
}

namespace {

using Model = std::map<Key, Value>;
constexpr uint64_t kPoisonWord = 0xA5A5A5A5A5A5A5A5ull;

// Differences between what the index holds and a model, for messages.
std::string Diff(const std::vector<KV>& got, const Model& want, size_t max_items = 3) {
  std::ostringstream os;
  size_t items = 0;
  Model g;
  for (const KV& kv : got) g[kv.key] = kv.value;
  for (const auto& [k, v] : g) {
    auto it = want.find(k);
    if (items >= max_items) break;
    if (it == want.end()) {
      os << (items++ ? "; " : "") << "key " << k << " present (value " << v << ") but never written or removed";
      if (k == kPoisonWord || v == kPoisonWord) os << " (the poison pattern: memory never written)";
    } else if (it->second != v) {
      os << (items++ ? "; " : "") << "key " << k << " has value " << v << ", expected " << it->second;
      if (v == kPoisonWord) os << " (the poison pattern: memory never written)";
    }
  }
  for (const auto& [k, v] : want) {
    if (items >= max_items) break;
    if (!g.count(k)) os << (items++ ? "; " : "") << "key " << k << " (value " << v << ") missing";
  }
  if (items == 0 && got.size() != g.size()) os << "scan returned duplicate keys";
  if (items == 0 && got.size() == g.size()) os << "scan out of order";
  os << " [" << got.size() << " entries found, " << want.size() << " expected]";
  return os.str();
}

bool Same(const std::vector<KV>& got, const Model& want) {
  if (got.size() != want.size()) return false;
  size_t i = 0;
  for (const auto& [k, v] : want) {
    if (got[i].key != k || got[i].value != v) return false;
    ++i;
  }
  return true;
}

std::vector<KV> ScanAll(Index& x, size_t limit) {
  std::vector<KV> out(limit + 1);
  size_t n = x.scan(0, out.size(), out.data());
  out.resize(std::min(n, out.size()));
  return out;
}

// Allocator checks of an index (its own epochs and background work
// finished first).
std::string CheckIndexBlocks(Index& x, bool leaks) {
  alloc::Allocator* a = x.allocator();
  if (a == nullptr) return "persistent index has no allocator";
  x.quiesce();
  return CheckBlocks(*a, [&x](const std::function<void(PPtr)>& fn) { return x.for_each_block(fn); }, leaks);
}

class IndexSubject final : public Subject {
 public:
  Status Prepare(const Config& cfg) override {
    cfg_ = &cfg;
    auto w = MakeWorkload(cfg.workload, cfg.ops, cfg.seed);
    if (!w.ok()) return w.status();
    ops_ = std::move(w.value());
    // nobtree's inline migration moves nodes from inside lookups: a read
    // that waits for a mutex the stopped writer holds goes on beside the
    // writer once it is released, and its move's fences raise crash points
    // from the probe's thread into a session built for one thread (and
    // make crash points depend on the scheduler). No reads then (its other
    // configurations, and tlbtree, run the same engine's reads);
    // docs/crash-testing.md "nobtree's inline migration and the reads".
    auto o = Options::Parse(cfg.options);
    if (o.ok() && o.value().has("migrate")) {
      auto m = o.value().get_enum("migrate", "background", {"background", "inline", "off"});
      reads_ = !(m.ok() && m.value() == "inline");
    }
    return Status::OK();
  }
  size_t ops() const override { return ops_.size(); }
  OpClass ClassOf(size_t i) const override {
    if (ops_[i].type == OpType::kCreate) return OpClass::kCreate;
    if (ops_[i].type == OpType::kReopen) return OpClass::kReopen;
    return OpClass::kOther;
  }
  std::string Describe(size_t i) const override { return crash::Describe(ops_[i]); }

  void BeginOp(size_t i) override {
    const Op& op = ops_[i];
    after_ = oracle_;
    switch (op.type) {
      case OpType::kInsert:
        after_.emplace(op.key, op.value);
        break;
      case OpType::kUpdate:
        if (after_.count(op.key)) after_[op.key] = op.value;
        break;
      case OpType::kUpsert:
        after_[op.key] = op.value;
        break;
      case OpType::kRemove:
        after_.erase(op.key);
        break;
      case OpType::kBulkLoad:
        for (const KV& kv : op.bulk) after_[kv.key] = kv.value;
        break;
      default:
        break;
    }
  }
  Status Create(Pool* pool) override {
    auto idx = create_index(cfg_->index, cfg_->options, pool);
    if (!idx.ok()) return idx.status();
    idx_ = std::move(idx.value());
    return Status::OK();
  }
  Status Reopen(Pool* pool) override {
    auto idx = open_index(pool);
    if (!idx.ok()) return idx.status();
    idx_ = std::move(idx.value());
    return Status::OK();
  }
  std::string Run(size_t i) override;
  bool ReadInFlight(size_t i) override {
    const Op& op = ops_[i];
    if (op.type != OpType::kInsert && op.type != OpType::kUpdate && op.type != OpType::kUpsert &&
        op.type != OpType::kRemove) {
      return false;
    }
    auto before = oracle_.find(op.key);
    auto after = after_.find(op.key);
    const bool had = before != oracle_.end(), has = after != after_.end();
    if (had == has && (!has || before->second == after->second)) return false;  // no change
    auto r = idx_->lookup(op.key);
    return has ? (r && *r == after->second) : !r;
  }
  bool MakesReads() const override { return reads_; }
  bool ReadsMaySeeUndurable() const override {
    const IndexInfo* info = Registry::Get().Find(cfg_->index);
    return info == nullptr || !info->reads_see_only_durable;
  }
  bool EndOp() override {
    const bool changed = after_ != oracle_;
    oracle_.swap(after_);
    return changed;
  }
  void Drop() override { idx_.reset(); }
  Status Verify() override { return idx_->verify(); }
  alloc::Allocator* allocator() override { return idx_ ? idx_->allocator() : nullptr; }
  Status ForEachBlock(const std::function<void(PPtr)>& fn) override { return idx_->for_each_block(fn); }

  std::string CheckImage(Pool& pool, const Expect& e, uint64_t seed) override {
    auto idx = open_index(&pool);
    if (!idx.ok()) {
      if (e.create_mid) {
        // A crash inside create_index may leave a pool that does not open,
        // but only until the index publishes root slot 0 (by convention the
        // last store of create_index: a non-zero slot 0 means the index
        // exists, so everything it reaches must be durable by then).
        if (pool.root(0) != 0) {
          return "crash inside create_index: root slot 0 is already set, yet open_index fails: " +
                 idx.status().ToString();
        }
        return "";
      }
      return "recovery (open_index) failed: " + idx.status().ToString();
    }
    return CheckRecovered(**idx, e, seed);
  }

 private:
  std::string CheckRecovered(Index& x, const Expect& e, uint64_t seed);

  const Config* cfg_ = nullptr;
  std::vector<Op> ops_;
  bool reads_ = true;
  Model oracle_, after_;
  std::unique_ptr<Index> idx_;
};

std::string IndexSubject::CheckRecovered(Index& x, const Expect& e, uint64_t seed) {
  const Op& op = ops_[e.op];
  Status st = x.verify();
  if (!st.ok()) return "verify() after recovery: " + st.ToString();
  const bool bulk_mid = op.type == OpType::kBulkLoad && !e.after_only;
  std::string visible_lost;  // an allowed visible-then-lost, reported if nothing fails
  const size_t limit = std::max(oracle_.size(), after_.size()) + 8;
  std::vector<KV> got = ScanAll(x, limit);
  Model model;
  if (bulk_mid) {
    // A bulk load is not atomic: any subset of its pairs may survive.
    for (size_t j = 0; j < got.size(); ++j) {
      if (j > 0 && got[j].key <= got[j - 1].key) return "scan out of order after recovery";
      auto it = after_.find(got[j].key);
      if (it == after_.end() || it->second != got[j].value) {
        return "after a crash in bulk_load: " + Diff(got, after_);
      }
      model[got[j].key] = got[j].value;
    }
  } else if (Same(got, after_)) {
    model = after_;
  } else if (!e.after_only && Same(got, oracle_)) {
    model = oracle_;
    if (e.seen) {
      // A concurrent read before the crash returned the operation's effect.
      const std::string what = "a read before the crash returned op #" + std::to_string(e.op) +
                               "'s effect on key " + std::to_string(op.key) +
                               ", which the crash lost";
      if (strict_reads || !ReadsMaySeeUndurable()) return "read visibility: " + what;
      visible_lost = std::string(kVisibleLostAllowed) + what;
    }
  } else if (e.after_only) {
    return "completed operations not all visible: " + Diff(got, after_);
  } else {
    return "in-flight operation not all-or-nothing: vs before: " + Diff(got, oracle_) + "; vs after: " +
           Diff(got, after_);
  }
  // Point lookups agree with the scan, and the in-flight key is right.
  size_t checked = 0;
  for (const auto& [k, v] : model) {
    if (++checked > 512) break;
    auto got_v = x.lookup(k);
    if (!got_v || *got_v != v) {
      return "lookup(" + std::to_string(k) + ") = " + (got_v ? std::to_string(*got_v) : "absent") +
             " but scan shows " + std::to_string(v);
    }
  }
  if (!model.count(op.key) && x.lookup(op.key)) {
    return "lookup(" + std::to_string(op.key) + ") finds a key the scan does not";
  }
  std::string a = CheckIndexBlocks(x, true);
  if (!a.empty()) return "after recovery: " + a;

  // Further operations on the recovered index, against the oracle.
  std::mt19937_64 rng(seed);
  std::vector<Key> keys;
  for (const auto& [k, v] : model) keys.push_back(k);
  auto pick = [&]() -> Key {
    if (!keys.empty() && rng() % 2 == 0) return keys[rng() % keys.size()];
    return rng() % 4 == 0 ? UINT64_MAX - rng() % 4 : Mix64(rng());
  };
  for (int j = 0; j < cfg_->further_ops; ++j) {
    const Key k = pick();
    const Value v = Mix64(rng());
    const bool has = model.count(k) != 0;
    const char* what = "";
    bool ok = true;
    std::string extra;
    switch (rng() % 5) {
      case 0:
      case 1: {
        what = "insert";
        Status s = x.insert(k, v);
        ok = has ? s.is_already_exists() : s.ok();
        if (s.ok()) {
          model[k] = v;
          keys.push_back(k);
        }
        extra = s.ToString();
        break;
      }
      case 2: {
        what = "update";
        Status s = x.update(k, v);
        ok = has ? s.ok() : s.is_not_found();
        if (s.ok()) model[k] = v;
        extra = s.ToString();
        break;
      }
      case 3: {
        what = "remove";
        Status s = x.remove(k);
        ok = has ? s.ok() : s.is_not_found();
        if (s.ok()) model.erase(k);
        extra = s.ToString();
        break;
      }
      default: {
        what = "lookup";
        auto r = x.lookup(k);
        ok = has ? (r && *r == model[k]) : !r;
        extra = r ? std::to_string(*r) : "absent";
        break;
      }
    }
    if (!ok) {
      return "after recovery, operation " + std::to_string(j) + " (" + what + " " + std::to_string(k) +
             ") returned " + extra + ", oracle disagrees";
    }
  }
  st = x.verify();
  if (!st.ok()) return "verify() after further operations: " + st.ToString();
  got = ScanAll(x, model.size() + 8);
  if (!Same(got, model)) return "after further operations: " + Diff(got, model);
  a = CheckIndexBlocks(x, false);
  if (!a.empty()) return "after further operations: " + a;
  return visible_lost;
}

std::string IndexSubject::Run(size_t i) {
  const Op& op = ops_[i];
  Status st;
  bool ok = true;
  std::string got;
  const bool has = oracle_.count(op.key) != 0;
  switch (op.type) {
    case OpType::kCreate:
    case OpType::kReopen:
      return "";  // the session's
    case OpType::kInsert:
      st = idx_->insert(op.key, op.value);
      ok = has ? st.is_already_exists() : st.ok();
      break;
    case OpType::kUpdate:
      st = idx_->update(op.key, op.value);
      ok = has ? st.ok() : st.is_not_found();
      break;
    case OpType::kUpsert:
      st = idx_->upsert(op.key, op.value);
      ok = st.ok();
      break;
    case OpType::kRemove:
      st = idx_->remove(op.key);
      ok = has ? st.ok() : st.is_not_found();
      break;
    case OpType::kLookup: {
      auto r = idx_->lookup(op.key);
      ok = has ? (r && *r == oracle_.at(op.key)) : !r;
      got = r ? std::to_string(*r) : "absent";
      break;
    }
    case OpType::kBulkLoad:
      st = idx_->bulk_load(op.bulk, op.fill);
      ok = st.ok();
      break;
  }
  // Blocks the index retired to the allocator's epochs are freed at once
  // (no other thread runs): the earliest reuse a real run can see, so a
  // persist point that matters only once a retired block is reused (and
  // rewritten by the next allocation) is put to the test. The session's
  // concurrent reader is done first.
  if (before_reclaim) before_reclaim();
  if (idx_->allocator() != nullptr) idx_->allocator()->Reclaim();
  if (ok) return "";
  return "returned " + (got.empty() ? st.ToString() : got) + ", oracle disagrees";
}

}  // namespace

std::unique_ptr<Subject> MakeIndexSubject() { return std::make_unique<IndexSubject>(); }

}  // namespace pmindex::crash
