#include "crash_workload.h"

#include <algorithm>
#include <random>
#include <set>

namespace pmindex::crash {

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string Describe(const Op& op) {
  auto kv = [&](const char* verb) {
    return std::string(verb) + " " + std::to_string(op.key) + "=" + std::to_string(op.value);
  };
  switch (op.type) {
    case OpType::kCreate: return "create_index";
    case OpType::kInsert: return kv("insert");
    case OpType::kUpdate: return kv("update");
    case OpType::kUpsert: return kv("upsert");
    case OpType::kRemove: return "remove " + std::to_string(op.key);
    case OpType::kLookup: return "lookup " + std::to_string(op.key);
    case OpType::kBulkLoad: return "bulk_load " + std::to_string(op.bulk.size()) + " pairs";
    case OpType::kReopen: return "reopen (recovery)";
  }
  return "?";
}

const std::vector<std::pair<std::string, std::string>>& WorkloadNames() {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"mixed", "inserts, then inserts/updates/upserts/removes/lookups"},
      {"insert", "random inserts (node splits), some duplicates"},
      {"seq", "ascending inserts (splits at the right edge)"},
      {"delete", "inserts, then removes of most keys (merges, empty nodes)"},
      {"dense",
       "inserts, then removes, inserts and updates, of keys sharing their high bytes "
       "(radix trees: deep nodes, node growth, path splits and collapses)"},
      {"update", "inserts, then updates and upserts of present keys"},
      {"churn",
       "inserts, then waves of removes of neighbouring keys and inserts (merges, then splits that "
       "reuse freed nodes)"},
      {"bulk", "bulk load of half the ops, then inserts and removes"},
      {"bulk-small", "bulk load of 3 pairs (one leaf), then inserts and removes"},
      {"recovery", "mixed, with a restart (crash recovery, itself crash-tested) every ops/5"},
      {"kv",
       "the key-value store over the index: single calls on byte-string keys, large values, "
       "restarts"},
      {"kv-tx",
       "the key-value store: transactions, and commits stopped as a crash would stop them, then "
       "recovered"},
  };
  return names;
}

namespace {

class Gen {
 public:
  Gen(uint64_t ops, uint64_t seed) : rng_(Mix64(seed)), domain_(std::max<uint64_t>(ops, 16)) {}

  // Keys spread over the whole 64-bit space; 0 and UINT64_MAX included.
  Key KeyOf(uint64_t i) const { return i == 1 ? UINT64_MAX : i * 0x9e3779b97f4a7c15ull; }
  Key RandomKey() { return KeyOf(rng_() % domain_); }
  Key PresentKey() {
    if (present_.empty()) return RandomKey();
    auto it = present_.begin();
    std::advance(it, rng_() % present_.size());
    return *it;
  }
  Value NextValue() { return Mix64(++values_ ^ 0x5eed); }
  uint64_t Roll(uint64_t n) { return rng_() % n; }

  void Add(std::vector<Op>& w, OpType t, Key k) {
    Op op;
    op.type = t;
    op.key = k;
    if (t == OpType::kInsert || t == OpType::kUpdate || t == OpType::kUpsert) op.value = NextValue();
    if (t == OpType::kInsert || t == OpType::kUpsert) present_.insert(k);
    if (t == OpType::kRemove) present_.erase(k);
    w.push_back(std::move(op));
  }

  std::set<Key> present_;

 private:
  std::mt19937_64 rng_;
  uint64_t domain_;
  uint64_t values_ = 0;
};

Op OpOf(OpType t) {
  Op op;
  op.type = t;
  return op;
}

}  // namespace

Result<std::vector<Op>> MakeWorkload(std::string_view name, uint64_t ops, uint64_t seed) {
  bool known = false;
  for (const auto& [n, d] : WorkloadNames()) known |= (n == name);
  if (!known) {
    std::string all;
    for (const auto& [n, d] : WorkloadNames()) all += (all.empty() ? "" : "|") + n;
    return Status::InvalidArgument("unknown workload '" + std::string(name) + "' (" + all + ")");
  }
  if (name == "kv" || name == "kv-tx") {
    return Status::InvalidArgument("workload '" + std::string(name) +
                                   "' runs the key-value store (crashsim/kv_subject.cc), not index operations");
  }
  Gen g(ops, seed);
  std::vector<Op> w;
  w.push_back(OpOf(OpType::kCreate));
  const uint64_t n = ops;
  auto mixed_op = [&](bool with_lookups) {
    uint64_t r = g.Roll(100);
    if (r < 35) {
      g.Add(w, OpType::kInsert, g.Roll(4) == 0 ? g.PresentKey() : g.RandomKey());
    } else if (r < 50) {
      g.Add(w, OpType::kUpdate, g.Roll(5) == 0 ? g.RandomKey() : g.PresentKey());
    } else if (r < 60) {
      g.Add(w, OpType::kUpsert, g.Roll(2) == 0 ? g.RandomKey() : g.PresentKey());
    } else if (r < 90 || !with_lookups) {
      g.Add(w, OpType::kRemove, g.Roll(5) == 0 ? g.RandomKey() : g.PresentKey());
    } else {
      g.Add(w, OpType::kLookup, g.PresentKey());
    }
  };
  if (name == "mixed" || name == "recovery") {
    const uint64_t reopen_every = name == "recovery" ? std::max<uint64_t>(n / 5, 2) : 0;
    for (uint64_t i = 0; i < n; ++i) {
      if (reopen_every != 0 && i > 0 && i % reopen_every == 0) {
        w.push_back(OpOf(OpType::kReopen));
      }
      if (i < n * 3 / 10) {
        g.Add(w, OpType::kInsert, g.RandomKey());
      } else {
        mixed_op(true);
      }
    }
  } else if (name == "insert") {
    for (uint64_t i = 0; i < n; ++i) {
      g.Add(w, OpType::kInsert, g.Roll(10) == 0 ? g.PresentKey() : g.RandomKey());
    }
  } else if (name == "seq") {
    for (uint64_t i = 0; i < n; ++i) g.Add(w, OpType::kInsert, (i + 1) * 1000);
  } else if (name == "dense") {
    // Keys that differ in bytes 5 and 7 only, and now and then in byte 3:
    // a radix tree's nodes sit deep, fill, grow, split and collapse, and
    // the byte-3 keys break a compressed path.
    auto dense = [&g, n] {
      Key k = g.Roll(4) << 16 | g.Roll(n / 8 + 3);
      if (g.Roll(8) == 0) k |= (g.Roll(3) + 1) << 32;
      return k;
    };
    for (uint64_t i = 0; i < n / 2; ++i) g.Add(w, OpType::kInsert, dense());
    for (uint64_t i = n / 2; i < n; ++i) {
      const uint64_t r = g.Roll(20);
      if (r < 12) {
        g.Add(w, OpType::kRemove, g.PresentKey());
      } else if (r < 17) {
        g.Add(w, OpType::kInsert, dense());
      } else {
        g.Add(w, OpType::kUpdate, g.PresentKey());
      }
    }
  } else if (name == "delete") {
    for (uint64_t i = 0; i < n / 2; ++i) g.Add(w, OpType::kInsert, g.RandomKey());
    for (uint64_t i = n / 2; i < n; ++i) {
      g.Add(w, i % 8 == 7 ? OpType::kInsert : OpType::kRemove,
            g.Roll(8) == 0 ? g.RandomKey() : g.PresentKey());
    }
  } else if (name == "churn") {
    // A wave removes up to 6 keys that are neighbours in key order (a node
    // empties: trees that merge do), then inserts 6 new keys (splits take
    // blocks, the ones the merges gave back among them).
    for (uint64_t i = 0; i < n / 2; ++i) g.Add(w, OpType::kInsert, g.RandomKey());
    while (w.size() <= n) {
      std::vector<Key> run;
      for (auto it = g.present_.lower_bound(g.RandomKey()); it != g.present_.end() && run.size() < 6; ++it)
        run.push_back(*it);
      for (Key k : run) g.Add(w, OpType::kRemove, k);
      for (int i = 0; i < 6; ++i) g.Add(w, OpType::kInsert, g.RandomKey());
    }
    w.resize(n + 1);
  } else if (name == "update") {
    for (uint64_t i = 0; i < n * 4 / 10; ++i) g.Add(w, OpType::kInsert, g.RandomKey());
    for (uint64_t i = n * 4 / 10; i < n; ++i) {
      uint64_t r = g.Roll(10);
      g.Add(w, r < 6 ? OpType::kUpdate : OpType::kUpsert,
            r == 9 ? g.RandomKey() : g.PresentKey());
    }
  } else if (name == "bulk" || name == "bulk-small") {
    // bulk-small: a bulk load that fits one leaf of every tree, the path
    // where a tree writes no routing hints (pm_leaf_tree.h: the head NAW's
    // fence is then the last one of the operation).
    const uint64_t pairs = name == "bulk" ? n / 2 + 1 : std::min<uint64_t>(n / 2 + 1, 3);
    Op bulk = OpOf(OpType::kBulkLoad);
    std::set<Key> keys;
    while (keys.size() < pairs) keys.insert(g.RandomKey());
    for (Key k : keys) bulk.bulk.push_back(KV{k, g.NextValue()});
    g.present_ = keys;
    w.push_back(std::move(bulk));
    for (uint64_t i = 0; i < n / 2; ++i) {
      g.Add(w, g.Roll(3) == 0 ? OpType::kRemove : OpType::kInsert,
            g.Roll(3) == 0 ? g.PresentKey() : g.RandomKey());
    }
  }
  return w;
}

}  // namespace pmindex::crash
