// kv::Store (store.h): reads, writes, transactions, reclamation. Recovery
// is in recovery.cc, the validating walk in walk.cc; docs/layout/kv.md
// gives the persist order of every operation below.
#include "kv/store.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "common/content_record.h"
#include "kv/walk.h"
#include "pm/persist.h"
#include "pm/pool_format.h"
#include "pm/pptr_decode.h"

namespace pmindex::kv {

namespace {

// Index pairs read per scan call.
constexpr size_t kBatch = 64;
// The commit timestamp of a version no reader may see (a transaction not
// committed).
constexpr uint64_t kNever = UINT64_MAX;

uint64_t Load(const uint64_t& w) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(w)).load(std::memory_order_acquire);
}

Status Damaged(std::string_view what, uint64_t raw) {
  return Status::Corruption("kv: " + std::string(what) + " " + HexWord(raw) + " does not fit the pool");
}

}  // namespace

// A reserved timestamp; published (in order) when it goes, whatever
// happened to the change that reserved it.
class Store::Ticket {
 public:
  Ticket(CommitClock* clock, uint64_t ts) : clock_(clock), ts_(ts) {}
  Ticket(Ticket&& o) noexcept : clock_(std::exchange(o.clock_, nullptr)), ts_(o.ts_) {}
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;
  Ticket& operator=(Ticket&&) = delete;
  ~Ticket() {
    if (clock_ != nullptr) clock_->Publish(ts_);
  }
  uint64_t ts() const { return ts_; }
  void Publish() {
    clock_->Publish(ts_);
    clock_ = nullptr;
  }

 private:
  CommitClock* clock_;
  uint64_t ts_;
};

Store::Store(Pool* pool, std::unique_ptr<Index> index, const StoreOptions& opts)
    : pool_(pool), index_(std::move(index)), alloc_(index_->allocator()), opts_(opts) {
  if (opts_.clock_chunk == 0) opts_.clock_chunk = 1;
  opts_.fanout = std::max<uint32_t>(opts_.fanout, 3);
}

Store::~Store() { IgnoreError(Close(), "a destructor has no caller to report to; Close() returns it"); }

Result<std::unique_ptr<Store>> Store::Create(Pool* pool, std::string_view kind, std::string_view options,
                                             const StoreOptions& opts) {
  if (pool == nullptr) return Status::InvalidArgument("kv: no pool given");
  if ((pool->incompat_flags() & pm::kIncompatKvStore) == 0)
    return Status::InvalidArgument("kv: the pool was not created for a key-value store");
  auto idx = create_index(kind, options, pool);
  if (!idx.ok()) return idx.status();
  std::unique_ptr<Store> s(new Store(pool, std::move(idx).value(), opts));
  s->clock_.Reset(1);
  // The clock's durable bound (root slot 5); non-zero also says the store
  // was created completely (docs/layout/kv.md "Create").
  const uint64_t r = 1 + s->opts_.clock_chunk;
  pool->WriteRoot(pm::kStoreSlot, r);
  s->reserved_.store(r, std::memory_order_release);
  return s;
}

Status Store::Close() {
  if (closed()) return Status::OK();
  DrainPurges(SIZE_MAX);
  closed_.store(true, std::memory_order_release);
  // The content record, before the index's close and the pool's clean flag
  // (a crash in between leaves the pool unclean: the record is not read).
  // Bound to root slot 5 as it is now; no writer runs, so it stays.
  // A walk that fails (damage met while the store was open) writes none:
  // the record of the last close no longer matches slot 5 and is ignored.
  Result<uint64_t> sum = ContentSumNow();
  if (sum.ok()) {
    const uint64_t rec = pm::StoreContentRecord(sum.value(), pool_->root(pm::kStoreSlot));
    if (pool_->root(pm::kStoreContentSlot) != rec) pool_->WriteRoot(pm::kStoreContentSlot, rec);
  }
  Status s = index_->close();
  index_.reset();  // its allocator goes with it
  alloc_ = nullptr;
  return s;
}

// ---------------------------------------------------------------- reading

template <class T>
T* Store::At(uint64_t raw, size_t bytes) const {
  if (pm::CheckPPtr(*pool_, raw, bytes, 64) != pm::PPtrFault::kOk) return nullptr;
  return pool_->to_ptr<T>(PPtr(raw));
}

namespace {
// The record at raw, its key included, or null.
template <class AtFn>
Record* RecordOf(AtFn at, uint64_t raw) {
  Record* r = at(raw, Record::kHeaderBytes);
  if (r == nullptr || r->tag != kRecordTag || r->key_len == 0 || r->key_len > kMaxKeyBytes) return nullptr;
  return at(raw, Record::Bytes(r->key_len));
}
}  // namespace

const Bucket* Store::BucketAt(uint64_t raw) const {
  const Bucket* b = At<const Bucket>(raw, Bucket::kHeaderBytes);
  if (b == nullptr || b->tag != kBucketTag || b->count == 0) return nullptr;
  return At<const Bucket>(raw, Bucket::Bytes(b->count));
}

const Directory* Store::DirectoryAt(uint64_t raw) const {
  const Directory* d = At<const Directory>(raw, Directory::kHeaderBytes);
  if (d == nullptr || d->tag != kDirectoryTag || d->count == 0 || d->level == 0 || d->level > kMaxLevel)
    return nullptr;
  return At<const Directory>(raw, Directory::Bytes(d->count));
}

Status Store::TreeNode(uint64_t raw, int want, const Directory** d, const Bucket** b) const {
  *d = nullptr;
  *b = nullptr;
  const uint16_t* tag = At<const uint16_t>(raw, 16);
  if (tag == nullptr) return Damaged("prefix tree node", raw);
  if (*tag == kDirectoryTag && want != 0) {
    *d = DirectoryAt(raw);
    if (*d == nullptr || (want > 0 && (*d)->level != want)) return Damaged("directory", raw);
    return Status::OK();
  }
  if (*tag != kBucketTag || want > 0)
    return Status::Corruption("kv: prefix tree node " + HexWord(raw) + " is not the bucket or directory expected");
  *b = BucketAt(raw);
  return *b == nullptr ? Damaged("bucket", raw) : Status::OK();
}

namespace {
uint64_t EntryRecord(const Bucket::Entry& e) { return e.record; }
uint64_t EntryRecord(const Directory::Entry& e) { return e.first; }
}  // namespace

template <class E>
Status Store::Rank(const E* e, uint32_t n, std::string_view key, uint64_t n8, bool or_equal, uint32_t* out) const {
  auto rec_at = [this](uint64_t raw, size_t bytes) { return At<Record>(raw, bytes); };
  // Binary search for the first entry above the key (or_equal) or at or
  // above it: next8 decides, the records decide its ties.
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    int c;
    if (e[mid].next8 != n8) {
      c = e[mid].next8 < n8 ? -1 : 1;
    } else {
      const Record* r = RecordOf(rec_at, EntryRecord(e[mid]));
      if (r == nullptr) return Damaged("record", EntryRecord(e[mid]));
      c = CompareKeys(r->key(), key);
    }
    if (c < 0 || (or_equal && c == 0)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  *out = lo;
  return Status::OK();
}

Status Store::Locate(std::string_view key, uint64_t prefix, Where* w) const {
  const std::optional<Value> v = index_->lookup(prefix);
  if (!v) return Status::OK();
  w->value = *v;
  auto rec_at = [this](uint64_t raw, size_t bytes) { return At<Record>(raw, bytes); };
  const uint16_t* tag = At<const uint16_t>(*v, 16);
  if (tag == nullptr) return Damaged("index value", *v);
  if (*tag == kRecordTag) {
    Record* r = RecordOf(rec_at, *v);
    if (r == nullptr) return Damaged("record", *v);
    if (r->key() == key) {
      w->rec = r;
      w->rec_raw = *v;
    } else {
      w->other = r;
      w->other_raw = *v;
    }
    return Status::OK();
  }
  // Down the prefix's tree: each directory's child whose smallest key is
  // the last at or below the key, to the bucket.
  const uint64_t n8 = Next8(key);
  uint64_t raw = *v;
  // Levels fall by one per step from at most kMaxLevel: the path fits.
  for (int want = -1;;) {
    const Directory* d;
    const Bucket* b;
    PMINDEX_RETURN_IF_ERROR(TreeNode(raw, want, &d, &b));
    if (d != nullptr) {
      uint32_t pos;
      PMINDEX_RETURN_IF_ERROR(Rank(d->entries(), d->count, key, n8, true, &pos));
      pos = pos == 0 ? 0 : pos - 1;
      w->path[w->depth++] = Step{raw, d, d->count, pos};
      raw = d->entries()[pos].child;
      want = d->level - 1;
      continue;
    }
    uint32_t pos;
    PMINDEX_RETURN_IF_ERROR(Rank(b->entries(), b->count, key, n8, false, &pos));
    w->path[w->depth++] = Step{raw, b, b->count, pos};
    if (pos < b->count && b->entries()[pos].next8 == n8) {
      const uint64_t rr = b->entries()[pos].record;
      Record* r = RecordOf(rec_at, rr);
      if (r == nullptr) return Damaged("record", rr);
      if (r->key() == key) {
        w->rec = r;
        w->rec_raw = rr;
      }
    }
    return Status::OK();
  }
}

template <class Fn>
Status Store::VisitRecords(uint64_t raw, int want, const std::string_view* from, Fn& fn, bool* stop) const {
  auto rec_at = [this](uint64_t r, size_t bytes) { return At<Record>(r, bytes); };
  const uint64_t n8 = from != nullptr ? Next8(*from) : 0;
  const Directory* d;
  const Bucket* b;
  PMINDEX_RETURN_IF_ERROR(TreeNode(raw, want, &d, &b));
  if (d != nullptr) {
    uint32_t i = 0;
    if (from != nullptr) {
      PMINDEX_RETURN_IF_ERROR(Rank(d->entries(), d->count, *from, n8, true, &i));
      i = i == 0 ? 0 : i - 1;
    }
    for (const uint32_t first = i; i < d->count && !*stop; ++i)
      PMINDEX_RETURN_IF_ERROR(VisitRecords(d->entries()[i].child, d->level - 1, i == first ? from : nullptr, fn, stop));
    return Status::OK();
  }
  uint32_t i = 0;
  if (from != nullptr) PMINDEX_RETURN_IF_ERROR(Rank(b->entries(), b->count, *from, n8, false, &i));
  for (; i < b->count; ++i) {
    const uint64_t rr = b->entries()[i].record;
    const Record* r = RecordOf(rec_at, rr);
    if (r == nullptr) return Damaged("record", rr);
    if (!fn(*r)) {
      *stop = true;
      break;
    }
  }
  return Status::OK();
}

uint64_t Store::CommitTsOf(const Version& v) const {
  const uint64_t stamp = Load(v.stamp);
  if (IsCommittedStamp(stamp)) return StampTs(stamp);
  const TxnRecord* t = At<const TxnRecord>(stamp, sizeof(TxnRecord));
  if (t == nullptr) return kNever;
  const uint64_t c = Load(t->commit);
  return c == 0 ? kNever : StampTs(c);
}

// The newest version of the chain at `head` committed at or before ts;
// *skipped: a newer one was passed over.
const Version* Store::VisibleAt(uint64_t head, uint64_t ts, bool* skipped) const {
  for (uint64_t raw = head; raw != 0;) {
    const Version* x = At<const Version>(raw, Version::kHeaderBytes);
    if (x == nullptr) return nullptr;
    if (CommitTsOf(*x) <= ts) return x;
    *skipped = true;
    raw = Load(x->older);
  }
  return nullptr;
}

Status Store::ValueView(const Version& v, std::string_view* out) const {
  if (v.separate()) {
    const char* p = At<const char>(v.value, v.len);
    if (p == nullptr) return Damaged("value block", v.value);
    *out = std::string_view(p, v.len);
    return Status::OK();
  }
  const uint64_t raw = pool_->to_pptr(&v).raw();
  if (At<const Version>(raw, Version::Bytes(v.len, v.tombstone())) == nullptr) return Damaged("version", raw);
  *out = std::string_view(v.inline_bytes(), v.len);
  return Status::OK();
}

Status Store::CopyValue(const Version& v, std::string* out) const {
  std::string_view view;
  PMINDEX_RETURN_IF_ERROR(ValueView(v, &view));
  out->assign(view);
  return Status::OK();
}

Result<VersionedValue> Store::Read(std::string_view key, bool want_value) const {
  const uint64_t prefix = Prefix(key);
  alloc::Allocator::EpochGuard g(*alloc_);
  for (;;) {
    // Linearizable without a registered snapshot: the newest version at or
    // below the visible timestamp s, loaded before the chain. Reclamation
    // may cut a chain only below a version at or below the writers' bound,
    // which is at or below the visible timestamp of their time: a reader
    // that meets a cut end after skipping only newer versions sees a
    // visible timestamp above s if it loads it again, and reads again.
    const uint64_t s = clock_.visible();
    Where w;
    PMINDEX_RETURN_IF_ERROR(Locate(key, prefix, &w));
    if (w.rec == nullptr) return Status::NotFound();
    bool skipped = false;
    const Version* v = VisibleAt(Load(w.rec->head), s, &skipped);
    if (v == nullptr) {
      if (skipped && clock_.visible() != s) continue;
      return Status::NotFound();
    }
    if (v->tombstone()) return Status::NotFound();
    VersionedValue out;
    out.version = CommitTsOf(*v);
    if (want_value) PMINDEX_RETURN_IF_ERROR(CopyValue(*v, &out.value));
    return out;
  }
}

Store::Snapshot Store::AcquireSnapshot() {
  Snapshot s;
  s.slot = snapshots_.Acquire(clock_, &s.ts);
  return s;
}

void Store::ReleaseSnapshot(Snapshot* s) {
  if (s->slot == nullptr) return;
  snapshots_.Release(s->slot);
  s->slot = nullptr;
  // Records whose removal waited for this snapshot.
  if (!closed() && purge_size_.load(std::memory_order_relaxed) != 0) DrainPurges(8);
}

Result<std::optional<std::string>> Store::ReadAt(std::string_view key, uint64_t ts) const {
  alloc::Allocator::EpochGuard g(*alloc_);
  Where w;
  PMINDEX_RETURN_IF_ERROR(Locate(key, Prefix(key), &w));
  if (w.rec == nullptr) return std::optional<std::string>();
  bool skipped = false;
  const Version* v = VisibleAt(Load(w.rec->head), ts, &skipped);
  if (v == nullptr || v->tombstone()) return std::optional<std::string>();
  std::string out;
  PMINDEX_RETURN_IF_ERROR(CopyValue(*v, &out));
  return std::optional<std::string>(std::move(out));
}

Status Store::ScanAt(uint64_t ts, std::string_view from, std::optional<std::string_view> to,
                     const PairFn& fn) const {
  const Key from_prefix = Prefix(from);
  Key next = from_prefix;
  const Key last = to ? Prefix(*to) : UINT64_MAX;
  auto rec_at = [this](uint64_t raw, size_t bytes) { return At<Record>(raw, bytes); };
  KV batch[kBatch];
  bool more = true, done = false;
  while (more) {
    alloc::Allocator::EpochGuard g(*alloc_);
    const size_t n = ScanBatch(*index_, &next, &more, kBatch, batch);
    for (size_t i = 0; i < n; ++i) {
      if (batch[i].key > last) return Status::OK();
      // The records under this prefix, in key order, from the first at or
      // above `from`.
      const uint64_t raw = batch[i].value;
      const uint16_t* tag = At<const uint16_t>(raw, 16);
      if (tag == nullptr) return Damaged("index value", raw);
      Status err;
      auto visit = [&](const Record& r) {
        const std::string_view key = r.key();
        if (CompareKeys(key, from) < 0) return true;
        if (to && CompareKeys(key, *to) >= 0) {
          done = true;
          return false;
        }
        bool skipped = false;
        const Version* v = VisibleAt(Load(r.head), ts, &skipped);
        if (v == nullptr || v->tombstone()) return true;
        std::string_view value;
        err = ValueView(*v, &value);
        if (!err.ok()) return false;
        if (!fn(key, value)) {
          done = true;
          return false;
        }
        return true;
      };
      if (*tag == kRecordTag) {
        const Record* r = RecordOf(rec_at, raw);
        if (r == nullptr) return Damaged("record", raw);
        visit(*r);
      } else {
        // Only the first prefix holds keys below `from`.
        const bool first = batch[i].key == from_prefix;
        bool stop = false;
        PMINDEX_RETURN_IF_ERROR(VisitRecords(raw, -1, first ? &from : nullptr, visit, &stop));
      }
      PMINDEX_RETURN_IF_ERROR(err);
      if (done) return Status::OK();
    }
  }
  return Status::OK();
}

// ---------------------------------------------------------------- clock

Store::Ticket Store::Reserve() {
  const uint64_t ts = clock_.Reserve();
  if (ts >= reserved_.load(std::memory_order_acquire)) [[unlikely]] ExtendReservation(ts);
  return Ticket(&clock_, ts);
}

void Store::ExtendReservation(uint64_t ts) {
  sync::MutexLock g(reserve_mu_);
  if (ts < reserved_.load(std::memory_order_acquire)) return;
  const uint64_t r = ts + opts_.clock_chunk;
  // Durable (WriteRoot fences) before any version carries a timestamp at
  // or above the old bound: recovery restarts the clock at this value, so
  // timestamps grow across restarts (PutIfVersion's versions stay unique).
  pool_->WriteRoot(pm::kStoreSlot, r);
  reserved_.store(r, std::memory_order_release);
}

// ---------------------------------------------------------------- writing

Result<Store::NewVersion> Store::AllocVersion(const std::string_view* value) {
  NewVersion nv;
  const bool tomb = value == nullptr;
  nv.len = tomb ? 0 : static_cast<uint32_t>(value->size());
  nv.flags = tomb ? Version::kTombstone : 0;
  if (!tomb && !Version::Inline(nv.len)) {
    auto vb = alloc_->Alloc(nv.len);
    if (!vb.ok()) return vb.status();
    nv.value = vb.value();
    nv.flags |= Version::kSeparate;
    char* p = pool_->to_ptr<char>(nv.value);
    pm::copy(p, value->data(), nv.len);
    // Durable by the fence before the version is linked.
    pm::flush(p, nv.len);
  }
  nv.bytes = Version::Bytes(nv.len, tomb);
  auto vr = alloc_->Alloc(nv.bytes);
  if (!vr.ok()) {
    if (nv.value) alloc_->Free(nv.value);
    return vr.status();
  }
  nv.ver = vr.value();
  nv.v = pool_->to_ptr<Version>(nv.ver);
  if (!tomb && Version::Inline(nv.len)) pm::copy(nv.v->inline_bytes(), value->data(), nv.len);
  return nv;
}

// Writes the version's header and flushes the version (the caller's fence
// makes it durable before the link).
void Store::SealVersion(const NewVersion& nv, uint64_t stamp, uint64_t older) {
  const Version h{kVersionTag, nv.flags, nv.len, stamp, older, nv.value.raw()};
  pm::copy(nv.v, &h, sizeof h);
  pm::flush(nv.v, nv.bytes);
}

void Store::FreeUnlinked(const NewVersion& nv) {
  alloc_->Free(nv.ver);
  if (nv.value) alloc_->Free(nv.value);
}

Result<PPtr> Store::AllocRecord(std::string_view key, uint64_t head) {
  const size_t bytes = Record::Bytes(key.size());
  auto r = alloc_->Alloc(bytes);
  if (!r.ok()) return r.status();
  Record* rec = pool_->to_ptr<Record>(r.value());
  const Record h{kRecordTag, 0, static_cast<uint32_t>(key.size()), head};
  pm::copy(rec, &h, sizeof h);
  pm::copy(rec->key_bytes(), key.data(), key.size());
  // Durable by the fence before the index (or a tree node) names it.
  pm::flush(rec, bytes);
  return r.value();
}

Result<Store::Slot> Store::AllocNode(int level, const Slot* s, size_t n, Reshaped* r) {
  const size_t bytes = level == 0 ? Bucket::Bytes(n) : Directory::Bytes(n);
  auto a = alloc_->Alloc(bytes);
  if (!a.ok()) return a.status();
  char* p = pool_->to_ptr<char>(a.value());
  if (level == 0) {
    Bucket* b = reinterpret_cast<Bucket*>(p);
    const Bucket h{kBucketTag, 0, static_cast<uint32_t>(n), 0};
    pm::copy(b, &h, sizeof h);
    for (size_t i = 0; i < n; ++i) {
      const Bucket::Entry e{s[i].next8, s[i].rec};
      pm::copy(&b->entries()[i], &e, sizeof e);
    }
  } else {
    Directory* d = reinterpret_cast<Directory*>(p);
    const Directory h{kDirectoryTag, static_cast<uint16_t>(level), static_cast<uint32_t>(n), 0};
    pm::copy(d, &h, sizeof h);
    for (size_t i = 0; i < n; ++i) {
      const Directory::Entry e{s[i].next8, s[i].rec, s[i].child};
      pm::copy(&d->entries()[i], &e, sizeof e);
    }
  }
  // The check word last, over the bytes just written (header and entries;
  // word 1, the check word, is still zero).
  static_assert(offsetof(Bucket, check) == offsetof(Directory, check));
  const uint64_t check = NodeCheck(p, bytes);
  pm::copy(p + offsetof(Bucket, check), &check, sizeof check);
  // Durable by the fence before the index's update names the tree.
  pm::flush(p, bytes);
  r->fresh.push_back(a.value().raw());
  return Slot{s[0].next8, s[0].rec, a.value().raw()};
}

Status Store::BuildLevel(int level, const std::vector<Slot>& s, bool append, bool split_ok, std::vector<Slot>* out,
                         Reshaped* r) {
  const size_t n = s.size(), f = opts_.fanout;
  size_t at = 0;
  if (n <= f || !split_ok) {
    if (n == 0) return Status::OK();
    auto node = AllocNode(level, s.data(), n, r);
    if (!node.ok()) return node.status();
    out->push_back(node.value());
    return Status::OK();
  }
  // Keys arriving in ascending order fill each node (the next key goes to
  // the last); otherwise the pieces are even.
  const size_t pieces = (n + f - 1) / f;
  for (size_t i = 0; i < pieces; ++i) {
    const size_t len = append ? std::min(f, n - at) : n / pieces + (i < n % pieces ? 1 : 0);
    auto node = AllocNode(level, s.data() + at, len, r);
    if (!node.ok()) return node.status();
    out->push_back(node.value());
    at += len;
  }
  return Status::OK();
}

Status Store::SlotsOf(uint64_t raw, int level, std::vector<Slot>* out) const {
  const Directory* d;
  const Bucket* b;
  PMINDEX_RETURN_IF_ERROR(TreeNode(raw, level, &d, &b));
  if (b != nullptr) {
    for (uint32_t i = 0; i < b->count; ++i) out->push_back(Slot{b->entries()[i].next8, b->entries()[i].record, 0});
    return Status::OK();
  }
  for (uint32_t i = 0; i < d->count; ++i) {
    const Directory::Entry& e = d->entries()[i];
    out->push_back(Slot{e.next8, e.first, e.child});
  }
  return Status::OK();
}

// A node the new tree leaves out: freed at once if this change made it,
// else retired once the change is linked.
void Store::DropNode(uint64_t raw, Reshaped* r) {
  if (r->fresh.Remove(raw)) {
    alloc_->Free(PPtr(raw));
  } else {
    r->old.push_back(raw);
  }
}

void Store::FreeFresh(Reshaped* r) {
  for (uint64_t raw : r->fresh) alloc_->Free(PPtr(raw));
  r->fresh.clear();
}

void Store::RetireOld(const Reshaped& r) {
  for (uint64_t raw : r.old) alloc_->Retire(PPtr(raw));
}

Status Store::Reshape(const Where& w, const Slot* add, bool append, Reshaped* r) {
  const size_t f = opts_.fanout;
  // Scratch lists whose capacity outlives the call (no allocation per
  // write once they have grown); Reshape does not nest.
  struct Scratch {
    std::vector<Slot> cur, next, sib, up;
  };
  static thread_local Scratch t;
  std::vector<Slot>& cur = t.cur;
  cur.clear();
  PMINDEX_RETURN_IF_ERROR(SlotsOf(w.leaf().raw, 0, &cur));
  if (add != nullptr) {
    cur.insert(cur.begin() + w.leaf().pos, *add);
  } else {
    cur.erase(cur.begin() + w.leaf().pos);
  }
  // Up from the bucket: cur holds the new entries of the node at path[d].
  uint32_t d = w.depth - 1;
  for (; d > 0; --d) {
    const int level = static_cast<int>(w.depth - 1 - d);
    r->old.push_back(w.path[d].raw);
    const Step& parent = w.path[d - 1];
    const Directory* pd = static_cast<const Directory*>(parent.node);
    uint32_t lo = parent.pos, hi = parent.pos + 1;
    // An underfull node takes in a neighbour it fits with.
    if (!cur.empty() && 2 * cur.size() < f && parent.count > 1) {
      const bool right = parent.pos + 1 < parent.count;
      const uint32_t j = right ? parent.pos + 1 : parent.pos - 1;
      std::vector<Slot>& sib = t.sib;
      sib.clear();
      PMINDEX_RETURN_IF_ERROR(SlotsOf(pd->entries()[j].child, level, &sib));
      if (cur.size() + sib.size() <= f) {
        cur.insert(right ? cur.end() : cur.begin(), sib.begin(), sib.end());
        lo = std::min(lo, j);
        hi = lo + 2;
        r->old.push_back(pd->entries()[j].child);
      }
    }
    std::vector<Slot>& up = t.up;
    up.clear();
    PMINDEX_RETURN_IF_ERROR(BuildLevel(level, cur, append, true, &up, r));
    // The parent's entries, with [lo, hi) replaced by the new nodes.
    std::vector<Slot>& next = t.next;
    next.clear();
    for (uint32_t i = 0; i < parent.count; ++i) {
      if (i == lo) next.insert(next.end(), up.begin(), up.end());
      if (i >= lo && i < hi) continue;
      const Directory::Entry& e = pd->entries()[i];
      next.push_back(Slot{e.next8, e.first, e.child});
    }
    cur.swap(next);
  }
  // The root's new entries.
  r->old.push_back(w.path[0].raw);
  return ReshapeRoot(cur, static_cast<int>(w.depth - 1), append, t.up, r);
}

Status Store::ReshapeRoot(std::vector<Slot>& cur, int level, bool append, std::vector<Slot>& up,
                          Reshaped* r) {
  if (cur.empty()) return Status::OK();  // no key left: the prefix goes
  if (cur.size() == 1) {
    // A root of one entry gives way to its child (a bucket of one key to
    // its record), as often as that holds.
    uint64_t raw = level == 0 ? cur[0].rec : cur[0].child;
    for (--level; level >= 0; --level) {
      const Directory* d;
      const Bucket* b;
      PMINDEX_RETURN_IF_ERROR(TreeNode(raw, level, &d, &b));
      if ((d != nullptr ? d->count : b->count) != 1) break;
      DropNode(raw, r);
      raw = d != nullptr ? d->entries()[0].child : b->entries()[0].record;
    }
    r->value = raw;
    return Status::OK();
  }
  for (;;) {
    up.clear();
    PMINDEX_RETURN_IF_ERROR(BuildLevel(level, cur, append, level < kMaxLevel, &up, r));
    if (up.size() == 1) {
      r->value = up[0].child;
      return Status::OK();
    }
    cur.swap(up);  // a root split: a new root above
    ++level;
  }
}

// Reclamation, under the prefix's latch: cuts the chain at `head` below
// its newest version at or below the oldest snapshot any reader can hold
// (Bound); returns the first version cut off (0: none), which the caller
// retires once its own link is durable. The cut must be durable before the
// cut-off blocks can be freed and reused, so that no crash leaves a chain
// running into reused blocks; it is flushed here and made durable by the
// caller's fence before its link (a crash may leave it cut and not linked,
// which is a chain recovery accepts).
uint64_t Store::Prune(uint64_t head) {
  const uint64_t b = snapshots_.Bound(clock_.visible());
  for (uint64_t raw = head; raw != 0;) {
    Version* x = At<Version>(raw, Version::kHeaderBytes);
    if (x == nullptr) return 0;
    const uint64_t older = Load(x->older);
    if (CommitTsOf(*x) <= b) {
      if (older == 0) return 0;
      pm::store(&x->older, uint64_t{0}, std::memory_order_release);
      // pmcrash-redundant(flush-late): the cut-off versions are retired only
      // after the caller's link NAW, whose fence also makes a flush moved
      // past the caller's first fence durable, so a late flush is still in
      // time for their reuse; dropped, it is not (killed).
      pm::flush(&x->older, sizeof(uint64_t));
      return older;
    }
    raw = older;
  }
  return 0;
}

// Retires every version of the chain from `ver` (and their value blocks):
// true if a value block was among them.
bool Store::RetireChain(uint64_t ver) {
  bool large = false;
  for (uint64_t raw = ver; raw != 0;) {
    const Version* x = At<const Version>(raw, Version::kHeaderBytes);
    if (x == nullptr) break;
    const uint64_t older = Load(x->older);
    if (x->separate()) {
      alloc_->Retire(PPtr(x->value));
      large = true;
    }
    alloc_->Retire(PPtr(raw));
    reclaimed_.fetch_add(1, std::memory_order_relaxed);
    versions_.fetch_sub(1, std::memory_order_relaxed);
    raw = older;
  }
  return large;
}

// The prefix's tree with a new key's record `rec` (r->value: the record
// itself for a free prefix), its new nodes allocated and flushed (the
// caller's fence makes them durable before InstallNewKey).
Status Store::PrepareNewKey(std::string_view key, const Where& w, uint64_t rec, Reshaped* r) {
  if (w.value == 0) {
    r->value = rec;
    return Status::OK();
  }
  const Slot mine{Next8(key), rec, 0};
  if (w.other != nullptr) {
    const Slot theirs{Next8(w.other->key()), w.other_raw, 0};
    const bool theirs_first = CompareKeys(w.other->key(), key) < 0;
    const Slot two[2] = {theirs_first ? theirs : mine, theirs_first ? mine : theirs};
    auto b = AllocNode(0, two, 2, r);
    if (!b.ok()) return b.status();
    r->value = b.value().child;
    return Status::OK();
  }
  // The key after every other one of the prefix: the next ones likely
  // follow it (a load in key order), so full nodes are kept full.
  bool append = w.leaf().pos == w.leaf().count;
  for (uint32_t d = 0; d + 1 < w.depth && append; ++d) append = w.path[d].pos + 1 == w.path[d].count;
  Status s = Reshape(w, &mine, append, r);
  if (!s.ok()) FreeFresh(r);
  return s;
}

// A new key's record (head: the version nv) and the prefix's tree with
// it, allocated and flushed. On failure nothing of the key stays
// allocated, nv included.
Status Store::MakeNewKey(std::string_view key, const Where& w, const NewVersion& nv, uint64_t* rec, Reshaped* r) {
  auto a = AllocRecord(key, nv.ver.raw());
  if (!a.ok()) {
    FreeUnlinked(nv);
    return a.status();
  }
  Status s = PrepareNewKey(key, w, a.value().raw(), r);
  if (!s.ok()) {
    alloc_->Free(a.value());
    FreeUnlinked(nv);
    return s;
  }
  *rec = a.value().raw();
  return Status::OK();
}

// Links a new key (REQUIRES its blocks durable): the index's insert or
// update of the prefix is the commit point. The nodes it replaces are
// retired.
Status Store::InstallNewKey(uint64_t prefix, const Where& w, const Reshaped& r) {
  if (w.value == 0) return index_->insert(prefix, r.value);
  Status s = index_->update(prefix, r.value);
  if (!s.ok()) return s.is_not_found() ? Status::Corruption("kv: a prefix vanished under its latch") : s;
  RetireOld(r);
  return Status::OK();
}

// Frees what PrepareNewKey and AllocRecord made for a key that was not
// linked.
void Store::FreeNewKey(uint64_t rec, Reshaped* r) {
  FreeFresh(r);
  if (rec != 0) alloc_->Free(PPtr(rec));
}

Status Store::Write(std::string_view key, const std::string_view* value, Cond cond,
                    uint64_t version, const ValueTest* refuse) {
  const uint64_t prefix = Prefix(key);
  bool large = false, purge_later = false;
  {
    LatchGuard latch(latches_, prefix);
    Where w;
    PMINDEX_RETURN_IF_ERROR(Locate(key, prefix, &w));
    const uint64_t cur = w.rec != nullptr ? Load(w.rec->head) : 0;
    const Version* cv = cur != 0 ? At<const Version>(cur, Version::kHeaderBytes) : nullptr;
    if (cur != 0 && cv == nullptr) return Damaged("version", cur);
    // Under the latch the head is committed and published (every writer of
    // the prefix publishes before it lets go).
    const bool live = cv != nullptr && !cv->tombstone();
    switch (cond) {
      case Cond::kNone:
        break;
      case Cond::kAbsent:
        if (live) return Status::AlreadyExists();
        break;
      case Cond::kPresent:
        if (!live) return Status::NotFound();
        break;
      case Cond::kVersion:
        if (!live) return Status::NotFound();
        if (CommitTsOf(*cv) != version)
          return Status::Aborted("the key's newest version is " + std::to_string(CommitTsOf(*cv)) + ", not " +
                                 std::to_string(version));
        break;
    }
    if (value == nullptr && !live) return Status::NotFound();
    if (refuse != nullptr && live) {
      std::string_view old;
      PMINDEX_RETURN_IF_ERROR(ValueView(*cv, &old));
      if ((*refuse)(old)) return Status::AlreadyExists();
    }
    MarkChanged();
    auto nv = AllocVersion(value);
    if (!nv.ok()) return nv.status();
    uint64_t rec = 0;
    Reshaped tree;
    if (w.rec == nullptr) PMINDEX_RETURN_IF_ERROR(MakeNewKey(key, w, nv.value(), &rec, &tree));
    const uint64_t cut = w.rec != nullptr ? Prune(cur) : 0;
    Ticket t = Reserve();
    SealVersion(nv.value(), CommittedStamp(t.ts()), cur);
    // The version, its value block, a new record and tree nodes, and the
    // cut: durable before the one write that links them.
    pm::fence();
    if (w.rec != nullptr) {
      pm::naw(&w.rec->head, nv.value().ver.raw());
    } else {
      Status s = InstallNewKey(prefix, w, tree);
      if (!s.ok()) {
        FreeNewKey(rec, &tree);
        FreeUnlinked(nv.value());
        return s;  // the ticket is published unused
      }
    }
    t.Publish();
    commits_.fetch_add(1, std::memory_order_relaxed);
    versions_.fetch_add(1, std::memory_order_relaxed);
    if (live != (value != nullptr)) live_keys_.fetch_add(live ? -1 : 1, std::memory_order_relaxed);
    if (cut != 0) large |= RetireChain(cut);
    if (value == nullptr) {
      // A removed key's record goes once no snapshot can read below the
      // tombstone: now, unless a registered snapshot is older.
      purge_later = Purge(prefix, w) == PurgeResult::kNotYet;
    }
  }
  if (purge_later) QueuePurge(key);
  if (large) alloc_->Reclaim();  // value blocks are whole pages: give them back soon
  if (purge_size_.load(std::memory_order_relaxed) != 0) DrainPurges(4);
  return Status::OK();
}

// ---------------------------------------------------------------- purging

Store::PurgeResult Store::Purge(uint64_t prefix, const Where& w) {
  const uint64_t head = Load(w.rec->head);
  if (head != 0) {
    const Version* x = At<const Version>(head, Version::kHeaderBytes);
    if (x == nullptr || !x->tombstone()) return PurgeResult::kLive;
    const uint64_t ts = CommitTsOf(*x);
    if (ts == kNever) return PurgeResult::kLive;  // a transaction's, in flight
    if (ts > snapshots_.Bound(clock_.visible())) return PurgeResult::kNotYet;
  }
  // Unlink the record from its prefix: the index's remove or update (the
  // commit point), after the tree without it is durable.
  MarkChanged();
  Status s;
  Reshaped tree;
  if (w.depth == 0) {
    s = index_->remove(prefix);
  } else {
    s = Reshape(w, nullptr, false, &tree);
    if (s.ok()) {
      pm::fence();  // the new nodes durable before the index names them
      s = tree.value == 0 ? index_->remove(prefix) : index_->update(prefix, tree.value);
    }
  }
  if (!s.ok()) {
    FreeFresh(&tree);
    return PurgeResult::kFailed;  // out of space: the record stays, absent
  }
  RetireOld(tree);
  alloc_->Retire(PPtr(w.rec_raw));
  if (head != 0) RetireChain(head);
  return PurgeResult::kDone;
}

void Store::QueuePurge(std::string_view key) {
  sync::MutexLock g(purge_mu_);
  purge_.emplace_back(key);
  purge_size_.store(purge_.size(), std::memory_order_relaxed);
}

void Store::DrainPurges(size_t max_items) {
  std::vector<std::string> again;
  for (size_t i = 0; i < max_items; ++i) {
    std::string key;
    {
      sync::MutexLock g(purge_mu_);
      if (purge_.empty()) break;
      key = std::move(purge_.front());
      purge_.pop_front();
      purge_size_.store(purge_.size(), std::memory_order_relaxed);
    }
    const uint64_t prefix = Prefix(key);
    LatchGuard latch(latches_, prefix);
    Where w;
    if (!Locate(key, prefix, &w).ok() || w.rec == nullptr) continue;
    if (Purge(prefix, w) == PurgeResult::kNotYet) {
      again.push_back(std::move(key));
      break;  // an old snapshot holds it; so it holds the ones behind it
    }
  }
  if (!again.empty()) {
    sync::MutexLock g(purge_mu_);
    for (auto& k : again) purge_.push_back(std::move(k));
    purge_size_.store(purge_.size(), std::memory_order_relaxed);
  }
}

// ---------------------------------------------------------------- transactions

void Store::Undo(const std::vector<Linked>& linked) {
  for (size_t i = linked.size(); i-- > 0;) {
    const Linked& l = linked[i];
    // Back to the head it replaced (no head for a record the transaction
    // made: the record stays, empty, until a purge removes it). Each NAW
    // alone is a state recovery accepts: the transaction record is not
    // committed.
    pm::naw(&l.rec->head, l.older);
    alloc_->Retire(l.nv.ver);  // readers may have seen it (and skipped it)
    if (l.nv.value) alloc_->Retire(l.nv.value);
    if (l.new_record) QueuePurge(l.key);
  }
}

Status Store::Commit(uint64_t snapshot, const Writes& writes, const std::vector<std::string>& validated) {
  if (writes.empty() && validated.empty()) return Status::OK();
  std::vector<uint64_t> prefixes;
  prefixes.reserve(writes.size() + validated.size());
  for (const auto& [k, v] : writes) prefixes.push_back(Prefix(k));
  for (const std::string& k : validated) prefixes.push_back(Prefix(k));
  LatchSetGuard latched(latches_, prefixes);

  for (const auto& [k, v] : writes) PMINDEX_RETURN_IF_ERROR(CheckUnchangedSince(k, snapshot));
  for (const std::string& k : validated) PMINDEX_RETURN_IF_ERROR(CheckUnchangedSince(k, snapshot));
  if (writes.empty()) return Status::OK();

  MarkChanged();
  auto tr = alloc_->Alloc(sizeof(TxnRecord));
  if (!tr.ok()) return tr.status();
  const PPtr txn = tr.value();
  TxnRecord* t = pool_->to_ptr<TxnRecord>(txn);
  const TxnRecord th{kTxnTag, 0, static_cast<uint32_t>(writes.size()), 0, {}};
  pm::copy(t, &th, sizeof th);
  // Durable by the first version's fence, before any version names it.
  pm::flush(t, sizeof th);

  // Each version linked as the transaction's (readers skip it), one key at
  // a time, so that a crash leaves at most one key's blocks unlinked.
  std::vector<Linked> linked;
  std::vector<uint64_t> cuts;
  linked.reserve(writes.size());
  for (const auto& [k, val] : writes) {
    if (stop_.kind == CommitStop::kBeforeCommit && linked.size() == stop_.links) {
      return Status::Aborted("kv: commit stopped before its commit word (CommitStop)");
    }
    Linked l;
    uint64_t cut = 0;
    if (Status s = LinkVersion(k, val, txn, &l, &cut); !s.ok()) {
      Undo(linked);
      alloc_->Retire(txn);
      return s;
    }
    if (cut != 0) cuts.push_back(cut);
    linked.push_back(l);
  }

  Ticket ticket = Reserve();
  const uint64_t stamp = CommittedStamp(ticket.ts());
  // The commit point: every version is durable and linked; from this NAW
  // on recovery keeps them all, before it none.
  pm::naw(&t->commit, stamp);
  ticket.Publish();
  commits_.fetch_add(1, std::memory_order_relaxed);
  for (const Linked& l : linked) {
    versions_.fetch_add(1, std::memory_order_relaxed);
    const bool live = (l.nv.flags & Version::kTombstone) == 0;
    if (live != l.was_live) live_keys_.fetch_add(live ? 1 : -1, std::memory_order_relaxed);
  }
  if (stop_.kind == CommitStop::kAfterCommit) return Status::OK();
  StampVersions(linked, stamp);
  bool large = false;
  for (uint64_t c : cuts) large |= RetireChain(c);  // under the latches: the counters stay exact for Verify
  latched.Unlock();
  alloc_->Retire(txn);  // readers may still be reading its commit word
  for (const Linked& l : linked) {
    if (l.nv.flags & Version::kTombstone) QueuePurge(l.key);
  }
  if (large) alloc_->Reclaim();
  if (purge_size_.load(std::memory_order_relaxed) != 0) DrainPurges(writes.size() + 4);
  return Status::OK();
}

// Finalize: each version carries the timestamp itself, durable before
// the transaction record can be freed and reused.
void Store::StampVersions(const std::vector<Linked>& linked, uint64_t stamp) {
  for (const Linked& l : linked) {
    pm::store(&l.nv.v->stamp, stamp, std::memory_order_release);
    pm::flush(&l.nv.v->stamp, sizeof(uint64_t));
  }
  pm::fence();
}

// First committer wins: a written or validated key must have no version
// committed after the snapshot. Heads are committed and published
// (latches held), so a check passed here holds until the commit point.
Status Store::CheckUnchangedSince(std::string_view k, uint64_t snapshot) {
  Where w;
  PMINDEX_RETURN_IF_ERROR(Locate(k, Prefix(k), &w));
  const uint64_t cur = w.rec != nullptr ? Load(w.rec->head) : 0;
  if (cur == 0) return Status::OK();
  const Version* x = At<const Version>(cur, Version::kHeaderBytes);
  if (x == nullptr) return Damaged("version", cur);
  if (CommitTsOf(*x) > snapshot) {
    aborts_.fetch_add(1, std::memory_order_relaxed);
    return Status::Aborted(
        "key written by another transaction after this one's snapshot (first committer wins)");
  }
  return Status::OK();
}

Status Store::LinkVersion(std::string_view k, const std::optional<std::string>& val, PPtr txn,
                          Linked* out, uint64_t* cut) {
  const uint64_t prefix = Prefix(k);
  Where w;
  PMINDEX_RETURN_IF_ERROR(Locate(k, prefix, &w));
  std::string_view sv;
  if (val) sv = *val;
  auto nv = AllocVersion(val ? &sv : nullptr);
  if (!nv.ok()) return nv.status();
  Linked& l = *out;
  l.key = k;
  l.nv = nv.value();
  uint64_t rec = 0;
  Reshaped tree;
  if (w.rec == nullptr) {
    PMINDEX_RETURN_IF_ERROR(MakeNewKey(k, w, l.nv, &rec, &tree));
    l.rec = pool_->to_ptr<Record>(PPtr(rec));
    l.new_record = true;
  } else {
    l.rec = w.rec;
    l.older = Load(w.rec->head);
    // Committed and published: every writer of the prefix publishes
    // before it lets its latch go.
    const Version* h = l.older != 0 ? At<const Version>(l.older, Version::kHeaderBytes) : nullptr;
    l.was_live = h != nullptr && !h->tombstone();
  }
  *cut = w.rec != nullptr ? Prune(l.older) : 0;
  SealVersion(l.nv, txn.raw(), l.older);
  // The transaction record, this version, its blocks and the cut:
  // durable before the version is linked.
  pm::fence();
  if (w.rec != nullptr) {
    pm::naw(&w.rec->head, l.nv.ver.raw());
    return Status::OK();
  }
  Status s = InstallNewKey(prefix, w, tree);
  if (!s.ok()) {
    FreeNewKey(rec, &tree);
    FreeUnlinked(l.nv);
  }
  return s;
}

// ---------------------------------------------------------------- walks

Status Store::ForEachPair(const std::function<Status(Key, Value)>& fn) const {
  Key next = 0;
  bool more = true;
  KV batch[kBatch];
  while (more) {
    alloc::Allocator::EpochGuard g(*alloc_);
    const size_t n = ScanBatch(*index_, &next, &more, kBatch, batch);
    for (size_t i = 0; i < n; ++i) PMINDEX_RETURN_IF_ERROR(fn(batch[i].key, batch[i].value));
  }
  return Status::OK();
}

namespace {

// Verify's view of a block: allocated, and as large as the walk reads.
class VerifySink final : public WalkSink {
 public:
  explicit VerifySink(const alloc::Allocator& a) : a_(a) {}
  Status Block(PPtr p, size_t bytes) override {
    if (!a_.IsLive(p)) return Status::Corruption("kv: block " + HexWord(p.raw()) + " is not an allocated block");
    if (a_.BlockSize(p) < bytes)
      return Status::Corruption("kv: block " + HexWord(p.raw()) + " is smaller than the " + std::to_string(bytes) +
                                " bytes it holds");
    return Status::OK();
  }
  void RecordDone(uint64_t rec, const Record& r, bool live, uint64_t versions) override {
    (void)rec;
    if (!order_.ok()) return;
    if (have_prev_ && CompareKeys(prev_, r.key()) >= 0)
      order_ = Status::Corruption("kv: keys not in ascending order at record " + HexWord(rec));
    prev_.assign(r.key());
    have_prev_ = true;
    keys_ += live ? 1 : 0;
    versions_ += versions;
  }
  void Content(const void* p, size_t n) override { digest_.Add(p, n); }
  Status order_;
  uint64_t keys_ = 0, versions_ = 0;
  ContentDigest digest_;

 private:
  const alloc::Allocator& a_;
  std::string prev_;
  bool have_prev_ = false;
};

}  // namespace

Status Store::Verify() {
  LatchSetGuard latched(latches_, LatchSetGuard::kAll);
  PMINDEX_RETURN_IF_ERROR(index_->verify());
  if (clock_.next() > reserved_.load(std::memory_order_acquire))
    return Status::Corruption("kv: the clock ran past its reservation in root slot 5");
  WalkRules rules;
  rules.ts_limit = clock_.next();
  rules.allow_pending = false;
  // Nothing written since an open that checked the content record: the
  // store must still hold what the record covered (damage while open).
  rules.content = content_known_ && !changed_.load(std::memory_order_relaxed);
  VerifySink sink(*alloc_);
  common::ContentSum sum;
  PMINDEX_RETURN_IF_ERROR(ForEachPair([&](Key k, Value v) {
    sink.digest_.Reset();
    PMINDEX_RETURN_IF_ERROR(WalkValue(*pool_, k, v, rules, sink, nullptr));
    sum.Add(k, sink.digest_.value());
    return sink.order_;
  }));
  if (rules.content && sum.value() != content_sum_)
    return Status::Corruption(
        "kv: the keys, values or versions differ from those the store was opened with (its content "
        "record), and nothing was written since: one of them was damaged while the store was open");
  // The counters Stats reports (DRAM bookkeeping: a mismatch is a bug of
  // the store, not damage to the pool).
  const int64_t keys = live_keys_.load(std::memory_order_relaxed);
  const int64_t versions = versions_.load(std::memory_order_relaxed);
  if (keys != static_cast<int64_t>(sink.keys_) || versions != static_cast<int64_t>(sink.versions_))
    return Status::Corruption("kv: the store counts " + std::to_string(keys) + " keys and " +
                              std::to_string(versions) + " versions, the walk " + std::to_string(sink.keys_) +
                              " and " + std::to_string(sink.versions_));
  return Status::OK();
}

KvStats Store::Stats() {
  KvStats st;
  st.commits = commits_.load(std::memory_order_relaxed);
  st.aborts = aborts_.load(std::memory_order_relaxed);
  st.reclaimed_versions = reclaimed_.load(std::memory_order_relaxed);
  st.pm_bytes = alloc_->stats().bytes_in_use;
  st.index = index_->stats();
  st.keys = static_cast<uint64_t>(std::max<int64_t>(0, live_keys_.load(std::memory_order_relaxed)));
  st.versions = static_cast<uint64_t>(std::max<int64_t>(0, versions_.load(std::memory_order_relaxed)));
  return st;
}

Result<uint64_t> Store::ContentSumNow() const {
  if (content_known_ && !changed_.load(std::memory_order_relaxed)) return content_sum_;
  class DigestSink final : public WalkSink {
   public:
    // Pointers are checked against the pool by the walk; the blocks are the
    // store's own (the open validated them, writers made the rest).
    Status Block(PPtr, size_t) override { return Status::OK(); }
    void Content(const void* p, size_t n) override { digest.Add(p, n); }
    ContentDigest digest;
  } sink;
  WalkRules rules;
  rules.allow_pending = true;  // a test's CommitStop may leave one
  rules.check_nodes = false;   // an open compares them (and then this sum)
  rules.content = true;
  common::ContentSum sum;
  PMINDEX_RETURN_IF_ERROR(ForEachPair([&](Key k, Value v) {
    sink.digest.Reset();
    PMINDEX_RETURN_IF_ERROR(WalkValue(*pool_, k, v, rules, sink, nullptr));
    sum.Add(k, sink.digest.value());
    return Status::OK();
  }));
  return sum.value();
}

void Store::CountAll() {
  class CountSink final : public WalkSink {
   public:
    Status Block(PPtr, size_t) override { return Status::OK(); }
    void RecordDone(uint64_t, const Record&, bool live, uint64_t versions) override {
      keys += live ? 1 : 0;
      this->versions += versions;
    }
    int64_t keys = 0, versions = 0;
  } sink;
  WalkRules rules;
  rules.allow_pending = true;
  rules.check_nodes = false;  // recovery's walk compared every node's check word
  IgnoreError(ForEachPair([&](Key k, Value v) { return WalkValue(*pool_, k, v, rules, sink, nullptr); }),
              "recovery's walk validated every pair just before; the counts are what this walk met");
  live_keys_.store(sink.keys, std::memory_order_relaxed);
  versions_.store(sink.versions, std::memory_order_relaxed);
}

Status Store::ForEachBlock(const std::function<void(PPtr)>& fn) {
  PMINDEX_RETURN_IF_ERROR(index_->for_each_block(fn));
  class BlockSink final : public WalkSink {
   public:
    explicit BlockSink(const std::function<void(PPtr)>& fn) : fn_(fn) {}
    Status Block(PPtr p, size_t) override {
      fn_(p);
      return Status::OK();
    }
    // A transaction record in flight may head several chains: once.
    Status TxnBlock(PPtr p) override {
      if (txns_.insert(p.raw()).second) fn_(p);
      return Status::OK();
    }

   private:
    const std::function<void(PPtr)>& fn_;
    std::set<uint64_t> txns_;
  } sink(fn);
  WalkRules rules;
  rules.allow_pending = true;
  return ForEachPair([&](Key k, Value v) { return WalkValue(*pool_, k, v, rules, sink, nullptr); });
}

}  // namespace pmindex::kv
