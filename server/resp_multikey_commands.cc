// RESP commands that change several keys at once, each in one store
// transaction (RunAtomically, resp_transaction.h): RENAME, RENAMENX, COPY,
// MOVE and MSETNX, over strings and collections (collections.h). A key's
// stored record is moved or copied whole, so its flags and expiry go with
// it (as Redis keeps the TTL).
#include "server/collections.h"
#include "server/keyspace.h"
#include "server/numbers.h"
#include "server/resp_command.h"
#include "server/resp_transaction.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

// RENAME, RENAMENX: a collection's metadata record moves (its elements
// keep their slot and generation: O(1) whatever its size).
void Rename(CommandCall& c) {
  const bool nx = c.command.name == "renamenx";
  const std::string src(c.args[1]), dst(c.args[2]);
  const int db = c.client.db;
  RunAtomically(
      c,
      [&](TxnScope& scope) -> Result<int64_t> {
        Result<KeyKind> k = KindOfKey(scope, db, src);
        if (!k.ok()) return k.status();
        if (*k == KeyKind::kNone) return Status::InvalidArgument("ERR no such key");
        if (src == dst) return nx ? 0 : 1;
        if (nx) {
          Result<KeyKind> d = KindOfKey(scope, db, dst);
          if (!d.ok()) return d.status();
          if (*d != KeyKind::kNone) return 0;
        }
        Result<bool> moved = MoveKey(scope, db, src, dst);
        if (!moved.ok()) return moved.status();
        return 1;
      },
      /*ok_reply=*/!nx);
}

// COPY source destination [DB destination-db] [REPLACE]: a collection's
// elements are copied into a new generation (O(its size), one
// transaction).
void Copy(CommandCall& c) {
  int dst_db = c.client.db;
  bool replace = false;
  for (size_t i = 3; i < c.argc(); ++i) {
    if (EqualsIgnoreCase(c.args[i], "REPLACE")) {
      replace = true;
    } else if (EqualsIgnoreCase(c.args[i], "DB") && i + 1 < c.argc()) {
      int64_t n = 0;
      if (!ParseNumber(c.args[++i], &n)) return c.reply.Error(kNotInteger);
      const int count = c.items.keyspace() != nullptr ? c.items.keyspace()->count() : 1;
      if (n < 0 || n >= count) return c.reply.Error("ERR DB index is out of range");
      dst_db = static_cast<int>(n);
    } else {
      return c.reply.Error(kSyntax);
    }
  }
  const std::string src(c.args[1]), dst(c.args[2]);
  if (src == dst && dst_db == c.client.db)
    return c.reply.Error("ERR source and destination objects are the same");
  const int src_db = c.client.db;
  RunAtomically(c, [&](TxnScope& scope) -> Result<int64_t> {
    Result<KeyKind> k = KindOfKey(scope, src_db, src);
    if (!k.ok()) return k.status();
    if (*k == KeyKind::kNone) return 0;
    if (!replace) {
      Result<KeyKind> d = KindOfKey(scope, dst_db, dst);
      if (!d.ok()) return d.status();
      if (*d != KeyKind::kNone) return 0;
    }
    Result<bool> copied = CopyKey(scope, src_db, src, dst_db, dst);
    if (!copied.ok()) return copied.status();
    return *copied ? 1 : 0;
  });
}

// MOVE key db: the key goes to another database of this server, with its
// expiry, unless it is missing here or present there (0, as Redis). One
// transaction: a copy into the target, then the delete here (a
// collection's elements are copied, O(its size); Redis moves a pointer).
void Move(CommandCall& c) {
  if (c.shared.cluster() != nullptr)
    return c.reply.Error("ERR MOVE is not allowed in cluster mode");
  int64_t n = 0;
  if (!ParseNumber(c.args[2], &n)) return c.reply.Error(kNotInteger);
  const int count = c.items.keyspace() != nullptr ? c.items.keyspace()->count() : 1;
  if (n < 0 || n >= count) return c.reply.Error("ERR DB index is out of range");
  const int src_db = c.client.db, dst_db = static_cast<int>(n);
  if (src_db == dst_db) return c.reply.Error("ERR source and destination objects are the same");
  const std::string key(c.args[1]);
  bool moved = false;
  RunAtomically(c, [&](TxnScope& scope) -> Result<int64_t> {
    moved = false;
    Result<KeyKind> k = KindOfKey(scope, src_db, key);
    if (!k.ok()) return k.status();
    if (*k == KeyKind::kNone) return 0;
    Result<KeyKind> d = KindOfKey(scope, dst_db, key);
    if (!d.ok()) return d.status();
    if (*d != KeyKind::kNone) return 0;
    Result<bool> copied = CopyKey(scope, src_db, key, dst_db, key);
    if (!copied.ok()) return copied.status();
    if (!*copied) return 0;
    PMINDEX_RETURN_IF_ERROR(DeleteKey(scope, src_db, key).status());
    moved = true;
    return 1;
  });
  // Clients blocked on the key in the target database are tried after the
  // command (the dispatcher notes keys in the client's own database only).
  if (moved && c.shared.blocking().any()) c.client.ready_keys.emplace_back(dst_db, key);
}

// MSETNX key value [key value ...]: all or nothing, and nothing if any
// key exists.
void MsetNx(CommandCall& c) {
  if (c.argc() % 2 != 1) {
    return c.reply.Error("ERR wrong number of arguments for '" + c.command.full_name + "' command");
  }
  for (size_t i = 2; i < c.argc(); i += 2)
    if (!CheckData(c, c.args[i])) return;
  const int db = c.client.db;
  RunAtomically(c, [&](TxnScope& scope) -> Result<int64_t> {
    for (size_t i = 1; i < c.argc(); i += 2) {
      Result<KeyKind> k = KindOfKey(scope, db, c.args[i]);
      if (!k.ok()) return k.status();
      if (*k != KeyKind::kNone) return 0;
    }
    std::string value;
    for (size_t i = 1; i < c.argc(); i += 2) {
      value.clear();
      item_codec::Encode(c.args[i + 1], 0, 0, &value);
      // An expired collection in the way goes with its elements.
      PMINDEX_RETURN_IF_ERROR(DeleteKey(scope, db, c.args[i]).status());
      PMINDEX_RETURN_IF_ERROR(scope.db(db).Put(c.args[i], value));
    }
    Stats::Add(c.items.stats().cmd_set, (c.argc() - 1) / 2);
    return 1;
  });
}

}  // namespace

void RegisterMultiKeyCommands(CommandTable& t) {
  t.Add({.name = "rename",
         .arity = 3,
         .flags = kWrite,
         .first_key = 1,
         .last_key = 2,
         .key_step = 1,
         .group = "generic",
         .summary = "Renames a key and overwrites the destination.",
         .key_flags = "RW ACCESS DELETE",
         .categories = "keyspace",
         .handler = Rename});
  t.Add({.name = "renamenx",
         .arity = 3,
         .flags = kWrite | kFast,
         .first_key = 1,
         .last_key = 2,
         .key_step = 1,
         .group = "generic",
         .summary = "Renames a key only when the target key name doesn't exist.",
         .key_flags = "RW ACCESS DELETE",
         .categories = "keyspace",
         .handler = Rename});
  t.Add({.name = "copy",
         .arity = -3,
         .flags = kWrite | kDenyOom,
         .first_key = 1,
         .last_key = 2,
         .key_step = 1,
         .group = "generic",
         .summary = "Copies the value of a key to a new key.",
         .key_flags = "RO ACCESS",
         .categories = "keyspace",
         .handler = Copy});
  t.Add({.name = "move",
         .arity = 3,
         .flags = kWrite | kFast,
         .first_key = 1,
         .last_key = 1,
         .key_step = 1,
         .group = "generic",
         .summary = "Moves a key to another database.",
         .key_flags = "RW ACCESS DELETE",
         .categories = "keyspace",
         .handler = Move});
  t.Add({.name = "msetnx",
         .arity = -3,
         .flags = kWrite | kDenyOom,
         .first_key = 1,
         .last_key = -1,
         .key_step = 2,
         .group = "string",
         .summary = "Atomically sets the values of one or more keys only when none of them exist.",
         .key_flags = "OW INSERT",
         .categories = "string",
         .handler = MsetNx});
}

}  // namespace pmindex::server
