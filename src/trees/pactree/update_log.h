// PACTree's asynchronous search-layer updates (docs/layout/pactree.md,
// "Search layer"): a split appends (anchor, node) to the update log of the
// NUMA node its thread runs on, and returns; an updater thread applies the
// logs to the search layer. Until it has, readers reach the new node from
// its left sibling (the data layer is the truth), so no reader depends on
// when an entry is applied.
//
// Here the search layer lives in DRAM and is rebuilt from the data layer at
// open, so the logs are DRAM too: an entry lost in a crash costs nothing,
// the rebuild covers it. One log per node of the allocator's NUMA topology
// (real, or simulated: pmbench --numa-nodes), each with its own mutex, so
// that writers of different nodes never share a log line; one updater
// drains them all in turn (the paper's updater per NUMA node would be
// one thread on this machine's single node).
//
// Thread safety: Append and Drain from any thread; Stop once, by the owner.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "alloc/allocator.h"
#include "common/olc_btree.h"

namespace pmindex::pactree {

// anchor key -> PPtr raw of the data node. 30 keys per node: 512-byte nodes.
using SearchLayer = OlcBTree<30, 30>;

class UpdateLogs {
 public:
  // background: an updater thread applies the logs; else Append applies
  // its entry at once (updater=inline, for tests and measurements).
  UpdateLogs(SearchLayer& search, alloc::Topology& topo, bool background)
      : search_(search), topo_(topo) {
    const int n = std::clamp(topo.nodes(), 1, 64);
    for (int i = 0; i < n; ++i) logs_.push_back(std::make_unique<Log>());
    if (background) updater_ = std::thread([this] { Run(); });
  }
  ~UpdateLogs() { Stop(); }
  UpdateLogs(const UpdateLogs&) = delete;
  UpdateLogs& operator=(const UpdateLogs&) = delete;

  void Append(Key anchor, uint64_t node) {
    if (!updater_.joinable()) {
      search_.upsert(anchor, node);
      return;
    }
    Log& log = *logs_[static_cast<size_t>(topo_.node_of_this_thread()) % logs_.size()];
    {
      std::lock_guard g(log.mu);
      log.entries.emplace_back(anchor, node);
    }
    appended_.fetch_add(1, std::memory_order_seq_cst);
    // Pairs with Run's store of sleeping_ and its check of pending(): one
    // of the two sees the other (both sequentially consistent).
    if (sleeping_.load(std::memory_order_seq_cst)) {
      std::lock_guard g(wake_mu_);
      wake_.notify_one();
    }
  }

  // Returns once every entry appended before the call is in the search
  // layer (applying what is still in the logs on the calling thread).
  void Drain() {
    const uint64_t target = appended_.load(std::memory_order_seq_cst);
    ApplyAll();
    while (applied_.load(std::memory_order_acquire) < target) std::this_thread::yield();
  }

  // Drains and ends the updater. Idempotent.
  void Stop() {
    if (updater_.joinable()) {
      {
        std::lock_guard g(wake_mu_);
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
    std::mutex mu;
    std::vector<std::pair<Key, uint64_t>> entries;
  };

  void ApplyAll() {
    std::vector<std::pair<Key, uint64_t>> batch;
    for (auto& log : logs_) {
      {
        std::lock_guard g(log->mu);
        batch.swap(log->entries);
      }
      for (const auto& [anchor, node] : batch) search_.upsert(anchor, node);
      applied_.fetch_add(batch.size(), std::memory_order_release);
      batch.clear();
    }
  }

  void Run() {
    for (;;) {
      {
        std::unique_lock l(wake_mu_);
        sleeping_.store(true, std::memory_order_seq_cst);
        // The timeout only bounds a wake-up lost to a bug; Append wakes it.
        wake_.wait_for(l, std::chrono::milliseconds(50), [&] { return stop_ || pending() > 0; });
        sleeping_.store(false, std::memory_order_relaxed);
        if (stop_) return;
      }
      ApplyAll();
    }
  }

  SearchLayer& search_;
  alloc::Topology& topo_;
  std::vector<std::unique_ptr<Log>> logs_;
  std::atomic<uint64_t> appended_{0};
  std::atomic<uint64_t> applied_{0};
  std::atomic<bool> sleeping_{false};
  std::mutex wake_mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread updater_;
};

}  // namespace pmindex::pactree
