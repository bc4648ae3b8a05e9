// The sorted-node tree engine: the B+-tree over PM nodes that are sorted
// arrays of 16-byte records behind a 64-byte header (common/sorted_node.h
// has the node layout and the read-only pieces it shares with two_layer),
// written once and parameterised by a SLOT POLICY, the way tlx's btree is
// parameterised by its traits: how a node stores its records in its slots.
//   FlatSlots (fastfair.h): FAST-FAIR's nodes; logical record i is slot i,
//     the header keeps a count; shifts move records in place.
//   RingSlots (circtree.h): Circ-Tree's nodes; the records are a ring that
//     starts at any slot, the header keeps (start, count, side) in one word.
//
// The engine holds what is the same logic for every slot policy: the
// Index methods that do not depend on how a tree writes (scan, bulk_load,
// create, open's validation and adoption, close's content record, verify,
// stats, the block walk), the node accessors and the auxiliary arrays
// (sentinels, fingerprints). The tree class derives from it (CRTP) and
// keeps its own search, write path, splits, merges and repairs, which is
// where the two papers differ (and where their concurrency schemes
// differ: fastfair locks nodes, circtree serializes writers).
//
// A slot policy provides:
//   using Header;   line 0 of a node: version, tag, level, sibling,
//                   leftmost, low, has_low (common names, each tree's offsets)
//   static constexpr std::string_view kName;  the index kind
//   static constexpr uint64_t kNodeTag;
//   static Ring Read(const Header*);   the ring as stored (no writer running)
//   static Ring Load(const Header*, uint32_t cap);  a lock-free reader's
//                   relaxed load, clamped into the node
//   static const char* BadSlots(const Header*, uint32_t cap);  recovery's
//                   check of the slot fields: why they are bad, or nullptr
//   static uint32_t Phys(uint32_t start, uint32_t i, uint32_t cap);  the
//                   slot of logical record i (i < cap)
//   static void Init(Header*, uint32_t level, uint64_t leftmost,
//                    uint64_t sibling, bool has_low, Key low);  an empty node
//   static void StoreFilled(Header*, uint32_t count);  a new node's records
//                   are in slots [0, count)
// The tree class provides (the engine is its friend):
//   View ReaderView(const Header*) const;  what a lock-free reader needs of
//                   a node's slot fields (fastfair: the count; circtree:
//                   the metadata word), loaded relaxed and clamped into
//                   the node
//   uint32_t ViewCount(View) const;  uint32_t ViewSlot(View, uint32_t p) const;
//                   the number of records, the slot of logical record p
//   uint32_t LowerBound(Header*, View, Key) const;  the tree's search
//   uint32_t FingerprintFind(Header*, View, Key) const;
//   uint64_t ChildAt(Header*, View, uint32_t p, Key) const;
//   uint64_t MoveRight(Header*, View, uint32_t p, Key) const;  B-link step
//   Status Write(Op, Key, Value);                      every writer
//   void Repair(uint64_t raw);                         open's repair of one node
//   bool Underfull(const Header*) const;               a merge candidate
//   bool MergeIfRoom(uint64_t node, uint64_t l_raw, uint64_t r_raw,
//                    uint64_t parent, uint32_t sep_idx);  merges l and r
//                   (MergePair's answer for node) iff node is still
//                   underfull and MergeKeepsRoom; true iff it merged
//   void WriteLock(Header*);   under mu_: makes x's lock-free readers wait
//                   (an odd version) before the root hands x down
//
// Every PM store, flush and fence here goes through src/pm's helpers
// (they are pmcrash --mutate's sites, now shared by both trees).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "alloc/allocator.h"
#include "alloc/numa_meter.h"
#include "common/content_record.h"
#include "common/fingerprint.h"
#include "common/sorted_node.h"
#include "index/index.h"
#include "pm/persist.h"
#include "pm/pptr_decode.h"
#include "sync/mutex.h"
#include "util/check.h"
#include "util/prefetch.h"

namespace pmindex::sorted_node {

// Where a node's records are: logical record i in slot Phys(start, i);
// of two equal adjacent keys (a half-done shift) the left one is valid iff
// `left`, else the right one. FlatSlots: start 0, left false.
struct Ring {
  uint32_t start = 0;
  uint32_t count = 0;
  bool left = false;
};

template <class Tree, class Slots>
class Engine : public Index {
 public:
  using Header = typename Slots::Header;
  static constexpr uint64_t kNodeTag = Slots::kNodeTag;
  static constexpr uint32_t kMaxHeight = 40;
  static constexpr uint32_t kRecsPerLine = sorted_node::kRecsPerLine;
  // The version word of a node merged away (odd: never locked again).
  static constexpr uint64_t kDead = ~uint64_t{0};
  // A lock-free descent prefetches this much of each node it enters (all
  // of a 512-byte node; of a 4 KiB one the header and the sentinel lines or
  // first 28 records). Measured on pmbench lookups at 4 KiB: 1 or 1.5 KiB
  // were no faster, the whole node slower (docs/RESULTS.md, "fastfair's
  // 4 KiB lookups").
  static constexpr uint32_t kPrefetchBytes = 512;

  std::optional<Value> lookup(Key k) override;
  Status insert(Key k, Value v) override { return tree().Write(Op::kInsert, k, v); }
  Status update(Key k, Value v) override { return tree().Write(Op::kUpdate, k, v); }
  Status upsert(Key k, Value v) override { return tree().Write(Op::kUpsert, k, v); }
  Status remove(Key k) override { return tree().Write(Op::kRemove, k, 0); }
  size_t scan(Key from, size_t n, KV* out) override;
  Status bulk_load(std::span<const KV> sorted, double fill) override;
  Status verify() override;
  IndexStats stats() override;
  Status for_each_block(const std::function<void(PPtr)>& fn) override;
  // Writes the content record (common/content_record.h) of a created or
  // opened tree; nothing after a refused open. Runs once; the library's
  // handle calls it if the caller did not (index/index.h).
  Status close() override;

 protected:
  enum class Op : uint8_t { kInsert, kUpdate, kUpsert, kRemove };
  using NodeView = sorted_node::NodeView;

  Engine(const IndexEnv& env, const Layout& lay, Search s) : env_(env), lay_(lay), search_(s) {}

  // A new tree: an empty root leaf, durable before root slot 0 names it.
  template <class... TreeArgs>
  static Result<std::unique_ptr<Index>> CreateTree(const IndexEnv& env, const Layout& lay, Search s,
                                                   TreeArgs&&... args);
  // Open: validate every node read-only, check the content record, adopt
  // the nodes (allocator, in-use mark), then repair each node.
  template <class... TreeArgs>
  static Result<std::unique_ptr<Index>> OpenTree(const IndexEnv& env, const Layout& lay, Search s,
                                                 TreeArgs&&... args);

  // The leaf for k and its version (even), found without locks: each node
  // is read between two loads of its version and read again if a writer
  // changed it; a node merged away (kDead) sends the descent back to the
  // root, since no parent names it any more.
  uint64_t FindLeaf(Key k, uint64_t* version) const {
    decltype(tree().ReaderView(nullptr)) m;
    uint32_t p;
    return FindLeaf(k, version, &m, &p);
  }
  // The same, also giving what the descent read of the leaf under that
  // version: its reader view (the tree's View) and p = LowerBound(leaf,
  // view, k). A caller that reads more of the leaf validates against
  // *version again; so a lookup searches its leaf once, not twice.
  template <class View>
  uint64_t FindLeaf(Key k, uint64_t* version, View* view, uint32_t* pos) const;

  // Allocates the new nodes an insert into the full leaf under
  // path[0, depth) (root first) needs: one for the leaf, one for each full
  // ancestor from the leaf up, and one for a new root if they are all
  // full. Sets fresh[0, *need); on OutOfSpace frees what it took, so the
  // tree is unchanged.
  Status AllocSplitNodes(const uint64_t* path, uint32_t depth, uint64_t* fresh, uint32_t* need);

  // The neighbours a merge of `node` (a child of `parent`) would join: node
  // and its right neighbour if node is parent's leftmost child, else node's
  // left neighbour and node; *sep_idx is the logical index of parent's
  // separator that names the right one. False, and no merge, if parent
  // does not name node (a split or merge a crash cut short, reached by a
  // sibling pointer), if node is parent's only child, or if a node no
  // parent names lies between the two. Under mu_ (the parent is stable).
  bool MergePair(uint64_t parent, uint64_t node, uint64_t* l_raw, uint64_t* r_raw,
                 uint32_t* sep_idx) const PMINDEX_REQUIRES(mu_);
  // After a delete left `node` underfull: bottom up from node's parent
  // path[depth - 1] (path[0, depth) is the descent, root first), merges
  // the level's node with its neighbour (MergePair) while the tree agrees
  // (its MergeIfRoom: node still underfull, the two fit) and the parent,
  // which lost a separator, is underfull and not the root; then
  // shrinks the root (CollapseRoot). Under mu_.
  void MergeUpward(const uint64_t* path, uint32_t depth, uint64_t node) PMINDEX_REQUIRES(mu_);
  // An inner root left with no record (and no sibling: a root split a
  // crash cut short keeps its top level) hands root slot 0 to its only
  // child, as often as that holds; the old root ends kDead and is retired.
  // Under mu_.
  void CollapseRoot() PMINDEX_REQUIRES(mu_);
  // Merging l and r keeps a quarter of a node free, so that deletes and
  // inserts at one boundary do not merge and split in turn. Their slot
  // fields must be stable (no writer running on either).
  bool MergeKeepsRoom(const Header* l, const Header* r) const {
    const uint32_t total = Slots::Read(l).count + Slots::Read(r).count + (l->level > 0 ? 1 : 0);
    return total * 4 <= lay_.cap * 3;
  }

  Header* H(uint64_t raw) const { return env_.pool->to_ptr<Header>(PPtr(raw)); }
  Rec* R(Header* x) const { return reinterpret_cast<Rec*>(reinterpret_cast<char*>(x) + lay_.rec_off); }
  uint64_t* S(Header* x) const { return reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(x) + lay_.aux_off); }
  uint8_t* F(Header* x) const { return reinterpret_cast<uint8_t*>(x) + lay_.aux_off; }
  uint32_t Phys(uint32_t start, uint32_t i) const { return Slots::Phys(start, i, lay_.cap); }
  // For the cost model (pm::ModelRead): the lines a search of x's n
  // records (logical slot i at physical Phys(start, i)) that stopped at p
  // read, header first. A linear search reads the records up to p in one
  // sweep (reported as the physical range from the header); a binary
  // search reads one probed record after another (its probes replayed from
  // p: key(mid) < k iff mid < p); a sentinel search reads the sentinels up
  // to the line after p's, then p's line. Nothing is computed unless the
  // xpline model is on.
  void ModelSearched(Header* x, uint32_t p, uint32_t n, uint32_t start = 0) const {
    if (__builtin_expect(!pm::detail::g_xpline, 1)) return;
    const uint32_t last = n == 0 ? 0 : std::min(p, n - 1);
    switch (search_) {
      case Search::kLinear:
        pm::ModelRead(x, lay_.rec_off + std::min(p + 1, n) * sizeof(Rec));
        return;
      case Search::kBinary: {
        pm::ModelRead(x, 64);
        uint32_t lo = 0, hi = n;
        while (lo < hi) {
          const uint32_t mid = (lo + hi) / 2;
          pm::ModelRead(&R(x)[Phys(start, mid)], sizeof(Rec));
          if (mid < p) {
            lo = mid + 1;
          } else {
            hi = mid;
          }
        }
        return;
      }
      case Search::kSentinel: {
        const uint32_t lines = (n + kRecsPerLine - 1) / kRecsPerLine;
        const uint32_t read = std::min(last / kRecsPerLine + 2, lines);
        pm::ModelRead(x, lay_.aux_off + read * sizeof(uint64_t));
        if (n > 0) pm::ModelRead(&R(x)[Phys(start, last)], sizeof(Rec));
        return;
      }
    }
  }
  std::string Where(uint64_t raw) const { return NodeWhere(Slots::kName, raw); }

  // Rewrites the auxiliary array from the records: the sentinels of the
  // logical lines from the one of logical record `from` on, or the
  // fingerprints of logical records [fp_lo, fp_hi). Not flushed: rebuilt
  // from the records by recovery (paper 002, III).
  void SetAux(Header* x, uint32_t from, uint32_t fp_lo, uint32_t fp_hi);

  // Node `raw` of level `level` as recovery will leave it, read only: the
  // records a cut-short split left behind (keys at or above the sibling's
  // low key) and the invalid one of an equal-key pair dropped.
  Status ViewNode(uint64_t raw, uint32_t level, NodeView* v) const;
  Status Validate(uint64_t root, std::vector<uint64_t>* nodes, common::ContentSum* content) const;
  // Every node, level by level from the root's, each level along its
  // sibling chain starting at its first node. fn(raw, header).
  void WalkLevels(const std::function<void(uint64_t, Header*)>& fn) const;
  Status VerifyNode(uint64_t raw, uint32_t level, uint64_t* entries, std::vector<uint64_t>* leaves) const;

  IndexEnv env_;
  Layout lay_;
  Search search_;
  bool ready_ = false;  // created or opened: close() writes the content record
  bool closed_ = false;
  // fastfair: structure changes (splits, merges) and bulk loads; circtree:
  // every writer. Both: verify, stats and the block walk.
  sync::Mutex mu_;

 private:
  Tree& tree() { return static_cast<Tree&>(*this); }
  // The tree's steps that need mu_, called through tree(): the analysis
  // cannot see that tree().mu_ is this->mu_, so these state it once.
  bool TreeMergeIfRoom(uint64_t node, uint64_t l_raw, uint64_t r_raw, uint64_t parent,
                       uint32_t sep_idx) PMINDEX_REQUIRES(mu_) PMINDEX_NO_THREAD_SAFETY_ANALYSIS {
    return tree().MergeIfRoom(node, l_raw, r_raw, parent, sep_idx);
  }
  void TreeWriteLock(Header* x) PMINDEX_REQUIRES(mu_) PMINDEX_NO_THREAD_SAFETY_ANALYSIS {
    tree().WriteLock(x);
  }
  const Tree& tree() const { return static_cast<const Tree&>(*this); }
};

// ------------------------------------------------------------------ readers

template <class Tree, class Slots>
template <class View>
uint64_t Engine<Tree, Slots>::FindLeaf(Key k, uint64_t* version, View* view, uint32_t* pos) const {
  uint64_t raw = env_.pool->root(0);
  for (;;) {
    Header* x = H(raw);
    // The header's miss and those of the lines every search reads next
    // (the sentinels, or the first records) overlap instead of queueing
    // behind it: a 4 KiB node's search otherwise waits for the header,
    // then line by line until the hardware prefetcher catches on.
    PrefetchLines(x, std::min<uint32_t>(lay_.bytes, kPrefetchBytes));
    alloc::MeterVisit(*env_.alloc, x);
    const uint64_t v = AwaitEven<kDead>(x->version);
    if (v == kDead) {
      raw = env_.pool->root(0);
      continue;
    }
    const auto m = tree().ReaderView(x);
    const uint32_t level = Ld32(x->level);
    const uint32_t p = tree().LowerBound(x, m, k);
    ModelSearched(x, p, tree().ViewCount(m), tree().ViewSlot(m, 0));
    const uint64_t right = tree().MoveRight(x, m, p, k);
    const uint64_t child = (right == 0 && level > 0) ? tree().ChildAt(x, m, p, k) : 0;
    if (!Unchanged(x->version, v)) continue;  // a writer changed x: read it again
    if (right != 0) {
      raw = right;
    } else if (level == 0) {
      *version = v;
      *view = m;
      *pos = p;
      return raw;
    } else {
      raw = child;
    }
  }
}

template <class Tree, class Slots>
std::optional<Value> Engine<Tree, Slots>::lookup(Key k) {
  alloc::Allocator::EpochGuard eg(*env_.alloc);  // a node merged away stays readable
  for (;;) {
    uint64_t v = 0;
    decltype(tree().ReaderView(nullptr)) m;
    uint32_t p = 0;
    Header* x = H(FindLeaf(k, &v, &m, &p));
    const uint32_t n = tree().ViewCount(m);
    // The descent's lower bound is k's slot if k is there; the fingerprint
    // search instead probes the slots whose fingerprint matches.
    if (lay_.fingerprints) p = tree().FingerprintFind(x, m, k);
    const Rec& r = R(x)[tree().ViewSlot(m, p < n ? p : 0)];
    const bool found = p < n && Ld(r.key) == k;
    const uint64_t val = found ? Ld(r.val) : 0;
    if (!Unchanged(x->version, v)) continue;
    if (!found) return std::nullopt;
    return val;
  }
}

template <class Tree, class Slots>
size_t Engine<Tree, Slots>::scan(Key from, size_t n, KV* out) {
  if (n == 0) return 0;
  alloc::Allocator::EpochGuard eg(*env_.alloc);  // a node merged away stays readable
  size_t got = 0;
  Key cursor = from;
  bool inclusive = true;
  uint64_t v = 0;
  uint64_t raw = tree().FindLeaf(from, &v);
  bool metered = true;  // FindLeaf metered the leaf it returned
  std::vector<KV> batch;
  while (raw != 0 && got < n) {
    Header* x = H(raw);
    if (!metered) alloc::MeterVisit(*env_.alloc, x);
    metered = false;
    uint64_t next = 0;
    for (;;) {
      v = AwaitEven<kDead>(x->version);
      if (v == kDead) break;
      batch.clear();
      const Ring m = Slots::Load(x, lay_.cap);
      const Rec* r = R(x);
      uint32_t ph = m.start;
      for (uint32_t i = 0; i < m.count && batch.size() < n - got; ++i) {
        const Key key = Ld(r[ph].key);
        if (key > cursor || (inclusive && key == cursor)) batch.push_back({key, Ld(r[ph].val)});
        if (++ph == lay_.cap) ph = 0;
      }
      next = Ld(x->sibling, std::memory_order_acquire);
      if (Unchanged(x->version, v)) break;
    }
    if (v == kDead) {  // merged into its left neighbour: find the cursor's leaf again
      raw = tree().FindLeaf(cursor, &v);
      metered = true;
      continue;
    }
    for (const KV& kv : batch) {
      out[got++] = kv;
      cursor = kv.key;
      inclusive = false;
    }
    raw = next;
  }
  return got;
}

// ------------------------------------------------------------------ splits

template <class Tree, class Slots>
Status Engine<Tree, Slots>::AllocSplitNodes(const uint64_t* path, uint32_t depth, uint64_t* fresh,
                                            uint32_t* need) {
  uint32_t n = 1;
  int32_t d = static_cast<int32_t>(depth) - 1;
  while (d >= 0 && Slots::Read(H(path[d])).count == lay_.cap) {
    ++n;
    --d;
  }
  if (d < 0) ++n;
  for (uint32_t i = 0; i < n; ++i) {
    Result<PPtr> a = env_.alloc->Alloc(lay_.bytes);
    if (!a.ok()) {
      for (uint32_t j = 0; j < i; ++j) env_.alloc->Free(PPtr(fresh[j]));
      return a.status();
    }
    fresh[i] = a.value().raw();
  }
  *need = n;
  return Status::OK();
}

// ------------------------------------------------------------------ merges

template <class Tree, class Slots>
bool Engine<Tree, Slots>::MergePair(uint64_t parent, uint64_t node, uint64_t* l_raw,
                                    uint64_t* r_raw, uint32_t* sep_idx) const {
  Header* par = H(parent);
  const Ring ring = Slots::Read(par);
  const Rec* pr = R(par);
  auto child = [&](uint32_t i) { return pr[Phys(ring.start, i)].val; };
  int64_t at = -2;  // where the parent names node: -1 = its leftmost child
  if (par->leftmost == node) {
    at = -1;
  } else {
    for (uint32_t i = 0; i < ring.count && at == -2; ++i)
      if (child(i) == node) at = i;
  }
  if (at == -2 || (at == -1 && ring.count == 0)) return false;
  *sep_idx = at == -1 ? 0 : static_cast<uint32_t>(at);
  *r_raw = child(*sep_idx);
  *l_raw = *sep_idx == 0 ? par->leftmost : child(*sep_idx - 1);
  return H(*l_raw)->sibling == *r_raw;
}

template <class Tree, class Slots>
void Engine<Tree, Slots>::MergeUpward(const uint64_t* path, uint32_t depth, uint64_t node) {
  for (int32_t d = static_cast<int32_t>(depth) - 1; d >= 0; --d) {
    const uint64_t parent = path[d];
    uint64_t l_raw = 0, r_raw = 0;
    uint32_t sep_idx = 0;
    if (!MergePair(parent, node, &l_raw, &r_raw, &sep_idx)) break;
    if (!TreeMergeIfRoom(node, l_raw, r_raw, parent, sep_idx)) break;
    if (parent == env_.pool->root(0) || !tree().Underfull(H(parent))) break;
    node = parent;
  }
  CollapseRoot();
}

template <class Tree, class Slots>
void Engine<Tree, Slots>::CollapseRoot() {
  for (;;) {
    const uint64_t raw = env_.pool->root(0);
    Header* x = H(raw);
    if (x->level == 0 || Slots::Read(x).count != 0 || x->sibling != 0) return;
    TreeWriteLock(x);
    env_.pool->WriteRoot(0, x->leftmost);
    pm::store(&x->version, kDead, std::memory_order_release);
    env_.alloc->Retire(PPtr(raw));
  }
}

// ------------------------------------------------------------------ auxiliary arrays

template <class Tree, class Slots>
void Engine<Tree, Slots>::SetAux(Header* x, uint32_t from, uint32_t fp_lo, uint32_t fp_hi) {
  const Ring m = Slots::Read(x);
  const Rec* r = R(x);
  if (lay_.sentinel) {
    uint64_t* s = S(x);
    const uint32_t lines = (m.count + kRecsPerLine - 1) / kRecsPerLine;
    for (uint32_t l = from / kRecsPerLine; l < lines; ++l) pm::store(&s[l], r[Phys(m.start, l * kRecsPerLine)].key);
  } else if (lay_.fingerprints) {
    uint8_t* f = F(x);
    for (uint32_t i = fp_lo; i < fp_hi && i < m.count; ++i) {
      const uint32_t ph = Phys(m.start, i);
      pm::store(&f[ph], common::Fingerprint(r[ph].key));
    }
  }
}

// ------------------------------------------------------------------ create, load, close

template <class Tree, class Slots>
template <class... TreeArgs>
Result<std::unique_ptr<Index>> Engine<Tree, Slots>::CreateTree(const IndexEnv& env, const Layout& lay, Search s,
                                                               TreeArgs&&... args) {
  std::unique_ptr<Tree> t(new Tree(env, lay, s, std::forward<TreeArgs>(args)...));
  Result<PPtr> root = env.alloc->Alloc(lay.bytes);
  if (!root.ok()) return root.status();
  Header* r = t->H(root.value().raw());
  Slots::Init(r, 0, 0, 0, false, 0);
  pm::flush(r, sizeof(Header));
  pm::fence();  // the empty root durable before the root slot names it
  // (Its flush-late mutant is killed: copy B durable before copy A is a
  // pair no crash leaves, which Pool::OpenImage refuses, and pmcrash fails
  // such an image inside create once a copy of slot 0 is published.)
  env.pool->WriteRoot(0, root.value().raw());
  t->ready_ = true;
  return std::unique_ptr<Index>(std::move(t));
}

template <class Tree, class Slots>
Status Engine<Tree, Slots>::close() {
  if (closed_ || !ready_ || abandoned()) return Status::OK();
  closed_ = true;
  sync::MutexLock g(mu_);
  return WriteContentRecord(
      env_, [this](uint64_t raw) { return H(raw); },
      [this](uint64_t raw, uint32_t level, NodeView* v) { return ViewNode(raw, level, v); });
}

template <class Tree, class Slots>
Status Engine<Tree, Slots>::bulk_load(std::span<const KV> sorted, double fill) {
  sync::MutexLock g(mu_);
  const uint64_t old = env_.pool->root(0);
  Header* o = H(old);
  if (o->level != 0 || Slots::Read(o).count != 0 || o->sibling != 0)
    return Status::InvalidArgument(std::string(Slots::kName) + ": bulk_load needs an empty index");
  PMINDEX_RETURN_IF_ERROR(CheckBulkInput(Slots::kName, sorted, fill));
  if (sorted.empty()) return Status::OK();
  const uint32_t per = std::clamp<uint32_t>(static_cast<uint32_t>(std::lround(fill * lay_.cap)), 1, lay_.cap);
  std::vector<uint64_t> made;
  auto alloc = [&](uint64_t* raw) -> Status {
    Result<PPtr> a = env_.alloc->Alloc(lay_.bytes);
    if (!a.ok()) {
      for (uint64_t m : made) env_.alloc->Free(PPtr(m));
      return a.status();
    }
    *raw = a.value().raw();
    made.push_back(*raw);
    return Status::OK();
  };
  // One level at a time: nodes of up to `per` records, linked left to
  // right, each node's records in slots 0.. . items: (low key, value or
  // child); an inner node's first item becomes its leftmost child.
  std::vector<std::pair<Key, uint64_t>> items;
  items.reserve(sorted.size());
  for (const KV& kv : sorted) items.push_back({kv.key, kv.value});
  uint32_t level = 0;
  for (;;) {
    const uint32_t take = level == 0 ? per : per + 1;  // an inner node holds per + 1 children
    std::vector<std::pair<Key, uint64_t>> up;
    Header* prev = nullptr;
    for (size_t b = 0; b < items.size(); b += take) {
      const size_t e = std::min(items.size(), b + take);
      uint64_t raw = 0;
      PMINDEX_RETURN_IF_ERROR(alloc(&raw));
      Header* x = H(raw);
      const bool inner = level > 0;
      Slots::Init(x, level, inner ? items[b].second : 0, 0, b > 0, items[b].first);
      Rec* r = R(x);
      uint32_t c = 0;
      for (size_t i = inner ? b + 1 : b; i < e; ++i) pm::store(&r[c++], Rec{items[i].first, items[i].second});
      Slots::StoreFilled(x, c);
      SetAux(x, 0, 0, c);
      if (prev != nullptr) {
        pm::store(&prev->sibling, raw);
        pm::flush(prev, sizeof(Header));
      }
      if (c > 0) pm::flush(r, c * sizeof(Rec));
      prev = x;
      up.push_back({items[b].first, raw});
    }
    pm::flush(prev, sizeof(Header));
    items.swap(up);
    if (items.size() == 1) break;
    ++level;
  }
  pm::fence();  // the loaded tree durable before the root slot names it
  env_.pool->WriteRoot(0, items[0].second);
  env_.alloc->Free(PPtr(old));
  return Status::OK();
}

// ------------------------------------------------------------------ recovery

template <class Tree, class Slots>
Status Engine<Tree, Slots>::ViewNode(uint64_t raw, uint32_t level, NodeView* v) const {
  static const std::string kNodeWhat = std::string(Slots::kName) + ": node";
  static const std::string kSiblingWhat = std::string(Slots::kName) + ": sibling";
  auto d = pm::Decode<Header>(*env_.pool, raw, lay_.bytes, 64, kNodeWhat);
  if (!d.ok()) return d.status();
  Header* x = d.value();
  if (x->tag != kNodeTag) return Status::Corruption(Where(raw) + " has no node tag");
  if (x->level != level) return Status::Corruption(Where(raw) + " is on the wrong level");
  if (const char* bad = Slots::BadSlots(x, lay_.cap)) return Status::Corruption(Where(raw) + bad);
  if (x->has_low > 1) return Status::Corruption(Where(raw) + " has a bad header");
  v->level = level;
  v->sibling = x->sibling;
  v->leftmost = x->leftmost;
  v->has_low = x->has_low != 0;
  v->low = x->low;
  const Ring m = Slots::Read(x);
  uint32_t n = m.count;
  const Rec* r = R(x);
  auto rec = [&](uint32_t i) -> const Rec& { return r[Phys(m.start, i)]; };
  if (v->sibling != 0) {
    auto s = pm::Decode<Header>(*env_.pool, v->sibling, lay_.bytes, 64, kSiblingWhat);
    if (!s.ok()) return s.status();
    if (s.value()->tag != kNodeTag || s.value()->has_low != 1)
      return Status::Corruption(Where(raw) + ": its sibling is not a split-made node");
    const Key sl = s.value()->low;
    uint32_t t = 0;
    while (t < n && rec(t).key < sl) ++t;
    n = t;
  }
  v->recs.clear();
  for (uint32_t i = 0; i < n; ++i) {
    const Rec& c = rec(i);
    if (!m.left && i + 1 < n && c.key == rec(i + 1).key) continue;  // half-done shift: the right one is valid
    if (m.left && i > 0 && c.key == rec(i - 1).key) continue;       // the left one is valid
    if (!v->recs.empty() && v->recs.back().key >= c.key) return Status::Corruption(Where(raw) + ": keys not ascending");
    if (v->has_low && c.key < v->low) return Status::Corruption(Where(raw) + ": key below its low key");
    v->recs.push_back(c);
  }
  return Status::OK();
}

template <class Tree, class Slots>
Status Engine<Tree, Slots>::Validate(uint64_t root, std::vector<uint64_t>* nodes,
                                     common::ContentSum* content) const {
  static const std::string kRootWhat = std::string(Slots::kName) + ": root (root slot 0)";
  auto rd = pm::Decode<Header>(*env_.pool, root, lay_.bytes, 64, kRootWhat);
  if (!rd.ok()) return rd.status();
  return ValidateLevels(Slots::kName, root, rd.value()->level, kMaxHeight,
                        env_.pool->size() / lay_.bytes + 1,  // more nodes than fit = a cycle
                        nodes, content, env_.pool->was_clean() && !env_.salvage,
                        [this](uint64_t raw, uint32_t level, NodeView* v) { return ViewNode(raw, level, v); });
}

template <class Tree, class Slots>
template <class... TreeArgs>
Result<std::unique_ptr<Index>> Engine<Tree, Slots>::OpenTree(const IndexEnv& env, const Layout& lay, Search s,
                                                             TreeArgs&&... args) {
  std::unique_ptr<Tree> t(new Tree(env, lay, s, std::forward<TreeArgs>(args)...));
  const uint64_t root = env.pool->root(0);
  std::vector<uint64_t> nodes;
  common::ContentSum content(env);  // visits the pairs too (IndexEnv::pairs)
  PMINDEX_RETURN_IF_ERROR(t->Validate(root, &nodes, &content));  // reads only
  PMINDEX_RETURN_IF_ERROR(common::CheckContentRecord(*env.pool, env.salvage, content, Slots::kName));
  PMINDEX_RETURN_IF_ERROR(AdoptNodes(env, nodes, Slots::kName));  // no write before
  {
    sync::MutexLock g(t->mu_);  // uncontended: the tree is not shared yet
    for (uint64_t n : nodes) t->Repair(n);
  }
  pm::fence();
  t->ready_ = true;
  return std::unique_ptr<Index>(std::move(t));
}

// ------------------------------------------------------------------ walks

template <class Tree, class Slots>
void Engine<Tree, Slots>::WalkLevels(const std::function<void(uint64_t, Header*)>& fn) const {
  sorted_node::WalkLevels(env_.pool->root(0), [this](uint64_t raw) { return H(raw); }, fn);
}

// A node's own checks, then VerifyRange (its range and children).
template <class Tree, class Slots>
Status Engine<Tree, Slots>::VerifyNode(uint64_t raw, uint32_t level, uint64_t* entries,
                                       std::vector<uint64_t>* leaves) const {
  NodeView v;
  PMINDEX_RETURN_IF_ERROR(ViewNode(raw, level, &v));
  Header* x = H(raw);
  const Ring m = Slots::Read(x);
  if (v.recs.size() != m.count) return Status::Corruption(Where(raw) + " holds stale or duplicate records");
  if (x->version & 1) return Status::Corruption(Where(raw) + " is locked");
  if (lay_.sentinel) {
    for (uint32_t l = 0; l * kRecsPerLine < m.count; ++l)
      if (S(x)[l] != R(x)[Phys(m.start, l * kRecsPerLine)].key)
        return Status::Corruption(Where(raw) + ": stale sentinel");
  }
  if (lay_.fingerprints) {
    for (uint32_t i = 0; i < m.count; ++i) {
      const uint32_t ph = Phys(m.start, i);
      if (F(x)[ph] != common::Fingerprint(R(x)[ph].key)) return Status::Corruption(Where(raw) + ": stale fingerprint");
    }
  }
  return VerifyRange(Slots::kName, raw, level, v, entries, leaves, [this](uint64_t y) { return H(y); },
                     [&](uint64_t y, uint32_t l) { return VerifyNode(y, l, entries, leaves); });
}

template <class Tree, class Slots>
Status Engine<Tree, Slots>::verify() {
  sync::MutexLock g(mu_);
  return VerifyTree(Slots::kName, env_.pool->root(0), [this](uint64_t y) { return H(y); },
                    [this](uint64_t y, uint32_t level, uint64_t* entries, std::vector<uint64_t>* leaves) {
                      return VerifyNode(y, level, entries, leaves);
                    });
}

template <class Tree, class Slots>
IndexStats Engine<Tree, Slots>::stats() {
  sync::MutexLock g(mu_);
  IndexStats s;
  s.height = H(env_.pool->root(0))->level + 1;
  WalkLevels([&](uint64_t, Header* x) {
    s.pm_bytes += lay_.bytes;
    if (x->level == 0) {
      ++s.leaves;
      s.entries += Slots::Read(x).count;
    } else {
      ++s.inner_nodes;
    }
  });
  return s;
}

template <class Tree, class Slots>
Status Engine<Tree, Slots>::for_each_block(const std::function<void(PPtr)>& fn) {
  sync::MutexLock g(mu_);
  WalkLevels([&](uint64_t raw, Header*) { fn(PPtr(raw)); });
  return Status::OK();
}

// ------------------------------------------------------------------ registration

// The registry entry of a sorted-node tree: the options of
// common/sorted_node.h (ParseOptions), create and open through the tree's
// Create/Open(env, layout, search).
template <class Tree>
IndexInfo RegistryEntry(std::string options_help) {
  static const auto parse = [](const Options& o) { return ParseOptions(o, Tree::Slots::kName); };
  IndexInfo info;
  info.name = std::string(Tree::Slots::kName);
  info.persistent = true;
  info.options_help = std::move(options_help);
  info.validate = [](const Options& o) -> Status { return parse(o).status(); };
  info.create = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
    Result<Config> c = parse(o);
    if (!c.ok()) return c.status();
    return Tree::Create(env, c.value().lay, c.value().search);
  };
  info.open = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
    Result<Config> c = parse(o);
    if (!c.ok()) return c.status();
    return Tree::Open(env, c.value().lay, c.value().search);
  };
  info.marks_in_use = true;
  return info;
}

}  // namespace pmindex::sorted_node
