// pmserver: a memcached-protocol and RESP (Redis protocol) server over a
// pmindex::KvStore in a pool file (docs/server.md).
//
// Exit status: 0 after a clean shutdown (SIGINT/SIGTERM), 1 if the store
// cannot be opened or created or does not close cleanly, 2 for a usage
// error or a port that cannot be bound.
#include <pthread.h>

#include <cctype>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "pm/persist.h"
#include "pmindex/kv.h"
#include "pmindex/version.h"
#include "server/cluster.h"
#include "server/collections.h"
#include "server/databases.h"
#include "server/items.h"
#include "server/keyspace.h"
#include "server/kv_backed_store.h"
#include "server/maintenance.h"
#include "server/server.h"

namespace {

using pmindex::server::Server;

// "11211", "0" (off) or "auto" (a free port) to a Server port.
bool ParsePort(const std::string& s, int* port) {
  if (s == "auto") {
    *port = Server::kPortAuto;
    return true;
  }
  try {
    size_t used = 0;
    const int p = std::stoi(s, &used);
    if (used != s.size() || p < 0 || p > 65535) return false;
    *port = p;
    return true;
  } catch (...) {
    return false;
  }
}

// memcached -I's sizes: "1048576", "512k", "2m" (k and m 1024 based, any
// case), from 1 KiB to 1 GiB as memcached 1.6 allows.
bool ParseItemSize(const std::string& s, size_t* bytes) {
  if (s.empty()) return false;
  uint64_t mul = 1;
  std::string digits = s;
  const char unit = static_cast<char>(std::tolower(static_cast<unsigned char>(s.back())));
  if (unit == 'k' || unit == 'm') {
    mul = unit == 'k' ? 1024 : 1024 * 1024;
    digits.pop_back();
  }
  if (digits.empty() || digits.size() > 12 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return false;
  const uint64_t n = std::stoull(digits) * mul;
  if (n < 1024 || n > (uint64_t{1} << 30)) return false;
  *bytes = static_cast<size_t>(n);
  return true;
}

// Everything the command line sets, with its defaults.
struct CommandLine {
  std::string pool;
  std::string create;
  uint64_t pool_size_mb = 64;
  std::string memcached_port = "11211";
  std::string resp_port = "6379";
  Server::Options opts;
  int databases = 16;
  uint32_t pm_write_ns = 0;
  std::string pm_model_name = "fixed";
  pmindex::pm::XplineParams xpline;
  uint64_t pm_cache_kb = xpline.cache_bytes >> 10;
  std::string requirepass_file;
  std::string protected_mode = "yes";
  bool memcached_insecure = false;
  std::string max_item_size = "1m";
  bool verify = false;
  std::string cluster_config;
  std::string cluster_node_id;
  // Set by CheckCommandLine.
  pmindex::pm::PmModel pm_model = pmindex::pm::PmModel::kFixed;
  std::unique_ptr<pmindex::server::Cluster> cluster;
};

// The pool, the listeners and the connections.
void AddStoreAndNetworkOptions(CLI::App& app, CommandLine* c) {
  c->opts.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("--pool", c->pool, "the store's pool file (opened, and recovered after a crash)")
      ->required();
  app.add_option("--create", c->create,
                 "if the pool file does not exist, create it over this index kind, "
                 "KIND or KIND:OPTIONS (e.g. lbtree or lbtree:node=256)");
  // The smallest first file that holds the header and both page-table
  // copies for DbOptions' default max_size (64 GiB: 4.25 MiB) plus one
  // heap page, which Pool::Create requires.
  app.add_option("--pool-size-mb", c->pool_size_mb,
                 "size of a new pool's first file in MiB, at least 5 (it grows by segments)")
      ->capture_default_str()
      ->check(CLI::Range(5, 1 << 20));
  app.add_option("--memcached-port", c->memcached_port,
                 "memcached text protocol port: a number, 0 = off, auto = a free port")
      ->capture_default_str();
  app.add_option("--resp-port", c->resp_port, "RESP (Redis protocol) port: a number, 0 = off, auto")
      ->capture_default_str();
  app.add_option("--bind", c->opts.bind, "address to listen on")->capture_default_str();
  app.add_option("--threads", c->opts.threads, "event-loop threads (default: the number of CPUs)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--max-connections", c->opts.max_connections,
                 "connections served at once; more are refused with an error line")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--shutdown-grace-ms", c->opts.shutdown_grace_ms,
                 "on SIGINT/SIGTERM, how long connections may take to send their last replies")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600 * 1000));
  app.add_option("--databases", c->databases,
                 "Redis databases (SELECT 0 to N-1); memcached serves database 0")
      ->capture_default_str()
      ->check(CLI::Range(1, pmindex::server::Databases::kMaxDatabases));
}

// The emulated PM costs, as pmbench's.
void AddPmModelOptions(CLI::App& app, CommandLine* c) {
  app.add_option("--pm-write-ns", c->pm_write_ns,
                 "emulated extra PM write latency per flushed line, as pmbench's (0 = none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  app.add_option("--pm-model", c->pm_model_name,
                 "PM cost model, as pmbench's: dram (none), fixed (--pm-write-ns per flushed "
                 "line), xpline (Optane's 256 B write unit and read latency; "
                 "docs/persistence-model.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"dram", "fixed", "xpline"}));
  app.add_option("--pm-block-write-ns", c->xpline.block_write_ns,
                 "xpline: cost of one 256 B media block write")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  app.add_option("--pm-read-ns", c->xpline.read_ns,
                 "xpline: cost of the first missed PM line of a node visit")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  app.add_option("--pm-read-seq-ns", c->xpline.read_seq_ns,
                 "xpline: cost of each further missed line of the same visit")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  app.add_option("--pm-cache-kb", c->pm_cache_kb,
                 "xpline: modelled CPU cache (shared by the threads) in KiB")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 24));
}

// Passwords and exposure, the protocols' limits, --verify and cluster mode.
void AddProtocolOptions(CLI::App& app, CommandLine* c) {
  app.add_option("--requirepass", c->opts.requirepass,
                 "RESP password (AUTH, HELLO AUTH); visible to other users of this machine in the "
                 "process list: prefer --requirepass-file");
  app.add_option("--requirepass-file", c->requirepass_file,
                 "file whose first line is the RESP password");
  app.add_option("--protected-mode", c->protected_mode,
                 "yes: without a password, refuse RESP connections from beyond loopback")
      ->capture_default_str()
      ->check(CLI::IsMember({"yes", "no"}));
  app.add_option("--proto-max-bulk-len", c->opts.proto_max_bulk_len,
                 "RESP: the largest bulk string a request may carry, and the longest string "
                 "APPEND/SETRANGE may make; a larger bulk string closes the connection with a "
                 "protocol error (CONFIG SET changes it)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1} << 20, size_t{1} << 40));
  app.add_option("-I,--max-item-size", c->max_item_size,
                 "memcached: the largest item data a storage command may carry, as memcached's "
                 "-I: bytes, or with k or m (1024 based), 1k to 1024m")
      ->capture_default_str();
  app.add_flag("--verify", c->verify,
               "check the pool and exit (0: consistent, 1: damaged): the key-value store's own "
               "check, then every collection's metadata against its elements");
  app.add_flag("--memcached-insecure", c->memcached_insecure,
               "serve memcached (which has no password) on an address beyond loopback");
  app.add_option("--cluster-config", c->cluster_config,
                 "cluster mode: the slot map file shared by the nodes (docs/cluster.md); "
                 "PMCLUSTER SETMAP rewrites it");
  app.add_option("--cluster-node-id", c->cluster_node_id,
                 "cluster mode: this node's id in the map (40 hex digits)");
}

// --requirepass-file's first line into opts.requirepass; false after
// printing why not.
bool ReadPasswordFile(CommandLine* c) {
  if (!c->opts.requirepass.empty()) {
    std::fprintf(stderr, "pmserver: --requirepass and --requirepass-file exclude each other\n");
    return false;
  }
  std::ifstream f(c->requirepass_file);
  if (!f || !std::getline(f, c->opts.requirepass)) {
    std::fprintf(stderr, "pmserver: --requirepass-file %s: cannot read its first line\n",
                 c->requirepass_file.c_str());
    return false;
  }
  if (!c->opts.requirepass.empty() && c->opts.requirepass.back() == '\r') {
    c->opts.requirepass.pop_back();
  }
  if (c->opts.requirepass.empty()) {
    std::fprintf(stderr, "pmserver: --requirepass-file %s: the first line is empty\n",
                 c->requirepass_file.c_str());
    return false;
  }
  return true;
}

// The checks CLI11 cannot make, and the settings they derive (ports, the
// password, the item size, the cluster, the PM model, which is installed).
// False after printing the usage error.
bool CheckCommandLine(CommandLine* c) {
  Server::Options& opts = c->opts;
  if (!ParsePort(c->memcached_port, &opts.memcached_port) ||
      !ParsePort(c->resp_port, &opts.resp_port)) {
    std::fprintf(stderr, "pmserver: a port is a number from 0 (off) to 65535, or auto\n");
    return false;
  }
  if (!c->requirepass_file.empty() && !ReadPasswordFile(c)) return false;
  if (!ParseItemSize(c->max_item_size, &opts.max_item_size)) {
    std::fprintf(stderr,
                 "pmserver: --max-item-size %s: a size from 1k to 1024m (bytes, or with k or m)\n",
                 c->max_item_size.c_str());
    return false;
  }
  opts.protected_mode = c->protected_mode == "yes";
  // The memcached text protocol has no password: whoever reaches the port
  // may read, overwrite and flush everything (docs/server.md "Security").
  if (opts.memcached_port != Server::kPortOff && !c->memcached_insecure &&
      !Server::IsLoopbackAddress(opts.bind)) {
    std::fprintf(stderr,
                 "pmserver: --bind %s serves memcached beyond loopback, and memcached's protocol "
                 "has no password: anyone who reaches the port can read and flush every item. "
                 "Add --memcached-insecure to do it anyway, or --memcached-port 0 to serve RESP "
                 "only.\n",
                 opts.bind.c_str());
    return false;
  }
  if (c->cluster_config.empty() != c->cluster_node_id.empty()) {
    std::fprintf(stderr, "pmserver: cluster mode needs both --cluster-config and --cluster-node-id\n");
    return false;
  }
  if (!c->cluster_config.empty()) {
    auto loaded = pmindex::server::Cluster::Load(c->cluster_config, c->cluster_node_id);
    if (!loaded.ok()) {
      std::fprintf(stderr, "pmserver: %s\n", loaded.status().ToString().c_str());
      return false;
    }
    c->cluster = std::move(loaded).value();
    opts.cluster = c->cluster.get();
  }
  opts.stop_on_signals = true;
  (void)pmindex::pm::ParsePmModel(c->pm_model_name.c_str(), &c->pm_model);  // checked by IsMember
  if (c->pm_write_ns != 0 && c->pm_model != pmindex::pm::PmModel::kFixed) {
    std::fprintf(stderr,
                 "pmserver: --pm-write-ns is the fixed model's constant (--pm-model fixed)\n");
    return false;
  }
  c->xpline.cache_bytes = c->pm_cache_kb << 10;
  pmindex::pm::SetPmWriteNs(c->pm_write_ns);
  pmindex::pm::SetPmModel(c->pm_model, c->xpline);
  return true;
}

// The store: created over --create's kind when the pool file does not
// exist, else opened (and recovered).
pmindex::Result<std::unique_ptr<pmindex::KvStore>> OpenStore(const CommandLine& c) {
  std::error_code ec;
  if (!c.create.empty() && !std::filesystem::exists(c.pool, ec)) {
    const size_t colon = c.create.find(':');
    pmindex::DbOptions db_options;
    db_options.size = c.pool_size_mb << 20;
    return pmindex::KvStore::Create(c.pool, c.create.substr(0, colon),
                                    colon == std::string::npos ? "" : c.create.substr(colon + 1),
                                    db_options);
  }
  return pmindex::KvStore::Open(c.pool);
}

// --verify: the store's check and every collection's, printed; the exit
// status (0: consistent and closed cleanly).
int VerifyAndExit(pmindex::KvStore& kv, std::unique_ptr<pmindex::server::Databases> dbs) {
  pmindex::Status vs = kv.Verify();
  std::printf("pmserver: --verify: key-value store: %s\n", vs.ToString().c_str());
  const pmindex::server::CollectionReport r = pmindex::server::VerifyCollections(*dbs);
  std::printf(
      "pmserver: --verify: %llu collections, %llu elements, %llu large values in %llu "
      "pieces, %llu garbage generations (%llu elements to reclaim), %zu problems\n",
      static_cast<unsigned long long>(r.collections), static_cast<unsigned long long>(r.elements),
      static_cast<unsigned long long>(r.large_values), static_cast<unsigned long long>(r.pieces),
      static_cast<unsigned long long>(r.garbage_generations),
      static_cast<unsigned long long>(r.garbage_elements), r.problems.size());
  for (const std::string& p : r.problems) std::printf("pmserver: --verify: %s\n", p.c_str());
  dbs.reset();
  pmindex::Status cs = kv.Close();
  return vs.ok() && r.problems.empty() && cs.ok() ? 0 : 1;
}

// The "ready" line: the ports actually bound ("auto" included), the store
// and the settings, for scripts and tests.
void PrintReady(const Server& server, const CommandLine& c, const pmindex::KvStore& kv) {
  if (int p = server.port(Server::Wire::kMemcached))
    std::printf("pmserver: memcached on %s:%d\n", c.opts.bind.c_str(), p);
  if (int p = server.port(Server::Wire::kResp))
    std::printf("pmserver: resp on %s:%d\n", c.opts.bind.c_str(), p);
  const std::string latency =
      c.pm_model == pmindex::pm::PmModel::kXpline
          ? ", PM cost model xpline"
          : (c.pm_write_ns == 0 ? ""
                                : ", +" + std::to_string(c.pm_write_ns) + " ns per flushed line");
  const std::string mode = c.cluster == nullptr
                               ? ""
                               : ", cluster node " + c.cluster->my_id() + ", map epoch " +
                                     std::to_string(c.cluster->map()->epoch);
  std::printf("pmserver: ready (kvstore %s, %d threads%s%s)\n",
              std::string(kv.index_kind()).c_str(), c.opts.threads, latency.c_str(), mode.c_str());
  std::fflush(stdout);
}

// Serves until SIGINT or SIGTERM, then closes the store; the exit status.
int Serve(const CommandLine& c, pmindex::KvStore& kv, pmindex::server::Databases& dbs,
          pmindex::server::Stats& stats) {
  pmindex::server::Keyspace keyspace(dbs, stats);
  pmindex::server::Items& items = keyspace.db(0);
  pmindex::server::Maintenance maintenance(dbs, stats, pmindex::server::WallClockMs, {});
  {
    Server server(items, c.opts);
    pmindex::Status s = server.Listen();
    if (!s.ok()) {
      std::fprintf(stderr, "pmserver: %s\n", s.ToString().c_str());
      pmindex::IgnoreError(kv.Close(), "the listen error is the one reported");
      return 2;
    }
    PrintReady(server, c, kv);
    maintenance.Start();
    server.Run();
    maintenance.Stop();
    // Destroying the server restores the default action of SIGINT and
    // SIGTERM; a second signal during the store's Close must not kill the
    // process, so they stay blocked (and are dropped) until exit. Run has
    // joined every other thread.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
  }
  pmindex::Status s = kv.Close();
  if (!s.ok()) {
    std::fprintf(stderr, "pmserver: close: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("pmserver: stopped, store closed\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pmserver: memcached text protocol and RESP over a pmindex key-value store"};
  CommandLine c;
  AddStoreAndNetworkOptions(app, &c);
  AddPmModelOptions(app, &c);
  AddProtocolOptions(app, &c);
  app.set_version_flag("--version", std::string("pmserver ") + PMINDEX_VERSION_STRING);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every bad option or value is a usage
    // error (2), not CLI11's own codes.
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!CheckCommandLine(&c)) return 2;
  auto kv = OpenStore(c);
  if (!kv.ok()) {
    std::fprintf(stderr, "pmserver: %s: %s\n", c.pool.c_str(), kv.status().ToString().c_str());
    return 1;
  }
  pmindex::server::Stats stats;
  stats.start_ms = pmindex::server::WallClockMs();
  pmindex::server::KvBackedStore store(*kv.value());
  auto dbs = pmindex::server::Databases::Open(store, c.databases);
  if (!dbs.ok()) {
    std::fprintf(stderr, "pmserver: %s: %s\n", c.pool.c_str(), dbs.status().ToString().c_str());
    pmindex::IgnoreError(kv.value()->Close(), "the databases error is the one reported");
    return 1;
  }
  if (c.verify) return VerifyAndExit(*kv.value(), std::move(dbs).value());
  return Serve(c, *kv.value(), *dbs.value(), stats);
}
