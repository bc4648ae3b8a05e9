// The server's background work, on one thread of its own: removing the
// keys of flushed databases (Databases::ReclaimStep), the elements of
// deleted collections (Databases::ReclaimGarbageStep, collections.h) and
// expired items and collections nobody reads (Databases::ExpireStep,
// Redis's active expiry).
//
// Bounded: a cycle runs every Options::interval_ms and stops working after
// Options::busy_ms (by default a quarter of one CPU at most, as Redis's
// active expiry). Within that, it reclaims flushed keys, then garbage
// generations' elements, in batches while any are left, and examines
// Options::expire_keys_per_cycle stored items for expiry, going on while
// a batch finds more than a quarter of its items expired (expired data is
// piling up). Each removal is one store call of its own (an expired
// collection's, one transaction), so requests wait for no cycle, only (as
// for any concurrent writer) for a store latch now and then.
//
// The sweep has no index of the items that have an expiry: it walks every
// item, so a pass over N items takes about N / expire_keys_per_cycle
// cycles while few are expired (docs/server.md "Expiry"). It does not run
// while no stored key has an expiry (the key counters say so).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <thread>

#include "server/databases.h"
#include "server/items.h"
#include "server/stats.h"
#include "sync/mutex.h"

namespace pmindex::server {

class Maintenance {
 public:
  struct Options {
    int interval_ms = 100;
    int busy_ms = 25;
    size_t expire_keys_per_cycle = 2000;
    // Keys per step (their values are read with them: a small batch
    // bounds the memory a step holds).
    size_t batch = 32;
  };
  struct Work {
    size_t expired = 0;    // items removed by the expiry sweep
    size_t reclaimed = 0;  // keys of flushed databases removed
    size_t garbage = 0;    // records of garbage generations removed
  };

  // `dbs` and `stats` must outlive this object.
  Maintenance(Databases& dbs, Stats& stats, Items::Clock now_ms, Options options);
  ~Maintenance();  // Stop()
  Maintenance(const Maintenance&) = delete;
  Maintenance& operator=(const Maintenance&) = delete;

  // Starts the thread (one cycle per interval); Stop ends it and waits.
  void Start();
  void Stop();
  // One cycle's work, on the caller's thread (the thread calls it; tests
  // too). Counts what it removed in Stats (expired_keys, reported as
  // expired_swept, and reclaimed_keys).
  Work Cycle();

 private:
  void Run();
  // The expiry part of a cycle: items removed.
  size_t ExpireSweep(std::chrono::steady_clock::time_point deadline);

  Databases& dbs_;
  Stats& stats_;
  Items::Clock now_ms_;
  const Options options_;
  sync::Mutex mu_;
  std::condition_variable cv_;
  bool stop_ PMINDEX_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace pmindex::server
