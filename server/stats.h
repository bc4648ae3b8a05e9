// Counters of a running pmserver, shared by the server and both
// protocols. Relaxed atomics: each is exact, the set is not a snapshot.
#pragma once

#include <atomic>
#include <cstdint>

namespace pmindex::server {

struct Stats {
  using Counter = std::atomic<uint64_t>;
  int64_t start_ms = 0;  // unix time in ms when the server started
  int threads = 0;       // threads running the event loop

  Counter curr_connections{0};
  Counter total_connections{0};
  Counter rejected_connections{0};  // over --max-connections
  Counter bytes_read{0};
  Counter bytes_written{0};
  Counter protocol_errors{0};  // malformed requests (either protocol)

  Counter cmd_get{0};  // keys looked up
  Counter cmd_set{0};  // storage commands
  Counter cmd_flush{0};
  Counter cmd_touch{0};
  Counter get_hits{0};
  Counter get_misses{0};
  Counter get_expired{0};  // misses on an expired item (removed lazily)
  Counter delete_hits{0};
  Counter delete_misses{0};
  Counter incr_hits{0};
  Counter incr_misses{0};
  Counter decr_hits{0};
  Counter decr_misses{0};
  Counter cas_hits{0};
  Counter cas_misses{0};
  Counter cas_badval{0};
  Counter touch_hits{0};
  Counter touch_misses{0};
  Counter expired_keys{0};    // expired items removed by the background sweep ("expired_swept")
  Counter reclaimed_keys{0};  // keys of flushed databases removed in the background

  static void Add(Counter& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }
  static uint64_t Read(const Counter& c) { return c.load(std::memory_order_relaxed); }
};

}  // namespace pmindex::server
