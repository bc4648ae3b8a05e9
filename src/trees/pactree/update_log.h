// PACTree's asynchronous search-layer updates (docs/layout/pactree.md,
// "How this differs from the paper"): a split appends an insert of
// (anchor, new node), and a merge a remove of (anchor, node merged away),
// to the update log of the NUMA node its thread runs on, and returns; an
// updater thread applies the logs to the search layer (search_layer.h).
// Until it has, readers reach a new node from its left sibling, and a
// reader the layer sends to a node merged away is sent on to the node that
// took its pairs (data_node.h, `merged`): the data layer is the truth, and
// no reader depends on when an entry is applied.
//
// Order: an entry's effect depends on the entries before it (the remove
// of a node must follow the insert of that node). Every entry takes a
// sequence number when it is queued, under its log's mutex, and the
// updater takes a snapshot of all logs at once (every log's mutex held)
// and applies it in sequence order: an entry queued after another entry
// returned is applied after it. A node's remove is queued only after its
// insert returned (the merge locks the node, which the split that created
// it held until its insert was queued).
//
// Freeing: applying a remove retires the node to the allocator's epochs
// (it is out of the chain since its merge and out of the layer now), so a
// reader that still holds it keeps it readable; an insert of a node
// already merged away is skipped (its remove follows in the same order).
//
// The logs are DRAM, also with the persistent search layer: an entry lost
// in a crash is an anchor the layer lacks or a leaf naming a node the
// chain no longer holds, and open, which walks every data node anyway,
// finds both by comparing the layer's leaves with the chain (the first are
// deferred here, Defer; the second removed at once). One log per node of
// the allocator's NUMA topology (real, or simulated: pmbench
// --numa-nodes), each with its own mutex, so that writers of different
// nodes never share a log line; one updater drains them all in turn (the
// paper's updater per NUMA node would be one thread on this machine's
// single node). Entries are applied by one thread at a time (apply_mu_),
// never while the allocator is still in recovery (open), and an insert the
// layer could not take (out of space) stays queued with every entry after
// it.
//
// Thread safety: Append, Defer and Drain from any thread; Stop once, by
// the owner.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "alloc/allocator.h"
#include "sync/mutex.h"
#include "trees/pactree/search_layer.h"

namespace pmindex::pactree {

class UpdateLogs {
 public:
  // Whether a data node has been merged away (its insert is then skipped).
  using IsDead = std::function<bool(uint64_t node)>;

  // background: an updater thread applies the logs; else Append applies
  // its entry at once (updater=inline, for tests and measurements).
  UpdateLogs(SearchLayer& search, alloc::Allocator& alloc, bool background, IsDead dead)
      : search_(search), alloc_(alloc), topo_(alloc.topology()), dead_(std::move(dead)) {
    const int n = std::clamp(topo_.nodes(), 1, 64);
    for (int i = 0; i < n; ++i) logs_.push_back(std::make_unique<Log>());
    if (background) updater_ = std::thread([this] { Run(); });
  }
  ~UpdateLogs() { Stop(); }
  UpdateLogs(const UpdateLogs&) = delete;
  UpdateLogs& operator=(const UpdateLogs&) = delete;

  // A split's (anchor, new node), or (remove) a merge's (anchor, node
  // merged away: out of the chain, retired once the entry is applied).
  void Append(Key anchor, uint64_t node, bool remove = false) {
    Queue(anchor, node, remove, static_cast<size_t>(topo_.node_of_this_thread()));
    if (!updater_.joinable()) {
      ApplyAll();  // updater=inline
      return;
    }
    // A remove is not worth a wake-up (a system call when the updater
    // sleeps): until it is applied, readers the layer sends to the node
    // merged away go on to its left sibling, and the node is only freed
    // later. The updater's timeout or the next insert's wake-up applies it.
    if (remove) return;
    // Pairs with Run's store of sleeping_ and its check of appended_: one
    // of the two sees the other (both sequentially consistent).
    if (sleeping_.load(std::memory_order_seq_cst)) {
      sync::MutexLock g(wake_mu_);
      wake_.notify_one();
    }
  }

  // Queues an insert without applying it or waking the updater (open's
  // repairs; the updater's timeout or the next Drain applies it).
  void Defer(Key anchor, uint64_t node) { Queue(anchor, node, false, 0); }

  // Returns once every entry appended before the call is in the search
  // layer (applying what is still in the logs on the calling thread), or
  // the layer refused one (out of space: it and those after it stay
  // pending).
  void Drain() { ApplyAll(); }

  // Drains, then runs fn while no entry can be applied (the updater's
  // retries of entries the layer refused included): verify() reads the
  // search layer and its counters as one state.
  template <class Fn>
  auto Quiesced(Fn fn) {
    sync::MutexLock apply(apply_mu_);
    ApplyAllLocked();
    return fn();
  }

  // Drains and ends the updater. Idempotent.
  void Stop() {
    if (updater_.joinable()) {
      {
        sync::MutexLock g(wake_mu_);
        stop_ = true;
      }
      wake_.notify_one();
      updater_.join();
    }
    ApplyAll();
  }

  // Entries appended but not yet applied.
  uint64_t pending() const {
    return appended_.load(std::memory_order_seq_cst) - applied_.load(std::memory_order_seq_cst);
  }
  size_t logs() const { return logs_.size(); }

 private:
  struct Entry {
    uint64_t seq;
    Key anchor;
    uint64_t node;
    bool remove;
  };
  struct alignas(64) Log {
    sync::Mutex mu;
    std::vector<Entry> entries PMINDEX_GUARDED_BY(mu);
  };

  void Queue(Key anchor, uint64_t node, bool remove, size_t log_index) {
    Log& log = *logs_[log_index % logs_.size()];
    {
      sync::MutexLock g(log.mu);
      log.entries.push_back(
          Entry{next_seq_.fetch_add(1, std::memory_order_relaxed), anchor, node, remove});
    }
    appended_.fetch_add(1, std::memory_order_seq_cst);
  }

  // Moves every log's entries to *out with all logs' mutexes held at
  // once, so that the snapshot holds every entry queued before any entry
  // it holds. (The analysis cannot follow a loop of locks.)
  void Snapshot(std::vector<Entry>* out) PMINDEX_NO_THREAD_SAFETY_ANALYSIS {
    for (auto& log : logs_) log->mu.Lock();
    for (auto& log : logs_) {
      out->insert(out->end(), log->entries.begin(), log->entries.end());
      log->entries.clear();
    }
    for (auto it = logs_.rbegin(); it != logs_.rend(); ++it) (*it)->mu.Unlock();
  }

  bool Apply(const Entry& e) {
    if (e.remove) {
      search_.Remove(e.anchor, e.node);
      alloc_.Retire(PPtr(e.node));  // out of the chain and of the layer now
      return true;
    }
    return dead_(e.node) || search_.Insert(e.anchor, e.node);
  }

  // Applies the entries left by the last call (refused) and what the logs
  // hold, in sequence order; stops at an entry the layer refuses.
  void ApplyAll() {
    sync::MutexLock apply(apply_mu_);
    ApplyAllLocked();
  }

  void ApplyAllLocked() PMINDEX_REQUIRES(apply_mu_) {
    if (alloc_.in_recovery()) return;  // open has not finished
    std::vector<Entry> batch;
    batch.swap(left_);
    Snapshot(&batch);
    std::sort(batch.begin(), batch.end(),
              [](const Entry& a, const Entry& b) { return a.seq < b.seq; });
    size_t done = 0, retired = 0;
    for (; done < batch.size() && Apply(batch[done]); ++done) retired += batch[done].remove;
    applied_.fetch_add(done, std::memory_order_release);
    left_.assign(batch.begin() + static_cast<ptrdiff_t>(done), batch.end());
    // Frees the nodes retired if no reader can hold them any more (else a
    // later Reclaim, or the allocator's every 64 retires, does).
    if (retired != 0) alloc_.Reclaim();
  }

  void Run() {
    uint64_t seen = 0;  // appended_ when the last apply began
    for (;;) {
      {
        sync::MutexLock l(wake_mu_);
        sleeping_.store(true, std::memory_order_seq_cst);
        // Append wakes it; the timeout retries entries left pending (open
        // had not finished, or the layer was out of space).
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
        while (!stop_ && appended_.load(std::memory_order_seq_cst) == seen &&
               wake_.wait_until(l.Native(), until) == std::cv_status::no_timeout) {
        }
        sleeping_.store(false, std::memory_order_relaxed);
        if (stop_) return;
      }
      seen = appended_.load(std::memory_order_seq_cst);
      ApplyAll();
    }
  }

  SearchLayer& search_;
  alloc::Allocator& alloc_;
  alloc::Topology& topo_;
  IsDead dead_;
  sync::Mutex apply_mu_;                                   // one ApplyAll at a time
  std::vector<Entry> left_ PMINDEX_GUARDED_BY(apply_mu_);  // refused, and those after
  std::vector<std::unique_ptr<Log>> logs_;
  std::atomic<uint64_t> next_seq_{0};
  std::atomic<uint64_t> appended_{0};
  std::atomic<uint64_t> applied_{0};
  std::atomic<bool> sleeping_{false};
  sync::Mutex wake_mu_;
  std::condition_variable wake_;  // waits on wake_mu_'s MutexLock::Native()
  bool stop_ PMINDEX_GUARDED_BY(wake_mu_) = false;
  std::thread updater_;
};

}  // namespace pmindex::pactree
