#include "server/databases.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>

#include "server/chunked_values.h"
#include "server/collections.h"
#include "server/key_slot.h"

namespace pmindex::server {

// ---------------------------------------------------------------- OpEpochs

OpEpochs::Guard OpEpochs::Enter() {
  static thread_local const size_t stripe =
      std::hash<std::thread::id>()(std::this_thread::get_id()) % kStripes;
  for (;;) {
    const uint64_t e = epoch_.load(std::memory_order_seq_cst);
    std::atomic<uint64_t>& c = stripes_[stripe].active[e & 1];
    c.fetch_add(1, std::memory_order_seq_cst);
    // Counted under the epoch still current: Synchronize's wait sees it.
    if (epoch_.load(std::memory_order_seq_cst) == e) return Guard(&c);
    c.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void OpEpochs::Synchronize() {
  sync::MutexLock lock(sync_mu_);
  // Two flips: the first drains the guards of the current parity, the
  // second those of the other one (entered before the first flip, under
  // the epoch before). Guards entered after a flip see what the caller
  // published before calling.
  for (int round = 0; round < 2; ++round) {
    const uint64_t e = epoch_.fetch_add(1, std::memory_order_seq_cst);
    for (;;) {
      uint64_t active = 0;
      for (const Stripe& s : stripes_) active += s.active[e & 1].load(std::memory_order_acquire);
      if (active == 0) break;
      std::this_thread::yield();
    }
  }
}

namespace {

constexpr uint8_t kKindItem = 0;
constexpr std::string_view kTableMagic{"\0pmsrvdb", 8};
static_assert(sizeof("\0pmsrvdb") == 8 + 1);
constexpr uint32_t kTableFormat = 1;

void PutBigEndian32(uint32_t v, std::string* out) {
  for (int i = 3; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t GetBigEndian32(std::string_view s) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(s[static_cast<size_t>(i)]);
  return v;
}
void PutLittle32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
bool GetLittle32(std::string_view s, size_t* pos, uint32_t* v) {
  if (s.size() < *pos + 4) return false;
  *v = 0;
  for (int i = 3; i >= 0; --i)
    *v = (*v << 8) | static_cast<uint8_t>(s[*pos + static_cast<size_t>(i)]);
  *pos += 4;
  return true;
}

// The namespace of a stored key, and its client key (false: the stored
// key is not of the encoding's form).
bool Split(std::string_view stored, uint32_t* ns, std::string_view* key) {
  if (stored.size() < Databases::kHeaderBytes) return false;
  *ns = GetBigEndian32(stored);
  if (static_cast<uint8_t>(stored[6]) != kKindItem) return false;
  *key = stored.substr(Databases::kHeaderBytes);
  return true;
}

// The end of namespace `ns`'s range (nullopt: none, the last namespace).
std::optional<std::string> NamespaceEnd(uint32_t ns) {
  if (ns == UINT32_MAX) return std::nullopt;
  return Databases::NamespacePrefix(ns + 1);
}

// The end of namespace `ns`'s keys (slots below the collections' element
// region, collections.h): item ranges stop there and never walk elements.
std::string ItemsEnd(uint32_t ns) {
  std::string e = Databases::NamespacePrefix(ns);
  e.push_back(static_cast<char>(collection_keys::kElementRegion >> 8));
  e.push_back('\0');
  return e;
}

// Range over the stored items of namespace `ns` from the position of
// client key `from` (its slot, then it) to that of `to` (nullopt: the
// namespace's end), through `range` (the store's or a transaction's);
// appends client keys.
using RangeFn = std::function<size_t(std::string_view, std::optional<std::string_view>, size_t,
                                     std::vector<std::pair<std::string, std::string>>*)>;
size_t RangeOfNamespace(uint32_t ns, std::string_view from, std::optional<std::string_view> to,
                        size_t limit, std::vector<std::pair<std::string, std::string>>* out,
                        const RangeFn& range) {
  std::string lo = Databases::Encode(ns, from);
  const std::optional<std::string> hi = to ? Databases::Encode(ns, *to) : ItemsEnd(ns);
  size_t added = 0;
  std::vector<std::pair<std::string, std::string>> batch;
  while (added < limit) {
    batch.clear();
    const size_t want = limit - added;
    const size_t n =
        range(lo, hi ? std::optional<std::string_view>(*hi) : std::nullopt, want, &batch);
    for (auto& [k, v] : batch) {
      uint32_t kns = 0;
      std::string_view key;
      // Records of other kinds (none yet) are skipped.
      if (!Split(k, &kns, &key)) continue;
      out->emplace_back(std::string(key), std::move(v));
      ++added;
    }
    if (n < want) break;  // the range is done
    lo = batch.back().first;
    lo.push_back('\0');
  }
  return added;
}

// ---------------------------------------------------------------- pieces

// What the expiry sweep and PutUnless examine of a stored record: a head's
// prefix (the value's first bytes, the item's header among them), any
// other record whole.
std::string_view ExpiryView(std::string_view stored) {
  if (!chunk_codec::IsHead(stored) || stored.size() < chunk_codec::kFixedBytes) return stored;
  return stored.substr(chunk_codec::kFixedBytes);
}

// Pieces read per Range call while a value is assembled (at most 8 MiB of
// them at the store's 1 MiB value limit).
constexpr size_t kPieceBatch = 8;

// The value of `head` (a head record of namespace `ns`, chunked_values.h)
// from its pieces, read through `range` (the store's or a transaction's).
// NotFound: a piece is missing, i.e. the generation was dropped after the
// head was read (outside a transaction; read the head again).
// `counter` counts the pieces read.
Result<std::string> ReadPieces(std::string_view head, uint32_t ns, const RangeFn& range,
                               std::atomic<uint64_t>& counter) {
  chunk_codec::Head h;
  if (!chunk_codec::DecodeHead(head, &h))
    return Status::Corruption("a large value's head record does not decode");
  const std::string end = chunk_codec::PiecePrefix(ns, h.slot, h.gen + 1);
  std::string from = chunk_codec::PieceKey(ns, h.slot, h.gen, 0);
  std::string value;
  value.reserve(h.bytes);
  uint32_t next = 0;
  std::vector<std::pair<std::string, std::string>> batch;
  while (next < h.pieces()) {
    batch.clear();
    const size_t n = range(from, end, kPieceBatch, &batch);
    counter.fetch_add(batch.size(), std::memory_order_relaxed);
    for (const auto& [k, v] : batch) {
      if (k != chunk_codec::PieceKey(ns, h.slot, h.gen, next) || value.size() + v.size() > h.bytes)
        return Status::NotFound("a piece of the value is gone");
      value.append(v);
      ++next;
    }
    if (n < kPieceBatch) break;
    from = batch.back().first;
    from.push_back('\0');
  }
  if (next != h.pieces() || value.size() != h.bytes)
    return Status::NotFound("a piece of the value is gone");
  return value;
}

// Replaces what `stored_key` (client key `key` in namespace `ns`) holds in
// `tx`, whose current value there is *old (nullptr: absent), by `value`
// (nullptr: removes it): an old head's generation is garbage-listed, and
// a value that needs pieces is written as pieces of a new generation and
// a head. Nothing is durable before tx commits.
Status ReplaceInTransaction(StoreTransaction& tx, Databases& dbs, size_t max_value_bytes,
                            uint32_t ns, std::string_view stored_key, std::string_view key,
                            const std::string_view* value, const std::string* old) {
  if (old != nullptr && chunk_codec::IsHead(*old)) {
    chunk_codec::Head h;
    if (!chunk_codec::DecodeHead(*old, &h))
      return Status::Corruption("a large value's head record does not decode");
    PMINDEX_RETURN_IF_ERROR(
        tx.Put(collection_keys::GarbageKey(ns, h.gen), collection_keys::GarbageValue(h.slot)));
  }
  if (value == nullptr) {
    if (old == nullptr) return Status::OK();
    return tx.Remove(stored_key).status();
  }
  if (!chunk_codec::NeedsPieces(*value, max_value_bytes)) return tx.Put(stored_key, *value);
  Result<uint64_t> gen = dbs.NewGeneration();
  if (!gen.ok()) return gen.status();
  const uint16_t slot = KeySlot(key);
  const auto piece = static_cast<uint32_t>(max_value_bytes);
  uint32_t i = 0;
  for (size_t at = 0; at < value->size(); at += piece, ++i)
    PMINDEX_RETURN_IF_ERROR(
        tx.Put(chunk_codec::PieceKey(ns, slot, *gen, i), value->substr(at, piece)));
  return tx.Put(stored_key, chunk_codec::EncodeHead(*value, *gen, slot, piece));
}

// Bytes [h + offset, h + offset + length) of the value whose head record
// is `head` (of version `version`, namespace `ns`), where h = header(its
// prefix), read from only the pieces they are in through `range` (the
// store's or a transaction's): Store::GetPart's answer. NotFound: a piece
// is missing or not of the head's length (the head was replaced or
// patched after it was read).
Result<StoredPart> ReadPartOfHead(std::string_view head, uint64_t version, uint32_t ns,
                                  const RangeFn& range, std::atomic<uint64_t>& counter,
                                  HeaderBytesFn header, uint64_t offset, uint64_t length) {
  chunk_codec::Head h;
  if (!chunk_codec::DecodeHead(head, &h))
    return Status::Corruption("a large value's head record does not decode");
  StoredPart p;
  p.prefix = h.prefix.substr(0, Store::kPeekBytes);
  p.size = h.bytes;
  p.version = version;
  const uint64_t skip = std::min<uint64_t>(header(p.prefix), h.bytes);
  if (length == 0 || offset >= h.bytes - skip) return p;
  const uint64_t begin = skip + offset;
  const uint64_t end = begin + std::min(length, h.bytes - begin);  // [begin, end)
  const uint64_t first = begin / h.piece_bytes, last = (end - 1) / h.piece_bytes;
  std::string from = chunk_codec::PieceKey(ns, h.slot, h.gen, static_cast<uint32_t>(first));
  const std::string to = chunk_codec::PiecePrefix(ns, h.slot, h.gen + 1);
  std::vector<std::pair<std::string, std::string>> batch;
  for (uint64_t next = first; next <= last;) {
    batch.clear();
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kPieceBatch, last - next + 1));
    const size_t n = range(from, to, want, &batch);
    counter.fetch_add(batch.size(), std::memory_order_relaxed);
    for (const auto& [pk, pv] : batch) {
      const uint64_t at = next * h.piece_bytes;  // the piece's first byte
      if (pk != chunk_codec::PieceKey(ns, h.slot, h.gen, static_cast<uint32_t>(next)) ||
          pv.size() != std::min<uint64_t>(h.piece_bytes, h.bytes - at))
        return Status::NotFound("a piece of the value is gone");
      const uint64_t lo = std::max(begin, at), hi = std::min(end, at + pv.size());
      p.part.append(pv, static_cast<size_t>(lo - at), static_cast<size_t>(hi - lo));
      ++next;
    }
    if (next <= last && n < want) return Status::NotFound("a piece of the value is gone");
    if (!batch.empty()) {
      from = batch.back().first;
      from.push_back('\0');
    }
  }
  return p;
}

// Patches, in `tx`, the value at `stored_key` (client key `key` in
// namespace `ns`), whose record there is `cur` (a head or a whole value),
// with `writes` (ApplyWrites). A whole value is rewritten (in pieces if it
// now needs them); a head keeps its generation: the pieces the writes
// fall in and those past the old end are written (the ones that existed
// read first), then the head with the new length and prefix. Counts the
// pieces read and written. Nothing is durable before tx commits.
Status PatchInTransaction(StoreTransaction& tx, Databases& dbs, size_t max_value_bytes, uint32_t ns,
                          std::string_view stored_key, std::string_view key, const std::string& cur,
                          const std::vector<ByteWrite>& writes, std::atomic<uint64_t>& read,
                          std::atomic<uint64_t>& written) {
  if (!chunk_codec::IsHead(cur)) {
    std::string v = cur;
    ApplyWrites(&v, writes);
    const std::string_view nv = v;
    return ReplaceInTransaction(tx, dbs, max_value_bytes, ns, stored_key, key, &nv, &cur);
  }
  chunk_codec::Head h;
  if (!chunk_codec::DecodeHead(cur, &h))
    return Status::Corruption("a large value's head record does not decode");
  const uint64_t size = PatchedSize(h.bytes, writes);
  const uint64_t piece = h.piece_bytes;
  if (size > Databases::kMaxValueBytes || (size - 1) / piece >= UINT32_MAX)
    return Status::InvalidArgument("the value is too large");
  std::set<uint64_t> touched;
  for (const ByteWrite& w : writes) {
    if (w.bytes.empty()) continue;
    for (uint64_t i = w.offset / piece; i <= (w.offset + w.bytes.size() - 1) / piece; ++i)
      touched.insert(i);
  }
  if (size > h.bytes)
    for (uint64_t i = h.bytes / piece; i <= (size - 1) / piece; ++i) touched.insert(i);
  for (uint64_t i : touched) {
    const uint64_t at = i * piece;
    const std::string k = chunk_codec::PieceKey(ns, h.slot, h.gen, static_cast<uint32_t>(i));
    std::string data;
    if (i < h.pieces()) {
      Result<StoredValue> old = tx.Get(k);
      read.fetch_add(1, std::memory_order_relaxed);
      if (!old.ok() && !old.status().is_not_found()) return old.status();
      if (!old.ok() || old->value.size() != std::min<uint64_t>(piece, h.bytes - at))
        return Status::Corruption("a large value's pieces are missing");
      data = std::move(old->value);
    }
    data.resize(static_cast<size_t>(std::min<uint64_t>(piece, size - at)), '\0');
    for (const ByteWrite& w : writes) {
      const uint64_t lo = std::max(w.offset, at);
      const uint64_t hi = std::min<uint64_t>(w.offset + w.bytes.size(), at + data.size());
      if (lo < hi)
        data.replace(
            static_cast<size_t>(lo - at), static_cast<size_t>(hi - lo),
            w.bytes.substr(static_cast<size_t>(lo - w.offset), static_cast<size_t>(hi - lo)));
    }
    PMINDEX_RETURN_IF_ERROR(tx.Put(k, data));
    written.fetch_add(1, std::memory_order_relaxed);
  }
  // The prefix: the old one, grown and patched as the value is.
  std::string prefix = h.prefix;
  prefix.resize(static_cast<size_t>(std::min<uint64_t>(size, chunk_codec::kPrefixBytes)), '\0');
  for (const ByteWrite& w : writes) {
    if (w.offset >= prefix.size()) continue;
    const size_t n =
        std::min<size_t>(w.bytes.size(), prefix.size() - static_cast<size_t>(w.offset));
    prefix.replace(static_cast<size_t>(w.offset), n, w.bytes.substr(0, n));
  }
  return tx.Put(stored_key, chunk_codec::EncodeHeadOf(size, prefix, h.gen, h.slot, h.piece_bytes));
}

}  // namespace

std::string Databases::NamespacePrefix(uint32_t ns) {
  std::string p;
  PutBigEndian32(ns, &p);
  return p;
}

std::string Databases::Encode(uint32_t ns, std::string_view key) {
  return std::string(StoredKey(ns, key).view());
}

Databases::StoredKey::StoredKey(uint32_t ns, std::string_view key)
    : data_(inline_), size_(kHeaderBytes + key.size()) {
  if (key.size() > kInlineBytes) {
    heap_ = std::make_unique_for_overwrite<char[]>(size_);
    data_ = heap_.get();
  }
  for (int i = 0; i < 4; ++i) data_[i] = static_cast<char>((ns >> (8 * (3 - i))) & 0xff);
  const uint16_t slot = KeySlot(key);
  data_[4] = static_cast<char>(slot >> 8);
  data_[5] = static_cast<char>(slot & 0xff);
  data_[6] = static_cast<char>(kKindItem);
  if (!key.empty()) std::memcpy(data_ + kHeaderBytes, key.data(), key.size());
}

std::string Databases::EncodeTable(const Table& t) {
  std::string v(kTableMagic);
  PutLittle32(kTableFormat, &v);
  PutLittle32(t.next_ns, &v);
  PutLittle32(static_cast<uint32_t>(t.ns.size()), &v);
  for (uint32_t ns : t.ns) PutLittle32(ns, &v);
  PutLittle32(static_cast<uint32_t>(t.garbage.size()), &v);
  for (uint32_t ns : t.garbage) PutLittle32(ns, &v);
  return v;
}

Status Databases::DecodeTable(std::string_view v, Table* t) {
  auto bad = [](const char* what) {
    return Status::Corruption(std::string("pmserver's table of databases is damaged: ") + what);
  };
  size_t pos = kTableMagic.size();
  uint32_t format = 0, n = 0, g = 0;
  if (!GetLittle32(v, &pos, &format) || format != kTableFormat) return bad("unknown format");
  if (!GetLittle32(v, &pos, &t->next_ns) || !GetLittle32(v, &pos, &n) || n == 0 ||
      n > static_cast<uint32_t>(kMaxDatabases))
    return bad("header");
  t->ns.resize(n);
  for (uint32_t& ns : t->ns)
    if (!GetLittle32(v, &pos, &ns)) return bad("truncated");
  if (!GetLittle32(v, &pos, &g) || g > (v.size() - pos) / 4) return bad("garbage list");
  t->garbage.resize(g);
  for (uint32_t& ns : t->garbage)
    if (!GetLittle32(v, &pos, &ns)) return bad("truncated");
  if (pos != v.size()) return bad("trailing bytes");
  std::set<uint32_t> seen;
  for (const auto* list : {&t->ns, &t->garbage}) {
    for (uint32_t ns : *list) {
      if (ns == 0 || ns >= t->next_ns || !seen.insert(ns).second)
        return bad("namespace out of range");
    }
  }
  return Status::OK();
}

// ---------------------------------------------------------------- views

// Database i's Store: translates keys and delegates to the base store,
// each call inside an epoch guard. A value that needs pieces
// (chunked_values.h) is written, replaced and removed in a transaction of
// the base store; so is any write over a head, and every write first reads
// what it replaces (to know whether that is a head).
class Databases::View final : public Store {
 public:
  View(Databases& dbs, int i) : dbs_(dbs), i_(static_cast<size_t>(i)) {}

  size_t max_key_bytes() const override { return dbs_.base_.max_key_bytes() - kHeaderBytes; }
  size_t max_value_bytes() const override { return kMaxValueBytes; }

  Result<StoredValue> Get(std::string_view key) override {
    OpEpochs::Guard g = dbs_.epochs_.Enter();
    const uint32_t ns = Ns();
    return ReadWhole(ns, StoredKey(ns, key));
  }
  // A head's value is its prefix (chunked_values.h), its pieces unread.
  Result<StoredValue> Peek(std::string_view key) override {
    static_assert(chunk_codec::kPrefixBytes >= kPeekBytes);
    OpEpochs::Guard g = dbs_.epochs_.Enter();
    Result<StoredValue> r = base().Get(StoredKey(Ns(), key));
    if (r.ok() && chunk_codec::IsHead(r->value)) {
      chunk_codec::Head h;
      if (!chunk_codec::DecodeHead(r->value, &h))
        return Status::Corruption("a large value's head record does not decode");
      r->value = std::move(h.prefix);
    }
    return r;
  }
  // A head's bytes from the pieces they are in only.
  Result<StoredPart> GetPart(std::string_view key, HeaderBytesFn header, uint64_t offset,
                             uint64_t length) override {
    OpEpochs::Guard g = dbs_.epochs_.Enter();
    const uint32_t ns = Ns();
    const StoredKey k(ns, key);
    Result<StoredValue> r = base().Get(k);
    if (!r.ok()) return r.status();
    if (!chunk_codec::IsHead(r->value))
      return CutPart(r->value, r->version, header, offset, length);
    return ReadHeadConsistently<StoredPart>(
        k, [&](const StoredValue& cur, const RangeFn& range) -> Result<StoredPart> {
          if (!chunk_codec::IsHead(cur.value))
            return CutPart(cur.value, cur.version, header, offset, length);
          return ReadPartOfHead(cur.value, cur.version, ns, range, dbs_.pieces_read_, header,
                                offset, length);
        });
  }
  Result<WriteOutcome> PatchIfVersion(std::string_view key, uint64_t version,
                                      const std::vector<ByteWrite>& writes) override;
  Status Put(std::string_view key, std::string_view value) override {
    return Write(key, &value, Cond::kNone, 0).status();
  }
  Status PutMany(const std::vector<std::pair<std::string_view, std::string_view>>& pairs) override {
    // One transaction: each pair replaces what its key holds (a head's
    // generation garbage-listed), all or none.
    for (;;) {
      OpEpochs::Guard g = dbs_.epochs_.Enter();
      const uint32_t ns = Ns();
      std::unique_ptr<StoreTransaction> tx = base().Begin();
      if (tx == nullptr) return Status::NotSupported("the store has no transactions");
      Status s = Status::OK();
      for (const auto& [k, v] : pairs) {
        const StoredKey stored(ns, k);
        Result<StoredValue> cur = tx->Get(stored);
        if (!cur.ok() && !cur.status().is_not_found()) {
          s = cur.status();
          break;
        }
        s = ReplaceInTransaction(*tx, dbs_, base().max_value_bytes(), ns, stored, k, &v,
                                 cur.ok() ? &cur->value : nullptr);
        if (!s.ok()) break;
      }
      if (s.ok()) s = tx->Commit();
      if (!s.is_aborted()) return s;
    }
  }
  Result<WriteOutcome> PutIfAbsent(std::string_view key, std::string_view value) override {
    return Write(key, &value, Cond::kAbsent, 0);
  }
  Result<WriteOutcome> PutIfVersion(std::string_view key, std::string_view value,
                                    uint64_t version) override {
    return Write(key, &value, Cond::kVersion, version);
  }
  // One read of the key, not Store's Peek then a conditional write's read.
  Result<WriteOutcome> PutUnless(std::string_view key, std::string_view value,
                                 const PrefixTest& refuse) override {
    return Write(key, &value, Cond::kNone, 0, &refuse);
  }
  Result<WriteOutcome> Remove(std::string_view key) override {
    return Write(key, nullptr, Cond::kNone, 0);
  }
  Result<WriteOutcome> RemoveIfVersion(std::string_view key, uint64_t version) override {
    return Write(key, nullptr, Cond::kVersion, version);
  }
  using Store::Range;
  size_t Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out) override {
    OpEpochs::Guard g = dbs_.epochs_.Enter();
    const uint32_t ns = Ns();
    const size_t first = out->size();
    size_t n =
        RangeOfNamespace(ns, from, to, limit, out,
                         [this](std::string_view f, std::optional<std::string_view> t, size_t l,
                                std::vector<std::pair<std::string, std::string>>* o) {
                           return base().Range(f, t, l, o);
                         });
    // Heads become their values; one whose value is gone by now (replaced
    // or removed since the range was read) is read again, or left out.
    for (size_t i = first; i < out->size();) {
      auto& [k, v] = (*out)[i];
      if (chunk_codec::IsHead(v)) {
        Result<StoredValue> whole = ReadWhole(ns, StoredKey(ns, k));
        if (!whole.ok()) {
          out->erase(out->begin() + static_cast<std::ptrdiff_t>(i));
          --n;
          continue;
        }
        v = std::move(whole->value);
      }
      ++i;
    }
    return n;
  }
  Status RemoveAll() override { return dbs_.Flush(static_cast<int>(i_)); }
  StoreInfo Info() override {
    StoreInfo info = base().Info();
    if (info.keys > 0) --info.keys;  // the table
    return info;
  }
  std::unique_ptr<StoreTransaction> Begin() override;

 private:
  enum class Cond : uint8_t { kNone, kAbsent, kVersion };

  Store& base() { return dbs_.base_; }
  uint32_t Ns() const { return dbs_.live_ns_[i_].load(std::memory_order_acquire); }

  // Runs `read` on the record at stored key `k` (of this view's
  // namespace) inside a transaction of the base store, with that
  // transaction's range reads, and commits it to validate the record: so
  // a head's pieces read are the ones of the head read, even while a
  // patch rewrites pieces in place (chunked_values.h). Run again on a
  // conflict. A head whose pieces are missing at a validated read is
  // Corruption.
  template <class T>
  Result<T> ReadHeadConsistently(
      std::string_view k,
      const std::function<Result<T>(const StoredValue& cur, const RangeFn& range)>& read) {
    for (;;) {
      std::unique_ptr<StoreTransaction> tx = base().Begin();
      if (tx == nullptr) return Status::NotSupported("the store has no transactions");
      Result<StoredValue> cur = tx->Get(k);
      if (!cur.ok()) {
        if (cur.status().is_aborted()) continue;
        return cur.status();
      }
      const RangeFn range = [&tx](std::string_view f, std::optional<std::string_view> t, size_t l,
                                  std::vector<std::pair<std::string, std::string>>* o) {
        return tx->Range(f, t, l, o);
      };
      Result<T> out = read(*cur, range);
      if (!out.ok() && !out.status().is_not_found()) return out.status();
      Status s = tx->Commit();
      if (s.is_aborted()) continue;
      if (!s.ok()) return s;
      if (!out.ok()) return Status::Corruption("a large value's pieces are missing");
      return out;
    }
  }

  // The value at stored key `k`, a head's assembled from its pieces.
  Result<StoredValue> ReadWhole(uint32_t ns, std::string_view k) {
    Result<StoredValue> r = base().Get(k);
    if (!r.ok() || !chunk_codec::IsHead(r->value)) return r;
    return ReadHeadConsistently<StoredValue>(
        k, [&](const StoredValue& cur, const RangeFn& range) -> Result<StoredValue> {
          if (!chunk_codec::IsHead(cur.value)) return cur;
          Result<std::string> whole = ReadPieces(cur.value, ns, range, dbs_.pieces_read_);
          if (!whole.ok()) return whole.status();
          return StoredValue{std::move(*whole), cur.version};
        });
  }

  // Every write: `value` nullptr removes. kAbsent: only if the key is
  // absent (else kPresent); kVersion: only if its version is `version`
  // (else kAbsent or kChanged); `refuse`: not if it accepts the present
  // value's first bytes (then kPresent). Neither the old nor the new value in
  // pieces: one conditional write of the base store on what was read;
  // else a transaction. Either is repeated if the key changed between the
  // read and the write.
  Result<WriteOutcome> Write(std::string_view key, const std::string_view* value, Cond cond,
                             uint64_t version, const PrefixTest* refuse = nullptr) {
    OpEpochs::Guard g = dbs_.epochs_.Enter();
    const uint32_t ns = Ns();
    const StoredKey k(ns, key);
    const size_t max = base().max_value_bytes();
    if (value != nullptr && value->size() > kMaxValueBytes)
      return Status::InvalidArgument("the value is too large");
    if (value != nullptr && cond == Cond::kNone && !chunk_codec::NeedsPieces(*value, max)) {
      // One look and the write, unless the key holds a head (its pieces go
      // in a transaction, below) or a value `refuse` accepts.
      bool head = false;
      Result<WriteOutcome> w =
          base().PutUnless(k, *value, [&](std::optional<std::string_view> old) {
            head = old && chunk_codec::IsHead(*old);
            if (refuse == nullptr) return head;
            if (!old) return (*refuse)(std::nullopt);
            return (*refuse)(ExpiryView(*old)) || head;
          });
      if (!w.ok() || *w == WriteOutcome::kDone || !head) return w;
    }
    for (;;) {
      Result<StoredValue> cur = base().Get(k);
      if (!cur.ok() && !cur.status().is_not_found()) return cur.status();
      const bool present = cur.ok();
      if (cond == Cond::kAbsent && present) return WriteOutcome::kPresent;
      if (cond == Cond::kVersion && !present) return WriteOutcome::kAbsent;
      if (cond == Cond::kVersion && cur->version != version) return WriteOutcome::kChanged;
      if (value == nullptr && !present) return WriteOutcome::kAbsent;
      if (refuse != nullptr && !present) (*refuse)(std::nullopt);
      if (refuse != nullptr && present && (*refuse)(ExpiryView(cur->value)))
        return WriteOutcome::kPresent;
      if (!(present && chunk_codec::IsHead(cur->value)) &&
          !(value != nullptr && chunk_codec::NeedsPieces(*value, max))) {
        Result<WriteOutcome> w = value == nullptr ? base().RemoveIfRead(k, *cur)
                                 : present        ? base().PutIfRead(k, *value, *cur)
                                                  : base().PutIfAbsent(k, *value);
        if (!w.ok() || *w == WriteOutcome::kDone) return w;
        continue;
      }
      std::unique_ptr<StoreTransaction> tx = base().Begin();
      if (tx == nullptr) return Status::NotSupported("the store has no transactions");
      Result<StoredValue> now = tx->Get(k);
      if (!now.ok() && !now.status().is_not_found()) {
        if (now.status().is_aborted()) continue;
        return now.status();
      }
      if (now.ok() != present || (present && now->version != cur->version)) continue;
      Status s =
          ReplaceInTransaction(*tx, dbs_, max, ns, k, key, value, present ? &now->value : nullptr);
      if (s.ok()) s = tx->Commit();
      if (s.ok()) return WriteOutcome::kDone;
      if (!s.is_aborted()) return s;
    }
  }

  Databases& dbs_;
  const size_t i_;
};

// Neither the old nor the new value in pieces: one conditional write of
// the base store; else a transaction (PatchInTransaction) on the record
// read, which must still be of `version`.
Result<WriteOutcome> Databases::View::PatchIfVersion(std::string_view key, uint64_t version,
                                                     const std::vector<ByteWrite>& writes) {
  OpEpochs::Guard g = dbs_.epochs_.Enter();
  const uint32_t ns = Ns();
  const StoredKey k(ns, key);
  const size_t max = base().max_value_bytes();
  for (;;) {
    Result<StoredValue> cur = base().Get(k);
    if (!cur.ok()) {
      if (cur.status().is_not_found()) return WriteOutcome::kAbsent;
      return cur.status();
    }
    if (cur->version != version) return WriteOutcome::kChanged;
    const bool head = chunk_codec::IsHead(cur->value);
    if (!head && PatchedSize(cur->value.size(), writes) <= max) {
      std::string v = std::move(cur->value);
      ApplyWrites(&v, writes);
      if (!chunk_codec::NeedsPieces(v, max)) return base().PutIfVersion(k, v, version);
    }
    std::unique_ptr<StoreTransaction> tx = base().Begin();
    if (tx == nullptr) return Status::NotSupported("the store has no transactions");
    Result<StoredValue> now = tx->Get(k);
    if (!now.ok()) {
      if (now.status().is_aborted()) continue;
      if (now.status().is_not_found()) return WriteOutcome::kAbsent;
      return now.status();
    }
    if (now->version != version) return WriteOutcome::kChanged;
    Status s = PatchInTransaction(*tx, dbs_, max, ns, k, key, now->value, writes, dbs_.pieces_read_,
                                  dbs_.pieces_written_);
    if (s.ok()) s = tx->Commit();
    if (s.ok()) return WriteOutcome::kDone;
    if (!s.is_aborted()) return s;
  }
}

// One database's view of a DbTransaction's underlying transaction; values
// in pieces as the database's view stores them.
class DbTransaction::View final : public StoreTransaction {
 public:
  View(DbTransaction& t, int i) : t_(t), i_(i) {}

  Result<StoredValue> Get(std::string_view key) override {
    Result<StoredValue> r = tx().Get(Key(key));
    if (!r.ok() || !chunk_codec::IsHead(r->value)) return r;
    Result<std::string> whole = ReadPieces(r->value, t_.ns(i_), Reader(), t_.dbs_.pieces_read_);
    // The snapshot holds every piece of every head it holds.
    if (!whole.ok())
      return whole.status().is_not_found()
                 ? Status::Corruption("a large value's pieces are missing")
                 : whole.status();
    return StoredValue{std::move(*whole), r->version};
  }
  // The snapshot holds every piece of every head it holds.
  Result<StoredPart> GetPart(std::string_view key, HeaderBytesFn header, uint64_t offset,
                             uint64_t length) override {
    Result<StoredValue> r = tx().Get(Key(key));
    if (!r.ok()) return r.status();
    if (!chunk_codec::IsHead(r->value))
      return CutPart(r->value, r->version, header, offset, length);
    Result<StoredPart> p = ReadPartOfHead(r->value, r->version, t_.ns(i_), Reader(),
                                          t_.dbs_.pieces_read_, header, offset, length);
    if (!p.ok() && p.status().is_not_found())
      return Status::Corruption("a large value's pieces are missing");
    return p;
  }
  Result<WriteOutcome> PatchIfVersion(std::string_view key, uint64_t version,
                                      const std::vector<ByteWrite>& writes) override {
    const Databases::StoredKey k = Key(key);
    Result<StoredValue> cur = tx().Get(k);
    if (!cur.ok()) {
      if (cur.status().is_not_found()) return WriteOutcome::kAbsent;
      return cur.status();
    }
    if (cur->version != version) return WriteOutcome::kChanged;
    PMINDEX_RETURN_IF_ERROR(PatchInTransaction(tx(), t_.dbs_, t_.dbs_.base_.max_value_bytes(),
                                               t_.ns(i_), k, key, cur->value, writes,
                                               t_.dbs_.pieces_read_, t_.dbs_.pieces_written_));
    return WriteOutcome::kDone;
  }
  Status Put(std::string_view key, std::string_view value) override {
    return Replace(key, &value).status();
  }
  Result<WriteOutcome> Remove(std::string_view key) override { return Replace(key, nullptr); }
  size_t Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out) override {
    const size_t first = out->size();
    size_t n = RangeOfNamespace(t_.ns(i_), from, to, limit, out, Reader());
    for (size_t i = first; i < out->size();) {
      auto& [k, v] = (*out)[i];
      if (chunk_codec::IsHead(v)) {
        Result<std::string> whole = ReadPieces(v, t_.ns(i_), Reader(), t_.dbs_.pieces_read_);
        if (!whole.ok()) {
          out->erase(out->begin() + static_cast<std::ptrdiff_t>(i));
          --n;
          continue;
        }
        v = std::move(*whole);
      }
      ++i;
    }
    return n;
  }
  // A view commits or aborts the whole transaction.
  Status Commit() override { return t_.Commit(); }
  void Abort() override { t_.Abort(); }

 private:
  StoreTransaction& tx() { return *t_.tx_; }
  Databases::StoredKey Key(std::string_view key) const { return {t_.ns(i_), key}; }
  RangeFn Reader() {
    return [this](std::string_view f, std::optional<std::string_view> t, size_t l,
                  std::vector<std::pair<std::string, std::string>>* o) {
      return tx().Range(f, t, l, o);
    };
  }
  // Writes `value` (nullptr: removes) in place of what the key holds.
  Result<WriteOutcome> Replace(std::string_view key, const std::string_view* value) {
    if (value != nullptr && value->size() > Databases::kMaxValueBytes)
      return Status::InvalidArgument("the value is too large");
    const Databases::StoredKey k = Key(key);
    Result<StoredValue> cur = tx().Get(k);
    if (!cur.ok() && !cur.status().is_not_found()) return cur.status();
    if (value == nullptr && !cur.ok()) return WriteOutcome::kAbsent;
    PMINDEX_RETURN_IF_ERROR(ReplaceInTransaction(tx(), t_.dbs_, t_.dbs_.base_.max_value_bytes(),
                                                 t_.ns(i_), k, key, value,
                                                 cur.ok() ? &cur->value : nullptr));
    return WriteOutcome::kDone;
  }

  DbTransaction& t_;
  const int i_;
};

namespace {
// A transaction of one database that owns its DbTransaction.
class SingleDbTransaction final : public StoreTransaction {
 public:
  SingleDbTransaction(std::unique_ptr<DbTransaction> t, int i) : t_(std::move(t)), v_(t_->db(i)) {}
  Result<StoredValue> Get(std::string_view key) override { return v_.Get(key); }
  Result<StoredPart> GetPart(std::string_view key, HeaderBytesFn header, uint64_t offset,
                             uint64_t length) override {
    return v_.GetPart(key, header, offset, length);
  }
  Result<WriteOutcome> PatchIfVersion(std::string_view key, uint64_t version,
                                      const std::vector<ByteWrite>& writes) override {
    return v_.PatchIfVersion(key, version, writes);
  }
  Status Put(std::string_view key, std::string_view value) override { return v_.Put(key, value); }
  Result<WriteOutcome> Remove(std::string_view key) override { return v_.Remove(key); }
  size_t Range(std::string_view from, std::optional<std::string_view> to, size_t limit,
               std::vector<std::pair<std::string, std::string>>* out) override {
    return v_.Range(from, to, limit, out);
  }
  Status Commit() override { return t_->Commit(); }
  void Abort() override { t_->Abort(); }

 private:
  std::unique_ptr<DbTransaction> t_;
  StoreTransaction& v_;
};
}  // namespace

std::unique_ptr<StoreTransaction> Databases::View::Begin() {
  return std::make_unique<SingleDbTransaction>(dbs_.Begin(), static_cast<int>(i_));
}

DbTransaction::DbTransaction(Databases& dbs, OpEpochs::Guard guard, std::vector<uint32_t> ns,
                             std::unique_ptr<StoreTransaction> tx)
    : dbs_(dbs), guard_(std::move(guard)), ns_(std::move(ns)), tx_(std::move(tx)) {
  views_.resize(ns_.size());
}

DbTransaction::~DbTransaction() {
  if (tx_ != nullptr) tx_->Abort();
}

StoreTransaction& DbTransaction::db(int i) {
  std::unique_ptr<View>& v = views_[static_cast<size_t>(i)];
  if (v == nullptr) v = std::make_unique<View>(*this, i);
  return *v;
}

Status DbTransaction::StartTableChange() {
  if (table_changed_) return Status::OK();
  sync::MutexLock lock(dbs_.meta_mu_);
  for (size_t i = 0; i < ns_.size(); ++i) {
    if (dbs_.table_.ns[i] != ns_[i])
      return Status::Aborted("the databases changed since the transaction began");
  }
  table_changed_ = true;
  next_ns_ = dbs_.table_.next_ns;
  table_ns_ = dbs_.table_.ns;
  garbage_ = dbs_.table_.garbage;
  installs_at_copy_ = dbs_.installs_;
  return Status::OK();
}

Status DbTransaction::Flush(int i) {
  PMINDEX_RETURN_IF_ERROR(StartTableChange());
  const auto k = static_cast<size_t>(i);
  garbage_.push_back(table_ns_[k]);
  table_ns_[k] = next_ns_++;
  ns_[k] = table_ns_[k];
  return Status::OK();
}

Status DbTransaction::FlushAll() {
  PMINDEX_RETURN_IF_ERROR(StartTableChange());
  for (size_t k = 0; k < table_ns_.size(); ++k) {
    garbage_.push_back(table_ns_[k]);
    table_ns_[k] = next_ns_++;
    if (k < ns_.size()) ns_[k] = table_ns_[k];
  }
  return Status::OK();
}

Status DbTransaction::Swap(int i, int j) {
  PMINDEX_RETURN_IF_ERROR(StartTableChange());
  std::swap(table_ns_[static_cast<size_t>(i)], table_ns_[static_cast<size_t>(j)]);
  std::swap(ns_[static_cast<size_t>(i)], ns_[static_cast<size_t>(j)]);
  return Status::OK();
}

Status DbTransaction::Commit() {
  if (!table_changed_) {
    Status s = tx_->Commit();
    guard_.Release();
    return s;
  }
  // The table is written with the rest, and published before any other
  // table change can be made (meta_mu_), so the two cannot cross.
  sync::MutexLock lock(dbs_.meta_mu_);
  Databases::Table next{next_ns_, table_ns_, garbage_};
  Status s = dbs_.installs_ != installs_at_copy_
                 ? Status::Aborted("the databases changed since the transaction began")
                 : tx_->Put(Databases::kTableKey, Databases::EncodeTable(next));
  if (s.ok()) s = tx_->Commit();
  if (s.ok()) dbs_.Publish(std::move(next));
  if (!s.ok()) tx_->Abort();
  guard_.Release();
  return s;
}

void DbTransaction::Abort() {
  tx_->Abort();
  guard_.Release();
}

// ---------------------------------------------------------------- Databases

Databases::Databases(Store& base, int count, Table table)
    : counted_(std::make_unique<KeyCountingStore>(base)),
      base_(*counted_),
      count_(count),
      table_(std::move(table)) {
  served_ = table_.ns.size();
  live_ns_ = std::make_unique<std::atomic<uint32_t>[]>(served_);
  for (size_t i = 0; i < served_; ++i) live_ns_[i].store(table_.ns[i]);
  for (int i = 0; i < count_; ++i) views_.push_back(std::make_unique<View>(*this, i));
}

Databases::~Databases() = default;

Store& Databases::db(int i) { return *views_[static_cast<size_t>(i)]; }

Result<std::unique_ptr<Databases>> Databases::Open(Store& base, int count) {
  if (count < 1 || count > kMaxDatabases)
    return Status::InvalidArgument("the number of databases is 1 to " +
                                   std::to_string(kMaxDatabases));
  if (base.max_key_bytes() <= kHeaderBytes)
    return Status::InvalidArgument("the store's keys are too short");
  Table table;
  Result<StoredValue> stored = base.Get(kTableKey);
  if (stored.ok()) {
    if (!stored->value.starts_with(kTableMagic)) {
      return Status::NotSupported(
          "the pool holds keys stored without databases (written by an older pmserver); this "
          "pmserver would not see them: serve it with the pmserver that wrote it");
    }
    PMINDEX_RETURN_IF_ERROR(DecodeTable(stored->value, &table));
  } else if (!stored.status().is_not_found()) {
    return stored.status();
  } else {
    std::vector<std::pair<std::string, std::string>> any;
    if (base.Range("", 1, &any) > 0) {
      return Status::NotSupported(
          "the pool holds keys stored without databases (written by an older pmserver); this "
          "pmserver would not see them: serve it with the pmserver that wrote it");
    }
  }
  const bool grow = table.ns.size() < static_cast<size_t>(count);
  while (table.ns.size() < static_cast<size_t>(count)) table.ns.push_back(table.next_ns++);
  if (grow) PMINDEX_RETURN_IF_ERROR(base.Put(kTableKey, EncodeTable(table)));
  std::unique_ptr<Databases> dbs(new Databases(base, count, std::move(table)));
  // The key counters start from one walk of each served database.
  for (size_t i = 0; i < dbs->served_; ++i) {
    const int db = static_cast<int>(i);
    dbs->counted_->Set(dbs->ns(db), dbs->CountByWalk(db));
  }
  return dbs;
}

Status Databases::Install(Table next) {
  // Durable first: once an operation can see a namespace, a restart sees
  // it too.
  PMINDEX_RETURN_IF_ERROR(base_.Put(kTableKey, EncodeTable(next)));
  Publish(std::move(next));
  return Status::OK();
}

void Databases::Publish(Table next) {
  ++installs_;
  table_ = std::move(next);
  seq_.fetch_add(1, std::memory_order_acq_rel);  // odd: changing
  for (size_t i = 0; i < served_; ++i) live_ns_[i].store(table_.ns[i], std::memory_order_release);
  seq_.fetch_add(1, std::memory_order_acq_rel);
}

std::vector<uint32_t> Databases::Snapshot() const {
  std::vector<uint32_t> ns(static_cast<size_t>(count_));
  for (;;) {
    const uint64_t before = seq_.load(std::memory_order_acquire);
    if (before & 1) {
      std::this_thread::yield();
      continue;
    }
    // Acquire loads: the check of seq_ below cannot move before them, and
    // a value Install stored makes its first increment of seq_ visible.
    for (size_t i = 0; i < ns.size(); ++i) ns[i] = live_ns_[i].load(std::memory_order_acquire);
    if (seq_.load(std::memory_order_acquire) == before) return ns;
  }
}

Status Databases::Flush(int i) {
  sync::MutexLock lock(meta_mu_);
  Table next = table_;
  next.garbage.push_back(next.ns[static_cast<size_t>(i)]);
  next.ns[static_cast<size_t>(i)] = next.next_ns++;
  return Install(std::move(next));
}

Status Databases::FlushAll() {
  sync::MutexLock lock(meta_mu_);
  Table next = table_;
  for (uint32_t& ns : next.ns) {
    next.garbage.push_back(ns);
    ns = next.next_ns++;
  }
  return Install(std::move(next));
}

Status Databases::Swap(int i, int j) {
  sync::MutexLock lock(meta_mu_);
  Table next = table_;
  std::swap(next.ns[static_cast<size_t>(i)], next.ns[static_cast<size_t>(j)]);
  return Install(std::move(next));
}

// Pairs one step of a walk holds (values included: at most 64 MiB of
// them, at the store's 1 MiB value limit).
constexpr size_t kWalkBatch = 64;

KeyCounts Databases::CountByWalk(int i) {
  OpEpochs::Guard g = epochs_.Enter();
  const uint32_t ns = this->ns(i);
  std::string from = NamespacePrefix(ns);
  const std::string end = ItemsEnd(ns);
  KeyCounts n;
  std::vector<std::pair<std::string, std::string>> batch;
  for (;;) {
    batch.clear();
    const size_t got = base_.Range(from, end, kWalkBatch, &batch);
    for (const auto& kv : batch) {
      uint32_t kns = 0;
      if (!KeyCountingStore::IsKeyRecord(kv.first, &kns)) continue;
      ++n.keys;
      n.expires += KeyCountingStore::HasExpiry(kv.second);
    }
    if (got < kWalkBatch) return n;
    from = batch.back().first;
    from.push_back('\0');
  }
}

std::unique_ptr<DbTransaction> Databases::Begin() {
  OpEpochs::Guard g = epochs_.Enter();
  std::vector<uint32_t> ns = Snapshot();
  return std::unique_ptr<DbTransaction>(
      new DbTransaction(*this, std::move(g), std::move(ns), base_.Begin()));
}

bool Databases::reclaim_pending() {
  sync::MutexLock lock(meta_mu_);
  return !table_.garbage.empty();
}

size_t Databases::ReclaimStep(size_t budget) {
  sync::MutexLock rlock(reclaim_mu_);
  uint32_t ns = 0;
  {
    sync::MutexLock lock(meta_mu_);
    if (table_.garbage.empty()) return 0;
    ns = table_.garbage.front();
  }
  if (quiesced_.count(ns) == 0) {
    // Operations that read the namespace before it became garbage may
    // still write into it; after this, none can.
    epochs_.Synchronize();
    quiesced_.insert(ns);
  }
  std::vector<std::pair<std::string, std::string>> batch;
  const std::optional<std::string> end = NamespaceEnd(ns);
  base_.Range(NamespacePrefix(ns), end ? std::optional<std::string_view>(*end) : std::nullopt,
              std::max<size_t>(budget, 1), &batch);
  size_t removed = 0;
  // A garbage namespace's keys are not counted any more.
  Store& uncounted = counted_->uncounted();
  for (const auto& kv : batch) {
    Result<WriteOutcome> r = uncounted.Remove(kv.first);
    if (!r.ok()) return removed;  // the store failed: try again at the next step
    removed += *r == WriteOutcome::kDone;
  }
  if (batch.empty()) {
    sync::MutexLock lock(meta_mu_);
    Table next = table_;
    std::erase(next.garbage, ns);
    if (Install(std::move(next)).ok()) {
      quiesced_.erase(ns);
      counted_->Drop(ns);
    }
  }
  return removed;
}

size_t Databases::ExpireStep(size_t budget, const std::function<bool(std::string_view)>& expired) {
  sync::MutexLock lock(expire_mu_);
  const std::vector<uint32_t> live = Snapshot();
  size_t examined = 0, removed = 0;
  std::vector<std::pair<std::string, std::string>> batch;
  while (examined < budget) {
    batch.clear();
    const size_t want = budget - examined;
    const size_t n = base_.Range(expire_cursor_, want, &batch);
    bool skipped = false;
    for (const auto& [k, v] : batch) {
      ++examined;
      const uint32_t ns = k.size() >= kHeaderBytes ? GetBigEndian32(k) : 0;
      if (std::find(live.begin(), live.end(), ns) == live.end()) {
        // The table or a garbage namespace (ReclaimStep's): go on after it.
        if (ns == UINT32_MAX) {
          expire_cursor_.clear();
          return removed;
        }
        expire_cursor_ = NamespacePrefix(ns + 1);
        skipped = true;
        break;
      }
      if (static_cast<uint8_t>(k[4]) >= (collection_keys::kElementRegion >> 8)) {
        // The namespace's element and garbage regions: no items there.
        if (ns == UINT32_MAX) {
          expire_cursor_.clear();
          return removed;
        }
        expire_cursor_ = NamespacePrefix(ns + 1);
        skipped = true;
        break;
      }
      uint32_t kns = 0;
      std::string_view key;
      if (!Split(k, &kns, &key) || !expired(ExpiryView(v))) continue;
      if (collection_codec::IsCollection(v) || chunk_codec::IsHead(v)) {
        removed += ExpireCollection(k, expired);
        continue;
      }
      // Examined again with its version: only that version is removed.
      Result<StoredValue> cur = base_.Get(k);
      if (!cur.ok() || !expired(cur->value)) continue;
      Result<WriteOutcome> r = base_.RemoveIfVersion(k, cur->version);
      removed += r.ok() && *r == WriteOutcome::kDone;
    }
    if (skipped) continue;
    if (n < want) {
      expire_cursor_.clear();  // the end: the next call starts over
      return removed;
    }
    expire_cursor_ = batch.back().first;
    if (!KeySuccessor(&expire_cursor_, base_.max_key_bytes())) expire_cursor_.clear();
  }
  return removed;
}

size_t Databases::SlotKeys(int i, uint16_t slot, std::string_view after, size_t limit,
                           std::vector<std::string>* keys) {
  OpEpochs::Guard g = epochs_.Enter();
  std::string prefix = NamespacePrefix(ns(i));
  prefix.push_back(static_cast<char>(slot >> 8));
  prefix.push_back(static_cast<char>(slot & 0xff));
  std::string lo = prefix;
  lo.push_back(static_cast<char>(kKindItem));
  lo.append(after);
  if (!after.empty()) lo.push_back('\0');
  std::string hi = prefix;
  hi.push_back(static_cast<char>(kKindItem + 1));
  size_t added = 0;
  std::vector<std::pair<std::string, std::string>> batch;
  while (added < limit) {
    batch.clear();
    const size_t want = limit - added;
    const size_t n = base_.Range(lo, hi, want, &batch);
    for (const auto& kv : batch) {
      keys->push_back(kv.first.substr(kHeaderBytes));
      ++added;
    }
    if (n < want || batch.empty()) break;
    lo = batch.back().first;
    lo.push_back('\0');
  }
  return added;
}

size_t Databases::ExpireCollection(std::string_view stored_key,
                                   const std::function<bool(std::string_view value)>& expired) {
  // One transaction: the metadata goes and its generation is
  // garbage-listed together, only if the record is still the expired one.
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::unique_ptr<StoreTransaction> tx = base_.Begin();
    if (tx == nullptr) return 0;
    Result<StoredValue> cur = tx->Get(stored_key);
    if (!cur.ok() || !expired(ExpiryView(cur->value))) return 0;
    uint64_t gen = 0;
    uint16_t slot = 0;
    CollectionMeta m;
    chunk_codec::Head h;
    if (collection_codec::Decode(cur->value, &m)) {
      gen = m.gen;
      slot = m.slot;
    } else if (chunk_codec::DecodeHead(cur->value, &h)) {
      gen = h.gen;
      slot = h.slot;
    } else {
      return 0;
    }
    if (!tx->Remove(stored_key).ok()) continue;
    const uint32_t ns = GetBigEndian32(stored_key);
    if (!tx->Put(collection_keys::GarbageKey(ns, gen), collection_keys::GarbageValue(slot)).ok())
      continue;
    const Status s = tx->Commit();
    if (s.ok()) return 1;
    if (!s.is_aborted()) return 0;
  }
  return 0;
}

Result<uint64_t> Databases::NewGeneration() {
  sync::MutexLock lock(gen_mu_);
  if (gen_next_ == gen_limit_) {
    uint64_t start = gen_limit_;
    if (start == 0) {
      // First reservation since open: continue after what the store says.
      start = 1;
      Result<StoredValue> r = base_.Get(kGenerationKey);
      if (r.ok()) {
        if (r->value.size() != 8) return Status::Corruption("the generation counter is damaged");
        size_t pos = 0;
        uint32_t lo = 0, hi = 0;
        GetLittle32(r->value, &pos, &lo);
        GetLittle32(r->value, &pos, &hi);
        start = (static_cast<uint64_t>(hi) << 32) | lo;
        if (start == 0) return Status::Corruption("the generation counter is damaged");
      } else if (!r.status().is_not_found()) {
        return r.status();
      }
    }
    const uint64_t limit = start + kGenerationBlock;
    std::string v;
    PutLittle32(static_cast<uint32_t>(limit), &v);
    PutLittle32(static_cast<uint32_t>(limit >> 32), &v);
    // Durable before any number of the block is handed out.
    PMINDEX_RETURN_IF_ERROR(base_.Put(kGenerationKey, v));
    gen_next_ = start;
    gen_limit_ = limit;
  }
  return gen_next_++;
}

size_t Databases::ReclaimGarbageStep(size_t budget) {
  sync::MutexLock lock(garbage_mu_);
  budget = std::max<size_t>(budget, 1);
  const std::vector<uint32_t> live = Snapshot();
  size_t removed = 0;
  std::vector<std::pair<std::string, std::string>> records, batch;
  for (const uint32_t ns : live) {
    const std::string lo = collection_keys::GarbagePrefix(ns);
    std::string hi = lo;
    hi.back() = static_cast<char>(static_cast<uint8_t>(hi.back()) + 1);
    records.clear();
    base_.Range(lo, hi, 16, &records);
    for (const auto& [gk, gv] : records) {
      uint64_t gen = 0;
      uint16_t slot = 0;
      if (!collection_keys::DecodeGarbage(gk, gv, &gen, &slot)) {
        // Not a garbage record of this format: leave it to --verify.
        continue;
      }
      const std::string from = collection_keys::GenerationPrefix(ns, slot, gen);
      const std::string to = collection_keys::GenerationPrefix(ns, slot, gen + 1);
      batch.clear();
      const size_t want = budget - removed;
      const size_t n = base_.Range(from, to, want, &batch);
      for (const auto& kv : batch) {
        Result<WriteOutcome> r = base_.Remove(kv.first);
        if (!r.ok()) return removed;  // the store failed: try again at the next step
        removed += *r == WriteOutcome::kDone;
      }
      if (n < want) {
        // No element left: the generation is gone.
        Result<WriteOutcome> r = base_.Remove(gk);
        if (!r.ok()) return removed;
        removed += *r == WriteOutcome::kDone;
      }
      if (removed >= budget) return removed;
    }
  }
  return removed;
}

}  // namespace pmindex::server
