// RESP bitmap commands beyond SETBIT and GETBIT (Redis's "bitmap" group):
// BITCOUNT, BITPOS, BITOP, BITFIELD and BITFIELD_RO, with Redis 7.0's
// replies and errors (docs/server.md "Strings and bitmaps").
//
// Bits are numbered as SETBIT numbers them: bit 0 is the most significant
// bit of byte 0, and a bitfield's first bit is its most significant one.
// A missing key is an empty string. BITCOUNT and BITPOS with a range,
// and BITFIELD(_RO)'s reads, read only the bytes they look at (a large
// value's pieces those are in, Items::GetPart); without a range, and
// BITOP, the whole values. BITFIELD's writes are one Items::Patch of the
// bytes its fields are in (atomic for the key, durable before the reply)
// and BITOP's one transaction (RunAtomically), so both run inside
// MULTI/EXEC unchanged.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/numbers.h"
#include "server/resp_command.h"
#include "server/resp_transaction.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

constexpr std::string_view kBitOffsetError = "ERR bit offset is not an integer or out of range";
constexpr std::string_view kFieldTypeError =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but "
    "i64 is.";

// The longest string a bit command may make (as SETBIT's limit).
size_t MaxString(CommandCall& c) {
  return std::min(c.items.max_data_bytes(), c.shared.proto_max_bulk_len());
}

// Reads the string at `key` into *data (empty if missing, *found false);
// false after replying the error (WRONGTYPE, a store error).
bool ReadString(CommandCall& c, std::string_view key, std::string* data, bool* found) {
  Result<Item> r = c.items.Get(key);
  *found = r.ok();
  data->clear();
  if (r.ok()) *data = std::move(r->data);
  if (r.ok() || r.status().is_not_found()) return true;
  ReplyStoreError(c, r.status());
  return false;
}

// Bytes [offset, offset + length) of the string at `key` (fewer at its
// end), *size its whole length; *found false if missing. False after
// replying the error.
bool ReadStringPart(CommandCall& c, std::string_view key, uint64_t offset, uint64_t length,
                    std::string* data, uint64_t* size, uint64_t* version, bool* found) {
  Result<Item> r = c.items.GetPart(key, offset, length, size);
  *found = r.ok();
  data->clear();
  if (r.ok()) {
    *data = std::move(r->data);
    *version = r->version;
  }
  if (r.ok() || r.status().is_not_found()) return true;
  ReplyStoreError(c, r.status());
  return false;
}

// The bits [*first, *last] of the string at `key` a range selects (first >
// last: none), and the bytes they are in, from byte *byte0 of the string
// on. With a range (`ranged`), the string's length is read first (a read
// of none of its data), then only the bytes of the range, both again if
// the value changed between the two; without, the whole string.
// `range(len, first, last)` maps the length to the bits; false: it
// replied an error. False after replying an error.
template <class RangeFn>
bool ReadBitRange(CommandCall& c, bool ranged, RangeFn range, std::string* data, bool* found,
                  int64_t* first, int64_t* last, uint64_t* byte0) {
  *byte0 = 0;
  if (!ranged) {
    if (!ReadString(c, c.args[1], data, found)) return false;
    return !*found || range(static_cast<int64_t>(data->size()), first, last);
  }
  for (;;) {
    uint64_t size = 0, version = 0;
    if (!ReadStringPart(c, c.args[1], 0, 0, data, &size, &version, found)) return false;
    if (!*found) return true;
    if (!range(static_cast<int64_t>(size), first, last)) return false;
    if (*first > *last) return true;
    *byte0 = static_cast<uint64_t>(*first) / 8;
    const uint64_t bytes = static_cast<uint64_t>(*last) / 8 - *byte0 + 1;
    uint64_t part_version = 0;
    if (!ReadStringPart(c, c.args[1], *byte0, bytes, data, &size, &part_version, found))
      return false;
    if (*found && part_version == version) return true;
  }
}

int BitAt(std::string_view data, uint64_t bit) {
  return (static_cast<unsigned char>(data[bit / 8]) >> (7 - bit % 8)) & 1;
}

// Redis's range rule: negative indexes count from the end of `len`
// units, both ends are clamped to the string; false if it is empty.
bool ClampRange(int64_t start, int64_t end, int64_t len, int64_t* from, int64_t* to) {
  if (start < 0) start += len;
  if (end < 0) end += len;
  start = std::max<int64_t>(start, 0);
  end = std::max<int64_t>(end, 0);
  if (end >= len) end = len - 1;
  *from = start;
  *to = end;
  return start <= end;
}

// The set bits among bits [first, last] of `data` (inside it).
uint64_t CountBits(std::string_view data, int64_t first, int64_t last) {
  uint64_t n = 0;
  int64_t b = first;
  for (; b <= last && b % 8 != 0; ++b)
    n += static_cast<uint64_t>(BitAt(data, static_cast<uint64_t>(b)));
  for (; b + 63 <= last; b += 64) {  // eight bytes at a time
    uint64_t word = 0;
    std::memcpy(&word, data.data() + b / 8, sizeof(word));
    n += static_cast<uint64_t>(std::popcount(word));
  }
  for (; b + 7 <= last; b += 8)
    n += static_cast<uint64_t>(std::popcount(static_cast<unsigned char>(data[b / 8])));
  for (; b <= last; ++b) n += static_cast<uint64_t>(BitAt(data, static_cast<uint64_t>(b)));
  return n;
}

// Parses the [start end [BYTE|BIT]] of BITCOUNT / [start [end [BYTE|BIT]]]
// of BITPOS from args[at] on, into the bit range [*first, *last] of a
// `len`-byte string (first > last: empty). *end_given: an end was given.
// False after replying the error.
bool ParseBitRange(CommandCall& c, size_t at, int64_t len, int64_t* first, int64_t* last,
                   bool* end_given) {
  *first = 0;
  *last = len * 8 - 1;
  *end_given = false;
  if (c.argc() == at) return true;
  int64_t start = 0, end = 0;
  if (!ParseNumber(c.args[at], &start)) return c.reply.Error(kNotInteger), false;
  bool bits = false;
  if (c.argc() == at + 3) {
    bits = EqualsIgnoreCase(c.args[at + 2], "BIT");
    if (!bits && !EqualsIgnoreCase(c.args[at + 2], "BYTE")) return c.reply.Error(kSyntax), false;
  }
  const int64_t units = bits ? len * 8 : len;
  if (c.argc() >= at + 2) {
    if (!ParseNumber(c.args[at + 1], &end)) return c.reply.Error(kNotInteger), false;
    *end_given = true;
  } else {
    end = units - 1;
  }
  if (!ClampRange(start, end, units, first, last)) {
    *first = 1;
    *last = 0;
  } else if (!bits) {
    *first *= 8;
    *last = *last * 8 + 7;
  }
  return true;
}

// BITCOUNT key [start end [BYTE|BIT]]: a missing key is 0 whatever the
// arguments (Redis looks the key up first).
void BitCount(CommandCall& c) {
  auto range = [&c](int64_t len, int64_t* first, int64_t* last) {
    if (c.argc() != 2 && c.argc() != 4 && c.argc() != 5) return c.reply.Error(kSyntax), false;
    if (c.argc() >= 4) {
      // Both ends negative and crossed: empty before BYTE|BIT is looked at.
      int64_t start = 0, end = 0;
      if (!ParseNumber(c.args[2], &start) || !ParseNumber(c.args[3], &end))
        return c.reply.Error(kNotInteger), false;
      if (start < 0 && end < 0 && start > end) {
        *first = 1;
        *last = 0;
        return true;
      }
    }
    bool end_given = false;
    return ParseBitRange(c, 2, len, first, last, &end_given);
  };
  std::string data;
  bool found = false;
  int64_t first = 0, last = 0;
  uint64_t byte0 = 0;
  if (!ReadBitRange(c, c.argc() > 2, range, &data, &found, &first, &last, &byte0)) return;
  if (!found || first > last) return c.reply.Integer(0);
  const auto shift = static_cast<int64_t>(byte0 * 8);
  c.reply.Integer(static_cast<int64_t>(CountBits(data, first - shift, last - shift)));
}

// BITPOS key bit [start [end [BYTE|BIT]]]: the first bit equal to `bit`
// in the range, or -1. Looking for a 0 without an end, the string counts
// as followed by zeros (the bit after the range).
void BitPos(CommandCall& c) {
  int64_t bit = 0;
  if (!ParseNumber(c.args[2], &bit)) return c.reply.Error(kNotInteger);
  if (bit != 0 && bit != 1) return c.reply.Error("ERR The bit argument must be 1 or 0.");
  bool end_given = false;
  auto range = [&c, &end_given](int64_t len, int64_t* first, int64_t* last) {
    if (c.argc() > 6) return c.reply.Error(kSyntax), false;
    return ParseBitRange(c, 3, len, first, last, &end_given);
  };
  std::string data;
  bool found = false;
  int64_t first = 0, last = 0;
  uint64_t byte0 = 0;
  if (!ReadBitRange(c, c.argc() > 3, range, &data, &found, &first, &last, &byte0)) return;
  if (!found) return c.reply.Integer(bit == 1 ? -1 : 0);
  if (first > last) return c.reply.Integer(-1);
  // Whole bytes with no such bit are skipped. Bit b of the string is bit
  // b - shift of `data`.
  const auto shift = static_cast<int64_t>(byte0 * 8);
  const unsigned char none = bit == 1 ? 0x00 : 0xff;
  for (int64_t b = first; b <= last;) {
    const int64_t d = b - shift;
    if (b % 8 == 0 && b + 7 <= last && static_cast<unsigned char>(data[d / 8]) == none) {
      b += 8;
      continue;
    }
    if (BitAt(data, static_cast<uint64_t>(d)) == bit) return c.reply.Integer(b);
    ++b;
  }
  c.reply.Integer(bit == 0 && !end_given ? last + 1 : -1);
}

// BITOP AND|OR|XOR|NOT destkey key [key ...]: the result is as long as
// the longest source (shorter ones count as zero-padded); an empty
// result deletes destkey. Replies the result's length.
void BitOp(CommandCall& c) {
  enum class Op { kAnd, kOr, kXor, kNot } op = Op::kAnd;
  const std::string_view name = c.args[1];
  if (EqualsIgnoreCase(name, "AND")) {
    op = Op::kAnd;
  } else if (EqualsIgnoreCase(name, "OR")) {
    op = Op::kOr;
  } else if (EqualsIgnoreCase(name, "XOR")) {
    op = Op::kXor;
  } else if (EqualsIgnoreCase(name, "NOT")) {
    op = Op::kNot;
  } else {
    return c.reply.Error(kSyntax);
  }
  if (op == Op::kNot && c.argc() != 4)
    return c.reply.Error("ERR BITOP NOT must be called with a single source key.");
  const int db = c.client.db;
  const std::string dest(c.args[2]);
  RunAtomically(c, [&](TxnScope& scope) -> Result<int64_t> {
    Items& items = scope.items(db);
    std::vector<std::string> sources;
    size_t longest = 0;
    for (size_t i = 3; i < c.argc(); ++i) {
      Result<Item> r = items.Get(c.args[i]);
      if (!r.ok() && !r.status().is_not_found()) return r.status();
      sources.push_back(r.ok() ? std::move(r->data) : std::string());
      longest = std::max(longest, sources.back().size());
    }
    if (longest == 0) {
      Result<ItemOutcome> d = items.Delete(dest);
      if (!d.ok()) return d.status();
      return 0;
    }
    std::string out(longest, '\0');
    for (size_t i = 0; i < longest; ++i) {
      auto byte = [&](size_t j) -> unsigned char {
        return i < sources[j].size() ? static_cast<unsigned char>(sources[j][i]) : 0;
      };
      unsigned char v = byte(0);
      for (size_t j = 1; j < sources.size(); ++j) {
        if (op == Op::kAnd) v &= byte(j);
        if (op == Op::kOr) v |= byte(j);
        if (op == Op::kXor) v ^= byte(j);
      }
      out[i] = static_cast<char>(op == Op::kNot ? static_cast<unsigned char>(~v) : v);
    }
    Result<ItemOutcome> w = items.Write(StoreMode::kSet, dest, out, 0, 0);
    if (!w.ok()) return w.status();
    return static_cast<int64_t>(longest);
  });
}

// ---- BITFIELD

struct FieldOp {
  enum class Kind : uint8_t { kGet, kSet, kIncrBy } kind = Kind::kGet;
  enum class Overflow : uint8_t { kWrap, kSat, kFail } overflow = Overflow::kWrap;
  bool is_signed = false;
  int bits = 0;  // 1..64 signed, 1..63 unsigned
  uint64_t offset = 0;
  int64_t value = 0;  // SET's value, INCRBY's increment
};

// A bitfield type: i1..i64 or u1..u63.
bool ParseFieldType(std::string_view s, FieldOp* op) {
  if (s.empty() || (s[0] != 'i' && s[0] != 'u')) return false;
  op->is_signed = s[0] == 'i';
  int64_t bits = 0;
  if (!ParseNumber(s.substr(1), &bits) || bits < 1 || bits > (op->is_signed ? 64 : 63))
    return false;
  op->bits = static_cast<int>(bits);
  return true;
}

// A bitfield offset: a bit number, or "#n" for the n-th field of the
// op's width; its byte must be inside the longest string.
bool ParseFieldOffset(CommandCall& c, std::string_view s, FieldOp* op) {
  const bool scaled = !s.empty() && s[0] == '#';
  int64_t v = 0;
  if (!ParseNumber(s.substr(scaled ? 1 : 0), &v)) return false;
  if (scaled && __builtin_mul_overflow(v, static_cast<int64_t>(op->bits), &v)) return false;
  if (v < 0 || static_cast<uint64_t>(v) / 8 >= MaxString(c)) return false;
  op->offset = static_cast<uint64_t>(v);
  return true;
}

// Parses BITFIELD's operations (args[2] on); false after replying the
// error. OVERFLOW applies to the SET and INCRBY operations after it.
bool ParseFieldOps(CommandCall& c, std::vector<FieldOp>* ops) {
  auto overflow = FieldOp::Overflow::kWrap;
  for (size_t j = 2; j < c.argc(); ++j) {
    const size_t left = c.argc() - j - 1;
    const std::string_view word = c.args[j];
    FieldOp op;
    op.overflow = overflow;
    if (EqualsIgnoreCase(word, "GET") && left >= 2) {
      op.kind = FieldOp::Kind::kGet;
    } else if (EqualsIgnoreCase(word, "SET") && left >= 3) {
      op.kind = FieldOp::Kind::kSet;
    } else if (EqualsIgnoreCase(word, "INCRBY") && left >= 3) {
      op.kind = FieldOp::Kind::kIncrBy;
    } else if (EqualsIgnoreCase(word, "OVERFLOW") && left >= 1) {
      const std::string_view how = c.args[++j];
      if (EqualsIgnoreCase(how, "WRAP")) {
        overflow = FieldOp::Overflow::kWrap;
      } else if (EqualsIgnoreCase(how, "SAT")) {
        overflow = FieldOp::Overflow::kSat;
      } else if (EqualsIgnoreCase(how, "FAIL")) {
        overflow = FieldOp::Overflow::kFail;
      } else {
        return c.reply.Error("ERR Invalid OVERFLOW type specified"), false;
      }
      continue;
    } else {
      return c.reply.Error(kSyntax), false;
    }
    if (!ParseFieldType(c.args[j + 1], &op)) return c.reply.Error(kFieldTypeError), false;
    if (!ParseFieldOffset(c, c.args[j + 2], &op)) return c.reply.Error(kBitOffsetError), false;
    if (op.kind != FieldOp::Kind::kGet) {
      if (!ParseNumber(c.args[j + 3], &op.value)) return c.reply.Error(kNotInteger), false;
      ++j;
    }
    j += 2;
    ops->push_back(op);
  }
  return true;
}

uint64_t LowBits(int bits) { return bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

// The `bits` bits of `data` from bit `offset` on (zeros past its end),
// the first one most significant.
uint64_t ReadField(std::string_view data, uint64_t offset, int bits) {
  uint64_t v = 0;
  for (int i = 0; i < bits; ++i) {
    const uint64_t b = offset + static_cast<uint64_t>(i);
    v = (v << 1) | static_cast<uint64_t>(b / 8 < data.size() ? BitAt(data, b) : 0);
  }
  return v;
}

// REQUIRES: data covers the field.
void WriteField(std::string* data, uint64_t offset, int bits, uint64_t v) {
  for (int i = 0; i < bits; ++i) {
    const uint64_t b = offset + static_cast<uint64_t>(i);
    const auto mask = static_cast<unsigned char>(0x80u >> (b % 8));
    auto& byte = reinterpret_cast<unsigned char&>((*data)[b / 8]);
    const bool on = (v >> (bits - 1 - i)) & 1;
    byte = on ? (byte | mask) : (byte & ~mask);
  }
}

__int128 SignExtend(uint64_t v, int bits) {
  if (bits < 64 && ((v >> (bits - 1)) & 1)) v |= ~LowBits(bits);
  return static_cast<int64_t>(v);
}

// Runs one operation on `data` (which covers every field written): its
// reply (GET: the value; SET: the old value; INCRBY: the new one), or
// nullopt when OVERFLOW FAIL refused a write.
std::optional<int64_t> RunFieldOp(const FieldOp& op, std::string* data) {
  const uint64_t raw = ReadField(*data, op.offset, op.bits);
  const __int128 old = op.is_signed ? SignExtend(raw, op.bits) : static_cast<__int128>(raw);
  if (op.kind == FieldOp::Kind::kGet) return static_cast<int64_t>(old);
  // What the field should hold, in exact arithmetic. An unsigned SET takes
  // its value as the 64-bit pattern Redis reads it as (so -1 overflows up).
  __int128 want = op.kind == FieldOp::Kind::kIncrBy ? old + op.value
                  : op.is_signed                    ? static_cast<__int128>(op.value)
                                 : static_cast<__int128>(static_cast<uint64_t>(op.value));
  const __int128 hi = op.is_signed ? (static_cast<__int128>(1) << (op.bits - 1)) - 1
                                   : static_cast<__int128>(LowBits(op.bits));
  const __int128 lo = op.is_signed ? -hi - 1 : 0;
  if (want > hi || want < lo) {
    if (op.overflow == FieldOp::Overflow::kFail) return std::nullopt;
    if (op.overflow == FieldOp::Overflow::kSat) {
      want = want > hi ? hi : lo;
    } else {
      const uint64_t low = static_cast<uint64_t>(want) & LowBits(op.bits);
      want = op.is_signed ? SignExtend(low, op.bits) : static_cast<__int128>(low);
    }
  }
  WriteField(data, op.offset, op.bits, static_cast<uint64_t>(want) & LowBits(op.bits));
  return static_cast<int64_t>(op.kind == FieldOp::Kind::kIncrBy ? want : old);
}

void ReplyFieldResults(CommandCall& c, const std::vector<std::optional<int64_t>>& results) {
  c.reply.Array(results.size());
  for (const auto& r : results) {
    if (r.has_value()) {
      c.reply.Integer(*r);
    } else {
      c.reply.NullBulk();
    }
  }
}

// BITFIELD key [GET type offset] [SET type offset value] [INCRBY type
// offset increment] [OVERFLOW WRAP|SAT|FAIL] ...; BITFIELD_RO takes GETs
// only. The operations run in order; a write grows the string to cover
// every field written (even one FAIL refuses), as Redis does.
void BitField(CommandCall& c) {
  std::vector<FieldOp> ops;
  if (!ParseFieldOps(c, &ops)) return;
  uint64_t need = 0;  // bytes the written fields need
  for (const FieldOp& op : ops)
    if (op.kind != FieldOp::Kind::kGet)
      need = std::max(need, (op.offset + static_cast<uint64_t>(op.bits) - 1) / 8 + 1);
  std::vector<std::optional<int64_t>> results;
  // Only bytes [lo, hi), where the fields are, are read (Items::GetPart)
  // and written (Items::Patch): for a large value, the pieces they are in.
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const FieldOp& op : ops) {
    lo = std::min(lo, op.offset / 8);
    hi = std::max(hi, (op.offset + static_cast<uint64_t>(op.bits) - 1) / 8 + 1);
  }
  if (ops.empty()) lo = hi = 0;  // the key's type is still checked, as Redis does
  if (need == 0) {
    std::string window;  // shorter than hi - lo past the string's end: zeros there
    uint64_t size = 0, version = 0;
    bool found = false;
    if (!ReadStringPart(c, c.args[1], lo, hi - lo, &window, &size, &version, &found)) return;
    for (FieldOp op : ops) {
      op.offset -= lo * 8;
      results.push_back(RunFieldOp(op, &window));
    }
    return ReplyFieldResults(c, results);
  }
  if (c.command.name == "bitfield_ro")
    return c.reply.Error("ERR BITFIELD_RO only supports the GET subcommand");
  if (need > MaxString(c))
    return c.reply.Error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
  Status s =
      c.items.Patch(c.args[1], lo, hi - lo, /*raw_if_new=*/true,
                    [&](const Item* live, uint64_t size) -> std::optional<std::vector<DataWrite>> {
                      std::string window = live ? live->data : std::string();  // zeros past the end
                      window.resize(static_cast<size_t>(hi - lo), '\0');
                      const std::string before = window;
                      results.clear();
                      for (FieldOp op : ops) {
                        op.offset -= lo * 8;
                        results.push_back(RunFieldOp(op, &window));
                      }
                      // The string grows to the fields written, not to those only read.
                      const uint64_t end = std::max(live ? size : 0, need);
                      const auto keep = static_cast<size_t>(std::min(hi, end) - lo);
                      window.resize(keep);
                      if (live && size >= need && window == before.substr(0, keep))
                        return std::nullopt;
                      return std::vector<DataWrite>{{lo, std::move(window)}};
                    });
  if (!s.ok()) return ReplyStoreError(c, s);
  ReplyFieldResults(c, results);
}

// The bitmap commands (registered by RegisterBitCommands).
const CommandSpec kBitCommands[] = {
    {"bitcount", -2, kReadonly, 1, 1, 1, "RO ACCESS", "Counts the set bits of a key's value.",
     BitCount},
    {"bitpos", -3, kReadonly, 1, 1, 1, "RO ACCESS",
     "Finds the first set or clear bit of a key's value.", BitPos},
    {"bitop", -4, kWrite | kDenyOom, 2, -1, 1, "OW UPDATE",
     "Stores the AND, OR, XOR or NOT of keys' values in a key.", BitOp},
    {"bitfield", -2, kWrite | kDenyOom, 1, 1, 1, "RW ACCESS UPDATE VARIABLE_FLAGS",
     "Reads, sets and increments integer fields of a key's value.", BitField},
    {"bitfield_ro", -2, kReadonly | kFast, 1, 1, 1, "RO ACCESS",
     "Reads integer fields of a key's value.", BitField},
};

}  // namespace

void RegisterBitCommands(CommandTable& t) { AddCommands(t, kBitCommands, "bitmap", "bitmap"); }

}  // namespace pmindex::server
