#include "server/resp_protocol.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "server/numbers.h"

namespace pmindex::server {

namespace {

std::string Upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

std::string Lower(std::string_view s) {
  std::string l(s);
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return l;
}

// Reply encoders.
void Simple(std::string_view s, std::string* out) { out->append("+").append(s).append("\r\n"); }
// An error line: CR and LF (from a client's argument) become spaces, so
// that the reply stays one line.
void Error(std::string_view s, std::string* out) {
  out->append("-");
  for (char c : s) out->push_back(c == '\r' || c == '\n' ? ' ' : c);
  out->append("\r\n");
}
void Integer(int64_t n, std::string* out) {
  out->append(":").append(std::to_string(n)).append("\r\n");
}
void Bulk(std::string_view s, std::string* out) {
  out->append("$").append(std::to_string(s.size())).append("\r\n").append(s).append("\r\n");
}
void Nil(std::string* out) { out->append("$-1\r\n"); }
void ArrayHeader(size_t n, std::string* out) {
  out->append("*").append(std::to_string(n)).append("\r\n");
}
void StoreError(const Status& s, std::string* out) { Error("ERR " + StoreErrorText(s), out); }

constexpr std::string_view kNotInteger = "ERR value is not an integer or out of range";
constexpr std::string_view kSyntax = "ERR syntax error";

// The line at `pos` without its line end ("\r\n" or "\n"). Returns the
// position after it, 0 if there is no complete line yet, or npos if the
// line is longer than kMaxLineBytes.
size_t LineAt(std::string_view in, size_t pos, std::string_view* line) {
  const size_t nl = in.find('\n', pos);
  if (nl == std::string_view::npos) return in.size() - pos > kMaxLineBytes ? std::string_view::npos : 0;
  if (nl - pos > kMaxLineBytes) return std::string_view::npos;
  *line = in.substr(pos, nl - pos);
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  return nl + 1;
}

// One character class of a glob at p[i] == '[': whether c is in it;
// *end is set after the closing ']' (or the pattern's end).
bool ClassMatch(std::string_view p, size_t i, char c, size_t* end) {
  ++i;
  const bool negate = i < p.size() && p[i] == '^';
  if (negate) ++i;
  bool match = false;
  while (i < p.size() && p[i] != ']') {
    if (p[i] == '\\' && i + 1 < p.size()) {
      match |= p[i + 1] == c;
      i += 2;
    } else if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
      auto lo = static_cast<unsigned char>(p[i]), hi = static_cast<unsigned char>(p[i + 2]);
      if (lo > hi) std::swap(lo, hi);
      const auto u = static_cast<unsigned char>(c);
      match |= u >= lo && u <= hi;
      i += 3;
    } else {
      match |= p[i] == c;
      ++i;
    }
  }
  *end = i < p.size() ? i + 1 : i;
  return match != negate;
}

}  // namespace

bool GlobMatch(std::string_view p, std::string_view s) {
  // Greedy matching with one backtrack point, the last '*': every other
  // pattern element matches exactly one byte.
  size_t pi = 0, si = 0;
  size_t star_p = std::string_view::npos, star_s = 0;
  while (si < s.size()) {
    if (pi < p.size()) {
      if (p[pi] == '*') {
        star_p = ++pi;
        star_s = si;
        continue;
      }
      size_t next = pi + 1;
      bool m;
      if (p[pi] == '?') {
        m = true;
      } else if (p[pi] == '[') {
        m = ClassMatch(p, pi, s[si], &next);
      } else if (p[pi] == '\\' && pi + 1 < p.size()) {
        m = p[pi + 1] == s[si];
        next = pi + 2;
      } else {
        m = p[pi] == s[si];
      }
      if (m) {
        pi = next;
        ++si;
        continue;
      }
    }
    if (star_p == std::string_view::npos) return false;
    pi = star_p;
    si = ++star_s;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::string KeyToCursor(std::string_view key) {
  if (key.empty()) return "0";
  // Base 10^9 limbs, least significant first, of the number 0x01 key.
  constexpr uint32_t kBase = 1000000000;
  std::vector<uint32_t> limbs;
  auto push_byte = [&limbs](uint32_t b) {
    uint64_t carry = b;
    for (uint32_t& l : limbs) {
      const uint64_t v = uint64_t{l} * 256 + carry;
      l = static_cast<uint32_t>(v % kBase);
      carry = v / kBase;
    }
    while (carry > 0) {
      limbs.push_back(static_cast<uint32_t>(carry % kBase));
      carry /= kBase;
    }
  };
  push_byte(1);
  for (char c : key) push_byte(static_cast<unsigned char>(c));
  std::string s = std::to_string(limbs.back());
  for (size_t i = limbs.size() - 1; i-- > 0;) {
    const std::string part = std::to_string(limbs[i]);
    s.append(9 - part.size(), '0').append(part);
  }
  return s;
}

bool CursorToKey(std::string_view cursor, size_t max_key_bytes, std::string* key) {
  key->clear();
  if (cursor == "0") return true;
  // 0x01 and max_key_bytes bytes take at most 2.41 decimal digits a byte.
  const size_t max_digits = (max_key_bytes + 1) * 241 / 100 + 2;
  if (cursor.empty() || cursor.size() > max_digits || cursor[0] == '0') return false;
  std::vector<uint8_t> bytes;  // least significant first
  for (char c : cursor) {
    if (c < '0' || c > '9') return false;
    uint32_t carry = static_cast<uint32_t>(c - '0');
    for (uint8_t& b : bytes) {
      const uint32_t v = uint32_t{b} * 10 + carry;
      b = static_cast<uint8_t>(v & 0xff);
      carry = v >> 8;
    }
    while (carry > 0) {
      bytes.push_back(static_cast<uint8_t>(carry & 0xff));
      carry >>= 8;
    }
  }
  if (bytes.size() < 2 || bytes.size() > max_key_bytes + 1 || bytes.back() != 1) return false;
  for (size_t i = bytes.size() - 1; i-- > 0;) key->push_back(static_cast<char>(bytes[i]));
  return true;
}

size_t RespProtocol::Consume(std::string_view in, std::string* out) {
  size_t pos = 0;
  while (!close_ && pos < in.size() && out->size() < kReplyBudgetBytes) {
    const size_t used = Parse(in.substr(pos), out);
    if (used == 0) break;
    pos += used;
    if (!close_ && !args_.empty()) Run(out);
  }
  return close_ ? in.size() : pos;
}

void RespProtocol::ProtocolError(std::string_view what, std::string* out) {
  Stats::Add(items_.stats().protocol_errors);
  Error(std::string("ERR Protocol error: ").append(what), out);
  close_ = true;
}

size_t RespProtocol::Parse(std::string_view in, std::string* out) {
  args_.clear();
  std::string_view line;
  size_t pos = LineAt(in, 0, &line);
  if (pos == std::string_view::npos) {
    ProtocolError(in[0] == '*' ? "too big mbulk count string" : "too big inline request", out);
    return in.size();
  }
  if (pos == 0) return 0;
  if (in[0] != '*') {  // an inline command
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      const size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
      if (i > start) args_.push_back(line.substr(start, i - start));
    }
    return pos;
  }
  int64_t n = 0;
  if (!ParseNumber(line.substr(1), &n) || n > static_cast<int64_t>(kMaxArgs)) {
    ProtocolError("invalid multibulk length", out);
    return in.size();
  }
  size_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t next = LineAt(in, pos, &line);
    if (next == 0) return 0;
    if (next == std::string_view::npos || line.empty() || line[0] != '$') {
      ProtocolError(next == std::string_view::npos || line.empty()
                        ? std::string("expected '$'")
                        : std::string("expected '$', got '") + line[0] + "'",
                    out);
      return in.size();
    }
    int64_t len = 0;
    if (!ParseNumber(line.substr(1), &len) || len < 0 ||
        static_cast<uint64_t>(len) > items_.max_data_bytes() + item_codec::kMaxHeaderBytes) {
      ProtocolError("invalid bulk length", out);
      return in.size();
    }
    total += static_cast<size_t>(len);
    if (total > kMaxRequestBytes) {
      ProtocolError("request too large", out);
      return in.size();
    }
    if (in.size() - next < static_cast<size_t>(len) + 2) return 0;
    if (in.substr(next + len, 2) != "\r\n") {
      ProtocolError("expected CRLF after a bulk string", out);
      return in.size();
    }
    args_.push_back(in.substr(next, len));
    pos = next + len + 2;
  }
  return pos;
}

void RespProtocol::Run(std::string* out) {
  const std::string cmd = Upper(args_[0]);
  const size_t argc = args_.size();
  auto arity = [&](bool ok) {
    if (!ok) Error("ERR wrong number of arguments for '" + Lower(args_[0]) + "' command", out);
    return ok;
  };
  // Keys are checked before the store sees them: the store's limit is
  // not the protocol's to break.
  auto keys_ok = [&](size_t first, size_t step) {
    for (size_t i = first; i < argc; i += step) {
      if (args_[i].empty() || args_[i].size() > items_.max_key_bytes()) {
        Error("ERR invalid key length (1 to " + std::to_string(items_.max_key_bytes()) + " bytes)",
              out);
        return false;
      }
    }
    return true;
  };
  auto data_ok = [&](std::string_view v) {
    if (v.size() <= items_.max_data_bytes()) return true;
    Error("ERR value too large (at most " + std::to_string(items_.max_data_bytes()) + " bytes)", out);
    return false;
  };
  auto now = [&] { return items_.NowMs(); };

  if (cmd == "GET") {
    if (!arity(argc == 2) || !keys_ok(1, 1)) return;
    Result<Item> r = items_.Get(args_[1]);
    if (r.ok()) return Bulk(r->data, out);
    if (r.status().is_not_found()) return Nil(out);
    return StoreError(r.status(), out);
  }
  if (cmd == "SET") {
    if (!arity(argc >= 3) || !keys_ok(1, argc) || !data_ok(args_[2])) return;
    StoreMode mode = StoreMode::kSet;
    int64_t expiry_ms = 0;
    bool has_expiry = false;
    for (size_t i = 3; i < argc; ++i) {
      const std::string opt = Upper(args_[i]);
      if ((opt == "NX" || opt == "XX") && mode == StoreMode::kSet) {
        mode = opt == "NX" ? StoreMode::kAdd : StoreMode::kReplace;
      } else if ((opt == "EX" || opt == "PX" || opt == "EXAT" || opt == "PXAT") && !has_expiry &&
                 i + 1 < argc) {
        int64_t t = 0;
        const int64_t unit = opt == "EX" || opt == "EXAT" ? 1000 : 1;
        const int64_t base = opt == "EX" || opt == "PX" ? now() : 0;
        if (!ParseNumber(args_[++i], &t)) return Error(kNotInteger, out);
        if (t <= 0 || __builtin_mul_overflow(t, unit, &t) ||
            __builtin_add_overflow(t, base, &expiry_ms)) {
          return Error("ERR invalid expire time in 'set' command", out);
        }
        has_expiry = true;
      } else {
        return Error(kSyntax, out);
      }
    }
    Result<ItemOutcome> r = items_.Write(mode, args_[1], args_[2], 0, expiry_ms);
    if (!r.ok()) return StoreError(r.status(), out);
    return *r == ItemOutcome::kDone ? Simple("OK", out) : Nil(out);
  }
  if (cmd == "DEL" || cmd == "EXISTS") {
    if (!arity(argc >= 2) || !keys_ok(1, 1)) return;
    int64_t n = 0;
    for (size_t i = 1; i < argc; ++i) {
      if (cmd == "DEL") {
        Result<ItemOutcome> r = items_.Delete(args_[i]);
        if (!r.ok()) return StoreError(r.status(), out);
        n += *r == ItemOutcome::kDone;
      } else {
        Result<Item> r = items_.Get(args_[i]);
        if (!r.ok() && !r.status().is_not_found()) return StoreError(r.status(), out);
        n += r.ok();
      }
    }
    return Integer(n, out);
  }
  if (cmd == "INCR" || cmd == "DECR" || cmd == "INCRBY" || cmd == "DECRBY") {
    const bool by = cmd.size() == 6;
    if (!arity(argc == (by ? 3u : 2u)) || !keys_ok(1, argc)) return;
    int64_t delta = 1;
    if (by && !ParseNumber(args_[2], &delta)) return Error(kNotInteger, out);
    if (cmd[0] == 'D') {
      if (delta == std::numeric_limits<int64_t>::min())
        return Error("ERR decrement would overflow", out);
      delta = -delta;
    }
    int64_t v = 0;
    Result<ItemOutcome> r = items_.IncrBy(args_[1], delta, &v);
    if (!r.ok()) return StoreError(r.status(), out);
    if (*r == ItemOutcome::kNotNumeric) return Error(kNotInteger, out);
    if (*r == ItemOutcome::kOverflow) return Error("ERR increment or decrement would overflow", out);
    return Integer(v, out);
  }
  if (cmd == "MGET") {
    if (!arity(argc >= 2) || !keys_ok(1, 1)) return;
    std::string reply;
    ArrayHeader(argc - 1, &reply);
    for (size_t i = 1; i < argc; ++i) {
      Result<Item> r = items_.Get(args_[i]);
      if (r.ok()) {
        Bulk(r->data, &reply);
        if (reply.size() > kMaxMultiReplyBytes) return Error("ERR reply too large", out);
      } else if (r.status().is_not_found()) {
        Nil(&reply);
      } else {
        return StoreError(r.status(), out);
      }
    }
    out->append(reply);
    return;
  }
  if (cmd == "MSET") {
    if (!arity(argc >= 3 && argc % 2 == 1) || !keys_ok(1, 2)) return;
    std::vector<std::pair<std::string_view, std::string_view>> pairs;
    for (size_t i = 1; i < argc; i += 2) {
      if (!data_ok(args_[i + 1])) return;
      pairs.emplace_back(args_[i], args_[i + 1]);
    }
    Status s = items_.StoreMany(pairs);
    return s.ok() ? Simple("OK", out) : StoreError(s, out);
  }
  if (cmd == "TTL" || cmd == "PTTL") {
    if (!arity(argc == 2) || !keys_ok(1, 1)) return;
    Result<Item> r = items_.Get(args_[1]);
    if (!r.ok()) return r.status().is_not_found() ? Integer(-2, out) : StoreError(r.status(), out);
    if (r->expiry_ms == 0) return Integer(-1, out);
    const int64_t left = std::max<int64_t>(r->expiry_ms - now(), 0);
    return Integer(cmd == "TTL" ? (left + 500) / 1000 : left, out);
  }
  if (cmd == "EXPIRE" || cmd == "PEXPIRE") {
    if (!arity(argc == 3) || !keys_ok(1, 2)) return;
    int64_t t = 0;
    if (!ParseNumber(args_[2], &t)) return Error(kNotInteger, out);
    int64_t expiry_ms = 1;  // t <= 0: expired at once, as Redis deletes the key
    if (t > 0 && (__builtin_mul_overflow(t, cmd == "EXPIRE" ? 1000 : 1, &t) ||
                  __builtin_add_overflow(t, now(), &expiry_ms))) {
      return Error("ERR invalid expire time in '" + Lower(cmd) + "' command", out);
    }
    Result<ItemOutcome> r = items_.Touch(args_[1], expiry_ms);
    if (!r.ok()) return StoreError(r.status(), out);
    return Integer(*r == ItemOutcome::kDone, out);
  }
  if (cmd == "SCAN") {
    if (!arity(argc >= 2 && argc % 2 == 0)) return;
    std::string from;
    if (!CursorToKey(args_[1], items_.max_key_bytes(), &from)) return Error("ERR invalid cursor", out);
    std::string_view pattern;
    size_t count = 10;
    for (size_t i = 2; i < argc; i += 2) {
      const std::string opt = Upper(args_[i]);
      if (opt == "MATCH") {
        pattern = args_[i + 1];
      } else if (opt == "COUNT") {
        if (!ParseNumber(args_[i + 1], &count)) return Error(kNotInteger, out);
        if (count < 1) return Error(kSyntax, out);
        count = std::min<size_t>(count, 100000);
      } else {
        return Error(kSyntax, out);
      }
    }
    std::vector<std::string> keys;
    std::string next;
    items_.ScanKeys(from, count, &keys, &next);
    if (!pattern.empty() && pattern != "*") {
      std::erase_if(keys, [&](const std::string& k) { return !GlobMatch(pattern, k); });
    }
    ArrayHeader(2, out);
    Bulk(KeyToCursor(next), out);
    ArrayHeader(keys.size(), out);
    for (const std::string& k : keys) Bulk(k, out);
    return;
  }
  if (cmd == "DBSIZE") {
    if (!arity(argc == 1)) return;
    return Integer(static_cast<int64_t>(items_.Info().keys), out);
  }
  if (cmd == "FLUSHDB" || cmd == "FLUSHALL") {
    if (!arity(argc <= 2)) return;
    if (argc == 2 && Upper(args_[1]) != "SYNC" && Upper(args_[1]) != "ASYNC")
      return Error(kSyntax, out);
    Status s = items_.Flush(0);
    return s.ok() ? Simple("OK", out) : StoreError(s, out);
  }
  if (cmd == "PING") {
    if (!arity(argc <= 2)) return;
    return argc == 2 ? Bulk(args_[1], out) : Simple("PONG", out);
  }
  if (cmd == "ECHO") {
    if (!arity(argc == 2)) return;
    return Bulk(args_[1], out);
  }
  if (cmd == "INFO") {
    std::string info = "# Server\r\nserver:pmserver\r\n";
    for (const auto& [name, value] : StatsReport(items_))
      info.append(name).append(":").append(value).append("\r\n");
    info.append("\r\n# Keyspace\r\ndb0:keys=")
        .append(std::to_string(items_.Info().keys))
        .append("\r\n");
    return Bulk(info, out);
  }
  if (cmd == "QUIT") {
    Simple("OK", out);
    close_ = true;
    return;
  }
  if (cmd == "SELECT") {
    if (!arity(argc == 2)) return;
    return args_[1] == "0" ? Simple("OK", out) : Error("ERR DB index is out of range", out);
  }
  if (cmd == "COMMAND") return ArrayHeader(0, out);  // no command table to describe
  if (cmd == "CLIENT" && argc >= 2) {
    const std::string sub = Upper(args_[1]);
    if (sub == "SETNAME" || sub == "SETINFO") return Simple("OK", out);
    return Error("ERR unknown subcommand '" + std::string(args_[1]) + "'", out);
  }
  Stats::Add(items_.stats().protocol_errors);
  Error("ERR unknown command '" + std::string(args_[0]) + "'", out);
}

}  // namespace pmindex::server
