#include "server/resp_protocol.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <limits>

#include "server/numbers.h"
#include "server/resp_transaction.h"

namespace pmindex::server {

namespace {

// The line at `pos` without its line end ("\r\n" or "\n"). Returns the
// position after it, 0 if there is no complete line yet, or npos if the
// line is longer than kMaxLineBytes.
size_t LineAt(std::string_view in, size_t pos, std::string_view* line) {
  const size_t nl = in.find('\n', pos);
  if (nl == std::string_view::npos)
    return in.size() - pos > kMaxLineBytes ? std::string_view::npos : 0;
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

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Appends the keys a write command names (its key positions; not a
// blocking command's) to *out as (db, key): the clients parked on them
// are served once it committed. `arg(i)` is argument i of `argc`.
template <class Arg>
void NoteWrittenKeys(const Command& command, size_t argc, Arg&& arg, int db,
                     std::vector<std::pair<int, std::string>>* out) {
  if (!(command.flags & cmd_flag::kWrite) || (command.flags & cmd_flag::kBlocking) ||
      command.first_key <= 0) {
    return;
  }
  const auto n = static_cast<int64_t>(argc);
  const int64_t last = command.last_key < 0 ? n + command.last_key : command.last_key;
  for (int64_t i = command.first_key; i <= last && i < n; i += std::max(command.key_step, 1))
    out->emplace_back(db, std::string(arg(static_cast<size_t>(i))));
}

// maxmemory: whether `command` is refused while the used memory is over
// the limit (Redis's rules): a command flagged deny-oom; inside MULTI,
// anything but EXEC, DISCARD, QUIT and RESET (a queue may otherwise grow
// without bound); EXEC, iff its queue holds a deny-oom command.
bool DeniedOnOom(const Command& command, const RespClient& client) {
  const bool in_multi = client.tx != nullptr && client.tx->in_multi;
  // A view of the name, not std::string::substr's temporary.
  const std::string_view full = command.full_name;
  const std::string_view top = full.substr(0, full.find('|'));
  if (top == "exec") {
    if (!in_multi) return false;
    for (const RespTransaction::Queued& q : client.tx->queue)
      if (q.command->flags & cmd_flag::kDenyOom) return true;
    return false;
  }
  if (command.flags & cmd_flag::kDenyOom) return true;
  return in_multi && top != "discard" && top != "quit" && top != "reset";
}

// Whether running `command` counts as an access of its keys for OBJECT
// IDLETIME: as in Redis, every command with keys but those that only look
// at a key's existence, type, time to live or representation.
bool TouchesKeys(const Command& command) {
  static constexpr std::string_view kLookOnly[] = {
      "object", "type", "exists", "ttl", "pttl", "expiretime", "pexpiretime", "memory", "watch"};
  const std::string_view full = command.full_name;
  const std::string_view top = full.substr(0, full.find('|'));
  for (std::string_view n : kLookOnly)
    if (top == n) return false;
  return true;
}

}  // namespace

bool SplitInline(std::string_view line, std::vector<std::string>* args) {
  args->clear();
  size_t i = 0;
  const size_t n = line.size();
  for (;;) {
    while (i < n && IsSpace(line[i])) ++i;
    if (i == n) return true;
    std::string arg;
    char quote = 0;  // '"' or '\'' while inside quotes
    for (bool done = false; !done;) {
      if (quote == '"') {
        if (i == n) return false;  // unterminated
        if (line[i] == '\\' && i + 3 < n && line[i + 1] == 'x' && HexValue(line[i + 2]) >= 0 &&
            HexValue(line[i + 3]) >= 0) {
          arg.push_back(static_cast<char>(HexValue(line[i + 2]) * 16 + HexValue(line[i + 3])));
          i += 4;
        } else if (line[i] == '\\' && i + 1 < n) {
          const char e = line[i + 1];
          arg.push_back(e == 'n'   ? '\n'
                        : e == 'r' ? '\r'
                        : e == 't' ? '\t'
                        : e == 'b' ? '\b'
                        : e == 'a' ? '\a'
                                   : e);
          i += 2;
        } else if (line[i] == '"') {
          // A closing quote must end the argument.
          if (i + 1 < n && !IsSpace(line[i + 1])) return false;
          done = true;
          ++i;
        } else {
          arg.push_back(line[i++]);
        }
      } else if (quote == '\'') {
        if (i == n) return false;
        if (line[i] == '\\' && i + 1 < n && line[i + 1] == '\'') {
          arg.push_back('\'');
          i += 2;
        } else if (line[i] == '\'') {
          if (i + 1 < n && !IsSpace(line[i + 1])) return false;
          done = true;
          ++i;
        } else {
          arg.push_back(line[i++]);
        }
      } else if (i == n || line[i] == ' ' || line[i] == '\t' || line[i] == '\n' ||
                 line[i] == '\r') {
        done = true;
      } else if (line[i] == '"' || line[i] == '\'') {
        quote = line[i++];
      } else {
        arg.push_back(line[i++]);
      }
    }
    args->push_back(std::move(arg));
  }
}

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

RespProtocol::RespProtocol(Items& items, RespShared& shared, std::string addr, std::string laddr)
    : Protocol(items), shared_(shared) {
  client_.id = shared_.NextClientId();
  client_.addr = std::move(addr);
  client_.laddr = std::move(laddr);
  client_.created_ms = items_.NowMs();
  client_.last_steady_ms.store(SteadyMs(), std::memory_order_relaxed);
  // As Redis: a connection made while no password is set stays
  // authenticated if one is set later.
  client_.authenticated = !shared_.PasswordRequired();
  shared_.clients().Add(&client_);
}

RespProtocol::RespProtocol(Items& items) : RespProtocol(items, *new RespShared()) {
  own_shared_.reset(&shared_);
}

RespProtocol::~RespProtocol() {
  Abandon();
  shared_.clients().Remove(&client_);
}

int64_t RespProtocol::park_deadline_ms() const {
  return parked_ != nullptr ? parked_->deadline_ms : 0;
}

bool RespProtocol::Unpark(std::string* out, bool timed_out) {
  if (parked_ == nullptr) return true;
  if (!shared_.blocking().TakeReply(*parked_, out)) {
    if (!timed_out || !shared_.blocking().Cancel(*parked_)) {
      // Served between the two calls: its reply stands.
      if (!shared_.blocking().TakeReply(*parked_, out)) return false;
    } else {
      out->append(parked_->timeout_reply);
    }
  }
  parked_.reset();
  return true;
}

void RespProtocol::Abandon() {
  if (parked_ == nullptr) return;
  shared_.blocking().Cancel(*parked_);
  parked_.reset();
}

void RespProtocol::ServeReadyKeys() {
  std::vector<std::pair<int, std::string>> keys = std::move(client_.ready_keys);
  client_.ready_keys.clear();
  // By database (one call each), in the order recorded.
  while (!keys.empty()) {
    const int db = keys.front().first;
    std::vector<std::string> same;
    std::vector<std::pair<int, std::string>> rest;
    for (auto& [d, k] : keys) {
      if (d == db) {
        same.push_back(std::move(k));
      } else {
        rest.emplace_back(d, std::move(k));
      }
    }
    shared_.blocking().ServeReady(db, same);
    keys = std::move(rest);
  }
}

size_t RespProtocol::Consume(std::string_view in, std::string* out) {
  if (client_.killed.load(std::memory_order_relaxed)) close_ = true;  // CLIENT KILL
  pending_bytes_ = 0;
  size_t pos = 0;
  while (!close_ && parked_ == nullptr && pos < in.size() && out->size() < kReplyBudgetBytes) {
    if (discard_.active()) {
      const size_t used = Discard(in.substr(pos), out);
      if (used == 0) break;
      pos += used;
      continue;
    }
    const size_t used = Parse(in.substr(pos), out);
    if (used == 0) break;
    pos += used;
    if (!close_ && !args_.empty()) Run(out);
  }
  return close_ ? in.size() : pos;
}

void RespProtocol::ProtocolError(std::string_view what, std::string* out) {
  Stats::Add(items_.stats().protocol_errors);
  RespReply(out, client_.protocol.load(std::memory_order_relaxed))
      .Error(std::string("ERR Protocol error: ").append(what));
  close_ = true;
}

size_t RespProtocol::Discard(std::string_view in, std::string* out) {
  size_t pos = 0;
  for (;;) {
    const uint64_t take = std::min<uint64_t>(discard_.bytes, in.size() - pos);
    discard_.bytes -= take;
    pos += take;
    if (discard_.bytes > 0) return pos;
    if (discard_.args_left == 0) {
      discard_ = {};
      RespReply(out, client_.protocol.load(std::memory_order_relaxed))
          .Error("ERR value too large (at most " + std::to_string(items_.max_data_bytes()) +
                 " bytes)");
      return pos;
    }
    // The next bulk string's length line.
    std::string_view line;
    const size_t next = LineAt(in, pos, &line);
    if (next == 0) return pos;
    int64_t len = 0;
    if (next == std::string_view::npos || line.empty() || line[0] != '$' ||
        !ParseNumber(line.substr(1), &len) || len < 0 ||
        static_cast<uint64_t>(len) > shared_.proto_max_bulk_len()) {
      ProtocolError("invalid bulk length", out);
      return in.size();
    }
    discard_.bytes = static_cast<uint64_t>(len) + 2;
    --discard_.args_left;
    pos = next;
  }
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
    if (!SplitInline(line, &inline_args_)) {
      ProtocolError("unbalanced quotes in request", out);
      return in.size();
    }
    for (const std::string& a : inline_args_) args_.push_back(a);
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
        static_cast<uint64_t>(len) > shared_.proto_max_bulk_len()) {
      ProtocolError("invalid bulk length", out);
      return in.size();
    }
    if (static_cast<uint64_t>(len) > items_.max_data_bytes() + item_codec::kMaxHeaderBytes) {
      // Larger than any item, within proto-max-bulk-len: the request is
      // read and dropped as it arrives (never buffered whole), then
      // refused with an error; the connection stays usable.
      discard_ = {static_cast<uint64_t>(len) + 2, n - i - 1};
      args_.clear();
      return next;
    }
    total += static_cast<size_t>(len);
    if (total > kMaxRequestBytes + shared_.proto_max_bulk_len()) {
      ProtocolError("request too large", out);
      return in.size();
    }
    if (in.size() - next < static_cast<size_t>(len) + 2) {
      pending_bytes_ = next + static_cast<size_t>(len) + 2;
      return 0;
    }
    if (in.substr(next + len, 2) != "\r\n") {
      ProtocolError("expected CRLF after a bulk string", out);
      return in.size();
    }
    args_.push_back(in.substr(next, len));
    pos = next + len + 2;
  }
  return pos;
}

const Command* RespProtocol::ResolveCommand(RespReply& reply) {
  const Command* command = shared_.commands().Find(args_[0]);
  if (command == nullptr) {
    // Redis's text: the name and the first arguments, quoted, up to about
    // 128 bytes of them.
    std::string text = "ERR unknown command '" + std::string(args_[0].substr(0, 128)) +
                       "', with args beginning with: ";
    std::string quoted;
    for (size_t i = 1; i < args_.size() && quoted.size() < 128; ++i) {
      const std::string_view arg = args_[i].substr(0, 128 - quoted.size());
      quoted.append("'").append(arg).append("' ");
    }
    Stats::Add(items_.stats().protocol_errors);
    FlagMultiError(client_);
    reply.Error(text + quoted);
    return nullptr;
  }
  if (!command->subcommands.empty() && (args_.size() >= 2 || command->handler == nullptr)) {
    if (args_.size() < 2) {
      FlagMultiError(client_);
      reply.Error("ERR wrong number of arguments for '" + command->full_name + "' command");
      return nullptr;
    }
    const Command* sub = command->FindSubcommand(args_[1]);
    if (sub == nullptr) {
      FlagMultiError(client_);
      reply.Error("ERR unknown subcommand '" + std::string(args_[1].substr(0, 128)) + "'. Try " +
                  Upper(command->name) + " HELP.");
      return nullptr;
    }
    command = sub;
  }
  return command;
}

bool RespProtocol::RouteKeys(CommandCall& call, CommandCounters& counters,
                             std::shared_lock<std::shared_mutex>* slot_hold, bool* keyed) {
  const Command* command = &call.command;
  if (command->first_key > 0 || command->numkeys_arg > 0) {
    // A bad count of keys is the handler's to report, with its own text.
    if (CommandKeys(*command, args_, &keys_)) {
      *keyed = true;
      for (std::string_view key : keys_) {
        if (!CheckKey(call, key)) {
          counters.Rejected();
          FlagMultiError(client_);
          return false;
        }
      }
      if (!RouteInCluster(call, keys_, slot_hold)) {
        counters.Rejected();
        FlagMultiError(client_);
        client_.asking = false;
        return false;
      }
    }
  } else if (shared_.cluster() != nullptr && command->name == "exec" &&
             (QueuedKeys(client_, &keys_), !keys_.empty()) &&
             !RouteInCluster(call, keys_, slot_hold)) {
    // EXEC in cluster mode: the queued commands' keys, all of one slot,
    // routed again now (a move may have begun since they were queued).
    counters.Rejected();
    DiscardMulti(client_);
    client_.asking = false;
    return false;
  }
  return true;
}

bool RespProtocol::RejectedOnOom(const Command* command, CommandCounters& counters,
                                 RespReply& reply) {
  if (shared_.maxmemory() != 0 && DeniedOnOom(*command, client_) && shared_.OutOfMemory(items_)) {
    constexpr std::string_view kOom = "OOM command not allowed when used memory > 'maxmemory'.";
    counters.Rejected();
    client_.asking = false;
    if (command->name == "exec") {
      // As Redis: the transaction is discarded, with the reason.
      DiscardMulti(client_);
      reply.Error("EXECABORT Transaction discarded because of: " + std::string(kOom));
      return true;
    }
    FlagMultiError(client_);
    reply.Error(kOom);
    return true;
  }
  return false;
}

void RespProtocol::NoteKeysBeforeRun(const Command* command, bool keyed) {
  if (shared_.blocking().any()) {
    // Clients are parked: the keys this command (or the EXEC's queue)
    // writes are tried for them after it (ServeReadyKeys), which covers
    // every way a key gets elements (a push, ZADD, RENAME or COPY onto it,
    // a STORE). Read before the handler: EXEC takes its queue away.
    const int db = client_.db.load(std::memory_order_relaxed);
    if (command->name == "exec" && client_.tx != nullptr && client_.tx->in_multi) {
      int queued_db = db;
      for (const RespTransaction::Queued& q : client_.tx->queue) {
        if (q.command->name == "select" && q.args.size() == 2) ParseNumber(q.args[1], &queued_db);
        NoteWrittenKeys(*q.command, q.args.size(), [&q](size_t i) { return q.args[i]; },
                        queued_db, &client_.ready_keys);
      }
    } else {
      NoteWrittenKeys(*command, args_.size(), [this](size_t i) { return args_[i]; }, db,
                      &client_.ready_keys);
    }
  }
  if (TouchesKeys(*command)) {
    // OBJECT IDLETIME's clock. EXEC's keys are its queue's (read now:
    // EXEC takes the queue away).
    if (command->name == "exec") {
      QueuedKeys(client_, &keys_);
      keyed = true;
    }
    if (keyed && !keys_.empty()) {
      const int db = client_.db.load(std::memory_order_relaxed);
      const bool exec = command->name == "exec";
      const int64_t now = exec ? items_.NowMs() : 0;
      for (std::string_view key : keys_) {
        const RespShared::AccessKey k = RespShared::AccessKeyOf(db, key);
        // EXEC's keys at once: a queued OBJECT IDLETIME after a queued
        // access of its key sees that access, as in Redis. Any other
        // command's after it runs (TouchKeysAfterRun).
        if (exec) {
          shared_.Touch(k, now);
        } else {
          shared_.PrefetchAccess(k);
          touches_.push_back(k);
        }
      }
    }
  }
}

void RespProtocol::TouchKeysAfterRun() {
  if (touches_.empty()) return;
  const int64_t now = items_.NowMs();
  for (const RespShared::AccessKey& k : touches_) shared_.Touch(k, now);
  touches_.clear();
}

void RespProtocol::Run(std::string* out) {
  RespReply reply(out, client_.protocol.load(std::memory_order_relaxed));
  const Command* command = ResolveCommand(reply);
  if (command == nullptr) return;
  CommandCounters& counters = shared_.counters(command);
  const auto argc = static_cast<int64_t>(args_.size());
  if (command->arity >= 0 ? argc != command->arity : argc < -command->arity) {
    counters.Rejected();
    FlagMultiError(client_);
    return reply.Error("ERR wrong number of arguments for '" + command->full_name + "' command");
  }
  if (!client_.authenticated && !(command->flags & cmd_flag::kNoAuth)) {
    if (shared_.PasswordRequired()) {
      counters.Rejected();
      FlagMultiError(client_);
      return reply.Error("NOAUTH Authentication required.");
    }
    client_.authenticated = true;  // the password was removed meanwhile
  }
  CommandCall call{*command, args_, ClientItems(items_, client_), client_, shared_, reply};
  call.waker = &waker_;
  // Held from routing to the reply on a slot being migrated.
  std::shared_lock<std::shared_mutex> slot_hold;
  bool keyed = false;  // keys_ holds this command's keys
  if (!RouteKeys(call, counters, &slot_hold, &keyed)) return;
  if (RejectedOnOom(command, counters, reply)) return;
  // Inside MULTI: queued, replied QUEUED (resp_transaction.h); EXEC runs it.
  if (QueueInMulti(*command, args_, client_, reply)) return;
  // As Redis, CLIENT LIST names the command running (its own included).
  const int64_t start_us = SteadyUs();
  client_.last_command.store(command, std::memory_order_relaxed);
  client_.last_steady_ms.store(start_us / 1000, std::memory_order_relaxed);
  const size_t reply_start = out->size();
  NoteKeysBeforeRun(command, keyed);
  command->handler(call);
  TouchKeysAfterRun();
  // ASKING applies to the command after it only.
  if (command->name != "asking") client_.asking = false;
  counters.Called(static_cast<uint64_t>(SteadyUs() - start_us),
                  out->size() > reply_start && (*out)[reply_start] == '-');
  if (call.close) close_ = true;
  // Committed by now (an EXEC's included): the clients parked on the keys
  // it pushed to are served before this connection goes on.
  if (!client_.ready_keys.empty()) ServeReadyKeys();
  if (call.park != nullptr) parked_ = std::move(call.park);
}

}  // namespace pmindex::server
