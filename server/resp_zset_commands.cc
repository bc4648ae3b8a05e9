// RESP sorted sets (zset.h): ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD,
// ZCOUNT, ZLEXCOUNT, the ZRANGE family (by rank, score and lex, forward
// and reverse, ZRANGESTORE), ZRANK, ZREVRANK, ZPOPMIN, ZPOPMAX, ZMPOP,
// ZRANDMEMBER, the ZREMRANGEBY family, ZUNION/ZINTER/ZDIFF and their STORE
// forms, ZINTERCARD and ZSCAN, with Redis 7.0's arguments, errors and
// replies (RESP2 and RESP3).
//
// Every command is one store transaction (RunInTransaction), durable
// before its reply. Costs, n the members, k the members a command reads
// or returns (docs/server.md "Sorted sets"):
// - ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE (per member), ZCARD: O(log n);
// - forward ranges by score or lex (ZRANGEBYSCORE, ZRANGEBYLEX, ZCOUNT,
//   ZLEXCOUNT, ZREMRANGEBYSCORE/LEX, ZRANGE BYSCORE/BYLEX): O(log n + k),
//   plus the LIMIT offset skipped;
// - by rank (ZRANGE start stop, ZRANK, ZREMRANGEBYRANK): O(log n + start
//   + k): the store has no order statistics, ranks are counted;
// - reverse: the store scans forward only. ZREVRANGE, ZRANGE REV and
//   ZREVRANGEBYSCORE walk down the score index one distinct score at a
//   time, each found by a binary search of about 64 O(log n) probes
//   (cost O(64 log n) per distinct score passed, plus the members read);
//   ZREVRANGEBYLEX reads its whole range forward and reverses it;
//   ZREVRANK is n - 1 - ZRANK; ZPOPMAX walks down as ZREVRANGE.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <unordered_map>

#include "server/collections.h"
#include "server/numbers.h"
#include "server/resp_command.h"
#include "server/resp_list.h"
#include "server/resp_protocol.h"
#include "server/resp_transaction.h"
#include "server/zset.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

constexpr char kByMember = sub_space::kZsetMember;
constexpr char kByScore = sub_space::kZsetByScore;
constexpr char kSetMember = sub_space::kSetMember;
constexpr size_t kScoreBytes = 8;
// Elements read from the store per Range call when a command walks a
// collection: the first call reads kFirstBatch (a LIMIT 0 10 range reads
// no more than it needs), each next one four times more, up to kBatch.
constexpr size_t kFirstBatch = 16;
constexpr size_t kBatch = 256;

constexpr std::string_view kNotFloat = "ERR value is not a valid float";
constexpr std::string_view kNaNScore = "ERR resulting score is not a number (NaN)";
constexpr std::string_view kRangeNotFloat = "ERR min or max is not a float";
constexpr std::string_view kBadLex = "ERR min or max not valid string range item";
constexpr std::string_view kNotPositive = "ERR value is out of range, must be positive";

Status Error(std::string_view message) { return Status::InvalidArgument(message); }

// ---------------------------------------------------------------- numbers

// Redis's getDoubleFromObject: the whole argument is one strtod number,
// no leading space, not NaN, no overflow ("inf" and "-inf" are fine).
bool ParseScore(std::string_view s, double* d) {
  if (s.empty() || s.size() > 256 || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  const std::string buf(s);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(buf.c_str(), &end);
  if (end != buf.c_str() + buf.size() || std::isnan(v)) return false;
  if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || v == 0)) return false;
  *d = v;
  return true;
}

// A range bound's number (zslParseRange): strtod over the whole rest, any
// leading space, the empty string reading as 0; not NaN.
bool ParseBoundNumber(std::string_view s, double* d) {
  const std::string buf(s);
  char* end = nullptr;
  const double v = std::strtod(buf.c_str(), &end);
  if (end != buf.c_str() + buf.size() || std::isnan(v)) return false;
  *d = v;
  return true;
}

// -0.0 reads as 0.0 (the store's order does not tell them apart).
double Normalize(double d) { return d == 0 ? 0.0 : d; }

// The 8-byte key that follows `k` (8 bytes) as a big-endian number, or
// nullopt after the largest.
std::optional<std::string> Next8(std::string k) {
  for (size_t i = k.size(); i-- > 0;) {
    if (static_cast<unsigned char>(k[i]) != 0xff) {
      k[i] = static_cast<char>(static_cast<unsigned char>(k[i]) + 1);
      return k;
    }
    k[i] = 0;
  }
  return std::nullopt;
}

uint64_t Be64(std::string_view b) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = v << 8 | static_cast<unsigned char>(b[i]);
  return v;
}

std::string ToBe64(uint64_t v) {
  std::string b(8, '\0');
  for (size_t i = 8; i-- > 0; v >>= 8) b[i] = static_cast<char>(v & 0xff);
  return b;
}

std::mt19937_64& Rng() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

// ---------------------------------------------------------------- ranges

// Keys of one sub-space: from <= key < to (to: nullopt, the end).
struct KeyRange {
  std::string from;
  std::optional<std::string> to;
  bool empty() const { return to && from >= *to; }
};

struct ScoreRange {
  double min = 0, max = 0;
  bool minex = false, maxex = false;
};

bool ParseScoreBound(std::string_view s, double* d, bool* ex) {
  *ex = !s.empty() && s[0] == '(';
  if (*ex) s.remove_prefix(1);
  return ParseBoundNumber(s, d);
}

bool ParseScoreRange(std::string_view min, std::string_view max, ScoreRange* r) {
  return ParseScoreBound(min, &r->min, &r->minex) && ParseScoreBound(max, &r->max, &r->maxex);
}

// The score index's keys of the scores in `r` (an 8-byte score prefix
// bounds a whole group of members).
KeyRange ScoreKeys(const ScoreRange& r) {
  KeyRange k;
  if (r.min > r.max || (r.min == r.max && (r.minex || r.maxex))) return {"\1", std::string()};
  const std::string lo = OrderedDouble(Normalize(r.min));
  const std::string hi = OrderedDouble(Normalize(r.max));
  if (r.minex) {
    std::optional<std::string> n = Next8(lo);
    if (!n) return {"\1", std::string()};
    k.from = *n;
  } else {
    k.from = lo;
  }
  k.to = r.maxex ? std::optional<std::string>(hi) : Next8(hi);
  return k;
}

struct LexBound {
  enum class Kind : uint8_t { kNegInf, kPosInf, kValue } kind = Kind::kValue;
  std::string value;
  bool ex = false;
};

bool ParseLexBound(std::string_view s, LexBound* b) {
  if (s.empty()) return false;
  switch (s[0]) {
    case '+':
    case '-':
      if (s.size() != 1) return false;
      b->kind = s[0] == '+' ? LexBound::Kind::kPosInf : LexBound::Kind::kNegInf;
      b->ex = true;
      return true;
    case '(':
    case '[':
      b->kind = LexBound::Kind::kValue;
      b->ex = s[0] == '(';
      b->value = std::string(s.substr(1));
      return true;
    default:
      return false;
  }
}

// The member index's keys of a lex range.
KeyRange LexKeys(const LexBound& min, const LexBound& max) {
  const KeyRange none{"\1", std::string()};
  KeyRange k;
  if (min.kind == LexBound::Kind::kPosInf || max.kind == LexBound::Kind::kNegInf) return none;
  if (min.kind == LexBound::Kind::kValue) k.from = min.ex ? min.value + '\0' : min.value;
  if (max.kind == LexBound::Kind::kValue) k.to = max.ex ? max.value : max.value + '\0';
  if (k.empty()) return none;
  return k;
}

// ---------------------------------------------------------------- Zset

// One sorted set inside a transaction (zset.h's encoding).
class Zset {
 public:
  explicit Zset(Collection c) : c_(std::move(c)) {}

  Collection& coll() { return c_; }
  uint64_t size() const { return c_.count(); }
  // Members longer than this do not fit the score index's key.
  size_t max_member_bytes() const {
    const size_t m = c_.max_member_bytes();
    return m > kScoreBytes ? m - kScoreBytes : 0;
  }

  Result<std::optional<double>> Score(std::string_view member) {
    Result<std::string> r = c_.Get(kByMember, member);
    if (r.ok()) {
      if (r->size() != kScoreBytes) return Status::Corruption("a sorted set member's score record");
      return std::optional<double>(FromOrderedDouble(*r));
    }
    if (r.status().is_not_found()) return std::optional<double>();
    return r.status();
  }

  // Gives `member` the score `score`; `old` is its current one (nullopt:
  // not a member yet).
  Status Set(std::string_view member, double score, std::optional<double> old) {
    const std::string enc = OrderedDouble(Normalize(score));
    std::string key;
    if (old) {
      const std::string old_enc = OrderedDouble(Normalize(*old));
      if (old_enc == enc) return Status::OK();
      key = old_enc;
      key.append(member);
      Result<bool> removed = c_.Remove(kByScore, key);
      if (!removed.ok()) return removed.status();
    } else {
      c_.add_count(1);
    }
    PMINDEX_RETURN_IF_ERROR(c_.Put(kByMember, member, enc));
    key = enc;
    key.append(member);
    return c_.Put(kByScore, key, "");
  }

  // Removes `member` (score: its score); the count goes down by one.
  Status Erase(std::string_view member, double score) {
    std::string key = OrderedDouble(Normalize(score));
    key.append(member);
    Result<bool> a = c_.Remove(kByScore, key);
    if (!a.ok()) return a.status();
    Result<bool> b = c_.Remove(kByMember, member);
    if (!b.ok()) return b.status();
    c_.add_count(-1);
    return Status::OK();
  }

  // Calls fn(member, score) for the score index's keys in [r.from, r.to),
  // ascending, until fn returns false.
  void ForEachByScore(const KeyRange& r,
                      const std::function<bool(std::string_view, double)>& fn) {
    Walk(kByScore, r, [&](const std::string& k, const std::string&) {
      return fn(std::string_view(k).substr(kScoreBytes), FromOrderedDouble(k));
    });
  }
  // The same over the member index (ascending members).
  void ForEachByMember(const KeyRange& r,
                       const std::function<bool(std::string_view, double)>& fn) {
    Walk(kByMember, r, [&](const std::string& k, const std::string& v) {
      return fn(k, v.size() == kScoreBytes ? FromOrderedDouble(v) : 0.0);
    });
  }
  // The score index's keys in [r.from, r.to) (each bound empty or 8
  // bytes), descending. The store scans forward only: each distinct score
  // is found by a binary search over the 8-byte score prefixes (about 64
  // probes of Range(limit 1)), then its members are read forward.
  void ForEachByScoreReverse(const KeyRange& r,
                             const std::function<bool(std::string_view, double)>& fn) {
    std::optional<std::string> bound = r.to;
    std::vector<std::pair<std::string, std::string>> probe;
    auto any = [&](const std::string& from) {
      probe.clear();
      return c_.Range(kByScore, from, bound, 1, &probe) > 0;
    };
    const uint64_t floor = r.from.empty() ? 0 : Be64(r.from);
    for (;;) {
      if (bound && *bound <= r.from) return;
      if (!any(r.from)) return;
      uint64_t lo = floor, hi = bound ? Be64(*bound) : std::numeric_limits<uint64_t>::max();
      // Invariant: some key >= lo is below the bound; none >= hi + 1.
      while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2 + 1;
        if (any(ToBe64(mid))) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      const std::string prefix = ToBe64(lo);
      std::optional<std::string> group_end = Next8(prefix);
      if (bound && (!group_end || *bound < *group_end)) group_end = bound;
      std::vector<std::pair<std::string, std::string>> group;
      Walk(kByScore, {prefix, group_end}, [&](const std::string& k, const std::string&) {
        group.emplace_back(k, std::string());
        return true;
      });
      for (size_t i = group.size(); i-- > 0;) {
        const std::string& k = group[i].first;
        if (!fn(std::string_view(k).substr(kScoreBytes), FromOrderedDouble(k))) return;
      }
      if (lo == 0) return;
      bound = prefix;
    }
  }

  Status Save() { return c_.Save(); }

 private:
  void Walk(char sub, const KeyRange& r,
            const std::function<bool(const std::string&, const std::string&)>& fn) {
    if (r.empty()) return;
    std::string from = r.from;
    std::vector<std::pair<std::string, std::string>> batch;
    for (size_t want = kFirstBatch;; want = std::min(kBatch, want * 4)) {
      batch.clear();
      const size_t n = c_.Range(sub, from, r.to, want, &batch);
      for (const auto& [k, v] : batch)
        if (!fn(k, v)) return;
      if (n < want) return;
      from = batch.back().first;
      from.push_back('\0');
    }
  }

  Collection c_;
};

// The sorted set at `key`, or nullopt if absent; WRONGTYPE as an error.
Result<std::optional<Zset>> FindZset(TxnScope& scope, int db, std::string_view key) {
  Result<Collection> c = Collection::Find(scope, db, key, CollectionType::kZset);
  if (c.ok()) return std::optional<Zset>(Zset(std::move(c.value())));
  if (c.status().is_not_found()) return std::optional<Zset>();
  return c.status();
}

// The members of the key's set (type set) or sorted set, with their
// scores (a set's members score 1), for ZUNION & co; WRONGTYPE for other
// types; empty for no key.
Result<std::map<std::string, double>> ReadScored(TxnScope& scope, int db, std::string_view key,
                                                 bool* present) {
  std::map<std::string, double> out;
  *present = false;
  Result<KeyKind> kind = KindOfKey(scope, db, key);
  if (!kind.ok()) return kind.status();
  if (*kind == KeyKind::kNone) return out;
  if (*kind != KeyKind::kZset && *kind != KeyKind::kSet) return WrongTypeError();
  const bool zset = *kind == KeyKind::kZset;
  Result<Collection> c =
      Collection::Find(scope, db, key, zset ? CollectionType::kZset : CollectionType::kSet);
  if (!c.ok()) {
    if (c.status().is_not_found()) return out;
    return c.status();
  }
  *present = true;
  std::string from;
  std::vector<std::pair<std::string, std::string>> batch;
  for (;;) {
    batch.clear();
    const size_t n = c->Range(zset ? kByMember : kSetMember, from, std::nullopt, kBatch, &batch);
    for (auto& [k, v] : batch) {
      out.emplace(k, zset && v.size() == kScoreBytes ? FromOrderedDouble(v) : 1.0);
    }
    if (n < kBatch) break;
    from = batch.back().first;
    from.push_back('\0');
  }
  return out;
}

// Replaces whatever `key` holds by a sorted set of `members` (none: the
// key is removed).
Status StoreZset(TxnScope& scope, int db, std::string_view key,
                 const std::vector<ScoredMember>& members) {
  Result<bool> deleted = DeleteKey(scope, db, key);
  if (!deleted.ok()) return deleted.status();
  if (members.empty()) return Status::OK();
  Result<Collection> c = Collection::Create(scope, db, key, CollectionType::kZset);
  if (!c.ok()) return c.status();
  Zset z(std::move(c.value()));
  for (const ScoredMember& m : members) PMINDEX_RETURN_IF_ERROR(z.Set(m.member, m.score, {}));
  return z.Save();
}

// ---------------------------------------------------------------- replies

// A list of members, with their scores if asked: RESP2 flat (member,
// score as a bulk string), RESP3 an array of [member, double] pairs.
void ReplyScored(RespReply& r, const std::vector<ScoredMember>& v, bool withscores) {
  if (!withscores) {
    r.Array(v.size());
    for (const ScoredMember& m : v) r.Bulk(m.member);
    return;
  }
  if (r.protocol() == 3) {
    r.Array(v.size());
    for (const ScoredMember& m : v) {
      r.Array(2);
      r.Bulk(m.member);
      r.Double(m.score);
    }
    return;
  }
  r.Array(2 * v.size());
  for (const ScoredMember& m : v) {
    r.Bulk(m.member);
    r.Double(m.score);
  }
}

bool ReplyTooLarge(const std::vector<ScoredMember>& v) {
  size_t bytes = 0;
  for (const ScoredMember& m : v) bytes += m.member.size() + 32;
  return bytes > kMaxMultiReplyBytes;
}

// ---------------------------------------------------------------- ZADD

struct ZaddFlags {
  bool nx = false, xx = false, gt = false, lt = false, ch = false, incr = false;
};

// ZADD's flags from args[2] on, in any order and repeated; returns the
// index of the first argument that is not one (the first score).
size_t ParseZaddFlags(const CommandCall& c, ZaddFlags* f) {
  size_t i = 2;
  for (; i < c.argc(); ++i) {
    const std::string_view o = c.args[i];
    if (EqualsIgnoreCase(o, "nx")) {
      f->nx = true;
    } else if (EqualsIgnoreCase(o, "xx")) {
      f->xx = true;
    } else if (EqualsIgnoreCase(o, "ch")) {
      f->ch = true;
    } else if (EqualsIgnoreCase(o, "incr")) {
      f->incr = true;
    } else if (EqualsIgnoreCase(o, "gt")) {
      f->gt = true;
    } else if (EqualsIgnoreCase(o, "lt")) {
      f->lt = true;
    } else {
      break;
    }
  }
  return i;
}

// The sorted set at `key` into *z: found, else created unless xx (then *z
// stays empty). WRONGTYPE for a key of another type.
Status FindOrCreateZset(TxnScope& scope, int db, std::string_view key, bool xx,
                        std::optional<Zset>* z) {
  Result<Collection> found = Collection::Find(scope, db, key, CollectionType::kZset);
  if (found.ok()) {
    z->emplace(std::move(found.value()));
    return Status::OK();
  }
  if (!found.status().is_not_found()) return found.status();
  if (xx) return Status::OK();
  Result<Collection> created = Collection::Create(scope, db, key, CollectionType::kZset);
  if (!created.ok()) return created.status();
  z->emplace(std::move(created.value()));
  return Status::OK();
}

// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...];
// ZINCRBY key increment member.
void Zadd(CommandCall& c) {
  const bool zincrby = c.command.name == "zincrby";
  ZaddFlags f;
  f.incr = zincrby;
  const size_t i = zincrby ? 2 : ParseZaddFlags(c, &f);
  const bool nx = f.nx, xx = f.xx, gt = f.gt, lt = f.lt, ch = f.ch, incr = f.incr;
  const size_t pairs_args = c.argc() - i;
  if (pairs_args == 0 || pairs_args % 2 != 0) return c.reply.Error(kSyntax);
  if (nx && xx) return c.reply.Error("ERR XX and NX options at the same time are not compatible");
  if ((gt && nx) || (lt && nx) || (gt && lt)) {
    return c.reply.Error("ERR GT, LT, and/or NX options at the same time are not compatible");
  }
  const size_t n = pairs_args / 2;
  if (incr && n > 1) {
    return c.reply.Error("ERR INCR option supports a single increment-element pair");
  }
  std::vector<double> scores(n);
  for (size_t j = 0; j < n; ++j) {
    if (!ParseScore(c.args[i + 2 * j], &scores[j])) return c.reply.Error(kNotFloat);
  }
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    std::optional<Zset> z;
    PMINDEX_RETURN_IF_ERROR(FindOrCreateZset(scope, db, c.args[1], xx, &z));
    if (!z) {  // XX on a missing key
      if (incr) {
        reply.NullBulk();
      } else {
        reply.Integer(0);
      }
      return Status::OK();
    }
    for (size_t j = 0; j < n; ++j) {
      if (c.args[i + 2 * j + 1].size() > z->max_member_bytes())
        return Error("ERR member too long for this server's store");
    }
    int64_t added = 0, updated = 0, processed = 0;
    double last = 0;
    for (size_t j = 0; j < n; ++j) {
      const std::string_view member = c.args[i + 2 * j + 1];
      double score = scores[j];
      Result<std::optional<double>> old = z->Score(member);
      if (!old.ok()) return old.status();
      if (old.value()) {
        if (nx) continue;
        const double cur = **old;
        if (incr) {
          score += cur;
          if (std::isnan(score)) return Error(kNaNScore);  // INCR: one pair, nothing written
        }
        if ((lt && score >= cur) || (gt && score <= cur)) continue;
        last = score;
        ++processed;
        if (score != cur) {
          PMINDEX_RETURN_IF_ERROR(z->Set(member, score, cur));
          ++updated;
        }
      } else {
        if (xx) continue;
        PMINDEX_RETURN_IF_ERROR(z->Set(member, score, std::nullopt));
        last = score;
        ++added;
        ++processed;
      }
    }
    if (added + updated > 0) PMINDEX_RETURN_IF_ERROR(z->Save());
    if (incr) {
      if (processed > 0) {
        reply.Double(Normalize(last));
      } else {
        reply.NullBulk();
      }
    } else {
      reply.Integer(ch ? added + updated : added);
    }
    return Status::OK();
  });
}

// ZREM key member [member ...]
void Zrem(CommandCall& c) {
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Zset>> z = FindZset(scope, db, c.args[1]);
    if (!z.ok()) return z.status();
    if (!z.value()) {
      reply.Integer(0);
      return Status::OK();
    }
    int64_t removed = 0;
    for (size_t i = 2; i < c.argc(); ++i) {
      Result<std::optional<double>> s = (*z)->Score(c.args[i]);
      if (!s.ok()) return s.status();
      if (!s.value()) continue;
      PMINDEX_RETURN_IF_ERROR((*z)->Erase(c.args[i], **s));
      ++removed;
    }
    if (removed > 0) PMINDEX_RETURN_IF_ERROR((*z)->Save());
    reply.Integer(removed);
    return Status::OK();
  });
}

// ZSCORE key member; ZMSCORE key member [member ...]
void Zscore(CommandCall& c) {
  const bool multi = c.command.name == "zmscore";
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Zset>> z = FindZset(scope, db, c.args[1]);
    if (!z.ok()) return z.status();
    if (multi) reply.Array(c.argc() - 2);
    for (size_t i = 2; i < c.argc(); ++i) {
      std::optional<double> score;
      if (z.value()) {
        Result<std::optional<double>> s = (*z)->Score(c.args[i]);
        if (!s.ok()) return s.status();
        score = *s;
      }
      if (score) {
        reply.Double(*score);
      } else {
        reply.NullBulk();
      }
    }
    return Status::OK();
  });
}

void Zcard(CommandCall& c) {
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Zset>> z = FindZset(scope, db, c.args[1]);
    if (!z.ok()) return z.status();
    reply.Integer(z.value() ? static_cast<int64_t>((*z)->size()) : 0);
    return Status::OK();
  });
}

// ZCOUNT key min max; ZLEXCOUNT key min max.
void Zcount(CommandCall& c) {
  const bool lex = c.command.name == "zlexcount";
  KeyRange keys;
  if (lex) {
    LexBound min, max;
    if (!ParseLexBound(c.args[2], &min) || !ParseLexBound(c.args[3], &max))
      return c.reply.Error(kBadLex);
    keys = LexKeys(min, max);
  } else {
    ScoreRange r;
    if (!ParseScoreRange(c.args[2], c.args[3], &r)) return c.reply.Error(kRangeNotFloat);
    keys = ScoreKeys(r);
  }
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Zset>> z = FindZset(scope, db, c.args[1]);
    if (!z.ok()) return z.status();
    int64_t n = 0;
    if (z.value()) {
      auto count = [&](std::string_view, double) {
        ++n;
        return true;
      };
      if (lex) {
        (*z)->ForEachByMember(keys, count);
      } else {
        (*z)->ForEachByScore(keys, count);
      }
    }
    reply.Integer(n);
    return Status::OK();
  });
}

// ---------------------------------------------------------------- ZRANGE

enum class RangeKind : uint8_t { kAuto, kRank, kScore, kLex };

struct RangeSpec {
  RangeKind kind = RangeKind::kAuto;
  bool rev = false, rev_fixed = false;
  bool withscores = false;
  int64_t offset = 0, limit = -1;
  bool has_limit = false;
  int64_t start = 0, stop = 0;  // kRank
  ScoreRange score;
  LexBound lex_min, lex_max;
};

// Parses `args` = key min max [options] (ZRANGE's, or a legacy form's
// with `kind` and `rev` fixed); false after replying the error.
bool ParseRange(CommandCall& c, std::span<const std::string_view> args, bool store, RangeSpec* s) {
  for (size_t j = 3; j < args.size(); ++j) {
    const size_t left = args.size() - j - 1;
    if (!store && EqualsIgnoreCase(args[j], "withscores")) {
      s->withscores = true;
    } else if (EqualsIgnoreCase(args[j], "limit") && left >= 2) {
      if (!ParseNumber(args[j + 1], &s->offset) || !ParseNumber(args[j + 2], &s->limit)) {
        c.reply.Error(kNotInteger);
        return false;
      }
      s->has_limit = true;
      j += 2;
    } else if (!s->rev_fixed && EqualsIgnoreCase(args[j], "rev")) {
      s->rev = true;
    } else if (s->kind == RangeKind::kAuto && EqualsIgnoreCase(args[j], "bylex")) {
      s->kind = RangeKind::kLex;
    } else if (s->kind == RangeKind::kAuto && EqualsIgnoreCase(args[j], "byscore")) {
      s->kind = RangeKind::kScore;
    } else {
      c.reply.Error(kSyntax);
      return false;
    }
  }
  if (s->kind == RangeKind::kAuto) s->kind = RangeKind::kRank;
  if (s->has_limit && s->kind == RangeKind::kRank) {
    c.reply.Error(
        "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
    return false;
  }
  if (s->withscores && s->kind == RangeKind::kLex) {
    c.reply.Error("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    return false;
  }
  std::string_view min = args[1], max = args[2];
  if (s->rev && s->kind != RangeKind::kRank) std::swap(min, max);
  switch (s->kind) {
    case RangeKind::kAuto:
    case RangeKind::kRank:
      if (!ParseNumber(min, &s->start) || !ParseNumber(max, &s->stop)) {
        c.reply.Error(kNotInteger);
        return false;
      }
      break;
    case RangeKind::kScore:
      if (!ParseScoreRange(min, max, &s->score)) {
        c.reply.Error(kRangeNotFloat);
        return false;
      }
      break;
    case RangeKind::kLex:
      if (!ParseLexBound(min, &s->lex_min) || !ParseLexBound(max, &s->lex_max)) {
        c.reply.Error(kBadLex);
        return false;
      }
      break;
  }
  return true;
}

// The members a parsed range selects, in reply order.
std::vector<ScoredMember> RunRange(Zset& z, const RangeSpec& s) {
  std::vector<ScoredMember> out;
  const int64_t n = static_cast<int64_t>(z.size());
  if (s.kind == RangeKind::kRank) {
    int64_t start = s.start, stop = s.stop;
    if (start < 0) start += n;
    if (stop < 0) stop += n;
    if (start < 0) start = 0;
    if (start > stop || start >= n) return out;
    if (stop >= n) stop = n - 1;
    const int64_t want = stop - start + 1;
    int64_t seen = 0;
    auto take = [&](std::string_view m, double score) {
      if (seen++ >= start) out.push_back({std::string(m), score});
      return static_cast<int64_t>(out.size()) < want;
    };
    if (s.rev) {
      z.ForEachByScoreReverse({}, take);
    } else {
      z.ForEachByScore({}, take);
    }
    return out;
  }
  if (s.has_limit && s.limit == 0) return out;
  if (s.offset < 0) return out;
  int64_t skipped = 0;
  auto take = [&](std::string_view m, double score) {
    if (skipped < s.offset) {
      ++skipped;
      return true;
    }
    out.push_back({std::string(m), score});
    return s.limit < 0 || static_cast<int64_t>(out.size()) < s.limit;
  };
  if (s.kind == RangeKind::kScore) {
    const KeyRange keys = ScoreKeys(s.score);
    if (s.rev) {
      z.ForEachByScoreReverse(keys, take);
    } else {
      z.ForEachByScore(keys, take);
    }
    return out;
  }
  const KeyRange keys = LexKeys(s.lex_min, s.lex_max);
  if (!s.rev) {
    z.ForEachByMember(keys, take);
    return out;
  }
  std::vector<ScoredMember> all;
  z.ForEachByMember(keys, [&](std::string_view m, double score) {
    all.push_back({std::string(m), score});
    return true;
  });
  for (size_t i = all.size(); i-- > 0;)
    if (!take(all[i].member, all[i].score)) break;
  return out;
}

// ZRANGE and the legacy forms (fixed kind and direction).
void RangeCommand(CommandCall& c, RangeKind kind, bool rev, bool fixed) {
  RangeSpec s;
  s.kind = kind;
  s.rev = rev;
  s.rev_fixed = fixed;
  if (!ParseRange(c, c.args.subspan(1), false, &s)) return;
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Zset>> z = FindZset(scope, db, c.args[1]);
    if (!z.ok()) return z.status();
    std::vector<ScoredMember> out;
    if (z.value()) out = RunRange(**z, s);
    if (ReplyTooLarge(out)) return Error("ERR reply too large");
    ReplyScored(reply, out, s.withscores);
    return Status::OK();
  });
}

void Zrange(CommandCall& c) { RangeCommand(c, RangeKind::kAuto, false, false); }
void Zrevrange(CommandCall& c) {
  // ZREVRANGE key start stop [WITHSCORES]
  if (c.argc() > 5 || (c.argc() == 5 && !EqualsIgnoreCase(c.args[4], "withscores")))
    return c.reply.Error(kSyntax);
  RangeCommand(c, RangeKind::kRank, true, true);
}
void Zrangebyscore(CommandCall& c) { RangeCommand(c, RangeKind::kScore, false, true); }
void Zrevrangebyscore(CommandCall& c) { RangeCommand(c, RangeKind::kScore, true, true); }
void Zrangebylex(CommandCall& c) { RangeCommand(c, RangeKind::kLex, false, true); }
void Zrevrangebylex(CommandCall& c) { RangeCommand(c, RangeKind::kLex, true, true); }

// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
void Zrangestore(CommandCall& c) {
  RangeSpec s;
  if (!ParseRange(c, c.args.subspan(2), true, &s)) return;
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Zset>> z = FindZset(scope, db, c.args[2]);
    if (!z.ok()) return z.status();
    std::vector<ScoredMember> out;
    if (z.value()) out = RunRange(**z, s);
    PMINDEX_RETURN_IF_ERROR(StoreZset(scope, db, c.args[1], out));
    reply.Integer(static_cast<int64_t>(out.size()));
    return Status::OK();
  });
}

// ZRANK key member; ZREVRANK key member.
void Zrank(CommandCall& c) {
  const bool rev = c.command.name == "zrevrank";
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Zset>> z = FindZset(scope, db, c.args[1]);
    if (!z.ok()) return z.status();
    if (!z.value()) {
      reply.NullBulk();
      return Status::OK();
    }
    Result<std::optional<double>> score = (*z)->Score(c.args[2]);
    if (!score.ok()) return score.status();
    if (!score.value()) {
      reply.NullBulk();
      return Status::OK();
    }
    std::string key = OrderedDouble(Normalize(**score));
    key.append(c.args[2]);
    int64_t rank = 0;
    (*z)->ForEachByScore({"", key}, [&](std::string_view, double) {
      ++rank;
      return true;
    });
    reply.Integer(rev ? static_cast<int64_t>((*z)->size()) - 1 - rank : rank);
    return Status::OK();
  });
}

// ---------------------------------------------------------------- removal

// ZREMRANGEBYSCORE, ZREMRANGEBYRANK, ZREMRANGEBYLEX key min max.
void Zremrange(CommandCall& c) {
  RangeSpec s;
  s.rev_fixed = true;
  const std::string_view name = c.command.name;
  if (name == "zremrangebyscore") {
    s.kind = RangeKind::kScore;
    if (!ParseScoreRange(c.args[2], c.args[3], &s.score)) return c.reply.Error(kRangeNotFloat);
  } else if (name == "zremrangebylex") {
    s.kind = RangeKind::kLex;
    if (!ParseLexBound(c.args[2], &s.lex_min) || !ParseLexBound(c.args[3], &s.lex_max))
      return c.reply.Error(kBadLex);
  } else {
    s.kind = RangeKind::kRank;
    if (!ParseNumber(c.args[2], &s.start) || !ParseNumber(c.args[3], &s.stop))
      return c.reply.Error(kNotInteger);
  }
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Zset>> z = FindZset(scope, db, c.args[1]);
    if (!z.ok()) return z.status();
    if (!z.value()) {
      reply.Integer(0);
      return Status::OK();
    }
    const std::vector<ScoredMember> victims = RunRange(**z, s);
    for (const ScoredMember& m : victims) PMINDEX_RETURN_IF_ERROR((*z)->Erase(m.member, m.score));
    if (!victims.empty()) PMINDEX_RETURN_IF_ERROR((*z)->Save());
    reply.Integer(static_cast<int64_t>(victims.size()));
    return Status::OK();
  });
}

// Pops from an open sorted set (PopZset's contract).
Result<std::vector<ScoredMember>> PopFrom(Zset& z, bool max, uint64_t count) {
  std::vector<ScoredMember> out;
  if (count == 0) return out;
  auto take = [&](std::string_view m, double score) {
    out.push_back({std::string(m), score});
    return out.size() < count;
  };
  if (max) {
    z.ForEachByScoreReverse({}, take);
  } else {
    z.ForEachByScore({}, take);
  }
  for (const ScoredMember& m : out) PMINDEX_RETURN_IF_ERROR(z.Erase(m.member, m.score));
  if (!out.empty()) PMINDEX_RETURN_IF_ERROR(z.Save());
  return out;
}

// ZPOPMIN key [count]; ZPOPMAX key [count].
void Zpop(CommandCall& c) {
  const bool max = c.command.name == "zpopmax";
  if (c.argc() > 3) return c.reply.Error(kSyntax);
  int64_t count = -1;
  if (c.argc() == 3) {
    if (!ParseNumber(c.args[2], &count)) return c.reply.Error(kNotInteger);
    if (count < 0) return c.reply.Error(kNotPositive);
  }
  const bool nested = c.reply.protocol() == 3 && count != -1;
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::vector<ScoredMember>> r =
        PopZset(scope, db, c.args[1], max, count < 0 ? 1 : static_cast<uint64_t>(count));
    if (!r.ok()) return r.status();
    if (nested) {
      ReplyScored(reply, *r, true);
    } else {
      reply.Array(2 * r->size());
      for (const ScoredMember& m : *r) {
        reply.Bulk(m.member);
        reply.Double(m.score);
      }
    }
    return Status::OK();
  });
}

// Parses ZMPOP's arguments from args[at] on: numkeys key... MIN|MAX
// [COUNT count]; false after replying the error.
bool ParseZmpop(CommandCall& c, size_t at, std::vector<std::string>* keys, bool* max,
                int64_t* count) {
  int64_t numkeys = 0;
  if (!ParseNumber(c.args[at], &numkeys) || numkeys <= 0) {
    c.reply.Error("ERR numkeys should be greater than 0");
    return false;
  }
  if (static_cast<uint64_t>(numkeys) > c.argc() - at - 2) {
    c.reply.Error(kSyntax);
    return false;
  }
  const size_t where = at + 1 + static_cast<size_t>(numkeys);
  keys->assign(c.args.begin() + static_cast<long>(at) + 1,
               c.args.begin() + static_cast<long>(where));
  *max = EqualsIgnoreCase(c.args[where], "max");
  if (!*max && !EqualsIgnoreCase(c.args[where], "min")) {
    c.reply.Error(kSyntax);
    return false;
  }
  *count = 1;
  bool has_count = false;
  for (size_t j = where + 1; j < c.argc(); ++j) {
    if (!has_count && EqualsIgnoreCase(c.args[j], "count") && j + 1 < c.argc()) {
      if (!ParseNumber(c.args[j + 1], count) || *count <= 0) {
        c.reply.Error("ERR count should be greater than 0");
        return false;
      }
      has_count = true;
      ++j;
    } else {
      c.reply.Error(kSyntax);
      return false;
    }
  }
  return true;
}

// Pops up to `count` members from the first non-empty sorted set of
// `keys` and replies [key, [[member, score], ...]] (both protocols);
// nothing is replied and *served stays false if every key is empty.
// `skip_wrong`: a key of another type is passed over (a parked client is
// served from sorted sets only) instead of answering WRONGTYPE.
Status ZmpopServe(TxnScope& scope, RespReply& reply, int db, const std::vector<std::string>& keys,
                  bool max, int64_t count, bool skip_wrong, bool* served) {
  for (const std::string& key : keys) {
    Result<std::vector<ScoredMember>> r =
        PopZset(scope, db, key, max, static_cast<uint64_t>(count));
    if (!r.ok()) {
      if (skip_wrong && IsWrongType(r.status())) continue;
      return r.status();
    }
    if (r->empty()) continue;
    reply.Array(2);
    reply.Bulk(key);
    reply.Array(r->size());
    for (const ScoredMember& m : *r) {
      reply.Array(2);
      reply.Bulk(m.member);
      reply.Double(m.score);
    }
    *served = true;
    return Status::OK();
  }
  return Status::OK();
}

// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
void Zmpop(CommandCall& c) {
  std::vector<std::string> keys;
  bool max = false;
  int64_t count = 1;
  if (!ParseZmpop(c, 1, &keys, &max, &count)) return;
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    bool served = false;
    PMINDEX_RETURN_IF_ERROR(ZmpopServe(scope, reply, db, keys, max, count, false, &served));
    if (!served) reply.NullArray();
    return Status::OK();
  });
}

// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]: ZMPOP, or
// blocks until a member is added to one of the keys (the lists' blocking
// machinery, resp_list.h).
void Bzmpop(CommandCall& c) {
  int64_t deadline = 0;
  if (!ParseTimeout(c, c.args[1], &deadline)) return;
  std::vector<std::string> keys;
  bool max = false;
  int64_t count = 1;
  if (!ParseZmpop(c, 2, &keys, &max, &count)) return;
  const int db = c.client.db;
  auto body = [db, keys, max, count](bool skip_wrong) -> ServeBody {
    return [db, keys, max, count, skip_wrong](TxnScope& scope, RespReply& reply, bool* served,
                                              std::vector<std::string>*) {
      return ZmpopServe(scope, reply, db, keys, max, count, skip_wrong, served);
    };
  };
  RunBlocking(c, keys, deadline, body(false), body(true), false);
}

// ---------------------------------------------------------------- random

// ZRANDMEMBER key [count [WITHSCORES]]
void Zrandmember(CommandCall& c) {
  int64_t count = 0;
  const bool has_count = c.argc() >= 3;
  bool withscores = false;
  if (has_count) {
    if (!ParseNumber(c.args[2], &count)) return c.reply.Error(kNotInteger);
    if (c.argc() == 4) {
      if (!EqualsIgnoreCase(c.args[3], "withscores")) return c.reply.Error(kSyntax);
      withscores = true;
    } else if (c.argc() > 4) {
      return c.reply.Error(kSyntax);
    }
    if (count == std::numeric_limits<int64_t>::min() ||
        (withscores && count < -std::numeric_limits<int64_t>::max() / 2))
      return c.reply.Error("ERR value is out of range");
  }
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Zset>> z = FindZset(scope, db, c.args[1]);
    if (!z.ok()) return z.status();
    if (!z.value()) {
      if (has_count) {
        reply.Array(0);
      } else {
        reply.NullBulk();
      }
      return Status::OK();
    }
    const uint64_t n = (*z)->size();
    // The ranks to return, ascending, with repetitions for a negative
    // count; read in one forward walk, then shuffled.
    std::vector<uint64_t> ranks;
    const bool repeat = has_count && count < 0;
    const uint64_t want = !has_count ? 1
                          : count < 0 ? static_cast<uint64_t>(-(count + 1)) + 1
                                      : static_cast<uint64_t>(count);
    if (want > kMaxMultiReplyBytes / 48) return Error("ERR reply too large");
    std::uniform_int_distribution<uint64_t> pick(0, n - 1);
    if (repeat) {
      for (uint64_t i = 0; i < want; ++i) ranks.push_back(pick(Rng()));
    } else if (want >= n) {
      for (uint64_t i = 0; i < n; ++i) ranks.push_back(i);
    } else {
      std::unordered_map<uint64_t, bool> chosen;
      // Floyd's sampling of `want` distinct ranks.
      for (uint64_t j = n - want; j < n; ++j) {
        const uint64_t t = std::uniform_int_distribution<uint64_t>(0, j)(Rng());
        if (!chosen.emplace(t, true).second) chosen.emplace(j, true);
      }
      for (const auto& [r, unused] : chosen) ranks.push_back(r);
    }
    std::sort(ranks.begin(), ranks.end());
    std::vector<ScoredMember> out;
    size_t next = 0;
    uint64_t rank = 0;
    if (!ranks.empty()) {
      (*z)->ForEachByScore({}, [&](std::string_view m, double score) {
        while (next < ranks.size() && ranks[next] == rank) {
          out.push_back({std::string(m), score});
          ++next;
        }
        ++rank;
        return next < ranks.size();
      });
    }
    std::shuffle(out.begin(), out.end(), Rng());
    if (!has_count) {
      if (out.empty()) {
        reply.NullBulk();
      } else {
        reply.Bulk(out[0].member);
      }
      return Status::OK();
    }
    ReplyScored(reply, out, withscores);
    return Status::OK();
  });
}

// ---------------------------------------------------------------- set ops

enum class SetOp : uint8_t { kUnion, kInter, kDiff };
enum class Aggregate : uint8_t { kSum, kMin, kMax };

double Combine(Aggregate a, double x, double y) {
  switch (a) {
    case Aggregate::kSum: {
      const double s = x + y;
      return std::isnan(s) ? 0.0 : s;
    }
    case Aggregate::kMin:
      return std::min(x, y);
    case Aggregate::kMax:
      return std::max(x, y);
  }
  return x;
}

// The options of a sorted-set operation after its keys.
struct ZsetOpOptions {
  std::vector<double> weights;
  Aggregate agg = Aggregate::kSum;
  bool withscores = false;
  int64_t limit = 0;
};

// Parses args[from..] for an operation over `nsrcs` keys: WEIGHTS and
// AGGREGATE (not for ZDIFF nor ZINTERCARD), WITHSCORES (not for a STORE
// form nor ZINTERCARD), LIMIT (ZINTERCARD only). The error to reply, or OK.
Status ParseZsetOpOptions(const CommandCall& c, size_t from, SetOp op, bool store, bool card,
                          size_t nsrcs, ZsetOpOptions* o) {
  o->weights.assign(nsrcs, 1.0);
  for (size_t j = from; j < c.argc();) {
    const size_t left = c.argc() - j;
    if (op != SetOp::kDiff && !card && left >= nsrcs + 1 &&
        EqualsIgnoreCase(c.args[j], "weights")) {
      ++j;
      for (size_t w = 0; w < nsrcs; ++w, ++j) {
        if (!ParseScore(c.args[j], &o->weights[w])) return Error("ERR weight value is not a float");
      }
    } else if (op != SetOp::kDiff && !card && left >= 2 &&
               EqualsIgnoreCase(c.args[j], "aggregate")) {
      const std::string_view a = c.args[j + 1];
      if (EqualsIgnoreCase(a, "sum")) {
        o->agg = Aggregate::kSum;
      } else if (EqualsIgnoreCase(a, "min")) {
        o->agg = Aggregate::kMin;
      } else if (EqualsIgnoreCase(a, "max")) {
        o->agg = Aggregate::kMax;
      } else {
        return Error(kSyntax);
      }
      j += 2;
    } else if (!store && !card && EqualsIgnoreCase(c.args[j], "withscores")) {
      o->withscores = true;
      ++j;
    } else if (card && left >= 2 && EqualsIgnoreCase(c.args[j], "limit")) {
      if (!ParseNumber(c.args[j + 1], &o->limit) || o->limit < 0)
        return Error("ERR LIMIT can't be negative");
      j += 2;
    } else {
      return Error(kSyntax);
    }
  }
  return Status::OK();
}

// The members and scores of the union, intersection (ZINTERCARD: members
// only, up to LIMIT) or difference of `srcs`, weighted and aggregated.
std::map<std::string, double> CombineZsets(SetOp op, bool card, const ZsetOpOptions& o,
                                           const std::vector<std::map<std::string, double>>& srcs) {
  auto weighted = [&](size_t i, double s) {
    const double v = s * o.weights[i];
    return std::isnan(v) ? 0.0 : v;
  };
  std::map<std::string, double> result;
  if (op == SetOp::kUnion) {
    for (size_t i = 0; i < srcs.size(); ++i) {
      for (const auto& [m, s] : srcs[i]) {
        auto [it, fresh] = result.emplace(m, weighted(i, s));
        if (!fresh) it->second = Combine(o.agg, it->second, weighted(i, s));
      }
    }
  } else if (op == SetOp::kInter) {
    size_t smallest = 0;
    for (size_t i = 1; i < srcs.size(); ++i)
      if (srcs[i].size() < srcs[smallest].size()) smallest = i;
    for (const auto& [m, s] : srcs[smallest]) {
      bool all = true;
      for (size_t i = 0; i < srcs.size() && all; ++i) all = srcs[i].count(m) > 0;
      if (!all) continue;
      if (card) {
        result.emplace(m, 0);
        if (o.limit > 0 && static_cast<int64_t>(result.size()) >= o.limit) break;
        continue;
      }
      double v = weighted(0, srcs[0].at(m));
      for (size_t i = 1; i < srcs.size(); ++i) v = Combine(o.agg, v, weighted(i, srcs[i].at(m)));
      result.emplace(m, v);
    }
  } else {
    for (const auto& [m, s] : srcs[0]) {
      bool elsewhere = false;
      for (size_t i = 1; i < srcs.size() && !elsewhere; ++i) elsewhere = srcs[i].count(m) > 0;
      if (!elsewhere) result.emplace(m, s);
    }
  }
  return result;
}

// ZUNION/ZINTER/ZDIFF numkeys key... [WEIGHTS w...] [AGGREGATE a]
// [WITHSCORES], their STORE forms (destination first), and ZINTERCARD
// numkeys key... [LIMIT n].
void SetOpCommand(CommandCall& c, SetOp op, bool store, bool card) {
  const size_t numkeys_at = store ? 2 : 1;
  int64_t numkeys = 0;
  if (!ParseNumber(c.args[numkeys_at], &numkeys)) return c.reply.Error(kNotInteger);
  if (numkeys < 1) {
    return c.reply.Error("ERR at least 1 input key is needed for '" + c.command.full_name +
                         "' command");
  }
  if (static_cast<uint64_t>(numkeys) > c.argc() - numkeys_at - 1) return c.reply.Error(kSyntax);
  const size_t first = numkeys_at + 1;
  const size_t end = first + static_cast<size_t>(numkeys);
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    // The keys' types are checked before the options (as Redis does).
    std::vector<std::map<std::string, double>> srcs;
    for (size_t k = first; k < end; ++k) {
      bool present = false;
      Result<std::map<std::string, double>> m = ReadScored(scope, db, c.args[k], &present);
      if (!m.ok()) return m.status();
      srcs.push_back(std::move(m.value()));
    }
    ZsetOpOptions o;
    PMINDEX_RETURN_IF_ERROR(ParseZsetOpOptions(c, end, op, store, card, srcs.size(), &o));
    const std::map<std::string, double> result = CombineZsets(op, card, o, srcs);
    if (card) {
      reply.Integer(static_cast<int64_t>(result.size()));
      return Status::OK();
    }
    std::vector<ScoredMember> sorted;
    sorted.reserve(result.size());
    for (auto& [m, s] : result) sorted.push_back({m, Normalize(s)});
    auto by_score = [](const ScoredMember& a, const ScoredMember& b) { return a.score < b.score; };
    std::stable_sort(sorted.begin(), sorted.end(), by_score);
    if (store) {
      PMINDEX_RETURN_IF_ERROR(StoreZset(scope, db, c.args[1], sorted));
      reply.Integer(static_cast<int64_t>(sorted.size()));
      return Status::OK();
    }
    if (ReplyTooLarge(sorted)) return Error("ERR reply too large");
    ReplyScored(reply, sorted, o.withscores);
    return Status::OK();
  });
}

void Zunionstore(CommandCall& c) { SetOpCommand(c, SetOp::kUnion, true, false); }
void Zinterstore(CommandCall& c) { SetOpCommand(c, SetOp::kInter, true, false); }
void Zdiffstore(CommandCall& c) { SetOpCommand(c, SetOp::kDiff, true, false); }
void Zunion(CommandCall& c) { SetOpCommand(c, SetOp::kUnion, false, false); }
void Zinter(CommandCall& c) { SetOpCommand(c, SetOp::kInter, false, false); }
void Zdiff(CommandCall& c) { SetOpCommand(c, SetOp::kDiff, false, false); }
void Zintercard(CommandCall& c) { SetOpCommand(c, SetOp::kInter, false, true); }

// ---------------------------------------------------------------- ZSCAN

// ZSCAN key cursor [MATCH pattern] [COUNT count]: the cursor is the next
// member to return (encoded as SCAN's cursors are), so a scan returns
// every member present from its start to its end exactly once.
void Zscan(CommandCall& c) {
  if (c.argc() % 2 != 1) return c.reply.Error(kSyntax);
  std::string from;
  if (!CursorToKey(c.args[2], c.items.max_key_bytes(), &from))
    return c.reply.Error("ERR invalid cursor");
  ScanOptions o;
  if (!ParseScanOptions(c, 3, false, &o)) return;
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Zset>> z = FindZset(scope, db, c.args[1]);
    if (!z.ok()) return z.status();
    std::vector<ScoredMember> out;
    std::string next;
    if (z.value()) {
      std::vector<std::pair<std::string, std::string>> batch;
      const size_t n = (*z)->coll().Range(kByMember, from, std::nullopt, o.count + 1, &batch);
      if (n > o.count) {
        next = batch.back().first;
        batch.pop_back();
      }
      for (auto& [m, v] : batch) {
        if (!o.pattern.empty() && o.pattern != "*" && !GlobMatch(o.pattern, m)) continue;
        out.push_back({m, v.size() == kScoreBytes ? FromOrderedDouble(v) : 0.0});
      }
    }
    reply.Array(2);
    reply.Bulk(KeyToCursor(next));
    reply.Array(2 * out.size());
    for (const ScoredMember& m : out) {
      reply.Bulk(m.member);
      reply.Bulk(DoubleText(m.score));
    }
    return Status::OK();
  });
}

}  // namespace

Result<std::vector<ScoredMember>> PopZset(TxnScope& scope, int db, std::string_view key, bool max,
                                          uint64_t count) {
  Result<std::optional<Zset>> z = FindZset(scope, db, key);
  if (!z.ok()) return z.status();
  if (!z.value()) return std::vector<ScoredMember>();
  return PopFrom(**z, max, count);
}

namespace {

// The sorted-set commands (registered by RegisterZsetCommands).
const CommandSpec kZsetCommands[] = {
    {"zadd", -4, kWrite | kDenyOom | kFast, 1, 1, 1, "RW UPDATE",
     "Adds members to a sorted set, or updates their scores.", Zadd},
    {"zincrby", 4, kWrite | kDenyOom | kFast, 1, 1, 1, "RW UPDATE",
     "Increments the score of a member of a sorted set.", Zadd},
    {"zrem", -3, kWrite | kFast, 1, 1, 1, "RW DELETE", "Removes members from a sorted set.", Zrem},
    {"zscore", 3, kReadonly | kFast, 1, 1, 1, "RO ACCESS",
     "Returns the score of a member of a sorted set.", Zscore},
    {"zmscore", -3, kReadonly | kFast, 1, 1, 1, "RO ACCESS",
     "Returns the scores of members of a sorted set.", Zscore},
    {"zcard", 2, kReadonly | kFast, 1, 1, 1, "RO", "Returns the number of members of a sorted set.",
     Zcard},
    {"zcount", 4, kReadonly | kFast, 1, 1, 1, "RO ACCESS",
     "Counts the members of a sorted set within a score range.", Zcount},
    {"zlexcount", 4, kReadonly | kFast, 1, 1, 1, "RO ACCESS",
     "Counts the members of a sorted set within a lexicographical range.", Zcount},
    {"zrange", -4, kReadonly, 1, 1, 1, "RO ACCESS",
     "Returns members of a sorted set within a range of indexes.", Zrange},
    {"zrangestore", -5, kWrite | kDenyOom, 1, 2, 1, "OW UPDATE",
     "Stores a range of members of a sorted set in a key.", Zrangestore},
    {"zrevrange", -4, kReadonly, 1, 1, 1, "RO ACCESS",
     "Returns members of a sorted set within a range of indexes in reverse order.", Zrevrange},
    {"zrangebyscore", -4, kReadonly, 1, 1, 1, "RO ACCESS",
     "Returns members of a sorted set within a range of scores.", Zrangebyscore},
    {"zrevrangebyscore", -4, kReadonly, 1, 1, 1, "RO ACCESS",
     "Returns members of a sorted set within a range of scores in reverse order.",
     Zrevrangebyscore},
    {"zrangebylex", -4, kReadonly, 1, 1, 1, "RO ACCESS",
     "Returns members of a sorted set within a lexicographical range.", Zrangebylex},
    {"zrevrangebylex", -4, kReadonly, 1, 1, 1, "RO ACCESS",
     "Returns members of a sorted set within a lexicographical range in reverse order.",
     Zrevrangebylex},
    {"zrank", 3, kReadonly | kFast, 1, 1, 1, "RO ACCESS",
     "Returns the index of a member in a sorted set.", Zrank},
    {"zrevrank", 3, kReadonly | kFast, 1, 1, 1, "RO ACCESS",
     "Returns the index of a member in a sorted set ordered by descending scores.", Zrank},
    {"zpopmin", -2, kWrite | kFast, 1, 1, 1, "RW ACCESS DELETE",
     "Removes and returns the members with the lowest scores.", Zpop},
    {"zpopmax", -2, kWrite | kFast, 1, 1, 1, "RW ACCESS DELETE",
     "Removes and returns the members with the highest scores.", Zpop},
    {"zmpop", -4, kWrite | kMovableKeys, 0, 0, 0, "RW ACCESS DELETE",
     "Removes and returns the members with the lowest or highest scores of the first non-empty "
     "sorted set.",
     Zmpop},
    {"bzmpop", -5, kWrite | kBlocking | kNoScript | kMovableKeys, 0, 0, 0, "RW ACCESS DELETE",
     "Pops members of the lowest or highest scores of the first non-empty sorted set, or blocks "
     "until one is added.",
     Bzmpop},
    {"zrandmember", -2, kReadonly, 1, 1, 1, "RO ACCESS", "Returns random members of a sorted set.",
     Zrandmember},
    {"zremrangebyscore", 4, kWrite, 1, 1, 1, "RW DELETE",
     "Removes the members of a sorted set within a range of scores.", Zremrange},
    {"zremrangebyrank", 4, kWrite, 1, 1, 1, "RW DELETE",
     "Removes the members of a sorted set within a range of indexes.", Zremrange},
    {"zremrangebylex", 4, kWrite, 1, 1, 1, "RW DELETE",
     "Removes the members of a sorted set within a lexicographical range.", Zremrange},
    {"zunionstore", -4, kWrite | kDenyOom | kMovableKeys, 1, 1, 1, "OW UPDATE",
     "Stores the union of sorted sets in a key.", Zunionstore},
    {"zinterstore", -4, kWrite | kDenyOom | kMovableKeys, 1, 1, 1, "OW UPDATE",
     "Stores the intersection of sorted sets in a key.", Zinterstore},
    {"zdiffstore", -4, kWrite | kDenyOom | kMovableKeys, 1, 1, 1, "OW UPDATE",
     "Stores the difference of sorted sets in a key.", Zdiffstore},
    {"zunion", -3, kReadonly | kMovableKeys, 0, 0, 0, "RO ACCESS",
     "Returns the union of sorted sets.", Zunion},
    {"zinter", -3, kReadonly | kMovableKeys, 0, 0, 0, "RO ACCESS",
     "Returns the intersection of sorted sets.", Zinter},
    {"zdiff", -3, kReadonly | kMovableKeys, 0, 0, 0, "RO ACCESS",
     "Returns the difference of sorted sets.", Zdiff},
    {"zintercard", -3, kReadonly | kMovableKeys, 0, 0, 0, "RO ACCESS",
     "Returns the number of members of the intersection of sorted sets.", Zintercard},
    {"zscan", -3, kReadonly, 1, 1, 1, "RO ACCESS",
     "Iterates over the members and scores of a sorted set.", Zscan},
};

}  // namespace

void RegisterZsetCommands(CommandTable& t) {
  AddCommands(t, kZsetCommands, "sorted_set", "sortedset");
}

}  // namespace pmindex::server
