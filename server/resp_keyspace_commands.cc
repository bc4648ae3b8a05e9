// RESP keyspace commands (Redis's "generic" group): DEL, UNLINK, EXISTS,
// TOUCH, TYPE, the expiry commands (EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT
// with NX|XX|GT|LT; TTL, PTTL, EXPIRETIME, PEXPIRETIME; PERSIST), KEYS,
// RANDOMKEY, SCAN, OBJECT.
#include <algorithm>
#include <limits>
#include <optional>
#include <random>

#include "server/collections.h"
#include "server/numbers.h"
#include "server/resp_command.h"
#include "server/resp_protocol.h"
#include "server/resp_transaction.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

// DEL and UNLINK (the same here: a removal is one store call either way).
void Del(CommandCall& c) {
  int64_t n = 0;
  for (size_t i = 1; i < c.argc(); ++i) {
    Result<ItemOutcome> r = c.items.Delete(c.args[i]);
    if (!r.ok()) return ReplyStoreError(c, r.status());
    n += *r == ItemOutcome::kDone;
  }
  c.reply.Integer(n);
}

// EXISTS and TOUCH: how many of the keys exist (TOUCH's access time is
// not tracked).
void Exists(CommandCall& c) {
  int64_t n = 0;
  for (size_t i = 1; i < c.argc(); ++i) {
    Result<KeyState> r = PeekKey(c.items, c.args[i], /*data=*/false);
    if (!r.ok()) return ReplyStoreError(c, r.status());
    n += r->kind != KeyKind::kNone;
  }
  c.reply.Integer(n);
}

void Type(CommandCall& c) {
  Result<KeyState> r = PeekKey(c.items, c.args[1], /*data=*/false);
  if (!r.ok()) return ReplyStoreError(c, r.status());
  c.reply.Simple(KindName(r->kind));
}

// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 absent, -1 no expiry.
void Ttl(CommandCall& c) {
  Result<KeyState> r = PeekKey(c.items, c.args[1], /*data=*/false);
  if (!r.ok()) return ReplyStoreError(c, r.status());
  if (r->kind == KeyKind::kNone) return c.reply.Integer(-2);
  if (r->expiry_ms == 0) return c.reply.Integer(-1);
  const std::string_view name = c.command.name;
  if (name == "expiretime") return c.reply.Integer(r->expiry_ms / 1000);
  if (name == "pexpiretime") return c.reply.Integer(r->expiry_ms);
  const int64_t left = std::max<int64_t>(r->expiry_ms - c.items.NowMs(), 0);
  c.reply.Integer(name == "ttl" ? (left + 500) / 1000 : left);
}

// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT key t [NX|XX|GT|LT]
void Expire(CommandCall& c) {
  bool nx = false, xx = false, gt = false, lt = false;
  for (size_t j = 3; j < c.argc(); ++j) {
    if (EqualsIgnoreCase(c.args[j], "NX")) {
      nx = true;
    } else if (EqualsIgnoreCase(c.args[j], "XX")) {
      xx = true;
    } else if (EqualsIgnoreCase(c.args[j], "GT")) {
      gt = true;
    } else if (EqualsIgnoreCase(c.args[j], "LT")) {
      lt = true;
    } else {
      return c.reply.Error("ERR Unsupported option " + std::string(c.args[j]));
    }
  }
  if (nx && (xx || gt || lt))
    return c.reply.Error("ERR NX and XX, GT or LT options at the same time are not compatible");
  if (gt && lt) return c.reply.Error("ERR GT and LT options at the same time are not compatible");
  int64_t when = 0;
  if (!ParseNumber(c.args[2], &when)) return c.reply.Error(kNotInteger);
  const std::string_view name = c.command.name;
  const bool seconds = name == "expire" || name == "expireat";
  const int64_t base = name == "expire" || name == "pexpire" ? c.items.NowMs() : 0;
  // Negative times are allowed (the key is deleted), but not ones whose
  // conversion to absolute milliseconds overflows (as Redis).
  if ((seconds && __builtin_mul_overflow(when, 1000, &when)) ||
      __builtin_add_overflow(when, base, &when)) {
    return c.reply.Error("ERR invalid expire time in '" + c.command.full_name + "' command");
  }
  const int64_t now = c.items.NowMs();
  // current: 0 is none, an infinite time to live.
  auto allowed = [&](int64_t current) {
    return !((nx && current != 0) || (xx && current == 0) ||
             (gt && (current == 0 || when <= current)) || (lt && current != 0 && when >= current));
  };
  bool done = false;
  Status s = c.items.Edit(c.args[1], [&](const Item* live) {
    done = false;
    if (!live || !allowed(live->expiry_ms)) return ItemEdit::Keep();
    done = true;
    if (when <= now) return ItemEdit::Remove();
    return ItemEdit::Put(live->data, live->flags, when);
  });
  if (IsWrongType(s)) {
    // A collection: its metadata's expiry, or its removal (elements
    // garbage-listed), in one transaction.
    const int db = c.items.db_index();
    return RunAtomically(c, [&](TxnScope& scope) -> Result<int64_t> {
      Result<Collection> col = FindAnyCollection(scope, db, c.args[1]);
      if (!col.ok()) return col.status().is_not_found() ? Result<int64_t>(0) : col.status();
      if (!allowed(col->meta().expiry_ms)) return 0;
      if (when <= now) {
        PMINDEX_RETURN_IF_ERROR(col->Delete());
      } else {
        col->mutable_meta().expiry_ms = when;
        PMINDEX_RETURN_IF_ERROR(col->Save());
      }
      return 1;
    });
  }
  if (!s.ok()) return ReplyStoreError(c, s);
  c.reply.Integer(done ? 1 : 0);
}

void Persist(CommandCall& c) {
  bool done = false;
  Status s = c.items.Edit(c.args[1], [&](const Item* live) {
    done = live && live->expiry_ms != 0;
    if (!done) return ItemEdit::Keep();
    return ItemEdit::Put(live->data, live->flags, 0);
  });
  if (IsWrongType(s)) {
    const int db = c.items.db_index();
    return RunAtomically(c, [&](TxnScope& scope) -> Result<int64_t> {
      Result<Collection> col = FindAnyCollection(scope, db, c.args[1]);
      if (!col.ok()) return col.status().is_not_found() ? Result<int64_t>(0) : col.status();
      if (col->meta().expiry_ms == 0) return 0;
      col->mutable_meta().expiry_ms = 0;
      PMINDEX_RETURN_IF_ERROR(col->Save());
      return 1;
    });
  }
  if (!s.ok()) return ReplyStoreError(c, s);
  c.reply.Integer(done ? 1 : 0);
}

// KEYS pattern: a walk of every key (as Redis, O(n)), in key order.
void Keys(CommandCall& c) {
  const std::string_view pattern = c.args[1];
  const bool all = pattern == "*";
  std::vector<std::string> found;
  size_t bytes = 0;
  std::string from, next;
  do {
    std::vector<std::string> batch;
    c.items.ScanKeys(from, 1024, &batch, &next);
    for (std::string& k : batch) {
      if (!all && !GlobMatch(pattern, k)) continue;
      bytes += k.size() + 16;
      if (bytes > kMaxMultiReplyBytes) return c.reply.Error("ERR reply too large");
      found.push_back(std::move(k));
    }
    from = next;
  } while (!next.empty());
  c.reply.BulkArray(found);
}

// RANDOMKEY: the first live key at or after a random point of the key
// space (between the smallest key's first byte and the end of ASCII, or
// of all bytes), wrapping around at the end. Not uniform: a key after a
// wide gap in the key order is likelier than one after a narrow gap.
void RandomKey(CommandCall& c) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::vector<std::string> keys;
  std::string next;
  c.items.ScanKeys("", 64, &keys, &next);
  if (keys.empty() && next.empty()) return c.reply.NullBulk();
  const std::string first = keys.empty() ? next : keys.front();
  const auto lo = static_cast<unsigned char>(first[0]);
  const unsigned hi = lo < 0x80 ? 0x7f : 0xff;
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::string from(1, static_cast<char>(lo + rng() % (hi - lo + 1)));
    for (int i = 0; i < 8; ++i) from.push_back(static_cast<char>(0x20 + rng() % 0x5f));
    std::vector<std::string> found;
    c.items.ScanKeys(from, 64, &found, &next);
    if (!found.empty()) return c.reply.Bulk(found.front());
  }
  // Past the last key (or only expired keys there): the smallest live one.
  std::string from;
  for (int round = 0; round < 16; ++round) {
    keys.clear();
    c.items.ScanKeys(from, 1024, &keys, &next);
    if (!keys.empty()) return c.reply.Bulk(keys.front());
    if (next.empty()) break;
    from = next;
  }
  c.reply.NullBulk();
}

// SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]
void Scan(CommandCall& c) {
  if (c.argc() % 2 != 0) return c.reply.Error(kSyntax);
  std::string from;
  if (!CursorToKey(c.args[1], c.items.max_key_bytes(), &from))
    return c.reply.Error("ERR invalid cursor");
  ScanOptions o;
  if (!ParseScanOptions(c, 2, true, &o)) return;
  std::vector<std::string> keys;
  std::string next;
  c.items.ScanKeys(from, o.count, &keys, &next);
  if (!o.pattern.empty() && o.pattern != "*") {
    std::erase_if(keys, [&](const std::string& k) { return !GlobMatch(o.pattern, k); });
  }
  if (o.type) {
    std::vector<std::string> kept;
    for (std::string& k : keys) {
      Result<KeyState> r = PeekKey(c.items, k, /*data=*/false);
      if (!r.ok()) return ReplyStoreError(c, r.status());
      if (KindName(r->kind) == *o.type) kept.push_back(std::move(k));
    }
    keys = std::move(kept);
  }
  c.reply.Array(2);
  c.reply.Bulk(KeyToCursor(next));
  c.reply.BulkArray(keys);
}

// ---- OBJECT

// The encoding Redis 7.0 gives a string value: "int" for a decimal
// integer of a long's range written without padding, "embstr" up to 44
// bytes, "raw" above. pmserver stores every value as its bytes; this
// names the class of the value, not a storage format. A value changed in
// place (`raw`: APPEND, SETRANGE, SETBIT) is "raw", as Redis re-encodes it.
std::string_view RedisEncoding(std::string_view v, bool raw) {
  if (raw) return "raw";
  int64_t n = 0;
  if (v.size() <= 20 && ParseNumber(v, &n) && std::to_string(n) == v) return "int";
  return v.size() <= 44 ? "embstr" : "raw";
}

int64_t ConfigNumber(CommandCall& c, std::string_view name, int64_t otherwise) {
  auto it = c.shared.config().find(name);
  int64_t n = 0;
  if (it == c.shared.config().end() || !ParseNumber(it->second.get(), &n)) return otherwise;
  return n;
}

// The name Redis 7.0 would give a collection's encoding: its compact one
// (listpack; intset for a set of integers) while the collection is within
// the thresholds of CONFIG (hash-max-listpack-entries/-value, ...), else
// its general one (collections.h EncodingName). It names nothing of
// pmserver's storage, which is the same for every size; unlike Redis's,
// it goes back to the compact name when the collection shrinks.
void CollectionEncoding(CommandCall& c, const CollectionMeta& meta) {
  const int db = c.client.db;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<Collection> col = Collection::Find(scope, db, c.args[2], meta.type);
    if (!col.ok()) {
      if (!col.status().is_not_found()) return col.status();
      reply.NullBulk();
      return Status::OK();
    }
    int64_t entries = 0, value = 0;
    char sub = 0;
    std::string_view compact = "listpack";
    switch (meta.type) {
      case CollectionType::kHash:
        entries = ConfigNumber(c, "hash-max-listpack-entries", 128);
        value = ConfigNumber(c, "hash-max-listpack-value", 64);
        sub = sub_space::kHashField;
        break;
      case CollectionType::kZset:
        entries = ConfigNumber(c, "zset-max-listpack-entries", 128);
        value = ConfigNumber(c, "zset-max-listpack-value", 64);
        sub = sub_space::kZsetMember;
        break;
      case CollectionType::kSet:
        entries = ConfigNumber(c, "set-max-intset-entries", 512);
        sub = sub_space::kSetMember;
        compact = "intset";
        break;
      case CollectionType::kList:
        break;
    }
    bool small = sub != 0 && col->count() <= static_cast<uint64_t>(std::max<int64_t>(entries, 0));
    if (small) {
      std::vector<std::pair<std::string, std::string>> all;
      col->Range(sub, "", std::nullopt, col->count() + 1, &all);
      for (const auto& [m, v] : all) {
        if (meta.type == CollectionType::kSet) {
          int64_t n = 0;
          small &= ParseNumber(m, &n) && std::to_string(n) == m;
        } else {
          small &= static_cast<int64_t>(m.size()) <= value &&
                   (meta.type == CollectionType::kZset || static_cast<int64_t>(v.size()) <= value);
        }
      }
    }
    reply.Bulk(small ? compact : EncodingName(meta.type));
    return Status::OK();
  });
}

void ObjectEncoding(CommandCall& c) {
  Result<KeyState> r = PeekKey(c.items, c.args[2]);
  if (!r.ok()) return ReplyStoreError(c, r.status());
  CollectionMeta m;
  Item item;
  if (r->kind == KeyKind::kNone) return c.reply.NullBulk();
  if (collection_codec::Decode(r->stored, &m)) return CollectionEncoding(c, m);
  if (!item_codec::Decode(r->stored, &item)) return c.reply.NullBulk();
  c.reply.Bulk(RedisEncoding(item.data, item.raw));
}

void ObjectRefCount(CommandCall& c) {
  Result<KeyState> r = PeekKey(c.items, c.args[2]);
  if (!r.ok()) return ReplyStoreError(c, r.status());
  if (r->kind == KeyKind::kNone) return c.reply.NullBulk();
  c.reply.Integer(1);  // values are never shared
}

// IDLETIME: seconds since the key's last access, from the access clock in
// DRAM (RespShared::IdleSeconds: exact while the key is in its bucket,
// else a lower bound). FREQ: pmserver counts no access frequencies; its error
// is Redis's under a policy that is not LFU (pmserver's is noeviction).
void ObjectIdleTime(CommandCall& c) {
  Result<KeyState> r = PeekKey(c.items, c.args[2]);
  if (!r.ok()) return ReplyStoreError(c, r.status());
  if (r->kind == KeyKind::kNone) return c.reply.NullBulk();
  c.reply.Integer(c.shared.IdleSeconds(c.items.db_index(), c.args[2], c.items.NowMs(),
                                       c.items.stats().start_ms));
}

void ObjectFreq(CommandCall& c) {
  Result<KeyState> r = PeekKey(c.items, c.args[2]);
  if (!r.ok()) return ReplyStoreError(c, r.status());
  if (r->kind == KeyKind::kNone) return c.reply.NullBulk();
  c.reply.Error(
      "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note "
      "that when switching between policies at runtime LRU and LFU data will take some time to "
      "adjust.");
}

// MEMORY USAGE key [SAMPLES n]: an estimate in bytes (the key and its
// record, and for a collection 48 bytes per element: its record's
// header and index share), not a measure of pmserver's memory.
void MemoryUsage(CommandCall& c) {
  if (c.argc() != 3 && !(c.argc() == 5 && EqualsIgnoreCase(c.args[3], "SAMPLES")))
    return c.reply.Error(kSyntax);
  Result<KeyState> r = PeekKey(c.items, c.args[2]);
  if (!r.ok()) return ReplyStoreError(c, r.status());
  if (r->kind == KeyKind::kNone) return c.reply.NullBulk();
  CollectionMeta m;
  uint64_t bytes = c.args[2].size() + r->stored.size() + 16;
  if (collection_codec::Decode(r->stored, &m)) bytes += m.count * 48;
  c.reply.Integer(static_cast<int64_t>(bytes));
}

void ObjectHelp(CommandCall& c) {
  static constexpr std::string_view kLines[] = {
      "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
      "ENCODING <key>",
      "    The encoding Redis would give the value (int, embstr, raw; hashtable, quicklist,",
      "    skiplist): a name, not pmserver's storage.",
      "FREQ <key>",
      "    Not tracked (an error, as Redis under the noeviction policy).",
      "IDLETIME <key>",
      "    Seconds since the key's last access (at most the time since the server started).",
      "REFCOUNT <key>",
      "    1: values are never shared.",
      "HELP",
      "    This text.",
  };
  c.reply.Array(std::size(kLines));
  for (std::string_view line : kLines) c.reply.Simple(line);
}

// The tips of the commands that count keys across shards.
constexpr std::string_view kSumKeys = "request_policy:multi_shard response_policy:agg_sum";

// The generic commands (registered by RegisterKeyspaceCommands).
const CommandSpec kKeyspaceCommands[] = {
    {"del", -2, kWrite, 1, -1, 1, "RM DELETE", "Deletes keys; returns how many existed.", Del,
     kSumKeys},
    {"unlink", -2, kWrite | kFast, 1, -1, 1, "RM DELETE",
     "Deletes keys; returns how many existed (as DEL).", Del, kSumKeys},
    {"exists", -2, kReadonly | kFast, 1, -1, 1, "RO",
     "Counts the keys given that exist (a key named twice counts twice).", Exists, kSumKeys},
    {"touch", -2, kReadonly | kFast, 1, -1, 1, "RO",
     "Counts the keys given that exist (access times are not tracked).", Exists, kSumKeys},
    {"type", 2, kReadonly | kFast, 1, 1, 1, "RO",
     "Returns the type of a key: string, hash, list, set, zset or none.", Type},
    {"ttl", 2, kReadonly | kFast, 1, 1, 1, "RO ACCESS", "Returns a key's time to live in seconds.",
     Ttl, "nondeterministic_output"},
    {"pttl", 2, kReadonly | kFast, 1, 1, 1, "RO ACCESS",
     "Returns a key's time to live in milliseconds.", Ttl, "nondeterministic_output"},
    {"expiretime", 2, kReadonly | kFast, 1, 1, 1, "RO ACCESS",
     "Returns a key's expiry as a unix time in seconds.", Ttl},
    {"pexpiretime", 2, kReadonly | kFast, 1, 1, 1, "RO ACCESS",
     "Returns a key's expiry as a unix time in milliseconds.", Ttl},
    {"expire", -3, kWrite | kFast, 1, 1, 1, "RW UPDATE",
     "Sets a key's time to live in seconds (NX, XX, GT, LT).", Expire},
    {"pexpire", -3, kWrite | kFast, 1, 1, 1, "RW UPDATE",
     "Sets a key's time to live in milliseconds (NX, XX, GT, LT).", Expire},
    {"expireat", -3, kWrite | kFast, 1, 1, 1, "RW UPDATE",
     "Sets a key's expiry to a unix time in seconds (NX, XX, GT, LT).", Expire},
    {"pexpireat", -3, kWrite | kFast, 1, 1, 1, "RW UPDATE",
     "Sets a key's expiry to a unix time in milliseconds (NX, XX, GT, LT).", Expire},
    {"persist", 2, kWrite | kFast, 1, 1, 1, "RW UPDATE", "Removes a key's expiry.", Persist},
    {"keys", 2, kReadonly, 0, 0, 0, "", "Returns every key matching a pattern (a full walk).", Keys,
     "request_policy:all_shards nondeterministic_output_order", "", "keyspace dangerous"},
    {"randomkey", 1, kReadonly, 0, 0, 0, "", "Returns a key picked at random (not uniformly).",
     RandomKey, "request_policy:all_shards nondeterministic_output"},
    {"scan", -2, kReadonly, 0, 0, 0, "", "Walks the keys, a few per call, in key order.", Scan,
     "nondeterministic_output request_policy:special"},
};

}  // namespace

void RegisterKeyspaceCommands(CommandTable& t) {
  AddCommands(t, kKeyspaceCommands, "generic", "keyspace");
  t.Add({.name = "memory",
         .arity = -2,
         .group = "server",
         .summary = "A container for memory diagnostics commands.",
         .subcommands = {Command{.name = "usage",
                                 .arity = -3,
                                 .flags = kReadonly,
                                 .first_key = 2,
                                 .last_key = 2,
                                 .key_step = 1,
                                 .group = "server",
                                 .summary = "Estimates the bytes a key takes.",
                                 .key_flags = "RO",
                                 .categories = "",
                                 .handler = MemoryUsage}}});
  auto object_sub = [](std::string_view name, std::string_view summary, CommandHandler h) {
    return Command{.name = name,
                   .arity = 3,
                   .flags = kReadonly,
                   .first_key = 2,
                   .last_key = 2,
                   .key_step = 1,
                   .group = "generic",
                   .summary = summary,
                   .key_flags = "RO",
                   .categories = "keyspace",
                   .tips = "nondeterministic_output",
                   .handler = h};
  };
  t.Add({.name = "object",
         .arity = -2,
         .group = "generic",
         .summary = "A container for object introspection commands.",
         .subcommands = {
             object_sub("encoding", "The encoding Redis would give the value.", ObjectEncoding),
             object_sub("refcount", "1: values are never shared.", ObjectRefCount),
             object_sub("idletime", "Seconds since the key's last access.", ObjectIdleTime),
             object_sub("freq", "Not tracked (no LFU policy): an error.", ObjectFreq),
             Command{.name = "help",
                     .arity = 2,
                     .flags = kLoading | kStale,
                     .group = "generic",
                     .summary = "Describes the subcommands.",
                     .categories = "keyspace",
                     .handler = ObjectHelp},
         }});
}

}  // namespace pmindex::server
