// RESP sets over the collection layer (collections.h): SADD, SREM,
// SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP, SRANDMEMBER, SMOVE,
// SINTER, SUNION, SDIFF and their STORE forms, SINTERCARD and SSCAN, with
// Redis 7.0's arguments, errors and replies (RESP3: sets where Redis
// replies sets).
//
// A member m is one element record 'm' m -> "" of the collection; the
// count is the number of members. Every command is one store transaction
// (RunInTransaction), durable before its reply. Costs, n the members: one
// member's SADD, SREM, SISMEMBER, SMOVE: O(log n) store work; SMEMBERS,
// the set operations: O(n) per set read; SPOP and SRANDMEMBER pick ranks
// uniformly and read the members up to the highest rank picked (O(n)
// store work at worst: the store has no order statistics).
#include <algorithm>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "server/collections.h"
#include "server/numbers.h"
#include "server/resp_command.h"
#include "server/resp_protocol.h"
#include "server/resp_transaction.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

constexpr char kMember = sub_space::kSetMember;
// Members read per Range call when a command walks a set: kFirstBatch
// first (SPOP and SRANDMEMBER often stop early), then four times more
// each call, up to kBatch.
constexpr size_t kFirstBatch = 16;
constexpr size_t kBatch = 256;
constexpr std::string_view kNotPositive = "ERR value is out of range, must be positive";

Status Error(std::string_view message) { return Status::InvalidArgument(message); }

std::mt19937_64& Rng() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

// The set at `key`, or nullopt if absent; WRONGTYPE as an error.
Result<std::optional<Collection>> FindSet(TxnScope& scope, int db, std::string_view key) {
  Result<Collection> c = Collection::Find(scope, db, key, CollectionType::kSet);
  if (c.ok()) return std::optional<Collection>(std::move(c.value()));
  if (c.status().is_not_found()) return std::optional<Collection>();
  return c.status();
}

// Calls fn(member) for the members from `from` on, ascending, until fn
// returns false.
template <class F>
void ForEachMember(Collection& c, const F& fn, std::string from = {}) {
  std::vector<std::pair<std::string, std::string>> batch;
  for (size_t want = kFirstBatch;; want = std::min(kBatch, want * 4)) {
    batch.clear();
    const size_t n = c.Range(kMember, from, std::nullopt, want, &batch);
    for (const auto& kv : batch)
      if (!fn(kv.first)) return;
    if (n < want) return;
    from = batch.back().first;
    from.push_back('\0');
  }
}

std::set<std::string> AllMembers(Collection& c) {
  std::set<std::string> out;
  ForEachMember(c, [&](const std::string& m) {
    out.insert(m);
    return true;
  });
  return out;
}

Result<bool> IsMember(Collection& c, std::string_view m) {
  Result<std::string> r = c.Get(kMember, m);
  if (r.ok()) return true;
  if (r.status().is_not_found()) return false;
  return r.status();
}

bool TooLarge(const std::set<std::string>& members) {
  size_t bytes = 0;
  for (const std::string& m : members) bytes += m.size() + 16;
  return bytes > kMaxMultiReplyBytes;
}

void ReplySet(RespReply& r, const std::set<std::string>& members) {
  r.Set(members.size());
  for (const std::string& m : members) r.Bulk(m);
}

// `want` members at uniformly random ranks: distinct (repeat false, want
// <= n) or with repetitions, in random order; one forward walk up to the
// highest rank picked.
std::vector<std::string> RandomMembers(Collection& c, uint64_t want, bool repeat) {
  const uint64_t n = c.count();
  std::vector<uint64_t> ranks;
  if (n == 0 || want == 0) return {};
  if (repeat) {
    std::uniform_int_distribution<uint64_t> pick(0, n - 1);
    for (uint64_t i = 0; i < want; ++i) ranks.push_back(pick(Rng()));
  } else if (want >= n) {
    for (uint64_t i = 0; i < n; ++i) ranks.push_back(i);
  } else {
    // Floyd's sampling of `want` distinct ranks.
    std::unordered_set<uint64_t> chosen;
    for (uint64_t j = n - want; j < n; ++j) {
      const uint64_t t = std::uniform_int_distribution<uint64_t>(0, j)(Rng());
      if (!chosen.insert(t).second) chosen.insert(j);
    }
    ranks.assign(chosen.begin(), chosen.end());
  }
  std::sort(ranks.begin(), ranks.end());
  std::vector<std::string> out;
  size_t next = 0;
  uint64_t rank = 0;
  ForEachMember(c, [&](const std::string& m) {
    while (next < ranks.size() && ranks[next] == rank) {
      out.push_back(m);
      ++next;
    }
    ++rank;
    return next < ranks.size();
  });
  std::shuffle(out.begin(), out.end(), Rng());
  return out;
}

// ---------------------------------------------------------------- commands

// SADD key member [member ...]
void Sadd(CommandCall& c) {
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<Collection> s = Collection::FindOrCreate(scope, db, c.args[1], CollectionType::kSet);
    if (!s.ok()) return s.status();
    for (size_t i = 2; i < c.argc(); ++i) {
      if (c.args[i].size() > s->max_member_bytes())
        return Error("ERR member too long for this server's store");
    }
    int64_t added = 0;
    for (size_t i = 2; i < c.argc(); ++i) {
      Result<bool> present = IsMember(*s, c.args[i]);
      if (!present.ok()) return present.status();
      if (*present) continue;
      PMINDEX_RETURN_IF_ERROR(s->Put(kMember, c.args[i], ""));
      s->add_count(1);
      ++added;
    }
    if (added > 0) PMINDEX_RETURN_IF_ERROR(s->Save());
    reply.Integer(added);
    return Status::OK();
  });
}

// SREM key member [member ...]
void Srem(CommandCall& c) {
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> s = FindSet(scope, db, c.args[1]);
    if (!s.ok()) return s.status();
    int64_t removed = 0;
    if (s.value()) {
      for (size_t i = 2; i < c.argc(); ++i) {
        Result<bool> r = (*s)->Remove(kMember, c.args[i]);
        if (!r.ok()) return r.status();
        if (!*r) continue;
        (*s)->add_count(-1);
        ++removed;
      }
      if (removed > 0) PMINDEX_RETURN_IF_ERROR((*s)->Save());
    }
    reply.Integer(removed);
    return Status::OK();
  });
}

void Smembers(CommandCall& c) {
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> s = FindSet(scope, db, c.args[1]);
    if (!s.ok()) return s.status();
    std::set<std::string> members;
    if (s.value()) members = AllMembers(**s);
    if (TooLarge(members)) return Error("ERR reply too large");
    ReplySet(reply, members);
    return Status::OK();
  });
}

// SISMEMBER key member; SMISMEMBER key member [member ...]
void Sismember(CommandCall& c) {
  const bool multi = c.command.name == "smismember";
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> s = FindSet(scope, db, c.args[1]);
    if (!s.ok()) return s.status();
    if (multi) reply.Array(c.argc() - 2);
    for (size_t i = 2; i < c.argc(); ++i) {
      bool in = false;
      if (s.value()) {
        Result<bool> r = IsMember(**s, c.args[i]);
        if (!r.ok()) return r.status();
        in = *r;
      }
      reply.Integer(in ? 1 : 0);
    }
    return Status::OK();
  });
}

void Scard(CommandCall& c) {
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> s = FindSet(scope, db, c.args[1]);
    if (!s.ok()) return s.status();
    reply.Integer(s.value() ? static_cast<int64_t>((*s)->count()) : 0);
    return Status::OK();
  });
}

// SPOP key [count]
void Spop(CommandCall& c) {
  if (c.argc() > 3) return c.reply.Error(kSyntax);
  int64_t count = -1;
  if (c.argc() == 3) {
    if (!ParseNumber(c.args[2], &count)) return c.reply.Error(kNotInteger);
    if (count < 0) return c.reply.Error(kNotPositive);
  }
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> s = FindSet(scope, db, c.args[1]);
    if (!s.ok()) return s.status();
    if (!s.value()) {
      if (count < 0) {
        reply.NullBulk();
      } else {
        reply.Set(0);
      }
      return Status::OK();
    }
    Collection& set = **s;
    const uint64_t want = count < 0 ? 1 : static_cast<uint64_t>(count);
    if (want > kMaxMultiReplyBytes / 16 && want < set.count())
      return Error("ERR reply too large");
    std::vector<std::string> popped = RandomMembers(set, want, false);
    for (const std::string& m : popped) {
      Result<bool> r = set.Remove(kMember, m);
      if (!r.ok()) return r.status();
      set.add_count(-1);
    }
    if (!popped.empty()) PMINDEX_RETURN_IF_ERROR(set.Save());
    if (count < 0) {
      reply.Bulk(popped.front());
      return Status::OK();
    }
    reply.Set(popped.size());
    for (const std::string& m : popped) reply.Bulk(m);
    return Status::OK();
  });
}

// SRANDMEMBER key [count]
void Srandmember(CommandCall& c) {
  if (c.argc() > 3) return c.reply.Error(kSyntax);
  const bool has_count = c.argc() == 3;
  int64_t count = 1;
  if (has_count) {
    if (!ParseNumber(c.args[2], &count)) return c.reply.Error(kNotInteger);
    if (count == std::numeric_limits<int64_t>::min())
      return c.reply.Error("ERR value is out of range");
  }
  const bool repeat = count < 0;
  const uint64_t want = repeat ? static_cast<uint64_t>(-count) : static_cast<uint64_t>(count);
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> s = FindSet(scope, db, c.args[1]);
    if (!s.ok()) return s.status();
    if (!s.value()) {
      if (has_count) {
        reply.Array(0);
      } else {
        reply.NullBulk();
      }
      return Status::OK();
    }
    if (want > kMaxMultiReplyBytes / 16 && (repeat || want < (*s)->count()))
      return Error("ERR reply too large");
    std::vector<std::string> out = RandomMembers(**s, want, repeat);
    if (!has_count) {
      reply.Bulk(out.front());
      return Status::OK();
    }
    reply.BulkArray(out);
    return Status::OK();
  });
}

// SMOVE source destination member
void Smove(CommandCall& c) {
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> src = FindSet(scope, db, c.args[1]);
    if (!src.ok()) return src.status();
    // The destination's type is checked even when nothing moves.
    Result<std::optional<Collection>> dst_found = FindSet(scope, db, c.args[2]);
    if (!dst_found.ok()) return dst_found.status();
    if (!src.value()) {
      reply.Integer(0);
      return Status::OK();
    }
    Result<bool> in = IsMember(**src, c.args[3]);
    if (!in.ok()) return in.status();
    if (!*in) {
      reply.Integer(0);
      return Status::OK();
    }
    if (c.args[1] == c.args[2]) {
      reply.Integer(1);
      return Status::OK();
    }
    Result<bool> removed = (*src)->Remove(kMember, c.args[3]);
    if (!removed.ok()) return removed.status();
    (*src)->add_count(-1);
    PMINDEX_RETURN_IF_ERROR((*src)->Save());
    std::optional<Collection> dst = std::move(dst_found.value());
    if (!dst) {
      Result<Collection> created = Collection::Create(scope, db, c.args[2], CollectionType::kSet);
      if (!created.ok()) return created.status();
      dst.emplace(std::move(created.value()));
    }
    Result<bool> there = IsMember(*dst, c.args[3]);
    if (!there.ok()) return there.status();
    if (!*there) {
      PMINDEX_RETURN_IF_ERROR(dst->Put(kMember, c.args[3], ""));
      dst->add_count(1);
      PMINDEX_RETURN_IF_ERROR(dst->Save());
    }
    reply.Integer(1);
    return Status::OK();
  });
}

enum class SetOp : uint8_t { kUnion, kInter, kDiff };

// The intersection of `sets` (empty if one is missing), read by probing
// the others with each member of the smallest; stops at `limit` members
// when limit > 0 (SINTERCARD's LIMIT).
Status IntersectSets(std::vector<std::optional<Collection>>& sets, int64_t limit,
                     std::set<std::string>* result) {
  bool any_empty = false;
  size_t smallest = 0;
  for (size_t i = 0; i < sets.size(); ++i) {
    if (!sets[i]) any_empty = true;
    if (!any_empty && sets[i]->count() < sets[smallest]->count()) smallest = i;
  }
  if (any_empty) return Status::OK();
  Status failed;
  ForEachMember(*sets[smallest], [&](const std::string& m) {
    for (size_t i = 0; i < sets.size(); ++i) {
      if (i == smallest) continue;
      Result<bool> in = IsMember(*sets[i], m);
      if (!in.ok()) {
        failed = in.status();
        return false;
      }
      if (!*in) return true;
    }
    result->insert(m);
    return !(limit > 0 && static_cast<int64_t>(result->size()) >= limit);
  });
  return failed;
}

// The union of `sets` (op kUnion) or the first minus the others (kDiff).
void UniteOrSubtract(SetOp op, std::vector<std::optional<Collection>>& sets,
                     std::set<std::string>* result) {
  if (op == SetOp::kUnion) {
    for (auto& s : sets) {
      if (!s) continue;
      ForEachMember(*s, [&](const std::string& m) {
        result->insert(m);
        return true;
      });
    }
    return;
  }
  if (!sets[0]) return;
  *result = AllMembers(*sets[0]);
  for (size_t i = 1; i < sets.size() && !result->empty(); ++i) {
    if (!sets[i]) continue;
    ForEachMember(*sets[i], [&](const std::string& m) {
      result->erase(m);
      return true;
    });
  }
}

// SINTER/SUNION/SDIFF key [key ...], their STORE forms (destination
// first), SINTERCARD numkeys key [key ...] [LIMIT limit]. Every key's type
// is checked before anything is computed.
void SetOpCommand(CommandCall& c, SetOp op, bool store, bool card) {
  size_t first = store ? 2 : 1, end = c.argc();
  int64_t limit = 0;
  if (card) {
    int64_t numkeys = 0;
    if (!ParseNumber(c.args[1], &numkeys) || numkeys <= 0)
      return c.reply.Error("ERR numkeys should be greater than 0");
    if (static_cast<uint64_t>(numkeys) > c.argc() - 2)
      return c.reply.Error("ERR Number of keys can't be greater than number of args");
    first = 2;
    end = first + static_cast<size_t>(numkeys);
    for (size_t j = end; j < c.argc(); j += 2) {
      if (j + 1 < c.argc() && EqualsIgnoreCase(c.args[j], "limit")) {
        if (!ParseNumber(c.args[j + 1], &limit) || limit < 0)
          return c.reply.Error("ERR LIMIT can't be negative");
      } else {
        return c.reply.Error(kSyntax);
      }
    }
  }
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    std::vector<std::optional<Collection>> sets;
    for (size_t k = first; k < end; ++k) {
      Result<std::optional<Collection>> s = FindSet(scope, db, c.args[k]);
      if (!s.ok()) return s.status();
      sets.push_back(std::move(s.value()));
    }
    std::set<std::string> result;
    if (op == SetOp::kInter) {
      PMINDEX_RETURN_IF_ERROR(IntersectSets(sets, card ? limit : 0, &result));
    } else {
      UniteOrSubtract(op, sets, &result);
    }
    if (card) {
      reply.Integer(static_cast<int64_t>(result.size()));
      return Status::OK();
    }
    if (store) {
      Result<bool> deleted = DeleteKey(scope, db, c.args[1]);
      if (!deleted.ok()) return deleted.status();
      if (!result.empty()) {
        Result<Collection> d = Collection::Create(scope, db, c.args[1], CollectionType::kSet);
        if (!d.ok()) return d.status();
        for (const std::string& m : result) PMINDEX_RETURN_IF_ERROR(d->Put(kMember, m, ""));
        d->set_count(result.size());
        PMINDEX_RETURN_IF_ERROR(d->Save());
      }
      reply.Integer(static_cast<int64_t>(result.size()));
      return Status::OK();
    }
    if (TooLarge(result)) return Error("ERR reply too large");
    ReplySet(reply, result);
    return Status::OK();
  });
}

void Sinter(CommandCall& c) { SetOpCommand(c, SetOp::kInter, false, false); }
void Sunion(CommandCall& c) { SetOpCommand(c, SetOp::kUnion, false, false); }
void Sdiff(CommandCall& c) { SetOpCommand(c, SetOp::kDiff, false, false); }
void Sinterstore(CommandCall& c) { SetOpCommand(c, SetOp::kInter, true, false); }
void Sunionstore(CommandCall& c) { SetOpCommand(c, SetOp::kUnion, true, false); }
void Sdiffstore(CommandCall& c) { SetOpCommand(c, SetOp::kDiff, true, false); }
void Sintercard(CommandCall& c) { SetOpCommand(c, SetOp::kInter, false, true); }

// SSCAN key cursor [MATCH pattern] [COUNT count]: the cursor is the next
// member (encoded as SCAN's cursors are), so every member present from a
// scan's start to its end is returned exactly once.
void Sscan(CommandCall& c) {
  if (c.argc() % 2 != 1) return c.reply.Error(kSyntax);
  std::string from;
  if (!CursorToKey(c.args[2], c.items.max_key_bytes(), &from))
    return c.reply.Error("ERR invalid cursor");
  ScanOptions o;
  if (!ParseScanOptions(c, 3, false, &o)) return;
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> s = FindSet(scope, db, c.args[1]);
    if (!s.ok()) return s.status();
    std::vector<std::string> out;
    std::string next;
    if (s.value()) {
      std::vector<std::pair<std::string, std::string>> batch;
      const size_t n = (*s)->Range(kMember, from, std::nullopt, o.count + 1, &batch);
      if (n > o.count) {
        next = batch.back().first;
        batch.pop_back();
      }
      for (auto& kv : batch) {
        if (!o.pattern.empty() && o.pattern != "*" && !GlobMatch(o.pattern, kv.first)) continue;
        out.push_back(std::move(kv.first));
      }
    }
    reply.Array(2);
    reply.Bulk(KeyToCursor(next));
    reply.BulkArray(out);
    return Status::OK();
  });
}

// The set commands (registered by RegisterSetCommands).
const CommandSpec kSetCommands[] = {
    {"sadd", -3, kWrite | kDenyOom | kFast, 1, 1, 1, "RW INSERT", "Adds members to a set.", Sadd},
    {"srem", -3, kWrite | kFast, 1, 1, 1, "RW DELETE", "Removes members from a set.", Srem},
    {"smembers", 2, kReadonly, 1, 1, 1, "RO ACCESS", "Returns all members of a set.", Smembers},
    {"sismember", 3, kReadonly | kFast, 1, 1, 1, "RO",
     "Determines whether a member belongs to a set.", Sismember},
    {"smismember", -3, kReadonly | kFast, 1, 1, 1, "RO",
     "Determines whether members belong to a set.", Sismember},
    {"scard", 2, kReadonly | kFast, 1, 1, 1, "RO", "Returns the number of members in a set.",
     Scard},
    {"spop", -2, kWrite | kFast, 1, 1, 1, "RW ACCESS DELETE",
     "Removes and returns random members of a set.", Spop},
    {"srandmember", -2, kReadonly, 1, 1, 1, "RO ACCESS", "Returns random members of a set.",
     Srandmember},
    {"smove", 4, kWrite | kFast, 1, 2, 1, "RW ACCESS DELETE",
     "Moves a member from one set to another.", Smove},
    {"sinter", -2, kReadonly, 1, -1, 1, "RO ACCESS", "Returns the intersection of sets.", Sinter},
    {"sunion", -2, kReadonly, 1, -1, 1, "RO ACCESS", "Returns the union of sets.", Sunion},
    {"sdiff", -2, kReadonly, 1, -1, 1, "RO ACCESS", "Returns the difference of sets.", Sdiff},
    {"sinterstore", -3, kWrite | kDenyOom, 1, -1, 1, "OW UPDATE",
     "Stores the intersection of sets in a key.", Sinterstore},
    {"sunionstore", -3, kWrite | kDenyOom, 1, -1, 1, "OW UPDATE",
     "Stores the union of sets in a key.", Sunionstore},
    {"sdiffstore", -3, kWrite | kDenyOom, 1, -1, 1, "OW UPDATE",
     "Stores the difference of sets in a key.", Sdiffstore},
    {"sintercard", -3, kReadonly | kMovableKeys, 0, 0, 0, "RO ACCESS",
     "Returns the number of members of the intersection of sets.", Sintercard},
    {"sscan", -3, kReadonly, 1, 1, 1, "RO ACCESS", "Iterates over the members of a set.", Sscan},
};

}  // namespace

void RegisterSetCommands(CommandTable& t) { AddCommands(t, kSetCommands, "set", "set"); }

}  // namespace pmindex::server
