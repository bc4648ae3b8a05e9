#include "alloc/epoch.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "util/check.h"

namespace pmindex::alloc {

namespace {

long Membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0U, 0); }

// True once the process is registered for private expedited membarrier,
// which lets Enter announce with a plain store: the advancing thread's
// membarrier then serves as the store-load fence of every running reader.
// Without it (old kernel, seccomp), Enter falls back to a seq_cst store.
bool AsymmetricFence() {
  static const bool ready = [] {
    const long cmds = Membarrier(MEMBARRIER_CMD_QUERY);
    if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  }();
  return ready;
}

}  // namespace

EpochDomain::EpochDomain(Reclaimer reclaimer)
    : reclaimer_(std::move(reclaimer)), asymmetric_(AsymmetricFence()) {}

EpochDomain::~EpochDomain() { Unregister(); }

void* EpochDomain::CreateSlot() {
  auto r = std::make_unique<Record>();
  Record* p = r.get();
  sync::MutexLock lock(mu_);
  records_.push_back(std::move(r));
  return p;
}

void EpochDomain::ThreadExited(void* slot) {
  auto* r = static_cast<Record*>(slot);
  sync::MutexLock lock(mu_);
  {
    sync::MutexLock rl(r->mu);
    orphans_.insert(orphans_.end(), r->limbo.begin(), r->limbo.end());
  }
  std::erase_if(records_, [&](const std::unique_ptr<Record>& p) { return p.get() == r; });
}

void EpochDomain::Enter() {
  Record& r = Mine();
  if (r.depth++ != 0) return;
  uint64_t e = global_.load(std::memory_order_seq_cst);
  for (;;) {
    if (asymmetric_) {
      // No locked instruction here: a full barrier would also wait for the
      // write-back of every line this thread flushed before (the previous
      // operation's persists), which otherwise overlaps this operation.
      // TryAdvance's membarrier orders this store before the load below.
      r.announce.store(e << 1 | 1, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      r.announce.store(e << 1 | 1, std::memory_order_seq_cst);
    }
    uint64_t again = global_.load(std::memory_order_seq_cst);
    if (again == e) return;
    e = again;
  }
}

void EpochDomain::Exit() {
  Record& r = Mine();
  PMINDEX_CHECK(r.depth != 0, "EpochDomain::Exit without Enter");
  // Release: the section's reads happen-before an advance that sees 0.
  if (--r.depth == 0) r.announce.store(0, std::memory_order_release);
}

bool EpochDomain::InCriticalSection() { return Mine().depth != 0; }

void EpochDomain::Retire(uint64_t item) {
  Record& r = Mine();
  Enter();
  // The tag is E as read after the unlink is visible (Enter's plain store
  // no longer orders the caller's earlier stores before the load below):
  // a seq_cst read-modify-write of this thread's own word (adding 0) is
  // that full barrier, and unlike atomic_thread_fence it builds under
  // GCC's -fsanitize=thread.
  r.announce.fetch_add(0, std::memory_order_seq_cst);
  {
    sync::MutexLock lock(r.mu);
    r.limbo.emplace_back(global_.load(std::memory_order_seq_cst), item);
  }
  pending_.fetch_add(1, std::memory_order_relaxed);
  Exit();
  if (++r.retires >= kReclaimEvery) {
    r.retires = 0;
    Reclaim();
  }
}

bool EpochDomain::TryAdvance() {
  sync::MutexLock lock(mu_);
  // A full fence on every running thread of the process: a reader's plain
  // announce store is visible below, or that reader's next load of E (or of
  // anything unlinked before this call) comes after the fence.
  if (asymmetric_)
    PMINDEX_CHECK(Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0, "membarrier failed");
  uint64_t e = global_.load(std::memory_order_seq_cst);
  for (const auto& r : records_) {
    uint64_t a = r->announce.load(std::memory_order_seq_cst);
    if ((a & 1) != 0 && (a >> 1) != e) return false;
  }
  return global_.compare_exchange_strong(e, e + 1, std::memory_order_seq_cst);
}

size_t EpochDomain::Reclaim() {
  // Two advances: with no reader inside, everything retired before this
  // call becomes eligible.
  if (TryAdvance()) TryAdvance();
  const uint64_t e = global_.load(std::memory_order_seq_cst);
  auto safe = [e](const std::pair<uint64_t, uint64_t>& x) { return x.first + 2 <= e; };

  std::vector<uint64_t> ready;
  {
    sync::MutexLock lock(mu_);
    for (const auto& r : records_) {
      sync::MutexLock rl(r->mu);
      // Tags in a limbo list never decrease: the safe ones are a prefix.
      auto end = std::find_if_not(r->limbo.begin(), r->limbo.end(), safe);
      for (auto it = r->limbo.begin(); it != end; ++it) ready.push_back(it->second);
      r->limbo.erase(r->limbo.begin(), end);
    }
    for (const auto& x : orphans_) {
      if (safe(x)) ready.push_back(x.second);
    }
    std::erase_if(orphans_, safe);
  }
  pending_.fetch_sub(ready.size(), std::memory_order_relaxed);
  for (uint64_t item : ready) reclaimer_(item);
  return ready.size();
}

}  // namespace pmindex::alloc
