#include "index/options.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

namespace pmindex {

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Shortest text that reads back as the same double ("0.5", "1", "1e-09").
std::string FormatDouble(double d) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), d);
  return std::string(buf, r.ptr);
}

std::string Quote(std::string_view s) {
  std::string q = "\"";
  q += s;
  q += '"';
  return q;
}

std::string OptionPrefix(std::string_view key) {
  std::string m = "option ";
  m += key;
  m += ": ";
  return m;
}

}  // namespace

Result<Options> Options::Parse(std::string_view text) {
  Options o;
  if (Trim(text).empty()) return o;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = Trim(text.substr(start, comma - start));
    if (item.empty()) {
      return Status::InvalidArgument("options \"" + std::string(text) +
                                     "\": empty item (expected key=value,key=value)");
    }
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument("option " + Quote(item) + " has no value (expected key=value)");
    }
    std::string_view key = Trim(item.substr(0, eq));
    std::string_view value = Trim(item.substr(eq + 1));
    if (key.empty()) {
      return Status::InvalidArgument("option " + Quote(item) + " has an empty name");
    }
    if (value.empty()) {
      return Status::InvalidArgument("option " + std::string(key) + " has an empty value");
    }
    if (o.has(key)) {
      return Status::InvalidArgument("option " + std::string(key) + " is given twice");
    }
    o.kv_.emplace_back(std::string(key), std::string(value));
    start = comma + 1;
  }
  return o;
}

bool Options::has(std::string_view key) const {
  for (const auto& [k, v] : kv_) {
    if (k == key) return true;
  }
  return false;
}

std::string Options::get(std::string_view key, std::string_view def) const {
  for (const auto& [k, v] : kv_) {
    if (k == key) return v;
  }
  return std::string(def);
}

Result<uint64_t> Options::get_uint(std::string_view key, uint64_t def, uint64_t lo,
                                   uint64_t hi) const {
  if (!has(key)) return def;
  std::string text = get(key);
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto r = std::from_chars(text.data(), end, v);
  if (r.ec == std::errc::result_out_of_range) {
    return Status::InvalidArgument(OptionPrefix(key) + Quote(text) + " is too large");
  }
  if (r.ec != std::errc() || r.ptr != end) {
    return Status::InvalidArgument(OptionPrefix(key) + Quote(text) + " is not a number");
  }
  if (v < lo || v > hi) {
    return Status::InvalidArgument(OptionPrefix(key) + text + " is outside [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

Result<double> Options::get_double(std::string_view key, double def, double lo,
                                   double hi) const {
  if (!has(key)) return def;
  std::string text = get(key);
  double v = 0;
  const char* end = text.data() + text.size();
  auto r = std::from_chars(text.data(), end, v);
  if (r.ec != std::errc() || r.ptr != end || !std::isfinite(v)) {
    return Status::InvalidArgument(OptionPrefix(key) + Quote(text) + " is not a number");
  }
  if (v < lo || v > hi) {
    return Status::InvalidArgument(OptionPrefix(key) + text + " is outside [" +
                                   FormatDouble(lo) + ", " + FormatDouble(hi) + "]");
  }
  return v;
}

Result<bool> Options::get_bool(std::string_view key, bool def) const {
  if (!has(key)) return def;
  std::string text = get(key);
  if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return false;
  return Status::InvalidArgument(OptionPrefix(key) + Quote(text) +
                                 " is not a boolean (true|false|1|0|yes|no|on|off)");
}

Result<std::string> Options::get_enum(std::string_view key, std::string_view def,
                                      std::initializer_list<std::string_view> allowed) const {
  if (!has(key)) return std::string(def);
  std::string text = get(key);
  std::string list;
  for (std::string_view a : allowed) {
    if (a == text) return text;
    if (!list.empty()) list += '|';
    list += a;
  }
  return Status::InvalidArgument(OptionPrefix(key) + Quote(text) + " is not one of " + list);
}

Status Options::CheckKnown(std::initializer_list<std::string_view> known) const {
  for (const auto& [k, v] : kv_) {
    bool ok = false;
    for (std::string_view n : known) ok = ok || n == k;
    if (ok) continue;
    std::string list;
    for (std::string_view n : known) {
      if (!list.empty()) list += ", ";
      list += n;
    }
    if (list.empty()) list = "none";
    return Status::InvalidArgument("unknown option " + Quote(k) + " (accepted: " + list + ")");
  }
  return Status::OK();
}

void Options::set(std::string key, std::string value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(std::move(key), std::move(value));
}

std::string Options::ToString() const {
  std::string s;
  for (const auto& [k, v] : kv_) {
    if (!s.empty()) s += ',';
    s += k;
    s += '=';
    s += v;
  }
  return s;
}

}  // namespace pmindex
