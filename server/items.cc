#include "server/items.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "server/collections.h"
#include "server/numbers.h"

namespace pmindex::server {

namespace item_codec {

namespace {
template <class T>
void PutLittleEndian(T v, std::string* out) {
  for (size_t i = 0; i < sizeof(T); ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
template <class T>
T GetLittleEndian(const char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
}  // namespace

void Encode(std::string_view data, uint32_t flags, int64_t expiry_ms, std::string* out, bool raw) {
  uint8_t tag = kTag;
  if (raw) tag |= kRaw;
  if (flags != 0) tag |= kHasFlags;
  if (expiry_ms != 0) tag |= kHasExpiry;
  out->reserve(out->size() + kMaxHeaderBytes + data.size());
  out->push_back(static_cast<char>(tag));
  if (flags != 0) PutLittleEndian<uint32_t>(flags, out);
  if (expiry_ms != 0) PutLittleEndian<uint64_t>(static_cast<uint64_t>(expiry_ms), out);
  out->append(data);
}

bool Decode(std::string_view stored, Item* out) {
  if (stored.empty()) return false;
  const auto tag = static_cast<uint8_t>(stored[0]);
  if ((tag & ~(kHasFlags | kHasExpiry | kRaw)) != kTag) return false;
  size_t pos = 1;
  out->flags = 0;
  out->expiry_ms = 0;
  out->raw = (tag & kRaw) != 0;
  if (tag & kHasFlags) {
    if (stored.size() < pos + 4) return false;
    out->flags = GetLittleEndian<uint32_t>(stored.data() + pos);
    pos += 4;
  }
  if (tag & kHasExpiry) {
    if (stored.size() < pos + 8) return false;
    const uint64_t e = GetLittleEndian<uint64_t>(stored.data() + pos);
    if (e == 0 || e > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    out->expiry_ms = static_cast<int64_t>(e);
    pos += 8;
  }
  out->data.assign(stored.substr(pos));
  return true;
}

size_t HeaderBytes(std::string_view prefix) {
  if (prefix.empty()) return 0;
  const auto tag = static_cast<uint8_t>(prefix[0]);
  if ((tag & ~(kHasFlags | kHasExpiry | kRaw)) != kTag) return 0;
  return 1 + ((tag & kHasFlags) ? 4 : 0) + ((tag & kHasExpiry) ? 8 : 0);
}

bool ExpiredAt(std::string_view stored, int64_t now_ms) {
  if (stored.empty()) return false;
  const auto tag = static_cast<uint8_t>(stored[0]);
  if ((tag & ~(kHasFlags | kHasExpiry | kRaw)) != kTag || !(tag & kHasExpiry)) return false;
  const size_t pos = (tag & kHasFlags) ? 5 : 1;
  if (stored.size() < pos + 8) return false;
  const uint64_t e = GetLittleEndian<uint64_t>(stored.data() + pos);
  return e != 0 && e <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
         static_cast<int64_t>(e) <= now_ms;
}

}  // namespace item_codec

int64_t WallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Items::Items(Store& store, Stats& stats, Clock now_ms)
    : store_(store), stats_(stats), now_ms_(std::move(now_ms)) {}

Result<std::optional<Item>> Items::Read(std::string_view key, bool* present, uint64_t* version,
                                        bool peek) {
  *present = false;
  *version = 0;
  Result<StoredValue> r = peek ? store_.Peek(key) : store_.Get(key);
  if (!r.ok()) {
    if (r.status().is_not_found()) return std::optional<Item>();
    return r.status();
  }
  *present = true;
  *version = r->version;
  if (collection_codec::IsCollection(r->value)) {
    // A collection is no item: WRONGTYPE while it lives; expired, it is
    // absent to reads, and writes replace it through DropCollection.
    if (collection_codec::ExpiredAt(r->value, now_ms_())) return std::optional<Item>();
    return WrongTypeError();
  }
  Item item;
  // The header decoded from the record's first bytes; the data is the
  // rest of the record, moved, not copied (a large value is one buffer).
  if (!item_codec::Decode(std::string_view(r->value).substr(0, item_codec::kMaxHeaderBytes), &item))
    return Status::Corruption("the stored value is not a pmserver item");
  const size_t header = std::min(r->value.size(), item_codec::kMaxHeaderBytes) - item.data.size();
  r->value.erase(0, header);
  item.data = std::move(r->value);
  item.version = r->version;
  if (Expired(item)) {
    Stats::Add(stats_.get_expired);
    return std::optional<Item>();
  }
  return std::optional<Item>(std::move(item));
}

Result<Item> Items::Get(std::string_view key) {
  PMINDEX_RETURN_IF_ERROR(MaybeFlush());
  Stats::Add(stats_.cmd_get);
  bool present = false;
  uint64_t version = 0;
  Result<std::optional<Item>> r = Read(key, &present, &version);
  if (!r.ok()) return r.status();
  if (!r->has_value()) {
    Stats::Add(stats_.get_misses);
    if (present) {
      // Lazy removal of the expired version only; a newer value written
      // meanwhile stays (kChanged), and a failure here loses nothing. An
      // expired collection is left to the background expiry (its
      // elements must be garbage-listed with it).
      IgnoreError(RemoveExpired(key, version), "the item is a miss either way");
    }
    return Status::NotFound();
  }
  Stats::Add(stats_.get_hits);
  return std::move(**r);
}

Result<Item> Items::GetPart(std::string_view key, uint64_t offset, uint64_t length,
                            uint64_t* size) {
  PMINDEX_RETURN_IF_ERROR(MaybeFlush());
  Stats::Add(stats_.cmd_get);
  Result<StoredPart> r = store_.GetPart(key, &item_codec::HeaderBytes, offset, length);
  if (!r.ok()) {
    if (r.status().is_not_found()) Stats::Add(stats_.get_misses);
    return r.status();
  }
  if (collection_codec::IsCollection(r->prefix)) {
    // As Read: WRONGTYPE while it lives; expired, a miss (the background
    // expiry removes it with its elements).
    if (!collection_codec::ExpiredAt(r->prefix, now_ms_())) return WrongTypeError();
    Stats::Add(stats_.get_misses);
    return Status::NotFound();
  }
  Item item;
  const std::string_view prefix(r->prefix);
  if (!item_codec::Decode(prefix.substr(0, item_codec::kMaxHeaderBytes), &item) ||
      item_codec::HeaderBytes(prefix) > r->size)
    return Status::Corruption("the stored value is not a pmserver item");
  *size = r->size - item_codec::HeaderBytes(prefix);
  item.version = r->version;
  if (Expired(item)) {
    Stats::Add(stats_.get_expired);
    Stats::Add(stats_.get_misses);
    IgnoreError(RemoveExpired(key, r->version), "the item is a miss either way");
    return Status::NotFound();
  }
  item.data = std::move(r->part);
  Stats::Add(stats_.get_hits);
  return item;
}

Result<ItemOutcome> Items::Modify(std::string_view key,
                                  const std::function<Change(const Item*)>& decide, bool peek) {
  for (;;) {
    bool present = false;
    uint64_t version = 0;
    Result<std::optional<Item>> r = Read(key, &present, &version, peek);
    if (!r.ok()) return r.status();
    Change c = decide(r->has_value() ? &**r : nullptr);
    if (c.outcome != ItemOutcome::kDone || c.kind == Change::Kind::kNone) {
      if (present && !r->has_value())
        IgnoreError(RemoveExpired(key, version), "lazy removal of an expired item");
      return c.outcome;
    }
    if (present && !r->has_value()) {
      // An expired value is in the way: a collection goes with its
      // elements (DeleteKey), then the change is decided again.
      Result<bool> dropped = DropCollection(key, version);
      if (!dropped.ok()) return dropped.status();
      if (*dropped) continue;
    }
    Result<WriteOutcome> w = WriteOutcome::kDone;
    if (c.kind == Change::Kind::kRemove) {
      w = store_.RemoveIfVersion(key, version);
    } else if (present) {
      w = store_.PutIfVersion(key, c.value, version);
    } else {
      w = store_.PutIfAbsent(key, c.value);
    }
    if (!w.ok()) return w.status();
    if (*w == WriteOutcome::kDone) return ItemOutcome::kDone;
    // The key changed between the read and the write: decide again.
  }
}

Items::Change Items::DecideWrite(StoreMode mode, const Item* live, std::string_view data,
                                 const std::string& value, uint64_t cas, size_t max_data) const {
  Change c;
  switch (mode) {
    case StoreMode::kSet:
    case StoreMode::kAdd:
      if (live) {
        c.outcome = ItemOutcome::kNotStored;
        return c;
      }
      break;
    case StoreMode::kReplace:
      if (!live) {
        c.outcome = ItemOutcome::kNotStored;
        return c;
      }
      break;
    case StoreMode::kCas:
      if (!live) {
        c.outcome = ItemOutcome::kNotFound;
        return c;
      }
      if (live->version != cas) {
        c.outcome = ItemOutcome::kExists;
        return c;
      }
      break;
    case StoreMode::kAppend:
    case StoreMode::kPrepend: {
      if (!live) {
        c.outcome = ItemOutcome::kNotStored;
        return c;
      }
      std::string joined = mode == StoreMode::kAppend ? live->data + std::string(data)
                                                      : std::string(data) + live->data;
      if (joined.size() > std::min(max_data, max_data_bytes())) {
        c.outcome = ItemOutcome::kNotStored;
        return c;
      }
      c.kind = Change::Kind::kPut;
      item_codec::Encode(joined, live->flags, live->expiry_ms, &c.value);
      return c;
    }
  }
  c.kind = Change::Kind::kPut;
  c.value = value;
  return c;
}

Result<ItemOutcome> Items::Write(StoreMode mode, std::string_view key, std::string_view data,
                                 uint32_t flags, int64_t expiry_ms, uint64_t cas, size_t max_data) {
  PMINDEX_RETURN_IF_ERROR(MaybeFlush());
  Stats::Add(stats_.cmd_set);
  // The new item's encoding (append and prepend build theirs from the
  // item they extend).
  std::string value;
  if (mode != StoreMode::kAppend && mode != StoreMode::kPrepend)
    item_codec::Encode(data, flags, expiry_ms, &value);
  if (mode == StoreMode::kSet || mode == StoreMode::kAdd) {
    if (mode == StoreMode::kSet) {
      PMINDEX_RETURN_IF_ERROR(Replace(key, value));
      return ItemOutcome::kDone;
    }
    // add: the common case (absent) needs one call; an expired item in
    // the way goes through Modify.
    Result<WriteOutcome> w = store_.PutIfAbsent(key, value);
    if (!w.ok()) return w.status();
    if (*w == WriteOutcome::kDone) return ItemOutcome::kDone;
  }
  Result<ItemOutcome> r = Modify(
      key, [&](const Item* live) { return DecideWrite(mode, live, data, value, cas, max_data); });
  if (!r.ok() && IsWrongType(r.status())) {
    // A live collection: add finds the key taken, replace replaces it
    // (Redis's SET XX), the others are WRONGTYPE.
    if (mode == StoreMode::kAdd) return ItemOutcome::kNotStored;
    if (mode == StoreMode::kReplace) {
      PMINDEX_RETURN_IF_ERROR(Replace(key, value));
      return ItemOutcome::kDone;
    }
  }
  if (r.ok() && mode == StoreMode::kCas) {
    Stats::Add(*r == ItemOutcome::kDone     ? stats_.cas_hits
               : *r == ItemOutcome::kExists ? stats_.cas_badval
                                            : stats_.cas_misses);
  }
  return r;
}

Status Items::StoreMany(const std::vector<std::pair<std::string_view, std::string_view>>& pairs) {
  PMINDEX_RETURN_IF_ERROR(MaybeFlush());
  Stats::Add(stats_.cmd_set, pairs.size());
  std::vector<std::string> values(pairs.size());
  std::vector<std::pair<std::string_view, std::string_view>> encoded;
  encoded.reserve(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    item_codec::Encode(pairs[i].second, 0, 0, &values[i]);
    encoded.emplace_back(pairs[i].first, values[i]);
  }
  if (keyspace_ == nullptr) return store_.PutMany(encoded);
  // One transaction, so that a collection among the keys is replaced
  // with its elements garbage-listed.
  return RunOnItems(*this, [&](TxnScope& scope, int db) -> Status {
    for (const auto& [k, v] : encoded) {
      PMINDEX_RETURN_IF_ERROR(DeleteKey(scope, db, k).status());
      PMINDEX_RETURN_IF_ERROR(scope.db(db).Put(k, v));
    }
    return Status::OK();
  });
}

Status Items::Replace(std::string_view key, std::string_view value) {
  // One read and one conditional write, unless a collection is there.
  Result<WriteOutcome> w = store_.PutUnless(key, value, [](std::optional<std::string_view> old) {
    return old && collection_codec::IsCollection(*old);
  });
  if (!w.ok()) return w.status();
  if (*w == WriteOutcome::kDone) return Status::OK();
  // A collection (live or expired) goes with its elements.
  return RunOnItems(*this, [&](TxnScope& scope, int db) -> Status {
    PMINDEX_RETURN_IF_ERROR(DeleteKey(scope, db, key).status());
    return scope.db(db).Put(key, value);
  });
}

Status Items::RemoveExpired(std::string_view key, uint64_t version) {
  Result<StoredValue> cur = store_.Peek(key);
  if (!cur.ok() || cur->version != version || collection_codec::IsCollection(cur->value))
    return Status::OK();
  return store_.RemoveIfVersion(key, version).status();
}

Result<bool> Items::DropCollection(std::string_view key, uint64_t version) {
  if (keyspace_ == nullptr) return false;
  {
    Result<StoredValue> cur = store_.Get(key);
    if (!cur.ok()) return !cur.status().is_not_found() ? cur.status() : Result<bool>(true);
    if (cur->version != version) return true;
    if (!collection_codec::IsCollection(cur->value)) return false;
  }
  bool dropped = false;
  Status s = RunOnItems(*this, [&](TxnScope& scope, int db) -> Status {
    dropped = false;
    Result<StoredValue> cur = scope.db(db).Get(key);
    if (!cur.ok()) return cur.status().is_not_found() ? Status::OK() : cur.status();
    if (cur->version != version || !collection_codec::IsCollection(cur->value)) {
      // Changed since it was read: the caller reads it again.
      dropped = true;
      return Status::OK();
    }
    dropped = true;
    return DeleteKey(scope, db, key).status();
  });
  if (!s.ok()) return s;
  return dropped;
}

Status Items::Edit(std::string_view key, const std::function<ItemEdit(const Item*)>& decide) {
  PMINDEX_RETURN_IF_ERROR(MaybeFlush());
  Result<ItemOutcome> r = Modify(key, [&](const Item* live) {
    ItemEdit e = decide(live);
    Change c;
    if (e.kind == ItemEdit::Kind::kPut) {
      c.kind = Change::Kind::kPut;
      const bool raw = e.raw || (live != nullptr && live->raw && e.data == live->data);
      item_codec::Encode(e.data, e.flags, e.expiry_ms, &c.value, raw);
    } else if (e.kind == ItemEdit::Kind::kRemove) {
      // Removing what is not there is keeping it so.
      if (live != nullptr) c.kind = Change::Kind::kRemove;
    }
    return c;
  });
  return r.status();
}

Status Items::Patch(
    std::string_view key, uint64_t offset, uint64_t length, bool raw_if_new,
    const std::function<std::optional<std::vector<DataWrite>>(const Item*, uint64_t size)>&
        decide) {
  PMINDEX_RETURN_IF_ERROR(MaybeFlush());
  for (;;) {
    Result<StoredPart> r = store_.GetPart(key, &item_codec::HeaderBytes, offset, length);
    if (!r.ok() && !r.status().is_not_found()) return r.status();
    const bool present = r.ok();
    std::optional<Item> live;
    uint64_t size = 0;
    size_t header = 0;
    if (present && collection_codec::IsCollection(r->prefix)) {
      if (!collection_codec::ExpiredAt(r->prefix, now_ms_())) return WrongTypeError();
      // An expired collection in the way goes with its elements first.
      Result<bool> dropped = DropCollection(key, r->version);
      if (!dropped.ok()) return dropped.status();
      if (*dropped) continue;
    } else if (present) {
      Item item;
      header = item_codec::HeaderBytes(r->prefix);
      if (!item_codec::Decode(std::string_view(r->prefix).substr(0, item_codec::kMaxHeaderBytes),
                              &item) ||
          header > r->size)
        return Status::Corruption("the stored value is not a pmserver item");
      size = r->size - header;
      item.version = r->version;
      if (!Expired(item)) {
        item.data = std::move(r->part);
        live = std::move(item);
      }
    }
    std::optional<std::vector<DataWrite>> writes = decide(live ? &*live : nullptr, size);
    if (!writes) return Status::OK();
    Result<WriteOutcome> w = WriteOutcome::kDone;
    if (live) {
      // The header keeps its length: only the raw bit of its tag changes.
      const char tag = static_cast<char>(static_cast<uint8_t>(r->prefix[0]) | item_codec::kRaw);
      std::vector<ByteWrite> bw;
      if (!live->raw) bw.push_back({0, std::string_view(&tag, 1)});
      for (const DataWrite& d : *writes) bw.push_back({header + d.offset, d.bytes});
      w = store_.PatchIfVersion(key, r->version, bw);
    } else {
      std::string data;
      for (const DataWrite& d : *writes) {
        if (data.size() < d.offset + d.bytes.size()) data.resize(d.offset + d.bytes.size(), '\0');
        data.replace(d.offset, d.bytes.size(), d.bytes);
      }
      std::string value;
      item_codec::Encode(data, 0, 0, &value, raw_if_new);
      w = present ? store_.PutIfVersion(key, value, r->version) : store_.PutIfAbsent(key, value);
    }
    if (!w.ok()) return w.status();
    if (*w == WriteOutcome::kDone) return Status::OK();
    // The key changed between the read and the write: decide again.
  }
}

Result<ItemOutcome> Items::Delete(std::string_view key) {
  PMINDEX_RETURN_IF_ERROR(MaybeFlush());
  // The data is not needed: a large value's pieces are not read.
  Result<ItemOutcome> r = Modify(
      key,
      [](const Item* live) {
        Change c;
        if (!live) {
          c.outcome = ItemOutcome::kNotFound;
        } else {
          c.kind = Change::Kind::kRemove;
        }
        return c;
      },
      /*peek=*/true);
  if (!r.ok() && IsWrongType(r.status()) && keyspace_ != nullptr) {
    // A live collection: its metadata goes, its elements are
    // garbage-listed, at once.
    bool live = false;
    const Status s = RunOnItems(*this, [&](TxnScope& scope, int db) -> Status {
      Result<bool> d = DeleteKey(scope, db, key);
      if (!d.ok()) return d.status();
      live = *d;
      return Status::OK();
    });
    r = s.ok() ? Result<ItemOutcome>(live ? ItemOutcome::kDone : ItemOutcome::kNotFound) : s;
  }
  if (r.ok()) Stats::Add(*r == ItemOutcome::kDone ? stats_.delete_hits : stats_.delete_misses);
  return r;
}

Result<ItemOutcome> Items::Touch(std::string_view key, int64_t expiry_ms) {
  PMINDEX_RETURN_IF_ERROR(MaybeFlush());
  Stats::Add(stats_.cmd_touch);
  Result<ItemOutcome> r = Modify(key, [&](const Item* live) {
    Change c;
    if (!live) {
      c.outcome = ItemOutcome::kNotFound;
    } else {
      c.kind = Change::Kind::kPut;
      item_codec::Encode(live->data, live->flags, expiry_ms, &c.value, live->raw);
    }
    return c;
  });
  if (r.ok()) Stats::Add(*r == ItemOutcome::kDone ? stats_.touch_hits : stats_.touch_misses);
  return r;
}

Result<Item> Items::GetAndTouch(std::string_view key, int64_t expiry_ms) {
  PMINDEX_RETURN_IF_ERROR(MaybeFlush());
  Stats::Add(stats_.cmd_touch);
  Item item;
  std::string written;
  Result<ItemOutcome> r = Modify(key, [&](const Item* live) {
    Change c;
    if (!live) {
      c.outcome = ItemOutcome::kNotFound;
    } else {
      item = *live;
      item.expiry_ms = expiry_ms;
      c.kind = Change::Kind::kPut;
      item_codec::Encode(live->data, live->flags, expiry_ms, &c.value, live->raw);
      written = c.value;
    }
    return c;
  });
  if (!r.ok()) return r.status();
  if (*r != ItemOutcome::kDone) {
    Stats::Add(stats_.touch_misses);
    return Status::NotFound();
  }
  Stats::Add(stats_.touch_hits);
  // The store does not report the version a write made: read it back, and
  // keep it only if the key still holds what the touch wrote. (A write of
  // the very same bytes in between is taken for the touch's own.)
  Result<StoredValue> now = store_.Get(key);
  if (now.ok() && now->value == written) item.version = now->version;
  return item;
}

Result<ItemOutcome> Items::IncrDecr(std::string_view key, uint64_t delta, bool incr,
                                    uint64_t* result) {
  PMINDEX_RETURN_IF_ERROR(MaybeFlush());
  Result<ItemOutcome> r = Modify(key, [&](const Item* live) {
    Change c;
    uint64_t v = 0;
    if (!live) {
      c.outcome = ItemOutcome::kNotFound;
    } else if (!ParseNumber(live->data, &v)) {
      c.outcome = ItemOutcome::kNotNumeric;
    } else {
      // incr wraps around at 2^64 (unsigned arithmetic); decr stops at 0.
      v = incr ? v + delta : (delta > v ? 0 : v - delta);
      *result = v;
      c.kind = Change::Kind::kPut;
      item_codec::Encode(std::to_string(v), live->flags, live->expiry_ms, &c.value);
    }
    return c;
  });
  if (r.ok() && *r != ItemOutcome::kNotNumeric) {
    const bool hit = *r == ItemOutcome::kDone;
    Stats::Add(incr ? (hit ? stats_.incr_hits : stats_.incr_misses)
                    : (hit ? stats_.decr_hits : stats_.decr_misses));
  }
  return r;
}

Result<ItemOutcome> Items::IncrBy(std::string_view key, int64_t delta, int64_t* result) {
  PMINDEX_RETURN_IF_ERROR(MaybeFlush());
  return Modify(key, [&](const Item* live) {
    Change c;
    int64_t v = 0;
    if (live && !ParseNumber(live->data, &v)) {
      c.outcome = ItemOutcome::kNotNumeric;
    } else if (__builtin_add_overflow(v, delta, &v)) {
      c.outcome = ItemOutcome::kOverflow;
    } else {
      *result = v;
      c.kind = Change::Kind::kPut;
      item_codec::Encode(std::to_string(v), live ? live->flags : 0, live ? live->expiry_ms : 0,
                         &c.value);
    }
    return c;
  });
}

void Items::ScanKeys(std::string_view from, size_t limit, std::vector<std::string>* keys,
                     std::string* next) {
  next->clear();
  std::vector<std::pair<std::string, std::string>> pairs;
  // One more than asked: its key is where the next call starts.
  const size_t n = store_.Range(from, limit + 1, &pairs);
  const int64_t now = now_ms_();
  for (size_t i = 0; i < n && i < limit; ++i) {
    if (KindOfStored(pairs[i].second, now) != KeyKind::kNone)
      keys->push_back(std::move(pairs[i].first));
  }
  if (n > limit) *next = std::move(pairs[limit].first);
}

Status Items::Flush(int64_t delay_ms) {
  Stats::Add(stats_.cmd_flush);
  if (delay_ms > 0) {
    flush_at_ms_.store(now_ms_() + delay_ms);
    return Status::OK();
  }
  flush_at_ms_.store(0);
  return store_.RemoveAll();
}

Status Items::MaybeFlush() {
  int64_t at = flush_at_ms_.load(std::memory_order_relaxed);
  if (at == 0 || at > now_ms_()) return Status::OK();
  // One request runs the flush; the others go on (they may see items the
  // flush has not reached yet).
  if (!flush_at_ms_.compare_exchange_strong(at, 0)) return Status::OK();
  return store_.RemoveAll();
}

}  // namespace pmindex::server
