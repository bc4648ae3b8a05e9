// pmbench internals: the run configuration, the driver that runs one index
// through bulk load + phases, and the report (table, JSON).
//
// The command line and the JSON schema are a contract (docs/architecture.md section 7,
// docs/benchmarking.md): fields may be added, never renamed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "index/index.h"
#include "index/registry.h"
#include "pm/persist.h"
#include "pmindex/status.h"
#include "report.h"
#include "workload.h"

namespace pmindex::bench {

struct BenchConfig {
  std::vector<std::string> indexes;  // resolved names
  std::string index_arg = "dram-btree,null";
  uint64_t keys = 1000000;
  double fill = 0.7;
  std::string workload = "lookup";
  uint64_t ops = 1000000;
  double duration_s = 0;  // > 0: time mode, each phase runs this long
  std::string dist = "uniform";
  std::string keyspace = "random";
  unsigned threads = 1;
  unsigned repeat = 3;
  uint32_t pm_write_ns = 0;
  // --pm-model (pm::PmModel): dram, fixed (the default: pm_write_ns per
  // flushed line) or xpline with the constants below (pm::XplineParams).
  std::string pm_model = "fixed";
  uint32_t pm_block_write_ns = pm::XplineParams().block_write_ns;
  uint32_t pm_read_ns = pm::XplineParams().read_ns;
  uint32_t pm_read_seq_ns = pm::XplineParams().read_seq_ns;
  uint64_t pm_cache_kb = pm::XplineParams().cache_bytes >> 10;
  bool eadr = false;
  // --numa-nodes N (> 1): N simulated NUMA nodes, worker thread t on node
  // t % N, node visits metered (alloc/numa_meter.h). 0 or 1: the machine's.
  unsigned numa_nodes = 0;
  uint32_t remote_ns = 0;  // --remote-ns: wait per remote node visit
  std::string pool_dir;  // empty: a fresh temp dir, removed at exit
  bool pool_dir_is_temp = false;
  uint64_t pool_size_mb = 0;  // 0: sized from --keys
  uint64_t pool_max_mb = 0;   // 0: the pool default (PoolOptions::max_size)
  std::vector<std::string> opt_args;               // raw --opt values
  std::map<std::string, std::string> index_options;  // effective, per index
  std::string json_path;
  // --api: how the driver reaches each index. "index": the plug-in
  // interface (create_pool_for, create_index, open_index); "db": the
  // user's handle pmindex::Db (Db::Create, or CreateInMemory for a
  // volatile kind; Db::Open).
  std::string api = "index";
  uint64_t seed = 42;
  uint32_t scan_len = 100;
  uint32_t latency_every = 64;
  bool check = true;
  bool verify = false;
  bool crash_reopen = false;  // also time open_index on a crash image (crash_recovery_s)
  // --keys-file: the bulk-load keys come from this raw little-endian
  // uint64 file (empty: generated). --op-keys TYPE=FILE: single-type
  // phases of TYPE take their keys from FILE, in file order.
  std::string keys_file;
  std::vector<std::string> op_keys_args;               // raw --op-keys values
  std::map<std::string, std::string> op_keys;          // type name -> file
};

// One (index, phase) over all repeats; scalar fields are medians.
struct PhaseReport {
  std::string index, options, phase;
  size_t phase_no = 0;
  bool persistent = false;
  unsigned threads = 1;
  uint64_t ops = 0;
  unsigned repeat = 0;
  double throughput_ops_s = 0;
  double seconds = 0;
  double ops_per_cpu_s = 0;  // ops / CPU seconds of the worker threads (robust to a shared CPU)
  LatencyNs latency;
  double lines_flushed = 0, fences = 0, naws = 0;  // per op
  double numa_local = 0, numa_remote = 0;           // node visits per op (metered indexes)
  // xpline model, per op: media bytes written (256-byte blocks), PM lines
  // read at node visits, and those missing from the modelled cache.
  double media_bytes = 0, model_lines = 0, model_misses = 0;
  uint64_t pm_bytes = 0, dram_bytes = 0;
  double recovery_s = 0;  // last phase of a persistent index only
  double crash_recovery_s = 0;  // --crash-reopen: open_index of a crash image, last phase only
  std::string dist;        // the distribution this phase's reads used
  // The index's own counters (IndexStats::extra): this phase's change
  // (after minus before the phase), and the total after the phase; medians.
  std::vector<std::pair<std::string, double>> index_stats, index_stats_total;
  double load_s = 0;      // bulk load, median
  uint64_t errors = 0;    // wrong results, summed over repeats
  uint64_t misses = 0;    // present keys not found (part of errors)
  std::string first_error;
  std::vector<double> throughput_runs;
};

// Runs every index of cfg on the workload. A fatal problem (out of space,
// create/open failure) returns a non-OK status; wrong results are reported
// in PhaseReport::errors.
Result<std::vector<PhaseReport>> RunAll(const BenchConfig& cfg,
                                        std::shared_ptr<const workload::Workload> w);

void PrintTable(const std::vector<PhaseReport>& reports, const BenchConfig& cfg);
Status WriteJson(const std::string& path, const std::vector<PhaseReport>& reports,
                 const BenchConfig& cfg);

}  // namespace pmindex::bench
