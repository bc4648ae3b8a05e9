// The storage seam of pmserver: the few operations the protocols need,
// over byte-string keys and values with versions.
//
// The one production implementation is KvBackedStore (kv_backed_store.h),
// over pmindex::KvStore; tests also run the protocols over a std::map
// (tests/server/map_store.h). Everything above this interface (expiry,
// flags, counters, the wire protocols) is shared by both, so what the
// tests exercise is what ships.
//
// Contract, for every implementation:
// - Keys are 1 to max_key_bytes() bytes, values 0 to max_value_bytes()
//   bytes; callers check the sizes before calling (a violation is an
//   error Status, never a crash).
// - Every call may run from any number of threads at once and is
//   linearizable. A call that changes the store returns only after the
//   change is durable (for KvBackedStore: after KvStore's persist point),
//   so a protocol may acknowledge a write as soon as the call returns.
// - A key's version changes with every write of the key; a version is
//   never 0. The conditional writes compare against it (memcached "cas").
// - Outcomes that are part of the operation (absent, present, changed)
//   are a WriteOutcome; a Status error means the store failed (OutOfSpace,
//   IOError, closed) and nothing changed.
// - Transactions (Begin, StoreTransaction): a group of reads and writes
//   committed all or nothing, durable before Commit returns, serializable
//   for the keys they read with Get (see StoreTransaction).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pmindex/status.h"

namespace pmindex::server {

// A stored value with its version (memcached's "cas unique").
struct StoredValue {
  std::string value;
  uint64_t version = 0;
};

// What a conditional write did.
enum class WriteOutcome : uint8_t {
  kDone,     // written (or removed)
  kAbsent,   // the key is absent: nothing changed
  kPresent,  // PutIfAbsent: the key is present: nothing changed
  kChanged,  // the key's version is not the one given: nothing changed
};

// Part of a stored value (Store::GetPart).
struct StoredPart {
  std::string prefix;  // the value's first min(size, Store::kPeekBytes) bytes
  std::string part;    // the bytes asked for (fewer at the value's end)
  uint64_t size = 0;   // the whole value's bytes
  uint64_t version = 0;
};
// How many of a value's first bytes are a header that GetPart's offsets
// skip, given the value's first min(size, Store::kPeekBytes) bytes.
using HeaderBytesFn = size_t (*)(std::string_view prefix);

// GetPart's answer cut from a whole value.
inline StoredPart CutPart(std::string_view value, uint64_t version, HeaderBytesFn header,
                          uint64_t offset, uint64_t length);

// One write of a patch (Store::PatchIfVersion): `bytes` at byte `offset`
// of a stored value.
struct ByteWrite {
  uint64_t offset = 0;
  std::string_view bytes;
};
// Applies `writes` to *value in order; a write past the end first grows
// it with zero bytes up to the write's offset.
inline void ApplyWrites(std::string* value, const std::vector<ByteWrite>& writes);
// The length of a value of `size` bytes after `writes`.
inline uint64_t PatchedSize(uint64_t size, const std::vector<ByteWrite>& writes) {
  for (const ByteWrite& w : writes) size = std::max<uint64_t>(size, w.offset + w.bytes.size());
  return size;
}

struct StoreInfo {
  uint64_t keys = 0;      // keys stored (expired items not yet removed included)
  std::string engine;     // e.g. "kvstore lbtree", "map (test)"
  uint64_t pm_bytes = 0;  // bytes of persistent memory in use (0: none)
};

// A transaction (Store::Begin): reads see the store plus the
// transaction's own writes; writes are buffered until Commit. One thread
// uses it at a time.
//
// Commit applies every write atomically, durably before it returns, or
// returns Aborted and changes nothing if a key the transaction read with
// Get (present or absent) or removed was written by anyone else after the
// transaction read it; a store may also abort when a key written blind
// changed after Begin (KvStore's first committer wins). So the keys a
// transaction reads are unchanged at its commit: EXEC and WATCH rely on
// that. Range reads are not validated (a concurrent insert in the range
// does not abort). A caller retries the whole transaction on Aborted.
// After Commit or Abort (or the destructor, which aborts) nothing else may
// be called.
class StoreTransaction {
 public:
  virtual ~StoreTransaction() = default;

  // The key's value and version as the transaction sees it, or NotFound.
  // A key this transaction wrote has a version of its own (non-zero,
  // different for each write, not a store version). Aborted: the store
  // already knows that Commit will fail (the key changed since Begin).
  [[nodiscard]] virtual Result<StoredValue> Get(std::string_view key) = 0;
  [[nodiscard]] virtual Status Put(std::string_view key, std::string_view value) = 0;
  // kDone, or kAbsent if the key is absent (nothing changes).
  [[nodiscard]] virtual Result<WriteOutcome> Remove(std::string_view key) = 0;
  // As Store::Range, with this transaction's writes.
  virtual size_t Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
                       std::vector<std::pair<std::string, std::string>>* out) = 0;
  // As Store::GetPart and Store::PatchIfVersion, in the transaction (the
  // patch's writes buffered like Put's). A transaction over a store that
  // keeps large values in pieces reads and writes only the pieces
  // concerned (GETRANGE, APPEND... inside EXEC).
  [[nodiscard]] virtual Result<StoredPart> GetPart(std::string_view key, HeaderBytesFn header,
                                                   uint64_t offset, uint64_t length) {
    Result<StoredValue> r = Get(key);
    if (!r.ok()) return r.status();
    return CutPart(r->value, r->version, header, offset, length);
  }
  [[nodiscard]] virtual Result<WriteOutcome> PatchIfVersion(std::string_view key, uint64_t version,
                                                            const std::vector<ByteWrite>& writes) {
    Result<StoredValue> r = Get(key);
    if (!r.ok())
      return r.status().is_not_found() ? Result<WriteOutcome>(WriteOutcome::kAbsent)
                                       : Result<WriteOutcome>(r.status());
    if (r->version != version) return WriteOutcome::kChanged;
    ApplyWrites(&r->value, writes);
    PMINDEX_RETURN_IF_ERROR(Put(key, r->value));
    return WriteOutcome::kDone;
  }
  // OK: every write is durable and visible. Aborted: a conflict (above),
  // nothing changed. Other errors: the store failed, nothing changed.
  [[nodiscard]] virtual Status Commit() = 0;
  virtual void Abort() = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  virtual size_t max_key_bytes() const = 0;
  virtual size_t max_value_bytes() const = 0;

  // The key's value and version, or NotFound.
  [[nodiscard]] virtual Result<StoredValue> Get(std::string_view key) = 0;
  // As Get, but the value may be cut after its first kPeekBytes bytes:
  // for callers that need a record's version and kind, not its data (a
  // store that keeps large values in pieces answers without reading them).
  static constexpr size_t kPeekBytes = 32;
  [[nodiscard]] virtual Result<StoredValue> Peek(std::string_view key) { return Get(key); }
  // Bytes [h + offset, h + offset + length) of the key's value, as many
  // as it has, where h = header(its first bytes); or NotFound. A store
  // that keeps large values in pieces reads only the pieces those bytes
  // are in (GETRANGE of a large value).
  [[nodiscard]] virtual Result<StoredPart> GetPart(std::string_view key, HeaderBytesFn header,
                                                   uint64_t offset, uint64_t length) {
    Result<StoredValue> r = Get(key);
    if (!r.ok()) return r.status();
    return CutPart(r->value, r->version, header, offset, length);
  }
  // Inserts or replaces.
  [[nodiscard]] virtual Status Put(std::string_view key, std::string_view value) = 0;
  // Writes every pair atomically (all or none; a later pair wins over an
  // earlier one with the same key).
  [[nodiscard]] virtual Status PutMany(
      const std::vector<std::pair<std::string_view, std::string_view>>& pairs) = 0;
  // kDone, or kPresent if the key exists.
  [[nodiscard]] virtual Result<WriteOutcome> PutIfAbsent(std::string_view key,
                                                         std::string_view value) = 0;
  // kDone iff the key's version is `version`; else kAbsent or kChanged.
  [[nodiscard]] virtual Result<WriteOutcome> PutIfVersion(std::string_view key,
                                                          std::string_view value,
                                                          uint64_t version) = 0;
  // As PutIfVersion(key, value, read.version) and RemoveIfVersion(key,
  // read.version), where `read` is the whole record a Get of this store
  // returned: a store that needs the record it replaces (to count it) takes
  // it from the caller instead of reading the key again (versions never
  // come back, so a write of read.version replaces exactly `read`).
  [[nodiscard]] virtual Result<WriteOutcome> PutIfRead(std::string_view key, std::string_view value,
                                                       const StoredValue& read) {
    return PutIfVersion(key, value, read.version);
  }
  [[nodiscard]] virtual Result<WriteOutcome> RemoveIfRead(std::string_view key,
                                                          const StoredValue& read) {
    return RemoveIfVersion(key, read.version);
  }
  // Inserts or replaces, unless the key holds a value that `refuse`
  // accepts: then kPresent, and nothing changes (SET over a collection,
  // which must go with its elements). `refuse` is called with what a look
  // at the key found: at least the value's first kPeekBytes bytes (a view
  // valid during the call), or nullopt if the key was absent (the answer
  // is then ignored). It may be called again if the key changes before
  // the write; its last call saw what the write replaced. It must not
  // call the store. Here a Peek then a conditional write; a store that
  // can look and write in one lookup does.
  using PrefixTest = std::function<bool(std::optional<std::string_view> prefix)>;
  [[nodiscard]] virtual Result<WriteOutcome> PutUnless(std::string_view key, std::string_view value,
                                                       const PrefixTest& refuse) {
    for (;;) {
      Result<StoredValue> cur = Peek(key);
      if (!cur.ok() && !cur.status().is_not_found()) return cur.status();
      if (!cur.ok()) refuse(std::nullopt);
      if (cur.ok() && refuse(std::string_view(cur->value))) return WriteOutcome::kPresent;
      Result<WriteOutcome> w =
          cur.ok() ? PutIfVersion(key, value, cur->version) : PutIfAbsent(key, value);
      if (!w.ok() || *w == WriteOutcome::kDone) return w;
    }
  }
  // kDone or kAbsent.
  [[nodiscard]] virtual Result<WriteOutcome> Remove(std::string_view key) = 0;
  // Removes the key iff its version is `version`: kDone, kAbsent or
  // kChanged (lazy removal of an expired item must not remove a newer
  // value written meanwhile).
  [[nodiscard]] virtual Result<WriteOutcome> RemoveIfVersion(std::string_view key,
                                                             uint64_t version) = 0;
  // Appends up to `limit` pairs with from <= key < to (no upper bound if
  // `to` is nullopt), in the store's key order, read at one moment; returns
  // how many. The order is bytewise for the stores over KvStore and the
  // map; a database's view (databases.h) orders by (hash slot, key).
  virtual size_t Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
                       std::vector<std::pair<std::string, std::string>>* out) = 0;
  size_t Range(std::string_view from, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out) {
    return Range(from, std::nullopt, limit, out);
  }
  // Removes every key. Not atomic: a write that runs concurrently may
  // survive it.
  [[nodiscard]] virtual Status RemoveAll() = 0;
  virtual StoreInfo Info() = 0;
  // A new transaction (see StoreTransaction); nullptr from a store that is
  // itself a transaction's view (no nesting).
  virtual std::unique_ptr<StoreTransaction> Begin() = 0;
  // Writes `writes` into the key's value (ApplyWrites) iff its version is
  // `version`: kDone, kAbsent or kChanged; InvalidArgument if the value
  // would outgrow max_value_bytes(). A store that keeps large values in
  // pieces reads and writes only the pieces the writes fall in (RESP
  // APPEND, SETRANGE, SETBIT of a large value), all in one transaction.
  [[nodiscard]] virtual Result<WriteOutcome> PatchIfVersion(std::string_view key, uint64_t version,
                                                            const std::vector<ByteWrite>& writes) {
    Result<StoredValue> r = Get(key);
    if (!r.ok())
      return r.status().is_not_found() ? Result<WriteOutcome>(WriteOutcome::kAbsent)
                                       : Result<WriteOutcome>(r.status());
    if (r->version != version) return WriteOutcome::kChanged;
    if (PatchedSize(r->value.size(), writes) > max_value_bytes())
      return Status::InvalidArgument("the value is too large");
    ApplyWrites(&r->value, writes);
    return PutIfVersion(key, r->value, version);
  }
};

inline StoredPart CutPart(std::string_view value, uint64_t version, HeaderBytesFn header,
                          uint64_t offset, uint64_t length) {
  StoredPart p;
  p.prefix.assign(value.substr(0, Store::kPeekBytes));
  p.size = value.size();
  p.version = version;
  const uint64_t from = std::min<uint64_t>(header(p.prefix), value.size());
  if (offset < value.size() - from) {
    p.part.assign(value.substr(static_cast<size_t>(from + offset),
                               static_cast<size_t>(std::min<uint64_t>(length, value.size()))));
  }
  return p;
}

inline void ApplyWrites(std::string* value, const std::vector<ByteWrite>& writes) {
  for (const ByteWrite& w : writes) {
    const uint64_t end = w.offset + w.bytes.size();
    if (value->size() < end) value->resize(static_cast<size_t>(end), '\0');
    value->replace(static_cast<size_t>(w.offset), w.bytes.size(), w.bytes);
  }
}

// Sets *key to the smallest key after it among keys of at most `max`
// bytes, in bytewise order; returns false if there is none (key is `max`
// bytes of 0xff).
inline bool KeySuccessor(std::string* key, size_t max) {
  if (key->size() < max) {
    key->push_back('\0');
    return true;
  }
  while (!key->empty() && static_cast<unsigned char>(key->back()) == 0xff) key->pop_back();
  if (key->empty()) return false;
  key->back() = static_cast<char>(static_cast<unsigned char>(key->back()) + 1);
  return true;
}

}  // namespace pmindex::server
