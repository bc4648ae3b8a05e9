// PACTree's asynchronous search-layer updates (docs/layout/pactree.md,
// "How this differs from the paper"): a split appends (anchor, node) to the update log of the
// NUMA node its thread runs on, and returns; an updater thread applies the
// logs to the search layer (search_layer.h). Until it has, readers reach
// the new node from its left sibling (the data layer is the truth), so no
// reader depends on when an entry is applied.
//
// The logs are DRAM, also with the persistent search layer: an entry lost
// in a crash is an anchor the layer lacks, and open, which walks every
// data node anyway, finds each such anchor by comparing the layer's leaves
// with the chain and defers it here (Defer), as the lost entry would have
// been. One log per node of the allocator's NUMA topology (real, or
// simulated: pmbench --numa-nodes), each with its own mutex, so that
// writers of different nodes never share a log line; one updater drains
// them all in turn (the paper's updater per NUMA node would be one thread
// on this machine's single node). Entries are applied by one thread at a
// time (apply_mu_), never while the allocator is still in recovery (open),
// and an entry the layer could not take (out of space) stays in its log.
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
  // background: an updater thread applies the logs; else Append applies
  // its entry at once (updater=inline, for tests and measurements).
  UpdateLogs(SearchLayer& search, alloc::Allocator& alloc, bool background)
      : search_(search), alloc_(alloc), topo_(alloc.topology()) {
    const int n = std::clamp(topo_.nodes(), 1, 64);
    for (int i = 0; i < n; ++i) logs_.push_back(std::make_unique<Log>());
    if (background) updater_ = std::thread([this] { Run(); });
  }
  ~UpdateLogs() { Stop(); }
  UpdateLogs(const UpdateLogs&) = delete;
  UpdateLogs& operator=(const UpdateLogs&) = delete;

  void Append(Key anchor, uint64_t node) {
    Defer(anchor, node, static_cast<size_t>(topo_.node_of_this_thread()));
    if (!updater_.joinable()) {
      ApplyAll();  // updater=inline
      return;
    }
    // Pairs with Run's store of sleeping_ and its check of appended_: one
    // of the two sees the other (both sequentially consistent).
    if (sleeping_.load(std::memory_order_seq_cst)) {
      sync::MutexLock g(wake_mu_);
      wake_.notify_one();
    }
  }

  // Queues an entry without applying it or waking the updater (open's
  // repairs; the updater's timeout or the next Drain applies it).
  void Defer(Key anchor, uint64_t node, size_t log_index = 0) {
    Log& log = *logs_[log_index % logs_.size()];
    {
      sync::MutexLock g(log.mu);
      log.entries.emplace_back(anchor, node);
    }
    appended_.fetch_add(1, std::memory_order_seq_cst);
  }

  // Returns once every entry appended before the call is in the search
  // layer (applying what is still in the logs on the calling thread), or
  // the layer refused one (out of space: it stays pending).
  void Drain() { ApplyAll(); }

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

  // Entries appended but not yet in the search layer.
  uint64_t pending() const {
    return appended_.load(std::memory_order_seq_cst) - applied_.load(std::memory_order_seq_cst);
  }
  size_t logs() const { return logs_.size(); }

 private:
  struct alignas(64) Log {
    sync::Mutex mu;
    std::vector<std::pair<Key, uint64_t>> entries PMINDEX_GUARDED_BY(mu);
  };

  // Applies what the logs hold, one log at a time. An entry the layer
  // refuses goes back to the front of its log with those after it.
  void ApplyAll() {
    if (alloc_.in_recovery()) return;  // open has not finished
    sync::MutexLock apply(apply_mu_);
    std::vector<std::pair<Key, uint64_t>> batch;
    for (auto& log : logs_) {
      {
        sync::MutexLock g(log->mu);
        batch.swap(log->entries);
      }
      size_t done = 0;
      while (done < batch.size() && search_.Insert(batch[done].first, batch[done].second)) ++done;
      applied_.fetch_add(done, std::memory_order_release);
      if (done < batch.size()) {
        sync::MutexLock g(log->mu);
        log->entries.insert(log->entries.begin(), batch.begin() + static_cast<ptrdiff_t>(done),
                            batch.end());
        return;
      }
      batch.clear();
    }
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
  sync::Mutex apply_mu_;  // one ApplyAll at a time
  std::vector<std::unique_ptr<Log>> logs_;
  std::atomic<uint64_t> appended_{0};
  std::atomic<uint64_t> applied_{0};
  std::atomic<bool> sleeping_{false};
  sync::Mutex wake_mu_;
  std::condition_variable wake_;  // waits on wake_mu_'s MutexLock::Native()
  bool stop_ PMINDEX_GUARDED_BY(wake_mu_) = false;
  std::thread updater_;
};

}  // namespace pmindex::pactree
