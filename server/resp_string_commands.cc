// RESP string commands (Redis's "string" and "bitmap" groups): GET, SET
// and its variants, the INCR family, MGET, MSET, APPEND, STRLEN,
// SETRANGE, GETRANGE, SETBIT, GETBIT, INCRBYFLOAT, LCS.
//
// Every command that reads and then writes a key does so in one
// Items::Edit: the write applies only to the value it read (else it is
// decided again), so it is atomic per key against every other client,
// and durable before the reply.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>

#include "server/collections.h"
#include "server/numbers.h"
#include "server/resp_command.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

constexpr std::string_view kTooLong =
    "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
// The longest string a command may make: Redis's proto-max-bulk-len (a
// CONFIG setting), within what one item holds.
size_t MaxString(CommandCall& c) {
  return std::min(c.items.max_data_bytes(), c.shared.proto_max_bulk_len());
}

// The transient memory LCS may take (Redis bounds it by
// proto-max-bulk-len, 512 MiB by default).
constexpr uint64_t kMaxLcsTableBytes = 64u << 20;

void ExpireTimeError(CommandCall& c) {
  c.reply.Error("ERR invalid expire time in '" + c.command.full_name + "' command");
}

// ---- GET, SET and their variants

// The options of SET and GETEX, with Redis's rules for which may be
// combined.
struct StringOptions {
  bool nx = false, xx = false, get = false, keepttl = false, persist = false;
  enum class Expire : uint8_t { kNone, kEx, kPx, kExAt, kPxAt } expire = Expire::kNone;
  std::string_view expire_arg;
};

// Parses args from `first`; false after replying the error.
bool ParseStringOptions(CommandCall& c, size_t first, bool for_set, StringOptions* o) {
  using E = StringOptions::Expire;
  for (size_t j = first; j < c.argc(); ++j) {
    const std::string_view opt = c.args[j];
    const bool next = j + 1 < c.argc();
    const bool no_expire = o->expire == E::kNone;
    auto expire_allowed = [&](E e) {
      return !o->keepttl && !o->persist && (o->expire == E::kNone || o->expire == e) && next;
    };
    if (EqualsIgnoreCase(opt, "NX") && !o->xx && for_set) {
      o->nx = true;
    } else if (EqualsIgnoreCase(opt, "XX") && !o->nx && for_set) {
      o->xx = true;
    } else if (EqualsIgnoreCase(opt, "GET") && for_set) {
      o->get = true;
    } else if (EqualsIgnoreCase(opt, "KEEPTTL") && !o->persist && no_expire && for_set) {
      o->keepttl = true;
    } else if (EqualsIgnoreCase(opt, "PERSIST") && !for_set && no_expire && !o->keepttl) {
      o->persist = true;
    } else {
      E e = E::kNone;
      if (EqualsIgnoreCase(opt, "EX")) e = E::kEx;
      if (EqualsIgnoreCase(opt, "PX")) e = E::kPx;
      if (EqualsIgnoreCase(opt, "EXAT")) e = E::kExAt;
      if (EqualsIgnoreCase(opt, "PXAT")) e = E::kPxAt;
      if (e == E::kNone || !expire_allowed(e)) {
        c.reply.Error(kSyntax);
        return false;
      }
      o->expire = e;
      o->expire_arg = c.args[++j];
    }
  }
  return true;
}

// The absolute expiry (unix ms) an EX/PX/EXAT/PXAT option asks for;
// false after replying the error. Values <= 0 are errors (as Redis).
bool OptionExpiry(CommandCall& c, const StringOptions& o, int64_t* ms) {
  using E = StringOptions::Expire;
  int64_t t = 0;
  if (!ParseNumber(o.expire_arg, &t)) {
    c.reply.Error(kNotInteger);
    return false;
  }
  const bool seconds = o.expire == E::kEx || o.expire == E::kExAt;
  const bool relative = o.expire == E::kEx || o.expire == E::kPx;
  if (t <= 0 || (seconds && __builtin_mul_overflow(t, 1000, &t)) ||
      (relative && __builtin_add_overflow(t, c.items.NowMs(), &t))) {
    ExpireTimeError(c);
    return false;
  }
  *ms = t;
  return true;
}

void Get(CommandCall& c) {
  Result<Item> r = c.items.Get(c.args[1]);
  if (r.ok()) return c.reply.Bulk(r->data);
  if (r.status().is_not_found()) return c.reply.NullBulk();
  ReplyStoreError(c, r.status());
}

// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]
void Set(CommandCall& c) {
  if (!CheckData(c, c.args[2])) return;
  StringOptions o;
  if (!ParseStringOptions(c, 3, true, &o)) return;
  int64_t expiry_ms = 0;
  if (o.expire != StringOptions::Expire::kNone && !OptionExpiry(c, o, &expiry_ms)) return;
  if (!o.get && !o.keepttl) {
    // The common case needs no read.
    const StoreMode mode = o.nx ? StoreMode::kAdd : o.xx ? StoreMode::kReplace : StoreMode::kSet;
    Result<ItemOutcome> r = c.items.Write(mode, c.args[1], c.args[2], 0, expiry_ms);
    if (!r.ok()) return ReplyStoreError(c, r.status());
    if (*r == ItemOutcome::kDone) return c.reply.Simple("OK");
    return c.reply.NullBulk();
  }
  std::optional<std::string> old;
  bool stored = false;
  Status s = c.items.Edit(c.args[1], [&](const Item* live) {
    old = live ? std::optional<std::string>(live->data) : std::nullopt;
    stored = !(o.nx && live) && !(o.xx && !live);
    if (!stored) return ItemEdit::Keep();
    return ItemEdit::Put(std::string(c.args[2]), 0,
                         o.keepttl && live ? live->expiry_ms : expiry_ms);
  });
  if (IsWrongType(s) && !o.get) {
    // A collection: SET replaces any type (NX finds the key taken).
    if (o.nx) return c.reply.NullBulk();
    if (o.keepttl) {
      Result<KeyState> k = PeekKey(c.items, c.args[1]);
      if (!k.ok()) return ReplyStoreError(c, k.status());
      expiry_ms = k->expiry_ms;
    }
    Result<ItemOutcome> r = c.items.Write(StoreMode::kSet, c.args[1], c.args[2], 0, expiry_ms);
    if (!r.ok()) return ReplyStoreError(c, r.status());
    return c.reply.Simple("OK");
  }
  if (!s.ok()) return ReplyStoreError(c, s);
  if (o.get) return old ? c.reply.Bulk(*old) : c.reply.NullBulk();
  if (stored) return c.reply.Simple("OK");
  c.reply.NullBulk();
}

void SetNx(CommandCall& c) {
  if (!CheckData(c, c.args[2])) return;
  Result<ItemOutcome> r = c.items.Write(StoreMode::kAdd, c.args[1], c.args[2], 0, 0);
  if (!r.ok()) return ReplyStoreError(c, r.status());
  c.reply.Integer(*r == ItemOutcome::kDone ? 1 : 0);
}

// SETEX key seconds value, PSETEX key ms value.
void SetEx(CommandCall& c) {
  StringOptions o;
  o.expire = c.command.name == "setex" ? StringOptions::Expire::kEx : StringOptions::Expire::kPx;
  o.expire_arg = c.args[2];
  int64_t expiry_ms = 0;
  if (!OptionExpiry(c, o, &expiry_ms) || !CheckData(c, c.args[3])) return;
  Result<ItemOutcome> r = c.items.Write(StoreMode::kSet, c.args[1], c.args[3], 0, expiry_ms);
  if (!r.ok()) return ReplyStoreError(c, r.status());
  c.reply.Simple("OK");
}

// GETSET key value: SET that replies the old value and clears the expiry.
void GetSet(CommandCall& c) {
  if (!CheckData(c, c.args[2])) return;
  std::optional<std::string> old;
  Status s = c.items.Edit(c.args[1], [&](const Item* live) {
    old = live ? std::optional<std::string>(live->data) : std::nullopt;
    return ItemEdit::Put(std::string(c.args[2]), 0, 0);
  });
  if (!s.ok()) return ReplyStoreError(c, s);
  old ? c.reply.Bulk(*old) : c.reply.NullBulk();
}

void GetDel(CommandCall& c) {
  std::optional<std::string> old;
  Status s = c.items.Edit(c.args[1], [&](const Item* live) {
    old = live ? std::optional<std::string>(live->data) : std::nullopt;
    return ItemEdit::Remove();
  });
  if (!s.ok()) return ReplyStoreError(c, s);
  old ? c.reply.Bulk(*old) : c.reply.NullBulk();
}

// GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]
void GetEx(CommandCall& c) {
  StringOptions o;
  if (!ParseStringOptions(c, 2, false, &o)) return;
  if (o.expire == StringOptions::Expire::kNone && !o.persist) return Get(c);
  // As Redis: a missing key is a null before the expiry is checked.
  std::string error_reply;
  int64_t expiry_ms = 0;
  bool valid = true;
  if (o.expire != StringOptions::Expire::kNone) {
    std::string scratch;
    RespReply quiet(&scratch, c.reply.protocol());
    CommandCall probe{c.command, c.args, c.items, c.client, c.shared, quiet};
    valid = OptionExpiry(probe, o, &expiry_ms);
    error_reply = scratch;
  }
  std::optional<std::string> data;
  Status s = c.items.Edit(c.args[1], [&](const Item* live) {
    data.reset();
    if (!live || !valid) {
      if (live) data = live->data;
      return ItemEdit::Keep();
    }
    data = live->data;
    if (o.persist) {
      if (live->expiry_ms == 0) return ItemEdit::Keep();
      return ItemEdit::Put(live->data, live->flags, 0);
    }
    // An absolute time already past deletes the key (after this reply).
    if (expiry_ms <= c.items.NowMs()) return ItemEdit::Remove();
    return ItemEdit::Put(live->data, live->flags, expiry_ms);
  });
  if (!s.ok()) return ReplyStoreError(c, s);
  if (!data) return c.reply.NullBulk();
  if (!valid) {
    c.reply.out()->append(error_reply);
    return;
  }
  c.reply.Bulk(*data);
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

void IncrByFloat(CommandCall& c) {
  enum class Outcome { kDone, kNotFloat, kNaN, kTooLong } outcome = Outcome::kDone;
  std::string result;
  Status s = c.items.Edit(c.args[1], [&](const Item* live) {
    long double value = 0, incr = 0;
    if ((live && !ParseLongDouble(live->data, &value)) || !ParseLongDouble(c.args[2], &incr)) {
      outcome = Outcome::kNotFloat;
      return ItemEdit::Keep();
    }
    value += incr;
    if (std::isnan(value) || std::isinf(value)) {
      outcome = Outcome::kNaN;
      return ItemEdit::Keep();
    }
    result = LongDoubleText(value);
    if (result.size() > MaxString(c)) {
      outcome = Outcome::kTooLong;
      return ItemEdit::Keep();
    }
    outcome = Outcome::kDone;
    return ItemEdit::Put(result, live ? live->flags : 0, live ? live->expiry_ms : 0);
  });
  if (!s.ok()) return ReplyStoreError(c, s);
  switch (outcome) {
    case Outcome::kNotFloat:
      return c.reply.Error("ERR value is not a valid float");
    case Outcome::kNaN:
      return c.reply.Error("ERR increment would produce NaN or Infinity");
    case Outcome::kTooLong:
      return c.reply.Error(kTooLong);
    case Outcome::kDone:
      break;
  }
  c.reply.Bulk(result);
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
    } else if (r.status().is_not_found() || IsWrongType(r.status())) {
      reply.NullBulk();  // Redis's MGET: nil for a key of another type
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

// ---- APPEND, STRLEN, SETRANGE, GETRANGE

// Only the appended bytes are written (for a large value, its last piece
// and the new ones: Items::Patch).
void Append(CommandCall& c) {
  const std::string_view tail = c.args[2];
  bool too_long = false;
  uint64_t length = 0;
  Status s =
      c.items.Patch(c.args[1], 0, 0, /*raw_if_new=*/false,  // new: Redis encodes it as SET
                    [&](const Item*, uint64_t size) -> std::optional<std::vector<DataWrite>> {
                      length = size + tail.size();
                      too_long = length > MaxString(c);
                      if (too_long) return std::nullopt;
                      return std::vector<DataWrite>{{size, std::string(tail)}};
                    });
  if (!s.ok()) return ReplyStoreError(c, s);
  if (too_long) return c.reply.Error(kTooLong);
  c.reply.Integer(static_cast<int64_t>(length));
}

void StrLen(CommandCall& c) {
  // A read of none of the data: a large value's pieces stay unread.
  uint64_t size = 0;
  Result<Item> r = c.items.GetPart(c.args[1], 0, 0, &size);
  if (r.ok()) return c.reply.Integer(static_cast<int64_t>(size));
  if (r.status().is_not_found()) return c.reply.Integer(0);
  ReplyStoreError(c, r.status());
}

// SETRANGE key offset value: zero bytes fill the gap past the end. Only
// the bytes written (and the gap) are written: Items::Patch.
void SetRange(CommandCall& c) {
  int64_t offset = 0;
  if (!ParseNumber(c.args[2], &offset)) return c.reply.Error(kNotInteger);
  if (offset < 0) return c.reply.Error("ERR offset is out of range");
  const std::string_view value = c.args[3];
  bool too_long = false;
  uint64_t length = 0;
  Status s = c.items.Patch(
      c.args[1], 0, 0, /*raw_if_new=*/true,
      [&](const Item*, uint64_t size) -> std::optional<std::vector<DataWrite>> {
        too_long = false;
        length = size;
        if (value.empty()) return std::nullopt;  // nothing to write: the length
        const uint64_t end = static_cast<uint64_t>(offset) + value.size();
        too_long = end > MaxString(c);
        if (too_long) return std::nullopt;
        length = std::max(size, end);
        return std::vector<DataWrite>{{static_cast<uint64_t>(offset), std::string(value)}};
      });
  if (!s.ok()) return ReplyStoreError(c, s);
  if (too_long) return c.reply.Error(kTooLong);
  c.reply.Integer(static_cast<int64_t>(length));
}

// GETRANGE key start end (and SUBSTR): Redis's index rules, negative
// indexes from the end, the range clamped to the string.
void GetRange(CommandCall& c) {
  int64_t start = 0, end = 0;
  if (!ParseNumber(c.args[2], &start) || !ParseNumber(c.args[3], &end))
    return c.reply.Error(kNotInteger);
  if (start < 0 && end < 0 && start > end) return c.reply.Bulk("");
  // Only the bytes asked for are read (a large value's pieces they are
  // in). Indexes from the end need the length first: a read of none of
  // the data, then the read of the range, again if the value changed
  // between the two.
  const bool from_end = start < 0 || end < 0;
  uint64_t version = 0;
  for (;;) {
    int64_t len = 0;
    if (from_end) {
      uint64_t size = 0;
      Result<Item> head = c.items.GetPart(c.args[1], 0, 0, &size);
      if (!head.ok()) {
        if (head.status().is_not_found()) return c.reply.Bulk("");
        return ReplyStoreError(c, head.status());
      }
      len = static_cast<int64_t>(size);
      version = head->version;
    } else {
      len = INT64_MAX;  // clamped by the read itself
    }
    int64_t from = start < 0 ? len + start : start;
    int64_t to = end < 0 ? len + end : end;
    if (from < 0) from = 0;
    if (to < 0) to = 0;
    if (to >= len) to = len - 1;
    if (from > to || len == 0) return c.reply.Bulk("");
    uint64_t size = 0;
    Result<Item> r = c.items.GetPart(c.args[1], static_cast<uint64_t>(from),
                                     static_cast<uint64_t>(to - from) + 1, &size);
    if (!r.ok()) {
      if (r.status().is_not_found()) return c.reply.Bulk("");
      return ReplyStoreError(c, r.status());
    }
    if (from_end && r->version != version) continue;
    return c.reply.Bulk(r->data);
  }
}

// ---- SETBIT, GETBIT

// A bit offset: 0 up to the last bit of the largest item; false after
// replying Redis's error.
bool BitOffset(CommandCall& c, std::string_view arg, uint64_t* offset) {
  int64_t v = 0;
  if (!ParseNumber(arg, &v) || v < 0 || static_cast<uint64_t>(v) / 8 >= MaxString(c)) {
    c.reply.Error("ERR bit offset is not an integer or out of range");
    return false;
  }
  *offset = static_cast<uint64_t>(v);
  return true;
}

// Bit `offset` of `data`, bit 0 being the most significant bit of byte 0.
int BitAt(std::string_view data, uint64_t offset) {
  const uint64_t byte = offset / 8;
  if (byte >= data.size()) return 0;
  return (static_cast<unsigned char>(data[byte]) >> (7 - offset % 8)) & 1;
}

// Reads and writes the one byte of the bit (Items::Patch).
void SetBit(CommandCall& c) {
  uint64_t offset = 0;
  if (!BitOffset(c, c.args[2], &offset)) return;
  if (c.args[3] != "0" && c.args[3] != "1")
    return c.reply.Error("ERR bit is not an integer or out of range");
  const bool on = c.args[3] == "1";
  const uint64_t byte = offset / 8;
  int old = 0;
  Status s = c.items.Patch(
      c.args[1], byte, 1, /*raw_if_new=*/true,
      [&](const Item* live, uint64_t size) -> std::optional<std::vector<DataWrite>> {
        // live->data is the bit's byte, or empty past the end.
        const std::string_view data = live ? std::string_view(live->data) : std::string_view();
        old = BitAt(data, offset % 8);
        if (live && old == static_cast<int>(on) && byte < size) return std::nullopt;
        const auto mask = static_cast<unsigned char>(1u << (7 - offset % 8));
        auto b = static_cast<unsigned char>(data.empty() ? 0 : data[0]);
        b = on ? (b | mask) : (b & ~mask);
        return std::vector<DataWrite>{{byte, std::string(1, static_cast<char>(b))}};
      });
  if (!s.ok()) return ReplyStoreError(c, s);
  c.reply.Integer(old);
}

void GetBit(CommandCall& c) {
  uint64_t offset = 0;
  if (!BitOffset(c, c.args[2], &offset)) return;
  uint64_t size = 0;
  Result<Item> r = c.items.GetPart(c.args[1], offset / 8, 1, &size);
  if (r.ok()) return c.reply.Integer(BitAt(r->data, offset % 8));
  if (r.status().is_not_found()) return c.reply.Integer(0);
  ReplyStoreError(c, r.status());
}

// ---- LCS

// LCS's options after the two keys.
struct LcsOptions {
  bool getlen = false, getidx = false, withmatchlen = false;
  int64_t minmatchlen = 0;
};

// Parses LCS's options into *o; false: an error was replied.
bool ParseLcsOptions(CommandCall& c, LcsOptions* o) {
  for (size_t j = 3; j < c.argc(); ++j) {
    if (EqualsIgnoreCase(c.args[j], "IDX")) {
      o->getidx = true;
    } else if (EqualsIgnoreCase(c.args[j], "LEN")) {
      o->getlen = true;
    } else if (EqualsIgnoreCase(c.args[j], "WITHMATCHLEN")) {
      o->withmatchlen = true;
    } else if (EqualsIgnoreCase(c.args[j], "MINMATCHLEN") && j + 1 < c.argc()) {
      if (!ParseNumber(c.args[++j], &o->minmatchlen)) {
        c.reply.Error(kNotInteger);
        return false;
      }
      o->minmatchlen = std::max<int64_t>(o->minmatchlen, 0);
    } else {
      c.reply.Error(kSyntax);
      return false;
    }
  }
  if (o->getlen && o->getidx) {
    c.reply.Error("ERR If you want both the length and indexes, please just use IDX.");
    return false;
  }
  return true;
}

// The textbook dynamic program's table for a and b: at(i, j) is the length
// of the longest common subsequence of a[0, i) and b[0, j).
class LcsTable {
 public:
  LcsTable(std::string_view a, std::string_view b)
      : blen_(b.size()), table_(static_cast<size_t>(a.size() + 1) * (b.size() + 1), 0) {
    for (size_t i = 1; i <= a.size(); ++i) {
      for (size_t j = 1; j <= b.size(); ++j) {
        at(i, j) =
            a[i - 1] == b[j - 1] ? at(i - 1, j - 1) + 1 : std::max(at(i - 1, j), at(i, j - 1));
      }
    }
  }
  uint32_t& at(size_t i, size_t j) { return table_[j + i * (blen_ + 1)]; }

 private:
  size_t blen_;
  std::vector<uint32_t> table_;
};

// One run of contiguous matches: a[a_start, a_end] == b[b_start, b_end].
struct LcsRange {
  size_t a_start, a_end, b_start, b_end;
};

// Walks the table back from the end, writing the common subsequence
// (`total` bytes) to *result and the runs of contiguous matches at least
// `minmatchlen` long (0: all) to *ranges, last run first, as Redis reports them.
void LcsWalkBack(std::string_view a, std::string_view b, LcsTable& t, uint32_t total,
                 int64_t minmatchlen, std::string* result, std::vector<LcsRange>* ranges) {
  result->assign(total, '\0');
  size_t i = a.size(), j = b.size(), idx = total;
  bool open = false;
  LcsRange cur{};
  while (i > 0 && j > 0) {
    bool emit = false;
    if (a[i - 1] == b[j - 1]) {
      (*result)[--idx] = a[i - 1];
      if (!open) {
        cur = {i - 1, i - 1, j - 1, j - 1};
        open = true;
      } else if (cur.a_start == i && cur.b_start == j) {
        --cur.a_start;
        --cur.b_start;
      } else {
        emit = true;
      }
      if (cur.a_start == 0 || cur.b_start == 0) emit = true;
      --i;
      --j;
    } else {
      if (t.at(i - 1, j) > t.at(i, j - 1)) {
        --i;
      } else {
        --j;
      }
      if (open) emit = true;
    }
    if (emit) {
      const size_t match_len = cur.a_end - cur.a_start + 1;
      if (minmatchlen == 0 || match_len >= static_cast<uint64_t>(minmatchlen))
        ranges->push_back(cur);
      open = false;
    }
  }
}

// LCS ... IDX's reply: the runs of matches, and the length.
void ReplyLcsIdx(CommandCall& c, const std::vector<LcsRange>& ranges, bool withmatchlen,
                 uint32_t total) {
  c.reply.Map(2);
  c.reply.Bulk("matches");
  c.reply.Array(ranges.size());
  for (const LcsRange& r : ranges) {
    c.reply.Array(withmatchlen ? 3 : 2);
    c.reply.Array(2);
    c.reply.Integer(static_cast<int64_t>(r.a_start));
    c.reply.Integer(static_cast<int64_t>(r.a_end));
    c.reply.Array(2);
    c.reply.Integer(static_cast<int64_t>(r.b_start));
    c.reply.Integer(static_cast<int64_t>(r.b_end));
    if (withmatchlen) c.reply.Integer(static_cast<int64_t>(r.a_end - r.a_start + 1));
  }
  c.reply.Bulk("len");
  c.reply.Integer(total);
}

// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]: the longest
// common subsequence by the textbook dynamic program, and the matching
// ranges from the end backwards, as Redis reports them.
void Lcs(CommandCall& c) {
  std::string a, b;
  for (int i = 1; i <= 2; ++i) {
    Result<Item> r = c.items.Get(c.args[static_cast<size_t>(i)]);
    if (!r.ok() && !r.status().is_not_found()) return ReplyStoreError(c, r.status());
    if (r.ok()) (i == 1 ? a : b) = std::move(r->data);
  }
  LcsOptions o;
  if (!ParseLcsOptions(c, &o)) return;
  const uint64_t cells = static_cast<uint64_t>(a.size() + 1) * (b.size() + 1);
  if (cells * sizeof(uint32_t) > kMaxLcsTableBytes) {
    return c.reply.Error(
        "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
  }
  LcsTable table(a, b);
  const uint32_t total = table.at(a.size(), b.size());
  if (o.getlen) return c.reply.Integer(total);
  std::string result;
  std::vector<LcsRange> ranges;
  LcsWalkBack(a, b, table, total, o.minmatchlen, &result, &ranges);
  if (!o.getidx) return c.reply.Bulk(result);
  ReplyLcsIdx(c, ranges, o.withmatchlen, total);
}

// The string commands (registered by RegisterStringCommands).
const CommandSpec kStringCommands[] = {
    {"get", 2, kReadonly | kFast, 1, 1, 1, "RO ACCESS", "Returns the string value of a key.", Get},
    {"set", -3, kWrite | kDenyOom, 1, 1, 1, "RW ACCESS UPDATE VARIABLE_FLAGS",
     "Sets the string value of a key (NX, XX, GET, expiry, KEEPTTL).", Set},
    {"setnx", 3, kWrite | kDenyOom | kFast, 1, 1, 1, "OW INSERT",
     "Sets a key only if it does not exist.", SetNx},
    {"setex", 4, kWrite | kDenyOom, 1, 1, 1, "OW UPDATE",
     "Sets a key with a time to live in seconds.", SetEx},
    {"psetex", 4, kWrite | kDenyOom, 1, 1, 1, "OW UPDATE",
     "Sets a key with a time to live in milliseconds.", SetEx},
    {"getset", 3, kWrite | kDenyOom | kFast, 1, 1, 1, "RW ACCESS UPDATE",
     "Sets a key and returns its old value.", GetSet},
    {"getdel", 2, kWrite | kFast, 1, 1, 1, "RW ACCESS DELETE",
     "Returns a key's value and deletes it.", GetDel},
    {"getex", -2, kWrite | kFast, 1, 1, 1, "RW ACCESS UPDATE",
     "Returns a key's value and sets or removes its expiry.", GetEx},
    {"incr", 2, kWrite | kDenyOom | kFast, 1, 1, 1, "RW ACCESS UPDATE",
     "Adds one to the integer value of a key.", IncrDecr},
    {"decr", 2, kWrite | kDenyOom | kFast, 1, 1, 1, "RW ACCESS UPDATE",
     "Subtracts one from the integer value of a key.", IncrDecr},
    {"incrby", 3, kWrite | kDenyOom | kFast, 1, 1, 1, "RW ACCESS UPDATE",
     "Adds a number to the integer value of a key.", IncrDecr},
    {"decrby", 3, kWrite | kDenyOom | kFast, 1, 1, 1, "RW ACCESS UPDATE",
     "Subtracts a number from the integer value of a key.", IncrDecr},
    {"incrbyfloat", 3, kWrite | kDenyOom | kFast, 1, 1, 1, "RW ACCESS UPDATE",
     "Adds a floating-point number to the value of a key.", IncrByFloat},
    {"mget", -2, kReadonly | kFast, 1, -1, 1, "RO ACCESS", "Returns the values of keys.", MGet,
     "request_policy:multi_shard"},
    {"mset", -3, kWrite | kDenyOom, 1, -1, 2, "OW UPDATE", "Sets several keys at once, atomically.",
     MSet, "request_policy:multi_shard response_policy:all_succeeded"},
    {"append", 3, kWrite | kDenyOom | kFast, 1, 1, 1, "RW INSERT",
     "Appends to a key's value (creating it); returns the new length.", Append},
    {"strlen", 2, kReadonly | kFast, 1, 1, 1, "RO", "Returns the length of a key's value.", StrLen},
    {"setrange", 4, kWrite | kDenyOom, 1, 1, 1, "RW UPDATE",
     "Overwrites part of a key's value at an offset.", SetRange},
    {"getrange", 4, kReadonly, 1, 1, 1, "RO ACCESS", "Returns a substring of a key's value.",
     GetRange},
    {"substr", 4, kReadonly, 1, 1, 1, "RO ACCESS",
     "Returns a substring of a key's value (GETRANGE).", GetRange},
    {"setbit", 4, kWrite | kDenyOom, 1, 1, 1, "RW ACCESS UPDATE",
     "Sets or clears a bit of a key's value; returns the old bit.", SetBit, "", "bitmap", "bitmap"},
    {"getbit", 3, kReadonly | kFast, 1, 1, 1, "RO ACCESS", "Returns a bit of a key's value.",
     GetBit, "", "bitmap", "bitmap"},
    {"lcs", -3, kReadonly, 1, 2, 1, "RO ACCESS",
     "Returns the longest common subsequence of two keys' values.", Lcs},
};

}  // namespace

void RegisterStringCommands(CommandTable& t) {
  AddCommands(t, kStringCommands, "string", "string");
}

}  // namespace pmindex::server
