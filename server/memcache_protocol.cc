#include "server/memcache_protocol.h"

#include <algorithm>
#include <limits>

#include "pmindex/version.h"
#include "server/collections.h"
#include "server/numbers.h"

namespace pmindex::server {

namespace {

constexpr int64_t kRelativeExptimeLimit = 60 * 60 * 24 * 30;  // 30 days, in seconds

constexpr std::string_view kBadFormat = "CLIENT_ERROR bad command line format";

// The largest byte count a storage command may name, memcached's own bound
// (the count plus the data's CRLF fits a signed 32-bit int). A larger one
// is a malformed line, and its data block is not swallowed: a client that
// sent such a count did not send that many bytes, and swallowing them
// would run nothing the connection sends for gigabytes.
constexpr int64_t kMaxByteCount = std::numeric_limits<int32_t>::max() - 2;

// memcached keys: 1 to 250 bytes, no control characters (the tokenizer
// already split at spaces).
bool ValidKey(std::string_view k, size_t store_max) {
  if (k.empty() || k.size() > std::min(kMemcachedMaxKeyBytes, store_max)) return false;
  return std::none_of(k.begin(), k.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x21 || u == 0x7f;
  });
}

void Split(std::string_view line, std::vector<std::string_view>* tok) {
  tok->clear();
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) tok->push_back(line.substr(start, i - start));
  }
}

}  // namespace

int64_t MemcachedExpiry(int64_t exptime, int64_t now_ms) {
  if (exptime == 0) return 0;
  if (exptime < 0) return 1;  // 1 ms after the epoch: in the past, and not "never"
  constexpr int64_t kMaxSeconds = std::numeric_limits<int64_t>::max() / 1000 - 1;
  if (exptime <= kRelativeExptimeLimit) return now_ms + exptime * 1000;
  return std::min(exptime, kMaxSeconds) * 1000;
}

size_t MemcacheProtocol::Consume(std::string_view in, std::string* out) {
  pending_bytes_ = 0;
  size_t pos = 0;
  while (!close_ && pos < in.size() && out->size() < kReplyBudgetBytes) {
    if (swallow_ > 0) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(swallow_, in.size() - pos));
      pos += n;
      swallow_ -= n;
      continue;
    }
    const std::string_view rest = in.substr(pos);
    const size_t nl = rest.find('\n');
    if (nl == std::string_view::npos ? rest.size() > kMaxLineBytes : nl > kMaxLineBytes) {
      Stats::Add(items_.stats().protocol_errors);
      out->append("CLIENT_ERROR line too long\r\n");
      close_ = true;
      break;
    }
    if (nl == std::string_view::npos) break;
    std::string_view line = rest.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t used = Run(rest, line, nl + 1, out);
    if (used == 0) break;  // a data block still arriving
    pos += used;
  }
  return close_ ? in.size() : pos;
}

void MemcacheProtocol::Reply(std::string_view reply, std::string* out) {
  if (noreply_) return;
  out->append(reply);
  out->append("\r\n");
}

void MemcacheProtocol::ReplyError(const Status& s, std::string* out) {
  if (IsWrongType(s)) {
    // The key holds a RESP collection: the commands that would read or
    // change it as an item refuse (set and delete replace or delete it;
    // get reads it as a miss).
    return Reply("CLIENT_ERROR the key holds a RESP hash, list, set or sorted set", out);
  }
  Reply("SERVER_ERROR " + StoreErrorText(s), out);
}

void MemcacheProtocol::TakeNoreply() {
  noreply_ = tok_.size() > 1 && tok_.back() == "noreply";
  if (noreply_) tok_.pop_back();
}

size_t MemcacheProtocol::Run(std::string_view in, std::string_view line, size_t line_bytes,
                             std::string* out) {
  Split(line, &tok_);
  noreply_ = false;
  if (tok_.empty()) {
    out->append("ERROR\r\n");
    return line_bytes;
  }
  const std::string_view cmd = tok_[0];
  if (cmd == "get" || cmd == "gets") {
    RunGet(cmd == "gets", false, out);
  } else if (cmd == "gat" || cmd == "gats") {
    RunGet(cmd == "gats", true, out);
  } else if (cmd == "set" || cmd == "add" || cmd == "replace" || cmd == "append" ||
             cmd == "prepend" || cmd == "cas") {
    return RunStorage(in, line_bytes, out);
  } else if (cmd == "delete") {
    RunDelete(out);
  } else if (cmd == "incr" || cmd == "decr") {
    RunIncrDecr(cmd == "incr", out);
  } else if (cmd == "touch") {
    RunTouch(out);
  } else if (cmd == "flush_all") {
    RunFlush(out);
  } else if (cmd == "version" && tok_.size() == 1) {
    out->append("VERSION " PMINDEX_VERSION_STRING "\r\n");
  } else if (cmd == "verbosity" && tok_.size() >= 2 && tok_.size() <= 3) {
    // "verbosity <level> [noreply]"; as in memcached a second argument
    // other than noreply is ignored, and a bare "verbosity" is ERROR.
    TakeNoreply();
    uint32_t level = 0;
    if (tok_.size() < 2 || !ParseNumber(tok_[1], &level)) {
      Stats::Add(items_.stats().protocol_errors);
      Reply(kBadFormat, out);
    } else {
      Reply("OK", out);
    }
  } else if (cmd == "stats") {
    RunStats(out);
  } else if (cmd == "quit" && tok_.size() == 1) {
    close_ = true;
  } else {
    Stats::Add(items_.stats().protocol_errors);
    out->append("ERROR\r\n");
  }
  return line_bytes;
}

void MemcacheProtocol::RunGet(bool with_cas, bool touch, std::string* out) {
  // get|gets <key>+; gat|gats <exptime> <key>* (memcached answers a gat
  // without keys with END).
  const size_t first_key = touch ? 2 : 1;
  if (tok_.size() < 2) {
    Stats::Add(items_.stats().protocol_errors);
    out->append("ERROR\r\n");
    return;
  }
  int64_t expiry_ms = 0;
  if (touch) {
    int64_t exptime = 0;
    if (!ParseNumber(tok_[1], &exptime)) {
      Stats::Add(items_.stats().protocol_errors);
      out->append("CLIENT_ERROR invalid exptime argument\r\n");
      return;
    }
    expiry_ms = MemcachedExpiry(exptime, items_.NowMs());
  }
  for (size_t i = first_key; i < tok_.size(); ++i) {
    if (!ValidKey(tok_[i], items_.max_key_bytes())) {
      Stats::Add(items_.stats().protocol_errors);
      Reply(kBadFormat, out);
      return;
    }
  }
  // Built aside: a store error replaces the whole reply.
  std::string reply;
  for (size_t i = first_key; i < tok_.size(); ++i) {
    Result<Item> r = touch ? items_.GetAndTouch(tok_[i], expiry_ms) : items_.Get(tok_[i]);
    if (!r.ok()) {
      // A collection is no item: a miss.
      if (r.status().is_not_found() || IsWrongType(r.status())) continue;
      ReplyError(r.status(), out);
      return;
    }
    reply.append("VALUE ").append(tok_[i]).append(" ").append(std::to_string(r->flags));
    reply.append(" ").append(std::to_string(r->data.size()));
    if (with_cas) reply.append(" ").append(std::to_string(r->version));
    reply.append("\r\n").append(r->data).append("\r\n");
    if (reply.size() > kMaxMultiReplyBytes)
      return Reply("SERVER_ERROR out of memory writing get response", out);
  }
  out->append(reply);
  out->append("END\r\n");
}

size_t MemcacheProtocol::RunStorage(std::string_view in, size_t line_bytes, std::string* out) {
  const std::string_view cmd = tok_[0];
  const bool is_cas = cmd == "cas";
  TakeNoreply();
  const size_t want = is_cas ? 6 : 5;
  uint32_t flags = 0;
  int64_t exptime = 0;
  int64_t bytes = -1;
  uint64_t cas = 0;
  // The byte count first: if it parses, the data block can be skipped
  // whatever else is wrong with the line.
  if (tok_.size() >= 5 && (!ParseNumber(tok_[4], &bytes) || bytes > kMaxByteCount)) bytes = -1;
  const bool line_ok = tok_.size() == want && bytes >= 0 &&
                       ValidKey(tok_[1], items_.max_key_bytes()) &&
                       ParseNumber(tok_[2], &flags) && ParseNumber(tok_[3], &exptime) &&
                       (!is_cas || ParseNumber(tok_[5], &cas));
  if (bytes < 0) {
    Stats::Add(items_.stats().protocol_errors);
    Reply(kBadFormat, out);
    return line_bytes;
  }
  const auto data_bytes = static_cast<uint64_t>(bytes);
  if (!line_ok || data_bytes > max_data_) {
    if (!line_ok) Stats::Add(items_.stats().protocol_errors);
    Reply(line_ok ? "SERVER_ERROR object too large for cache" : kBadFormat, out);
    swallow_ = data_bytes + 2;
    return line_bytes;
  }
  if (in.size() - line_bytes < data_bytes + 2) {
    pending_bytes_ = line_bytes + static_cast<size_t>(data_bytes) + 2;
    return 0;
  }
  const std::string_view data = in.substr(line_bytes, data_bytes);
  const size_t used = line_bytes + data_bytes + 2;
  if (in.substr(line_bytes + data_bytes, 2) != "\r\n") {
    Stats::Add(items_.stats().protocol_errors);
    Reply("CLIENT_ERROR bad data chunk", out);
    return used;
  }
  StoreMode mode = StoreMode::kSet;
  if (cmd == "add") mode = StoreMode::kAdd;
  if (cmd == "replace") mode = StoreMode::kReplace;
  if (cmd == "append") mode = StoreMode::kAppend;
  if (cmd == "prepend") mode = StoreMode::kPrepend;
  if (is_cas) mode = StoreMode::kCas;
  Result<ItemOutcome> r = items_.Write(mode, tok_[1], data, flags,
                                       MemcachedExpiry(exptime, items_.NowMs()), cas, max_data_);
  if (!r.ok()) {
    ReplyError(r.status(), out);
  } else {
    switch (*r) {
      case ItemOutcome::kDone: Reply("STORED", out); break;
      case ItemOutcome::kExists: Reply("EXISTS", out); break;
      case ItemOutcome::kNotFound: Reply("NOT_FOUND", out); break;
      default: Reply("NOT_STORED", out); break;
    }
  }
  return used;
}

void MemcacheProtocol::RunDelete(std::string* out) {
  TakeNoreply();
  // "delete <key> 0" is accepted for old clients; any other time is not.
  const bool ok = (tok_.size() == 2 || (tok_.size() == 3 && tok_[2] == "0")) &&
                  ValidKey(tok_[1], items_.max_key_bytes());
  if (!ok) {
    Stats::Add(items_.stats().protocol_errors);
    Reply(tok_.size() == 3 ? "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]"
                           : kBadFormat,
          out);
    return;
  }
  Result<ItemOutcome> r = items_.Delete(tok_[1]);
  if (!r.ok()) return ReplyError(r.status(), out);
  Reply(*r == ItemOutcome::kDone ? "DELETED" : "NOT_FOUND", out);
}

void MemcacheProtocol::RunIncrDecr(bool incr, std::string* out) {
  TakeNoreply();
  if (tok_.size() != 3 || !ValidKey(tok_[1], items_.max_key_bytes())) {
    Stats::Add(items_.stats().protocol_errors);
    return Reply(kBadFormat, out);
  }
  uint64_t delta = 0;
  if (!ParseNumber(tok_[2], &delta))
    return Reply("CLIENT_ERROR invalid numeric delta argument", out);
  uint64_t value = 0;
  Result<ItemOutcome> r = items_.IncrDecr(tok_[1], delta, incr, &value);
  if (!r.ok()) return ReplyError(r.status(), out);
  switch (*r) {
    case ItemOutcome::kDone: Reply(std::to_string(value), out); break;
    case ItemOutcome::kNotNumeric:
      Reply("CLIENT_ERROR cannot increment or decrement non-numeric value", out);
      break;
    default: Reply("NOT_FOUND", out); break;
  }
}

void MemcacheProtocol::RunTouch(std::string* out) {
  TakeNoreply();
  int64_t exptime = 0;
  if (tok_.size() != 3 || !ValidKey(tok_[1], items_.max_key_bytes()) ||
      !ParseNumber(tok_[2], &exptime)) {
    Stats::Add(items_.stats().protocol_errors);
    return Reply(kBadFormat, out);
  }
  Result<ItemOutcome> r = items_.Touch(tok_[1], MemcachedExpiry(exptime, items_.NowMs()));
  if (!r.ok()) return ReplyError(r.status(), out);
  Reply(*r == ItemOutcome::kDone ? "TOUCHED" : "NOT_FOUND", out);
}

void MemcacheProtocol::RunFlush(std::string* out) {
  TakeNoreply();
  int64_t delay = 0;
  if (tok_.size() > 2 || (tok_.size() == 2 && !ParseNumber(tok_[1], &delay))) {
    Stats::Add(items_.stats().protocol_errors);
    return Reply(kBadFormat, out);
  }
  // A delay is seconds from now, or (over 30 days) a unix time.
  const int64_t now = items_.NowMs();
  const int64_t at = delay > 0 ? MemcachedExpiry(delay, now) : 0;
  Status s = items_.Flush(at > now ? at - now : 0);
  if (!s.ok()) return ReplyError(s, out);
  Reply("OK", out);
}

void MemcacheProtocol::RunStats(std::string* out) {
  std::vector<std::pair<std::string, std::string>> report;
  if (tok_.size() == 1) {
    report = StatsReport(items_);
  } else if (tok_[1] == "items") {
    report = ItemsReport();
  } else if (tok_[1] == "slabs") {
    report = SlabsReport();
  } else if (tok_[1] == "settings") {
    report = SettingsReport();
  } else {
    // Other sub-reports (sizes, conns, detail, reset, cachedump, ...)
    // are not served.
    Stats::Add(items_.stats().protocol_errors);
    out->append("ERROR\r\n");
    return;
  }
  // As memcached, arguments after the sub-report's name are ignored.
  for (const auto& [name, value] : report)
    out->append("STAT ").append(name).append(" ").append(value).append("\r\n");
  out->append("END\r\n");
}

// pmserver has no slab classes: every item is in one store. Both reports
// show it as class 1, memcached's first class, with the figures pmserver
// really has; like memcached, a class holding no item is not listed in
// "stats items".
std::vector<std::pair<std::string, std::string>> MemcacheProtocol::ItemsReport() {
  const StoreInfo info = items_.Info();
  std::vector<std::pair<std::string, std::string>> r;
  if (info.keys == 0) return r;
  r.emplace_back("items:1:number", std::to_string(info.keys));
  // The store never evicts: a full pool refuses writes instead.
  r.emplace_back("items:1:evicted", "0");
  r.emplace_back("items:1:evicted_nonzero", "0");
  return r;
}

std::vector<std::pair<std::string, std::string>> MemcacheProtocol::SlabsReport() {
  const StoreInfo info = items_.Info();
  Stats& s = items_.stats();
  std::vector<std::pair<std::string, std::string>> r;
  auto counter = [&](const char* name, const Stats::Counter& c) {
    r.emplace_back(std::string("1:") + name, std::to_string(Stats::Read(c)));
  };
  if (info.keys > 0) {
    r.emplace_back("1:used_chunks", std::to_string(info.keys));
    counter("get_hits", s.get_hits);
    counter("cmd_set", s.cmd_set);
    counter("delete_hits", s.delete_hits);
    counter("incr_hits", s.incr_hits);
    counter("decr_hits", s.decr_hits);
    counter("cas_hits", s.cas_hits);
    counter("cas_badval", s.cas_badval);
    counter("touch_hits", s.touch_hits);
  }
  r.emplace_back("active_slabs", info.keys > 0 ? "1" : "0");
  // The persistent memory the store holds, the counterpart of the memory
  // memcached has given to slab pages.
  r.emplace_back("total_malloced", std::to_string(info.pm_bytes));
  return r;
}

// The settings the protocol handler knows (the listener's address, port
// and connection limit are the server's and not listed).
std::vector<std::pair<std::string, std::string>> MemcacheProtocol::SettingsReport() {
  std::vector<std::pair<std::string, std::string>> r;
  r.emplace_back("udpport", "0");
  r.emplace_back("verbosity", "0");  // "verbosity" is accepted, nothing is logged
  r.emplace_back("evictions", "off");
  r.emplace_back("num_threads", std::to_string(items_.stats().threads));
  r.emplace_back("cas_enabled", "yes");
  r.emplace_back("binding_protocol", "ascii");
  r.emplace_back("auth_enabled_sasl", "no");
  r.emplace_back("item_size_max", std::to_string(max_data_));
  r.emplace_back("flush_enabled", "yes");
  r.emplace_back("engine", items_.Info().engine);
  return r;
}

}  // namespace pmindex::server
