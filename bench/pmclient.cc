// pmclient: a YCSB-style load generator for key-value servers (pmserver,
// Redis, memcached) over the memcached text protocol or RESP2, driven by
// the same workloads as pmbench (workloads/workload.h; docs/benchmarking.md
// "Servers: pmclient"). The driver is bench/client/driver.h.
//
// Exit status: 0 success; 1 some operation returned a wrong result (a
// present key not found, a value that does not check, an insert of a fresh
// key refused, a server error reply); 2 a usage or environment error (one
// line on stderr): bad flags, cannot connect, the connection failed, a
// reply the protocol does not allow.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli.h"
#include "client/driver.h"
#include "client/records.h"
#include "pmindex/version.h"
#include "workload.h"

namespace {

using pmindex::client::ClientConfig;
using pmindex::client::Protocol;
using pmindex::client::ScanMode;

[[noreturn]] void Fail(const std::string& msg) {
  std::fprintf(stderr, "pmclient: error: %s\n", msg.c_str());
  std::exit(2);
}

int Main(int argc, char** argv) {
  ClientConfig cfg;
  std::string protocol, scan_mode;
  bool no_check = false;
  CLI::App app{
      "pmclient: runs YCSB-style workloads (the shared workloads of pmbench) against a key-value\n"
      "server over the memcached text protocol or RESP2, one blocking connection per thread,\n"
      "and reports throughput, latency percentiles and checked results (docs/benchmarking.md)."};
  pmindex::bench::StandardOptions(app, "pmclient");
  app.add_option("--server", cfg.server, "HOST:PORT (or [IPV6]:PORT) of the server")->required();
  app.add_option("--protocol", protocol, "memcached or resp")->required();
  app.add_option("--label", cfg.label,
                 "Name of this server in the table and the JSON's \"index\" (default: the protocol)");
  app.add_option("--records", cfg.records, "Records loaded before the first phase");
  app.add_option("--value-size", cfg.value_size,
                 "Bytes per value (at least 32: a value names its key and version)");
  app.add_option("--workload", cfg.workload,
                 "Phases, as pmbench --workload: ycsb-a,ycsb-b,... or insert:1000,lookup:5000, ...");
  app.add_option("--ops", cfg.ops, "Operations per phase (phases without their own :OPS)");
  app.add_option("--dist", cfg.dist, "Read distribution, as pmbench --dist (YCSB-D reads use latest)");
  app.add_option("--threads", cfg.threads, "Client threads, each with its own connection");
  app.add_flag("--load,!--no-load", cfg.load,
               "On by default: before each repeat, empty the server (see --flush) and insert the "
               "records; "
               "--no-load: the server already holds them (from a run with the same --records and "
               "--seed), and values of any version are accepted");
  app.add_flag("--flush,!--no-flush", cfg.flush,
               "On by default: with --load, empty the server first (memcached flush_all, RESP "
               "FLUSHALL): this REMOVES EVERY KEY of the server");
  app.add_option("--repeat", cfg.repeat,
                 "Runs (each: flush, load, every phase); medians reported");
  app.add_option("--json", cfg.json_path, "Write the results as JSON to this file");
  app.add_option("--seed", cfg.seed, "Workload seed (same seed, same keys and operations)");
  app.add_option("--pipeline", cfg.pipeline,
                 "Operations each thread sends before reading their replies (1..64; 1: every "
                 "request waits for its reply)");
  app.add_option("--scan-mode", scan_mode,
                 "How scans (YCSB-E) run: range (pmserver's ordered SCAN + MGET), zset (a sorted set "
                 "of the keys, ZRANGEBYLEX + MGET, as YCSB's Redis binding) or none (scan phases are "
                 "skipped); default zset for resp, none for memcached");
  app.add_option("--scan-len", cfg.scan_len, "Keys per scan (1..10000)");
  app.add_option("--latency-every", cfg.latency_every, "Time one operation in every N");
  app.add_option("--timeout-ms", cfg.timeout_ms,
                 "Give up (exit 2) when the server takes longer than this to take a request or reply");
  app.add_flag("--no-check", no_check,
               "Do not check value contents (reply statuses, misses and scan order still count)");
  pmindex::bench::RequireNotNegative(
      app, {"--records", "--value-size", "--ops", "--threads", "--repeat", "--seed", "--pipeline",
            "--scan-len", "--latency-every", "--timeout-ms"});

  if (!pmindex::bench::ParseCommandLine(app, argc, argv, "pmclient")) return 0;
  cfg.check = !no_check;

  if (protocol == "memcached") cfg.protocol = Protocol::kMemcached;
  else if (protocol == "resp") cfg.protocol = Protocol::kResp;
  else Fail("bad --protocol '" + protocol + "': must be memcached or resp");
  if (scan_mode.empty()) scan_mode = cfg.protocol == Protocol::kResp ? "zset" : "none";
  if (scan_mode == "none") cfg.scan_mode = ScanMode::kNone;
  else if (scan_mode == "range") cfg.scan_mode = ScanMode::kRange;
  else if (scan_mode == "zset") cfg.scan_mode = ScanMode::kZset;
  else Fail("bad --scan-mode '" + scan_mode + "': must be range, zset or none");
  if (cfg.protocol == Protocol::kMemcached && cfg.scan_mode != ScanMode::kNone)
    Fail("--scan-mode " + scan_mode + " needs --protocol resp (memcached has no ordered range)");
  if (pmindex::Status s = pmindex::client::SplitHostPort(cfg.server, &cfg.host, &cfg.port); !s.ok())
    Fail(std::string(s.message()));
  if (cfg.records > (uint64_t{1} << 34)) Fail("bad --records: at most 2^34");
  if (cfg.value_size < pmindex::client::kValueHeaderBytes || cfg.value_size > (size_t{1} << 20))
    Fail("bad --value-size: must be in [32, 1048576] (a value names its key and version in 32 bytes)");
  if (cfg.threads < 1 || cfg.threads > 1024) Fail("bad --threads: must be in [1, 1024]");
  if (cfg.repeat < 1 || cfg.repeat > 1000) Fail("bad --repeat: must be in [1, 1000]");
  if (cfg.ops < 1) Fail("bad --ops: must be >= 1");
  // A batch is written whole before its replies are read: bounded so that
  // requests and replies fit the sockets' buffers.
  if (cfg.pipeline < 1 || cfg.pipeline > 64) Fail("bad --pipeline: must be in [1, 64]");
  if (cfg.scan_len < 1 || cfg.scan_len > 10000) Fail("bad --scan-len: must be in [1, 10000]");
  if (cfg.latency_every < 1) Fail("bad --latency-every: must be >= 1");
  if (cfg.timeout_ms < 1) Fail("bad --timeout-ms: must be >= 1");

  namespace wl = pmindex::workload;
  auto dist = wl::ParseDistribution(cfg.dist);
  if (!dist.ok()) Fail(std::string(dist.status().message()));
  auto phases = wl::ParseWorkload(cfg.workload);
  if (!phases.ok()) Fail(std::string(phases.status().message()));
  if (!cfg.load && cfg.repeat > 1) {
    for (const wl::PhaseSpec& p : phases.value())
      if (p.mix.has(wl::OpType::kInsert) || p.mix.has(wl::OpType::kDelete))
        Fail("--no-load with --repeat > 1: phase '" + p.mix.name +
             "' inserts or deletes, so a second repeat would not start from the same records");
  }
  wl::WorkloadConfig wc;
  wc.keys = cfg.records;
  wc.dist = dist.value();
  wc.phases = phases.value();
  wc.default_ops = cfg.ops;
  wc.scan_len = cfg.scan_len;
  wc.seed = cfg.seed;
  auto w = wl::Workload::Make(wc);
  if (!w.ok()) Fail(std::string(w.status().message()));
  if (pmindex::Status s = pmindex::client::CheckPlans(cfg, w.value()); !s.ok())
    Fail(std::string(s.message()));

  if (!cfg.json_path.empty() && !pmindex::bench::CanWriteFile(cfg.json_path))
    Fail("cannot write --json file '" + cfg.json_path + "'");

  auto report = pmindex::client::RunClient(cfg, w.value());
  if (!report.ok()) Fail(cfg.server + ": " + report.status().ToString());
  pmindex::client::PrintTable(report.value(), cfg);
  if (!cfg.json_path.empty()) {
    pmindex::Status s = pmindex::client::WriteJson(cfg.json_path, report.value(), cfg);
    if (!s.ok()) Fail(std::string(s.message()));
  }
  int rc = 0;
  if (report.value().load_errors != 0) {
    std::fprintf(stderr, "pmclient: load: %llu wrong results; first: %s\n",
                 static_cast<unsigned long long>(report.value().load_errors),
                 report.value().load_first_error.c_str());
    rc = 1;
  }
  for (const auto& r : report.value().phases) {
    if (r.errors != 0) {
      std::fprintf(stderr, "pmclient: phase %zu (%s): %llu wrong results (%llu misses); first: %s\n",
                   r.phase_no, r.phase.c_str(), static_cast<unsigned long long>(r.errors),
                   static_cast<unsigned long long>(r.misses), r.first_error.c_str());
      rc = 1;
    }
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "pmclient: error: out of memory (std::bad_alloc); lower --records or --ops\n");
    return 2;
  }
}
