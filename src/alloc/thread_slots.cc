#include "alloc/thread_slots.h"

#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pm/persist.h"
#include "sync/mutex.h"
#include "util/check.h"

namespace pmindex::alloc {
namespace {

struct Registry {
  sync::Mutex mu;
  std::unordered_map<uint64_t, ThreadSlotOwner*> owners PMINDEX_GUARDED_BY(mu);
  uint64_t next_id PMINDEX_GUARDED_BY(mu) = 1;
};

// Leaked on purpose: thread_local destructors of late threads may run after
// static destructors.
Registry& TheRegistry() {
  static Registry* r = new Registry;
  return *r;
}

struct ThreadSlots;
void NotifyExit(ThreadSlots& t);

// The last slot looked up, for the fast path. Constant-initialized, so
// reading them never constructs tl_slots.
thread_local uint64_t tl_last_id = 0;
thread_local void* tl_last = nullptr;

struct ThreadSlots {
  std::vector<std::pair<uint64_t, void*>> entries;
  ~ThreadSlots() { NotifyExit(*this); }
};

thread_local ThreadSlots tl_slots;

}  // namespace

// Exposes ThreadExited to the thread-exit hook without making it public.
struct ThreadSlotAccess {
  static void Exit(ThreadSlotOwner* o, void* slot) { o->ThreadExited(slot); }
};

namespace {
void NotifyExit(ThreadSlots& t) {
  Registry& r = TheRegistry();
  sync::MutexLock lock(r.mu);
  for (auto& [id, slot] : t.entries) {
    auto it = r.owners.find(id);
    if (it != r.owners.end()) ThreadSlotAccess::Exit(it->second, slot);
  }
  t.entries.clear();
  tl_last_id = 0;
  tl_last = nullptr;
}
}  // namespace

ThreadSlotOwner::ThreadSlotOwner() {
  Registry& r = TheRegistry();
  sync::MutexLock lock(r.mu);
  id_ = r.next_id++;
  r.owners.emplace(id_, this);
}

ThreadSlotOwner::~ThreadSlotOwner() {
  PMINDEX_CHECK(!registered_, "ThreadSlotOwner destroyed without Unregister()");
}

void ThreadSlotOwner::Unregister() {
  Registry& r = TheRegistry();
  sync::MutexLock lock(r.mu);
  r.owners.erase(id_);
  registered_ = false;
}

void* ThreadSlotOwner::Slot() {
  if (__builtin_expect(tl_last_id == id_, 1)) return tl_last;
  return SlowSlot();
}

void* ThreadSlotOwner::SlowSlot() {
  // ThreadExited may write PM (a flushed cache gives pages back), which
  // counts in the persistence layer's thread counters. Registering those
  // first makes them outlive tl_slots (thread_local objects are destroyed
  // in reverse order of construction), so no count is lost and no exited
  // thread's counter block is re-registered.
  pm::detail::Mine();
  ThreadSlots& t = tl_slots;
  void* slot = nullptr;
  for (auto& [id, s] : t.entries) {
    if (id == id_) slot = s;
  }
  if (slot == nullptr) {
    // Drop entries of owners that are gone before the list grows.
    if (t.entries.size() >= 8) {
      Registry& r = TheRegistry();
      sync::MutexLock lock(r.mu);
      // A loop, not erase_if with a lambda: the analysis checks a lambda as
      // a function of its own, which does not hold r.mu.
      size_t kept = 0;
      for (const auto& e : t.entries) {
        if (r.owners.contains(e.first)) t.entries[kept++] = e;
      }
      t.entries.resize(kept);
    }
    slot = CreateSlot();
    t.entries.emplace_back(id_, slot);
  }
  tl_last_id = id_;
  tl_last = slot;
  return slot;
}

}  // namespace pmindex::alloc
