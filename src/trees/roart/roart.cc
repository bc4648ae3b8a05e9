// roart: ROART (Ma et al., "ROART: Range-query Optimized Persistent ART",
// FAST 2021) in this project's layers: an adaptive radix tree wholly in PM
// over 8-byte keys, with prefix compression (an inner node records the
// depth it branches at and the key bytes above it, so a chain of
// one-child levels is one node), leaf compaction (the bottom nodes are
// leaf arrays holding up to `leaf_array` leaf pointers), entry compression
// (a child's key byte, type and offset in one word; a leaf pointer and
// its key's fingerprint in one word) and selective metadata persistence
// (only entries, slots, leaves and the write-once headers are persisted;
// N48's child index, the inner nodes' child counts, the leaf arrays'
// bitmaps and the index's counters are rebuilt at open).
//
// Persistence: every change of the tree is one NVM atomic write (NAW) of
// one entry or slot word, made after everything it links is durable:
// an insert into a leaf array's free slot, a new child of an inner node,
// a grown node or a split leaf array replacing its parent's entry, a
// delete clearing a slot or an entry, replacing a node left with few
// children by a smaller copy, replacing a two-child node by its other
// child in the grandparent, or merging a node's underfull leaf arrays
// into one new array that replaces the node. A crash thus leaves the old or the new
// tree, plus unlinked blocks that recovery gives back. Layout, persist
// points and what open repairs: docs/layout/roart.md.
//
// Concurrency: ROART's optimistic lock coupling. Every inner node and
// leaf array has a version lock (in DRAM: see LockOf); readers take no
// lock and restart when a version they read changed, writers lock only
// the nodes they write (TryWrite). Unlinked blocks are retired through
// the allocator's epochs, which every operation enters. verify(),
// stats() and for_each_block() walk without locks and require that no
// writer runs (as Db::Verify does).
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "alloc/allocator.h"
#include "alloc/numa_meter.h"
#include "common/content_record.h"
#include "common/olc_btree.h"
#include "common/sorted_node.h"
#include "index/index.h"
#include "index/registry.h"
#include "pm/persist.h"
#include "pm/pptr_decode.h"
#include "sync/version_lock.h"
#include "trees/roart/roart_layout.h"
#include "util/check.h"

namespace pmindex::roart {
namespace {

constexpr std::string_view kKind = "roart";

struct Params {
  unsigned leaf_array = 64;  // slots of a leaf array
};

constexpr std::string_view kOptionsHelp =
    "leaf_array=N (2..64; default 64, ROART's leaf array length: leaf pointers per leaf array)";

Result<Params> ParseParams(const Options& o) {
  PMINDEX_RETURN_IF_ERROR(o.CheckKnown({"leaf_array"}));
  Result<uint64_t> la = o.get_uint("leaf_array", 64, 2, 64);
  if (!la.ok()) return la.status();
  return Params{static_cast<unsigned>(la.value())};
}

// What a walk of the tree found (open, verify, stats).
struct Walked {
  std::vector<uint64_t> blocks;          // every block reached (raw PPtr)
  std::vector<uint64_t*> stale_n48;      // N48 nodes whose child index disagrees with the entries
  std::vector<uint64_t*> stale_bitmaps;  // leaf arrays whose bitmap disagrees with the slots
  std::vector<uint64_t*> stale_counts;   // inner nodes whose count byte disagrees with the entries
  bool strict = false;                   // verify(): stale metadata is Corruption
  uint64_t count = 0;
  uint64_t bytes = 0;
  uint64_t nodes[5] = {};  // by type, kN4..kLeafArray (index type-1)
  uint64_t slots_used = 0;
  uint32_t height = 0;  // inner levels + the leaf array level + the leaf level
  bool have_last = false;
  Key last = 0;
  // stats() and for_each_block(): the slots are counted and the leaves'
  // blocks listed, but no leaf is read (the structure was validated at
  // open and by every write since).
  bool shape_only = false;
};

class Roart final : public Index {
 public:
  static Result<std::unique_ptr<Index>> Create(const IndexEnv& env, const Params& p);
  static Result<std::unique_ptr<Index>> Open(const IndexEnv& env, const Params& p);

  Status insert(Key k, Value v) override { return Write(Op::kInsert, k, v); }
  Status update(Key k, Value v) override { return Write(Op::kUpdate, k, v); }
  Status upsert(Key k, Value v) override { return Write(Op::kUpsert, k, v); }
  Status remove(Key k) override;
  std::optional<Value> lookup(Key k) override;
  size_t scan(Key from, size_t n, KV* out) override;
  Status bulk_load(std::span<const KV> sorted, double fill) override;
  Status verify() override;
  IndexStats stats() override;
  Status for_each_block(const std::function<void(PPtr)>& fn) override;
  Status close() override;

 private:
  enum class Op : uint8_t { kInsert, kUpdate, kUpsert };
  class Held;
  struct RemovePath;
  // Where a write's descent stopped: the node, its parent and the
  // parent's entry naming it (nullptr both at the root), each version as
  // read; k's byte at the node, the node's entry word for it (nullptr if
  // none) and that entry as read (0: no child).
  struct WritePath {
    uint64_t* root;
    uint64_t* node;
    uint64_t vnode;
    uint64_t* parent;
    uint64_t vparent;
    uint64_t* up;
    unsigned b;
    uint64_t* es;
    uint64_t e;
  };

  Roart(const IndexEnv& env, const Params& p)
      : env_(env),
        params_(p),
        base_(env.pool->base()),
        pool_id_(env.pool->id()),
        full_mask_(p.leaf_array == 64 ? ~uint64_t{0} : (uint64_t{1} << p.leaf_array) - 1),
        locks_(new sync::VersionLock[size_t{1} << kLockBits]) {}

  uint64_t* At(uint64_t offset) const { return reinterpret_cast<uint64_t*>(base_ + offset); }
  uint64_t OffsetOf(const void* p) const {
    return static_cast<uint64_t>(static_cast<const char*>(p) - base_);
  }
  uint64_t Raw(uint64_t offset) const { return PPtr::Make(pool_id_, offset).raw(); }
  Leaf* LeafAt(uint64_t slot) const { return reinterpret_cast<Leaf*>(At(slot & kOffsetMask)); }
  static uint64_t* Entries(uint64_t* node) { return node + kHeaderWords; }
  static uint8_t* N48Index(uint64_t* node) {
    return reinterpret_cast<uint8_t*>(node + kHeaderWords + 48);
  }
  size_t LaBytes() const { return LeafArrayBytes(params_.leaf_array); }
  // NUMA metering (alloc/numa_meter.h): every block an operation reads or
  // writes on its path counts one visit, each time the operation reaches
  // it. Off (the default), one predictable branch.
  void Visit(const void* block) const { alloc::MeterVisit(*env_.alloc, block); }
  uint64_t* Root() const { return root_.load(std::memory_order_acquire); }
  // The descents of TryWrite (WritePath) and TryRemove (RemovePath): the
  // root as read now, and one step down to `child`, read at vchild, from
  // the node whose entry p->es names it.
  template <class Path>
  void StartAtRoot(Path* p) const {
    p->root = Root();
    p->node = p->root;
    p->vnode = ReadVersion(p->node);
    Visit(p->node);
  }
  template <class Path>
  static void StepDown(Path* p, uint64_t* child, uint64_t vchild) {
    p->parent = p->node;
    p->vparent = p->vnode;
    p->up = p->es;
    p->node = child;
    p->vnode = vchild;
  }

  // Words that writers may change while optimistic readers read them are
  // read with relaxed atomics; entry and slot words, which publish a
  // block written before them (pm::naw stores with release), with acquire.
  static uint64_t Ld(const uint64_t& w) { return sync::OlcLoad(w); }
  static uint64_t LdAcq(const uint64_t& w) {
    return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(w)).load(std::memory_order_acquire);
  }

  // The version lock of an inner node or leaf array: optimistic lock
  // coupling's per-node lock word, kept in DRAM (volatile state, nothing
  // of it in PM, so a crash leaves no lock held). The words are a table
  // indexed by a hash of the node's address: two nodes may share a word,
  // which costs at most a needless restart (a writer that needs both
  // takes the word once, see Held).
  static constexpr unsigned kLockBits = 16;
  sync::VersionLock& LockOf(const void* node) const {
    const uint64_t line = reinterpret_cast<uintptr_t>(node) >> 6;
    return locks_[(line * 0x9E3779B97F4A7C15ULL) >> (64 - kLockBits)];
  }
  // A reader's version of a node (waits while a writer holds it).
  uint64_t ReadVersion(const void* node) const {
    bool unused = false;  // the table's words are never marked obsolete
    return LockOf(node).ReadLockOrRestart(unused);
  }
  // True iff the node's word still equals v (nothing written since).
  bool Unchanged(const void* node, uint64_t v) const {
    bool restart = false;
    LockOf(node).ReadUnlockOrRestart(v, restart);
    return !restart;
  }

  // The entry word of byte b in inner node `node`, or nullptr if none.
  uint64_t* ChildSlot(uint64_t* node, unsigned b) const;
  // The leaf array's slot holding key k, or nullptr.
  uint64_t* FindInArray(uint64_t* la, Key k) const;
  // Sets or clears slot i's bit in a leaf array's bitmap (word 1).
  static void SetUsed(uint64_t* la, unsigned i, bool used);
  // Adds delta (+1 or -1) to an inner node's child count (its prefix
  // word's count byte). REQUIRES: node locked.
  static void AddCount(uint64_t* node, int delta);
  // The children of an inner node (not the root, if an N256) by its count.
  static unsigned ChildCount(const uint64_t* node) {
    return Children(Ld(node[1]), MetaType(Ld(node[0])));
  }

  // One optimistic attempt of a write or a remove: nullopt when it must
  // restart (a node changed under its reads or another writer holds one).
  std::optional<Status> TryWrite(Op op, Key k, Value v);
  // TryWrite's steps, at the node where its descent stopped (p): the
  // insert of a child for k's byte, the write into the leaf array that
  // byte names, the insert over a child whose compressed path k leaves
  // (the child's prefix word and k's mismatch with it). Each locks what it
  // writes, leaves the epoch (*guard) once locked, and returns nullopt to
  // restart.
  std::optional<Status> WriteNewChild(const WritePath& p, Held* held,
                                      std::optional<alloc::Allocator::EpochGuard>* guard, Op op,
                                      Key k, Value v);
  std::optional<Status> WriteInArray(const WritePath& p, Held* held,
                                     std::optional<alloc::Allocator::EpochGuard>* guard, Op op,
                                     Key k, Value v);
  std::optional<Status> WriteOverPrefix(const WritePath& p, uint64_t cprefix, uint64_t mismatch,
                                        Held* held,
                                        std::optional<alloc::Allocator::EpochGuard>* guard, Op op,
                                        Key k, Value v);
  // A new leaf of (k, v) in a new one-leaf array, both flushed (not
  // fenced); the array's offset. Both are appended to *made; on an error
  // nothing made here stays allocated.
  Result<uint64_t> NewOneLeafArray(Key k, Value v, std::vector<uint64_t>* made);
  // False iff `locked` is the root the descent started from (`root`) and
  // bulk_load has swapped the tree's root since: that node is no longer
  // the tree's.
  bool StillRoot(const uint64_t* root, const uint64_t* locked) const {
    return locked != root || Root() == root;
  }
  std::optional<Status> TryRemove(Key k);
  // The removes of the array's last leaf (clear, shrink or collapse);
  // false when a lock was not had (restart).
  bool RemoveLastLeaf(const RemovePath& p, Held* held,
                      std::optional<alloc::Allocator::EpochGuard>* guard);
  // The merge of node's leaf arrays into one, the key removed with it:
  // true if done, false if node does not qualify, nullopt to restart.
  std::optional<bool> TryMerge(const RemovePath& p, Held* held,
                               std::optional<alloc::Allocator::EpochGuard>* guard);
  // An inner node whose children are all leaf arrays holding at most this
  // many leaves in all is replaced by one leaf array (half an array, so
  // that a merge is not undone by the next insert's split; 2 at least, so
  // that leaf_array=2, the crash tests' setting, merges too).
  unsigned MergeAt() const { return std::max(2u, params_.leaf_array / 2); }
  Status Write(Op op, Key k, Value v);
  // One optimistic attempt of a lookup: false when it must restart.
  bool TryLookup(Key k, std::optional<Value>* out) const;
  // A new leaf of (k, v), written and flushed (not fenced); its offset.
  Result<uint64_t> NewLeaf(Key k, Value v);
  // A new leaf array holding `slots`, flushed (not fenced); its offset.
  Result<uint64_t> NewLeafArray(std::span<const uint64_t> slots);
  // A new inner node of the given type, depth and prefix holding the
  // entries (N48's index built too), flushed (not fenced); its offset.
  Result<uint64_t> NewInner(unsigned type, unsigned depth, Key prefix,
                            std::span<const uint64_t> entries);
  // Adds entry e (byte b) to inner node `node`, whose entry in its parent
  // is *up (nullptr for the root). Grows the node if it is full.
  // REQUIRES: node locked, and its parent too if node is full.
  Status AddChild(uint64_t* node, uint64_t* up, unsigned b, uint64_t e);
  // Replaces the full leaf array of entry *es (of inner node `parent`) by
  // an inner node over new leaf arrays, the new leaf (k, v) among them.
  // REQUIRES: parent and the array locked.
  Status SplitArray(uint64_t* parent, uint64_t* es, Key k, Value v);
  // Clears entry *es (byte b) of inner node `node` (locked).
  void ClearEntry(uint64_t* node, uint64_t* es, unsigned b);
  // Frees blocks made by an operation that failed (nothing links them)
  // and takes their bytes off the count.
  void Unmake(const std::vector<uint64_t>& offsets);
  // The used entries of an inner node in key-byte order into out[0..256);
  // returns their count.
  // The entries of an inner node whose byte is at least `first`, in byte
  // order (read with acquire loads; the caller validates the node's
  // version before it uses one). N256 and N48 are walked in place, so a scan
  // that stops early reads only the entries it uses; N4 and N16 are copied
  // into `buf` and sorted. fn(e) returns false to stop.
  template <typename Fn>
  void ForEachEntryFrom(uint64_t* node, unsigned first, uint64_t* buf, Fn fn) const;
  // Asks for the lines of the child an entry names that a scan reads
  // first: a leaf array's header and slots, an inner node's header.
  void PrefetchChild(uint64_t e) const {
    const char* c = reinterpret_cast<const char*>(At(EntryOffset(e)));
    const size_t bytes = EntryType(e) == kLeafArray ? LaBytes() : 128;
    for (size_t i = 0; i < bytes; i += 64) __builtin_prefetch(c + i);
  }
  // Appends to out[got..n) the pairs below `node` (read at version v) with
  // keys >= from; false if a node changed under the reads (the caller
  // restarts after the last pair appended, which *got keeps).
  bool ScanNode(uint64_t* node, uint64_t v, Key from, size_t n, KV* out, size_t* got) const;
  // Builds the subtree of sorted pairs below an inner node branching at
  // parent_depth; returns its entry (byte 0). Offsets made go to *made.
  Result<uint64_t> Build(std::span<const KV> kv, unsigned parent_depth, size_t cap,
                         std::vector<uint64_t>* made);

  // Reads only: the tree from the root at root_raw. With strict (verify),
  // a stale N48 index is Corruption; otherwise it is listed for repair.
  Status Walk(uint64_t root_raw, Walked* w, common::ContentSum* content, bool strict) const;
  Status WalkInner(uint64_t* node, uint64_t raw, uint32_t level, Walked* w,
                   common::ContentSum* content, bool strict) const;
  Status WalkArray(uint64_t* la, uint64_t raw, const uint64_t* parent, unsigned b, Walked* w,
                   common::ContentSum* content) const;

  IndexEnv env_;
  Params params_;
  char* base_;
  uint16_t pool_id_;
  uint64_t full_mask_;  // the bits of a leaf array's slots in its bitmap
  // An N256 of depth 0, never replaced but by bulk_load (which holds its
  // lock while it swaps it).
  std::atomic<uint64_t*> root_{nullptr};
  std::unique_ptr<sync::VersionLock[]> locks_;
  olc_detail::StripedCounter size_;
  olc_detail::StripedCounter bytes_;
  olc_detail::StripedCounter splits_;
  olc_detail::StripedCounter grows_;
  olc_detail::StripedCounter collapses_;
  olc_detail::StripedCounter shrinks_;
  olc_detail::StripedCounter merges_;
  bool ready_ = false;
  bool closed_ = false;
};

// The locks one attempt of a write holds (grandparent, parent, leaf
// array; a merge also the parent's other arrays), taken top-down by upgrading the versions the
// descent read, never by waiting, so writers cannot deadlock: a word
// changed or held by another writer makes the attempt restart.
// Released (each word's version bumped) when the attempt ends.
class Roart::Held {
 public:
  explicit Held(const Roart& t) : t_(t) {}
  ~Held() {
    for (unsigned i = 0; i < n_; ++i) words_[i]->WriteUnlock();
  }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;

  // Locks `node` iff its word still holds version v; false: restart.
  bool Lock(const void* node, uint64_t v) {
    sync::VersionLock& w = t_.LockOf(node);
    for (unsigned i = 0; i < n_; ++i)
      if (words_[i] == &w) return locked_[i] == v + sync::VersionLock::kLockedBit;
    PMINDEX_CHECK(n_ < kMax, "roart: more than %u locks in one write", kMax);
    bool restart = false;
    w.UpgradeToWriteLockOrRestart(v, restart);
    if (restart) return false;
    words_[n_] = &w;
    locked_[n_++] = v;
    return true;
  }

 private:
  // A merge's: grandparent, parent, the array and up to 32 others.
  static constexpr unsigned kMax = 3 + 32;
  const Roart& t_;
  sync::VersionLock* words_[kMax];  // words_[0..n_) are held ...
  // ... at these versions (zeroed: GCC cannot see that only [0..n_) is
  // read once TryWrite's steps are inlined, and warns)
  uint64_t locked_[kMax] = {};
  unsigned n_ = 0;
};

uint64_t* Roart::ChildSlot(uint64_t* node, unsigned b) const {
  const unsigned type = MetaType(Ld(node[0]));
  uint64_t* e = Entries(node);
  switch (type) {
    case kN4:
    case kN16: {
      const unsigned cap = Capacity(type);
      for (unsigned i = 0; i < cap; ++i) {
        const uint64_t x = Ld(e[i]);
        if (x != 0 && EntryByte(x) == b) return &e[i];
      }
      return nullptr;
    }
    case kN48: {
      const unsigned s = sync::OlcLoad(N48Index(node)[b]);
      return s == 0 || s > 48 ? nullptr : &e[s - 1];
    }
    default:
      return Ld(e[b]) != 0 ? &e[b] : nullptr;
  }
}

uint64_t* Roart::FindInArray(uint64_t* la, Key k) const {
  const unsigned fp = Fingerprint(k);
  uint64_t* s = Entries(la);
  Visit(la);
  pm::ModelRead(la, 16);  // the header and the bitmap
  for (uint64_t used = Ld(la[1]) & full_mask_; used != 0; used &= used - 1) {
    const unsigned i = static_cast<unsigned>(std::countr_zero(used));
    pm::ModelRead(&s[i], 8);
    const uint64_t slot = LdAcq(s[i]);
    if (slot == 0 || SlotFingerprint(slot) != fp) continue;
    Visit(LeafAt(slot));
    pm::ModelRead(LeafAt(slot), sizeof(Leaf));
    if (Ld(LeafAt(slot)->key) == k) return &s[i];
  }
  return nullptr;
}

void Roart::SetUsed(uint64_t* la, unsigned i, bool used) {
  // The bitmap is metadata open rebuilds from the slots: stored, not
  // flushed.
  const uint64_t bit = uint64_t{1} << i;
  pm::store(&la[1], used ? la[1] | bit : la[1] & ~bit);
}

void Roart::AddCount(uint64_t* node, int delta) {
  // Metadata open rebuilds from the entries: stored, not flushed. The
  // prefix bytes are stored unchanged, so readers see the same prefix.
  const uint64_t w = node[1];
  const uint64_t c = ((w & kCountMask) + static_cast<uint64_t>(delta)) & kCountMask;
  pm::store(&node[1], (w & ~kCountMask) | c);
}

Result<uint64_t> Roart::NewLeaf(Key k, Value v) {
  Result<PPtr> a = env_.alloc->Alloc(kLeafBytes);
  if (!a.ok()) return a.status();
  Leaf* l = reinterpret_cast<Leaf*>(At(a.value().offset()));
  Visit(l);
  pm::store(&l->meta, Meta(kLeaf, 0));
  pm::store(&l->key, k);
  pm::store(&l->value, v);
  pm::flush(l, sizeof(Leaf));
  bytes_.Add(kLeafBytes);
  return a.value().offset();
}

Result<uint64_t> Roart::NewLeafArray(std::span<const uint64_t> slots) {
  Result<PPtr> a = env_.alloc->Alloc(LaBytes());
  if (!a.ok()) return a.status();
  uint64_t* la = At(a.value().offset());
  Visit(la);
  pm::store(&la[0], Meta(kLeafArray, params_.leaf_array));
  const uint64_t n = slots.size();
  pm::store(&la[1], n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1);
  for (unsigned i = 0; i < params_.leaf_array; ++i)
    pm::store(&Entries(la)[i], i < n ? slots[i] : uint64_t{0});
  pm::flush(la, 8 * (kHeaderWords + params_.leaf_array));
  bytes_.Add(static_cast<int64_t>(LaBytes()));
  return a.value().offset();
}

Result<uint64_t> Roart::NewInner(unsigned type, unsigned depth, Key prefix,
                                 std::span<const uint64_t> entries) {
  Result<PPtr> a = env_.alloc->Alloc(InnerBytes(type));
  if (!a.ok()) return a.status();
  uint64_t* n = At(a.value().offset());
  Visit(n);
  pm::store(&n[0], Meta(type, depth));
  pm::store(&n[1], PrefixWord(prefix, depth, static_cast<unsigned>(entries.size())));
  const unsigned cap = Capacity(type);
  uint64_t* e = Entries(n);
  if (type == kN256) {
    for (unsigned i = 0; i < cap; ++i) pm::store(&e[i], uint64_t{0});
    for (uint64_t x : entries) pm::store(&e[EntryByte(x)], x);
  } else {
    for (unsigned i = 0; i < cap; ++i) pm::store(&e[i], i < entries.size() ? entries[i] : 0);
  }
  if (type == kN48) {
    uint8_t* idx = N48Index(n);
    pm::fill(idx, 0, 256);
    for (unsigned i = 0; i < entries.size(); ++i)
      pm::store(&idx[EntryByte(entries[i])], static_cast<uint8_t>(i + 1));
  }
  pm::flush(n, InnerBytes(type));
  bytes_.Add(static_cast<int64_t>(InnerBytes(type)));
  return a.value().offset();
}

void Roart::Unmake(const std::vector<uint64_t>& offsets) {
  for (uint64_t o : offsets) {
    const unsigned type = MetaType(*At(o));  // written by New* before it returned
    const size_t bytes = type == kLeaf        ? kLeafBytes
                         : type == kLeafArray ? LaBytes()
                                              : InnerBytes(type);
    bytes_.Add(-static_cast<int64_t>(bytes));
    env_.alloc->Free(PPtr::Make(pool_id_, o));
  }
}

Status Roart::AddChild(uint64_t* node, uint64_t* up, unsigned b, uint64_t e) {
  const unsigned type = MetaType(node[0]);
  uint64_t* es = Entries(node);
  const unsigned cap = Capacity(type);
  if (type == kN256) {
    AddCount(node, 1);
    pm::naw(&es[b], e);
    return Status::OK();
  }
  for (unsigned i = 0; i < cap; ++i) {
    if (es[i] != 0) continue;
    AddCount(node, 1);
    pm::naw(&es[i], e);  // the commit
    // N48's index is metadata: open rebuilds it from the entries.
    if (type == kN48) pm::store(&N48Index(node)[b], static_cast<uint8_t>(i + 1));
    return Status::OK();
  }
  // Full: a copy one size up with the new entry, durable before the
  // parent's entry names it (the commit); the old node is retired.
  PMINDEX_CHECK(up != nullptr, "roart: the root is an N256 and never full");
  std::vector<uint64_t> all(es, es + cap);
  all.push_back(e);
  const unsigned bigger = type + 1;
  Result<uint64_t> n = NewInner(bigger, MetaArg(node[0]), node[1], all);
  if (!n.ok()) return n.status();
  pm::fence();
  pm::naw(up, Entry(n.value(), EntryByte(*up), bigger));
  env_.alloc->Retire(PPtr::Make(pool_id_, OffsetOf(node)));
  bytes_.Add(-static_cast<int64_t>(InnerBytes(type)));
  grows_.Add(1);
  return Status::OK();
}

Status Roart::SplitArray(uint64_t* parent, uint64_t* es, Key k, Value v) {
  uint64_t* la = At(EntryOffset(*es));
  const uint64_t* slots = Entries(la);
  // The first key byte below the parent at which the leaves and k differ.
  uint64_t diff = 0;
  for (unsigned i = 0; i < params_.leaf_array; ++i) {
    if (slots[i] == 0) continue;
    Visit(LeafAt(slots[i]));  // read once more below, in the same cache lines
    diff |= LeafAt(slots[i])->key ^ k;
  }
  PMINDEX_CHECK(diff != 0, "roart: splitting a leaf array that holds only key %llu",
                static_cast<unsigned long long>(k));
  const unsigned depth = static_cast<unsigned>(std::countl_zero(diff)) / 8;
  PMINDEX_CHECK(depth > MetaArg(parent[0]), "roart: leaf array keys differ above their parent");
  Result<uint64_t> leaf = NewLeaf(k, v);
  if (!leaf.ok()) return leaf.status();
  std::vector<uint64_t> made{leaf.value()};
  // Group the slots (and the new leaf's) by the byte at `depth`.
  std::array<std::vector<uint64_t>, 256> groups;
  for (unsigned i = 0; i < params_.leaf_array; ++i)
    if (slots[i] != 0) groups[KeyByte(LeafAt(slots[i])->key, depth)].push_back(slots[i]);
  groups[KeyByte(k, depth)].push_back(Slot(leaf.value(), k));
  std::vector<uint64_t> entries;
  for (unsigned b = 0; b < 256; ++b) {
    if (groups[b].empty()) continue;
    Result<uint64_t> a = NewLeafArray(groups[b]);
    if (!a.ok()) {
      Unmake(made);
      return a.status();
    }
    made.push_back(a.value());
    entries.push_back(Entry(a.value(), b, kLeafArray));
  }
  const unsigned type = TypeFor(static_cast<unsigned>(entries.size()));
  Result<uint64_t> n = NewInner(type, depth, k, entries);
  if (!n.ok()) {
    Unmake(made);
    return n.status();
  }
  // Everything new is flushed: one fence, then the parent's entry names
  // the new node (the commit). The old array is unreachable after it.
  pm::fence();
  pm::naw(es, Entry(n.value(), EntryByte(*es), type));
  env_.alloc->Retire(PPtr::Make(pool_id_, OffsetOf(la)));
  bytes_.Add(-static_cast<int64_t>(LaBytes()));
  splits_.Add(1);
  return Status::OK();
}

// Writers (insert, update, upsert, remove): optimistic lock coupling as in
// ROART. The descent reads each node's version before its entry and
// checks the parent's version again after reading the child's, so every
// node it reaches was linked when its version was read. It then locks
// only the nodes the change writes (the leaf array for a slot or a value;
// the inner node for an entry; the node's parent too when the node is
// replaced), each by upgrading the version the descent read: a node
// changed since, or held by another writer, restarts the attempt. So a
// locked node is still linked (whoever unlinks a node holds its lock and
// bumps its version) and still holds what the descent read. The PM writes
// under the locks are those of the single-threaded tree, in the same
// order: the crash story does not change.
//
// TryWrite is the descent; the step that changes the tree is one of
// WriteNewChild (no child for k's byte), WriteInArray (k's byte names a
// leaf array) and WriteOverPrefix (k leaves a child's compressed path).
std::optional<Status> Roart::TryWrite(Op op, Key k, Value v) {
  Held held(*this);
  // The descent's reads: blocks another writer retires meanwhile stay
  // allocated. Left as soon as the attempt holds its locks (a locked node
  // stays linked, and so do the leaves of a locked array), before its PM
  // writes: a locked instruction (the epoch's exit) after a flush would
  // wait for the write-back.
  std::optional<alloc::Allocator::EpochGuard> guard(std::in_place, *env_.alloc);
  WritePath p{};
  StartAtRoot(&p);
  for (;;) {
    p.b = KeyByte(k, MetaArg(Ld(p.node[0])));
    p.es = ChildSlot(p.node, p.b);
    p.e = p.es == nullptr ? 0 : LdAcq(*p.es);
    if (!Unchanged(p.node, p.vnode)) return std::nullopt;
    if (p.e == 0) return WriteNewChild(p, &held, &guard, op, k, v);
    if (EntryType(p.e) == kLeafArray) return WriteInArray(p, &held, &guard, op, k, v);
    uint64_t* child = At(EntryOffset(p.e));
    Visit(child);
    // The prefix bytes are written once, before e named the child (the
    // count byte, which may change, is masked off below).
    const uint64_t cprefix = Ld(child[1]);
    const uint64_t mismatch = (k ^ cprefix) & PrefixMask(MetaArg(Ld(child[0])));
    if (mismatch != 0) return WriteOverPrefix(p, cprefix, mismatch, &held, &guard, op, k, v);
    const uint64_t vchild = ReadVersion(child);
    if (!Unchanged(p.node, p.vnode)) return std::nullopt;  // child was node's child at vchild
    StepDown(&p, child, vchild);
  }
}

Result<uint64_t> Roart::NewOneLeafArray(Key k, Value v, std::vector<uint64_t>* made) {
  Result<uint64_t> leaf = NewLeaf(k, v);
  if (!leaf.ok()) return leaf.status();
  made->push_back(leaf.value());
  const uint64_t s = Slot(leaf.value(), k);
  Result<uint64_t> la = NewLeafArray({&s, 1});
  if (!la.ok()) {
    Unmake(*made);
    return la.status();
  }
  made->push_back(la.value());
  return la.value();
}

std::optional<Status> Roart::WriteNewChild(const WritePath& p, Held* held,
                                           std::optional<alloc::Allocator::EpochGuard>* guard,
                                           Op op, Key k, Value v) {
  // A new leaf in a new one-leaf array, named by a new entry of the node
  // (or of its copy one size up, if it is full: then its parent is
  // written too).
  if (op == Op::kUpdate) return Status::NotFound();
  // Full by the node's count as read at vnode, which the lock confirms.
  const unsigned type = MetaType(Ld(p.node[0]));
  const bool full = type != kN256 && ChildCount(p.node) >= Capacity(type);
  if (full && !held->Lock(p.parent, p.vparent)) return std::nullopt;
  if (!held->Lock(p.node, p.vnode) || !StillRoot(p.root, p.node)) return std::nullopt;
  guard->reset();  // the locks now keep what this attempt writes and reads
  std::vector<uint64_t> made;
  Result<uint64_t> la = NewOneLeafArray(k, v, &made);
  if (!la.ok()) return la.status();
  pm::fence();  // leaf and array durable before an entry names them
  Status st = AddChild(p.node, p.up, p.b, Entry(la.value(), p.b, kLeafArray));
  if (!st.ok()) {
    Unmake(made);
    return st;
  }
  size_.Add(1);
  return Status::OK();
}

std::optional<Status> Roart::WriteInArray(const WritePath& p, Held* held,
                                          std::optional<alloc::Allocator::EpochGuard>* guard, Op op,
                                          Key k, Value v) {
  uint64_t* la = At(EntryOffset(p.e));
  const uint64_t vla = ReadVersion(la);
  if (!Unchanged(p.node, p.vnode)) return std::nullopt;  // la was node's child at vla
  uint64_t* hit = FindInArray(la, k);
  const uint64_t used = Ld(la[1]) & full_mask_;
  if (!Unchanged(la, vla)) return std::nullopt;
  if (hit != nullptr) {  // k is there: its value is replaced in place
    if (op == Op::kInsert) return Status::AlreadyExists();
    if (!held->Lock(la, vla)) return std::nullopt;
    guard->reset();
    pm::naw(&LeafAt(*hit)->value, v);  // one word: old or new value
    return Status::OK();
  }
  if (op == Op::kUpdate) return Status::NotFound();
  const uint64_t free = ~used & full_mask_;
  if (free != 0) {  // a free slot: a new leaf, then the slot naming it
    if (!held->Lock(la, vla)) return std::nullopt;
    guard->reset();
    const unsigned i = static_cast<unsigned>(std::countr_zero(free));
    Result<uint64_t> leaf = NewLeaf(k, v);
    if (!leaf.ok()) return leaf.status();
    pm::fence();                                      // the leaf durable ...
    pm::naw(&Entries(la)[i], Slot(leaf.value(), k));  // ... before its slot (the commit)
    SetUsed(la, i, true);
    size_.Add(1);
    return Status::OK();
  }
  // A full array: split into a new inner node (the node's entry changes).
  if (!held->Lock(p.node, p.vnode) || !held->Lock(la, vla) || !StillRoot(p.root, p.node))
    return std::nullopt;
  guard->reset();
  PMINDEX_RETURN_IF_ERROR(SplitArray(p.node, p.es, k, v));
  size_.Add(1);
  return Status::OK();
}

std::optional<Status> Roart::WriteOverPrefix(const WritePath& p, uint64_t cprefix,
                                             uint64_t mismatch, Held* held,
                                             std::optional<alloc::Allocator::EpochGuard>* guard,
                                             Op op, Key k, Value v) {
  // A new N4 at the first differing byte over the child and a new leaf
  // array holding k; the node's entry for the child then names the N4.
  if (op == Op::kUpdate) return Status::NotFound();
  if (!held->Lock(p.node, p.vnode) || !StillRoot(p.root, p.node)) return std::nullopt;
  guard->reset();
  const unsigned depth = static_cast<unsigned>(std::countl_zero(mismatch)) / 8;
  std::vector<uint64_t> made;
  Result<uint64_t> la = NewOneLeafArray(k, v, &made);
  if (!la.ok()) return la.status();
  uint64_t two[2] = {Entry(EntryOffset(p.e), KeyByte(cprefix, depth), EntryType(p.e)),
                     Entry(la.value(), KeyByte(k, depth), kLeafArray)};
  Result<uint64_t> n = NewInner(kN4, depth, k, two);
  if (!n.ok()) {
    Unmake(made);
    return n.status();
  }
  pm::fence();
  pm::naw(p.es, Entry(n.value(), p.b, kN4));  // the commit
  size_.Add(1);
  return Status::OK();
}

Status Roart::Write(Op op, Key k, Value v) {
  for (;;) {
    std::optional<Status> st = TryWrite(op, k, v);
    if (st.has_value()) return *st;
  }
}

void Roart::ClearEntry(uint64_t* node, uint64_t* es, unsigned b) {
  AddCount(node, -1);
  pm::naw(es, uint64_t{0});
  if (MetaType(node[0]) == kN48) pm::store(&N48Index(node)[b], uint8_t{0});  // rebuilt at open
}

// What a remove's descent found: the leaf array holding the key, its
// parent inner node and that node's parent, each with the version the
// descent read (the locks taken later upgrade these versions).
struct Roart::RemovePath {
  uint64_t* root;
  uint64_t* parent;  // node's parent (nullptr if node is the root) ...
  uint64_t vparent;
  uint64_t* up;  // ... and node's entry in it
  uint64_t* node;
  uint64_t vnode;
  uint64_t* es;  // la's entry in node, for key byte b
  unsigned b;
  uint64_t* la;
  uint64_t vla;
  uint64_t* hit;  // the key's slot in la
  uint64_t used;  // la's bitmap
  bool RootOk(const Roart& t, const uint64_t* locked) const {
    return locked != root || t.Root() == root;
  }
};

std::optional<Status> Roart::TryRemove(Key k) {
  Held held(*this);
  std::optional<alloc::Allocator::EpochGuard> guard(std::in_place, *env_.alloc);  // as TryWrite's
  RemovePath p{};
  StartAtRoot(&p);
  for (;;) {
    p.b = KeyByte(k, MetaArg(Ld(p.node[0])));
    p.es = ChildSlot(p.node, p.b);
    const uint64_t e = p.es == nullptr ? 0 : LdAcq(*p.es);
    if (!Unchanged(p.node, p.vnode)) return std::nullopt;
    if (e == 0) return Status::NotFound();
    if (EntryType(e) == kLeafArray) {
      p.la = At(EntryOffset(e));
      break;
    }
    uint64_t* child = At(EntryOffset(e));
    Visit(child);
    if (((k ^ Ld(child[1])) & PrefixMask(MetaArg(Ld(child[0])))) != 0) return Status::NotFound();
    const uint64_t vchild = ReadVersion(child);
    if (!Unchanged(p.node, p.vnode)) return std::nullopt;
    StepDown(&p, child, vchild);
  }
  p.vla = ReadVersion(p.la);
  if (!Unchanged(p.node, p.vnode)) return std::nullopt;
  p.hit = FindInArray(p.la, k);
  p.used = Ld(p.la[1]) & full_mask_;
  const uint64_t slot = p.hit == nullptr ? 0 : Ld(*p.hit);
  if (!Unchanged(p.la, p.vla)) return std::nullopt;
  if (p.hit == nullptr) return Status::NotFound();
  const unsigned left = static_cast<unsigned>(std::popcount(p.used)) - 1;  // leaves after
  std::optional<bool> merged = false;
  if (left <= MergeAt()) merged = TryMerge(p, &held, &guard);
  if (!merged.has_value()) return std::nullopt;
  if (*merged) {
    // node, its arrays and the leaf left the tree with the parent's entry
  } else if (left > 0) {
    if (!held.Lock(p.la, p.vla)) return std::nullopt;
    guard.reset();
    pm::naw(p.hit, uint64_t{0});  // the commit
    SetUsed(p.la, static_cast<unsigned>(p.hit - Entries(p.la)), false);
  } else if (!RemoveLastLeaf(p, &held, &guard)) {
    return std::nullopt;
  }
  env_.alloc->Retire(PPtr::Make(pool_id_, slot & kOffsetMask));
  bytes_.Add(-static_cast<int64_t>(kLeafBytes));
  size_.Add(-1);
  return Status::OK();
}

// The array's last leaf: the array goes with it, in one write. False:
// restart (a lock was not had).
bool Roart::RemoveLastLeaf(const RemovePath& p, Held* held,
                           std::optional<alloc::Allocator::EpochGuard>* guard) {
  // others: how many other children the node has, by its count; rest:
  // those children, read only when a shrink or a collapse needs them
  // (both read at vnode, which the locks below confirm). At the root
  // neither is needed.
  std::array<uint64_t, 256> rest;
  const unsigned type = MetaType(Ld(p.node[0]));
  const unsigned children = p.node == p.root ? 0 : ChildCount(p.node);
  unsigned others = children == 0 ? 0 : children - 1;
  if (p.node != p.root && others <= std::max(1u, ShrinkAt(type))) {
    others = 0;
    const uint64_t* all = Entries(p.node);
    for (unsigned i = 0; i < Capacity(type); ++i) {
      const uint64_t x = Ld(all[i]);
      if (x != 0 && &all[i] != p.es) rest[others++] = x;
    }
  }
  bool shrunk = false;
  if (p.node != p.root && others >= 2 && others <= ShrinkAt(type)) {
    // Few children left: the parent's entry takes a copy of the node one
    // type smaller without this entry (ART's shrinking).
    if (!held->Lock(p.parent, p.vparent) || !held->Lock(p.node, p.vnode) ||
        !held->Lock(p.la, p.vla) || !p.RootOk(*this, p.parent))
      return false;
    guard->reset();
    const unsigned smaller = TypeFor(others);
    Result<uint64_t> n = NewInner(smaller, MetaArg(p.node[0]), p.node[1], {rest.data(), others});
    if (n.ok()) {   // out of space: the entry is cleared in place instead
      pm::fence();  // the copy durable before the parent names it
      pm::naw(p.up, Entry(n.value(), EntryByte(*p.up), smaller));  // the commit
      env_.alloc->Retire(PPtr::Make(pool_id_, OffsetOf(p.node)));
      bytes_.Add(-static_cast<int64_t>(InnerBytes(type)));
      shrinks_.Add(1);
      shrunk = true;
    }
  }
  if (shrunk) {
    // node, array and leaf left the tree with the parent's entry
  } else if (p.node == p.root || others >= 2) {
    if (!held->Lock(p.node, p.vnode) || !held->Lock(p.la, p.vla) || !p.RootOk(*this, p.node))
      return false;
    guard->reset();
    ClearEntry(p.node, p.es, p.b);
  } else {
    // Two children: the grandparent's entry takes the other child
    // (self-describing: its own depth and prefix, or a leaf array), which
    // drops this node from the tree (path compression kept).
    if (!held->Lock(p.parent, p.vparent) || !held->Lock(p.node, p.vnode) ||
        !held->Lock(p.la, p.vla) || !p.RootOk(*this, p.parent))
      return false;
    guard->reset();
    const uint64_t keep =
        others == 0 ? 0 : Entry(EntryOffset(rest[0]), EntryByte(*p.up), EntryType(rest[0]));
    if (keep == 0) AddCount(p.parent, -1);
    pm::naw(p.up, keep);
    env_.alloc->Retire(PPtr::Make(pool_id_, OffsetOf(p.node)));
    bytes_.Add(-static_cast<int64_t>(InnerBytes(type)));
    collapses_.Add(1);
  }
  env_.alloc->Retire(PPtr::Make(pool_id_, OffsetOf(p.la)));
  bytes_.Add(-static_cast<int64_t>(LaBytes()));
  return true;
}

// The merge (the inverse of a split): node's children are all leaf
// arrays and hold at most MergeAt() leaves once the key is gone, so one
// new array of them all (the key's slot left out) replaces node in its
// parent's entry. The root and N256 nodes (at least 37 children unless a
// shrink found no space) are never merged.
std::optional<bool> Roart::TryMerge(const RemovePath& p, Held* held,
                                    std::optional<alloc::Allocator::EpochGuard>* guard) {
  if (p.node == p.root) return false;
  const unsigned type = MetaType(Ld(p.node[0]));
  if (type == kN256) return false;
  // Every other child holds a leaf at least (a linked leaf array is never
  // empty), so the node's count alone rules most nodes out without a read
  // of its arrays. Read at vnode, as the siblings below.
  const unsigned left = static_cast<unsigned>(std::popcount(p.used)) - 1;
  const unsigned children = ChildCount(p.node);
  if (children < 2 || left + children - 1 > MergeAt()) return false;
  // The siblings and their versions, read before any lock is taken (a
  // reader's version waits for a writer, which must not wait for us).
  std::array<uint64_t*, 64> arrays;
  std::array<uint64_t, 64> versions;
  unsigned n = 0, total = 0;
  const uint64_t* es = Entries(p.node);
  for (unsigned i = 0; i < Capacity(type); ++i) {
    const uint64_t x = LdAcq(es[i]);
    if (x == 0 || &es[i] == p.es) continue;
    if (EntryType(x) != kLeafArray || n == MergeAt()) return false;
    uint64_t* c = At(EntryOffset(x));
    Visit(c);
    versions[n] = ReadVersion(c);
    total += static_cast<unsigned>(std::popcount(Ld(c[1]) & full_mask_));
    arrays[n++] = c;
    if (total > MergeAt()) return false;
  }
  total += static_cast<unsigned>(std::popcount(p.used)) - 1;
  // An array that empties with one sibling left: the collapse moves that
  // sibling up, without a copy.
  const bool emptied = std::popcount(p.used) == 1;
  if (n < (emptied ? 2u : 1u) || total > MergeAt()) return false;
  if (!Unchanged(p.node, p.vnode)) return std::nullopt;  // the entries were node's at vnode
  // Locked top-down; each lock confirms what was read at its version.
  if (!held->Lock(p.parent, p.vparent) || !held->Lock(p.node, p.vnode) ||
      !held->Lock(p.la, p.vla) || !p.RootOk(*this, p.parent))
    return std::nullopt;
  for (unsigned i = 0; i < n; ++i)
    if (!held->Lock(arrays[i], versions[i])) return std::nullopt;
  guard->reset();
  std::vector<uint64_t> slots;
  arrays[n++] = p.la;
  for (unsigned i = 0; i < n; ++i) {
    const uint64_t* s = Entries(arrays[i]);
    for (uint64_t u = Ld(arrays[i][1]) & full_mask_; u != 0; u &= u - 1) {
      const unsigned j = static_cast<unsigned>(std::countr_zero(u));
      if (&s[j] != p.hit && s[j] != 0) slots.push_back(s[j]);
    }
  }
  // The new array and the slots it copies are durable before the parent's
  // entry names it (the commit, which also removes the key); out of space,
  // the key is removed without a merge.
  Result<uint64_t> merged = NewLeafArray(slots);
  if (!merged.ok()) return false;
  pm::fence();
  pm::naw(p.up, Entry(merged.value(), EntryByte(*p.up), kLeafArray));
  env_.alloc->Retire(PPtr::Make(pool_id_, OffsetOf(p.node)));
  for (unsigned i = 0; i < n; ++i) env_.alloc->Retire(PPtr::Make(pool_id_, OffsetOf(arrays[i])));
  bytes_.Add(-static_cast<int64_t>(InnerBytes(type) + n * LaBytes()));
  merges_.Add(1);
  return true;
}

Status Roart::remove(Key k) {
  for (;;) {
    std::optional<Status> st = TryRemove(k);
    if (st.has_value()) return *st;
  }
}

// Lookups validate each node's version after reading it and restart if it
// changed. They do not recheck the parent: a node unlinked after its
// entry was read is frozen (its unlinker held its lock and bumped it, and
// a writer upgrades only a version read while the node was linked), so
// the one path a lookup follows shows the key as it was at some moment of
// the operation. Scans recheck (ScanNode). Epochs keep unlinked blocks
// allocated.
bool Roart::TryLookup(Key k, std::optional<Value>* out) const {
  uint64_t* node = Root();
  uint64_t v = ReadVersion(node);
  for (;;) {
    Visit(node);
    pm::ModelRead(node, 16);  // the header: type, depth and prefix
    const uint64_t* es = ChildSlot(node, KeyByte(k, MetaArg(Ld(node[0]))));
    if (es != nullptr) pm::ModelRead(es, 8);
    const uint64_t e = es == nullptr ? 0 : LdAcq(*es);
    if (!Unchanged(node, v)) return false;
    if (e == 0) {
      *out = std::nullopt;
      return true;
    }
    if (EntryType(e) == kLeafArray) {
      uint64_t* la = At(EntryOffset(e));
      const uint64_t vla = ReadVersion(la);
      const uint64_t* hit = FindInArray(la, k);
      const Value val = hit == nullptr ? 0 : Ld(LeafAt(Ld(*hit))->value);
      if (!Unchanged(la, vla)) return false;
      *out = hit == nullptr ? std::nullopt : std::optional<Value>(val);
      return true;
    }
    uint64_t* child = At(EntryOffset(e));
    if (((k ^ Ld(child[1])) & PrefixMask(MetaArg(Ld(child[0])))) != 0) {
      *out = std::nullopt;
      return true;
    }
    v = ReadVersion(child);
    node = child;
  }
}

std::optional<Value> Roart::lookup(Key k) {
  alloc::Allocator::EpochGuard guard(*env_.alloc);
  std::optional<Value> out;
  while (!TryLookup(k, &out)) {
  }
  return out;
}

template <typename Fn>
void Roart::ForEachEntryFrom(uint64_t* node, unsigned first, uint64_t* buf, Fn fn) const {
  const unsigned type = MetaType(Ld(node[0]));
  const uint64_t* es = Entries(node);
  if (type == kN256 || type == kN48) {
    const uint8_t* idx = type == kN48 ? N48Index(node) : nullptr;
    // The entry of byte b, 0 if none.
    const auto at = [&](unsigned b) -> uint64_t {
      if (idx == nullptr) return LdAcq(es[b]);
      const unsigned s = sync::OlcLoad(idx[b]);
      return s == 0 || s > 48 ? 0 : LdAcq(es[s - 1]);
    };
    // One entry of look-ahead: the next child's lines are asked for while
    // fn works on this one (a scan's misses are one child after another).
    unsigned b = first;
    uint64_t e = 0;
    while (b < 256 && (e = at(b++)) == 0) {
    }
    while (e != 0) {
      uint64_t next = 0;
      while (b < 256 && (next = at(b++)) == 0) {
      }
      if (next != 0) PrefetchChild(next);
      if (!fn(e)) return;
      e = next;
    }
    return;
  }
  unsigned n = 0;
  for (unsigned i = 0; i < Capacity(type); ++i) {
    const uint64_t e = LdAcq(es[i]);
    if (e != 0 && EntryByte(e) >= first) buf[n++] = e;
  }
  std::sort(buf, buf + n, [](uint64_t a, uint64_t b) { return EntryByte(a) < EntryByte(b); });
  for (unsigned i = 0; i < n; ++i) {
    if (!fn(buf[i])) return;
  }
}

bool Roart::ScanNode(uint64_t* node, uint64_t v, Key from, size_t n, KV* out, size_t* got) const {
  Visit(node);
  const unsigned depth = MetaArg(Ld(node[0]));
  const uint64_t prefix = Ld(node[1]) & PrefixMask(depth);
  // Where in this node keys >= from begin: entries below from's byte hold
  // only smaller keys when from shares the node's prefix; a node whose
  // prefix is below from's holds none (checked against v below).
  const uint64_t from_prefix = from & PrefixMask(depth);
  if (from_prefix > prefix) return Unchanged(node, v);
  const unsigned first = from_prefix == prefix ? KeyByte(from, depth) : 0;
  const auto by_key = [](const KV& a, const KV& b) { return a.key < b.key; };
  uint64_t buf[16];
  bool ok = true;
  ForEachEntryFrom(node, first, buf, [&](uint64_t e) {
    uint64_t* c = At(EntryOffset(e));
    const uint64_t vc = ReadVersion(c);
    // Coupling, unlike lookups: each entry is used only if this node is
    // unchanged since v after it was read (a node unlinked meanwhile may
    // have a live child whose key range grew: a collapse moves a leaf array
    // up), and the child from then on only at the version read here.
    if (!Unchanged(node, v)) return ok = false;
    if (EntryType(e) != kLeafArray) {
      if (!ScanNode(c, vc, from, n, out, got)) return ok = false;
      return *got < n;
    }
    Visit(c);
    // The array's leaves at or above `from`, sorted, kept only if the
    // array did not change meanwhile: in place in out when they fit (the
    // common case), else through a buffer.
    const uint64_t used = Ld(c[1]) & full_mask_;
    // Each leaf is its own block, so a scan's cost is a cache miss per
    // pair: ask for all of the array's leaves before reading the first.
    for (uint64_t u = used; u != 0; u &= u - 1) {
      const uint64_t slot = LdAcq(Entries(c)[std::countr_zero(u)]);
      if (slot != 0) __builtin_prefetch(LeafAt(slot));
    }
    const auto collect = [&](KV* dst) {
      size_t m = 0;
      for (uint64_t u = used; u != 0; u &= u - 1) {
        const uint64_t slot = LdAcq(Entries(c)[std::countr_zero(u)]);
        if (slot == 0) continue;
        const Leaf* l = LeafAt(slot);
        Visit(l);
        const Key key = Ld(l->key);
        if (key >= from) dst[m++] = KV{key, Ld(l->value)};
      }
      return m;
    };
    if (static_cast<size_t>(std::popcount(used)) <= n - *got) {
      const size_t m = collect(out + *got);
      if (!Unchanged(c, vc)) return ok = false;
      std::sort(out + *got, out + *got + m, by_key);
      *got += m;
      return *got < n;
    }
    KV tmp[64];  // KV's members have initializers: 1 KiB of stores, only here
    const size_t m = collect(tmp);
    if (!Unchanged(c, vc)) return ok = false;
    std::sort(tmp, tmp + m, by_key);
    for (size_t j = 0; j < m && *got < n; ++j) out[(*got)++] = tmp[j];
    return *got < n;
  });
  return ok && Unchanged(node, v);
}

size_t Roart::scan(Key from, size_t n, KV* out) {
  if (n == 0) return 0;
  alloc::Allocator::EpochGuard guard(*env_.alloc);
  size_t got = 0;
  for (;;) {
    uint64_t* root = Root();
    if (ScanNode(root, ReadVersion(root), from, n, out, &got)) return got;
    // A node changed under the reads: go on after the last pair kept
    // (each leaf array's pairs are kept whole or not at all).
    if (got == 0) continue;
    if (out[got - 1].key == UINT64_MAX) return got;
    from = out[got - 1].key + 1;
  }
}

Result<uint64_t> Roart::Build(std::span<const KV> kv, unsigned parent_depth, size_t cap,
                              std::vector<uint64_t>* made) {
  if (kv.size() <= cap) {
    std::vector<uint64_t> slots;
    for (const KV& p : kv) {
      Result<uint64_t> leaf = NewLeaf(p.key, p.value);
      if (!leaf.ok()) return leaf.status();
      made->push_back(leaf.value());
      slots.push_back(Slot(leaf.value(), p.key));
    }
    Result<uint64_t> la = NewLeafArray(slots);
    if (!la.ok()) return la.status();
    made->push_back(la.value());
    return Entry(la.value(), 0, kLeafArray);
  }
  const uint64_t diff = kv.front().key ^ kv.back().key;  // sorted: the widest difference
  const unsigned depth = static_cast<unsigned>(std::countl_zero(diff)) / 8;
  PMINDEX_CHECK(depth > parent_depth, "roart: bulk keys differ above their parent");
  std::vector<uint64_t> entries;
  for (size_t i = 0; i < kv.size();) {
    const unsigned b = KeyByte(kv[i].key, depth);
    size_t j = i + 1;
    while (j < kv.size() && KeyByte(kv[j].key, depth) == b) ++j;
    Result<uint64_t> c = Build(kv.subspan(i, j - i), depth, cap, made);
    if (!c.ok()) return c.status();
    entries.push_back(c.value() | (uint64_t{b} << 48));
    i = j;
  }
  const unsigned type = TypeFor(static_cast<unsigned>(entries.size()));
  Result<uint64_t> n = NewInner(type, depth, kv.front().key, entries);
  if (!n.ok()) return n.status();
  made->push_back(n.value());
  return Entry(n.value(), 0, type);
}

Status Roart::bulk_load(std::span<const KV> sorted, double fill) {
  alloc::Allocator::EpochGuard guard(*env_.alloc);
  // The root's lock, held to the end: no writer adds a child to the old
  // root meanwhile, and its version bump sends readers of it to the new.
  uint64_t* old = Root();
  for (;;) {
    LockOf(old).WriteLock();
    if (Root() == old) break;
    LockOf(old).WriteUnlock();  // another bulk_load swapped it first
    old = Root();
  }
  struct Unlock {
    sync::VersionLock& lock;
    ~Unlock() { lock.WriteUnlock(); }
  } unlock{LockOf(old)};
  for (unsigned b = 0; b < 256; ++b)
    if (Entries(old)[b] != 0)
      return Status::InvalidArgument("roart: bulk_load needs an empty index");
  PMINDEX_RETURN_IF_ERROR(sorted_node::CheckBulkInput(kKind, sorted, fill));
  if (sorted.empty()) return Status::OK();
  // A new root and every node below it, written and flushed while nothing
  // reaches them; one fence, then root slot 0 names the new root.
  const size_t cap = std::max<size_t>(1, static_cast<size_t>(params_.leaf_array * fill));
  std::vector<uint64_t> made, entries;
  for (size_t i = 0; i < sorted.size();) {
    const unsigned b = KeyByte(sorted[i].key, 0);
    size_t j = i + 1;
    while (j < sorted.size() && KeyByte(sorted[j].key, 0) == b) ++j;
    Result<uint64_t> c = Build(sorted.subspan(i, j - i), 0, cap, &made);
    if (!c.ok()) {
      Unmake(made);
      return c.status();
    }
    entries.push_back(c.value() | (uint64_t{b} << 48));
    i = j;
  }
  Result<uint64_t> r = NewInner(kN256, 0, 0, entries);
  if (!r.ok()) {
    Unmake(made);
    return r.status();
  }
  pm::fence();
  env_.pool->WriteRoot(0, Raw(r.value()));
  root_.store(At(r.value()), std::memory_order_release);
  env_.alloc->Retire(PPtr::Make(pool_id_, OffsetOf(old)));
  bytes_.Add(-static_cast<int64_t>(InnerBytes(kN256)));
  size_.Add(static_cast<int64_t>(sorted.size()));
  return Status::OK();
}

// ----------------------------------------------------------------- walk

Status Roart::WalkArray(uint64_t* la, uint64_t raw, const uint64_t* parent, unsigned b, Walked* w,
                        common::ContentSum* content) const {
  auto where = [raw] { return "roart: leaf array " + std::to_string(raw); };
  if (la[0] != Meta(kLeafArray, params_.leaf_array))
    return Status::Corruption(where() + " has no leaf array header of " +
                              std::to_string(params_.leaf_array) + " slots");
  const unsigned pd = MetaArg(parent[0]);
  uint64_t bitmap = 0;
  for (unsigned i = 0; i < params_.leaf_array; ++i)
    if (Entries(la)[i] != 0) bitmap |= uint64_t{1} << i;
  if (bitmap != la[1]) {
    if (w->strict) return Status::Corruption(where() + ": bitmap disagrees with the slots");
    w->stale_bitmaps.push_back(la);
  }
  w->blocks.push_back(raw);
  const size_t first_leaf = w->blocks.size();
  std::array<KV, 64> kv;
  size_t m = 0;
  for (unsigned i = 0; i < params_.leaf_array; ++i) {
    const uint64_t s = Entries(la)[i];
    if (s == 0) continue;
    const uint64_t lraw = Raw(s & kOffsetMask);
    if (w->shape_only) {
      w->blocks.push_back(lraw);
      ++m;
      continue;
    }
    auto d = pm::Decode<Leaf>(*env_.pool, lraw, kLeafBytes, 64, "roart: leaf");
    if (!d.ok()) return d.status();
    const Leaf* l = d.value();
    if (l->meta != Meta(kLeaf, 0))
      return Status::Corruption("roart: leaf " + std::to_string(lraw) + " has no leaf header");
    if (((l->key ^ parent[1]) & PrefixMask(pd)) != 0 || KeyByte(l->key, pd) != b)
      return Status::Corruption("roart: key " + std::to_string(l->key) + " of leaf " +
                                std::to_string(lraw) + " does not belong under " + where());
    if (SlotFingerprint(s) != Fingerprint(l->key))
      return Status::Corruption(where() + ": slot " + std::to_string(i) +
                                " has a wrong fingerprint");
    w->blocks.push_back(lraw);
    kv[m++] = KV{l->key, l->value};
  }
  if (m == 0) return Status::Corruption(where() + " is empty");
  if (w->shape_only) m = 0;  // nothing to order or sum
  std::sort(kv.begin(), kv.begin() + m, [](const KV& a, const KV& c) { return a.key < c.key; });
  for (size_t i = 0; i < m; ++i) {
    if (w->have_last && kv[i].key <= w->last)
      return Status::Corruption(where() + ": key " + std::to_string(kv[i].key) +
                                " is not above the keys before it (a leaf reached twice?)");
    w->have_last = true;
    w->last = kv[i].key;
    if (content != nullptr) content->Add(kv[i].key, kv[i].value);
  }
  const uint64_t used = w->shape_only ? w->blocks.size() - first_leaf : m;
  w->count += used;
  w->slots_used += used;
  w->bytes += LaBytes() + used * kLeafBytes;
  ++w->nodes[kLeafArray - 1];
  return Status::OK();
}

Status Roart::WalkInner(uint64_t* node, uint64_t raw, uint32_t level, Walked* w,
                        common::ContentSum* content, bool strict) const {
  auto where = [raw] { return "roart: inner node " + std::to_string(raw); };
  const unsigned type = MetaType(node[0]);
  const unsigned depth = MetaArg(node[0]);
  const unsigned cap = Capacity(type);
  uint64_t* es = Entries(node);
  // Every byte at most once, and in an N256 at its own index; children
  // visited in byte order (the keys' order).
  std::array<uint64_t, 256> by_byte{};
  unsigned children = 0;
  for (unsigned i = 0; i < cap; ++i) {
    const uint64_t e = es[i];
    if (e == 0) continue;
    const unsigned b = EntryByte(e);
    if ((type == kN256 && b != i) || by_byte[b] != 0)
      return Status::Corruption(where() + ": entry " + std::to_string(i) +
                                " repeats or misplaces byte " + std::to_string(b));
    if (EntryType(e) < kN4 || EntryType(e) > kLeafArray)
      return Status::Corruption(where() + ": entry " + std::to_string(i) + " has child type " +
                                std::to_string(EntryType(e)));
    by_byte[b] = e;
    ++children;
  }
  if (type == kN48) {
    const uint8_t* idx = N48Index(node);
    for (unsigned b = 0; b < 256; ++b) {
      const bool ok = by_byte[b] == 0 ? idx[b] == 0
                                      : idx[b] >= 1 && idx[b] <= 48 && es[idx[b] - 1] == by_byte[b];
      if (ok) continue;
      if (strict)
        return Status::Corruption(where() + ": N48 child index of byte " + std::to_string(b) +
                                  " disagrees with the entries");
      w->stale_n48.push_back(node);
      break;
    }
  }
  if ((node[1] & kCountMask) != (children & kCountMask)) {
    if (strict)
      return Status::Corruption(where() + ": child count " + std::to_string(node[1] & kCountMask) +
                                " disagrees with the entries (" + std::to_string(children) + ")");
    w->stale_counts.push_back(node);
  }
  if (level > 0 && children < 2)
    return Status::Corruption(where() + " has " + std::to_string(children) +
                              " children (an inner node below the root has at least 2)");
  w->blocks.push_back(raw);
  w->bytes += InnerBytes(type);
  ++w->nodes[type - 1];
  w->height = std::max(w->height, level + 3);
  for (unsigned b = 0; b < 256; ++b) {
    const uint64_t e = by_byte[b];
    if (e == 0) continue;
    const unsigned ct = EntryType(e);
    const uint64_t craw = Raw(EntryOffset(e));
    const size_t bytes = ct == kLeafArray ? LaBytes() : InnerBytes(ct);
    auto d = pm::Decode<uint64_t>(*env_.pool, craw, bytes, 64, "roart: child");
    if (!d.ok()) return d.status();
    uint64_t* c = d.value();
    if (ct == kLeafArray) {
      PMINDEX_RETURN_IF_ERROR(WalkArray(c, craw, node, b, w, content));
      continue;
    }
    const unsigned cd = MetaArg(c[0]);
    if (!MetaMagicOk(c[0]) || MetaType(c[0]) != ct || cd <= depth || cd > 7 ||
        (c[1] & ~PrefixMask(cd) & ~kCountMask) != 0 ||
        ((c[1] ^ node[1]) & PrefixMask(depth)) != 0 || KeyByte(c[1], depth) != b)
      return Status::Corruption("roart: inner node " + std::to_string(craw) +
                                " has a header that does not fit its parent " +
                                std::to_string(raw) + " (type, depth or prefix)");
    PMINDEX_RETURN_IF_ERROR(WalkInner(c, craw, level + 1, w, content, strict));
  }
  return Status::OK();
}

Status Roart::Walk(uint64_t root_raw, Walked* w, common::ContentSum* content, bool strict) const {
  w->strict = strict;
  auto r = pm::Decode<uint64_t>(*env_.pool, root_raw, InnerBytes(kN256), 64,
                                "roart: root (root slot 0)");
  if (!r.ok()) return r.status();
  uint64_t* root = r.value();
  if (root[0] != Meta(kN256, 0) || (root[1] & ~kCountMask) != 0)
    return Status::Corruption("roart: root slot 0 does not name an N256 root of depth 0");
  return WalkInner(root, root_raw, 0, w, content, strict);
}

Result<std::unique_ptr<Index>> Roart::Create(const IndexEnv& env, const Params& p) {
  std::unique_ptr<Roart> t(new Roart(env, p));
  Result<uint64_t> r = t->NewInner(kN256, 0, 0, {});
  if (!r.ok()) return r.status();
  pm::fence();  // durable before root slot 0 names it
  env.pool->WriteRoot(0, t->Raw(r.value()));
  t->root_.store(t->At(r.value()));
  t->ready_ = true;
  return std::unique_ptr<Index>(std::move(t));
}

Result<std::unique_ptr<Index>> Roart::Open(const IndexEnv& env, const Params& p) {
  std::unique_ptr<Roart> t(new Roart(env, p));
  const uint64_t root_raw = env.pool->root(0);
  Walked w;
  common::ContentSum content(env);  // visits the pairs too (IndexEnv::pairs)
  PMINDEX_RETURN_IF_ERROR(t->Walk(root_raw, &w, &content, /*strict=*/false));  // reads only
  PMINDEX_RETURN_IF_ERROR(common::CheckContentRecord(*env.pool, env.salvage, content, kKind));
  PMINDEX_RETURN_IF_ERROR(sorted_node::AdoptNodes(env, w.blocks, kKind));
  // The repairs: N48 child indexes, which the write paths store without
  // persisting, are rebuilt from the entries (the persisted truth) ...
  for (uint64_t* n : w.stale_n48) {
    uint8_t* idx = N48Index(n);
    std::array<uint8_t, 256> want{};
    for (unsigned i = 0; i < 48; ++i)
      if (Entries(n)[i] != 0) want[EntryByte(Entries(n)[i])] = static_cast<uint8_t>(i + 1);
    for (unsigned b = 0; b < 256; ++b)
      if (idx[b] != want[b]) pm::store(&idx[b], want[b]);
    // pmcrash-redundant: an index lost again by a crash is rebuilt again by
    // the next open; the persist only spares that open the rewrite.
    pm::persist(idx, 256);
  }
  // And leaf arrays' bitmaps, stored without persisting as well.
  for (uint64_t* la : w.stale_bitmaps) {
    uint64_t bitmap = 0;
    for (unsigned i = 0; i < p.leaf_array; ++i)
      if (Entries(la)[i] != 0) bitmap |= uint64_t{1} << i;
    pm::store(&la[1], bitmap);
    // pmcrash-redundant: a bitmap lost again by a crash is rebuilt again
    // by the next open, from the slots.
    pm::persist(&la[1], 8);
  }
  // And inner nodes' child counts, stored without persisting too.
  for (uint64_t* n : w.stale_counts) {
    unsigned children = 0;
    for (unsigned i = 0; i < Capacity(MetaType(n[0])); ++i) children += Entries(n)[i] != 0;
    pm::store(&n[1], (n[1] & ~kCountMask) | (children & kCountMask));
    // pmcrash-redundant: a count lost again by a crash is rebuilt again by
    // the next open, from the entries.
    pm::persist(&n[1], 8);
  }
  t->root_.store(t->At(PPtr(root_raw).offset()));
  t->size_.Set(w.count);
  t->bytes_.Set(w.bytes);
  t->ready_ = true;
  return std::unique_ptr<Index>(std::move(t));
}

Status Roart::close() {
  if (closed_ || !ready_ || abandoned()) return Status::OK();
  closed_ = true;
  common::ContentSum content;
  Walked w;
  IgnoreError(Walk(Raw(OffsetOf(Root())), &w, &content, false),
              "the tree was valid at open and only this index wrote it since");
  common::WriteContentRecord(*env_.pool, content);
  return Status::OK();
}

Status Roart::verify() {
  Walked w;
  PMINDEX_RETURN_IF_ERROR(Walk(Raw(OffsetOf(Root())), &w, nullptr, /*strict=*/true));
  if (w.count != size_.Sum())
    return Status::Corruption("roart: " + std::to_string(w.count) + " leaves reached, " +
                              std::to_string(size_.Sum()) + " counted");
  if (w.bytes != bytes_.Sum())
    return Status::Corruption("roart: " + std::to_string(w.bytes) + " bytes reached, " +
                              std::to_string(bytes_.Sum()) + " counted");
  return Status::OK();
}

IndexStats Roart::stats() {
  Walked w;
  w.shape_only = true;
  IndexStats s;
  if (!Walk(Raw(OffsetOf(Root())), &w, nullptr, false).ok()) return s;
  s.entries = size_.Sum();
  s.height = s.entries == 0 ? 0 : w.height;
  s.inner_nodes = w.nodes[0] + w.nodes[1] + w.nodes[2] + w.nodes[3];
  s.leaves = w.nodes[kLeafArray - 1];
  s.pm_bytes = bytes_.Sum();
  s.extra.emplace_back("n4", static_cast<double>(w.nodes[0]));
  s.extra.emplace_back("n16", static_cast<double>(w.nodes[1]));
  s.extra.emplace_back("n48", static_cast<double>(w.nodes[2]));
  s.extra.emplace_back("n256", static_cast<double>(w.nodes[3]));
  s.extra.emplace_back("leaf_arrays", static_cast<double>(w.nodes[4]));
  s.extra.emplace_back("leaf_array_fill",
                       w.nodes[4] == 0 ? 0.0
                                       : static_cast<double>(w.slots_used) /
                                             static_cast<double>(w.nodes[4] * params_.leaf_array));
  s.extra.emplace_back("splits", static_cast<double>(splits_.Sum()));
  s.extra.emplace_back("grows", static_cast<double>(grows_.Sum()));
  s.extra.emplace_back("collapses", static_cast<double>(collapses_.Sum()));
  s.extra.emplace_back("shrinks", static_cast<double>(shrinks_.Sum()));
  s.extra.emplace_back("merges", static_cast<double>(merges_.Sum()));
  return s;
}

Status Roart::for_each_block(const std::function<void(PPtr)>& fn) {
  Walked w;
  w.shape_only = true;
  PMINDEX_RETURN_IF_ERROR(Walk(Raw(OffsetOf(Root())), &w, nullptr, false));
  for (uint64_t b : w.blocks) fn(PPtr(b));
  return Status::OK();
}

}  // namespace

PMINDEX_REGISTER_INDEX(
    roart,
    {
        .name = "roart",
        .persistent = true,
        .options_help = std::string(kOptionsHelp),
        .validate = [](const Options& o) -> Status { return ParseParams(o).status(); },
        .create = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<Params> p = ParseParams(o);
          if (!p.ok()) return p.status();
          return Roart::Create(env, p.value());
        },
        .open = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<Params> p = ParseParams(o);
          if (!p.ok()) return p.status();
          return Roart::Open(env, p.value());
        },
        .marks_in_use = true,
        // Blocks of five sizes (leaves and N4, N16, N48, N256, leaf
        // arrays): a workload can retire every block of one size (every
        // N16 grew into an N48), and the retired or freed blocks that sit
        // in a thread's allocator cache or epoch list at close keep their
        // page owned with nothing reachable on it: up to a page per size.
        .unreachable_after_clean = 5,
        .unreachable_per_writer = 8,  // a split's leaf, arrays and node, on new pages
        .reads_see_only_durable = true,
    });

}  // namespace pmindex::roart
