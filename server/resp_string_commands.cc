// RESP string commands: GET, SET, the INCR family, MGET, MSET.
#include <algorithm>
#include <limits>

#include "server/numbers.h"
#include "server/resp_command.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

void Get(CommandCall& c) {
  Result<Item> r = c.items.Get(c.args[1]);
  if (r.ok()) return c.reply.Bulk(r->data);
  if (r.status().is_not_found()) return c.reply.NullBulk();
  ReplyStoreError(c, r.status());
}

void Set(CommandCall& c) {
  if (!CheckData(c, c.args[2])) return;
  StoreMode mode = StoreMode::kSet;
  int64_t expiry_ms = 0;
  bool has_expiry = false;
  for (size_t i = 3; i < c.argc(); ++i) {
    const std::string opt = Upper(c.args[i]);
    if ((opt == "NX" || opt == "XX") && mode == StoreMode::kSet) {
      mode = opt == "NX" ? StoreMode::kAdd : StoreMode::kReplace;
    } else if ((opt == "EX" || opt == "PX" || opt == "EXAT" || opt == "PXAT") && !has_expiry &&
               i + 1 < c.argc()) {
      int64_t t = 0;
      const int64_t unit = opt == "EX" || opt == "EXAT" ? 1000 : 1;
      const int64_t base = opt == "EX" || opt == "PX" ? c.items.NowMs() : 0;
      if (!ParseNumber(c.args[++i], &t)) return c.reply.Error(kNotInteger);
      if (t <= 0 || __builtin_mul_overflow(t, unit, &t) ||
          __builtin_add_overflow(t, base, &expiry_ms)) {
        return c.reply.Error("ERR invalid expire time in 'set' command");
      }
      has_expiry = true;
    } else {
      return c.reply.Error(kSyntax);
    }
  }
  Result<ItemOutcome> r = c.items.Write(mode, c.args[1], c.args[2], 0, expiry_ms);
  if (!r.ok()) return ReplyStoreError(c, r.status());
  if (*r == ItemOutcome::kDone) return c.reply.Simple("OK");
  c.reply.NullBulk();
}

// INCR, DECR, INCRBY, DECRBY.
void IncrDecr(CommandCall& c) {
  const std::string_view name = c.command.name;
  int64_t delta = 1;
  if (c.argc() == 3 && !ParseNumber(c.args[2], &delta)) return c.reply.Error(kNotInteger);
  if (name[0] == 'd') {
    if (delta == std::numeric_limits<int64_t>::min())
      return c.reply.Error("ERR decrement would overflow");
    delta = -delta;
  }
  int64_t v = 0;
  Result<ItemOutcome> r = c.items.IncrBy(c.args[1], delta, &v);
  if (!r.ok()) return ReplyStoreError(c, r.status());
  if (*r == ItemOutcome::kNotNumeric) return c.reply.Error(kNotInteger);
  if (*r == ItemOutcome::kOverflow)
    return c.reply.Error("ERR increment or decrement would overflow");
  c.reply.Integer(v);
}

void MGet(CommandCall& c) {
  // Built aside: a store error or an oversized reply replaces it whole.
  std::string buffer;
  RespReply reply(&buffer, c.reply.protocol());
  reply.Array(c.argc() - 1);
  for (size_t i = 1; i < c.argc(); ++i) {
    Result<Item> r = c.items.Get(c.args[i]);
    if (r.ok()) {
      reply.Bulk(r->data);
      if (buffer.size() > kMaxMultiReplyBytes) return c.reply.Error("ERR reply too large");
    } else if (r.status().is_not_found()) {
      reply.NullBulk();
    } else {
      return ReplyStoreError(c, r.status());
    }
  }
  c.reply.out()->append(buffer);
}

void MSet(CommandCall& c) {
  if (c.argc() % 2 != 1) {
    return c.reply.Error("ERR wrong number of arguments for '" + c.command.full_name + "' command");
  }
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  for (size_t i = 1; i < c.argc(); i += 2) {
    if (!CheckData(c, c.args[i + 1])) return;
    pairs.emplace_back(c.args[i], c.args[i + 1]);
  }
  Status s = c.items.StoreMany(pairs);
  if (!s.ok()) return ReplyStoreError(c, s);
  c.reply.Simple("OK");
}

}  // namespace

void RegisterStringCommands(CommandTable& t) {
  auto add = [&t](std::string_view name, int arity, uint64_t flags, int first, int last, int step,
                  std::string_view key_flags, std::string_view summary, CommandHandler h) {
    t.Add({.name = name,
           .arity = arity,
           .flags = flags,
           .first_key = first,
           .last_key = last,
           .key_step = step,
           .group = "string",
           .summary = summary,
           .key_flags = key_flags,
           .categories = "string",
           .handler = h});
  };
  add("get", 2, kReadonly | kFast, 1, 1, 1, "RO ACCESS", "Returns the string value of a key.", Get);
  add("set", -3, kWrite | kDenyOom, 1, 1, 1, "RW ACCESS UPDATE VARIABLE_FLAGS",
      "Sets the string value of a key, with options (NX, XX, expiry).", Set);
  add("incr", 2, kWrite | kDenyOom | kFast, 1, 1, 1, "RW ACCESS UPDATE",
      "Adds one to the integer value of a key.", IncrDecr);
  add("decr", 2, kWrite | kDenyOom | kFast, 1, 1, 1, "RW ACCESS UPDATE",
      "Subtracts one from the integer value of a key.", IncrDecr);
  add("incrby", 3, kWrite | kDenyOom | kFast, 1, 1, 1, "RW ACCESS UPDATE",
      "Adds a number to the integer value of a key.", IncrDecr);
  add("decrby", 3, kWrite | kDenyOom | kFast, 1, 1, 1, "RW ACCESS UPDATE",
      "Subtracts a number from the integer value of a key.", IncrDecr);
  add("mget", -2, kReadonly | kFast, 1, -1, 1, "RO ACCESS", "Returns the values of keys.", MGet);
  add("mset", -3, kWrite | kDenyOom, 1, -1, 2, "OW UPDATE",
      "Sets several keys at once, atomically.", MSet);
}

}  // namespace pmindex::server
