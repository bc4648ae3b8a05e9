// A RESP request as clients send it: an array of bulk strings. One
// overload set for every server test: a braced list of literals or
// string_views, or a vector built at run time.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace pmindex::server::testing {

namespace resp_encode_internal {

// Appends, not "literal" + std::string: GCC 12 warns about the latter with
// -Wrestrict, wrongly.
template <class Args>
std::string EncodeArray(const Args& args) {
  std::string s = "*";
  s.append(std::to_string(args.size())).append("\r\n");
  for (std::string_view a : args) {
    s.append("$").append(std::to_string(a.size())).append("\r\n").append(a).append("\r\n");
  }
  return s;
}

}  // namespace resp_encode_internal

// A braced list wins over the vector overload (an initializer_list
// parameter is the better list-initialisation), so Cmd({"GET", key}) with
// std::string elements does not copy them into a vector first.
inline std::string Cmd(std::initializer_list<std::string_view> args) {
  return resp_encode_internal::EncodeArray(args);
}
inline std::string Cmd(const std::vector<std::string>& args) {
  return resp_encode_internal::EncodeArray(args);
}

}  // namespace pmindex::server::testing
