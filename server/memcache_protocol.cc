#include "server/memcache_protocol.h"

#include <algorithm>
#include <limits>

#include "pmindex/version.h"
#include "server/numbers.h"

namespace pmindex::server {

namespace {

constexpr int64_t kRelativeExptimeLimit = 60 * 60 * 24 * 30;  // 30 days, in seconds

constexpr std::string_view kBadFormat = "CLIENT_ERROR bad command line format";

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
    RunGet(cmd == "gets", out);
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
  } else if (cmd == "verbosity" && tok_.size() <= 3) {
    TakeNoreply();
    Reply("OK", out);
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

void MemcacheProtocol::RunGet(bool with_cas, std::string* out) {
  if (tok_.size() < 2) {
    out->append("ERROR\r\n");
    return;
  }
  for (size_t i = 1; i < tok_.size(); ++i) {
    if (!ValidKey(tok_[i], items_.max_key_bytes())) {
      Stats::Add(items_.stats().protocol_errors);
      Reply(kBadFormat, out);
      return;
    }
  }
  // Built aside: a store error replaces the whole reply.
  std::string reply;
  for (size_t i = 1; i < tok_.size(); ++i) {
    Result<Item> r = items_.Get(tok_[i]);
    if (!r.ok()) {
      if (r.status().is_not_found()) continue;
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
  if (tok_.size() >= 5 && !ParseNumber(tok_[4], &bytes)) bytes = -1;
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
  if (!line_ok || data_bytes > items_.max_data_bytes()) {
    if (!line_ok) Stats::Add(items_.stats().protocol_errors);
    Reply(line_ok ? "SERVER_ERROR object too large for cache" : kBadFormat, out);
    swallow_ = data_bytes + 2;
    return line_bytes;
  }
  if (in.size() - line_bytes < data_bytes + 2) return 0;
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
                                       MemcachedExpiry(exptime, items_.NowMs()), cas);
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
  if (!ParseNumber(tok_[2], &delta)) return Reply("CLIENT_ERROR invalid numeric delta argument", out);
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
  if (tok_.size() != 1) {
    // Sub-reports (items, slabs, settings, ...) describe memcached's own
    // memory manager: there is nothing to report.
    out->append("ERROR\r\n");
    return;
  }
  for (const auto& [name, value] : StatsReport(items_))
    out->append("STAT ").append(name).append(" ").append(value).append("\r\n");
  out->append("END\r\n");
}

}  // namespace pmindex::server
