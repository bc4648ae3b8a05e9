// pmclient's driver: runs the shared workloads (workloads/workload.h)
// against a key-value server over the memcached text protocol or RESP2,
// one blocking connection per client thread, and reports as pmbench does
// (docs/benchmarking.md "Servers: pmclient").
//
// A run, repeated --repeat times: empty the server (flush_all / FLUSHALL)
// and load the N records (unless --no-load), then run each phase of the
// workload. Each thread sends a batch of up to --pipeline operations and
// waits for all their replies before the next batch (closed loop; with
// --pipeline 1 every request waits for its reply). An operation that needs
// two requests in turn (read-modify-write, a scan's values, the sorted-set
// upkeep of --scan-mode zset) sends the second after the first's reply.
//
// Operations (memcached | RESP):
//   lookup  get K | GET K                    the value is checked
//   update  set K | SET K V
//   insert  add K | SET K V NX               "not stored" is an error: the key must be fresh
//   delete  delete K | DEL K                 "not found" is a miss
//   rmw     get K, then set K | GET K, then SET K V (no write if the read missed)
//   scan    memcached: the phase is skipped (no ordered range command);
//           RESP --scan-mode range: SCAN <cursor of K> COUNT L, then MGET
//             of the keys (pmserver's SCAN walks keys in (hash slot, key)
//             order, its store's, and its cursor names the key to start
//             from: the scan ascends in that order);
//           RESP --scan-mode zset: ZRANGEBYLEX Z [K + LIMIT 0 L, then MGET
//             (a sorted set of the keys, as YCSB's Redis binding keeps one,
//             but scored 0 so that it is in key order: every insert also
//             does ZADD Z 0 K and every delete ZREM Z K, from the load on,
//             when some phase of the run scans);
//           the scan must start at K, ascend, and every value must check.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/wire.h"
#include "pmindex/status.h"
#include "report.h"
#include "workload.h"

namespace pmindex::client {

enum class ScanMode : uint8_t { kNone, kRange, kZset };
const char* ScanModeName(ScanMode m);

struct ClientConfig {
  std::string server;  // HOST:PORT as given
  std::string host, port;
  Protocol protocol = Protocol::kMemcached;
  std::string label;  // the report's "index" column; default: the protocol name
  uint64_t records = 1000000;
  size_t value_size = 1024;
  std::string workload = "ycsb-a";
  uint64_t ops = 100000;
  std::string dist = "zipf:0.99";
  unsigned threads = 1;
  unsigned repeat = 1;
  bool load = true;   // flush (if `flush`) and load before each repeat
  bool flush = true;
  unsigned pipeline = 1;
  ScanMode scan_mode = ScanMode::kNone;
  uint32_t scan_len = 100;
  uint32_t latency_every = 1;  // time one operation in every N
  bool check = true;
  int timeout_ms = 10000;
  uint64_t seed = 42;
  std::string json_path;
  std::string zset_key = "pmclient:keys";  // --scan-mode zset: the sorted set of every key
};

// Why a phase of `mix` cannot run with this configuration (empty: it can).
std::string SkipReason(const ClientConfig& cfg, const workload::Mix& mix);

// Plans every phase that is not skipped once, generating its operations
// and running nothing, so that a workload the records cannot serve (more
// deletes than present keys, ...) fails before anything is sent.
Status CheckPlans(const ClientConfig& cfg, std::shared_ptr<const workload::Workload> w);

// One phase over all repeats; scalar fields are medians.
struct PhaseReport {
  std::string phase, dist;
  size_t phase_no = 0;
  uint64_t ops = 0;
  double throughput_ops_s = 0, seconds = 0;
  double ops_per_cpu_s = 0;  // ops / CPU seconds of the client threads
  bench::LatencyNs latency;  // of whole operations, all their requests included
  uint64_t errors = 0, misses = 0;  // summed over repeats
  std::string first_error;
  std::vector<double> throughput_runs;
  std::string skip_reason;  // non-empty: the phase did not run
};

struct ClientReport {
  std::string server_version;  // what the server says it is ("" if it does not say)
  double load_s = 0, load_ops_s = 0;  // medians over repeats (0 without a load)
  uint64_t load_errors = 0;
  std::string load_first_error;
  std::vector<PhaseReport> phases;
};

// Connects, then loads and runs every phase cfg.repeat times. A fatal
// problem (cannot connect, the connection fails, a reply the protocol does
// not allow, the server refuses the flush) is an error Status; wrong
// results are counted in the reports.
Result<ClientReport> RunClient(const ClientConfig& cfg, std::shared_ptr<const workload::Workload> w);

void PrintTable(const ClientReport& report, const ClientConfig& cfg);
Status WriteJson(const std::string& path, const ClientReport& report, const ClientConfig& cfg);

}  // namespace pmindex::client
