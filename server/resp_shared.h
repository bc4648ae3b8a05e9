// What the RESP side keeps per connection (RespClient) and what all the
// RESP connections of a server share (RespShared): the command table, the
// registry of connected clients (CLIENT LIST, CLIENT KILL), the settings
// CONFIG GET/SET read and change (the password among them), and the
// per-command counters (INFO commandstats).
//
// Threads: connections run on several event-loop threads at once. A
// RespClient is changed only by its own connection's thread; other
// connections read it (CLIENT LIST) while they hold the registry's mutex,
// so its fields are either atomics or strings that the owner writes only
// under that mutex (ClientRegistry::Update). RespShared's settings are
// behind their own mutex or atomic; the command table is read-only.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "server/resp_blocking.h"
#include "sync/mutex.h"

namespace pmindex::server {

struct Command;
class CommandTable;
class Cluster;
class Items;

// The steady clock (CLOCK_MONOTONIC) in microseconds and milliseconds:
// idle times and command durations.
int64_t SteadyUs();
inline int64_t SteadyMs() { return SteadyUs() / 1000; }

// One RESP connection's state.
struct RespTransaction;  // resp_transaction.h

struct RespClient {
  // Set before the client is registered, constant after.
  uint64_t id = 0;
  std::string addr;   // the peer, "ip:port" ("" in tests)
  std::string laddr;  // the local end
  int64_t created_ms = 0;

  // Own thread writes; others read.
  std::atomic<int> protocol{2};            // RESP version: 2, or 3 after HELLO 3
  std::atomic<int> db{0};                  // the selected database
  std::atomic<int64_t> last_steady_ms{0};  // last command's start, steady clock
  std::atomic<const Command*> last_command{nullptr};
  std::atomic<bool> no_evict{false};
  // Set by CLIENT KILL from any connection: the connection closes.
  std::atomic<bool> killed{false};

  // Own thread only.
  bool authenticated = false;
  // Cluster mode: ASKING was sent and applies to the next command only.
  bool asking = false;
  // Cluster mode: READONLY (accepted; with no replicas it changes nothing).
  bool readonly = false;  // meaningful only while a password is set
  // MULTI's queue and WATCH's keys (resp_transaction.h); null until used.
  std::shared_ptr<RespTransaction> tx;
  // Keys (database, key) the running command may have made non-empty
  // while clients are parked (resp_blocking.h): the dispatcher serves
  // their waiters once the command (or its EXEC) has committed.
  std::vector<std::pair<int, std::string>> ready_keys;

  // Written by the own thread under the registry's mutex (Update); read
  // by others under it, by the own thread at any time.
  std::string name;  // CLIENT SETNAME, HELLO SETNAME
  std::string lib_name;
  std::string lib_ver;
  // Closes the connection from any thread (set by the server; empty in
  // tests, where `killed` is enough). Guarded by the registry's mutex.
  std::function<void()> on_kill;
};

// The connected clients, by id.
class ClientRegistry {
 public:
  void Add(RespClient* c);
  void Remove(RespClient* c);
  // Runs f(c) under the mutex: the own thread's way to change the fields
  // others read under it.
  template <class F>
  void Update(RespClient& c, F&& f) {
    sync::MutexLock lock(mu_);
    f(c);
  }
  // Calls f(const RespClient&) for every client, in id order, under the
  // mutex.
  template <class F>
  void ForEach(F&& f) const {
    sync::MutexLock lock(mu_);
    for (const auto& [id, c] : clients_) f(*c);
  }
  // Marks every client `match` selects as killed and runs its on_kill;
  // returns how many. The caller's own client (`self`) is marked but its
  // on_kill is not run: it closes after its reply.
  size_t Kill(const std::function<bool(const RespClient&)>& match, const RespClient* self);
  size_t size() const;

 private:
  mutable sync::Mutex mu_;
  std::map<uint64_t, RespClient*> clients_ PMINDEX_GUARDED_BY(mu_);
};

// Settings of the RESP side that the server sets at start.
struct RespSettings {
  std::string requirepass{};   // "" = no password
  bool protected_mode = true;  // see RespShared::RefuseConnection
  // Read-only facts CONFIG GET reports.
  std::string bind{"127.0.0.1"};
  int port = 0;
  int threads = 1;
  size_t max_connections = 0;
  size_t proto_max_bulk_len = size_t{512} << 20;
  int databases = 1;  // --databases
  // Cluster mode's map and node (cluster.h); nullptr: not in cluster mode.
  // Must outlive the server.
  Cluster* cluster = nullptr;
};

// Calls, time and failures of one command (INFO commandstats). Striped:
// threads running the same command add to different cache lines (a
// thread's stripe is fixed when it first counts), a read sums the
// stripes. Each count is exact; a read is not a snapshot of all four.
class CommandCounters {
 public:
  struct Totals {
    uint64_t calls = 0;
    uint64_t usec = 0;
    uint64_t rejected = 0;  // refused before running (arity, auth, key)
    uint64_t failed = 0;    // ran and replied an error
  };
  void Called(uint64_t usec, bool failed) {
    Stripe& s = Mine();
    s.calls.fetch_add(1, std::memory_order_relaxed);
    s.usec.fetch_add(usec, std::memory_order_relaxed);
    if (failed) s.failed.fetch_add(1, std::memory_order_relaxed);
  }
  void Rejected() { Mine().rejected.fetch_add(1, std::memory_order_relaxed); }
  Totals Read() const;
  void Reset();

 private:
  static constexpr size_t kStripes = 8;
  struct alignas(64) Stripe {
    std::atomic<uint64_t> calls{0}, usec{0}, rejected{0}, failed{0};
  };
  Stripe& Mine();
  Stripe stripes_[kStripes];
};

class RespShared {
 public:
  explicit RespShared(RespSettings settings = {});
  RespShared(const RespShared&) = delete;
  RespShared& operator=(const RespShared&) = delete;

  const CommandTable& commands() const { return commands_; }
  ClientRegistry& clients() { return clients_; }
  // The clients parked by blocking commands.
  BlockingRegistry& blocking() { return blocking_; }
  // A new connection's id: 1, 2, 3, ... (CLIENT ID).
  uint64_t NextClientId() { return next_client_id_.fetch_add(1, std::memory_order_relaxed); }

  // The password (requirepass): whether one is set, and whether a user
  // and password authenticate. The only user is "default"; without a
  // password, "default" with any password authenticates (Redis's
  // "nopass" default user).
  bool PasswordRequired() const;
  bool Authenticate(std::string_view user, std::string_view password) const;
  // Protected mode: true iff a connection from `peer_is_loopback` must be
  // refused (protected mode on, no password, a peer beyond loopback).
  bool RefuseConnection(bool peer_is_loopback) const;
  // The largest bulk string a request may carry (proto-max-bulk-len).
  // CONFIG SET changes it (1 MiB to Databases::kMaxValueBytes less an
  // item's header, as Redis's range starts at 1 MiB).
  size_t proto_max_bulk_len() const { return proto_max_bulk_len_.load(std::memory_order_relaxed); }
  // The cluster this node is part of, or nullptr outside cluster mode.
  Cluster* cluster() const { return settings_.cluster; }

  // The settings CONFIG GET and CONFIG SET know, by name.
  struct ConfigParam {
    std::function<std::string()> get;
    // Empty: read-only. Returns "" or the error's text.
    std::function<std::string(std::string_view)> set;
  };
  const std::map<std::string, ConfigParam, std::less<>>& config() const { return config_; }

  // Counters of a command (or subcommand) of the table.
  CommandCounters& counters(const Command* c);
  // CONFIG RESETSTAT: zeroes the command counters.
  void ResetCommandCounters();

  // OBJECT IDLETIME's access clock, in DRAM: kAccessBuckets buckets of
  // one cache line each, 2 MiB in all, on one huge page where the kernel
  // grants it (madvise), so that reaching a bucket needs no page walk (in
  // a virtual machine, a nested one). A bucket holds up to kAccessWays
  // keys, each as a 32-bit fingerprint of its (database, key) and the
  // unix second of its last access (the item layer's clock,
  // Items::NowMs), and its floor: the newest second of any entry it
  // evicted. A key new to its full bucket
  // takes the entry of the bucket's least recently accessed key.
  // The dispatcher touches the keys of every RESP command but those Redis
  // does not count as an access (OBJECT, TYPE, EXISTS, TTL, ...); a touch
  // writes only when the stored second changes.
  // IdleSeconds is exact (to the second) while the key is in its bucket.
  // Else it is a lower bound: the key was accessed at or before the floor,
  // so its idle time is at least now minus the floor; and if the bucket
  // never evicted, the key was not accessed since `start_ms` (the server's
  // start), so it is at least the time since then. Answers never exceed
  // the time since the start. Two keys of one bucket with equal
  // fingerprints (2^-32 per pair) would share a time.
  static constexpr size_t kAccessBuckets = size_t{1} << 15;
  static constexpr size_t kAccessWays = 7;
  // A (database, key) as the clock keeps it: its bucket and fingerprint.
  struct AccessKey {
    uint32_t bucket;
    uint32_t print;
  };
  static AccessKey AccessKeyOf(int db, std::string_view key);
  // Asks for the key's bucket in the caches: the dispatcher does so before
  // the command runs and touches after it, so that the bucket's line
  // arrives while the command runs, not when the touch waits for it (on
  // 4 KiB pages the prefetch itself waited for the page walk).
  void PrefetchAccess(AccessKey k) const { __builtin_prefetch(&access_[k.bucket], 1, 3); }
  void Touch(AccessKey k, int64_t now_ms);
  void Touch(int db, std::string_view key, int64_t now_ms) { Touch(AccessKeyOf(db, key), now_ms); }
  int64_t IdleSeconds(int db, std::string_view key, int64_t now_ms, int64_t start_ms) const;

  // maxmemory (CONFIG SET maxmemory; 0: no limit). "Used memory" is the
  // pool's allocated bytes, INFO's used_memory (Items::Info().pm_bytes):
  // reading it walks the allocator's pages and the index's leaves, so it
  // is re-read at most every kUsedMemoryRefreshMs while a limit is set
  // (and at once after CONFIG SET maxmemory); in between, the last figure
  // stands. Nothing is ever evicted (maxmemory-policy is noeviction):
  // over the limit, commands flagged deny-oom are refused (the
  // dispatcher, resp_protocol.cc).
  static constexpr int64_t kUsedMemoryRefreshMs = 100;
  uint64_t maxmemory() const { return maxmemory_.load(std::memory_order_relaxed); }
  // True iff a limit is set and the used memory exceeds it.
  bool OutOfMemory(Items& items);
  // Calls f(command, totals) for every command and subcommand.
  void ForEachCounters(
      const std::function<void(const Command&, const CommandCounters::Totals&)>& f) const;

 private:
  // Fills config_ (CONFIG GET/SET): the settings a client may change, the
  // ones pmserver reports but cannot change, and Redis's encoding
  // thresholds (accepted, no effect).
  void AddConfig();
  void AddSettableConfig();
  void AddFixedConfig();
  void AddTunableConfig();

  const CommandTable& commands_;
  ClientRegistry clients_;
  BlockingRegistry blocking_;
  std::atomic<uint64_t> next_client_id_{1};
  // settings_ is constant but for its requirepass, which the password
  // checks and CONFIG SET change and read in requirepass_ under mu_.
  RespSettings settings_;
  mutable sync::Mutex mu_;
  std::string requirepass_ PMINDEX_GUARDED_BY(mu_);
  std::atomic<bool> protected_mode_;
  std::atomic<size_t> proto_max_bulk_len_;
  std::map<std::string, ConfigParam, std::less<>> config_;
  std::unique_ptr<CommandCounters[]> counters_;  // by Command::id
  // One bucket of the access clock: word 0 is the floor (0: nothing
  // evicted yet), words 1..kAccessWays the entries (fingerprint << 32 |
  // second; 0: empty). Every word is read and written through
  // std::atomic_ref, relaxed: entries change by compare-and-swap, so that
  // a touch never overwrites another thread's entry without raising the
  // floor first. Plain words, so that fresh zero pages are an empty clock.
  struct alignas(64) AccessBucket {
    uint64_t word[kAccessWays + 1];
  };
  static_assert(sizeof(AccessBucket) == 64);
  static constexpr size_t kAccessClockBytes = kAccessBuckets * sizeof(AccessBucket);
  struct FreeDeleter {
    void operator()(AccessBucket* p) const;
  };
  // kAccessBuckets zeroed buckets: fresh anonymous pages (zero without a
  // write of ours; a memset of 2 MiB is slow under TSan), aligned to their
  // size (a huge page's), advised to be one huge page.
  static AccessBucket* NewAccessClock();
  const std::unique_ptr<AccessBucket[], FreeDeleter> access_;
  std::atomic<uint64_t> maxmemory_{0};
  // The last used-memory figure and when it was read (steady ms; 0: read
  // it at the next check). One thread refreshes it at a time.
  std::atomic<uint64_t> used_memory_{0};
  std::atomic<int64_t> used_memory_ms_{0};
  std::mutex used_memory_mu_;
};

// Redis's memory values (maxmemory): a non-negative integer with an
// optional unit, any case: b, k (1000), kb (1024), m, mb, g, gb. False if
// `s` is not one or overflows.
bool ParseMemoryValue(std::string_view s, uint64_t* bytes);

}  // namespace pmindex::server
