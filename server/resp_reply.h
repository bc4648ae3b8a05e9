// RespReply: writes RESP replies in the protocol version a connection
// speaks (2, the default, or 3 after HELLO 3).
//
// The RESP3 types have RESP2 forms, the ones Redis 7.0 sends a RESP2
// client: a map is a flat array of 2n elements, a set an array, a double
// a bulk string ("%.17g", "inf", "-inf"), a boolean the integer 1 or 0,
// a verbatim string a bulk string, a big number a bulk string, and the
// RESP3 null is "$-1" where a string is missing and "*-1" where an array
// is. Handlers say what they mean (NullBulk, Map, Double...) and never
// test the version themselves, except where Redis's reply differs in
// more than encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pmindex::server {

class RespReply {
 public:
  RespReply(std::string* out, int protocol) : out_(out), protocol_(protocol) {}

  int protocol() const { return protocol_; }
  std::string* out() { return out_; }

  void Simple(std::string_view s);
  // An error line, whole: "ERR ...", "WRONGTYPE ...", "NOAUTH ...". CR and
  // LF (from a client's argument) become spaces, so that it stays one line.
  void Error(std::string_view s);
  void Integer(int64_t n);
  void Bulk(std::string_view s);
  // A missing string (RESP2 "$-1") and a missing array (RESP2 "*-1").
  void NullBulk();
  void NullArray();
  void Array(size_t n);
  // n key/value pairs follow (2n elements).
  void Map(size_t n);
  void Set(size_t n);
  void Double(double d);
  void Bool(bool b);
  // Text with a 3-letter format ("txt"): INFO, CLIENT LIST.
  void Verbatim(std::string_view s, std::string_view format = "txt");
  void BigNumber(std::string_view digits);
  // Bulk strings in an array.
  template <class Range>
  void BulkArray(const Range& r) {
    Array(std::size(r));
    for (const auto& s : r) Bulk(s);
  }

 private:
  std::string* out_;
  int protocol_;
};

// Redis's "%.17g" text of a double, "inf" and "-inf" for infinities.
std::string DoubleText(double d);

}  // namespace pmindex::server
