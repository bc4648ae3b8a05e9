// RESP keyspace commands (Redis's "generic" group): DEL, EXISTS, TTL,
// PTTL, EXPIRE, PEXPIRE, SCAN.
#include <algorithm>

#include "server/numbers.h"
#include "server/resp_command.h"
#include "server/resp_protocol.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

void Del(CommandCall& c) {
  int64_t n = 0;
  for (size_t i = 1; i < c.argc(); ++i) {
    Result<ItemOutcome> r = c.items.Delete(c.args[i]);
    if (!r.ok()) return ReplyStoreError(c, r.status());
    n += *r == ItemOutcome::kDone;
  }
  c.reply.Integer(n);
}

void Exists(CommandCall& c) {
  int64_t n = 0;
  for (size_t i = 1; i < c.argc(); ++i) {
    Result<Item> r = c.items.Get(c.args[i]);
    if (!r.ok() && !r.status().is_not_found()) return ReplyStoreError(c, r.status());
    n += r.ok();
  }
  c.reply.Integer(n);
}

// TTL, PTTL.
void Ttl(CommandCall& c) {
  Result<Item> r = c.items.Get(c.args[1]);
  if (!r.ok()) {
    if (r.status().is_not_found()) return c.reply.Integer(-2);
    return ReplyStoreError(c, r.status());
  }
  if (r->expiry_ms == 0) return c.reply.Integer(-1);
  const int64_t left = std::max<int64_t>(r->expiry_ms - c.items.NowMs(), 0);
  c.reply.Integer(c.command.name == "ttl" ? (left + 500) / 1000 : left);
}

// EXPIRE, PEXPIRE.
void Expire(CommandCall& c) {
  int64_t t = 0;
  if (!ParseNumber(c.args[2], &t)) return c.reply.Error(kNotInteger);
  int64_t expiry_ms = 1;  // t <= 0: expired at once, as Redis deletes the key
  if (t > 0 && (__builtin_mul_overflow(t, c.command.name == "expire" ? 1000 : 1, &t) ||
                __builtin_add_overflow(t, c.items.NowMs(), &expiry_ms))) {
    return c.reply.Error("ERR invalid expire time in '" + c.command.full_name + "' command");
  }
  Result<ItemOutcome> r = c.items.Touch(c.args[1], expiry_ms);
  if (!r.ok()) return ReplyStoreError(c, r.status());
  c.reply.Integer(*r == ItemOutcome::kDone);
}

void Scan(CommandCall& c) {
  if (c.argc() % 2 != 0) return c.reply.Error(kSyntax);
  std::string from;
  if (!CursorToKey(c.args[1], c.items.max_key_bytes(), &from))
    return c.reply.Error("ERR invalid cursor");
  std::string_view pattern;
  size_t count = 10;
  for (size_t i = 2; i < c.argc(); i += 2) {
    if (EqualsIgnoreCase(c.args[i], "MATCH")) {
      pattern = c.args[i + 1];
    } else if (EqualsIgnoreCase(c.args[i], "COUNT")) {
      if (!ParseNumber(c.args[i + 1], &count)) return c.reply.Error(kNotInteger);
      if (count < 1) return c.reply.Error(kSyntax);
      count = std::min<size_t>(count, 100000);
    } else {
      return c.reply.Error(kSyntax);
    }
  }
  std::vector<std::string> keys;
  std::string next;
  c.items.ScanKeys(from, count, &keys, &next);
  if (!pattern.empty() && pattern != "*") {
    std::erase_if(keys, [&](const std::string& k) { return !GlobMatch(pattern, k); });
  }
  c.reply.Array(2);
  c.reply.Bulk(KeyToCursor(next));
  c.reply.BulkArray(keys);
}

}  // namespace

void RegisterKeyspaceCommands(CommandTable& t) {
  auto add = [&t](std::string_view name, int arity, uint64_t flags, int first, int last,
                  std::string_view key_flags, std::string_view summary, CommandHandler h) {
    t.Add({.name = name,
           .arity = arity,
           .flags = flags,
           .first_key = first,
           .last_key = last,
           .key_step = first > 0 ? 1 : 0,
           .group = "generic",
           .summary = summary,
           .key_flags = key_flags,
           .categories = "keyspace",
           .handler = h});
  };
  add("del", -2, kWrite, 1, -1, "RM DELETE", "Deletes keys; returns how many existed.", Del);
  add("exists", -2, kReadonly | kFast, 1, -1, "RO",
      "Counts the keys given that exist (a key named twice counts twice).", Exists);
  add("ttl", 2, kReadonly | kFast, 1, 1, "RO ACCESS", "Returns a key's time to live in seconds.",
      Ttl);
  add("pttl", 2, kReadonly | kFast, 1, 1, "RO ACCESS",
      "Returns a key's time to live in milliseconds.", Ttl);
  add("expire", -3, kWrite | kFast, 1, 1, "RW UPDATE", "Sets a key's time to live in seconds.",
      Expire);
  add("pexpire", -3, kWrite | kFast, 1, 1, "RW UPDATE",
      "Sets a key's time to live in milliseconds.", Expire);
  add("scan", -2, kReadonly, 0, 0, "", "Walks the keys, a few per call, in key order.", Scan);
}

}  // namespace pmindex::server
