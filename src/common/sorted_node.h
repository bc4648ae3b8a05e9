// The node pieces shared by the two trees whose PM nodes are sorted
// arrays of 16-byte records behind a 64-byte header, with the optional
// auxiliary array of paper 002 (Ye and Wang, 2021) between header and
// records: FAST-FAIR (trees/sorted_node/fastfair, records in slots 0..count-1) and
// Circ-Tree (trees/sorted_node/circtree, records in a ring of slots).
//
// Only what is the same logic in both lives here: the record and layout
// types, the options, the relaxed loads and seqlock helpers of their
// lock-free readers, the sentinel and binary searches and the 16-slot
// fingerprint match (over an accessor that maps a logical index to a key,
// so slot indexing stays each tree's own), and the read-only parts of
// recovery's validation and of verify. Nothing here writes PM: every
// store, flush and fence stays in the tree files (they are pmcrash
// --mutate's sites).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "alloc/allocator.h"
#include "common/content_record.h"
#include "common/fingerprint.h"
#include "index/index.h"
#include "index/options.h"
#include "index/registry.h"
#include "pmindex/status.h"
#include "pmindex/types.h"
#include "sync/version_lock.h"

namespace pmindex::sorted_node {

struct Rec {
  uint64_t key;
  uint64_t val;  // the value (leaf) or a child PPtr raw (inner)
};
static_assert(sizeof(Rec) == 16);

inline constexpr uint32_t kRecsPerLine = 64 / sizeof(Rec);

// Between the header (line 0) and the records a node holds at most one
// auxiliary array, never flushed and rebuilt by recovery: the sentinels
// (one u64 per record line) or the fingerprints (one byte per slot).
struct Layout {
  uint32_t bytes = 0;    // node size
  uint32_t aux_off = 0;  // byte offset of the auxiliary array
  uint32_t rec_off = 0;  // byte offset of slot 0 (a line boundary)
  uint32_t lines = 0;    // record lines
  uint32_t cap = 0;      // slots per node
  bool sentinel = false;
  bool fingerprints = false;

  static Layout For(uint32_t bytes, bool sentinel, bool fingerprints = false) {
    Layout l;
    l.bytes = bytes;
    l.sentinel = sentinel;
    l.fingerprints = fingerprints && !sentinel;
    const uint32_t avail = bytes / 64 - 1;  // lines after the header
    uint32_t lines = avail, alines = 0;
    if (l.sentinel) {
      // One 8-byte sentinel per record line: L + ceil(L / 8) <= avail.
      while (lines + (lines + 7) / 8 > avail) --lines;
      alines = (lines + 7) / 8;
    } else if (l.fingerprints) {
      // One byte per slot, 4 slots per line: L + ceil(L / 16) <= avail.
      while (lines + (lines + 15) / 16 > avail) --lines;
      alines = (lines + 15) / 16;
    }
    l.aux_off = 64;
    l.rec_off = 64 + alines * 64;
    l.lines = lines;
    l.cap = lines * kRecsPerLine;
    return l;
  }
};

enum class Search : uint8_t { kLinear, kBinary, kSentinel };

// ------------------------------------------------------------------ readers

// Loads of words a writer may be changing: relaxed atomic reads, validated
// by the node's version afterwards.
[[gnu::always_inline]] inline uint64_t Ld(const uint64_t& w, std::memory_order mo = std::memory_order_relaxed) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(w)).load(mo);
}
[[gnu::always_inline]] inline uint32_t Ld32(const uint32_t& w) {
  return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(w)).load(std::memory_order_relaxed);
}

// A node's version, once no writer is inside (even), or kStop: an odd
// version that also ends the wait (fastfair's kDead, a node merged away).
// kStop = 0 (even, so never a stop): wait for an even version only.
template <uint64_t kStop = 0>
[[gnu::always_inline]] inline uint64_t AwaitEven(const uint64_t& version) {
  uint64_t v = Ld(version, std::memory_order_acquire);
  for (unsigned spins = 0; (v & 1) && v != kStop; ++spins) {
    // The writer may be descheduled on a busy machine: yield, do not spin
    // through the time slice.
    if (spins < 64) sync::CpuRelax(); else std::this_thread::yield();
    v = Ld(version, std::memory_order_acquire);
  }
  return v;
}

// True iff the version is still v after the reads it validates (the
// seqlock argument of sync/version_lock.h; TSan, which does not model
// fences, gets an acquire load instead).
[[gnu::always_inline]] inline bool Unchanged(const uint64_t& version, uint64_t v) {
#if defined(PMINDEX_TSAN)
  return Ld(version, std::memory_order_acquire) == v;
#else
  std::atomic_thread_fence(std::memory_order_acquire);
  return Ld(version) == v;
#endif
}

// First index in [0, n) whose key(i) is >= k (n if none), by binary search.
template <class KeyAt>
[[gnu::always_inline]] inline uint32_t BinaryLowerBound(uint32_t n, Key k, KeyAt key) {
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (key(mid) < k) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// The number of the n words w[0], w[kStride], w[2 * kStride], ... that
// precede the first one not below k (kStrict: not at or below k), i.e. the
// first such index, n if none, when the words ascend. Four words per step
// with one branch: the four relaxed loads are independent and their
// compares are summed, not branched on, so a scan of a 4 KiB node takes a
// quarter of the branches of a word-by-word loop and the loads of a step
// issue together. Words a writer is changing may not ascend; the result is
// then some index in [0, n], which the caller's version check discards.
template <uint32_t kStride, bool kStrict>
[[gnu::always_inline]] inline uint32_t CountBelow(const uint64_t* w, uint32_t n, Key k) {
  auto below = [k](uint64_t x) -> uint32_t { return kStrict ? x <= k : x < k; };
  uint32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint64_t* q = w + i * kStride;
    const uint32_t b = below(Ld(q[0])) + below(Ld(q[kStride])) + below(Ld(q[2 * kStride])) +
                       below(Ld(q[3 * kStride]));
    if (b < 4) return i + b;
  }
  for (; i < n; ++i)
    if (!below(Ld(w[i * kStride]))) return i;
  return n;
}

// First index in [0, n) of the records r[0..n) (contiguous slots) whose
// key is >= k (n if none), by a linear scan (CountBelow).
[[gnu::always_inline]] inline uint32_t LinearLowerBound(const Rec* r, uint32_t n, Key k) {
  static_assert(sizeof(Rec) == 2 * sizeof(uint64_t) && offsetof(Rec, key) == 0);
  return CountBelow<2, false>(&r[0].key, n, k);
}

// The same by Algorithm 1 of paper 002: the last (logical) line whose
// sentinel s[l] (its first key) is <= k, then that line alone.
template <class KeyAt>
[[gnu::always_inline]] inline uint32_t SentinelLowerBound(const uint64_t* s, uint32_t n, Key k, KeyAt key) {
  const uint32_t lines = (n + kRecsPerLine - 1) / kRecsPerLine;
  // l: the sentinels s[1..lines) at or below k (they ascend).
  const uint32_t l = lines <= 1 ? 0 : CountBelow<1, true>(s + 1, lines - 1, k);
  const uint32_t end = std::min(n, (l + 1) * kRecsPerLine);
  for (uint32_t i = l * kRecsPerLine; i < end; ++i)
    if (key(i) >= k) return i;
  return end;
}

// The mask of the slots base..base+15 (below `limit`) whose fingerprint
// byte in f equals fp. The 16 bytes are read as two relaxed 8-byte loads
// (a writer may be changing them; the version check afterwards decides).
[[gnu::always_inline]] inline uint32_t FingerprintMatch16(const uint8_t* f, uint32_t base, uint32_t limit,
                                                          uint8_t fp) {
  uint64_t w[2] = {Ld(*reinterpret_cast<const uint64_t*>(f + base)),
                   Ld(*reinterpret_cast<const uint64_t*>(f + base + 8))};
  uint8_t bytes[16];
  std::memcpy(bytes, w, sizeof bytes);
  uint32_t m = common::MatchMask16(bytes, fp);
  if (limit - base < 16) m &= (1u << (limit - base)) - 1;
  return m;
}

// The B-link rule, for a key above every key of node x: x's right
// neighbour's raw if k belongs to it, else 0. to_header maps a raw to
// its Header.
template <class Header, class ToHeader>
[[gnu::always_inline]] inline uint64_t RightOf(const Header* x, Key k, ToHeader to_header) {
  const uint64_t sib = Ld(x->sibling, std::memory_order_acquire);
  if (sib == 0) return 0;
  const Header* s = to_header(sib);
  // A linked node's low key never changes (written before the link).
  return (Ld(s->has_low) != 0 && k >= Ld(s->low)) ? sib : 0;
}

// ------------------------------------------------------------------ messages, options

inline std::string Hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// "<tree>: node 0x...", the subject of a node's corruption messages.
inline std::string NodeWhere(std::string_view tree, uint64_t raw) {
  return std::string(tree) + ": node " + Hex(raw);
}

struct Config {
  Layout lay;
  Search search = Search::kSentinel;
};

// The options node=, sentinel=, search=, fingerprints= (each tree's
// options_help describes them); messages start with "<tree>: ".
inline Result<Config> ParseOptions(const Options& o, std::string_view tree) {
  const std::string t(tree);
  PMINDEX_RETURN_IF_ERROR(o.CheckKnown({"node", "sentinel", "search", "fingerprints"}));
  Result<uint64_t> n = o.get_uint("node", 512, 256, 65536);
  if (!n.ok()) return n.status();
  if (n.value() % 64 != 0)
    return Status::InvalidArgument(t + ": node must be a multiple of 64 from 256 to 65536 bytes");
  Result<bool> fps = o.get_bool("fingerprints", false);
  if (!fps.ok()) return fps.status();
  Result<bool> sent = o.get_bool("sentinel", !fps.value());
  if (!sent.ok()) return sent.status();
  if (sent.value() && fps.value())
    return Status::InvalidArgument(t + ": sentinel=on and fingerprints=on exclude each other (one array per node)");
  Result<std::string> se = o.get_enum("search", sent.value() ? "sentinel" : "linear", {"linear", "binary", "sentinel"});
  if (!se.ok()) return se.status();
  Config c;
  c.lay = Layout::For(static_cast<uint32_t>(n.value()), sent.value(), fps.value());
  c.search = se.value() == "binary" ? Search::kBinary : se.value() == "linear" ? Search::kLinear : Search::kSentinel;
  if (c.search == Search::kSentinel && !c.lay.sentinel)
    return Status::InvalidArgument(t + ": search=sentinel needs sentinel=on");
  return c;
}

// ------------------------------------------------------------------ recovery and verify (read-only)
//
// The level walks are the same in both trees; what a node holds (its
// records in slot or ring order, which of an equal-key pair is valid) is
// each tree's own ViewNode / VerifyNode, passed in. h(raw) maps a raw to
// the tree's Header (fields sibling, leftmost, level, low, has_low).

// Node `raw` of level `level` as recovery will leave it: the records in
// key order, a cut-short split's copies and a half-done shift's invalid
// record dropped.
struct NodeView {
  uint32_t level = 0;
  uint64_t sibling = 0, leftmost = 0;
  bool has_low = false;
  Key low = 0;
  std::vector<Rec> recs;
};

// Recovery's read-only validation, level by level from the root's (at
// root_level): every node of a level is on its sibling chain, whose first
// node is the leftmost child of the level above's first node, and every
// child the level above names is on it. view(raw, level, NodeView*) reads
// one node (Status). Appends every node to *nodes and adds every leaf
// record of the views to *content. `limit`: more nodes than fit the pool
// (a cycle). `separators` (a cleanly closed pool): every named child's low
// key must also equal its parent's separator (its parent's own low key for
// a leftmost child), as verify() checks; low keys are written only when a
// node is made, and a clean close leaves every separator in its parent.
template <class ViewFn>
Status ValidateLevels(std::string_view tree, uint64_t root, uint32_t root_level, uint32_t max_height,
                      uint64_t limit, std::vector<uint64_t>* nodes, common::ContentSum* content, bool separators,
                      ViewFn view) {
  const std::string t(tree);
  uint32_t level = root_level;
  if (level >= max_height) return Status::Corruption(t + ": root level above the limit");
  NodeView v;
  std::vector<uint64_t> named_above;  // children named by the level above
  bool have_above = false;
  std::unordered_map<uint64_t, std::pair<bool, Key>> expect;  // named child -> (has_low, low)
  uint64_t first = root;
  for (;;) {
    std::unordered_set<uint64_t> on_level;
    std::vector<uint64_t> named;
    std::unordered_map<uint64_t, std::pair<bool, Key>> expect_below;
    uint64_t first_child = 0;
    for (uint64_t raw = first; raw != 0;) {
      if (nodes->size() > limit || !on_level.insert(raw).second)
        return Status::Corruption(t + ": a sibling chain loops");
      PMINDEX_RETURN_IF_ERROR(view(raw, level, &v));
      if (raw == root && v.has_low) return Status::Corruption(t + ": the root has a low key");
      if (separators) {
        auto it = expect.find(raw);
        if (it != expect.end() && (it->second.first != v.has_low || (v.has_low && it->second.second != v.low)))
          return Status::Corruption(NodeWhere(tree, raw) + ": low key differs from its separator");
      }
      nodes->push_back(raw);
      if (level == 0) {
        for (const Rec& r : v.recs) content->Add(r.key, r.val);
      } else {
        if (raw == first) first_child = v.leftmost;
        named.push_back(v.leftmost);
        for (const Rec& r : v.recs) named.push_back(r.val);
        if (separators) {
          expect_below[v.leftmost] = {v.has_low, v.low};
          for (const Rec& r : v.recs) expect_below[r.val] = {true, r.key};
        }
      }
      raw = v.sibling;
    }
    if (have_above)
      for (uint64_t c : named_above)
        if (!on_level.count(c)) return Status::Corruption(NodeWhere(tree, c) + " is a child not on its level's chain");
    if (level == 0) return Status::OK();
    named_above = std::move(named);
    expect = std::move(expect_below);
    have_above = true;
    first = first_child;
    --level;
  }
}

// bulk_load's checks of its arguments (after the tree's own "needs an
// empty index"): fill in (0, 1], keys strictly ascending.
inline Status CheckBulkInput(std::string_view tree, std::span<const KV> sorted, double fill) {
  const std::string t(tree);
  if (!(fill > 0 && fill <= 1)) return Status::InvalidArgument(t + ": bulk_load fill must be in (0, 1]");
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i - 1].key >= sorted[i].key)
      return Status::InvalidArgument(t + ": bulk_load keys must be strictly ascending");
  return Status::OK();
}

// Open's steps between the read-only validation and the first repair:
// the validated nodes (every node of the tree) are marked reachable and
// must each be an allocated block, the allocator's recovery bound is
// checked, and the pool is marked in use. No tree word is written here.
inline Status AdoptNodes(const IndexEnv& env, const std::vector<uint64_t>& nodes, std::string_view tree) {
  for (uint64_t n : nodes) env.alloc->MarkReachable(PPtr(n));
  for (uint64_t n : nodes)
    if (!env.alloc->IsLive(PPtr(n))) return Status::Corruption(NodeWhere(tree, n) + " is not an allocated block");
  PMINDEX_RETURN_IF_ERROR(env.alloc->CheckRecoveryBound());  // before any write
  return env.pool->MarkInUse();
}

// The part of verify's node check both trees share, for node `raw` of
// `level` seen as v (its own checks done by the caller). A node's range
// is [its low key, its sibling's low key): the B-link invariant. Its
// children are its named children, each followed on their level's chain
// by the nodes no parent names yet (splits whose separator a crash kept
// from the parent), up to the next named child. verify_node(raw, level)
// checks one child (Status); a leaf adds its records to *entries and
// itself to *leaves.
template <class ToHeader, class VerifyFn>
Status VerifyRange(std::string_view tree, uint64_t raw, uint32_t level, const NodeView& v, uint64_t* entries,
                   std::vector<uint64_t>* leaves, ToHeader h, VerifyFn verify_node) {
  const bool has_hi = v.sibling != 0;
  const Key hi = has_hi ? h(v.sibling)->low : 0;
  for (const Rec& r : v.recs)
    if (has_hi && r.key >= hi)
      return Status::Corruption(NodeWhere(tree, raw) + ": key " + std::to_string(r.key) +
                                " at or above its sibling's low key");
  if (level == 0) {
    *entries += v.recs.size();
    leaves->push_back(raw);
    return Status::OK();
  }
  for (size_t i = 0; i <= v.recs.size(); ++i) {
    const uint64_t c = i == 0 ? v.leftmost : v.recs[i - 1].val;
    const auto* ch = h(c);
    if (i == 0 ? (v.has_low != (ch->has_low != 0) || (v.has_low && ch->low != v.low))
               : (ch->has_low != 1 || ch->low != v.recs[i - 1].key))
      return Status::Corruption(NodeWhere(tree, c) + ": low key differs from its separator");
    const bool bounded = i < v.recs.size() || has_hi;
    const Key end = i < v.recs.size() ? v.recs[i].key : hi;
    for (uint64_t y = c;;) {
      PMINDEX_RETURN_IF_ERROR(verify_node(y, level - 1));
      y = h(y)->sibling;
      if (y == 0 || (bounded && h(y)->low >= end)) break;
    }
  }
  return Status::OK();
}

// verify's walk: every node of the root's level (it may hold more than
// the root: a root split cut short) checked by verify_node(raw, level,
// entries*, leaves*), then the leaf chain must hold the same leaves in the
// same order.
template <class ToHeader, class VerifyFn>
Status VerifyTree(std::string_view tree, uint64_t root, ToHeader h, VerifyFn verify_node) {
  const std::string t(tree);
  uint64_t entries = 0;
  std::vector<uint64_t> leaves;
  const uint32_t level = h(root)->level;
  for (uint64_t y = root; y != 0; y = h(y)->sibling) PMINDEX_RETURN_IF_ERROR(verify_node(y, level, &entries, &leaves));
  uint64_t first = root;
  while (h(first)->level > 0) first = h(first)->leftmost;
  size_t i = 0;
  for (uint64_t y = first; y != 0; y = h(y)->sibling, ++i)
    if (i >= leaves.size() || leaves[i] != y) return Status::Corruption(t + ": leaf chain differs from the tree");
  if (i != leaves.size()) return Status::Corruption(t + ": leaf chain shorter than the tree");
  return Status::OK();
}

// Every node, level by level from the root's, each level along its
// sibling chain starting at its first node: fn(raw, header).
template <class ToHeader, class Fn>
void WalkLevels(uint64_t root, ToHeader h, Fn&& fn) {
  uint64_t first = root;
  for (;;) {
    auto* f = h(first);
    for (uint64_t raw = first; raw != 0; raw = h(raw)->sibling) fn(raw, h(raw));
    if (f->level == 0) return;
    first = f->leftmost;
  }
}

// close(), no writer running: the content record of the leaves' records
// as view(raw, 0, NodeView*) reads them, the same views ValidateLevels
// sums at open. The tree must call it from its destructor too (through
// close()): Pool::Close marks the pool clean after an index destroyed
// without close(), and a stale record would refuse a good pool.
template <class ToHeader, class ViewFn>
Status WriteContentRecord(const IndexEnv& env, ToHeader h, ViewFn view) {
  uint64_t leaf = env.pool->root(0);
  while (h(leaf)->level != 0) leaf = h(leaf)->leftmost;
  common::ContentSum content;
  NodeView v;
  for (; leaf != 0; leaf = v.sibling) {
    PMINDEX_RETURN_IF_ERROR(view(leaf, 0, &v));
    for (const Rec& r : v.recs) content.Add(r.key, r.val);
  }
  common::WriteContentRecord(*env.pool, content);
  return Status::OK();
}

}  // namespace pmindex::sorted_node
