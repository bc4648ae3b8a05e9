// The collection layer (collections.h).
#include "server/collections.h"

#include <cstring>
#include <map>
#include <type_traits>

#include "server/chunked_values.h"
#include "server/key_slot.h"

namespace pmindex::server {

Status WrongTypeError() { return Status::WrongKind(kWrongType); }

bool IsWrongType(const Status& s) { return s.code() == Status::Code::kWrongKind; }

std::string_view KindName(KeyKind kind) {
  switch (kind) {
    case KeyKind::kNone:
      return "none";
    case KeyKind::kString:
      return "string";
    case KeyKind::kHash:
      return "hash";
    case KeyKind::kList:
      return "list";
    case KeyKind::kSet:
      return "set";
    case KeyKind::kZset:
      return "zset";
  }
  return "none";
}

KeyKind KindOf(CollectionType type) {
  switch (type) {
    case CollectionType::kHash:
      return KeyKind::kHash;
    case CollectionType::kList:
      return KeyKind::kList;
    case CollectionType::kSet:
      return KeyKind::kSet;
    case CollectionType::kZset:
      return KeyKind::kZset;
  }
  return KeyKind::kNone;
}

std::string_view EncodingName(CollectionType type) {
  switch (type) {
    case CollectionType::kHash:
    case CollectionType::kSet:
      return "hashtable";
    case CollectionType::kList:
      return "quicklist";
    case CollectionType::kZset:
      return "skiplist";
  }
  return "hashtable";
}

// ---------------------------------------------------------------- encodings

namespace {

void PutBig64(uint64_t v, std::string* out) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetBig64(std::string_view b) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(b[i]);
  return v;
}
void PutBig32(uint32_t v, std::string* out) {
  for (int i = 3; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutBig16(uint16_t v, std::string* out) {
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v & 0xff));
}
template <class T>
void PutLittle(T v, std::string* out) {
  for (size_t i = 0; i < sizeof(T); ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
template <class T>
bool GetLittle(std::string_view s, size_t* pos, T* v) {
  if (s.size() < *pos + sizeof(T)) return false;
  *v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    *v |= static_cast<T>(static_cast<uint8_t>(s[*pos + i])) << (8 * i);
  *pos += sizeof(T);
  return true;
}

constexpr uint64_t kSignBit = uint64_t{1} << 63;

}  // namespace

std::string OrderedInt64(int64_t v) {
  std::string b;
  PutBig64(static_cast<uint64_t>(v) ^ kSignBit, &b);
  return b;
}

int64_t FromOrderedInt64(std::string_view b) {
  return static_cast<int64_t>(GetBig64(b) ^ kSignBit);
}

std::string OrderedDouble(double v) {
  if (v == 0) v = 0.0;  // -0.0 sorts (and reads back) as 0.0
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  bits = (bits & kSignBit) ? ~bits : bits | kSignBit;
  std::string b;
  PutBig64(bits, &b);
  return b;
}

double FromOrderedDouble(std::string_view b) {
  uint64_t bits = GetBig64(b);
  bits = (bits & kSignBit) ? bits & ~kSignBit : ~bits;
  double v = 0;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

namespace collection_codec {

bool IsCollection(std::string_view stored) {
  return !stored.empty() && (static_cast<uint8_t>(stored[0]) & ~kHasExpiry) == kTag;
}

void Encode(const CollectionMeta& m, std::string* out) {
  out->push_back(static_cast<char>(kTag | (m.expiry_ms != 0 ? kHasExpiry : 0)));
  out->push_back(static_cast<char>(m.type));
  if (m.expiry_ms != 0) PutLittle<uint64_t>(static_cast<uint64_t>(m.expiry_ms), out);
  PutLittle<uint64_t>(m.gen, out);
  PutLittle<uint64_t>(m.count, out);
  PutLittle<uint16_t>(m.slot, out);
  if (m.type == CollectionType::kList) {
    PutLittle<uint64_t>(static_cast<uint64_t>(m.head), out);
    PutLittle<uint64_t>(static_cast<uint64_t>(m.tail), out);
  }
}

bool Decode(std::string_view stored, CollectionMeta* out) {
  if (!IsCollection(stored) || stored.size() < 2) return false;
  const auto tag = static_cast<uint8_t>(stored[0]);
  const auto type = static_cast<uint8_t>(stored[1]);
  if (type < static_cast<uint8_t>(CollectionType::kHash) ||
      type > static_cast<uint8_t>(CollectionType::kZset))
    return false;
  *out = CollectionMeta{};
  out->type = static_cast<CollectionType>(type);
  size_t pos = 2;
  if (tag & kHasExpiry) {
    uint64_t e = 0;
    if (!GetLittle(stored, &pos, &e) || e == 0 || e > static_cast<uint64_t>(INT64_MAX))
      return false;
    out->expiry_ms = static_cast<int64_t>(e);
  }
  if (!GetLittle(stored, &pos, &out->gen) || !GetLittle(stored, &pos, &out->count) ||
      !GetLittle(stored, &pos, &out->slot) || out->gen == 0 ||
      out->slot >= collection_keys::kElementRegion)
    return false;
  if (out->type == CollectionType::kList) {
    uint64_t h = 0, t = 0;
    if (!GetLittle(stored, &pos, &h) || !GetLittle(stored, &pos, &t)) return false;
    out->head = static_cast<int64_t>(h);
    out->tail = static_cast<int64_t>(t);
  }
  return pos == stored.size();
}

bool ExpiredAt(std::string_view stored, int64_t now_ms) {
  if (!IsCollection(stored) || !(static_cast<uint8_t>(stored[0]) & kHasExpiry)) return false;
  size_t pos = 2;
  uint64_t e = 0;
  return GetLittle(stored, &pos, &e) && static_cast<int64_t>(e) <= now_ms;
}

}  // namespace collection_codec

namespace collection_keys {

std::string GenerationPrefix(uint32_t ns, uint16_t slot, uint64_t gen) {
  std::string k;
  k.reserve(4 + 2 + 8 + 1);
  PutBig32(ns, &k);
  PutBig16(static_cast<uint16_t>(kElementRegion | slot), &k);
  PutBig64(gen, &k);
  return k;
}

std::string ElementPrefix(uint32_t ns, uint16_t slot, uint64_t gen, char sub) {
  std::string k = GenerationPrefix(ns, slot, gen);
  k.push_back(sub);
  return k;
}

std::string GarbagePrefix(uint32_t ns) {
  std::string k;
  PutBig32(ns, &k);
  PutBig16(kGarbageRegion, &k);
  return k;
}

std::string GarbageKey(uint32_t ns, uint64_t gen) {
  std::string k = GarbagePrefix(ns);
  PutBig64(gen, &k);
  return k;
}

std::string GarbageValue(uint16_t slot) {
  std::string v;
  PutBig16(slot, &v);
  return v;
}

bool DecodeGarbage(std::string_view key, std::string_view value, uint64_t* gen, uint16_t* slot) {
  if (key.size() != 14 || value.size() != 2) return false;
  *gen = GetBig64(key.substr(6));
  *slot = static_cast<uint16_t>((static_cast<uint8_t>(value[0]) << 8) |
                                static_cast<uint8_t>(value[1]));
  return *gen != 0 && *slot < kElementRegion;
}

}  // namespace collection_keys

// ---------------------------------------------------------------- Collection

#define COLL_CONCAT_(a, b) a##b
#define COLL_CONCAT(a, b) COLL_CONCAT_(a, b)
// `decl = *expr`, or returns expr's error.
#define PMINDEX_ASSIGN_OR_RETURN(decl, expr)                  \
  auto COLL_CONCAT(result_, __LINE__) = (expr);                \
  if (!COLL_CONCAT(result_, __LINE__).ok())                    \
    return COLL_CONCAT(result_, __LINE__).status();            \
  decl = std::move(*COLL_CONCAT(result_, __LINE__))

namespace {

// The databases' transaction of a scope, or NotSupported (a plain store:
// no namespaces, so no room for element records).
Result<DbTransaction*> Dbt(TxnScope& scope) {
  DbTransaction* t = scope.databases();
  if (t == nullptr) return Status::NotSupported("collections need pmserver's databases");
  return t;
}

// Notes a conflict on database db's store of the scope (so that
// RunInTransaction runs the command again), and passes the result on.
template <class R>
R Noted(TxnScope& scope, int db, R r) {
  bool aborted = false;
  if constexpr (std::is_same_v<R, Status>) {
    aborted = r.is_aborted();
  } else {
    aborted = !r.ok() && r.status().is_aborted();
  }
  if (aborted) scope.db(db).MarkConflict();
  return r;
}

Status PutGarbage(TxnScope& scope, int db, uint64_t gen, uint16_t slot) {
  PMINDEX_ASSIGN_OR_RETURN(DbTransaction * t, Dbt(scope));
  return Noted(scope, db,
               t->base().Put(collection_keys::GarbageKey(scope.ns(db), gen),
                             collection_keys::GarbageValue(slot)));
}

// The value at key, or nullopt if absent.
Result<std::optional<std::string>> ReadKey(TxnScope& scope, int db, std::string_view key) {
  Result<StoredValue> r = scope.db(db).Get(key);
  if (!r.ok()) {
    if (r.status().is_not_found()) return std::optional<std::string>();
    return r.status();
  }
  return std::optional<std::string>(std::move(r->value));
}

}  // namespace

Collection::Collection(TxnScope& scope, int db, std::string key, CollectionMeta meta, bool stored)
    : scope_(&scope), db_(db), key_(std::move(key)), meta_(meta), stored_(stored) {}

Result<Collection> Collection::Find(TxnScope& scope, int db, std::string_view key,
                                    CollectionType type) {
  PMINDEX_RETURN_IF_ERROR(Dbt(scope).status());
  PMINDEX_ASSIGN_OR_RETURN(std::optional<std::string> v, ReadKey(scope, db, key));
  if (!v) return Status::NotFound();
  const int64_t now = scope.items(db).NowMs();
  if (!collection_codec::IsCollection(*v)) {
    if (item_codec::ExpiredAt(*v, now)) return Status::NotFound();
    return WrongTypeError();
  }
  CollectionMeta meta;
  if (!collection_codec::Decode(*v, &meta))
    return Status::Corruption("a collection's metadata record does not decode");
  if (meta.expiry_ms != 0 && meta.expiry_ms <= now) return Status::NotFound();
  if (meta.type != type) return WrongTypeError();
  return Collection(scope, db, std::string(key), meta, true);
}

Result<Collection> Collection::Create(TxnScope& scope, int db, std::string_view key,
                                      CollectionType type) {
  PMINDEX_ASSIGN_OR_RETURN(DbTransaction * t, Dbt(scope));
  PMINDEX_ASSIGN_OR_RETURN(std::optional<std::string> v, ReadKey(scope, db, key));
  CollectionMeta old;
  const bool old_collection = v && collection_codec::Decode(*v, &old);
  if (v && KindOfStored(*v, scope.items(db).NowMs()) != KeyKind::kNone) return WrongTypeError();
  PMINDEX_ASSIGN_OR_RETURN(uint64_t gen, t->databases().NewGeneration());
  CollectionMeta meta;
  meta.type = type;
  meta.gen = gen;
  meta.slot = KeySlot(key);
  Collection c(scope, db, std::string(key), meta, false);
  if (old_collection) {
    c.replaced_gen_ = old.gen;
    c.replaced_slot_ = old.slot;
  }
  return c;
}

Result<Collection> Collection::FindOrCreate(TxnScope& scope, int db, std::string_view key,
                                            CollectionType type) {
  Result<Collection> c = Find(scope, db, key, type);
  if (c.ok() || !c.status().is_not_found()) return c;
  return Create(scope, db, key, type);
}

size_t Collection::max_member_bytes() const {
  return scope_->databases()->databases().base().max_key_bytes() - 15;
}

size_t Collection::max_value_bytes() const {
  return scope_->databases()->databases().base().max_value_bytes();
}

std::string Collection::ElementKey(char sub, std::string_view member) const {
  std::string k = collection_keys::ElementPrefix(scope_->ns(db_), meta_.slot, meta_.gen, sub);
  k.append(member);
  return k;
}

Result<std::string> Collection::Get(char sub, std::string_view member) {
  if (member.size() > max_member_bytes()) return Status::NotFound();
  Result<StoredValue> r =
      Noted(*scope_, db_, scope_->databases()->base().Get(ElementKey(sub, member)));
  if (!r.ok()) return r.status();
  return std::move(r->value);
}

Status Collection::Put(char sub, std::string_view member, std::string_view value) {
  if (member.size() > max_member_bytes()) {
    return Status::InvalidArgument("ERR element too long (at most " +
                                   std::to_string(max_member_bytes()) + " bytes)");
  }
  if (value.size() > max_value_bytes()) {
    return Status::InvalidArgument("ERR value too long (at most " +
                                   std::to_string(max_value_bytes()) + " bytes)");
  }
  return Noted(*scope_, db_, scope_->databases()->base().Put(ElementKey(sub, member), value));
}

Result<bool> Collection::Remove(char sub, std::string_view member) {
  if (member.size() > max_member_bytes()) return false;
  Result<WriteOutcome> r =
      Noted(*scope_, db_, scope_->databases()->base().Remove(ElementKey(sub, member)));
  if (!r.ok()) return r.status();
  return *r == WriteOutcome::kDone;
}

size_t Collection::Range(char sub, std::string_view from, std::optional<std::string_view> to,
                         size_t limit, std::vector<std::pair<std::string, std::string>>* out) {
  const std::string prefix =
      collection_keys::ElementPrefix(scope_->ns(db_), meta_.slot, meta_.gen, sub);
  std::string lo = prefix;
  lo.append(from);
  std::string hi = prefix;
  if (to) {
    hi.append(*to);
  } else {
    hi.back() = static_cast<char>(static_cast<uint8_t>(sub) + 1);
  }
  std::vector<std::pair<std::string, std::string>> batch;
  scope_->databases()->base().Range(lo, hi, limit, &batch);
  for (auto& [k, v] : batch) out->emplace_back(k.substr(prefix.size()), std::move(v));
  return batch.size();
}

Status Collection::Save() {
  TxnStore& st = scope_->db(db_);
  if (meta_.count == 0) {
    // Nothing stored yet: the key stays as it was (absent, or an expired
    // value the background expiry removes).
    if (!stored_) return Status::OK();
    PMINDEX_RETURN_IF_ERROR(st.Remove(key_).status());
    PMINDEX_RETURN_IF_ERROR(PutGarbage(*scope_, db_, meta_.gen, meta_.slot));
    stored_ = false;
    return Status::OK();
  }
  std::string v;
  collection_codec::Encode(meta_, &v);
  PMINDEX_RETURN_IF_ERROR(st.Put(key_, v));
  stored_ = true;
  if (replaced_gen_ != 0) {
    // The expired collection this one took the place of.
    PMINDEX_RETURN_IF_ERROR(PutGarbage(*scope_, db_, replaced_gen_, replaced_slot_));
    replaced_gen_ = 0;
  }
  return Status::OK();
}

Status Collection::Delete() {
  if (stored_) {
    PMINDEX_RETURN_IF_ERROR(scope_->db(db_).Remove(key_).status());
    PMINDEX_RETURN_IF_ERROR(PutGarbage(*scope_, db_, meta_.gen, meta_.slot));
    stored_ = false;
  }
  meta_.count = 0;
  return Status::OK();
}

// ---------------------------------------------------------------- keys

KeyKind KindOfStored(std::string_view stored, int64_t now_ms) {
  if (collection_codec::IsCollection(stored)) {
    CollectionMeta m;
    if (!collection_codec::Decode(stored, &m)) return KeyKind::kString;
    if (m.expiry_ms != 0 && m.expiry_ms <= now_ms) return KeyKind::kNone;
    return KindOf(m.type);
  }
  return item_codec::ExpiredAt(stored, now_ms) ? KeyKind::kNone : KeyKind::kString;
}

Result<KeyKind> KindOfKey(TxnScope& scope, int db, std::string_view key) {
  PMINDEX_ASSIGN_OR_RETURN(std::optional<std::string> v, ReadKey(scope, db, key));
  if (!v) return KeyKind::kNone;
  return KindOfStored(*v, scope.items(db).NowMs());
}

Result<bool> DeleteKey(TxnScope& scope, int db, std::string_view key) {
  PMINDEX_ASSIGN_OR_RETURN(std::optional<std::string> v, ReadKey(scope, db, key));
  if (!v) return false;
  const bool live = KindOfStored(*v, scope.items(db).NowMs()) != KeyKind::kNone;
  PMINDEX_RETURN_IF_ERROR(scope.db(db).Remove(key).status());
  CollectionMeta m;
  if (collection_codec::Decode(*v, &m)) {
    PMINDEX_RETURN_IF_ERROR(PutGarbage(scope, db, m.gen, m.slot));
  }
  return live;
}

Result<bool> CopyKey(TxnScope& scope, int src_db, std::string_view src, int dst_db,
                     std::string_view dst) {
  PMINDEX_ASSIGN_OR_RETURN(std::optional<std::string> v, ReadKey(scope, src_db, src));
  if (!v || KindOfStored(*v, scope.items(src_db).NowMs()) == KeyKind::kNone) return false;
  PMINDEX_RETURN_IF_ERROR(DeleteKey(scope, dst_db, dst).status());
  CollectionMeta m;
  if (!collection_codec::Decode(*v, &m)) {
    PMINDEX_RETURN_IF_ERROR(scope.db(dst_db).Put(dst, *v));
    return true;
  }
  PMINDEX_ASSIGN_OR_RETURN(DbTransaction * t, Dbt(scope));
  PMINDEX_ASSIGN_OR_RETURN(uint64_t gen, t->databases().NewGeneration());
  CollectionMeta copy = m;
  copy.gen = gen;
  copy.slot = KeySlot(dst);
  const std::string from_prefix =
      collection_keys::GenerationPrefix(scope.ns(src_db), m.slot, m.gen);
  const std::string to_prefix = collection_keys::GenerationPrefix(scope.ns(dst_db), copy.slot, gen);
  const std::string end = collection_keys::GenerationPrefix(scope.ns(src_db), m.slot, m.gen + 1);
  std::string lo = from_prefix;
  std::vector<std::pair<std::string, std::string>> batch;
  constexpr size_t kBatch = 256;
  for (;;) {
    batch.clear();
    const size_t n = t->base().Range(lo, end, kBatch, &batch);
    for (const auto& [k, val] : batch) {
      std::string nk = to_prefix;
      nk.append(std::string_view(k).substr(from_prefix.size()));
      PMINDEX_RETURN_IF_ERROR(Noted(scope, dst_db, t->base().Put(nk, val)));
    }
    if (n < kBatch) break;
    lo = batch.back().first;
    lo.push_back('\0');
  }
  std::string meta;
  collection_codec::Encode(copy, &meta);
  PMINDEX_RETURN_IF_ERROR(scope.db(dst_db).Put(dst, meta));
  return true;
}

Result<bool> MoveKey(TxnScope& scope, int db, std::string_view src, std::string_view dst) {
  PMINDEX_ASSIGN_OR_RETURN(std::optional<std::string> v, ReadKey(scope, db, src));
  if (!v || KindOfStored(*v, scope.items(db).NowMs()) == KeyKind::kNone) return false;
  if (src == dst) return true;
  PMINDEX_RETURN_IF_ERROR(DeleteKey(scope, db, dst).status());
  PMINDEX_RETURN_IF_ERROR(scope.db(db).Put(dst, *v));
  PMINDEX_RETURN_IF_ERROR(scope.db(db).Remove(src).status());
  return true;
}

Result<Collection> FindAnyCollection(TxnScope& scope, int db, std::string_view key) {
  PMINDEX_RETURN_IF_ERROR(Dbt(scope).status());
  PMINDEX_ASSIGN_OR_RETURN(std::optional<std::string> v, ReadKey(scope, db, key));
  if (!v) return Status::NotFound();
  CollectionMeta meta;
  if (!collection_codec::Decode(*v, &meta)) {
    if (KindOfStored(*v, scope.items(db).NowMs()) == KeyKind::kNone) return Status::NotFound();
    return WrongTypeError();
  }
  return Collection::Find(scope, db, key, meta.type);
}

Result<KeyState> PeekKey(Items& items, std::string_view key, bool data) {
  Result<StoredValue> r = data ? items.store().Get(key) : items.store().Peek(key);
  KeyState k;
  if (!r.ok()) {
    if (r.status().is_not_found()) return k;
    return r.status();
  }
  k.kind = KindOfStored(r->value, items.NowMs());
  if (k.kind == KeyKind::kNone) return k;
  k.version = r->version;
  CollectionMeta m;
  Item item;
  if (collection_codec::Decode(r->value, &m)) {
    k.expiry_ms = m.expiry_ms;
  } else if (item_codec::Decode(r->value, &item)) {
    k.expiry_ms = item.expiry_ms;
  } else {
    return Status::Corruption("the stored value is not a pmserver item");
  }
  k.stored = std::move(r->value);
  return k;
}

Status RunOnItems(Items& items, const std::function<Status(TxnScope&, int db)>& body) {
  if (TxnScope* scope = TxnScope::Of(items)) return body(*scope, items.db_index());
  if (items.keyspace() == nullptr)
    return Status::NotSupported("collections need pmserver's databases");
  for (int run = 0; run < 1000; ++run) {
    TxnScope scope(items);
    const Status r = body(scope, items.db_index());
    if (scope.conflict() || r.is_aborted()) continue;
    if (!r.ok()) return r;
    const Status s = scope.Commit();
    if (s.is_aborted()) continue;
    return s;
  }
  return Status::Busy("the command kept conflicting with other clients' writes; nothing changed");
}

// ---------------------------------------------------------------- checks

namespace {

// Calls f(key, value) for every record of [from, to) of `store`, in
// batches.
template <class F>
void Walk(Store& store, std::string from, const std::string& to, F&& f) {
  constexpr size_t kWalk = 256;
  std::vector<std::pair<std::string, std::string>> batch;
  for (;;) {
    batch.clear();
    const size_t n = store.Range(from, to, kWalk, &batch);
    for (const auto& [k, v] : batch) f(k, v);
    if (n < kWalk) return;
    from = batch.back().first;
    from.push_back('\0');
  }
}

std::string RegionKey(uint32_t ns, uint16_t region) {
  std::string k;
  PutBig32(ns, &k);
  PutBig16(region, &k);
  return k;
}

// VerifyCollections' reading and checks of one database's records.
class DatabaseCheck {
 public:
  DatabaseCheck(Store& base, uint32_t ns, int db, size_t max_problems, CollectionReport* report)
      : base_(base),
        ns_(ns),
        where_("db" + std::to_string(db) + ": "),
        max_problems_(max_problems),
        report_(*report) {}

  void Run() {
    Walk(base_, RegionKey(ns_, 0), RegionKey(ns_, collection_keys::kElementRegion),
         [this](const std::string& k, const std::string& v) { ReadKeyRecord(k, v); });
    Walk(base_, RegionKey(ns_, collection_keys::kGarbageRegion),
         RegionKey(ns_, collection_keys::kGarbageRegion + 1),
         [this](const std::string& k, const std::string& v) { ReadGarbageRecord(k, v); });
    Walk(base_, RegionKey(ns_, collection_keys::kElementRegion),
         RegionKey(ns_, collection_keys::kGarbageRegion),
         [this](const std::string& k, const std::string&) { ReadElement(k); });
    for (const auto& [gen, b] : large_) CheckLargeValue(b);
    for (const auto& [gen, l] : live_) CheckCollection(l);
  }

 private:
  struct Live {
    std::string key;
    CollectionMeta meta;
    std::map<char, uint64_t> counts;  // elements per sub-space
  };
  struct Large {
    std::string key;
    chunk_codec::Head head;
    uint64_t pieces = 0;
  };

  void Problem(std::string text) {
    if (report_.problems.size() < max_problems_) report_.problems.push_back(where_ + text);
  }

  // A key's record: a large value's head or a collection's metadata (a
  // plain value is neither), each generation used once.
  void ReadKeyRecord(const std::string& k, const std::string& v) {
    const std::string key =
        k.size() > Databases::kHeaderBytes ? k.substr(Databases::kHeaderBytes) : std::string();
    if (chunk_codec::IsHead(v)) {
      chunk_codec::Head h;
      if (!chunk_codec::DecodeHead(v, &h)) {
        Problem("key '" + key + "': large value's head does not decode");
        return;
      }
      ++report_.large_values;
      if (large_.count(h.gen) != 0) {
        Problem("keys '" + large_[h.gen].key + "' and '" + key + "' share generation " +
                std::to_string(h.gen));
        return;
      }
      large_[h.gen] = Large{key, h, 0};
      return;
    }
    if (!collection_codec::IsCollection(v)) return;
    CollectionMeta m;
    if (!collection_codec::Decode(v, &m)) {
      Problem("key '" + key + "': metadata record does not decode");
      return;
    }
    ++report_.collections;
    if (live_.count(m.gen) != 0) {
      Problem("keys '" + live_[m.gen].key + "' and '" + key + "' share generation " +
              std::to_string(m.gen));
      return;
    }
    live_[m.gen] = Live{key, m, {}};
  }

  // A garbage record: a generation no live key may use.
  void ReadGarbageRecord(const std::string& k, const std::string& v) {
    uint64_t gen = 0;
    uint16_t slot = 0;
    if (!collection_keys::DecodeGarbage(k, v, &gen, &slot)) {
      Problem("a garbage record does not decode");
      return;
    }
    ++report_.garbage_generations;
    garbage_[gen] = slot;
    if (live_.count(gen) != 0)
      Problem("generation " + std::to_string(gen) + " of key '" + live_[gen].key +
              "' is garbage-listed");
    if (large_.count(gen) != 0)
      Problem("generation " + std::to_string(gen) + " of key '" + large_[gen].key +
              "' is garbage-listed");
  }

  // An element record: a piece of a large value, an element of a live
  // collection, or garbage; anything else is a problem.
  void ReadElement(const std::string& k) {
    if (k.size() < 15) {
      Problem("an element record is too short");
      return;
    }
    const uint16_t slot =
        static_cast<uint16_t>(((static_cast<uint8_t>(k[4]) << 8) | static_cast<uint8_t>(k[5])) &
                              (collection_keys::kElementRegion - 1));
    const uint64_t gen = GetBig64(std::string_view(k).substr(6));
    auto big = large_.find(gen);
    if (big != large_.end() && big->second.head.slot == slot && k[14] == chunk_codec::kPieceSpace) {
      ++report_.pieces;
      ++big->second.pieces;
      return;
    }
    auto l = live_.find(gen);
    if (l != live_.end() && l->second.meta.slot == slot) {
      ++report_.elements;
      ++l->second.counts[k[14]];
      return;
    }
    auto g = garbage_.find(gen);
    if (g != garbage_.end() && g->second == slot) {
      ++report_.garbage_elements;
      return;
    }
    Problem("an element of generation " + std::to_string(gen) + " (slot " + std::to_string(slot) +
            ") belongs to no collection and is not garbage");
  }

  void CheckLargeValue(const Large& b) {
    if (b.pieces != b.head.pieces())
      Problem("key '" + b.key + "': a value of " + std::to_string(b.head.bytes) + " bytes in " +
              std::to_string(b.head.pieces()) + " pieces, but " + std::to_string(b.pieces) +
              " pieces stored");
  }

  // A collection's count against its elements, in the sub-space its type
  // uses (and nothing in the others); a sorted set's two indexes and a
  // list's ends agree with it.
  void CheckCollection(const Live& l) {
    const CollectionMeta& m = l.meta;
    auto n = [&l](char sub) {
      auto it = l.counts.find(sub);
      return it == l.counts.end() ? uint64_t{0} : it->second;
    };
    uint64_t others = 0;
    char sub = 0;
    switch (m.type) {
      case CollectionType::kHash:
        sub = sub_space::kHashField;
        break;
      case CollectionType::kSet:
        sub = sub_space::kSetMember;
        break;
      case CollectionType::kZset:
        sub = sub_space::kZsetMember;
        if (n(sub_space::kZsetByScore) != n(sub))
          Problem("sorted set '" + l.key + "': " + std::to_string(n(sub)) + " members but " +
                  std::to_string(n(sub_space::kZsetByScore)) + " score entries");
        break;
      case CollectionType::kList:
        sub = sub_space::kListItem;
        if (static_cast<uint64_t>(m.tail - m.head) != m.count)
          Problem("list '" + l.key + "': ends " + std::to_string(m.head) + ".." +
                  std::to_string(m.tail) + " disagree with count " + std::to_string(m.count));
        break;
    }
    const uint64_t found = n(sub);
    for (const auto& [s, c] : l.counts)
      if (s != sub && !(m.type == CollectionType::kZset && s == sub_space::kZsetByScore))
        others += c;
    if (found != m.count || m.count == 0) {
      Problem("key '" + l.key + "': count " + std::to_string(m.count) + " but " +
              std::to_string(found) + " elements");
    }
    if (others != 0)
      Problem("key '" + l.key + "': " + std::to_string(others) +
              " elements in sub-spaces its type does not use");
  }

  Store& base_;
  const uint32_t ns_;
  const std::string where_;
  const size_t max_problems_;
  CollectionReport& report_;
  std::map<uint64_t, Live> live_;
  std::map<uint64_t, uint16_t> garbage_;
  std::map<uint64_t, Large> large_;
};

}  // namespace

CollectionReport VerifyCollections(Databases& dbs, size_t max_problems) {
  CollectionReport report;
  for (int db = 0; db < dbs.count(); ++db) {
    DatabaseCheck(dbs.base(), dbs.ns(db), db, max_problems, &report).Run();
  }
  return report;
}

}  // namespace pmindex::server
