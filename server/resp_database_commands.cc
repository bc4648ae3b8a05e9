// RESP database commands: SELECT, SWAPDB, DBSIZE, FLUSHDB, FLUSHALL, and
// the Keyspace section of INFO. Databases are namespaces of the store
// (databases.h): FLUSHDB, FLUSHALL and SWAPDB are one durable write of the
// table of databases, whatever the number of keys; inside EXEC they are
// part of its transaction.
#include "server/collections.h"
#include "server/keyspace.h"
#include "server/numbers.h"
#include "server/resp_command.h"
#include "server/resp_transaction.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

int DatabaseCount(Items& items) {
  return items.keyspace() != nullptr ? items.keyspace()->count() : 1;
}

// The database index in `arg`, or -1 after replying the error (Redis's
// texts: `not_integer` if it is no integer, out of range otherwise).
int ParseDb(CommandCall& c, std::string_view arg, std::string_view not_integer) {
  int64_t i = 0;
  if (!ParseNumber(arg, &i)) {
    c.reply.Error(not_integer);
    return -1;
  }
  if (i < 0 || i >= DatabaseCount(c.items)) {
    c.reply.Error("ERR DB index is out of range");
    return -1;
  }
  return static_cast<int>(i);
}

void Select(CommandCall& c) {
  const int db = ParseDb(c, c.args[1], kNotInteger);
  if (db < 0) return;
  // A cluster serves database 0 only (slots are per node, not per database).
  if (db != 0 && c.shared.cluster() != nullptr)
    return c.reply.Error("ERR SELECT is not allowed in cluster mode");
  c.client.db = db;
  c.reply.Simple("OK");
}

void SwapDb(CommandCall& c) {
  if (c.shared.cluster() != nullptr)
    return c.reply.Error("ERR SWAPDB is not allowed in cluster mode");
  const int a = ParseDb(c, c.args[1], "ERR invalid first DB index");
  if (a < 0) return;
  const int b = ParseDb(c, c.args[2], "ERR invalid second DB index");
  if (b < 0) return;
  Status s;
  if (TxnScope* scope = TxnScope::Of(c.items); scope != nullptr && scope->databases() != nullptr) {
    s = scope->databases()->Swap(a, b);
    if (s.is_aborted()) scope->db(a).MarkConflict();  // EXEC runs again
  } else if (c.items.keyspace() != nullptr) {
    s = c.items.keyspace()->databases().Swap(a, b);
  }
  if (!s.ok()) return ReplyStoreError(c, s);
  c.reply.Simple("OK");
}

// Keys and keys with an expiry in a database's store, by a walk: for a
// transaction's view (DBSIZE inside EXEC sees the transaction's writes)
// and a server without databases (tests). Otherwise the databases' key
// counters (key_counts.h) answer.
KeyCounts CountKeys(Store& store) {
  KeyCounts n;
  // Values come with the keys: a small batch bounds what a walk holds.
  constexpr size_t kBatch = 64;
  std::string from;
  std::vector<std::pair<std::string, std::string>> batch;
  for (;;) {
    batch.clear();
    // One more than counted: the key the next batch starts from (a view's
    // order is by slot, so only a stored key names a position).
    const size_t got = store.Range(from, kBatch + 1, &batch);
    const size_t counted = std::min(got, kBatch);
    for (size_t i = 0; i < counted; ++i) {
      ++n.keys;
      Item item;
      CollectionMeta meta;
      if ((item_codec::Decode(batch[i].second, &item) && item.expiry_ms != 0) ||
          (collection_codec::Decode(batch[i].second, &meta) && meta.expiry_ms != 0))
        ++n.expires;
    }
    if (got <= kBatch) return n;
    from = std::move(batch[kBatch].first);
  }
}

void DbSize(CommandCall& c) {
  Keyspace* ks = c.items.keyspace();
  if (ks != nullptr && TxnScope::Of(c.items) == nullptr)
    return c.reply.Integer(static_cast<int64_t>(ks->databases().KeyCount(c.items.db_index())));
  c.reply.Integer(CountKeys(c.items.store()).keys);
}

bool FlushArgsOk(CommandCall& c) {
  if (c.argc() == 1 || (c.argc() == 2 && (EqualsIgnoreCase(c.args[1], "SYNC") ||
                                          EqualsIgnoreCase(c.args[1], "ASYNC")))) {
    return true;
  }
  c.reply.Error(kSyntax);
  return false;
}

// FLUSHDB [ASYNC|SYNC]: both are a logical flush, done when it returns;
// the keys are reclaimed in the background either way.
void FlushDb(CommandCall& c) {
  if (!FlushArgsOk(c)) return;
  Status s = c.items.Flush(0);
  if (!s.ok()) return ReplyStoreError(c, s);
  c.reply.Simple("OK");
}

void FlushAll(CommandCall& c) {
  if (!FlushArgsOk(c)) return;
  Status s;
  if (TxnScope* scope = TxnScope::Of(c.items); scope != nullptr && scope->databases() != nullptr) {
    Stats::Add(c.items.stats().cmd_flush);
    s = scope->databases()->FlushAll();
    if (s.is_aborted()) scope->db(0).MarkConflict();  // EXEC runs again
  } else if (c.items.keyspace() != nullptr) {
    Stats::Add(c.items.stats().cmd_flush);
    s = c.items.keyspace()->databases().FlushAll();
  } else {
    s = c.items.Flush(0);
  }
  if (!s.ok()) return ReplyStoreError(c, s);
  c.reply.Simple("OK");
}

}  // namespace

std::vector<std::pair<std::string, std::string>> KeyspaceInfo(Items& items) {
  std::vector<std::pair<std::string, std::string>> fields;
  Keyspace* ks = items.keyspace();
  for (int i = 0; i < DatabaseCount(items); ++i) {
    const KeyCounts n = ks != nullptr ? ks->databases().Counts(i) : CountKeys(items.store());
    if (n.keys <= 0) continue;
    std::string v = "keys=";
    v.append(std::to_string(n.keys)).append(",expires=").append(std::to_string(n.expires));
    fields.emplace_back("db" + std::to_string(i), v.append(",avg_ttl=0"));
  }
  return fields;
}

void RegisterDatabaseCommands(CommandTable& t) {
  t.Add({.name = "select",
         .arity = 2,
         .flags = kLoading | kStale | kFast,
         .group = "connection",
         .summary = "Changes the selected database.",
         .categories = "connection",
         .handler = Select});
  t.Add({.name = "swapdb",
         .arity = 3,
         .flags = kWrite | kFast,
         .group = "server",
         .summary = "Swaps two Redis databases.",
         .categories = "keyspace dangerous",
         .handler = SwapDb});
  t.Add({.name = "dbsize",
         .arity = 1,
         .flags = kReadonly | kFast,
         .group = "server",
         .summary = "Returns the number of keys in the database (expired ones not yet removed "
                    "included).",
         .categories = "keyspace",
         .tips = "request_policy:all_shards response_policy:agg_sum",
         .handler = DbSize});
  t.Add({.name = "flushdb",
         .arity = -1,
         .flags = kWrite,
         .group = "server",
         .summary = "Removes all keys from the current database.",
         .categories = "keyspace dangerous",
         .tips = "request_policy:all_shards response_policy:all_succeeded",
         .handler = FlushDb});
  t.Add({.name = "flushall",
         .arity = -1,
         .flags = kWrite,
         .group = "server",
         .summary = "Removes all keys from all databases.",
         .categories = "keyspace dangerous",
         .tips = "request_policy:all_shards response_policy:all_succeeded",
         .handler = FlushAll});
}

}  // namespace pmindex::server
