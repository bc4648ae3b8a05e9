// KvStore and Transaction (include/pmindex/kv.h): the pool file, argument
// checks and the closed state around kv::Store (store.h), and the
// transaction's buffer of writes.
#include "pmindex/kv.h"

#include <unistd.h>

#include <utility>

#include "index/index.h"
#include "index/registry.h"
#include "kv/store.h"
#include "pm/pool.h"
#include "pm/pool_format.h"

namespace pmindex {

namespace {

Status Closed() { return Status::InvalidArgument("the store is closed"); }
Status Finished() { return Status::InvalidArgument("the transaction has committed or aborted"); }

Status CheckKey(std::string_view key) {
  if (key.empty()) return Status::InvalidArgument("empty key");
  if (key.size() > KvStore::kMaxKeyBytes)
    return Status::InvalidArgument("key of " + std::to_string(key.size()) + " bytes (at most " +
                                   std::to_string(KvStore::kMaxKeyBytes) + ")");
  return Status::OK();
}

Status CheckValue(std::string_view value) {
  if (value.size() > KvStore::kMaxValueBytes)
    return Status::InvalidArgument("value of " + std::to_string(value.size()) + " bytes (at most " +
                                   std::to_string(KvStore::kMaxValueBytes) + ")");
  return Status::OK();
}

static_assert(KvStore::kMaxKeyBytes == kv::kMaxKeyBytes && KvStore::kMaxValueBytes == kv::kMaxValueBytes);

PoolOptions StorePoolOptions(const DbOptions& o) {
  PoolOptions p;
  p.size = o.size;
  p.max_size = o.max_size;
  p.segment_size = o.segment_size;
  p.pool_id = o.pool_id;
  p.incompat_flags = pm::kIncompatKvStore;
  return p;
}

// A kind a store can sit on: registered and persistent.
Status CheckKind(std::string_view kind) {
  const IndexInfo* info = Registry::Get().Find(kind);
  if (info != nullptr && !info->persistent)
    return Status::InvalidArgument("index kind \"" + info->name + "\" is volatile: a store needs a persistent kind");
  return Status::OK();  // an unknown kind: create_pool_for names the known ones
}

// Appends pairs of `scan` to *out up to `limit` (the fn of ScanAt).
struct Collector {
  std::vector<std::pair<std::string, std::string>>* out;
  size_t limit;
  size_t added = 0;
  bool Add(std::string_view k, std::string_view v) {
    if (added >= limit) return false;
    out->emplace_back(std::string(k), std::string(v));
    ++added;
    return added < limit;
  }
};

}  // namespace

class KvStore::Impl {
 public:
  std::unique_ptr<Pool> pool;
  std::shared_ptr<kv::Store> store;
  std::string kind, options;

  bool closed() const { return store == nullptr || store->closed(); }
};

class Transaction::Impl {
 public:
  std::shared_ptr<kv::Store> store;
  kv::Store::Snapshot snap;
  kv::Store::Writes writes;
  std::vector<std::string> validated;
  bool done = false;

  Status Usable() const {
    if (store == nullptr || store->closed()) return Closed();
    if (done) return Finished();
    return Status::OK();
  }
  void Finish() {
    if (done) return;
    done = true;
    if (store != nullptr && !store->closed()) store->ReleaseSnapshot(&snap);
  }
};

// ---------------------------------------------------------------- KvStore

KvStore::KvStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KvStore::~KvStore() { IgnoreError(Close(), "a destructor has no caller to report to; Close() returns it"); }

Result<std::unique_ptr<KvStore>> KvStore::Create(const std::string& path, std::string_view index_kind,
                                                 std::string_view index_options, const DbOptions& db_options) {
  PMINDEX_RETURN_IF_ERROR(CheckKind(index_kind));
  auto pool = create_pool_for(index_kind, index_options, path, StorePoolOptions(db_options));
  if (!pool.ok()) return pool.status();
  std::unique_ptr<Pool> p = std::move(pool).value();
  auto store = kv::Store::Create(p.get(), p->kind(), p->index_options());
  if (!store.ok()) {
    // A pool without its store is of no use: remove what this call made.
    const uint32_t segments = p->info().segments;
    IgnoreError(p->Close(), "the create error is the one reported; the pool is removed next");
    for (uint32_t i = segments; i-- > 1;) unlink((path + "." + std::to_string(i)).c_str());
    unlink(path.c_str());
    return store.status();
  }
  auto impl = std::make_unique<Impl>();
  impl->kind = std::string(p->kind());
  impl->options = std::string(p->index_options());
  impl->pool = std::move(p);
  impl->store = std::move(store).value();
  return std::unique_ptr<KvStore>(new KvStore(std::move(impl)));
}

Result<std::unique_ptr<KvStore>> KvStore::Open(const std::string& path) {
  auto pool = Pool::Open(path);
  if (!pool.ok()) return pool.status();
  auto store = kv::Store::Open(pool.value().get());
  // On failure ~Pool closes the pool; it stays unclean if recovery wrote.
  if (!store.ok()) return store.status();
  auto impl = std::make_unique<Impl>();
  impl->kind = std::string(pool.value()->kind());
  impl->options = std::string(pool.value()->index_options());
  impl->pool = std::move(pool).value();
  impl->store = std::move(store).value();
  return std::unique_ptr<KvStore>(new KvStore(std::move(impl)));
}

Result<std::unique_ptr<KvStore>> KvStore::CreateInMemory(std::string_view index_kind, std::string_view index_options,
                                                         const DbOptions& db_options) {
  PMINDEX_RETURN_IF_ERROR(CheckKind(index_kind));
  const IndexInfo* info = Registry::Get().Find(index_kind);
  if (info == nullptr) return Status::InvalidArgument("unknown index kind \"" + std::string(index_kind) + "\"");
  auto parsed = Options::Parse(index_options);
  if (!parsed.ok()) return parsed.status();
  PoolOptions po = StorePoolOptions(db_options);
  po.kind = info->name;
  po.index_options = parsed.value().ToString();
  auto pool = Pool::CreateInMemory(po);
  if (!pool.ok()) return pool.status();
  auto store = kv::Store::Create(pool.value().get(), po.kind, po.index_options);
  if (!store.ok()) return store.status();
  auto impl = std::make_unique<Impl>();
  impl->kind = po.kind;
  impl->options = po.index_options;
  impl->pool = std::move(pool).value();
  impl->store = std::move(store).value();
  return std::unique_ptr<KvStore>(new KvStore(std::move(impl)));
}

Status KvStore::Close() {
  if (impl_->pool == nullptr) return Status::OK();
  Status s = impl_->store->Close();
  Status ps = impl_->pool->Close();
  impl_->pool.reset();
  return s.ok() ? ps : s;
}

Result<std::string> KvStore::Get(std::string_view key) const {
  if (impl_->closed()) return Closed();
  PMINDEX_RETURN_IF_ERROR(CheckKey(key));
  auto r = impl_->store->Read(key, true);
  if (!r.ok()) return r.status();
  return std::move(r.value().value);
}

Result<VersionedValue> KvStore::GetVersioned(std::string_view key) const {
  if (impl_->closed()) return Closed();
  PMINDEX_RETURN_IF_ERROR(CheckKey(key));
  return impl_->store->Read(key, true);
}

bool KvStore::Exists(std::string_view key) const {
  if (impl_->closed() || !CheckKey(key).ok()) return false;
  return impl_->store->Read(key, false).ok();
}

namespace {
Status WriteChecked(const std::shared_ptr<kv::Store>& store, bool closed, std::string_view key,
                    const std::string_view* value, kv::Store::Cond cond, uint64_t version,
                    const kv::Store::ValueTest* refuse = nullptr) {
  if (closed) return Closed();
  PMINDEX_RETURN_IF_ERROR(CheckKey(key));
  if (value != nullptr) PMINDEX_RETURN_IF_ERROR(CheckValue(*value));
  return store->Write(key, value, cond, version, refuse);
}
}  // namespace

Status KvStore::Put(std::string_view key, std::string_view value) {
  return WriteChecked(impl_->store, impl_->closed(), key, &value, kv::Store::Cond::kNone, 0);
}
Status KvStore::PutIfAbsent(std::string_view key, std::string_view value) {
  return WriteChecked(impl_->store, impl_->closed(), key, &value, kv::Store::Cond::kAbsent, 0);
}
Status KvStore::PutIfPresent(std::string_view key, std::string_view value) {
  return WriteChecked(impl_->store, impl_->closed(), key, &value, kv::Store::Cond::kPresent, 0);
}
Status KvStore::PutIfVersion(std::string_view key, std::string_view value, uint64_t version) {
  return WriteChecked(impl_->store, impl_->closed(), key, &value, kv::Store::Cond::kVersion, version);
}
Status KvStore::PutUnless(std::string_view key, std::string_view value,
                          const std::function<bool(std::string_view value)>& refuse) {
  return WriteChecked(impl_->store, impl_->closed(), key, &value, kv::Store::Cond::kNone, 0,
                      &refuse);
}
Status KvStore::Remove(std::string_view key) {
  return WriteChecked(impl_->store, impl_->closed(), key, nullptr, kv::Store::Cond::kPresent, 0);
}

uint64_t KvStore::Count() const {
  if (impl_->closed()) return 0;
  kv::Store& s = *impl_->store;
  kv::Store::Snapshot snap = s.AcquireSnapshot();
  uint64_t n = 0;
  Status st = s.ScanAt(snap.ts, std::string_view(), std::nullopt, [&n](std::string_view, std::string_view) {
    ++n;
    return true;
  });
  s.ReleaseSnapshot(&snap);
  IgnoreError(st, "Count has no error to return; a damaged store counts what it can read");
  return n;
}

size_t KvStore::Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
                      std::vector<std::pair<std::string, std::string>>* out) const {
  if (impl_->closed() || limit == 0) return 0;
  kv::Store& s = *impl_->store;
  kv::Store::Snapshot snap = s.AcquireSnapshot();
  Collector c{out, limit};
  Status st = s.ScanAt(snap.ts, from, to, [&c](std::string_view k, std::string_view v) { return c.Add(k, v); });
  s.ReleaseSnapshot(&snap);
  IgnoreError(st, "Range returns a count; a damaged store gives what it can read");
  return c.added;
}

std::unique_ptr<Transaction> KvStore::Begin() {
  auto impl = std::make_unique<Transaction::Impl>();
  impl->store = impl_->store;
  if (impl_->closed()) {
    impl->done = true;  // every call answers "the store is closed"
  } else {
    impl->snap = impl_->store->AcquireSnapshot();
  }
  return std::unique_ptr<Transaction>(new Transaction(std::move(impl)));
}

Status KvStore::Verify() const {
  if (impl_->closed()) return Closed();
  return impl_->store->Verify();
}

KvStats KvStore::Stats() const {
  if (impl_->closed()) return KvStats{};
  return impl_->store->Stats();
}

Status KvStore::Sync() {
  if (impl_->closed()) return Closed();
  return impl_->pool->Sync();
}

std::string_view KvStore::index_kind() const { return impl_->kind; }
std::string_view KvStore::index_options() const { return impl_->options; }

// ---------------------------------------------------------------- Transaction

Transaction::Transaction(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Transaction::~Transaction() { Abort(); }

Result<std::string> Transaction::Get(std::string_view key) {
  PMINDEX_RETURN_IF_ERROR(impl_->Usable());
  PMINDEX_RETURN_IF_ERROR(CheckKey(key));
  auto it = impl_->writes.find(key);
  if (it != impl_->writes.end()) {
    if (!it->second) return Status::NotFound();
    return *it->second;
  }
  auto r = impl_->store->ReadAt(key, impl_->snap.ts);
  if (!r.ok()) return r.status();
  if (!r.value()) return Status::NotFound();
  return std::move(*r.value());
}

Status Transaction::Put(std::string_view key, std::string_view value) {
  PMINDEX_RETURN_IF_ERROR(impl_->Usable());
  PMINDEX_RETURN_IF_ERROR(CheckKey(key));
  PMINDEX_RETURN_IF_ERROR(CheckValue(value));
  impl_->writes.insert_or_assign(std::string(key), std::optional<std::string>(std::string(value)));
  return Status::OK();
}

Status Transaction::Remove(std::string_view key) {
  PMINDEX_RETURN_IF_ERROR(impl_->Usable());
  PMINDEX_RETURN_IF_ERROR(CheckKey(key));
  auto it = impl_->writes.find(key);
  if (it != impl_->writes.end()) {
    if (!it->second) return Status::NotFound();
    it->second.reset();
    return Status::OK();
  }
  auto r = impl_->store->ReadAt(key, impl_->snap.ts);
  if (!r.ok()) return r.status();
  if (!r.value()) return Status::NotFound();
  impl_->writes.emplace(std::string(key), std::nullopt);
  return Status::OK();
}

size_t Transaction::Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
                          std::vector<std::pair<std::string, std::string>>* out) {
  if (!impl_->Usable().ok() || limit == 0) return 0;
  // The snapshot's pairs merged with this transaction's writes, in order.
  const kv::Store::Writes& w = impl_->writes;
  auto it = w.lower_bound(from);
  auto in_range = [&](const std::string& k) { return !to || kv::CompareKeys(k, *to) < 0; };
  Collector c{out, limit};
  // Own puts before `key` (all of them when key is null).
  auto flush_own = [&](const std::string_view* key) {
    for (; it != w.end() && (key == nullptr || kv::CompareKeys(it->first, *key) < 0) && in_range(it->first); ++it) {
      if (it->second && !c.Add(it->first, *it->second)) return false;
    }
    return c.added < limit;
  };
  Status st = impl_->store->ScanAt(impl_->snap.ts, from, to, [&](std::string_view k, std::string_view v) {
    if (!flush_own(&k)) return false;
    if (it != w.end() && it->first == k) {
      const bool keep_going = !it->second || c.Add(it->first, *it->second);
      ++it;
      return keep_going && c.added < limit;
    }
    return c.Add(k, v);
  });
  IgnoreError(st, "Range returns a count; a damaged store gives what it can read");
  if (c.added < limit) flush_own(nullptr);
  return c.added;
}

Status Transaction::Validate(std::string_view key) {
  PMINDEX_RETURN_IF_ERROR(impl_->Usable());
  PMINDEX_RETURN_IF_ERROR(CheckKey(key));
  impl_->validated.emplace_back(key);
  return Status::OK();
}

Status Transaction::Commit() {
  PMINDEX_RETURN_IF_ERROR(impl_->Usable());
  Status s = impl_->store->Commit(impl_->snap.ts, impl_->writes, impl_->validated);
  impl_->Finish();
  return s;
}

void Transaction::Abort() { impl_->Finish(); }

uint64_t Transaction::snapshot() const { return impl_->snap.ts; }

}  // namespace pmindex
