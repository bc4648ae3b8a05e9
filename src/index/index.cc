// create_index / open_index / create_pool_for: the checks between a caller,
// the registry and a pool, so that every factory receives validated options
// and a pool of its own kind.
#include "index/index.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

#include "alloc/allocator.h"
#include "index/registry.h"
#include "pm/pool_format.h"

namespace pmindex {

Index::~Index() = default;

Status Index::for_each_block(const std::function<void(PPtr)>&) {
  return Status::NotSupported("index kind \"" + std::string(kind()) +
                              "\" has no persistent blocks");
}

Status Index::close() { return Status::OK(); }

// What create_index and open_index return: the tree, and the pool
// bookkeeping a tree does not carry (the allocator, the pool, the pool's
// lease), with the kind's name from its registry entry. Every call
// forwards to the tree.
class IndexHandle final : public Index {
 public:
  IndexHandle(const IndexInfo& info, std::unique_ptr<Index> tree)
      : info_(info), tree_(std::move(tree)) {}
  // Closes the tree if the caller did not (Index::close is idempotent, and
  // writes nothing for an abandoned tree), so trees need no destructor of
  // their own for it; a tree whose factory failed never reaches a handle and
  // is destroyed without a close (it writes nothing). The members then go
  // in reverse order: the tree before the lease, then the allocator.
  ~IndexHandle() override {
    Status s = tree_->close();
    if (!s.ok()) {
      // No caller to return it to: say it, rather than drop it.
      std::fprintf(stderr, "pmindex: closing index kind \"%s\" on its destruction failed: %s\n",
                   info_.name.c_str(), s.ToString().c_str());
    }
  }

  // For a persistent kind, once the open or create has succeeded.
  void Attach(Pool* pool, std::unique_ptr<alloc::Allocator> alloc, std::shared_ptr<void> lease) {
    pool_ = pool;
    alloc_ = std::move(alloc);
    lease_ = std::move(lease);
  }
  // open_index refused the pool after the tree was built: it must write
  // nothing when it is destroyed (Index::abandoned()).
  static void Abandon(Index& tree) { tree.abandoned_ = true; }

  Index& tree() { return *tree_; }

  std::string_view kind() const override { return info_.name; }
  bool persistent() const override { return info_.persistent; }
  Status insert(Key k, Value v) override { return tree_->insert(k, v); }
  Status update(Key k, Value v) override { return tree_->update(k, v); }
  Status upsert(Key k, Value v) override { return tree_->upsert(k, v); }
  std::optional<Value> lookup(Key k) override { return tree_->lookup(k); }
  Status remove(Key k) override { return tree_->remove(k); }
  size_t scan(Key from, size_t n, KV* out) override { return tree_->scan(from, n, out); }
  Status bulk_load(std::span<const KV> sorted, double fill) override {
    return tree_->bulk_load(sorted, fill);
  }
  Status verify() override { return tree_->verify(); }
  IndexStats stats() override { return tree_->stats(); }
  Status for_each_block(const std::function<void(PPtr)>& fn) override {
    if (!info_.persistent) return Index::for_each_block(fn);
    return tree_->for_each_block(fn);
  }
  void quiesce() override { tree_->quiesce(); }
  Status close() override { return tree_->close(); }
  alloc::Allocator* allocator() const override { return alloc_.get(); }
  Pool* pool() const override { return pool_; }

 private:
  const IndexInfo& info_;
  Pool* pool_ = nullptr;
  std::unique_ptr<alloc::Allocator> alloc_;
  // Held while the index is alive: a second create_index / open_index on
  // the same pool is refused (Busy) until it is released.
  std::shared_ptr<void> lease_;
  std::unique_ptr<Index> tree_;
};

Index& TreeOf(Index& index) {
  auto* handle = dynamic_cast<IndexHandle*>(&index);
  return handle != nullptr ? handle->tree() : index;
}

namespace {

std::string KnownKinds() {
  std::string list;
  for (const IndexInfo* i : Registry::Get().All()) {
    if (!list.empty()) list += ", ";
    list += i->name;
  }
  return list.empty() ? "none" : list;
}

Result<const IndexInfo*> FindKind(std::string_view kind) {
  const IndexInfo* info = Registry::Get().Find(kind);
  if (info == nullptr) {
    return Status::InvalidArgument("unknown index kind \"" + std::string(kind) +
                                   "\" (known: " + KnownKinds() + ")");
  }
  return info;
}

// Parses `text` and runs the kind's validator. An index without a validator
// accepts no options.
Result<Options> ParseAndValidate(const IndexInfo& info, std::string_view text) {
  auto parsed = Options::Parse(text);
  if (!parsed.ok()) return parsed.status();
  Options opts = std::move(parsed).value();
  Status s = info.validate ? info.validate(opts) : opts.CheckKnown({});
  if (!s.ok()) return s;
  return opts;
}

// Threads assumed to have been writing when the pool crashed: nothing
// persistent records it, so the machine's hardware threads, at least 16.
uint64_t AssumedWriters() {
  return std::max<uint64_t>(16, std::thread::hardware_concurrency());
}

}  // namespace

uint64_t RecoveryBound(const IndexInfo& info, bool was_clean) {
  if (was_clean) return info.unreachable_after_clean;
  return info.unreachable_after_clean + uint64_t{info.unreachable_per_writer} * AssumedWriters();
}

Result<std::unique_ptr<Index>> create_index(std::string_view kind, std::string_view options,
                                            Pool* pool) {
  auto info_r = FindKind(kind);
  if (!info_r.ok()) return info_r.status();
  const IndexInfo& info = *info_r.value();
  auto opts_r = ParseAndValidate(info, options);
  if (!opts_r.ok()) return opts_r.status();
  const Options& opts = opts_r.value();

  if (!info.persistent) {
    if (pool != nullptr) {
      return Status::InvalidArgument("index kind \"" + info.name +
                                     "\" is volatile and takes no pool");
    }
    auto idx = info.create(IndexEnv{}, opts);
    if (!idx.ok()) return idx.status();
    if (idx.value() == nullptr) {
      return Status::InvalidArgument("index kind \"" + info.name + "\": factory returned null");
    }
    return std::unique_ptr<Index>(new IndexHandle(info, std::move(idx).value()));
  }

  if (pool == nullptr) {
    return Status::InvalidArgument("index kind \"" + info.name + "\" is persistent and needs a pool");
  }
  if (pool->kind() != kind) {
    return Status::WrongKind("pool is for index kind \"" + std::string(pool->kind()) +
                             "\", not \"" + info.name + "\"");
  }
  auto pool_opts = Options::Parse(pool->index_options());
  if (!pool_opts.ok()) {
    return Status::InvalidArgument("pool holds bad index options: " +
                                   std::string(pool_opts.status().message()));
  }
  if (pool_opts.value().ToString() != opts.ToString()) {
    return Status::InvalidArgument("pool was created with options \"" +
                                   pool_opts.value().ToString() + "\", not \"" + opts.ToString() +
                                   "\"");
  }
  auto lease = pool->AttachIndex("create_index");
  if (!lease.ok()) return lease.status();
  if (pool->root(0) != 0) {
    return Status::InvalidArgument("pool already holds an index; use open_index");
  }
  // From here on the pool is written: a failure leaves it marked unclean.
  Status s = pool->MarkInUse();
  if (!s.ok()) return s;
  auto failed = [pool](Status st) {
    pool->IndexFailed();
    return st;
  };
  auto alloc = alloc::Allocator::Attach(pool, /*fresh=*/true);
  if (!alloc.ok()) return failed(alloc.status());
  std::unique_ptr<alloc::Allocator> a = std::move(alloc).value();
  auto idx = info.create(IndexEnv{pool, a.get()}, opts);
  if (!idx.ok()) return failed(idx.status());
  if (idx.value() == nullptr) {
    return failed(
        Status::InvalidArgument("index kind \"" + info.name + "\": factory returned null"));
  }
  auto handle = std::make_unique<IndexHandle>(info, std::move(idx).value());
  handle->Attach(pool, std::move(a), std::move(lease).value());
  pool->IndexReady();
  return std::unique_ptr<Index>(std::move(handle));
}

namespace {

// The registry entry of the kind a pool holds, after the refusals that
// come before anything is read or written: a key-value store's pool opened
// as a plain index or the reverse, a header that does not match the pool,
// an unknown or volatile kind.
Result<const IndexInfo*> KindToOpen(const Pool& pool, const OpenIndexOptions& opt) {
  // A key-value store's index values point to the store's blocks: opened
  // without the store's visitor, recovery would free all of them
  // (docs/pool-format.md).
  const bool kv_pool = (pool.incompat_flags() & pm::kIncompatKvStore) != 0;
  if (kv_pool && opt.pairs == nullptr) {
    return Status::WrongKind("pool holds a key-value store over index kind \"" +
                             std::string(pool.kind()) +
                             "\", not a plain index: open it with KvStore::Open");
  }
  if (!kv_pool && opt.pairs != nullptr) {
    return Status::WrongKind("pool holds a plain index of kind \"" + std::string(pool.kind()) +
                             "\", not a key-value store: open it with Db::Open");
  }
  // The structure must match the header: root slot 5 is written only by a
  // key-value store (its clock reservation) and no index kind uses it. A
  // header without the store's flag over a pool holding one (a damaged or
  // forged header with a valid checksum) would let recovery free every
  // store block as unreachable.
  if (!kv_pool && pool.root(pm::kStoreSlot) != 0) {
    return Status::Corruption(
        "pool's header says a plain index of kind \"" + std::string(pool.kind()) +
        "\", but root slot 5 holds a key-value store's clock reservation: the header does not "
        "match the pool (damaged or rewritten); nothing was changed");
  }
  const IndexInfo* info = Registry::Get().Find(pool.kind());
  if (info == nullptr) {
    return Status::NotSupported("pool holds index kind \"" + std::string(pool.kind()) +
                                "\", which this build does not know (known: " + KnownKinds() + ")");
  }
  if (!info->persistent || !info->open) {
    return Status::Corruption("pool names index kind \"" + info->name +
                              "\", which is volatile");
  }
  return info;
}

// The allocator gives back whatever recovery did not reach; more than a
// crash can explain means damage cut reachable data off. Set before the
// kind's open, which checks it (CheckRecoveryBound) before its first
// write; FinishRecovery checks it again.
void SetReclaimBound(alloc::Allocator* a, const IndexInfo& info, const Pool& pool,
                     ReclaimBound bound) {
  switch (bound) {
    case ReclaimBound::kByCleanFlag:
      a->SetRecoveryBound(RecoveryBound(info, pool.was_clean()));
      break;
    case ReclaimBound::kAsIfClean:
      a->SetRecoveryBound(RecoveryBound(info, /*was_clean=*/true) +
                          (pool.was_clean() ? 0 : info.verify_after_crash));
      break;
    case ReclaimBound::kNone:
      a->SetRecoveryBound(UINT64_MAX);
      break;
  }
}

}  // namespace

Result<std::unique_ptr<Index>> open_index(Pool* pool, const OpenIndexOptions& opt) {
  if (pool == nullptr) return Status::InvalidArgument("open_index: no pool given");
  const ReclaimBound bound = opt.bound;
  auto info_r = KindToOpen(*pool, opt);
  if (!info_r.ok()) return info_r.status();
  const IndexInfo* info = info_r.value();
  auto opts_r = ParseAndValidate(*info, pool->index_options());
  if (!opts_r.ok()) {
    return Status::Corruption("pool holds bad index options: " +
                              std::string(opts_r.status().message()));
  }
  auto lease = pool->AttachIndex("open_index");
  if (!lease.ok()) return lease.status();
  // Attaching to a used page table only reads it (and refuses a malformed
  // one), so a refusal up to here leaves the pool untouched.
  auto alloc = alloc::Allocator::Attach(pool, /*fresh=*/false);
  if (!alloc.ok()) return alloc.status();
  std::unique_ptr<alloc::Allocator> a = std::move(alloc).value();
  // Recovery writes: the clean flag is cleared before the first write (by
  // the kind itself after its validation when it says so, else here), and
  // the pool stays unclean if recovery fails (the next open must recover
  // it again).
  Status s;
  if (!info->marks_in_use) {
    s = pool->MarkInUse();
    if (!s.ok()) return s;
  }
  auto failed = [pool](Status st) {
    pool->IndexFailed();
    return st;
  };
  SetReclaimBound(a.get(), *info, *pool, bound);
  if (opt.pairs != nullptr) opt.pairs->Start(pool, a.get());
  IndexEnv env{pool, a.get(), bound == ReclaimBound::kNone};
  env.pairs = opt.pairs;
  auto idx = info->open(env, opts_r.value());
  if (!idx.ok()) return failed(idx.status());
  if (idx.value() == nullptr) {
    return failed(Status::Corruption("index kind \"" + info->name + "\": open returned null"));
  }
  if (opt.pairs != nullptr) {
    // Every kind returns the visitor's error before its first write
    // (index/pair_visitor.h); this is the net for one that did not, before
    // FinishRecovery frees anything.
    s = opt.pairs->status();
    if (!s.ok()) {
      IndexHandle::Abandon(*idx.value());
      return failed(s);
    }
  }
  // FinishRecovery writes the page table (idempotent if open marked it).
  s = pool->MarkInUse();
  if (!s.ok()) return failed(s);
  s = a->FinishRecovery();
  if (!s.ok()) {
    // The index is destroyed on return, before its allocator: it must not
    // write (nvtree's close would allocate a snapshot from an allocator
    // still in recovery, which stops the process).
    IndexHandle::Abandon(*idx.value());
    return failed(s);
  }
  auto handle = std::make_unique<IndexHandle>(*info, std::move(idx).value());
  handle->Attach(pool, std::move(a), std::move(lease).value());
  pool->IndexReady();
  return std::unique_ptr<Index>(std::move(handle));
}

size_t ScanBatch(Index& index, Key* from, bool* more, size_t n, KV* out) {
  size_t got = index.scan(*from, n, out);
  size_t kept = 0;
  for (size_t i = 0; i < got; ++i) {
    if (out[i].key < *from || (kept > 0 && out[i].key <= out[kept - 1].key)) continue;
    out[kept++] = out[i];
  }
  *more = got == n && kept > 0;
  if (kept > 0) {
    Key last = out[kept - 1].key;
    if (last == UINT64_MAX) {
      *more = false;  // no key after it; last + 1 would wrap to 0
    } else {
      *from = last + 1;
    }
  }
  return kept;
}

Result<std::unique_ptr<Pool>> create_pool_for(std::string_view kind, std::string_view options,
                                              const std::string& path, PoolOptions pool_opt) {
  auto info_r = FindKind(kind);
  if (!info_r.ok()) return info_r.status();
  const IndexInfo& info = *info_r.value();
  auto opts_r = ParseAndValidate(info, options);
  if (!opts_r.ok()) return opts_r.status();
  if (!info.persistent) {
    return Status::InvalidArgument("index kind \"" + info.name + "\" is volatile and has no pool");
  }
  pool_opt.kind = info.name;
  pool_opt.index_options = opts_r.value().ToString();
  return Pool::Create(path, pool_opt);
}

}  // namespace pmindex
