// skiplist-divided: paper 000's divided skip list (section 4.3, Fig. 9).
// The bottom layer is an ordered singly linked list in PM; every element
// taller than one level also has an upper element, with one level fewer,
// in a skip list in DRAM, which points to its bottom element. Searches
// run through the DRAM levels and finish on the PM list. The DRAM levels
// are rebuilt from the bottom layer at every open.
//
// Persistence: each pointer change of the bottom layer is one NVM atomic
// write (NAW). An insert writes and persists the new element (one line:
// tag, key, value, next) while nothing points to it, then swings its
// predecessor's next pointer to it with a NAW; a delete swings the
// predecessor's next pointer past the element with a NAW. Every crash
// therefore leaves a well-formed sorted list, holding the in-flight
// operation entirely or not at all; an element allocated but not linked is
// unreachable and recovery's reclaim gives it back. Layout, persist points
// and recovery: docs/layout/skiplist-divided.md.
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

namespace pmindex::skiplist {
namespace {

constexpr std::string_view kKind = "skiplist-divided";
constexpr uint64_t kHeadTag = 0x444145484c444b53;  // "SKDLHEAD"
constexpr uint64_t kNodeTag = 0x45444f4e4c444b53;  // "SKDLNODE"
constexpr uint64_t kHeightSeed = 0x9e3779b97f4a7c15;

// A bottom element, and the list's head (tag kHeadTag, key and value 0),
// in one 64-byte block: the element's line is written whole before it is
// linked.
struct alignas(64) Bottom {
  uint64_t tag;
  Key key;
  Value value;
  uint64_t next;  // PPtr raw of the next element, 0 at the end
  uint64_t pad[4];
};
static_assert(sizeof(Bottom) == 64);

class Divided final : public Index {
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
  Divided(const IndexEnv& env, const Params& p)
      : env_(env), params_(p), upper_(p.levels - 1), heights_(p, kHeightSeed) {}

  Bottom* B(uint64_t raw) const { return env_.pool->to_ptr<Bottom>(PPtr(raw)); }
  // The last bottom element whose key is below k (the head if none); with
  // preds, the DRAM predecessors on every upper level too.
  // With kCount, adds the towers (DRAM) and elements (PM) whose key it
  // read to visits[0] and visits[1] (stats() only).
  template <bool kCount = false>
  Bottom* Seek(Key k, TowerList::Tower** preds, uint64_t* visits = nullptr) const
      PMINDEX_REQUIRES_SHARED(mu_) {
    const TowerList::Tower* t = upper_.FloorBelow<kCount>(k, preds, visits);
    Bottom* b = t == upper_.head() ? head_ : reinterpret_cast<Bottom*>(t->payload);
    pm::ModelRead(b, sizeof(Bottom));
    for (uint64_t n = b->next; n != 0; n = b->next) {
      Bottom* nb = B(n);
      pm::ModelRead(nb, sizeof(Bottom));
      if constexpr (kCount) ++visits[1];
      if (nb->key >= k) break;
      b = nb;
    }
    return b;
  }
  Status Write(Op op, Key k, Value v);
  // Rebuilds the DRAM levels from the bottom list.
  void Rebuild() PMINDEX_REQUIRES(mu_);
  // Read-only walk of the bottom list from the head: every element decoded
  // and tagged, keys strictly ascending. Adds each element to *blocks and
  // its pair to *content (either may be null).
  Status Walk(std::vector<uint64_t>* blocks, common::ContentSum* content, uint64_t* count) const;

  IndexEnv env_;
  Params params_;
  uint64_t head_raw_ = 0;
  Bottom* head_ = nullptr;
  // Readers share mu_, writers hold it alone; it guards the PM list too.
  mutable sync::SharedMutex mu_;
  // Levels 1 .. levels-1 of the skip list, as levels 0 .. levels-2.
  TowerList upper_ PMINDEX_GUARDED_BY(mu_);
  HeightGen heights_ PMINDEX_GUARDED_BY(mu_);
  uint64_t size_ PMINDEX_GUARDED_BY(mu_) = 0;
  bool ready_ = false;
  bool closed_ = false;
};

Result<std::unique_ptr<Index>> Divided::Create(const IndexEnv& env, const Params& p) {
  std::unique_ptr<Divided> t(new Divided(env, p));
  Result<PPtr> h = env.alloc->Alloc(sizeof(Bottom));
  if (!h.ok()) return h.status();
  t->head_raw_ = h.value().raw();
  t->head_ = t->B(t->head_raw_);
  pm::store(&t->head_->tag, kHeadTag);
  pm::store(&t->head_->key, Key{0});
  pm::store(&t->head_->value, Value{0});
  pm::store(&t->head_->next, uint64_t{0});
  for (uint64_t& w : t->head_->pad) pm::store(&w, uint64_t{0});
  pm::persist(t->head_, sizeof(Bottom));  // the empty head durable before root slot 0 names it
  env.pool->WriteRoot(0, t->head_raw_);
  t->ready_ = true;
  return std::unique_ptr<Index>(std::move(t));
}

Status Divided::Write(Op op, Key k, Value v) {
  sync::WriterLock g(mu_);
  TowerList::Tower* preds[kMaxLevels];
  Bottom* pred = Seek(k, preds);
  const uint64_t succ = pred->next;
  if (succ != 0 && B(succ)->key == k) {
    if (op == Op::kInsert) return Status::AlreadyExists();
    pm::naw(&B(succ)->value, v);  // one 8-byte word: old or new value
    return Status::OK();
  }
  if (op == Op::kUpdate) return Status::NotFound();
  Result<PPtr> a = env_.alloc->Alloc(sizeof(Bottom));
  if (!a.ok()) return a.status();  // nothing changed
  const uint64_t raw = a.value().raw();
  Bottom* x = B(raw);
  pm::store(&x->tag, kNodeTag);
  pm::store(&x->key, k);
  pm::store(&x->value, v);
  pm::store(&x->next, succ);
  // The new element durable while nothing points to it ...
  pm::persist(x, 4 * sizeof(uint64_t));
  // ... then the NAW that links it commits the insert.
  pm::naw(&pred->next, raw);
  const uint32_t h = heights_.Next();
  if (h > 1) upper_.Insert(preds, k, reinterpret_cast<uint64_t>(x), h - 1);
  ++size_;
  return Status::OK();
}

Status Divided::remove(Key k) {
  sync::WriterLock g(mu_);
  TowerList::Tower* preds[kMaxLevels];
  Bottom* pred = Seek(k, preds);
  const uint64_t victim = pred->next;
  if (victim == 0 || B(victim)->key != k) return Status::NotFound();
  if (upper_.levels() > 0) {
    TowerList::Tower* t = preds[0]->next()[0];
    if (t != nullptr && t->key == k)
      upper_.Remove(preds, t);  // DRAM first: nothing points to x then
  }
  // The NAW past the element commits the delete; after a crash the
  // element is unreachable and recovery's reclaim frees it.
  pm::naw(&pred->next, B(victim)->next);
  env_.alloc->Retire(PPtr(victim));
  --size_;
  return Status::OK();
}

std::optional<Value> Divided::lookup(Key k) {
  sync::ReaderLock g(mu_);
  const uint64_t n = Seek(k, nullptr)->next;
  if (n == 0) return std::nullopt;
  const Bottom* x = B(n);
  if (x->key != k) return std::nullopt;
  return x->value;
}

size_t Divided::scan(Key from, size_t n, KV* out) {
  sync::ReaderLock g(mu_);
  size_t got = 0;
  for (uint64_t r = Seek(from, nullptr)->next; r != 0 && got < n; r = B(r)->next)
    out[got++] = KV{B(r)->key, B(r)->value};
  return got;
}

Status Divided::bulk_load(std::span<const KV> sorted, double fill) {
  sync::WriterLock g(mu_);
  if (head_->next != 0)
    return Status::InvalidArgument("skiplist-divided: bulk_load needs an empty index");
  PMINDEX_RETURN_IF_ERROR(CheckBulkInput(kKind, sorted, fill));
  if (sorted.empty()) return Status::OK();
  std::vector<uint64_t> made;
  made.reserve(sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i) {
    Result<PPtr> a = env_.alloc->Alloc(sizeof(Bottom));
    if (!a.ok()) {
      for (uint64_t m : made) env_.alloc->Free(PPtr(m));
      return a.status();
    }
    made.push_back(a.value().raw());
  }
  // Every element written and flushed while the head does not reach it;
  // one fence, then the head's NAW publishes the whole list.
  for (size_t i = 0; i < sorted.size(); ++i) {
    Bottom* x = B(made[i]);
    pm::store(&x->tag, kNodeTag);
    pm::store(&x->key, sorted[i].key);
    pm::store(&x->value, sorted[i].value);
    pm::store(&x->next, i + 1 < sorted.size() ? made[i + 1] : uint64_t{0});
    pm::flush(x, 4 * sizeof(uint64_t));
  }
  pm::fence();
  pm::naw(&head_->next, made[0]);
  size_ = sorted.size();
  Rebuild();
  return Status::OK();
}

void Divided::Rebuild() {
  upper_.Clear();
  TowerList::Appender app(upper_);
  for (uint64_t r = head_->next; r != 0; r = B(r)->next) {
    const uint32_t h = heights_.Next();
    if (h > 1) app.Append(B(r)->key, reinterpret_cast<uint64_t>(B(r)), h - 1);
  }
}

Status Divided::Walk(std::vector<uint64_t>* blocks, common::ContentSum* content,
                     uint64_t* count) const {
  const uint64_t limit = env_.pool->size() / sizeof(Bottom);  // more elements than fit: a cycle
  uint64_t n = 0;
  bool first = true;
  Key prev = 0;
  for (uint64_t r = head_->next; r != 0;) {
    auto d =
        pm::Decode<Bottom>(*env_.pool, r, sizeof(Bottom), 64, "skiplist-divided: bottom element");
    if (!d.ok()) return d.status();
    const Bottom* x = d.value();
    if (x->tag != kNodeTag)
      return Status::Corruption("skiplist-divided: element " + std::to_string(r) +
                                " has no element tag");
    if (!first && x->key <= prev)
      return Status::Corruption("skiplist-divided: keys not ascending at element " +
                                std::to_string(r) + " (key " + std::to_string(x->key) + " after " +
                                std::to_string(prev) + ")");
    if (++n > limit) return Status::Corruption("skiplist-divided: the bottom list has a cycle");
    first = false;
    prev = x->key;
    if (blocks != nullptr) blocks->push_back(r);
    if (content != nullptr) content->Add(x->key, x->value);
    r = x->next;
  }
  *count = n;
  return Status::OK();
}

Result<std::unique_ptr<Index>> Divided::Open(const IndexEnv& env, const Params& p) {
  std::unique_ptr<Divided> t(new Divided(env, p));
  t->head_raw_ = env.pool->root(0);
  auto h = pm::Decode<Bottom>(*env.pool, t->head_raw_, sizeof(Bottom), 64,
                              "skiplist-divided: head (root slot 0)");
  if (!h.ok()) return h.status();
  t->head_ = h.value();
  if (t->head_->tag != kHeadTag)
    return Status::Corruption("skiplist-divided: root slot 0 does not name a head");
  std::vector<uint64_t> blocks{t->head_raw_};
  common::ContentSum content(env);  // visits the pairs too (IndexEnv::pairs)
  PMINDEX_RETURN_IF_ERROR(t->Walk(&blocks, &content, &t->size_));  // reads only
  PMINDEX_RETURN_IF_ERROR(
      common::CheckContentRecord(*env.pool, env.salvage, content, "skiplist-divided"));
  PMINDEX_RETURN_IF_ERROR(AdoptBlocks(env, blocks, kKind));
  // Nothing in PM to repair: every crash leaves a well-formed list.
  {
    sync::WriterLock g(t->mu_);  // uncontended: the tree is not shared yet
    t->Rebuild();
  }
  t->ready_ = true;
  return std::unique_ptr<Index>(std::move(t));
}

Status Divided::close() {
  if (closed_ || !ready_ || abandoned()) return Status::OK();
  closed_ = true;
  sync::WriterLock g(mu_);
  common::ContentSum content;
  for (uint64_t r = head_->next; r != 0; r = B(r)->next) content.Add(B(r)->key, B(r)->value);
  common::WriteContentRecord(*env_.pool, content);
  return Status::OK();
}

Status Divided::verify() {
  sync::ReaderLock g(mu_);
  if (head_->tag != kHeadTag) return Status::Corruption("skiplist-divided: the head lost its tag");
  uint64_t n = 0;
  PMINDEX_RETURN_IF_ERROR(Walk(nullptr, nullptr, &n));
  if (n != size_)
    return Status::Corruption("skiplist-divided: " + std::to_string(n) + " elements linked, " +
                              std::to_string(size_) + " counted");
  // Each upper element points to the bottom element of its key, and the
  // lowest upper level is a subsequence of the bottom list.
  uint64_t r = head_->next;
  return upper_.Verify(kKind, [&](const TowerList::Tower* t) -> Status {
    while (r != 0 && B(r)->key < t->key) r = B(r)->next;
    if (r == 0 || B(r)->key != t->key || reinterpret_cast<uint64_t>(B(r)) != t->payload)
      return Status::Corruption("skiplist-divided: the upper element of key " +
                                std::to_string(t->key) + " does not point to its bottom element");
    return Status::OK();
  });
}

IndexStats Divided::stats() {
  sync::ReaderLock g(mu_);
  IndexStats s;
  s.entries = size_;
  s.height = size_ == 0 ? 0 : upper_.used_levels() + 1;
  s.leaves = size_;
  s.inner_nodes = upper_.towers();
  s.pm_bytes = (size_ + 1) * sizeof(Bottom);
  s.dram_bytes = upper_.dram_bytes();
  // What a search reads, on average over a fixed sample of random keys:
  // towers in DRAM and elements in PM (each one cache line).
  uint64_t visits[2] = {0, 0};
  for (int i = 0; i < kSearchSamples; ++i) Seek<true>(SampleKey(i), nullptr, visits);
  s.extra.emplace_back("search_dram_nodes", static_cast<double>(visits[0]) / kSearchSamples);
  s.extra.emplace_back("search_pm_nodes", static_cast<double>(visits[1]) / kSearchSamples);
  return s;
}

Status Divided::for_each_block(const std::function<void(PPtr)>& fn) {
  sync::ReaderLock g(mu_);
  fn(PPtr(head_raw_));
  for (uint64_t r = head_->next; r != 0; r = B(r)->next) fn(PPtr(r));
  return Status::OK();
}

}  // namespace

PMINDEX_REGISTER_INDEX(
    skiplist_divided,
    {
        .name = "skiplist-divided",
        .persistent = true,
        .options_help = std::string(kOptionsHelp) +
                        " (the bottom level in PM, levels 2.. in DRAM, rebuilt at open)",
        .validate = [](const Options& o) -> Status { return ParseParams(o).status(); },
        .create = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<Params> p = ParseParams(o);
          if (!p.ok()) return p.status();
          return Divided::Create(env, p.value());
        },
        .open = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<Params> p = ParseParams(o);
          if (!p.ok()) return p.status();
          return Divided::Open(env, p.value());
        },
        .marks_in_use = true,
    });

}  // namespace pmindex::skiplist
