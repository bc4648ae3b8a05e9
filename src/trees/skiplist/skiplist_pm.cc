// skiplist-pm: paper 000's nvm-skiplist (section 4.3, Fig. 9): the whole
// skip list in PM, every tower's key, value and next pointers of all its
// levels, the design the divided skip list is measured against.
//
// Persistence: a tower is written and persisted while nothing points to
// it; an insert then links it level by level from the bottom up, each link
// one NVM atomic write (NAW), the bottom one committing the insert; a
// delete unlinks it level by level from the top down, each unlink a NAW,
// the bottom one committing the delete. A crash thus leaves every tower
// linked on a prefix of its levels (0 .. j-1, j >= 1), and all towers but
// the one in flight linked on all of them. Recovery checks exactly that
// (read-only), and lowers the height of the one partly linked tower, if
// any, to the levels it is linked on (one NAW). More than one partly
// linked tower, a level naming a tower the level below does not hold, or
// a tower linked above its height, is a persist the code lost: Corruption.
// Layout and persist points: docs/layout/skiplist-pm.md.
#include <memory>
#include <string>
#include <vector>

#include "alloc/allocator.h"
#include "common/content_record.h"
#include "index/index.h"
#include "index/registry.h"
#include "pm/persist.h"
#include "pm/pptr_decode.h"
#include "sync/mutex.h"
#include "trees/skiplist/skiplist_common.h"
#include "trees/skiplist/skiplist_persist.h"
#include "util/check.h"

namespace pmindex::skiplist {
namespace {

constexpr std::string_view kKind = "skiplist-pm";
constexpr uint64_t kHeadTag = 0x444145484d504b53;  // "SKPMHEAD"
constexpr uint64_t kNodeTag = 0x45444f4e4d504b53;  // "SKPMNODE"
constexpr uint64_t kHeightSeed = 0x9e3779b97f4a7c15;

// A tower: this header, then `height` next pointers (PPtr raw, 0 at a
// level's end), in a block of a multiple of 64 bytes (towers of up to 4
// levels take one line). The head is a tower of `levels` levels with tag
// kHeadTag and key and value 0.
struct Tower {
  uint64_t tag;
  uint64_t height;
  Key key;
  Value value;
};
static_assert(sizeof(Tower) == 32);

inline uint64_t* Next(Tower* x) { return reinterpret_cast<uint64_t*>(x + 1); }
inline size_t TowerBytes(uint64_t height) { return (sizeof(Tower) + 8 * height + 63) / 64 * 64; }

class PmSkipList final : public Index {
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
  // What the read-only walk found.
  struct Walked {
    std::vector<uint64_t> blocks;  // the head, then the towers in key order
    uint64_t count = 0;
    uint64_t bytes = 0;
    Tower* partial = nullptr;  // the tower linked on fewer levels than its height
    uint32_t partial_linked = 0;
  };

  PmSkipList(const IndexEnv& env, const Params& p)
      : env_(env), params_(p), heights_(p, kHeightSeed) {}

  Tower* T(uint64_t raw) const { return env_.pool->to_ptr<Tower>(PPtr(raw)); }
  // The last tower whose key is below k on every level (preds[i], i <
  // levels; the head if none); returns preds[0].
  // With kCount, adds the towers whose key it read to *visits (stats()).
  template <bool kCount = false>
  Tower* Seek(Key k, Tower** preds, uint64_t* visits = nullptr) const {
    Tower* x = head_;
    for (uint32_t i = params_.levels; i-- > 0;) {
      for (uint64_t n = Next(x)[i]; n != 0; n = Next(x)[i]) {
        Tower* t = T(n);
        pm::ModelRead(t, sizeof(Tower) + 8 * (i + 1));  // the key and next[i]
        if constexpr (kCount) ++*visits;
        if (t->key >= k) break;
        x = t;
      }
      if (preds != nullptr) preds[i] = x;
    }
    return x;
  }
  Status Write(Op op, Key k, Value v);
  // Reads only: the head at head_raw and every level (see the top of the
  // file). Pairs go to *content when given.
  Status Walk(uint64_t head_raw, Walked* w, common::ContentSum* content) const;

  IndexEnv env_;
  Params params_;
  uint64_t head_raw_ = 0;
  Tower* head_ = nullptr;
  // Readers share mu_, writers hold it alone; it guards the PM list too.
  mutable sync::SharedMutex mu_;
  HeightGen heights_ PMINDEX_GUARDED_BY(mu_);
  uint64_t size_ PMINDEX_GUARDED_BY(mu_) = 0;
  uint64_t bytes_ PMINDEX_GUARDED_BY(mu_) = 0;  // PM bytes of the towers and the head
  bool ready_ = false;
  bool closed_ = false;
};

Result<std::unique_ptr<Index>> PmSkipList::Create(const IndexEnv& env, const Params& p) {
  std::unique_ptr<PmSkipList> t(new PmSkipList(env, p));
  const size_t bytes = TowerBytes(p.levels);
  Result<PPtr> h = env.alloc->Alloc(bytes);
  if (!h.ok()) return h.status();
  t->head_raw_ = h.value().raw();
  t->head_ = t->T(t->head_raw_);
  pm::store(&t->head_->tag, kHeadTag);
  pm::store(&t->head_->height, uint64_t{p.levels});
  pm::store(&t->head_->key, Key{0});
  pm::store(&t->head_->value, Value{0});
  for (uint32_t i = 0; i < p.levels; ++i) pm::store(&Next(t->head_)[i], uint64_t{0});
  pm::persist(t->head_, sizeof(Tower) + 8 * p.levels);  // durable before root slot 0 names it
  env.pool->WriteRoot(0, t->head_raw_);
  {
    sync::WriterLock g(t->mu_);  // uncontended: the tree is not shared yet
    t->bytes_ = bytes;
  }
  t->ready_ = true;
  return std::unique_ptr<Index>(std::move(t));
}

Status PmSkipList::Write(Op op, Key k, Value v) {
  sync::WriterLock g(mu_);
  Tower* preds[kMaxLevels];
  Seek(k, preds);
  const uint64_t succ = Next(preds[0])[0];
  if (succ != 0 && T(succ)->key == k) {
    if (op == Op::kInsert) return Status::AlreadyExists();
    pm::naw(&T(succ)->value, v);  // one 8-byte word: old or new value
    return Status::OK();
  }
  if (op == Op::kUpdate) return Status::NotFound();
  const uint32_t h = heights_.Next();
  const size_t bytes = TowerBytes(h);
  Result<PPtr> a = env_.alloc->Alloc(bytes);
  if (!a.ok()) return a.status();  // nothing changed
  const uint64_t raw = a.value().raw();
  Tower* x = T(raw);
  pm::store(&x->tag, kNodeTag);
  pm::store(&x->height, uint64_t{h});
  pm::store(&x->key, k);
  pm::store(&x->value, v);
  for (uint32_t i = 0; i < h; ++i) pm::store(&Next(x)[i], Next(preds[i])[i]);
  // The tower durable while nothing points to it ...
  pm::persist(x, sizeof(Tower) + 8 * h);
  // ... then the bottom link commits the insert ...
  pm::naw(&Next(preds[0])[0], raw);
  // ... and each upper level follows, bottom up, one NAW each, so that a
  // crash leaves the tower linked on a prefix of its levels.
  for (uint32_t i = 1; i < h; ++i) pm::naw(&Next(preds[i])[i], raw);
  ++size_;
  bytes_ += bytes;
  return Status::OK();
}

Status PmSkipList::remove(Key k) {
  sync::WriterLock g(mu_);
  Tower* preds[kMaxLevels];
  Seek(k, preds);
  const uint64_t victim = Next(preds[0])[0];
  if (victim == 0 || T(victim)->key != k) return Status::NotFound();
  Tower* x = T(victim);
  const uint32_t h = static_cast<uint32_t>(x->height);
  // Top down, one NAW per level; the bottom one commits the delete, and a
  // crash before it leaves the tower linked on a prefix of its levels.
  for (uint32_t i = h; i-- > 1;) {
    PMINDEX_CHECK(Next(preds[i])[i] == victim, "skiplist-pm: key %llu not linked on level %u",
                  static_cast<unsigned long long>(k), i);
    pm::naw(&Next(preds[i])[i], Next(x)[i]);
  }
  pm::naw(&Next(preds[0])[0], Next(x)[0]);
  env_.alloc->Retire(PPtr(victim));
  --size_;
  bytes_ -= TowerBytes(h);
  return Status::OK();
}

std::optional<Value> PmSkipList::lookup(Key k) {
  sync::ReaderLock g(mu_);
  const uint64_t n = Next(Seek(k, nullptr))[0];
  if (n == 0) return std::nullopt;
  const Tower* x = T(n);
  if (x->key != k) return std::nullopt;
  return x->value;
}

size_t PmSkipList::scan(Key from, size_t n, KV* out) {
  sync::ReaderLock g(mu_);
  size_t got = 0;
  for (uint64_t r = Next(Seek(from, nullptr))[0]; r != 0 && got < n; r = Next(T(r))[0])
    out[got++] = KV{T(r)->key, T(r)->value};
  return got;
}

Status PmSkipList::bulk_load(std::span<const KV> sorted, double fill) {
  sync::WriterLock g(mu_);
  if (Next(head_)[0] != 0)
    return Status::InvalidArgument("skiplist-pm: bulk_load needs an empty index");
  PMINDEX_RETURN_IF_ERROR(CheckBulkInput(kKind, sorted, fill));
  if (sorted.empty()) return Status::OK();
  // A new head and every tower, built and flushed while nothing reaches
  // them; one fence, then root slot 0 names the new head (the commit).
  std::vector<uint64_t> made;
  made.reserve(sorted.size() + 1);
  std::vector<uint8_t> hs(sorted.size());
  uint64_t bytes = TowerBytes(params_.levels);
  for (size_t i = 0; i <= sorted.size(); ++i) {
    size_t b = TowerBytes(params_.levels);
    if (i > 0) {
      hs[i - 1] = static_cast<uint8_t>(heights_.Next());
      b = TowerBytes(hs[i - 1]);
      bytes += b;
    }
    Result<PPtr> a = env_.alloc->Alloc(b);
    if (!a.ok()) {
      for (uint64_t m : made) env_.alloc->Free(PPtr(m));
      return a.status();
    }
    made.push_back(a.value().raw());
  }
  Tower* head = T(made[0]);
  pm::store(&head->tag, kHeadTag);
  pm::store(&head->height, uint64_t{params_.levels});
  pm::store(&head->key, Key{0});
  pm::store(&head->value, Value{0});
  Tower* last[kMaxLevels];
  for (uint32_t i = 0; i < params_.levels; ++i) last[i] = head;
  for (size_t j = 0; j < sorted.size(); ++j) {
    Tower* x = T(made[j + 1]);
    pm::store(&x->tag, kNodeTag);
    pm::store(&x->height, uint64_t{hs[j]});
    pm::store(&x->key, sorted[j].key);
    pm::store(&x->value, sorted[j].value);
    for (uint32_t i = 0; i < hs[j]; ++i) {
      pm::store(&Next(last[i])[i], made[j + 1]);
      if (last[i] != head && i + 1 == last[i]->height)
        pm::flush(last[i], sizeof(Tower) + 8 * last[i]->height);
      last[i] = x;
    }
  }
  for (uint32_t i = 0; i < params_.levels; ++i) {
    pm::store(&Next(last[i])[i], uint64_t{0});
    if (last[i] != head && i + 1 == last[i]->height)
      pm::flush(last[i], sizeof(Tower) + 8 * last[i]->height);
  }
  pm::flush(head, sizeof(Tower) + 8 * params_.levels);
  pm::fence();
  const uint64_t old = head_raw_;
  env_.pool->WriteRoot(0, made[0]);
  head_raw_ = made[0];
  head_ = head;
  env_.alloc->Free(PPtr(old));  // unreachable now; the exclusive lock keeps readers out
  size_ = sorted.size();
  bytes_ = bytes;
  return Status::OK();
}

Status PmSkipList::Walk(uint64_t head_raw, Walked* w, common::ContentSum* content) const {
  const uint32_t levels = params_.levels;
  auto hd = pm::Decode<Tower>(*env_.pool, head_raw, TowerBytes(levels), 64,
                              "skiplist-pm: head (root slot 0)");
  if (!hd.ok()) return hd.status();
  Tower* head = hd.value();
  if (head->tag != kHeadTag || head->height != levels)
    return Status::Corruption("skiplist-pm: root slot 0 does not name a head of " +
                              std::to_string(levels) + " levels");
  w->blocks.assign(1, head_raw);
  w->bytes = TowerBytes(levels);
  std::vector<Tower*> towers;                     // in key order, as blocks[1..]
  const uint64_t limit = env_.pool->size() / 64;  // more towers than fit: a cycle
  for (uint64_t r = Next(head)[0]; r != 0;) {
    auto d = pm::Decode<Tower>(*env_.pool, r, 64, 64, "skiplist-pm: tower");
    if (!d.ok()) return d.status();
    Tower* x = d.value();
    auto where = [r] { return "skiplist-pm: tower " + std::to_string(r); };
    if (x->tag != kNodeTag) return Status::Corruption(where() + " has no tower tag");
    if (x->height < 1 || x->height > levels)
      return Status::Corruption(where() + " has height " + std::to_string(x->height));
    if (TowerBytes(x->height) > 64) {
      auto full = pm::Decode<Tower>(*env_.pool, r, TowerBytes(x->height), 64, "skiplist-pm: tower");
      if (!full.ok()) return full.status();
    }
    if (!towers.empty() && x->key <= towers.back()->key)
      return Status::Corruption(where() + ": keys not ascending (key " + std::to_string(x->key) +
                                " after " + std::to_string(towers.back()->key) + ")");
    if (towers.size() >= limit) return Status::Corruption("skiplist-pm: level 0 has a cycle");
    towers.push_back(x);
    w->blocks.push_back(r);
    w->bytes += TowerBytes(x->height);
    if (content != nullptr) content->Add(x->key, x->value);
    r = Next(x)[0];
  }
  w->count = towers.size();
  // Level i must be a subsequence of level i-1, and name only towers
  // taller than i. linked[t]: the levels tower t is linked on (a prefix).
  std::vector<uint8_t> linked(towers.size(), 1);
  std::vector<uint32_t> below(towers.size()), cur;
  for (uint32_t t = 0; t < towers.size(); ++t) below[t] = t;
  for (uint32_t i = 1; i < levels; ++i) {
    cur.clear();
    size_t j = 0;
    for (uint64_t r = Next(head)[i]; r != 0;) {
      while (j < below.size() && w->blocks[below[j] + 1] != r) ++j;
      if (j == below.size())
        return Status::Corruption("skiplist-pm: level " + std::to_string(i) + " names " +
                                  std::to_string(r) + ", which level " + std::to_string(i - 1) +
                                  " does not hold (or not in order)");
      const uint32_t t = below[j++];
      if (towers[t]->height <= i)
        return Status::Corruption("skiplist-pm: tower " + std::to_string(r) + " of height " +
                                  std::to_string(towers[t]->height) + " is linked on level " +
                                  std::to_string(i));
      linked[t] = static_cast<uint8_t>(i + 1);
      cur.push_back(t);
      r = Next(towers[t])[i];
    }
    below.swap(cur);
    if (below.empty()) break;
  }
  for (uint32_t t = 0; t < towers.size(); ++t) {
    if (linked[t] == towers[t]->height) continue;
    if (w->partial != nullptr)
      return Status::Corruption(
          "skiplist-pm: towers " + std::to_string(w->blocks[t + 1]) + " and another are " +
          "linked on fewer levels than their height (at most one write is in flight)");
    w->partial = towers[t];
    w->partial_linked = linked[t];
  }
  return Status::OK();
}

Result<std::unique_ptr<Index>> PmSkipList::Open(const IndexEnv& env, const Params& p) {
  std::unique_ptr<PmSkipList> t(new PmSkipList(env, p));
  t->head_raw_ = env.pool->root(0);
  Walked w;
  common::ContentSum content(env);  // visits the pairs too (IndexEnv::pairs)
  PMINDEX_RETURN_IF_ERROR(t->Walk(t->head_raw_, &w, &content));  // reads only
  PMINDEX_RETURN_IF_ERROR(
      common::CheckContentRecord(*env.pool, env.salvage, content, "skiplist-pm"));
  PMINDEX_RETURN_IF_ERROR(AdoptBlocks(env, w.blocks, kKind));
  t->head_ = t->T(t->head_raw_);
  if (w.partial != nullptr) {
    // An insert or delete cut short between its bottom link and its last
    // upper one: the tower keeps the levels it is linked on. Its pointers
    // above them are never read again.
    pm::naw(&w.partial->height, uint64_t{w.partial_linked});
  }
  {
    sync::WriterLock g(t->mu_);  // uncontended: the tree is not shared yet
    t->size_ = w.count;
    t->bytes_ = w.bytes;
  }
  t->ready_ = true;
  return std::unique_ptr<Index>(std::move(t));
}

Status PmSkipList::close() {
  if (closed_ || !ready_ || abandoned()) return Status::OK();
  closed_ = true;
  sync::WriterLock g(mu_);
  common::ContentSum content;
  for (uint64_t r = Next(head_)[0]; r != 0; r = Next(T(r))[0]) content.Add(T(r)->key, T(r)->value);
  common::WriteContentRecord(*env_.pool, content);
  return Status::OK();
}

Status PmSkipList::verify() {
  sync::ReaderLock g(mu_);
  Walked w;
  PMINDEX_RETURN_IF_ERROR(Walk(head_raw_, &w, nullptr));
  if (w.partial != nullptr)
    return Status::Corruption("skiplist-pm: a tower of key " + std::to_string(w.partial->key) +
                              " is linked on fewer levels than its height");
  if (w.count != size_)
    return Status::Corruption("skiplist-pm: " + std::to_string(w.count) + " towers linked, " +
                              std::to_string(size_) + " counted");
  return Status::OK();
}

IndexStats PmSkipList::stats() {
  sync::ReaderLock g(mu_);
  IndexStats s;
  s.entries = size_;
  uint32_t h = params_.levels;
  while (h > 0 && Next(head_)[h - 1] == 0) --h;
  s.height = h;
  s.leaves = size_;
  s.pm_bytes = bytes_;
  // What a search reads, on average over a fixed sample of random keys:
  // towers in PM (the first line of each).
  uint64_t visits = 0;
  for (int i = 0; i < kSearchSamples; ++i) Seek<true>(SampleKey(i), nullptr, &visits);
  s.extra.emplace_back("search_dram_nodes", 0.0);
  s.extra.emplace_back("search_pm_nodes", static_cast<double>(visits) / kSearchSamples);
  return s;
}

Status PmSkipList::for_each_block(const std::function<void(PPtr)>& fn) {
  sync::ReaderLock g(mu_);
  fn(PPtr(head_raw_));
  for (uint64_t r = Next(head_)[0]; r != 0; r = Next(T(r))[0]) fn(PPtr(r));
  return Status::OK();
}

}  // namespace

PMINDEX_REGISTER_INDEX(
    skiplist_pm,
    {
        .name = "skiplist-pm",
        .persistent = true,
        .options_help = std::string(kOptionsHelp) + " (every level in PM)",
        .validate = [](const Options& o) -> Status { return ParseParams(o).status(); },
        .create = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<Params> p = ParseParams(o);
          if (!p.ok()) return p.status();
          return PmSkipList::Create(env, p.value());
        },
        .open = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<Params> p = ParseParams(o);
          if (!p.ok()) return p.status();
          return PmSkipList::Open(env, p.value());
        },
        .marks_in_use = true,
    });

}  // namespace pmindex::skiplist
