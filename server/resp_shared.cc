#include "server/resp_shared.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>

#include "server/databases.h"
#include "server/items.h"
#include "server/numbers.h"
#include "server/resp_command.h"
#include "util/check.h"

namespace pmindex::server {

int64_t SteadyUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void ClientRegistry::Add(RespClient* c) {
  sync::MutexLock lock(mu_);
  clients_[c->id] = c;
}

void ClientRegistry::Remove(RespClient* c) {
  sync::MutexLock lock(mu_);
  clients_.erase(c->id);
}

size_t ClientRegistry::Kill(const std::function<bool(const RespClient&)>& match,
                            const RespClient* self) {
  sync::MutexLock lock(mu_);
  size_t n = 0;
  for (const auto& [id, c] : clients_) {
    if (!match(*c)) continue;
    ++n;
    c->killed.store(true, std::memory_order_relaxed);
    if (c != self && c->on_kill) c->on_kill();
  }
  return n;
}

size_t ClientRegistry::size() const {
  sync::MutexLock lock(mu_);
  return clients_.size();
}

namespace {

// Compares in time independent of where the strings differ (a password
// check should not tell how many leading bytes were right).
bool SameBytes(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Redis's memory amounts: digits with an optional unit (k, kb, m, mb, g,
// gb: 1000 or 1024 based, any case); false if it is not one or overflows.
bool ParseMemoryAmount(std::string_view v, uint64_t* out) {
  size_t digits = 0;
  while (digits < v.size() && v[digits] >= '0' && v[digits] <= '9') ++digits;
  uint64_t n = 0;
  if (digits == 0 || !ParseNumber(v.substr(0, digits), &n)) return false;
  const std::string_view unit = v.substr(digits);
  uint64_t mul = 1;
  if (unit.empty() || EqualsIgnoreCase(unit, "b")) {
    mul = 1;
  } else if (EqualsIgnoreCase(unit, "k")) {
    mul = 1000;
  } else if (EqualsIgnoreCase(unit, "kb")) {
    mul = 1024;
  } else if (EqualsIgnoreCase(unit, "m")) {
    mul = 1000 * 1000;
  } else if (EqualsIgnoreCase(unit, "mb")) {
    mul = 1024 * 1024;
  } else if (EqualsIgnoreCase(unit, "g")) {
    mul = 1000 * 1000 * 1000;
  } else if (EqualsIgnoreCase(unit, "gb")) {
    mul = 1024 * 1024 * 1024;
  } else {
    return false;
  }
  return !__builtin_mul_overflow(n, mul, out);
}

// CONFIG SET proto-max-bulk-len's value: "" and *n set, or the error.
std::string ParseProtoMaxBulkLen(std::string_view v, uint64_t* n) {
  constexpr uint64_t kMin = uint64_t{1} << 20;
  constexpr uint64_t kMax = Databases::kMaxValueBytes - item_codec::kMaxHeaderBytes;
  if (!ParseMemoryAmount(v, n)) return "argument must be a memory value";
  if (*n < kMin || *n > kMax)
    return "argument must be between " + std::to_string(kMin) + " and " + std::to_string(kMax) +
           " inclusive";
  return "";
}

}  // namespace

RespShared::RespShared(RespSettings settings)
    : commands_(RespCommands()),
      settings_(std::move(settings)),
      requirepass_(settings_.requirepass),
      protected_mode_(settings_.protected_mode),
      proto_max_bulk_len_(settings_.proto_max_bulk_len),
      counters_(new CommandCounters[commands_.ids()]),
      access_(NewAccessClock()) {
  AddConfig();
}

RespShared::AccessBucket* RespShared::NewAccessClock() {
  constexpr size_t kBytes = kAccessClockBytes;
  // Twice the size, then the unaligned head and tail go back.
  void* raw = mmap(nullptr, 2 * kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  PMINDEX_CHECK(raw != MAP_FAILED, "out of memory for the access clock (%zu bytes)", kBytes);
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kBytes - 1) & ~(uintptr_t{kBytes} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t tail = start + 2 * kBytes - (aligned + kBytes);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + kBytes), tail);
  void* p = reinterpret_cast<void*>(aligned);
  // A hint, before the pages are touched: without huge pages the clock
  // works the same, a little slower.
  static_cast<void>(madvise(p, kBytes, MADV_HUGEPAGE));
  return static_cast<AccessBucket*>(p);
}

void RespShared::FreeDeleter::operator()(AccessBucket* p) const { munmap(p, kAccessClockBytes); }

namespace {

// A (database, key)'s bucket in the access clock and its fingerprint
// (never 0: an empty entry matches no key).
std::pair<size_t, uint32_t> AccessSlot(int db, std::string_view key) {
  uint64_t h =
      std::hash<std::string_view>()(key) ^ (static_cast<uint64_t>(db) * 0x9E3779B97F4A7C15ull);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return {static_cast<size_t>(h) & (RespShared::kAccessBuckets - 1),
          static_cast<uint32_t>(h >> 32) | 1u};
}

uint32_t PrintOf(uint64_t entry) { return static_cast<uint32_t>(entry >> 32); }
uint32_t SecondOf(uint64_t entry) { return static_cast<uint32_t>(entry); }

}  // namespace

RespShared::AccessKey RespShared::AccessKeyOf(int db, std::string_view key) {
  const auto [bucket, print] = AccessSlot(db, key);
  return {static_cast<uint32_t>(bucket), print};
}

void RespShared::Touch(AccessKey k, int64_t now_ms) {
  const uint32_t print = k.print;
  const auto second = static_cast<uint32_t>(std::max<int64_t>(0, now_ms / 1000));
  const uint64_t value = (uint64_t{print} << 32) | second;
  uint64_t* words = access_[k.bucket].word;
  auto word = [words](size_t i) { return std::atomic_ref<uint64_t>(words[i]); };
  for (;;) {
    // The key's entry, or else the entry of the least recently accessed
    // key (an empty entry is second 0, the oldest).
    size_t victim = 1;
    uint64_t victim_entry = word(1).load(std::memory_order_relaxed);
    bool changed = false;
    for (size_t i = 1; i <= kAccessWays; ++i) {
      uint64_t e = word(i).load(std::memory_order_relaxed);
      if (PrintOf(e) == print) {
        // Most accesses repeat one of the same second: no store, and the
        // line stays shared between the cores.
        if (SecondOf(e) >= second) return;
        if (word(i).compare_exchange_strong(e, value, std::memory_order_relaxed)) return;
        changed = true;
        break;
      }
      if (SecondOf(e) < SecondOf(victim_entry)) {
        victim = i;
        victim_entry = e;
      }
    }
    if (changed) continue;
    // The floor first: a reader that misses the evicted key must find its
    // time at or below the floor.
    if (victim_entry != 0) {
      const uint64_t evicted = SecondOf(victim_entry);
      uint64_t floor = word(0).load(std::memory_order_relaxed);
      while (floor < evicted &&
             !word(0).compare_exchange_weak(floor, evicted, std::memory_order_relaxed)) {
      }
    }
    if (word(victim).compare_exchange_strong(victim_entry, value, std::memory_order_relaxed))
      return;
  }
}

int64_t RespShared::IdleSeconds(int db, std::string_view key, int64_t now_ms,
                                int64_t start_ms) const {
  const auto [b, print] = AccessSlot(db, key);
  uint64_t* words = access_[b].word;
  auto word = [words](size_t i) { return std::atomic_ref<uint64_t>(words[i]); };
  const int64_t since_start = std::max<int64_t>(0, (now_ms - start_ms) / 1000);
  int64_t newest = -1;
  for (size_t i = 1; i <= kAccessWays; ++i) {
    const uint64_t e = word(i).load(std::memory_order_relaxed);
    if (PrintOf(e) == print) newest = std::max<int64_t>(newest, SecondOf(e));
  }
  if (newest < 0) {
    const uint64_t floor = word(0).load(std::memory_order_relaxed);
    if (floor == 0) return since_start;
    newest = static_cast<int64_t>(floor);
  }
  return std::clamp<int64_t>(now_ms / 1000 - newest, 0, since_start);
}

CommandCounters::Stripe& CommandCounters::Mine() {
  static std::atomic<size_t> next{0};
  thread_local const size_t stripe = next.fetch_add(1, std::memory_order_relaxed) % kStripes;
  return stripes_[stripe];
}

CommandCounters::Totals CommandCounters::Read() const {
  Totals t;
  for (const Stripe& s : stripes_) {
    t.calls += s.calls.load(std::memory_order_relaxed);
    t.usec += s.usec.load(std::memory_order_relaxed);
    t.rejected += s.rejected.load(std::memory_order_relaxed);
    t.failed += s.failed.load(std::memory_order_relaxed);
  }
  return t;
}

void CommandCounters::Reset() {
  for (Stripe& s : stripes_) {
    s.calls.store(0, std::memory_order_relaxed);
    s.usec.store(0, std::memory_order_relaxed);
    s.rejected.store(0, std::memory_order_relaxed);
    s.failed.store(0, std::memory_order_relaxed);
  }
}

CommandCounters& RespShared::counters(const Command* c) { return counters_[c->id]; }

void RespShared::ForEachCounters(
    const std::function<void(const Command&, const CommandCounters::Totals&)>& f) const {
  commands_.ForEach([&](const Command& c) {
    f(c, counters_[c.id].Read());
    for (const Command& sub : c.subcommands) f(sub, counters_[sub.id].Read());
  });
}

bool RespShared::PasswordRequired() const {
  sync::MutexLock lock(mu_);
  return !requirepass_.empty();
}

bool RespShared::Authenticate(std::string_view user, std::string_view password) const {
  sync::MutexLock lock(mu_);
  if (user != "default") return false;
  return requirepass_.empty() || SameBytes(password, requirepass_);
}

bool RespShared::RefuseConnection(bool peer_is_loopback) const {
  return !peer_is_loopback && protected_mode_.load(std::memory_order_relaxed) &&
         !PasswordRequired();
}

bool RespShared::OutOfMemory(Items& items) {
  const uint64_t limit = maxmemory();
  if (limit == 0) return false;
  const int64_t now = SteadyMs();
  if (now - used_memory_ms_.load(std::memory_order_acquire) >= kUsedMemoryRefreshMs) {
    std::unique_lock<std::mutex> lock(used_memory_mu_, std::try_to_lock);
    // Another thread refreshing it: its figure (or the last) stands.
    if (lock.owns_lock() &&
        now - used_memory_ms_.load(std::memory_order_acquire) >= kUsedMemoryRefreshMs) {
      used_memory_.store(items.Info().pm_bytes, std::memory_order_relaxed);
      used_memory_ms_.store(SteadyMs(), std::memory_order_release);
    }
  }
  return used_memory_.load(std::memory_order_relaxed) > limit;
}

bool ParseMemoryValue(std::string_view s, uint64_t* bytes) {
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  if (digits == 0 || digits > 19) return false;
  uint64_t n = 0;
  for (size_t i = 0; i < digits; ++i) n = n * 10 + static_cast<uint64_t>(s[i] - '0');
  const std::string_view unit = s.substr(digits);
  uint64_t mul = 0;
  if (unit.empty() || EqualsIgnoreCase(unit, "b")) {
    mul = 1;
  } else if (EqualsIgnoreCase(unit, "k")) {
    mul = 1000;
  } else if (EqualsIgnoreCase(unit, "kb")) {
    mul = uint64_t{1} << 10;
  } else if (EqualsIgnoreCase(unit, "m")) {
    mul = 1000 * 1000;
  } else if (EqualsIgnoreCase(unit, "mb")) {
    mul = uint64_t{1} << 20;
  } else if (EqualsIgnoreCase(unit, "g")) {
    mul = 1000 * 1000 * 1000;
  } else if (EqualsIgnoreCase(unit, "gb")) {
    mul = uint64_t{1} << 30;
  } else {
    return false;
  }
  if (n > UINT64_MAX / mul) return false;
  *bytes = n * mul;
  return true;
}

void RespShared::ResetCommandCounters() {
  for (uint32_t i = 0; i < commands_.ids(); ++i) counters_[i].Reset();
}

void RespShared::AddConfig() {
  AddSettableConfig();
  AddFixedConfig();
  AddTunableConfig();
}

void RespShared::AddSettableConfig() {
  config_["requirepass"] = {[this] {
                              sync::MutexLock lock(mu_);
                              return requirepass_;
                            },
                            [this](std::string_view v) {
                              sync::MutexLock lock(mu_);
                              requirepass_ = std::string(v);
                              return std::string();
                            }};
  config_["protected-mode"] = {
      [this] { return std::string(protected_mode_.load() ? "yes" : "no"); },
      [this](std::string_view v) {
        if (EqualsIgnoreCase(v, "yes")) {
          protected_mode_.store(true);
        } else if (EqualsIgnoreCase(v, "no")) {
          protected_mode_.store(false);
        } else {
          return std::string("argument must be 'yes' or 'no'");
        }
        return std::string();
      }};
  config_["proto-max-bulk-len"] = {[this] { return std::to_string(proto_max_bulk_len()); },
                                   [this](std::string_view v) {
                                     uint64_t n = 0;
                                     std::string error = ParseProtoMaxBulkLen(v, &n);
                                     if (error.empty()) proto_max_bulk_len_.store(n);
                                     return error;
                                   }};
  config_["maxmemory"] = {[this] { return std::to_string(maxmemory()); },
                          [this](std::string_view v) {
                            uint64_t bytes = 0;
                            if (!ParseMemoryValue(v, &bytes))
                              return std::string("argument must be a memory value");
                            maxmemory_.store(bytes, std::memory_order_relaxed);
                            // The next check reads the used memory afresh.
                            used_memory_ms_.store(0, std::memory_order_release);
                            return std::string();
                          }};
}

void RespShared::AddFixedConfig() {
  // A setting pmserver reports but cannot change: setting it to the value
  // it has is accepted (tools do that), anything else is an error.
  auto fixed = [this](std::string name, std::string value) {
    config_[std::move(name)] = {[value] { return value; },
                                [value](std::string_view v) {
                                  return v == value ? std::string()
                                                    : std::string("pmserver cannot change it");
                                }};
  };
  // One of the server's own settings, fixed when it started.
  auto immutable = [this](std::string name, std::string value) {
    config_[std::move(name)] = {[value] { return value; }, nullptr};
  };
  immutable("bind", settings_.bind);
  immutable("port", std::to_string(settings_.port));
  immutable("maxclients", std::to_string(settings_.max_connections));
  immutable("databases", std::to_string(settings_.databases));
  // Facts of a server that persists every write before its reply and
  // never evicts, in the words Redis's tools ask for them.
  fixed("save", "");
  fixed("appendonly", "no");
  fixed("maxmemory-policy", "noeviction");
  fixed("timeout", "0");
  fixed("cluster-enabled", settings_.cluster != nullptr ? "yes" : "no");
}

void RespShared::AddTunableConfig() {
  // Redis's thresholds of its compact collection encodings: accepted and
  // reported (any integer), with no effect, since pmserver stores every
  // collection the same way whatever its size (docs/server.md
  // "Collections"). A ziplist name is an alias of its listpack name.
  auto tunable = [this](std::initializer_list<std::string> names, int64_t initial) {
    auto value = std::make_shared<std::atomic<int64_t>>(initial);
    for (const std::string& name : names) {
      config_[name] = {[value] { return std::to_string(value->load()); },
                       [value](std::string_view v) {
                         int64_t n = 0;
                         if (!ParseNumber(v, &n))
                           return std::string("argument couldn't be parsed into an integer");
                         value->store(n);
                         return std::string();
                       }};
    }
  };
  tunable({"hash-max-listpack-entries", "hash-max-ziplist-entries"}, 128);
  tunable({"hash-max-listpack-value", "hash-max-ziplist-value"}, 64);
  tunable({"zset-max-listpack-entries", "zset-max-ziplist-entries"}, 128);
  tunable({"zset-max-listpack-value", "zset-max-ziplist-value"}, 64);
  tunable({"list-max-listpack-size", "list-max-ziplist-size"}, -2);
  tunable({"list-compress-depth"}, 0);
  tunable({"set-max-intset-entries"}, 512);
}

}  // namespace pmindex::server
