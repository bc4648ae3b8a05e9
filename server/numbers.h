// Decimal numbers as both protocols and the item layer read them.
#pragma once

#include <charconv>
#include <string_view>

namespace pmindex::server {

// True iff `s` is exactly one decimal number that fits T: no spaces, no
// '+', nothing after it, and no '-' for an unsigned T (memcached and Redis
// both refuse "12 " and "+12").
template <class T>
bool ParseNumber(std::string_view s, T* v) {
  if (s.empty() || s[0] == '+') return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace pmindex::server
