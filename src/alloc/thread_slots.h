// Per-thread state owned by an object that can coexist with others of its
// kind in one process (two Allocators on two pools, an EpochDomain each).
//
// Each owner gets a process-unique id that is never reused. A thread's
// slots live in a thread_local list keyed by owner id, so a stale entry of
// a destroyed owner is never dereferenced (its id is simply not found in
// the owner registry). The owner creates and owns the slot objects; the
// thread only keeps pointers.
//
// Lifetime protocol (one process-wide registry mutex):
// - Thread exit: under the registry mutex, for each of the thread's slots
//   whose owner is still registered, ThreadExited(slot) is called.
// - Owner destruction: the most-derived destructor calls Unregister() first;
//   after it returns no ThreadExited call is running or will start, and the
//   owner may free every slot.
// Lock order: registry mutex, then the owner's own mutexes.
#pragma once

#include <cstdint>

namespace pmindex::alloc {

class ThreadSlotOwner {
 public:
  ThreadSlotOwner();
  virtual ~ThreadSlotOwner();  // checks that Unregister() was called
  ThreadSlotOwner(const ThreadSlotOwner&) = delete;
  ThreadSlotOwner& operator=(const ThreadSlotOwner&) = delete;

  uint64_t owner_id() const { return id_; }

 protected:
  // The calling thread's slot for this owner, created by CreateSlot() on
  // first use. Not to be called from a thread_local destructor.
  void* Slot();
  // Returns a new slot for the calling thread. Called without the registry
  // mutex held; must be thread-safe.
  virtual void* CreateSlot() = 0;
  // The thread that used `slot` is exiting. Called with the registry mutex
  // held while the owner is registered; must not call Slot().
  virtual void ThreadExited(void* slot) = 0;
  // Stops ThreadExited callbacks. Idempotent.
  void Unregister();

 private:
  friend struct ThreadSlotAccess;
  void* SlowSlot();
  uint64_t id_;
  bool registered_ = true;
};

}  // namespace pmindex::alloc
