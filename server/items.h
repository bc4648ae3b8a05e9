// The item layer, shared by both protocols: what pmserver keeps under a
// key is an item (data, memcached's 32-bit client flags, an expiry time),
// encoded into one Store value (docs/server.md "Value encoding"):
//
//   byte 0        0x50 | bit 0: flags follow | bit 1: expiry follows
//                 | bit 2: changed in place (below)
//   [4 bytes]     flags, little endian              (if bit 0)
//   [8 bytes]     expiry, unix time in ms, little endian, > 0  (if bit 1)
//   rest          the data
//
// Bit 2 records that a RESP APPEND, SETRANGE, SETBIT or BITFIELD wrote the data
// last: Redis turns such a value into its `raw` encoding, and OBJECT
// ENCODING says so until a command writes the value whole again (SET,
// INCR, ...). An edit that keeps the data (EXPIRE, PERSIST, TOUCH) keeps
// the bit.
//
// An item whose expiry is at or before now is expired: every read treats
// it as absent and removes it lazily (only that version of it).
//
// A key may instead hold a collection's metadata record (collections.h):
// to every method here a live collection is WrongTypeError() (RESP's
// WRONGTYPE), except that Write kSet and kReplace (SET, SET XX) replace
// it, kAdd finds the key taken, and Delete deletes it, each in one
// transaction that garbage-lists its elements; an expired collection is
// absent, and a write in its place drops it with its elements. Both
// protocols see the same items: a key set over RESP reads over memcached
// with flags 0, and the other way round.
//
// Durability: every method that changes an item returns only after its
// Store call returned, i.e. after the change is durable.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/stats.h"
#include "server/store.h"

namespace pmindex::server {

struct Item {
  std::string data;
  uint32_t flags = 0;
  int64_t expiry_ms = 0;  // unix time in ms; 0: never expires
  uint64_t version = 0;   // the store's version: memcached's cas unique
  bool raw = false;       // changed in place (item_codec::kRaw)
};

namespace item_codec {
inline constexpr uint8_t kTag = 0x50;
inline constexpr uint8_t kHasFlags = 0x01;
inline constexpr uint8_t kHasExpiry = 0x02;
inline constexpr uint8_t kRaw = 0x04;
inline constexpr size_t kMaxHeaderBytes = 1 + 4 + 8;
// Appends the encoding of an item to *out.
void Encode(std::string_view data, uint32_t flags, int64_t expiry_ms, std::string* out,
            bool raw = false);
// Returns false if `stored` is not an item's encoding (then *out is
// unspecified).
bool Decode(std::string_view stored, Item* out);
// The header's bytes of an item encoding that starts with `prefix` (by its
// tag; 0 if `prefix` is not an item's).
size_t HeaderBytes(std::string_view prefix);
// True iff `stored` is an item's encoding whose expiry is at or before
// `now_ms` (reads the header only).
bool ExpiredAt(std::string_view stored, int64_t now_ms);
}  // namespace item_codec

// What an item operation did (each protocol words it its own way).
enum class ItemOutcome : uint8_t {
  kDone,        // stored / deleted / touched / incremented
  kNotStored,   // add: present; replace, append, prepend: absent
  kExists,      // cas: the item changed since the client read it
  kNotFound,    // absent or expired
  kNotNumeric,  // incr/decr of a value that is not a number
  kOverflow,    // signed increment out of range (RESP)
};

enum class StoreMode : uint8_t { kSet, kAdd, kReplace, kAppend, kPrepend, kCas };

// What Items::Edit does to an item: keep it as it is, put a new item in
// its place, or remove it.
struct ItemEdit {
  enum class Kind : uint8_t { kKeep, kPut, kRemove };
  Kind kind = Kind::kKeep;
  std::string data;  // kPut: the new item
  uint32_t flags = 0;
  int64_t expiry_ms = 0;
  // kPut: the data was changed in place (item_codec::kRaw). A put of the
  // live item's own data keeps the live item's bit whatever this says.
  bool raw = false;

  static ItemEdit Keep() { return {}; }
  static ItemEdit Put(std::string data, uint32_t flags, int64_t expiry_ms, bool raw = false) {
    return {Kind::kPut, std::move(data), flags, expiry_ms, raw};
  }
  static ItemEdit Remove() { return {Kind::kRemove, {}, 0, 0, false}; }
};

// One write of Items::Patch: `bytes` at byte `offset` of an item's data.
struct DataWrite {
  uint64_t offset = 0;
  std::string bytes;
};

// Unix time in milliseconds (std::chrono::system_clock).
int64_t WallClockMs();

class Keyspace;

class Items {
 public:
  using Clock = std::function<int64_t()>;
  // `store` and `stats` must outlive this object.
  Items(Store& store, Stats& stats, Clock now_ms = WallClockMs);

  size_t max_key_bytes() const { return store_.max_key_bytes(); }
  // The largest data one item holds: the store's value limit less the
  // largest header, whatever the item's header needs.
  size_t max_data_bytes() const { return store_.max_value_bytes() - item_codec::kMaxHeaderBytes; }
  int64_t NowMs() const { return now_ms_(); }
  Stats& stats() { return stats_; }

  // The live item, or NotFound (counted as a hit or a miss). An item the
  // store holds in an unknown encoding is Corruption.
  [[nodiscard]] Result<Item> Get(std::string_view key);
  // As Get, with the item's data cut to its bytes [offset, offset +
  // length) (fewer at its end; none past it), and *size set to the whole
  // data's bytes: GETRANGE, GETBIT. Reads only the pieces of a large value
  // those bytes are in (Store::GetPart).
  [[nodiscard]] Result<Item> GetPart(std::string_view key, uint64_t offset, uint64_t length,
                                     uint64_t* size);
  // memcached gat/gats: the live item, its expiry set to `expiry_ms` (data
  // and flags kept), or NotFound; counted as a touch. The item returned
  // carries the new expiry and the version the touch wrote, so that a cas
  // with it succeeds while nobody else writes the key (should another
  // write land between the touch and the read of that version, the
  // version before the touch is returned, which no cas can match).
  [[nodiscard]] Result<Item> GetAndTouch(std::string_view key, int64_t expiry_ms);
  // The memcached storage commands (and RESP SET with mode kSet, kAdd for
  // NX, kReplace for XX). `cas` is used by kCas only; append and prepend
  // keep the item's flags and expiry, and store nothing (kNotStored) if
  // the joined data would exceed `max_data` or max_data_bytes().
  [[nodiscard]] Result<ItemOutcome> Write(StoreMode mode, std::string_view key,
                                          std::string_view data, uint32_t flags, int64_t expiry_ms,
                                          uint64_t cas = 0, size_t max_data = SIZE_MAX);
  // Writes all pairs atomically, without flags or expiry (RESP MSET).
  [[nodiscard]] Status StoreMany(
      const std::vector<std::pair<std::string_view, std::string_view>>& pairs);
  // kDone or kNotFound.
  [[nodiscard]] Result<ItemOutcome> Delete(std::string_view key);
  // kDone or kNotFound; sets the expiry, keeps data and flags.
  [[nodiscard]] Result<ItemOutcome> Touch(std::string_view key, int64_t expiry_ms);
  // memcached incr/decr: the data must be a decimal uint64; incr wraps at
  // 2^64, decr stops at 0. kDone with *result set, kNotFound, kNotNumeric.
  [[nodiscard]] Result<ItemOutcome> IncrDecr(std::string_view key, uint64_t delta, bool incr,
                                             uint64_t* result);
  // RESP INCRBY: an absent item counts as 0 (and is created without
  // expiry); the data must be a decimal int64. kDone with *result set,
  // kNotNumeric, kOverflow. Keeps flags and expiry.
  [[nodiscard]] Result<ItemOutcome> IncrBy(std::string_view key, int64_t delta, int64_t* result);
  // The general read-modify-write of one item, which the protocols' own
  // commands build on: `decide` is given the live item (nullptr if the
  // key is absent or expired) and says what to do with it; the edit is
  // applied only if the key still holds what was read, else `decide` runs
  // again on what it holds now. So `decide` may run several times and
  // must only compute (and record its last answer for the caller). The
  // edit is durable when Edit returns OK. An expired item that `decide`
  // keeps is removed lazily (only that version of it).
  [[nodiscard]] Status Edit(std::string_view key,
                            const std::function<ItemEdit(const Item*)>& decide);
  // The read-modify-write of part of an item's data (RESP APPEND,
  // SETRANGE, SETBIT): `decide` is given the live item (nullptr if absent
  // or expired) with its data cut to bytes [offset, offset + length), and
  // the whole data's bytes; it returns the writes to make (each at a data
  // offset; one past the end grows the data with zero bytes), or nullopt
  // to change nothing. A live item keeps its flags and expiry and gets the
  // raw bit (item_codec::kRaw); only the bytes written are written (a
  // large value's pieces they fall in: Store::PatchIfVersion). An absent
  // key becomes an item of the writes alone, without flags or expiry, raw
  // iff `raw_if_new`. As Edit: applied only if the key still holds what
  // was read (else `decide` runs again), durable when Patch returns OK.
  [[nodiscard]] Status Patch(
      std::string_view key, uint64_t offset, uint64_t length, bool raw_if_new,
      const std::function<std::optional<std::vector<DataWrite>>(const Item*, uint64_t size)>&
          decide);
  // Up to `limit` live keys from `from` on, in the store's order
  // (Store::Range: bytewise, or (slot, key) in a database), examining at
  // most `limit` stored keys; *next is the key to continue from, or empty
  // when the store has no more keys.
  void ScanKeys(std::string_view from, size_t limit, std::vector<std::string>* keys,
                std::string* next);
  // Removes every item now (delay_ms <= 0), or at the first request after
  // delay_ms, the items written until then included (memcached
  // flush_all): Store::RemoveAll, which in a database is a logical flush
  // (databases.h). A pending delayed flush is not durable.
  [[nodiscard]] Status Flush(int64_t delay_ms);
  StoreInfo Info() { return store_.Info(); }
  Store& store() { return store_; }

  // The databases this item layer is one of (keyspace.h), and its index
  // there; nullptr and 0 for an item layer over a plain store (tests).
  Keyspace* keyspace() const { return keyspace_; }
  int db_index() const { return db_index_; }
  void AttachKeyspace(Keyspace* keyspace, int db_index) {
    keyspace_ = keyspace;
    db_index_ = db_index;
  }

 private:
  // One step of a read-modify-write: the outcome to report, and what to
  // write if the outcome is kDone.
  struct Change {
    ItemOutcome outcome = ItemOutcome::kDone;
    enum class Kind : uint8_t { kNone, kPut, kRemove } kind = Kind::kNone;
    std::string value;  // encoded, for kPut
  };
  // Reads the key, asks `decide` (given the live item or nullptr) what to
  // do, and applies it conditionally on the version read; repeats if the
  // key changed meanwhile. Expired items are passed as nullptr. `peek`:
  // the item's data may be cut short (Store::Peek), for a `decide` that
  // does not look at it.
  // Write's decision for the live item (nullptr: none): the outcome, and
  // the item to put (`value`, already encoded; append and prepend join
  // `data` to the live item's, within `max_data` and max_data_bytes()).
  Change DecideWrite(StoreMode mode, const Item* live, std::string_view data,
                     const std::string& value, uint64_t cas, size_t max_data) const;
  [[nodiscard]] Result<ItemOutcome> Modify(std::string_view key,
                                           const std::function<Change(const Item*)>& decide,
                                           bool peek = false);
  // Reads and decodes the key. *present: the store holds the key (live
  // or expired); the Item is returned only if live. `peek` as Modify's.
  [[nodiscard]] Result<std::optional<Item>> Read(std::string_view key, bool* present,
                                                 uint64_t* version, bool peek = false);
  bool Expired(const Item& item) const {
    return item.expiry_ms != 0 && item.expiry_ms <= now_ms_();
  }
  // SET: writes `value` (encoded) in place of whatever the key holds; a
  // collection is replaced in one transaction with its elements
  // garbage-listed (collections.h).
  [[nodiscard]] Status Replace(std::string_view key, std::string_view value);
  // Lazy removal of an expired item of version `version` (a collection is
  // left to the background expiry).
  [[nodiscard]] Status RemoveExpired(std::string_view key, uint64_t version);
  // Removes the expired collection of version `version` at key with its
  // elements garbage-listed; true if the key is not what it was (removed
  // or changed: read it again), false if it holds no collection.
  [[nodiscard]] Result<bool> DropCollection(std::string_view key, uint64_t version);
  // Runs a delayed flush whose time has come.
  [[nodiscard]] Status MaybeFlush();

  Store& store_;
  Stats& stats_;
  Clock now_ms_;
  std::atomic<int64_t> flush_at_ms_{0};  // 0: no delayed flush pending
  Keyspace* keyspace_ = nullptr;
  int db_index_ = 0;
};

}  // namespace pmindex::server
