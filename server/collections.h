// Collections (RESP hashes, lists, sets, sorted sets) over the ordered
// store: one METADATA record under the key, plus one store record per
// element, so that reading, adding or removing one element is O(log n)
// store work and a range of one collection is one range scan of the store.
// docs/server.md "Collections" draws the layout; in short, in database
// namespace `ns` (databases.h):
//
//   [ns][slot][0][key]                     the metadata (CollectionMeta):
//                                          tag 0x60, type, expiry, gen,
//                                          count, element slot, list ends
//   [ns][0x4000|eslot][gen 8B BE][sub][m]  an element of generation gen:
//                                          sub-space `sub`, member m
//   [ns][0x8000][gen 8B BE] -> eslot       a GARBAGE record: generation gen
//                                          (its elements under eslot) is
//                                          no collection's any more
//   ns 0: "pmserver-generations"           the generation counter
//
// A generation number is never handed out twice in the life of the store
// (Databases::NewGeneration), so the elements of a deleted or expired
// collection are never seen again, even before the background reclaim
// (Databases::ReclaimGarbageStep) removes them.
//
// Every use is inside one store transaction (TxnScope,
// resp_transaction.h): a command finds its collection, reads and writes
// elements, and Save()s the metadata; the commit makes all of it durable
// at once, before the reply (RunInTransaction). Every write rewrites the
// metadata record, so a concurrent transaction that read it conflicts and
// runs again, and WATCH sees the key change.
//
// Expiry: an expired collection reads as absent (Find: NotFound); a
// command that creates a collection over it garbage-lists the expired
// one's elements; the background expiry (Databases::ExpireStep) removes
// the metadata and garbage-lists the elements in one transaction.
//
// Threads: a Collection belongs to its transaction (one thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pmindex/status.h"
#include "server/resp_transaction.h"

namespace pmindex::server {

// ---------------------------------------------------------------- WRONGTYPE

inline constexpr std::string_view kWrongType =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
// The Status of an operation on a key of another type (Status::WrongKind
// with kWrongType as its message); RunInTransaction replies it as is.
Status WrongTypeError();
bool IsWrongType(const Status& s);

// ---------------------------------------------------------------- types

enum class CollectionType : uint8_t { kHash = 1, kList = 2, kSet = 3, kZset = 4 };

// What a key holds, as TYPE names it.
enum class KeyKind : uint8_t { kNone, kString, kHash, kList, kSet, kZset };
// "none", "string", "hash", "list", "set", "zset".
std::string_view KindName(KeyKind kind);
KeyKind KindOf(CollectionType type);
// OBJECT ENCODING's answer: Redis's name of its general encoding of the
// type ("hashtable", "quicklist", "hashtable", "skiplist"; "raw"/"int"/
// "embstr" for strings is the keyspace commands' business). The names
// describe nothing of pmserver's encoding (every collection is the same
// metadata-plus-records form); they are what clients expect to read.
std::string_view EncodingName(CollectionType type);

// The sub-spaces of a type's elements (the byte after the generation).
namespace sub_space {
inline constexpr char kHashField = 'f';    // field -> value
inline constexpr char kSetMember = 'm';    // member -> ""
inline constexpr char kZsetMember = 'm';   // member -> score (OrderedDouble)
inline constexpr char kZsetByScore = 's';  // OrderedDouble(score) + member -> ""
inline constexpr char kListItem = 'i';     // OrderedInt64(position) -> element
}  // namespace sub_space

// 8 bytes whose bytewise order is the numeric order: big endian with the
// sign bit flipped (int64), and the IEEE bits with the sign bit flipped
// (non-negative) or all bits flipped (negative) for doubles, -0.0 encoded
// as 0.0 (NaN is the caller's to refuse).
std::string OrderedInt64(int64_t v);
int64_t FromOrderedInt64(std::string_view b);  // REQUIRES: b.size() >= 8
std::string OrderedDouble(double v);
double FromOrderedDouble(std::string_view b);  // REQUIRES: b.size() >= 8

// ---------------------------------------------------------------- metadata

struct CollectionMeta {
  CollectionType type = CollectionType::kHash;
  int64_t expiry_ms = 0;  // unix time in ms; 0: never expires
  uint64_t gen = 0;       // generation of the elements (never 0)
  uint64_t count = 0;     // elements (members; a zset member counts once)
  uint16_t slot = 0;      // slot the elements are stored under (< 0x4000)
  // Lists: the position of the first element and one past the last (so
  // count == tail - head); the type's helper maintains them. 0 otherwise.
  int64_t head = 0;
  int64_t tail = 0;
};

// The metadata record's value:
//   byte 0      0x60 | 0x02 if an expiry follows
//   byte 1      type
//   [8 bytes]   expiry (ms, little endian, > 0)      if 0x02
//   8 bytes     gen, little endian
//   8 bytes     count, little endian
//   2 bytes     element slot, little endian
//   16 bytes    head, tail (int64 little endian)     lists only
namespace collection_codec {
inline constexpr uint8_t kTag = 0x60;
inline constexpr uint8_t kHasExpiry = 0x02;
// True iff `stored` is a metadata record (by its tag; Decode validates).
bool IsCollection(std::string_view stored);
void Encode(const CollectionMeta& meta, std::string* out);
// False: not a well-formed metadata record.
bool Decode(std::string_view stored, CollectionMeta* out);
// True iff `stored` is a metadata record whose expiry is at or before now.
bool ExpiredAt(std::string_view stored, int64_t now_ms);
}  // namespace collection_codec

// Stored keys of the regions (Databases' namespaces; docs/server.md).
namespace collection_keys {
inline constexpr uint16_t kElementRegion = 0x4000;  // | element slot
inline constexpr uint16_t kGarbageRegion = 0x8000;
// [ns][0x4000|slot][gen][sub] (+ member).
std::string ElementPrefix(uint32_t ns, uint16_t slot, uint64_t gen, char sub);
// [ns][0x4000|slot][gen]: every element of the generation.
std::string GenerationPrefix(uint32_t ns, uint16_t slot, uint64_t gen);
std::string GarbageKey(uint32_t ns, uint64_t gen);
// [ns][0x8000]: the garbage records of namespace ns.
std::string GarbagePrefix(uint32_t ns);
// A garbage record's value (the generation's element slot), and its
// decoding (false: not a well-formed garbage record).
std::string GarbageValue(uint16_t slot);
bool DecodeGarbage(std::string_view key, std::string_view value, uint64_t* gen, uint16_t* slot);
}  // namespace collection_keys

// ---------------------------------------------------------------- Collection

// One collection inside one transaction: its metadata (as read or
// created) and its elements. Changes to elements are the transaction's
// at once; the metadata is written by Save (or Delete). A command must
// Save after changing elements or meta(): otherwise the count is wrong.
class Collection {
 public:
  // The live collection of type `type` at `key` of database `db`:
  //   NotFound             absent, or expired (a string or a collection);
  //   WrongTypeError()     a live string, or a collection of another type;
  //   Aborted              a conflict (the scope knows it; return it and
  //                        RunInTransaction runs the command again);
  //   NotSupported         the scope has no databases (a plain store);
  //   Corruption           the record does not decode.
  [[nodiscard]] static Result<Collection> Find(TxnScope& scope, int db, std::string_view key,
                                               CollectionType type);
  // A new, empty collection of type `type` at `key`, with a fresh
  // generation, for a key that holds no live value (Find said NotFound).
  // Nothing is written until Save; an expired value at the key is replaced
  // then (an expired collection's elements garbage-listed).
  [[nodiscard]] static Result<Collection> Create(TxnScope& scope, int db, std::string_view key,
                                                 CollectionType type);
  // Find, or Create if absent (WRONGTYPE and errors as Find).
  [[nodiscard]] static Result<Collection> FindOrCreate(TxnScope& scope, int db,
                                                       std::string_view key, CollectionType type);

  Collection(Collection&&) = default;
  Collection& operator=(Collection&&) = default;

  const std::string& key() const { return key_; }
  CollectionType type() const { return meta_.type; }
  uint64_t count() const { return meta_.count; }
  void set_count(uint64_t n) { meta_.count = n; }
  // Adds `delta` (may be negative) to the count.
  void add_count(int64_t delta) { meta_.count += static_cast<uint64_t>(delta); }
  const CollectionMeta& meta() const { return meta_; }
  CollectionMeta& mutable_meta() { return meta_; }
  // False for a collection made by Create and not yet saved.
  bool stored() const { return stored_; }

  // The largest member one element takes (the store's key limit less the
  // element key's header), and the largest value.
  size_t max_member_bytes() const;
  size_t max_value_bytes() const;

  // One element of sub-space `sub`: its value, or NotFound.
  [[nodiscard]] Result<std::string> Get(char sub, std::string_view member);
  // Inserts or replaces (the count is the caller's). InvalidArgument
  // ("ERR ...") if the member or the value is too long.
  [[nodiscard]] Status Put(char sub, std::string_view member, std::string_view value);
  // Removes; true iff the element was there (the count is the caller's).
  [[nodiscard]] Result<bool> Remove(char sub, std::string_view member);
  // Appends to *out up to `limit` elements of sub-space `sub` whose member
  // m has from <= m < to (to: nullopt is the end of the sub-space), in
  // ascending bytewise order of m, as (m, value); returns how many. Sees
  // the transaction's own writes. A scan is not validated at commit
  // (StoreTransaction::Range), but the metadata read is: a writer of this
  // collection changes it, so the command runs again.
  size_t Range(char sub, std::string_view from, std::optional<std::string_view> to, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out);

  // Writes the metadata (count, expiry, list ends). If the count is 0,
  // removes the key instead (Redis deletes empty collections) and
  // garbage-lists the generation, unless nothing was ever stored.
  [[nodiscard]] Status Save();
  // Removes the key and garbage-lists the generation (DEL, overwrite).
  [[nodiscard]] Status Delete();

 private:
  Collection(TxnScope& scope, int db, std::string key, CollectionMeta meta, bool stored);
  std::string ElementKey(char sub, std::string_view member) const;

  TxnScope* scope_;
  int db_;
  std::string key_;
  CollectionMeta meta_;
  bool stored_;
  // Create over an expired collection: its generation, garbage-listed at
  // Save (0: none).
  uint64_t replaced_gen_ = 0;
  uint16_t replaced_slot_ = 0;
};

// ---------------------------------------------------------------- keys

// The live collection of any type at `key` (errors as Find; WRONGTYPE: a
// live string).
[[nodiscard]] Result<Collection> FindAnyCollection(TxnScope& scope, int db, std::string_view key);

// What a key holds, read outside any transaction through `items`' store
// (inside EXEC, its transaction): for the keyspace commands' read paths.
// With `data` false, `stored` may be cut after Store::kPeekBytes bytes (a
// large value's pieces are not read): enough for everything but the data.
struct KeyState {
  KeyKind kind = KeyKind::kNone;  // kNone: absent or expired
  int64_t expiry_ms = 0;          // 0: no expiry
  uint64_t version = 0;           // the record's version (0: absent)
  std::string stored;             // the record (an item or a metadata record)
};
[[nodiscard]] Result<KeyState> PeekKey(Items& items, std::string_view key, bool data = true);

// Runs body(scope, db) atomically over `items`' database db: inside
// EXEC in EXEC's transaction, else in a transaction of its own, committed
// and run again on a conflict (like RunInTransaction, without a reply).
// The item layer uses it when a write meets a collection (SET over a
// hash, DEL of a set, MSET).
[[nodiscard]] Status RunOnItems(Items& items, const std::function<Status(TxnScope&, int db)>& body);

// What the live value at `key` is (kNone: absent or expired).
[[nodiscard]] Result<KeyKind> KindOfKey(TxnScope& scope, int db, std::string_view key);
// What a stored value (an item or a metadata record) is at `now_ms`.
KeyKind KindOfStored(std::string_view stored, int64_t now_ms);
// Removes whatever `key` holds (a string, or a collection: its metadata
// removed and its elements garbage-listed); true iff a live value was
// there. An expired value is removed too (false).
[[nodiscard]] Result<bool> DeleteKey(TxnScope& scope, int db, std::string_view key);
// COPY: writes a copy of the live value at (src_db, src) to (dst_db, dst),
// replacing what dst holds (the caller decides REPLACE); a collection's
// elements are copied into a new generation under dst's slot. False if
// src holds no live value (nothing written).
[[nodiscard]] Result<bool> CopyKey(TxnScope& scope, int src_db, std::string_view src, int dst_db,
                                   std::string_view dst);
// RENAME within one database: moves the value at src (a collection's
// metadata only; its elements keep their slot and generation) to dst,
// replacing what dst holds. False if src holds no live value.
[[nodiscard]] Result<bool> MoveKey(TxnScope& scope, int db, std::string_view src,
                                   std::string_view dst);

// ---------------------------------------------------------------- checks

// What VerifyCollections found.
struct CollectionReport {
  uint64_t collections = 0;        // metadata records
  uint64_t elements = 0;           // element records of live generations
  uint64_t garbage_generations = 0;
  uint64_t garbage_elements = 0;   // element records of garbage generations
  uint64_t large_values = 0;       // values in pieces (chunked_values.h)
  uint64_t pieces = 0;             // their pieces
  std::vector<std::string> problems;  // one line each; empty: consistent
};

// Walks every namespace of `dbs`' store (databases, garbage namespaces
// excluded) and checks that each metadata record decodes and its count
// equals its elements (a zset member counted once, its score index
// matching), that each large value's head decodes and has all its pieces,
// and that every element record belongs to a live collection's, a live
// large value's or a garbage-listed generation. Reads outside any transaction: run it on
// a store nobody writes (pmserver --verify) or expect transient reports.
CollectionReport VerifyCollections(Databases& dbs, size_t max_problems = 100);

}  // namespace pmindex::server
