// Db, the user's owning handle (include/pmindex/db.h): a pool, the index in
// it, and the iterator over that index, on top of the plug-in interface
// (docs/architecture.md section 5).
#include "pmindex/db.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "alloc/allocator.h"
#include "index/index.h"
#include "index/options.h"
#include "index/registry.h"
#include "pm/pool.h"

namespace pmindex {

namespace {

// Pairs read from the index per Index::scan call (ranges and iterators).
constexpr size_t kBatch = 256;

// Every data call's answer once the Db is closed (include/pmindex/db.h,
// Close). InvalidArgument: the call sequence is wrong, the pool is fine.
Status Closed() { return Status::InvalidArgument("the Db is closed"); }

// Db::NewIterator's iterator: a buffer of one batch, refilled from the key
// after the last one it held. It reaches the index through the Db's own
// pointer, which Close resets, so that it ends cleanly after Close instead
// of reading a destroyed index (the iterator must not outlive the Db).
class BatchIterator final : public Iterator {
 public:
  explicit BatchIterator(const std::unique_ptr<Index>* index) : index_(index) {
    if (*index_ == nullptr) End(Closed());
  }

  void Seek(Key k) override {
    next_ = k;
    more_ = true;
    Fill();
  }
  void SeekToFirst() override { Seek(0); }
  bool Valid() const override { return pos_ < buf_.size(); }
  void Next() override {
    if (*index_ == nullptr) {
      End(Closed());
    } else if (++pos_ == buf_.size()) {
      Fill();
    }
  }
  Key key() const override { return buf_[pos_].key; }
  Value value() const override { return buf_[pos_].value; }
  Status status() const override { return status_; }

 private:
  // Replaces the buffer with the next batch; empty at the end.
  void Fill() {
    Index* index = index_->get();
    if (index == nullptr) return End(Closed());
    pos_ = 0;
    buf_.resize(kBatch);
    size_t n = more_ ? ScanBatch(*index, &next_, &more_, kBatch, buf_.data()) : 0;
    buf_.resize(n);
  }
  // Not Valid() from now on, for reason s.
  void End(Status s) {
    buf_.clear();
    pos_ = 0;
    more_ = false;
    status_ = std::move(s);
  }

  const std::unique_ptr<Index>* index_;  // the Db's index_: null once closed
  std::vector<KV> buf_;
  size_t pos_ = 0;
  Key next_ = 0;      // where the next batch starts
  bool more_ = false;  // false: the index has nothing at or after next_
  Status status_;
};

PoolOptions ToPoolOptions(const DbOptions& o) {
  PoolOptions p;
  p.size = o.size;
  p.max_size = o.max_size;
  p.segment_size = o.segment_size;
  p.pool_id = o.pool_id;
  return p;
}

std::string_view DurabilityOf(const Pool* pool) {
  if (pool == nullptr) return "volatile";
  switch (pool->durability()) {
    case Durability::kPowerFailure:
      return "power-failure";
    case Durability::kProcessCrash:
      return "process-crash";
    case Durability::kVolatile:
      break;
  }
  return "volatile";
}

}  // namespace

Db::Db() = default;

Db::~Db() { IgnoreError(Close(), "a destructor has no caller to report to; Close() returns it"); }

std::unique_ptr<Db> Db::Wrap(std::unique_ptr<Pool> pool, std::unique_ptr<Index> index) {
  std::unique_ptr<Db> db(new Db());
  db->kind_ = std::string(index->kind());
  db->persistent_ = index->persistent();
  db->durability_ = DurabilityOf(pool.get());
  if (pool != nullptr) {
    db->options_ = std::string(pool->index_options());
    db->path_ = pool->path();
  }
  db->pool_ = std::move(pool);
  db->index_ = std::move(index);
  db->lookup_ = &TreeOf(*db->index_);  // past the library's handle
  return db;
}

Result<std::unique_ptr<Db>> Db::Create(const std::string& path, std::string_view kind,
                                       std::string_view options, const DbOptions& db_options) {
  const IndexInfo* info = Registry::Get().Find(kind);
  if (info != nullptr && !info->persistent) {
    return Status::InvalidArgument("index kind \"" + info->name +
                                   "\" is volatile and has no pool file: use Db::CreateInMemory");
  }
  // Validates kind, options and sizes before it writes anything.
  auto pool = create_pool_for(kind, options, path, ToPoolOptions(db_options));
  if (!pool.ok()) return pool.status();
  std::unique_ptr<Pool> p = std::move(pool).value();
  auto index = create_index(p->kind(), p->index_options(), p.get());
  if (!index.ok()) {
    // A pool without its index is of no use to anyone: remove what this
    // call created (the file, and any segment the failed create added).
    uint32_t segments = p->info().segments;
    IgnoreError(p->Close(), "the create error is the one reported; the pool is removed next");
    for (uint32_t i = segments; i-- > 1;) unlink((path + "." + std::to_string(i)).c_str());
    unlink(path.c_str());
    return index.status();
  }
  return Wrap(std::move(p), std::move(index).value());
}

Result<std::unique_ptr<Db>> Db::Open(const std::string& path, std::string_view expected_kind) {
  OpenOptions oo;
  oo.expected_kind = std::string(expected_kind);
  auto pool = Pool::Open(path, oo);
  if (!pool.ok()) return pool.status();
  auto index = open_index(pool.value().get());
  // On failure ~Pool closes the pool; it stays unclean if recovery wrote.
  if (!index.ok()) return index.status();
  return Wrap(std::move(pool).value(), std::move(index).value());
}

Result<std::unique_ptr<Db>> Db::CreateInMemory(std::string_view kind, std::string_view options,
                                               const DbOptions& db_options) {
  const IndexInfo* info = Registry::Get().Find(kind);
  if (info == nullptr || !info->persistent) {
    // Volatile (or unknown: create_index names the known kinds).
    auto index = create_index(kind, options, nullptr);
    if (!index.ok()) return index.status();
    auto db = Wrap(nullptr, std::move(index).value());
    db->options_ = Options::Parse(options).value().ToString();  // create_index parsed it
    return db;
  }
  auto parsed = Options::Parse(options);
  if (!parsed.ok()) return parsed.status();
  PoolOptions po = ToPoolOptions(db_options);
  po.kind = info->name;
  po.index_options = parsed.value().ToString();
  auto pool = Pool::CreateInMemory(po);
  if (!pool.ok()) return pool.status();
  auto index = create_index(po.kind, po.index_options, pool.value().get());
  if (!index.ok()) return index.status();
  return Wrap(std::move(pool).value(), std::move(index).value());
}

std::vector<KindInfo> Db::Kinds() {
  std::vector<KindInfo> kinds;
  for (const IndexInfo* i : Registry::Get().All()) {
    kinds.push_back(KindInfo{i->name, i->persistent, i->options_help});
  }
  return kinds;
}

Status Db::Close() {
  if (closed_) return Status::OK();
  closed_ = true;
  Status s = index_->close();
  lookup_ = nullptr;
  index_.reset();  // before its pool
  if (pool_ != nullptr) {
    Status ps = pool_->Close();
    pool_.reset();
    if (s.ok()) s = ps;
  }
  return s;
}

// After Close, index_ and lookup_ are null; each data call checks index_
// first (include/pmindex/db.h, Close).

Result<Value> Db::GetAfterClose() { return Closed(); }

Status Db::Insert(Key k, Value v) { return index_ != nullptr ? index_->insert(k, v) : Closed(); }
Status Db::Upsert(Key k, Value v) { return index_ != nullptr ? index_->upsert(k, v) : Closed(); }
Status Db::Update(Key k, Value v) { return index_ != nullptr ? index_->update(k, v) : Closed(); }
Status Db::Remove(Key k) { return index_ != nullptr ? index_->remove(k) : Closed(); }

uint64_t Db::Count() const { return index_ != nullptr ? index_->stats().entries : 0; }

size_t Db::Range(Key from, std::optional<Key> to, size_t limit, std::vector<KV>* out) const {
  if (index_ == nullptr) return 0;
  size_t added = 0;
  bool more = !to || from < *to;
  while (more && added < limit) {
    size_t base = out->size();
    out->resize(base + std::min(kBatch, limit - added));
    KV* batch = out->data() + base;
    size_t n = ScanBatch(*index_, &from, &more, out->size() - base, batch);
    if (to) {
      // Keys ascend: cut the batch at the first key >= *to.
      size_t below = static_cast<size_t>(
          std::lower_bound(batch, batch + n, *to, [](const KV& kv, Key t) { return kv.key < t; }) -
          batch);
      if (below < n) more = false;
      n = below;
    }
    out->resize(base + n);
    added += n;
  }
  return added;
}

std::unique_ptr<Iterator> Db::NewIterator() const {
  return std::make_unique<BatchIterator>(&index_);
}

Status Db::BulkLoad(std::span<const KV> sorted, double fill) {
  return index_ != nullptr ? index_->bulk_load(sorted, fill) : Closed();
}

Status Db::Verify() const { return index_ != nullptr ? index_->verify() : Closed(); }
IndexStats Db::Stats() const {
  if (index_ == nullptr) return IndexStats{};
  IndexStats st = index_->stats();
  // Trees that do not count their PM blocks: the allocator's count.
  if (st.pm_bytes == 0 && index_->allocator() != nullptr) {
    st.pm_bytes = index_->allocator()->stats().bytes_in_use;
  }
  return st;
}
Status Db::Sync() {
  if (index_ == nullptr) return Closed();
  return pool_ != nullptr ? pool_->Sync() : Status::OK();
}

std::string_view Db::kind() const { return kind_; }
std::string Db::options() const { return options_; }
bool Db::persistent() const { return persistent_; }
const std::string& Db::path() const { return path_; }
std::string_view Db::durability() const { return durability_; }

}  // namespace pmindex
