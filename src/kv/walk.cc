#include "kv/walk.h"

#include <atomic>
#include <cstdio>
#include <string>

#include "pm/pptr_decode.h"

namespace pmindex::kv {

std::string HexWord(uint64_t v) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(v));
  return hex;
}

namespace {

// A word other threads may store (head, stamp, older, commit).
uint64_t LoadWord(const uint64_t& w) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(w)).load(std::memory_order_acquire);
}

Status Bad(std::string_view what, uint64_t raw, std::string_view why) {
  return Status::Corruption("kv: " + std::string(what) + " " + HexWord(raw) + ": " + std::string(why));
}

class Walker {
 public:
  Walker(const Pool& pool, const WalkRules& rules, WalkSink& sink) : pool_(pool), rules_(rules), sink_(sink) {}

  Status Value(uint64_t prefix, uint64_t raw) {
    auto d = pm::Decode<const uint16_t>(pool_, raw, 16, 64, "kv: index value of prefix " + HexWord(prefix));
    if (!d.ok()) return d.status();
    const uint16_t tag = *d.value();
    if (tag == kRecordTag) return RecordAt(prefix, raw, nullptr, nullptr);
    if (tag == kBucketTag || tag == kDirectoryTag) {
      have_prev_ = false;
      uint64_t first = 0, first8 = 0;
      return NodeAt(prefix, raw, -1, &first, &first8);
    }
    return Bad("index value of prefix " + HexWord(prefix) + ", block", raw,
               "neither a record nor a bucket nor a directory");
  }

  uint64_t max_ts() const { return max_ts_; }

 private:
  // A node of a prefix's tree: a Bucket (want 0), a Directory of level
  // `want`, or the root (want -1: either, of any level, at least 2
  // entries). *first and *first8: the record of its smallest key and that
  // key's Next8, which its parent's entry must name. Keys ascend across the
  // whole tree (prev_).
  Status NodeAt(uint64_t prefix, uint64_t raw, int want, uint64_t* first, uint64_t* first8) {
    auto h = pm::Decode<const Directory>(pool_, raw, Directory::kHeaderBytes, 64, "kv: prefix tree node");
    if (!h.ok()) return h.status();
    const uint16_t tag = h.value()->tag;
    const uint32_t n = h.value()->count;
    const uint32_t least = want < 0 ? 2 : 1;
    if (tag == kBucketTag && want <= 0) return BucketAt(prefix, raw, least, first, first8);
    if (tag != kDirectoryTag || want == 0)
      return Bad("prefix tree node", raw, want == 0 ? "not a bucket below a level-1 directory" : "bad tag");
    const int level = h.value()->level;
    if (level < 1 || level > kMaxLevel || (want > 0 && level != want))
      return Bad("directory", raw, "bad level " + std::to_string(level));
    if (n < least || Directory::Bytes(n) > pool_.size())
      return Bad("directory", raw, "bad entry count " + std::to_string(n));
    auto d = pm::Decode<const Directory>(pool_, raw, Directory::Bytes(n), 64, "kv: directory");
    if (!d.ok()) return d.status();
    if (rules_.check_nodes && d.value()->check != NodeCheck(d.value(), Directory::Bytes(n)))
      return Bad("directory", raw, "check word does not match its contents");
    PMINDEX_RETURN_IF_ERROR(sink_.Block(PPtr(raw), Directory::Bytes(n)));
    if (rules_.content) sink_.Content(d.value(), Directory::kHeaderBytes);
    for (uint32_t i = 0; i < n; ++i) {
      const Directory::Entry e = d.value()->entries()[i];
      uint64_t f = 0, f8 = 0;
      PMINDEX_RETURN_IF_ERROR(NodeAt(prefix, e.child, level - 1, &f, &f8));
      if (f != e.first || f8 != e.next8)
        return Bad("directory", raw, "entry " + std::to_string(i) + " does not name its child's smallest key");
      if (i == 0) *first = f, *first8 = f8;
    }
    return Status::OK();
  }

  Status BucketAt(uint64_t prefix, uint64_t raw, uint32_t least, uint64_t* first, uint64_t* first8) {
    const Bucket* b = pool_.to_ptr<const Bucket>(PPtr(raw));
    const uint32_t n = b->count;
    if (n < least || Bucket::Bytes(n) > pool_.size()) return Bad("bucket", raw, "bad entry count " + std::to_string(n));
    auto d = pm::Decode<const Bucket>(pool_, raw, Bucket::Bytes(n), 64, "kv: bucket");
    if (!d.ok()) return d.status();
    if (rules_.check_nodes && d.value()->check != NodeCheck(d.value(), Bucket::Bytes(n)))
      return Bad("bucket", raw, "check word does not match its contents");
    PMINDEX_RETURN_IF_ERROR(sink_.Block(PPtr(raw), Bucket::Bytes(n)));
    if (rules_.content) sink_.Content(d.value(), Bucket::kHeaderBytes);
    for (uint32_t i = 0; i < n; ++i) {
      const Bucket::Entry e = b->entries()[i];
      std::string key;
      PMINDEX_RETURN_IF_ERROR(RecordAt(prefix, e.record, &e.next8, &key));
      if (have_prev_ && CompareKeys(prev_, key) >= 0)
        return Bad("bucket", raw, "keys not ascending at entry " + std::to_string(i));
      prev_ = std::move(key);
      have_prev_ = true;
      if (i == 0) *first = e.record, *first8 = e.next8;
    }
    return Status::OK();
  }

  // `next8`: the bucket entry's copy of the key's bytes 8..15 (null for a
  // record the index names itself); *key_out gets the key.
  Status RecordAt(uint64_t prefix, uint64_t raw, const uint64_t* next8, std::string* key_out) {
    auto d = pm::Decode<const Record>(pool_, raw, Record::kHeaderBytes, 64, "kv: record");
    if (!d.ok()) return d.status();
    const Record* r = d.value();
    if (r->tag != kRecordTag) return Bad("record", raw, "bad tag");
    const uint32_t len = r->key_len;
    if (len == 0 || len > kMaxKeyBytes) return Bad("record", raw, "bad key length " + std::to_string(len));
    auto full = pm::Decode<const Record>(pool_, raw, Record::Bytes(len), 64, "kv: record");
    if (!full.ok()) return full.status();
    PMINDEX_RETURN_IF_ERROR(sink_.Block(PPtr(raw), Record::Bytes(len)));
    if (rules_.content) sink_.Content(r, Record::Bytes(len));
    const std::string_view key = r->key();
    if (Prefix(key) != prefix) return Bad("record", raw, "key stored under another prefix " + HexWord(prefix));
    if (next8 != nullptr && Next8(key) != *next8) return Bad("record", raw, "key differs from its bucket entry");
    if (key_out != nullptr) key_out->assign(key);
    // The chain, newest first: timestamps strictly decreasing.
    uint64_t above = rules_.ts_limit;  // the next committed ts must be below this
    uint64_t versions = 0;
    bool live = false, decided = false;
    for (uint64_t v = LoadWord(r->head); v != 0; ++versions) {
      auto vd = pm::Decode<const Version>(pool_, v, Version::kHeaderBytes, 64, "kv: version");
      if (!vd.ok()) return vd.status();
      const Version* x = vd.value();
      if (x->tag != kVersionTag) return Bad("version", v, "bad tag");
      PMINDEX_RETURN_IF_ERROR(CheckValue(v, *x));
      const uint64_t stamp = LoadWord(x->stamp);
      uint64_t ts = 0;  // 0: an uncommitted transaction's version
      if (IsCommittedStamp(stamp)) {
        ts = StampTs(stamp);
      } else {
        if (versions != 0 || !rules_.allow_pending)
          return Bad("version", v, versions != 0 ? "an in-flight transaction's version below a chain's head"
                                                 : "an in-flight transaction's version");
        PMINDEX_RETURN_IF_ERROR(TxnAt(raw, v, stamp, &ts));
      }
      if (ts != 0) {
        if (ts >= above) {
          return Bad("version", v, "timestamp " + std::to_string(ts) +
                                       (above == rules_.ts_limit ? " not below the clock's " : " not below the newer version's ") +
                                       std::to_string(above));
        }
        above = ts;
        if (ts > max_ts_) max_ts_ = ts;
        if (!decided) {
          live = !x->tombstone();
          decided = true;
        }
      }
      v = LoadWord(x->older);
    }
    sink_.RecordDone(raw, *r, live, versions);
    return Status::OK();
  }

  Status CheckValue(uint64_t v, const Version& x) {
    if ((x.flags & ~(Version::kTombstone | Version::kSeparate)) != 0) return Bad("version", v, "bad flags");
    if (x.len > kMaxValueBytes) return Bad("version", v, "value longer than the limit");
    if (x.tombstone()) {
      if (x.separate() || x.len != 0 || x.value != 0) return Bad("version", v, "a tombstone with a value");
      PMINDEX_RETURN_IF_ERROR(sink_.Block(PPtr(v), Version::kHeaderBytes));
      if (rules_.content) sink_.Content(&x, Version::kHeaderBytes);
      return Status::OK();
    }
    if (x.separate() != !Version::Inline(x.len) || (x.value != 0) != x.separate())
      return Bad("version", v, "value placement does not match its length");
    const size_t bytes = Version::Bytes(x.len, false);
    auto d = pm::Decode<const Version>(pool_, v, bytes, 64, "kv: version");
    if (!d.ok()) return d.status();
    PMINDEX_RETURN_IF_ERROR(sink_.Block(PPtr(v), bytes));
    if (rules_.content) sink_.Content(&x, bytes);
    if (!x.separate()) return Status::OK();
    auto vb = pm::Decode<const char>(pool_, x.value, x.len, 64, "kv: value block");
    if (!vb.ok()) return vb.status();
    PMINDEX_RETURN_IF_ERROR(sink_.Block(PPtr(x.value), x.len));
    if (rules_.content) sink_.Content(vb.value(), x.len);
    return Status::OK();
  }

  // The transaction record an in-flight head names; *ts its commit
  // timestamp, 0 if it did not commit.
  Status TxnAt(uint64_t rec, uint64_t ver, uint64_t txn, uint64_t* ts) {
    auto d = pm::Decode<const TxnRecord>(pool_, txn, sizeof(TxnRecord), 64, "kv: transaction record");
    if (!d.ok()) return d.status();
    const TxnRecord* t = d.value();
    if (t->tag != kTxnTag) return Bad("transaction record", txn, "bad tag");
    PMINDEX_RETURN_IF_ERROR(sink_.TxnBlock(PPtr(txn)));
    if (rules_.content) sink_.Content(t, 16);
    const uint64_t c = LoadWord(t->commit);
    if (c != 0 && !IsCommittedStamp(c)) return Bad("transaction record", txn, "bad commit word");
    *ts = c == 0 ? 0 : StampTs(c);
    if (c != 0 && *ts == 0) return Bad("transaction record", txn, "commit timestamp 0");
    sink_.PendingHead(rec, ver, txn, *ts);
    return Status::OK();
  }

  const Pool& pool_;
  const WalkRules& rules_;
  WalkSink& sink_;
  uint64_t max_ts_ = 0;
  std::string prev_;  // the last key met in the prefix's tree
  bool have_prev_ = false;
};

}  // namespace

Status WalkValue(const Pool& pool, uint64_t prefix, uint64_t raw, const WalkRules& rules, WalkSink& sink,
                 uint64_t* max_ts) {
  Walker w(pool, rules, sink);
  Status s = w.Value(prefix, raw);
  if (max_ts != nullptr && w.max_ts() > *max_ts) *max_ts = w.max_ts();
  return s;
}

}  // namespace pmindex::kv
