// roart beyond one thread: NUMA node-visit metering (each block an
// operation reaches counts one visit, local or remote by the node of the
// block's page on simulated nodes), and optimistic lock coupling checked
// against acknowledged writes: writers and readers on keys that share
// prefixes and leaf arrays, every lookup and scan result checked against
// what the writers had acknowledged before and after it, also with both
// writers merging and splitting the leaf arrays of one node; and node
// shrinking on removes (N256 to N48 to N16 to N4), which the shared
// scenarios exercise but do not observe.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <latch>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "alloc/allocator.h"
#include "alloc/numa_meter.h"
#include "index/index.h"
#include "pm/persist.h"
#include "pm/pool.h"
#include "support/oracle.h"
#include "support/sorted_node_checks.h"
#include "support/status.h"

namespace pmindex {
namespace {

Result<std::unique_ptr<Index>> Make(const std::string& options, std::unique_ptr<Pool>* pool) {
  return testing::CreateInPool("roart", options, pool, 32ull << 20);
}

// Pools attached inside the scope see `nodes` simulated NUMA nodes, with
// metering on (both restored after).
class SimulatedNodes {
 public:
  explicit SimulatedNodes(int nodes) {
    alloc::Topology::SetDefault(alloc::Topology::Simulated(nodes));
    alloc::SetNumaMetering(true);
  }
  ~SimulatedNodes() {
    alloc::SetNumaMetering(false);
    alloc::Topology::SetDefault(nullptr);
  }
  SimulatedNodes(const SimulatedNodes&) = delete;
  SimulatedNodes& operator=(const SimulatedNodes&) = delete;
};

// (remote, local) visits the calling thread counted while fn ran.
template <typename F>
std::pair<uint64_t, uint64_t> Visits(F&& fn) {
  const pm::Counters before = pm::ThreadCounters();
  fn();
  const pm::Counters d = pm::ThreadCounters() - before;
  return {d.numa_remote_visits, d.numa_local_visits};
}

// Ten keys that differ in their last byte sit in one leaf array under the
// root: a lookup visits the root, the array and the one leaf whose
// fingerprint matches (3 blocks), a miss in the same array 2, a scan of
// all ten the root, the array and ten leaves. Blocks written by a thread
// on node 0 are on node 0: its visits are local, a thread on node 1 sees
// the same visits as remote. Metering off, nothing is counted.
TEST(RoartNuma, EveryBlockOnThePathIsOneVisit) {
  SimulatedNodes sim(2);
  PMINDEX_ASSERT_OK(alloc::Topology::Default()->place_this_thread(0));
  std::unique_ptr<Pool> pool;
  auto made = Make("", &pool);
  PMINDEX_ASSERT_OK(made);
  Index& t = *made.value();
  // An insert writes a leaf (and the first one its array) and visits the
  // root and, once it exists, the array.
  const auto ins = Visits([&] {
    for (Key k = 0; k < 10; ++k) PMINDEX_ASSERT_OK(t.insert(k, k + 100));
  });
  EXPECT_EQ(ins.first, 0u);
  EXPECT_GE(ins.second, 10u * 3);
  const auto local = Visits([&] {
    for (Key k = 0; k < 10; ++k) ASSERT_EQ(t.lookup(k).value_or(0), k + 100);
  });
  EXPECT_EQ(local, std::make_pair(uint64_t{0}, uint64_t{30}));
  EXPECT_EQ(Visits([&] { EXPECT_FALSE(t.lookup(77).has_value()); }),
            std::make_pair(uint64_t{0}, uint64_t{2}));
  KV out[10];
  EXPECT_EQ(Visits([&] { EXPECT_EQ(t.scan(0, 10, out), 10u); }),
            std::make_pair(uint64_t{0}, uint64_t{12}));
  std::pair<uint64_t, uint64_t> remote;
  std::thread([&] {
    PMINDEX_ASSERT_OK(alloc::Topology::Default()->place_this_thread(1));
    remote = Visits([&] {
      for (Key k = 0; k < 10; ++k) ASSERT_EQ(t.lookup(k).value_or(0), k + 100);
      PMINDEX_ASSERT_OK(t.remove(3));  // root, array, leaf
    });
  }).join();
  EXPECT_EQ(remote, std::make_pair(uint64_t{33}, uint64_t{0}));
  alloc::SetNumaMetering(false);
  EXPECT_EQ(Visits([&] { EXPECT_TRUE(t.lookup(4).has_value()); }),
            std::make_pair(uint64_t{0}, uint64_t{0}));
  PMINDEX_ASSERT_OK(t.verify());
}

// Key i of the shared key space: five values of byte 3 (an N4 or N16),
// forty of byte 5 (an N48) and the rest in byte 7, so the writers' keys
// interleave in the same inner nodes and leaf arrays.
Key KeyOf(uint32_t i) { return (Key{i % 5} << 32) | (Key{i / 5 % 40} << 16) | Key{i / 200}; }
constexpr uint32_t kKeys = 3000;
constexpr int kWriters = 2;
constexpr int kReaders = 2;

// What the writers acknowledged, per key: bit 0 a write or remove is in
// flight; bit 1 the key is present; bits 2.. the number of completed
// writes of the key (its value is that number << 16 | the key's index).
class Acks {
 public:
  static constexpr uint64_t kPending = 1;
  static constexpr uint64_t kPresent = 2;
  uint64_t Get(uint32_t i) const { return a_[i].load(std::memory_order_acquire); }
  void Set(uint32_t i, uint64_t v) { a_[i].store(v, std::memory_order_release); }
  static uint64_t Count(uint64_t a) { return a >> 2; }
  static Value ValueOf(uint32_t i, uint64_t count) { return count << 16 | i; }

 private:
  std::vector<std::atomic<uint64_t>> a_ = std::vector<std::atomic<uint64_t>>(kKeys);
};

// A value read for key i while the acks went from a0 to a1: written by
// a write of key i numbered at least a0's count (a value read is current
// during the read) and at most one past a1's (a write in flight).
::testing::AssertionResult ValueFits(uint32_t i, Value v, uint64_t a0, uint64_t a1) {
  const uint64_t c = v >> 16;
  if ((v & 0xffff) != i || c < Acks::Count(a0) || c > Acks::Count(a1) + 1 ||
      (c == Acks::Count(a0) && (a0 & Acks::kPresent) == 0))
    return ::testing::AssertionFailure() << "key " << i << " read value " << v << " (write " << c
                                         << ") between acks " << a0 << " and " << a1;
  return ::testing::AssertionSuccess();
}

// One lookup of key i (stored under k) against the acks around it: "" or
// what is wrong. A value must fit the acknowledged writes; a key whose ack
// did not move and had nothing in flight must be found iff present.
std::string CheckLookup(Index& t, const Acks& acks, uint32_t i, Key k) {
  const uint64_t a0 = acks.Get(i);
  const std::optional<Value> got = t.lookup(k);
  const uint64_t a1 = acks.Get(i);
  if (got.has_value()) {
    ::testing::AssertionResult ok = ValueFits(i, *got, a0, a1);
    return ok ? "" : ok.message();
  }
  if (a0 == a1 && (a0 & (Acks::kPending | Acks::kPresent)) == Acks::kPresent)
    return "lookup of acknowledged key " + std::to_string(i) + " found nothing";
  return "";
}

// A scan of up to 40 pairs from key i: ascending, every pair a fitting
// value, and every stable key of the range it covers present in it iff
// acknowledged present. Returns "" or what is wrong.
std::string CheckScan(Index& t, const Acks& acks, uint32_t i) {
  std::vector<uint64_t> before(kKeys);
  std::vector<KV> out(40);
  for (uint32_t j = 0; j < kKeys; ++j) before[j] = acks.Get(j);
  const size_t n = t.scan(KeyOf(i), out.size(), out.data());
  const Key last = n == out.size() ? out[n - 1].key : UINT64_MAX;
  size_t at = 0;
  std::vector<std::pair<Key, uint32_t>> range;
  for (uint32_t j = 0; j < kKeys; ++j)
    if (KeyOf(j) >= KeyOf(i) && KeyOf(j) <= last) range.emplace_back(KeyOf(j), j);
  std::sort(range.begin(), range.end());
  for (const auto& [key, j] : range) {
    const uint64_t a1 = acks.Get(j);
    const bool returned = at < n && out[at].key == key;
    if (returned) {
      ::testing::AssertionResult ok = ValueFits(j, out[at].value, before[j], a1);
      if (!ok) return "scan: " + std::string(ok.message());
      ++at;
    } else if (before[j] == a1 && (a1 & Acks::kPending) == 0 && (a1 & Acks::kPresent) != 0) {
      return "scan from key " + std::to_string(i) + " missed acknowledged key " + std::to_string(j);
    }
  }
  if (at != n)
    return "scan from key " + std::to_string(i) + " returned key " + std::to_string(out[at].key) +
           " out of order or not of the key space";
  return "";
}

// Runs kWriters writers and kReaders readers from one start. Writer w runs
// write(w, its failure) to its end; reader r calls read(its rng, seeded
// reader_seed + r, its failure) at least 300 times and then as long as a
// writer writes, until a failure. Expects no failure.
void RunWritersAndReaders(const std::function<void(int, std::string&)>& write, uint64_t reader_seed,
                          const std::function<void(std::mt19937_64&, std::string&)>& read) {
  std::atomic<int> writing{kWriters};
  std::vector<std::string> failures(kWriters + kReaders);
  std::vector<std::thread> threads;
  std::latch start(kWriters + kReaders);
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      start.arrive_and_wait();
      write(w, failures[w]);
      writing.fetch_sub(1);
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      start.arrive_and_wait();
      std::string& fail = failures[kWriters + r];
      std::mt19937_64 rng(reader_seed + r);
      for (int reads = 0; (reads < 300 || writing.load() > 0) && fail.empty(); ++reads)
        read(rng, fail);
    });
  }
  for (std::thread& th : threads) th.join();
  for (const std::string& f : failures) EXPECT_EQ(f, "");
}

// After the threads: every key holds exactly what its writer acknowledged
// last, and the entry count is the number of keys present.
void ExpectAcknowledged(Index& t, const Acks& acks) {
  uint64_t present = 0;
  for (uint32_t i = 0; i < kKeys; ++i) {
    const uint64_t a = acks.Get(i);
    if ((a & Acks::kPresent) == 0) {
      EXPECT_FALSE(t.lookup(KeyOf(i)).has_value()) << i;
    } else {
      ++present;
      EXPECT_EQ(t.lookup(KeyOf(i)), std::optional<Value>(Acks::ValueOf(i, Acks::Count(a)))) << i;
    }
  }
  EXPECT_EQ(t.stats().entries, present);
}

// Two writers own the even and the odd keys and insert, upsert, update and
// remove them, acknowledging each result; two readers look up and scan
// meanwhile. A key whose ack did not move and had nothing in flight
// across a read must read exactly as acknowledged; any value read must
// be one its writer wrote no earlier than the ack before the read.
TEST(RoartConcurrency, ReadsMatchAcknowledgedWrites) {
  for (const char* opt : {"leaf_array=4", ""}) {
    SCOPED_TRACE(opt);
    std::unique_ptr<Pool> pool;
    auto made = Make(opt, &pool);
    PMINDEX_ASSERT_OK(made);
    Index& t = *made.value();
    Acks acks;
    std::atomic<uint64_t> checked{0};
    const auto write = [&](int w, std::string& fail) {
      std::mt19937_64 rng(100 + w);
      for (int op = 0; op < 12000 && fail.empty(); ++op) {
        const uint32_t i = static_cast<uint32_t>(rng() % (kKeys / kWriters)) * kWriters + w;
        const uint64_t a = acks.Get(i);
        const bool present = (a & Acks::kPresent) != 0;
        const uint64_t next = Acks::Count(a) + 1;
        acks.Set(i, a | Acks::kPending);
        const Value v = Acks::ValueOf(i, next);
        Status st;
        bool now = present;
        // Mostly inserts in the first half (nodes grow, arrays split),
        // mostly removes in the second (nodes merge and collapse).
        const uint64_t pick = rng() % 10;
        switch (pick < (op < 6000 ? 2u : 8u) ? 4 : pick % 4) {
          case 0:
          case 1:
            st = t.insert(KeyOf(i), v);
            if (st.ok() != !present) fail = "insert " + std::to_string(i) + ": " + st.ToString();
            now = true;
            break;
          case 2:
            st = t.upsert(KeyOf(i), v);
            if (!st.ok()) fail = "upsert: " + st.ToString();
            now = true;
            break;
          case 3:
            st = t.update(KeyOf(i), v);
            if (st.ok() != present) fail = "update " + std::to_string(i) + ": " + st.ToString();
            break;
          default:
            st = t.remove(KeyOf(i));
            if (st.ok() != present) fail = "remove " + std::to_string(i) + ": " + st.ToString();
            now = false;
        }
        // A failed insert, update or remove changed nothing: the count
        // moves only when the stored value did.
        acks.Set(i, st.ok() ? (next << 2 | (now ? Acks::kPresent : 0)) : a);
      }
    };
    const auto read = [&](std::mt19937_64& rng, std::string& fail) {
      const uint32_t i = static_cast<uint32_t>(rng() % kKeys);
      if (rng() % 4 != 0) {
        fail = CheckLookup(t, acks, i, KeyOf(i));
      } else {
        fail = CheckScan(t, acks, i);
      }
      checked.fetch_add(1, std::memory_order_relaxed);
    };
    RunWritersAndReaders(write, 200, read);
    EXPECT_GT(checked.load(), 0u);
    PMINDEX_ASSERT_OK(t.verify());
    ExpectAcknowledged(t, acks);
    // The changes the test means to race with readers happened.
    const IndexStats s = t.stats();
    double splits = 0, grows = 0, merges = 0;
    for (const auto& [name, v] : s.extra) {
      if (name == "splits") splits = v;
      if (name == "grows") grows = v;
      if (name == "merges") merges = v;
    }
    EXPECT_GT(splits, 0);
    if (std::string(opt) == "leaf_array=4") {
      EXPECT_GT(grows, 0);
      EXPECT_GT(merges, 0);  // nodes of leaf arrays merged under concurrent writers
    }
  }
}

double Extra(const IndexStats& s, const std::string& name) {
  for (const auto& [n, v] : s.extra)
    if (n == name) return v;
  ADD_FAILURE() << "no stats counter " << name;
  return -1;
}

// Merges and splits under one parent with both writers in it: 32 keys
// that differ in bytes 6 (four values) and 7 (eight), writer w owning
// the keys whose last byte has parity w, so every leaf array and every
// node below the depth-6 node holds keys of both. The writers insert and
// remove their keys in alternating insert-heavy and remove-heavy rounds
// (leaf_array=4: full arrays split into nodes of one-leaf arrays, which
// merge back at 2 leaves) while two readers look keys up; every lookup
// must fit the acknowledged writes, as in ReadsMatchAcknowledgedWrites.
TEST(RoartConcurrency, MergesAndSplitsUnderOneParentWithReaders) {
  std::unique_ptr<Pool> pool;
  auto made = Make("leaf_array=4", &pool);
  PMINDEX_ASSERT_OK(made);
  Index& t = *made.value();
  constexpr uint32_t kShared = 32;
  const auto key = [](uint32_t i) { return (Key{7} << 40) | (Key{i / 8} << 8) | (i % 8); };
  Acks acks;
  std::atomic<uint64_t> lookups{0};
  const auto write = [&](int w, std::string& fail) {
    std::mt19937_64 rng(300 + w);
    for (int op = 0; op < 20000 && fail.empty(); ++op) {
      const uint32_t i = static_cast<uint32_t>(rng() % (kShared / 2)) * 2 + w;
      const uint64_t a = acks.Get(i);
      const bool present = (a & Acks::kPresent) != 0;
      const uint64_t next = Acks::Count(a) + 1;
      const bool insert_round = (op / 500) % 2 == 0;
      const bool insert = rng() % 10 < (insert_round ? 8u : 2u);
      acks.Set(i, a | Acks::kPending);
      const Status st = insert ? t.insert(key(i), Acks::ValueOf(i, next)) : t.remove(key(i));
      if (st.ok() != (insert != present))
        fail = (insert ? "insert " : "remove ") + std::to_string(i) + ": " + st.ToString();
      acks.Set(i, st.ok() ? (next << 2 | (insert ? Acks::kPresent : 0)) : a);
    }
  };
  RunWritersAndReaders(write, 400, [&](std::mt19937_64& rng, std::string& fail) {
    const uint32_t i = static_cast<uint32_t>(rng() % kShared);
    fail = CheckLookup(t, acks, i, key(i));
    lookups.fetch_add(1, std::memory_order_relaxed);
  });
  EXPECT_GT(lookups.load(), 0u);
  PMINDEX_ASSERT_OK(t.verify());
  uint64_t present = 0;
  for (uint32_t i = 0; i < kShared; ++i) {
    const uint64_t a = acks.Get(i);
    const bool here = (a & Acks::kPresent) != 0;
    present += here;
    EXPECT_EQ(t.lookup(key(i)),
              here ? std::optional<Value>(Acks::ValueOf(i, Acks::Count(a))) : std::nullopt)
        << i;
  }
  const IndexStats s = t.stats();
  EXPECT_EQ(s.entries, present);
  EXPECT_GT(Extra(s, "merges"), 0);
  EXPECT_GT(Extra(s, "splits"), 0);
}

// 256 keys that differ in their last byte only sit in one node (an N256
// at depth 7, one one-leaf array per key with leaf_array=2). Removing
// them one by one shrinks it one type at a time at ART's thresholds (37,
// 12 and 3 children left), then merges its last two one-leaf arrays into
// one (at leaf_array=2 a node's arrays merge at 2 leaves); each state verifies,
// holds exactly the keys left, and the pool opens after a crash.
TEST(RoartShrink, NodesShrinkOneTypeAtATime) {
  std::unique_ptr<Pool> pool;
  auto made = Make("leaf_array=2", &pool);
  PMINDEX_ASSERT_OK(made);
  std::unique_ptr<Index>& t = made.value();
  const auto key = [](unsigned b) { return (Key{5} << 40) | b; };
  for (unsigned b = 0; b < 256; ++b) PMINDEX_ASSERT_OK(t->insert(key(b), b));
  ASSERT_EQ(Extra(t->stats(), "n256"), 2);  // the root and the node
  for (unsigned left = 255; left > 0; --left) {
    SCOPED_TRACE(std::to_string(left) + " keys left");
    PMINDEX_ASSERT_OK(t->remove(key(left)));
    const IndexStats s = t->stats();
    ASSERT_EQ(s.entries, left);
    EXPECT_EQ(Extra(s, "n256"), left >= 38 ? 2 : 1);
    EXPECT_EQ(Extra(s, "n48"), left >= 13 && left < 38 ? 1 : 0);
    EXPECT_EQ(Extra(s, "n16"), left >= 4 && left < 13 ? 1 : 0);
    EXPECT_EQ(Extra(s, "n4"), left == 3 ? 1 : 0);
    PMINDEX_ASSERT_OK(t->verify());
    for (unsigned b = 0; b < 256; ++b)
      ASSERT_EQ(t->lookup(key(b)), b < left ? std::optional<Value>(b) : std::nullopt) << b;
    if (left == 10) {
      // What a crash leaves opens as it was.
      const std::vector<std::byte> bytes = testing_util::PoolImage(*pool, &t, /*crash=*/true);
      auto img = Pool::OpenImage(bytes);
      PMINDEX_ASSERT_OK(img);
      auto re = open_index(img.value().get());
      PMINDEX_ASSERT_OK(re);
      PMINDEX_ASSERT_OK(re.value()->verify());
      EXPECT_EQ(Extra(re.value()->stats(), "n16"), 1);
      EXPECT_EQ(re.value()->stats().entries, 10u);
    }
  }
  const IndexStats s = t->stats();
  EXPECT_EQ(Extra(s, "shrinks"), 3);
  EXPECT_EQ(Extra(s, "merges"), 1);
  EXPECT_EQ(Extra(s, "collapses"), 0);
  EXPECT_EQ(s.inner_nodes, 1u);  // the root, over key 0's array
}

}  // namespace
}  // namespace pmindex
