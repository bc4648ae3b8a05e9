// RESP hashes (Redis's "hash" group) over the collection layer
// (collections.h): a hash is a metadata record and one element record per
// field, sub-space 'f', field -> value. Every command is one store
// transaction (RunInTransaction), durable before its reply; reading,
// setting or deleting one field is O(log n) store work, HGETALL, HKEYS,
// HVALS one range scan. Replies are Redis 7.0's on RESP2 and RESP3
// (HGETALL a map, HRANDFIELD WITHVALUES pairs on RESP3).
//
// HRANDFIELD picks fields uniformly from a hash of up to kUniformLimit
// fields (it reads them all); above that, it ranges from random points of
// the field space, which favours a field that follows a wide gap in the
// field order (as RANDOMKEY does for keys).
#include <algorithm>
#include <cmath>
#include <random>
#include <unordered_set>

#include "server/collections.h"
#include "server/numbers.h"
#include "server/protocol.h"
#include "server/resp_command.h"
#include "server/resp_protocol.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

constexpr char kField = sub_space::kHashField;
constexpr CollectionType kHash = CollectionType::kHash;
constexpr size_t kBatch = 512;
constexpr size_t kUniformLimit = 4096;

int Db(const CommandCall& c) { return c.client.db; }

// The live hash at key, or nullopt if absent; WRONGTYPE and store errors
// as Status.
Result<std::optional<Collection>> FindHash(TxnScope& scope, int db, std::string_view key) {
  Result<Collection> h = Collection::Find(scope, db, key, kHash);
  if (h.ok()) return std::optional<Collection>(std::move(*h));
  if (h.status().is_not_found()) return std::optional<Collection>();
  return h.status();
}

// Every field of `h`, in field order (InvalidArgument "ERR reply too
// large" beyond kMaxMultiReplyBytes).
Status AllFields(Collection& h, std::vector<std::pair<std::string, std::string>>* out) {
  std::string from;
  size_t bytes = 0;
  for (;;) {
    const size_t before = out->size();
    const size_t n = h.Range(kField, from, std::nullopt, kBatch, out);
    for (size_t i = before; i < out->size(); ++i)
      bytes += (*out)[i].first.size() + (*out)[i].second.size() + 32;
    if (bytes > kMaxMultiReplyBytes) return Status::InvalidArgument("ERR reply too large");
    if (n < kBatch) return Status::OK();
    from = out->back().first;
    from.push_back('\0');
  }
}

// HSET key field value [field value ...] (replies how many fields are
// new) and HMSET (replies OK).
void HSet(CommandCall& c) {
  if (c.argc() % 2 != 0) {
    return c.reply.Error("ERR wrong number of arguments for '" + c.command.full_name + "' command");
  }
  const bool hmset = c.command.name == "hmset";
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<Collection> h = Collection::FindOrCreate(scope, Db(c), c.args[1], kHash);
    if (!h.ok()) return h.status();
    // Checked before anything is written.
    for (size_t i = 2; i < c.argc(); i += 2) {
      if (c.args[i].size() > h->max_member_bytes() || c.args[i + 1].size() > h->max_value_bytes())
        return Status::InvalidArgument("ERR hash field or value too long");
    }
    int64_t added = 0;
    for (size_t i = 2; i < c.argc(); i += 2) {
      Result<std::string> old = h->Get(kField, c.args[i]);
      if (!old.ok() && !old.status().is_not_found()) return old.status();
      if (!old.ok()) ++added;
      PMINDEX_RETURN_IF_ERROR(h->Put(kField, c.args[i], c.args[i + 1]));
    }
    h->add_count(added);
    PMINDEX_RETURN_IF_ERROR(h->Save());
    if (hmset) {
      reply.Simple("OK");
    } else {
      reply.Integer(added);
    }
    return Status::OK();
  });
}

void HSetNx(CommandCall& c) {
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<Collection> h = Collection::FindOrCreate(scope, Db(c), c.args[1], kHash);
    if (!h.ok()) return h.status();
    if (c.args[2].size() > h->max_member_bytes() || c.args[3].size() > h->max_value_bytes())
      return Status::InvalidArgument("ERR hash field or value too long");
    Result<std::string> old = h->Get(kField, c.args[2]);
    if (old.ok()) {
      reply.Integer(0);
      return Status::OK();
    }
    if (!old.status().is_not_found()) return old.status();
    PMINDEX_RETURN_IF_ERROR(h->Put(kField, c.args[2], c.args[3]));
    h->add_count(1);
    PMINDEX_RETURN_IF_ERROR(h->Save());
    reply.Integer(1);
    return Status::OK();
  });
}

void HGet(CommandCall& c) {
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> h = FindHash(scope, Db(c), c.args[1]);
    if (!h.ok()) return h.status();
    if (!*h) {
      reply.NullBulk();
      return Status::OK();
    }
    Result<std::string> v = (*h)->Get(kField, c.args[2]);
    if (v.ok()) {
      reply.Bulk(*v);
    } else if (v.status().is_not_found()) {
      reply.NullBulk();
    } else {
      return v.status();
    }
    return Status::OK();
  });
}

void HMGet(CommandCall& c) {
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> h = FindHash(scope, Db(c), c.args[1]);
    if (!h.ok()) return h.status();
    reply.Array(c.argc() - 2);
    for (size_t i = 2; i < c.argc(); ++i) {
      if (!*h) {
        reply.NullBulk();
        continue;
      }
      Result<std::string> v = (*h)->Get(kField, c.args[i]);
      if (v.ok()) {
        reply.Bulk(*v);
      } else if (v.status().is_not_found()) {
        reply.NullBulk();
      } else {
        return v.status();
      }
      if (reply.out()->size() > kMaxMultiReplyBytes)
        return Status::InvalidArgument("ERR reply too large");
    }
    return Status::OK();
  });
}

// HGETALL (a map), HKEYS, HVALS.
void HGetAll(CommandCall& c) {
  const std::string_view name = c.command.name;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> h = FindHash(scope, Db(c), c.args[1]);
    if (!h.ok()) return h.status();
    std::vector<std::pair<std::string, std::string>> all;
    if (*h) PMINDEX_RETURN_IF_ERROR(AllFields(**h, &all));
    if (name == "hgetall") {
      reply.Map(all.size());
      for (const auto& [f, v] : all) {
        reply.Bulk(f);
        reply.Bulk(v);
      }
    } else {
      reply.Array(all.size());
      for (const auto& [f, v] : all) reply.Bulk(name == "hkeys" ? f : v);
    }
    return Status::OK();
  });
}

void HDel(CommandCall& c) {
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> h = FindHash(scope, Db(c), c.args[1]);
    if (!h.ok()) return h.status();
    int64_t removed = 0;
    if (*h) {
      for (size_t i = 2; i < c.argc(); ++i) {
        Result<bool> r = (*h)->Remove(kField, c.args[i]);
        if (!r.ok()) return r.status();
        removed += *r;
      }
      if (removed > 0) {
        (*h)->add_count(-removed);
        PMINDEX_RETURN_IF_ERROR((*h)->Save());  // removes the key if it is now empty
      }
    }
    reply.Integer(removed);
    return Status::OK();
  });
}

void HLen(CommandCall& c) {
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> h = FindHash(scope, Db(c), c.args[1]);
    if (!h.ok()) return h.status();
    reply.Integer(*h ? static_cast<int64_t>((*h)->count()) : 0);
    return Status::OK();
  });
}

// HEXISTS (1 or 0) and HSTRLEN (the value's length, 0 if absent).
void HExists(CommandCall& c) {
  const bool strlen = c.command.name == "hstrlen";
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> h = FindHash(scope, Db(c), c.args[1]);
    if (!h.ok()) return h.status();
    int64_t n = 0;
    if (*h) {
      Result<std::string> v = (*h)->Get(kField, c.args[2]);
      if (!v.ok() && !v.status().is_not_found()) return v.status();
      if (v.ok()) n = strlen ? static_cast<int64_t>(v->size()) : 1;
    }
    reply.Integer(n);
    return Status::OK();
  });
}

void HIncrBy(CommandCall& c) {
  int64_t incr = 0;
  if (!ParseNumber(c.args[3], &incr)) return c.reply.Error(kNotInteger);
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<Collection> h = Collection::FindOrCreate(scope, Db(c), c.args[1], kHash);
    if (!h.ok()) return h.status();
    if (c.args[2].size() > h->max_member_bytes())
      return Status::InvalidArgument("ERR hash field or value too long");
    int64_t value = 0;
    Result<std::string> old = h->Get(kField, c.args[2]);
    if (old.ok()) {
      if (!ParseNumber(*old, &value))
        return Status::InvalidArgument("ERR hash value is not an integer");
    } else if (!old.status().is_not_found()) {
      return old.status();
    }
    if (__builtin_add_overflow(value, incr, &value))
      return Status::InvalidArgument("ERR increment or decrement would overflow");
    PMINDEX_RETURN_IF_ERROR(h->Put(kField, c.args[2], std::to_string(value)));
    if (!old.ok()) h->add_count(1);
    PMINDEX_RETURN_IF_ERROR(h->Save());
    reply.Integer(value);
    return Status::OK();
  });
}

void HIncrByFloat(CommandCall& c) {
  long double incr = 0;
  if (!ParseLongDouble(c.args[3], &incr)) return c.reply.Error("ERR value is not a valid float");
  if (std::isnan(incr) || std::isinf(incr)) return c.reply.Error("ERR value is NaN or Infinity");
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<Collection> h = Collection::FindOrCreate(scope, Db(c), c.args[1], kHash);
    if (!h.ok()) return h.status();
    if (c.args[2].size() > h->max_member_bytes())
      return Status::InvalidArgument("ERR hash field or value too long");
    long double value = 0;
    Result<std::string> old = h->Get(kField, c.args[2]);
    if (old.ok()) {
      if (!ParseLongDouble(*old, &value))
        return Status::InvalidArgument("ERR hash value is not a float");
    } else if (!old.status().is_not_found()) {
      return old.status();
    }
    value += incr;
    if (std::isnan(value) || std::isinf(value))
      return Status::InvalidArgument("ERR increment would produce NaN or Infinity");
    const std::string text = LongDoubleText(value);
    PMINDEX_RETURN_IF_ERROR(h->Put(kField, c.args[2], text));
    if (!old.ok()) h->add_count(1);
    PMINDEX_RETURN_IF_ERROR(h->Save());
    reply.Bulk(text);
    return Status::OK();
  });
}

// HRANDFIELD's candidates among the `size` fields of h: every field of a
// hash small enough, else fields found from random points of the field
// space (enough for `count` distinct ones when uniq, at most 1024 else).
Status RandomFieldCandidates(Collection& h, uint64_t size, uint64_t count, bool uniq,
                             std::mt19937_64& rng,
                             std::vector<std::pair<std::string, std::string>>* pool) {
  if (size <= kUniformLimit) return AllFields(h, pool);
  const uint64_t want = std::min<uint64_t>(uniq ? count : std::min<uint64_t>(count, 1024), size);
  std::unordered_set<std::string> seen;
  for (int probe = 0; pool->size() < want && probe < 64 + static_cast<int>(want) * 4; ++probe) {
    std::string from(8, '\0');
    for (char& ch : from) ch = static_cast<char>(rng() & 0xff);
    std::vector<std::pair<std::string, std::string>> got;
    h.Range(kField, from, std::nullopt, 1, &got);
    if (got.empty()) h.Range(kField, "", std::nullopt, 1, &got);
    for (auto& kv : got) {
      if (seen.insert(kv.first).second) pool->push_back(std::move(kv));
    }
  }
  return Status::OK();
}

// HRANDFIELD key [count [WITHVALUES]]
void HRandField(CommandCall& c) {
  const bool with_count = c.argc() >= 3;
  int64_t l = 0;
  bool withvalues = false;
  if (with_count) {
    if (!ParseNumber(c.args[2], &l)) return c.reply.Error(kNotInteger);
    if (l == INT64_MIN) {
      return c.reply.Error(
          "ERR value is out of range, value must between -9223372036854775807 and "
          "9223372036854775807");
    }
    if (c.argc() > 4 || (c.argc() == 4 && !EqualsIgnoreCase(c.args[3], "WITHVALUES")))
      return c.reply.Error(kSyntax);
    if (c.argc() == 4) {
      withvalues = true;
      if (l < -INT64_MAX / 2 || l > INT64_MAX / 2)
        return c.reply.Error("ERR value is out of range");
    }
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> found = FindHash(scope, Db(c), c.args[1]);
    if (!found.ok()) return found.status();
    if (!*found) {
      if (with_count) {
        reply.Array(0);
      } else {
        reply.NullBulk();
      }
      return Status::OK();
    }
    Collection& h = **found;
    const uint64_t size = h.count();
    const bool uniq = l >= 0;
    const uint64_t count = !with_count ? 1
                           : uniq      ? static_cast<uint64_t>(l)
                                       : static_cast<uint64_t>(-l);
    if (with_count && count == 0) {
      reply.Array(0);
      return Status::OK();
    }
    std::vector<std::pair<std::string, std::string>> pool;
    PMINDEX_RETURN_IF_ERROR(RandomFieldCandidates(h, size, count, uniq, rng, &pool));
    if (pool.empty()) {
      // The count said fields exist but none was found: a metadata
      // record that disagrees with its elements (--verify reports it).
      return Status::Corruption("a hash's count disagrees with its fields");
    }
    auto emit = [&](const std::pair<std::string, std::string>& kv) {
      if (withvalues && reply.protocol() > 2) reply.Array(2);
      reply.Bulk(kv.first);
      if (withvalues) reply.Bulk(kv.second);
    };
    if (!with_count) {
      reply.Bulk(pool[rng() % pool.size()].first);
      return Status::OK();
    }
    std::vector<const std::pair<std::string, std::string>*> picked;
    if (!uniq) {
      // Repeats allowed, exactly `count` of them, in random order.
      size_t bytes = 0;
      for (uint64_t i = 0; i < count; ++i) {
        picked.push_back(&pool[rng() % pool.size()]);
        bytes += picked.back()->first.size() + (withvalues ? picked.back()->second.size() : 0) + 16;
        if (bytes > kMaxMultiReplyBytes) return Status::InvalidArgument("ERR reply too large");
      }
    } else {
      // Distinct fields: min(count, size) of them.
      std::shuffle(pool.begin(), pool.end(), rng);
      const size_t n = static_cast<size_t>(std::min<uint64_t>(count, pool.size()));
      for (size_t i = 0; i < n; ++i) picked.push_back(&pool[i]);
    }
    reply.Array(withvalues && reply.protocol() == 2 ? picked.size() * 2 : picked.size());
    for (const auto* kv : picked) emit(*kv);
    return Status::OK();
  });
}

// HSCAN key cursor [MATCH pattern] [COUNT count]: the cursor names the
// next field (as SCAN's names the next key); reply [cursor, [f, v, ...]].
void HScan(CommandCall& c) {
  if (c.argc() % 2 != 1) return c.reply.Error(kSyntax);
  ScanOptions o;
  if (!ParseScanOptions(c, 3, false, &o)) return;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<std::optional<Collection>> h = FindHash(scope, Db(c), c.args[1]);
    if (!h.ok()) return h.status();
    std::string from;
    const size_t max_field = *h ? (*h)->max_member_bytes() : c.items.max_key_bytes();
    if (!CursorToKey(c.args[2], max_field, &from))
      return Status::InvalidArgument("ERR invalid cursor");
    std::vector<std::pair<std::string, std::string>> got;
    // One more than asked: its field is where the next call starts.
    if (*h) (*h)->Range(kField, from, std::nullopt, o.count + 1, &got);
    std::string next;
    if (got.size() > o.count) {
      next = std::move(got.back().first);
      got.pop_back();
    }
    if (!o.pattern.empty() && o.pattern != "*") {
      std::erase_if(got, [&](const auto& kv) { return !GlobMatch(o.pattern, kv.first); });
    }
    reply.Array(2);
    reply.Bulk(KeyToCursor(next));
    reply.Array(got.size() * 2);
    for (const auto& [f, v] : got) {
      reply.Bulk(f);
      reply.Bulk(v);
    }
    return Status::OK();
  });
}

// The hash commands (registered by RegisterHashCommands).
const CommandSpec kHashCommands[] = {
    {"hset", -4, kWrite | kDenyOom | kFast, 1, 1, 1, "RW UPDATE",
     "Sets fields of a hash; returns how many were new.", HSet},
    {"hmset", -4, kWrite | kDenyOom | kFast, 1, 1, 1, "RW UPDATE", "Sets fields of a hash (HSET).",
     HSet},
    {"hsetnx", 4, kWrite | kDenyOom | kFast, 1, 1, 1, "RW INSERT",
     "Sets a field of a hash only if it is absent.", HSetNx},
    {"hget", 3, kReadonly | kFast, 1, 1, 1, "RO ACCESS", "Returns a field's value.", HGet},
    {"hmget", -3, kReadonly | kFast, 1, 1, 1, "RO ACCESS", "Returns several fields' values.",
     HMGet},
    {"hgetall", 2, kReadonly, 1, 1, 1, "RO ACCESS", "Returns every field and value of a hash.",
     HGetAll, "nondeterministic_output_order"},
    {"hkeys", 2, kReadonly, 1, 1, 1, "RO", "Returns every field of a hash.", HGetAll,
     "nondeterministic_output_order"},
    {"hvals", 2, kReadonly, 1, 1, 1, "RO ACCESS", "Returns every value of a hash.", HGetAll,
     "nondeterministic_output_order"},
    {"hdel", -3, kWrite | kFast, 1, 1, 1, "RW DELETE",
     "Deletes fields of a hash (the hash when it is empty); returns how many existed.", HDel},
    {"hlen", 2, kReadonly | kFast, 1, 1, 1, "RO", "Returns the number of fields of a hash.", HLen},
    {"hexists", 3, kReadonly | kFast, 1, 1, 1, "RO", "Returns whether a field exists.", HExists},
    {"hstrlen", 3, kReadonly | kFast, 1, 1, 1, "RO", "Returns the length of a field's value.",
     HExists},
    {"hincrby", 4, kWrite | kDenyOom | kFast, 1, 1, 1, "RW ACCESS UPDATE",
     "Adds an integer to a field's value.", HIncrBy},
    {"hincrbyfloat", 4, kWrite | kDenyOom | kFast, 1, 1, 1, "RW ACCESS UPDATE",
     "Adds a floating-point number to a field's value.", HIncrByFloat},
    {"hrandfield", -2, kReadonly, 1, 1, 1, "RO ACCESS", "Returns random fields of a hash.",
     HRandField, "nondeterministic_output"},
    {"hscan", -3, kReadonly, 1, 1, 1, "RO ACCESS", "Walks the fields of a hash, a few per call.",
     HScan, "nondeterministic_output"},
};

}  // namespace

void RegisterHashCommands(CommandTable& t) { AddCommands(t, kHashCommands, "hash", "hash"); }

}  // namespace pmindex::server
