// The store's one validating walk (docs/layout/kv.md "Recovery"): from an
// index value to every block it reaches, checking each pointer (through
// pm::Decode) and each invariant before anything past it is read. The
// recovery visitor, Verify, Stats and ForEachBlock all walk with it; what
// they do with each block is the sink's.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kv/kv_format.h"
#include "pm/pool.h"
#include "pmindex/status.h"

namespace pmindex::kv {

class WalkSink {
 public:
  virtual ~WalkSink() = default;
  // Every block the walk reaches, with the bytes the walk will read from
  // it, before it reads past the block's header: non-OK refuses the block
  // (not an allocated block, or a smaller one) and ends the walk.
  virtual Status Block(PPtr p, size_t bytes) = 0;
  // The same for a transaction record (64 bytes), which may head several
  // chains and so be met several times.
  virtual Status TxnBlock(PPtr p) { return Block(p, sizeof(TxnRecord)); }
  // The chain head of record `rec` is version `ver` of a transaction not
  // finalized yet (its stamp names TxnRecord `txn`), committed at
  // `commit_ts`, or not committed (0).
  virtual void PendingHead(uint64_t rec, uint64_t ver, uint64_t txn, uint64_t commit_ts) {
    (void)rec, (void)ver, (void)txn, (void)commit_ts;
  }
  // Every record, once its chain was walked: `live` iff its newest
  // committed version holds a value (not a tombstone, not absent);
  // `versions` in its chain (an in-flight one included).
  virtual void RecordDone(uint64_t rec, const Record& r, bool live, uint64_t versions) {
    (void)rec, (void)r, (void)live, (void)versions;
  }
  // With WalkRules::content: the bytes of each block the walk accepted that
  // the store's content record covers, in walk order (a record with its
  // key, a version with its inline value, a value block; of a bucket or a
  // directory its 16-byte header, whose check word covers the rest once
  // the walk compared it). Read only while no writer runs.
  virtual void Content(const void* p, size_t n) { (void)p, (void)n; }
};

// The digest of one index pair's blocks for the store's content record
// (docs/layout/kv.md "Content record"): a fold, in walk order, of
// BytesCheck over what the walk tells WalkSink::Content. The record sums
// pm::ContentTerm(prefix, digest) over the pairs (common::ContentSum), so
// the order in which the pairs are met does not matter.
class ContentDigest {
 public:
  void Add(const void* p, size_t n) {
    h_ = std::rotl((h_ ^ BytesCheck(p, n)) * 0xC2B2AE3D27D4EB4Full, 31) + n;
  }
  uint64_t value() const { return h_; }
  void Reset() { h_ = kSeed; }

 private:
  static constexpr uint64_t kSeed = 0x4B56434F4E54454Eull;  // "KVCONTEN"
  uint64_t h_ = kSeed;
};

struct WalkRules {
  // Every commit timestamp must be below it (root slot 5's reservation at
  // recovery; the clock's next timestamp for Verify).
  uint64_t ts_limit = UINT64_MAX;
  // A version of a transaction not finalized may head a chain (recovery;
  // not Verify, which excludes every writer).
  bool allow_pending = false;
  // Compare each bucket's and directory's check word (off only for a walk
  // of nodes a checking walk has just accepted: the count at open).
  bool check_nodes = true;
  // Tell the sink the bytes of every block (WalkSink::Content).
  bool content = false;
};

// Walks index value `raw`, stored under index key `prefix`: the record or
// the prefix's tree (buckets and directories), every record, its version
// chain and value blocks. Corruption names the first violation: a bad
// pointer, tag, length, level or entry count, a directory entry that does
// not name its child's smallest key, a node whose check word does not
// match (rules.check_nodes), a key under the wrong prefix or out
// of order, timestamps not strictly decreasing along a chain or not below
// the limit, a pending version below a chain's head.
// *max_ts (may be null) is raised to the largest timestamp seen. Reads only.
Status WalkValue(const Pool& pool, uint64_t prefix, uint64_t raw, const WalkRules& rules,
                 WalkSink& sink, uint64_t* max_ts);

// The hex of a raw pointer, for messages.
std::string HexWord(uint64_t v);

}  // namespace pmindex::kv
