// pmtxbench: throughput and abort rate of the key-value store's
// snapshot-isolation transactions under contention (issue 11;
// docs/benchmarking.md "Transactions: pmtxbench").
//
// The store holds --keys accounts, each with the same starting balance.
// A transaction is a transfer: it picks --writes distinct accounts among the
// first --hot (uniformly), reads them and --reads more accounts among all
// of them, moves a random amount from the first picked account to the
// others, writes the picked accounts back and commits. Aborted commits are
// retried with a new snapshot until --txs transfers have committed over all
// threads. The contention knob is --hot: with 2 threads and --hot 2 every
// pair of concurrent transfers conflicts.
//
// Each run checks what snapshot isolation with first-committer-wins
// promises for transfers: the balances still add up to the starting total
// (a lost update would break it), every account is still there, the
// store's own commit and abort counters moved by exactly what the threads
// counted, and the store verifies. Exit status: 0 success; 1 a check
// failed; 2 bad flags or a store error (one line on stderr).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli.h"
#include "pmindex/kv.h"
#include "pmindex/version.h"
#include "report.h"

namespace {

using pmindex::KvStore;
using pmindex::Status;
using pmindex::Transaction;

// --pool's file, removed at exit (and by Fail, which skips atexit).
std::string g_pool_path;

// Also called from the transfer threads: _Exit does not run destructors
// under their feet.
[[noreturn]] void Fail(const std::string& msg) {
  if (!g_pool_path.empty()) pmindex::bench::RemovePoolFiles(g_pool_path);
  std::fflush(stdout);
  std::fprintf(stderr, "pmtxbench: error: %s\n", msg.c_str());
  std::_Exit(2);
}

struct Config {
  std::string index = "lbtree";
  uint64_t keys = 100000;
  uint64_t value_size = 64;
  std::string hot = "2,64,all";
  std::string threads = "1,2";
  uint64_t txs = 100000;
  uint64_t writes = 2;
  uint64_t reads = 0;
  uint64_t repeat = 3;
  uint64_t seed = 42;
  std::string json;
  std::string pool_dir;  // empty: an in-memory pool
};

constexpr uint64_t kStartBalance = 1000000;
constexpr size_t kBalanceDigits = 20;

// --key-prefix, then ten decimal digits. Without a prefix keys share their
// first 8 bytes in groups of 100, as YCSB's keys do at 1M records; with
// one of 8 bytes or more they all share one prefix (the store groups keys
// by their first 8 bytes; docs/layout/kv.md).
std::string g_key_prefix;

std::string AccountKey(uint64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%010" PRIu64, i);
  return g_key_prefix + buf;
}

// The balance in decimal, zero-padded to 20 digits, then '.' up to the
// value size.
std::string EncodeBalance(uint64_t balance, size_t value_size) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020" PRIu64, balance);
  std::string v(buf, kBalanceDigits);
  v.resize(value_size, '.');
  return v;
}

bool DecodeBalance(const std::string& v, uint64_t* balance) {
  if (v.size() < kBalanceDigits) return false;
  uint64_t b = 0;
  for (size_t i = 0; i < kBalanceDigits; ++i) {
    if (v[i] < '0' || v[i] > '9') return false;
    b = b * 10 + static_cast<uint64_t>(v[i] - '0');
  }
  *balance = b;
  return true;
}

// "2,64,all" -> {2, 64, all}; each in [lo, hi]; all = 0: no 'all'.
std::vector<uint64_t> ParseList(const std::string& text, const char* flag, uint64_t lo, uint64_t all,
                                uint64_t hi) {
  std::vector<uint64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    uint64_t v = 0;
    if (item == "all" && all != 0) {
      v = all;
    } else {
      size_t used = 0;
      try {
        if (item.empty() || item[0] == '-') throw std::invalid_argument(item);
        v = std::stoull(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != item.size())
        Fail(std::string("bad ") + flag + " '" + text + "': a comma list of numbers");
    }
    if (v < lo || v > hi)
      Fail(std::string("bad ") + flag + " " + item + ": must be from " + std::to_string(lo) +
           " to " + std::to_string(hi));
    out.push_back(v);
  }
  if (out.empty()) Fail(std::string("bad ") + flag + ": empty list");
  return out;
}

struct Checked {
  uint64_t wrong = 0;  // failed checks
  std::string first;   // the first one, in words
  void Add(const std::string& what) {
    if (wrong++ == 0) first = what;
  }
  void Merge(const Checked& other) {
    if (other.wrong != 0 && wrong == 0) first = other.first;
    wrong += other.wrong;
  }
};

// One thread's counts and failed checks.
struct RunResult {
  uint64_t commits = 0;
  uint64_t aborts = 0;
  Checked checked;
};

// One thread's share of transfers. Store errors other than Aborted end the
// process (exit 2): they are not contention.
void Transfers(KvStore& kv, const Config& cfg, uint64_t hot, uint64_t commits_wanted, uint64_t seed,
               RunResult* out) {
  Checked* checked = &out->checked;
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> picked;
  std::vector<uint64_t> balance;
  uint64_t commits = 0, aborts = 0;
  while (commits < commits_wanted) {
    picked.clear();
    while (picked.size() < cfg.writes) {
      const uint64_t a = rng() % hot;
      bool seen = false;
      for (uint64_t p : picked) seen |= p == a;
      if (!seen) picked.push_back(a);
    }
    const uint64_t amount = 1 + rng() % 100;
    for (;;) {
      std::unique_ptr<Transaction> tx = kv.Begin();
      balance.assign(picked.size(), 0);
      for (size_t i = 0; i < picked.size(); ++i) {
        pmindex::Result<std::string> v = tx->Get(AccountKey(picked[i]));
        if (!v.ok()) Fail("transaction read of " + AccountKey(picked[i]) + ": " + v.status().ToString());
        if (!DecodeBalance(v.value(), &balance[i])) {
          checked->Add("account " + AccountKey(picked[i]) + " holds no balance");
          balance[i] = 0;
        }
      }
      for (uint64_t r = 0; r < cfg.reads; ++r) {
        const std::string key = AccountKey(rng() % cfg.keys);
        pmindex::Result<std::string> v = tx->Get(key);
        if (!v.ok()) Fail("transaction read of " + key + ": " + v.status().ToString());
      }
      // Moves `amount` from the first account to the others (as far as the
      // first account holds it), so the total stays.
      const uint64_t share = std::min(amount, balance[0]) / (picked.size() - 1);
      balance[0] -= share * (picked.size() - 1);
      for (size_t i = 1; i < picked.size(); ++i) balance[i] += share;
      for (size_t i = 0; i < picked.size(); ++i) {
        Status s = tx->Put(AccountKey(picked[i]), EncodeBalance(balance[i], cfg.value_size));
        if (!s.ok()) Fail("transaction write: " + s.ToString());
      }
      Status s = tx->Commit();
      if (s.ok()) break;
      if (s.code() != Status::Code::kAborted) Fail("commit: " + s.ToString());
      ++aborts;
    }
    ++commits;
  }
  out->commits = commits;
  out->aborts = aborts;
}

// Sums every balance and counts the accounts, outside any transaction
// (the threads have stopped).
void CheckTotal(KvStore& kv, const Config& cfg, Checked* checked) {
  uint64_t total = 0, accounts = 0;
  std::vector<std::pair<std::string, std::string>> batch;
  std::string from;  // the store holds the accounts only
  for (;;) {
    batch.clear();
    if (kv.Range(from, std::nullopt, 4096, &batch) == 0) break;
    for (const auto& [k, v] : batch) {
      uint64_t b = 0;
      if (!DecodeBalance(v, &b)) checked->Add("account " + k + " holds no balance");
      total += b;
      ++accounts;
    }
    from = batch.back().first;
    from.push_back('\0');
  }
  if (accounts != cfg.keys)
    checked->Add(std::to_string(accounts) + " accounts, expected " + std::to_string(cfg.keys));
  if (total != cfg.keys * kStartBalance)
    checked->Add("balances add up to " + std::to_string(total) + ", expected " +
                 std::to_string(cfg.keys * kStartBalance) + " (a lost update)");
}

int Main(int argc, char** argv) {
  Config cfg;
  CLI::App app{
      "pmtxbench: throughput and abort rate of the key-value store's snapshot-isolation\n"
      "transactions (bank transfers) under contention, per thread count and hot-set size;\n"
      "checks that no update is lost (docs/benchmarking.md)."};
  pmindex::bench::StandardOptions(app, "pmtxbench");
  app.add_option("--index", cfg.index,
                 "Index under the store: KIND or KIND:OPTIONS, a persistent kind of pmbench --list");
  app.add_option("--keys", cfg.keys, "Accounts loaded before the runs (1..100000000)");
  app.add_option("--value-size", cfg.value_size, "Bytes per account value (20..65536)");
  app.add_option("--hot", cfg.hot,
                 "Hot-set sizes, a comma list (each run's transfers pick accounts among the first N; 'all' = --keys)");
  app.add_option("--threads", cfg.threads, "Thread counts, a comma list (1..64 each)");
  app.add_option("--txs", cfg.txs, "Committed transfers per run, over all threads");
  app.add_option("--writes", cfg.writes, "Accounts each transfer writes (2..16)");
  app.add_option("--reads", cfg.reads, "Further accounts each transfer only reads (0..1000)");
  app.add_option("--repeat", cfg.repeat, "Runs per (threads, hot) pair; medians reported");
  app.add_option("--seed", cfg.seed, "Seed of the transfers");
  app.add_option("--pool", cfg.pool_dir,
                 "Put the store in a pool file in this directory (removed at exit) instead of memory; "
                 "the store is then closed and reopened after the load, and the open timed");
  app.add_option("--key-prefix", g_key_prefix,
                 "Bytes before each account's 10 digits (at most 1000; e.g. 'acct:' puts every key under "
                 "one 8-byte prefix)");
  app.add_option("--json", cfg.json, "Write the results as JSON to this file");
  pmindex::bench::RequireNotNegative(
      app, {"--keys", "--value-size", "--txs", "--writes", "--reads", "--repeat", "--seed"});
  if (!pmindex::bench::ParseCommandLine(app, argc, argv, "pmtxbench")) return 0;

  if (cfg.keys < 2 || cfg.keys > 100000000) Fail("bad --keys: must be from 2 to 100000000");
  if (cfg.value_size < kBalanceDigits || cfg.value_size > 65536)
    Fail("bad --value-size: must be from 20 to 65536");
  if (cfg.writes < 2 || cfg.writes > 16 || cfg.writes > cfg.keys)
    Fail("bad --writes: must be from 2 to 16 and at most --keys");
  if (cfg.reads > 1000) Fail("bad --reads: must be at most 1000");
  if (cfg.txs == 0) Fail("bad --txs: must be at least 1");
  if (cfg.repeat == 0 || cfg.repeat > 100) Fail("bad --repeat: must be from 1 to 100");
  if (g_key_prefix.size() > 1000) Fail("bad --key-prefix: at most 1000 bytes");
  const std::vector<uint64_t> hots = ParseList(cfg.hot, "--hot", cfg.writes, cfg.keys, cfg.keys);
  const std::vector<uint64_t> thread_counts = ParseList(cfg.threads, "--threads", 1, 0, 64);
  if (!cfg.json.empty() && !pmindex::bench::CanWriteFile(cfg.json))
    Fail("cannot write --json " + cfg.json);

  std::string kind = cfg.index, options;
  if (size_t c = kind.find(':'); c != std::string::npos) {
    options = kind.substr(c + 1);
    kind.resize(c);
  }
  pmindex::DbOptions db;
  // Room for every account's versions while old ones wait for reclaim.
  db.size = std::max<uint64_t>(64ull << 20, cfg.keys * (cfg.value_size + 128) * 4);
  std::string pool_path;
  if (!cfg.pool_dir.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(cfg.pool_dir, ec)) Fail("bad --pool: " + cfg.pool_dir + " is not a directory");
    pool_path = (std::filesystem::path(cfg.pool_dir) / ("pmtxbench-" + std::to_string(getpid()) + ".pool")).string();
  }
  // The pool file goes on every exit path after this point (Fail exits).
  g_pool_path = pool_path;
  std::atexit([] {
    if (!g_pool_path.empty()) pmindex::bench::RemovePoolFiles(g_pool_path);
  });
  auto opened = pool_path.empty() ? KvStore::CreateInMemory(kind, options, db)
                                  : KvStore::Create(pool_path, kind, options, db);
  if (!opened.ok()) Fail("--index " + cfg.index + ": " + opened.status().ToString());
  std::unique_ptr<KvStore> store = std::move(opened).value();
  const auto load_start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < cfg.keys; ++i) {
    Status s = store->Put(AccountKey(i), EncodeBalance(kStartBalance, cfg.value_size));
    if (!s.ok()) Fail("load: " + s.ToString());
  }
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  // A file-backed store: a clean close, then the open (recovery) and one
  // Stats call, timed.
  double close_seconds = 0, open_seconds = 0, stats_seconds = 0;
  if (!pool_path.empty()) {
    const auto tc = std::chrono::steady_clock::now();
    if (Status s = store->Close(); !s.ok()) Fail("close after the load: " + s.ToString());
    store.reset();
    const auto t0 = std::chrono::steady_clock::now();
    close_seconds = std::chrono::duration<double>(t0 - tc).count();
    auto again = KvStore::Open(pool_path);
    const auto t1 = std::chrono::steady_clock::now();
    if (!again.ok()) Fail("reopen: " + again.status().ToString());
    store = std::move(again).value();
    const pmindex::KvStats st = store->Stats();
    const auto t2 = std::chrono::steady_clock::now();
    open_seconds = std::chrono::duration<double>(t1 - t0).count();
    stats_seconds = std::chrono::duration<double>(t2 - t1).count();
    if (st.keys != cfg.keys)
      Fail("reopen: the store counts " + std::to_string(st.keys) + " keys, not " + std::to_string(cfg.keys));
  }
  KvStore& kv = *store;

  std::printf("pmtxbench: %s, %" PRIu64 " accounts x %" PRIu64 " B, transfers of %" PRIu64
              " accounts + %" PRIu64 " reads, %" PRIu64 " commits per run, median of %" PRIu64 "\n",
              cfg.index.c_str(), cfg.keys, cfg.value_size, cfg.writes, cfg.reads, cfg.txs, cfg.repeat);
  std::printf("load: %" PRIu64 " puts in key order in %.2f s (%s puts/s), key prefix '%s'\n", cfg.keys,
              load_seconds, pmindex::bench::Human(static_cast<double>(cfg.keys) / load_seconds).c_str(),
              g_key_prefix.c_str());
  if (!pool_path.empty())
    std::printf("reopen: close %.3f s, open (recovery) %.3f s, Stats %.3f ms, pool %s\n",
                close_seconds, open_seconds, stats_seconds * 1e3, pool_path.c_str());
  std::printf("%-8s %-10s %12s %12s %10s %14s\n", "threads", "hot", "commits/s", "attempts/s",
              "abort %", "aborts/commit");
  nlohmann::json runs = nlohmann::json::array();
  Checked checked;
  uint64_t seed = cfg.seed;
  for (uint64_t threads : thread_counts) {
    for (uint64_t hot : hots) {
      std::vector<double> commit_rate, attempt_rate, abort_pct;
      for (uint64_t rep = 0; rep < cfg.repeat; ++rep) {
        const pmindex::KvStats before = kv.Stats();
        std::vector<RunResult> per(threads);
        std::vector<std::thread> pool;
        const auto start = std::chrono::steady_clock::now();
        for (uint64_t t = 0; t < threads; ++t) {
          const uint64_t share = cfg.txs / threads + (t < cfg.txs % threads ? 1 : 0);
          pool.emplace_back(Transfers, std::ref(kv), std::cref(cfg), hot, share, ++seed, &per[t]);
        }
        for (std::thread& th : pool) th.join();
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        uint64_t commits = 0, aborts = 0;
        for (const RunResult& r : per) {
          commits += r.commits;
          aborts += r.aborts;
          checked.Merge(r.checked);
        }
        const pmindex::KvStats after = kv.Stats();
        if (after.commits - before.commits != commits || after.aborts - before.aborts != aborts)
          checked.Add("the store counted " + std::to_string(after.commits - before.commits) +
                      " commits and " + std::to_string(after.aborts - before.aborts) +
                      " aborts, the threads " + std::to_string(commits) + " and " +
                      std::to_string(aborts));
        if (threads == 1 && aborts != 0)
          checked.Add("a single thread's transfer aborted (" + std::to_string(aborts) + " times)");
        CheckTotal(kv, cfg, &checked);
        commit_rate.push_back(static_cast<double>(commits) / seconds);
        attempt_rate.push_back(static_cast<double>(commits + aborts) / seconds);
        abort_pct.push_back(100.0 * static_cast<double>(aborts) / static_cast<double>(commits + aborts));
        runs.push_back({{"threads", threads}, {"hot", hot}, {"repeat", rep}, {"seconds", seconds},
                        {"commits", commits}, {"aborts", aborts}});
      }
      const double c = pmindex::bench::Median(commit_rate), a = pmindex::bench::Median(attempt_rate),
                   p = pmindex::bench::Median(abort_pct);
      std::printf("%-8" PRIu64 " %-10" PRIu64 " %12s %12s %10.2f %14.3f\n", threads, hot,
                  pmindex::bench::Human(c).c_str(), pmindex::bench::Human(a).c_str(), p,
                  c > 0 ? (a - c) / c : 0.0);
      std::fflush(stdout);
    }
  }
  if (Status v = kv.Verify(); !v.ok()) checked.Add("Verify: " + v.ToString());
  if (!cfg.json.empty()) {
    nlohmann::json doc = {
        {"tool", "pmtxbench"},
        {"version", pmindex::version()},
        {"date", pmindex::bench::UtcNow()},
        {"machine", {{"cpu", pmindex::bench::CpuModel()}, {"cores", std::thread::hardware_concurrency()}}},
        {"config",
         {{"index", cfg.index}, {"keys", cfg.keys}, {"value_size", cfg.value_size}, {"writes", cfg.writes},
          {"reads", cfg.reads}, {"txs", cfg.txs}, {"repeat", cfg.repeat}, {"seed", cfg.seed},
          {"key_prefix", g_key_prefix}}},
        {"load_seconds", load_seconds},
        {"close_seconds", close_seconds},
        {"open_seconds", open_seconds},
        {"stats_seconds", stats_seconds},
        {"runs", runs},
        {"wrong", checked.wrong}};
    if (Status s = pmindex::bench::WriteFileAtomically(cfg.json, doc.dump(2) + "\n", "--json"); !s.ok())
      Fail(s.ToString());
  }
  if (Status s = kv.Close(); !s.ok()) Fail("close: " + s.ToString());
  if (checked.wrong != 0) {
    std::fprintf(stderr, "pmtxbench: %" PRIu64 " failed checks; first: %s\n", checked.wrong,
                 checked.first.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
