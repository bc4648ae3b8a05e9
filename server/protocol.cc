#include "server/protocol.h"

#include <unistd.h>

#include "pmindex/version.h"

namespace pmindex::server {

std::vector<std::pair<std::string, std::string>> StatsReport(Items& items) {
  Stats& s = items.stats();
  const StoreInfo info = items.Info();
  const int64_t now = items.NowMs();
  std::vector<std::pair<std::string, std::string>> r;
  auto add = [&r](const char* name, auto v) { r.emplace_back(name, std::to_string(v)); };
  auto counter = [&](const char* name, const Stats::Counter& c) { add(name, Stats::Read(c)); };
  add("pid", static_cast<long long>(getpid()));
  add("uptime", (now - s.start_ms) / 1000);
  add("time", now / 1000);
  r.emplace_back("version", PMINDEX_VERSION_STRING);
  r.emplace_back("engine", info.engine);
  add("threads", s.threads);
  counter("curr_connections", s.curr_connections);
  counter("total_connections", s.total_connections);
  counter("rejected_connections", s.rejected_connections);
  counter("bytes_read", s.bytes_read);
  counter("bytes_written", s.bytes_written);
  counter("protocol_errors", s.protocol_errors);
  add("curr_items", info.keys);
  add("pm_bytes", info.pm_bytes);
  counter("cmd_get", s.cmd_get);
  counter("cmd_set", s.cmd_set);
  counter("cmd_flush", s.cmd_flush);
  counter("cmd_touch", s.cmd_touch);
  counter("get_hits", s.get_hits);
  counter("get_misses", s.get_misses);
  counter("get_expired", s.get_expired);
  counter("delete_hits", s.delete_hits);
  counter("delete_misses", s.delete_misses);
  counter("incr_hits", s.incr_hits);
  counter("incr_misses", s.incr_misses);
  counter("decr_hits", s.decr_hits);
  counter("decr_misses", s.decr_misses);
  counter("cas_hits", s.cas_hits);
  counter("cas_misses", s.cas_misses);
  counter("cas_badval", s.cas_badval);
  counter("touch_hits", s.touch_hits);
  counter("touch_misses", s.touch_misses);
  counter("expired_swept", s.expired_keys);
  counter("reclaimed_keys", s.reclaimed_keys);
  return r;
}

std::string StoreErrorText(const Status& s) {
  if (s.is_out_of_space()) return "out of memory storing object";
  return s.ToString();
}

}  // namespace pmindex::server
