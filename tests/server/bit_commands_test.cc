// BITCOUNT, BITPOS, BITOP, BITFIELD and BITFIELD_RO against the test-only
// MapStore: the replies of Redis 7.0's documentation examples, the
// overflow rules at the edges of the widths, the errors, and the commands
// inside MULTI/EXEC.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "server/databases.h"
#include "server/keyspace.h"
#include "server/resp_protocol.h"
#include "tests/server/map_store.h"
#include "tests/server/protocol_harness.h"
#include "tests/server/resp_encode.h"

namespace pmindex::server::testing {
namespace {

// A RESP connection to databases over the map store (so that collections,
// for WRONGTYPE, exist).
class Resp {
 public:
  Resp() : map_(size_t{1} << 20) {
    dbs_ = std::move(Databases::Open(map_, 16).value());
    keyspace_ = std::make_unique<Keyspace>(*dbs_, stats_, [] { return kStartMs; });
    protocol_ = std::make_unique<RespProtocol>(keyspace_->db(0), shared_);
  }
  std::string Feed(std::string_view bytes) {
    std::string in(bytes), all;
    for (;;) {
      std::string out;
      in.erase(0, protocol_->Consume(in, &out));
      if (out.empty()) return all;
      all += out;
    }
  }

 private:
  MapStore map_;
  RespShared shared_;
  Stats stats_;
  std::unique_ptr<Databases> dbs_;
  std::unique_ptr<Keyspace> keyspace_;
  std::unique_ptr<RespProtocol> protocol_;
};

std::string Int(int64_t n) { return ":" + std::to_string(n) + "\r\n"; }
std::string Bulk(std::string_view v) {
  return "$" + std::to_string(v.size()) + "\r\n" + std::string(v) + "\r\n";
}
std::string Ints(std::initializer_list<int64_t> ns) {
  std::string s = "*" + std::to_string(ns.size()) + "\r\n";
  for (int64_t n : ns) s += Int(n);
  return s;
}

TEST(BitCommands, BitcountByteAndBitRanges) {
  Resp h;
  h.Feed(Cmd({"SET", "k", "foobar"}));
  EXPECT_EQ(h.Feed(Cmd({"BITCOUNT", "k"})), Int(26));
  EXPECT_EQ(h.Feed(Cmd({"BITCOUNT", "k", "0", "0"})), Int(4));
  EXPECT_EQ(h.Feed(Cmd({"BITCOUNT", "k", "1", "1", "BYTE"})), Int(6));
  EXPECT_EQ(h.Feed(Cmd({"BITCOUNT", "k", "5", "30", "bit"})), Int(17));
  EXPECT_EQ(h.Feed(Cmd({"BITCOUNT", "k", "-2", "-1"})), Int(7));
  EXPECT_EQ(h.Feed(Cmd({"BITCOUNT", "k", "-1", "-2"})), Int(0));
  EXPECT_EQ(h.Feed(Cmd({"BITCOUNT", "k", "3", "100"})), Int(10));
  EXPECT_EQ(h.Feed(Cmd({"BITCOUNT", "none", "x", "y"})), Int(0));  // the key first, as Redis
  EXPECT_EQ(h.Feed(Cmd({"BITCOUNT", "k", "0"})), "-ERR syntax error\r\n");
  EXPECT_EQ(h.Feed(Cmd({"BITCOUNT", "k", "0", "1", "WORD"})), "-ERR syntax error\r\n");
  EXPECT_EQ(h.Feed(Cmd({"BITCOUNT", "k", "a", "1"})),
            "-ERR value is not an integer or out of range\r\n");
  h.Feed(Cmd({"RPUSH", "l", "x"}));
  EXPECT_EQ(h.Feed(Cmd({"BITCOUNT", "l"})),
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
}

TEST(BitCommands, BitposFindsSetAndClearBits) {
  Resp h;
  h.Feed(Cmd({"SET", "k", std::string("\xff\xf0\x00", 3)}));
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "k", "0"})), Int(12));
  h.Feed(Cmd({"SET", "k", std::string("\x00\xff\xf0", 3)}));
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "k", "1", "0"})), Int(8));
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "k", "1", "2"})), Int(16));
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "k", "1", "2", "-1", "BYTE"})), Int(16));
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "k", "1", "7", "15", "BIT"})), Int(8));
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "k", "0", "9", "-1", "BIT"})), Int(20));
  h.Feed(Cmd({"SET", "z", std::string(3, '\0')}));
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "z", "1"})), Int(-1));
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "z", "1", "7", "-3", "BIT"})), Int(-1));
  // All ones: a clear bit is the one after the string, unless an end is
  // given.
  h.Feed(Cmd({"SET", "f", "\xff\xff\xff"}));
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "f", "0"})), Int(24));
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "f", "0", "1"})), Int(24));
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "f", "0", "0", "-1"})), Int(-1));
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "none", "0"})), Int(0));
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "none", "1"})), Int(-1));
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "f", "2"})), "-ERR The bit argument must be 1 or 0.\r\n");
  EXPECT_EQ(h.Feed(Cmd({"BITPOS", "f", "1", "0", "1", "BITS"})), "-ERR syntax error\r\n");
}

TEST(BitCommands, BitopCombinesAndDeletesOnEmpty) {
  Resp h;
  h.Feed(Cmd({"SET", "a", "foobar"}) + Cmd({"SET", "b", "abcdef"}) + Cmd({"SET", "c", "\x01"}));
  EXPECT_EQ(h.Feed(Cmd({"BITOP", "AND", "d", "a", "b"}) + Cmd({"GET", "d"})),
            Int(6) + Bulk("`bc`ab"));
  // Shorter sources and missing keys count as zeros.
  EXPECT_EQ(h.Feed(Cmd({"BITOP", "or", "d", "c", "none"}) + Cmd({"GET", "d"})),
            Int(1) + Bulk("\x01"));
  EXPECT_EQ(h.Feed(Cmd({"BITOP", "XOR", "d", "a", "c"}) + Cmd({"GET", "d"})),
            Int(6) + Bulk("goobar"));
  EXPECT_EQ(h.Feed(Cmd({"BITOP", "AND", "d", "a", "c"}) + Cmd({"GET", "d"})),
            Int(6) + Bulk(std::string(6, '\0')));
  EXPECT_EQ(h.Feed(Cmd({"BITOP", "NOT", "d", "c"}) + Cmd({"GET", "d"})), Int(1) + Bulk("\xfe"));
  EXPECT_EQ(h.Feed(Cmd({"SET", "d", "x", "EX", "100"}) + Cmd({"BITOP", "NOT", "d", "none"}) +
                   Cmd({"EXISTS", "d"})),
            "+OK\r\n" + Int(0) + Int(0));
  EXPECT_EQ(h.Feed(Cmd({"BITOP", "NOT", "d", "a", "b"})),
            "-ERR BITOP NOT must be called with a single source key.\r\n");
  EXPECT_EQ(h.Feed(Cmd({"BITOP", "NAND", "d", "a"})), "-ERR syntax error\r\n");
  h.Feed(Cmd({"RPUSH", "l", "x"}));
  EXPECT_EQ(h.Feed(Cmd({"BITOP", "OR", "d", "a", "l"})),
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
}

TEST(BitCommands, BitfieldOverflowRules) {
  Resp h;
  EXPECT_EQ(h.Feed(Cmd({"BITFIELD", "k", "INCRBY", "i5", "100", "1", "GET", "u4", "0"})),
            Ints({1, 0}));
  // Redis's documented SAT sequence on u2 fields.
  const std::string sat = Cmd(
      {"BITFIELD", "s", "incrby", "u2", "100", "1", "OVERFLOW", "SAT", "incrby", "u2", "102", "1"});
  EXPECT_EQ(h.Feed(sat), Ints({1, 1}));
  EXPECT_EQ(h.Feed(sat), Ints({2, 2}));
  EXPECT_EQ(h.Feed(sat), Ints({3, 3}));
  EXPECT_EQ(h.Feed(sat), Ints({0, 3}));
  // FAIL: no write, a null reply.
  EXPECT_EQ(h.Feed(Cmd({"BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "3"})),
            Ints({3}));
  EXPECT_EQ(h.Feed(Cmd(
                {"BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "1", "GET", "u2", "0"})),
            "*2\r\n$-1\r\n" + Int(3));
  // Signed wrap and saturation; SET replies the old value; # offsets.
  EXPECT_EQ(
      h.Feed(Cmd({"BITFIELD", "w",   "SET",    "i8", "#1", "127", "INCRBY", "i8", "8", "1",
                  "OVERFLOW", "SAT", "INCRBY", "i8", "#1", "-1",  "SET",    "u8", "0", "-1"})),
      Ints({0, -128, -128, 0}));
  EXPECT_EQ(h.Feed(Cmd({"GET", "w"})), Bulk("\xff\x80"));
  EXPECT_EQ(h.Feed(Cmd({"BITFIELD", "w", "OVERFLOW", "SAT", "SET", "u8", "0", "-1", "SET", "i4",
                        "0", "100"})),
            Ints({255, -1}));
  // 64-bit signed edges.
  EXPECT_EQ(h.Feed(Cmd({"BITFIELD", "b", "SET", "i64", "0", "-9223372036854775808", "INCRBY", "i64",
                        "0", "-1", "GET", "u63", "1"})),
            Ints({0, INT64_MAX, INT64_MAX}));
  // A field across bytes; reads past the end are zeros.
  EXPECT_EQ(h.Feed(Cmd({"BITFIELD", "x", "SET", "u12", "4", "4095", "GET", "u16", "0", "GET", "u8",
                        "100"})),
            Ints({0, 4095, 0}));
  EXPECT_EQ(h.Feed(Cmd({"GET", "x"})), Bulk("\x0f\xff"));
}

TEST(BitCommands, BitfieldErrorsAndReadOnly) {
  Resp h;
  h.Feed(Cmd({"SET", "k", "\x80"}));
  EXPECT_EQ(h.Feed(Cmd({"BITFIELD_RO", "k", "GET", "u1", "0", "GET", "i2", "0"})), Ints({1, -2}));
  EXPECT_EQ(h.Feed(Cmd({"BITFIELD_RO", "k", "SET", "u1", "0", "0"})),
            "-ERR BITFIELD_RO only supports the GET subcommand\r\n");
  const std::string type_error =
      "-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but "
      "i64 is.\r\n";
  EXPECT_EQ(h.Feed(Cmd({"BITFIELD", "k", "GET", "u64", "0"})), type_error);
  EXPECT_EQ(h.Feed(Cmd({"BITFIELD", "k", "GET", "i0", "0"})), type_error);
  EXPECT_EQ(h.Feed(Cmd({"BITFIELD", "k", "GET", "u8", "-1"})),
            "-ERR bit offset is not an integer or out of range\r\n");
  EXPECT_EQ(h.Feed(Cmd({"BITFIELD", "k", "SET", "u8", "0", "x"})),
            "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(h.Feed(Cmd({"BITFIELD", "k", "OVERFLOW", "CLAMP"})),
            "-ERR Invalid OVERFLOW type specified\r\n");
  EXPECT_EQ(h.Feed(Cmd({"BITFIELD", "k", "GET", "u8"})), "-ERR syntax error\r\n");
  EXPECT_EQ(h.Feed(Cmd({"BITFIELD", "k"})), "*0\r\n");
  EXPECT_EQ(h.Feed(Cmd({"GET", "k"})), Bulk("\x80"));  // nothing written by the errors
}

TEST(BitCommands, RunInsideMultiExec) {
  Resp h;
  EXPECT_EQ(h.Feed(Cmd({"MULTI"}) + Cmd({"BITFIELD", "k", "SET", "u8", "0", "65"}) +
                   Cmd({"BITOP", "NOT", "n", "k"}) + Cmd({"BITCOUNT", "n"}) +
                   Cmd({"BITPOS", "n", "0"}) + Cmd({"EXEC"})),
            "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*4\r\n" + Ints({0}) + Int(1) +
                Int(6) + Int(1));
  EXPECT_EQ(h.Feed(Cmd({"GET", "n"})), Bulk("\xbe"));
}

}  // namespace
}  // namespace pmindex::server::testing
