// Partial reads and writes of string values over databases on the map
// store (1 MiB values, so that a value over 1 MiB is stored in pieces):
// GETRANGE, SUBSTR and GETBIT equal to the whole value's bytes at every
// boundary, reading only the pieces the range is in; and OBJECT ENCODING
// after the commands that change a value in place (Redis re-encodes it
// as `raw`).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/databases.h"
#include "server/keyspace.h"
#include "server/resp_protocol.h"
#include "tests/server/map_store.h"
#include "tests/server/protocol_harness.h"
#include "tests/server/resp_encode.h"

namespace pmindex::server::testing {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

std::string Bulk(std::string_view v) {
  std::string s = "$";
  s.append(std::to_string(v.size())).append("\r\n").append(v).append("\r\n");
  return s;
}

std::string Int(int64_t n) {
  std::string s = ":";
  s.append(std::to_string(n)).append("\r\n");
  return s;
}

// n bytes, byte i = seed + i mod 251 (a piece out of place shows).
std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((static_cast<size_t>(seed) + i) % 251);
  return s;
}

class Server {
 public:
  Server() : map_(kMiB) {
    dbs = std::move(Databases::Open(map_, 16).value());
    keyspace_ = std::make_unique<Keyspace>(*dbs, stats_, [this] { return now_ms; });
    protocol_ = std::make_unique<RespProtocol>(keyspace_->db(0), shared_);
  }
  std::string Feed(const std::vector<std::string>& args) {
    std::string in = Cmd(args), all;
    for (;;) {
      std::string out;
      in.erase(0, protocol_->Consume(in, &out));
      if (out.empty()) return all;
      all += out;
    }
  }

  int64_t now_ms = kStartMs;

 private:
  MapStore map_;
  RespShared shared_;
  Stats stats_;

 public:
  std::unique_ptr<Databases> dbs;

 private:
  std::unique_ptr<Keyspace> keyspace_;
  std::unique_ptr<RespProtocol> protocol_;
};

// Redis's GETRANGE on a whole value.
std::string Expected(const std::string& v, int64_t start, int64_t end) {
  const auto len = static_cast<int64_t>(v.size());
  if (start < 0 && end < 0 && start > end) return "";
  if (start < 0) start += len;
  if (end < 0) end += len;
  start = std::max<int64_t>(start, 0);
  end = std::max<int64_t>(end, 0);
  end = std::min(end, len - 1);
  if (start > end || len == 0) return "";
  return v.substr(static_cast<size_t>(start), static_cast<size_t>(end - start + 1));
}

TEST(StringParts, GetrangeEqualsTheWholeValuesBytesAcrossPieces) {
  Server s;
  const int64_t m = static_cast<int64_t>(kMiB);
  for (size_t size : {kMiB - 1, kMiB + 1, 5 * kMiB}) {
    SCOPED_TRACE("size " + std::to_string(size));
    const std::string v = Pattern(size, static_cast<int>(size % 97));
    ASSERT_EQ(s.Feed({"SET", "k", v}), "+OK\r\n");
    // Around every piece boundary (the first piece holds the item's
    // 1-byte header too), both ends of the value, and past them.
    std::vector<std::pair<int64_t, int64_t>> ranges = {
        {0, 0},           {0, -1},
        {-1, -1},         {-10, -1},
        {0, 9},           {m - 3, m + 2},
        {m - 1, m - 1},   {m, m},
        {-m - 2, -m + 2}, {1, 2 * m + 5},
        {3 * m - 7, -1},  {5, 3},
        {-5, -10},        {static_cast<int64_t>(size), -1},
        {-100 * m, 3},    {2 * m - 1, 4 * m + 1}};
    for (const auto& [a, b] : ranges) {
      SCOPED_TRACE(std::to_string(a) + " " + std::to_string(b));
      const std::string want = Bulk(Expected(v, a, b));
      ASSERT_EQ(s.Feed({"GETRANGE", "k", std::to_string(a), std::to_string(b)}), want);
      ASSERT_EQ(s.Feed({"SUBSTR", "k", std::to_string(a), std::to_string(b)}), want);
    }
    for (uint64_t bit : {uint64_t{0}, uint64_t{8} * kMiB - 1, uint64_t{8} * kMiB + 9,
                         uint64_t{8} * size - 1, uint64_t{8} * size + 3}) {
      const uint64_t byte = bit / 8;
      const int want =
          byte < v.size() ? (static_cast<unsigned char>(v[byte]) >> (7 - bit % 8)) & 1 : 0;
      ASSERT_EQ(s.Feed({"GETBIT", "k", std::to_string(bit)}), Int(want)) << bit;
    }
  }
  // After an APPEND and a SETRANGE across pieces, still the same bytes.
  std::string v = Pattern(3 * kMiB + 5, 7);
  ASSERT_EQ(s.Feed({"SET", "k", v}), "+OK\r\n");
  ASSERT_EQ(s.Feed({"APPEND", "k", "tail"}), Int(static_cast<int64_t>(v.size() + 4)));
  v += "tail";
  ASSERT_EQ(s.Feed({"SETRANGE", "k", std::to_string(2 * m - 2), "XYZW"}),
            Int(static_cast<int64_t>(v.size())));
  v.replace(2 * kMiB - 2, 4, "XYZW");
  EXPECT_EQ(s.Feed({"GETRANGE", "k", std::to_string(2 * m - 4), std::to_string(2 * m + 4)}),
            Bulk(v.substr(2 * kMiB - 4, 9)));
  EXPECT_EQ(s.Feed({"GETRANGE", "k", "-9", "-1"}), Bulk(v.substr(v.size() - 9)));
  // Missing keys and other types.
  EXPECT_EQ(s.Feed({"GETRANGE", "none", "0", "-1"}), Bulk(""));
  EXPECT_EQ(s.Feed({"GETBIT", "none", "7"}), Int(0));
  s.Feed({"RPUSH", "l", "x"});
  EXPECT_EQ(s.Feed({"GETRANGE", "l", "0", "-1"}),
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
}

TEST(StringParts, GetrangeReadsOnlyThePiecesOfItsRange) {
  Server s;
  const std::string v = Pattern(5 * kMiB, 3);  // 6 pieces: 5 MiB + the header
  ASSERT_EQ(s.Feed({"SET", "k", v}), "+OK\r\n");
  const int64_t m = static_cast<int64_t>(kMiB);
  struct Case {
    int64_t start, end;
    uint64_t pieces;
  } cases[] = {
      {0, 10, 1},              // in piece 0
      {m + 10, m + 20, 1},     // in piece 1 (the data is one byte behind)
      {m - 5, m + 5, 2},       // across the boundary of pieces 0 and 1
      {-10, -1, 2},            // the last two pieces (the last holds one byte)
      {2 * m, 4 * m - 1, 3},   // pieces 2, 3 and 4 (data 2 MiB .. 4 MiB - 1)
      {5 * m, 5 * m + 10, 0},  // past the end: nothing to read
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.start) + " " + std::to_string(c.end));
    const uint64_t before = s.dbs->pieces_read();
    ASSERT_EQ(s.Feed({"GETRANGE", "k", std::to_string(c.start), std::to_string(c.end)}),
              Bulk(Expected(v, c.start, c.end)));
    EXPECT_EQ(s.dbs->pieces_read() - before, c.pieces);
  }
  uint64_t before = s.dbs->pieces_read();
  EXPECT_EQ(s.Feed({"GETBIT", "k", std::to_string(8 * 3 * kMiB)}),
            Int((static_cast<unsigned char>(v[3 * kMiB]) >> 7) & 1));
  EXPECT_EQ(s.dbs->pieces_read() - before, 1u);
  // STRLEN reads none (the head has the size); GET reads them all: the
  // counter counts what it claims to.
  before = s.dbs->pieces_read();
  EXPECT_EQ(s.Feed({"STRLEN", "k"}), Int(static_cast<int64_t>(v.size())));
  EXPECT_EQ(s.dbs->pieces_read() - before, 0u);
  EXPECT_EQ(s.Feed({"GET", "k"}), Bulk(v));
  EXPECT_EQ(s.dbs->pieces_read() - before, 6u);
}

// The bit `b` of `v` (SETBIT's numbering), and the first bit equal to
// `bit` among bits [from, to] of `v`, or -1.
int BitOf(const std::string& v, int64_t b) {
  return (static_cast<unsigned char>(v[static_cast<size_t>(b / 8)]) >> (7 - b % 8)) & 1;
}
int64_t FirstBit(const std::string& v, int bit, int64_t from, int64_t to) {
  for (int64_t b = from; b <= to; ++b)
    if (BitOf(v, b) == bit) return b;
  return -1;
}
int64_t SetBits(const std::string& v, int64_t from, int64_t to) {
  int64_t n = 0;
  for (int64_t b = from; b <= to; ++b) n += BitOf(v, b);
  return n;
}

TEST(StringParts, BitReadsReadOnlyThePiecesOfTheirRange) {
  Server s;
  const std::string v = Pattern(3 * kMiB, 3);  // 4 pieces: 3 MiB + the header
  ASSERT_EQ(s.Feed({"SET", "k", v}), "+OK\r\n");
  const auto m = static_cast<int64_t>(kMiB);
  const auto bits = static_cast<int64_t>(v.size()) * 8;
  auto n = [](int64_t x) { return std::to_string(x); };
  auto pieces = [&](const std::vector<std::string>& command, const std::string& reply) {
    const uint64_t before = s.dbs->pieces_read();
    EXPECT_EQ(s.Feed(command), reply) << command[0];
    return s.dbs->pieces_read() - before;
  };
  // Data byte i is stored at byte i + 1 (after the item's header).
  EXPECT_EQ(pieces({"BITCOUNT", "k", n(m + 10), n(m + 20)},
                   Int(SetBits(v, 8 * (m + 10), 8 * (m + 20) + 7))),
            1u);
  EXPECT_EQ(pieces({"BITCOUNT", "k", "-10", "-1"}, Int(SetBits(v, bits - 80, bits - 1))), 2u);
  EXPECT_EQ(pieces({"BITCOUNT", "k", n(8 * (m - 5) + 3), n(8 * (m + 5)), "BIT"},
                   Int(SetBits(v, 8 * (m - 5) + 3, 8 * (m + 5)))),
            2u);
  EXPECT_EQ(pieces({"BITPOS", "k", "1", n(2 * m), n(2 * m + 5)},
                   Int(FirstBit(v, 1, 16 * m, 8 * (2 * m + 5) + 7))),
            1u);
  EXPECT_EQ(pieces({"BITPOS", "k", "0", "-3"}, Int(FirstBit(v, 0, bits - 24, bits - 1))), 2u);
  const int64_t field = 8 * (m + 99) + 4;  // 16 bits in data bytes m + 99 .. m + 101
  int64_t want = 0;
  for (int64_t b = field; b < field + 16; ++b) want = (want << 1) | BitOf(v, b);
  EXPECT_EQ(pieces({"BITFIELD_RO", "k", "GET", "u16", n(field)}, "*1\r\n" + Int(want)), 1u);
  EXPECT_EQ(pieces({"BITFIELD", "k", "GET", "u16", n(field)}, "*1\r\n" + Int(want)), 1u);
  // Without a range, the whole value.
  int64_t per_byte[256] = {};
  for (int i = 1; i < 256; ++i) per_byte[i] = per_byte[i / 2] + (i & 1);
  int64_t all = 0;
  for (char c : v) all += per_byte[static_cast<unsigned char>(c)];
  EXPECT_EQ(pieces({"BITCOUNT", "k"}, Int(all)), 4u);
}

// Pieces are kMiB bytes; the stored value is the item's 1-byte header,
// then the data.
TEST(StringParts, AppendSetrangeSetbitBitfieldWriteOnlyTheirPieces) {
  Server s;
  const int64_t m = static_cast<int64_t>(kMiB);
  std::string v = Pattern(5 * kMiB, 3);  // pieces 0..5, the last holding one byte
  ASSERT_EQ(s.Feed({"SET", "k", v}), "+OK\r\n");
  struct Step {
    std::vector<std::string> command;
    uint64_t pieces;
  };
  const std::string big = Pattern(kMiB + 10, 9);
  const Step steps[] = {
      // Piece 0 for the header's raw bit (the first change in place), and
      // the last piece, extended.
      {{"APPEND", "k", "tail"}, 2},
      {{"APPEND", "k", "more"}, 1},
      {{"APPEND", "k", big}, 2},  // the last piece filled, one new piece
      {{"SETRANGE", "k", std::to_string(2 * m - 2), "XYZW"}, 2},  // across pieces 1 and 2
      {{"SETBIT", "k", std::to_string(8 * 3 * m + 2), "1"}, 1},
      {{"SETBIT", "k", std::to_string(8 * 3 * m + 2), "1"}, 0},  // unchanged: nothing
      {{"BITFIELD", "k", "SET", "u8", std::to_string(8 * 4 * m), "7"}, 1},
      {{"SETRANGE", "k", std::to_string(8 * m), "end"}, 3},  // pieces 6 (grown), 7, 8
  };
  for (const Step& step : steps) {
    SCOPED_TRACE(step.command[0] + " " + step.command[2].substr(0, 20));
    const uint64_t before = s.dbs->pieces_written();
    const std::string reply = s.Feed(step.command);
    if (step.command[0] == "APPEND") v += step.command[2];
    if (step.command[0] == "SETRANGE") {
      const size_t at = std::stoul(step.command[2]);
      if (v.size() < at + step.command[3].size()) v.resize(at + step.command[3].size(), '\0');
      v.replace(at, step.command[3].size(), step.command[3]);
    }
    if (step.command[0] == "SETBIT") v[3 * kMiB] = static_cast<char>(v[3 * kMiB] | 0x20);
    if (step.command[0] == "BITFIELD") v[4 * kMiB] = 7;
    if (step.command[0] != "SETBIT" && step.command[0] != "BITFIELD") {
      EXPECT_EQ(reply, Int(static_cast<int64_t>(v.size())));
    }
    EXPECT_EQ(s.dbs->pieces_written() - before, step.pieces);
  }
  EXPECT_TRUE(s.Feed({"GET", "k"}) == Bulk(v)) << "the value after the patches";
  EXPECT_EQ(s.Feed({"OBJECT", "ENCODING", "k"}), Bulk("raw"));
  // A SET replaces the value whole (a new generation), and patches go on.
  ASSERT_EQ(s.Feed({"SET", "k", v}), "+OK\r\n");
  EXPECT_EQ(s.Feed({"APPEND", "k", "!"}), Int(static_cast<int64_t>(v.size() + 1)));
  EXPECT_TRUE(s.Feed({"GETRANGE", "k", "-3", "-1"}) == Bulk(v.substr(v.size() - 2) + "!"));
}

TEST(StringParts, InsideExecOnlyTheirPiecesAreReadAndWritten) {
  Server s;
  const int64_t m = static_cast<int64_t>(kMiB);
  std::string v = Pattern(5 * kMiB, 5);
  ASSERT_EQ(s.Feed({"SET", "k", v}), "+OK\r\n");
  const uint64_t read = s.dbs->pieces_read(), written = s.dbs->pieces_written();
  const int bit = (static_cast<unsigned char>(v[4 * kMiB]) >> 7) & 1;
  // GETRANGE: piece 1; GETBIT: piece 4; APPEND: pieces 0 (raw bit) and 5;
  // SETRANGE at 1: piece 0 again (the transaction's own).
  std::string out;
  for (const std::vector<std::string>& command : std::vector<std::vector<std::string>>{
           {"MULTI"},
           {"GETRANGE", "k", std::to_string(m), std::to_string(m + 10)},
           {"GETBIT", "k", std::to_string(8 * 4 * m)},
           {"APPEND", "k", "xy"},
           {"SETRANGE", "k", "1", "Q"},
           {"EXEC"}})
    out += s.Feed(command);
  EXPECT_EQ(out, "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*4\r\n" +
                     Bulk(v.substr(kMiB, 11)) + Int(bit) + Int(5 * m + 2) + Int(5 * m + 2));
  EXPECT_EQ(s.dbs->pieces_read() - read, 5u);
  EXPECT_EQ(s.dbs->pieces_written() - written, 3u);
  v += "xy";
  v[1] = 'Q';
  EXPECT_TRUE(s.Feed({"GET", "k"}) == Bulk(v));
}

TEST(StringParts, ObjectEncodingIsRawAfterAChangeInPlace) {
  // Redis's suite: "SETRANGE against integer-encoded key".
  Server s;
  auto encoding = [&](const std::string& key) { return s.Feed({"OBJECT", "ENCODING", key}); };
  const std::string kInt = Bulk("int"), kRaw = Bulk("raw"), kEmbstr = Bulk("embstr");
  s.Feed({"SET", "k", "1234"});
  EXPECT_EQ(encoding("k"), kInt);
  EXPECT_EQ(s.Feed({"SETRANGE", "k", "0", "2"}), Int(4));
  EXPECT_EQ(encoding("k"), kRaw);
  EXPECT_EQ(s.Feed({"GET", "k"}), Bulk("2234"));
  // Nothing written: the encoding stays.
  s.Feed({"SET", "k", "1234"});
  EXPECT_EQ(s.Feed({"SETRANGE", "k", "0", ""}), Int(4));
  EXPECT_EQ(encoding("k"), kInt);
  // Past the end.
  EXPECT_EQ(s.Feed({"SETRANGE", "k", "5", "2"}), Int(6));
  EXPECT_EQ(encoding("k"), kRaw);
  // EXPIRE and PERSIST keep the data, and so the encoding.
  EXPECT_EQ(s.Feed({"EXPIRE", "k", "100"}), Int(1));
  EXPECT_EQ(encoding("k"), kRaw);
  EXPECT_EQ(s.Feed({"PERSIST", "k"}), Int(1));
  EXPECT_EQ(encoding("k"), kRaw);
  // A whole write classifies it again.
  s.Feed({"SET", "k", "5"});
  EXPECT_EQ(encoding("k"), kInt);
  EXPECT_EQ(s.Feed({"APPEND", "k", "1"}), Int(2));
  EXPECT_EQ(encoding("k"), kRaw);
  EXPECT_EQ(s.Feed({"INCR", "k"}), Int(52));
  EXPECT_EQ(encoding("k"), kInt);
  // APPEND to a missing key creates it as SET would.
  EXPECT_EQ(s.Feed({"APPEND", "new", "12"}), Int(2));
  EXPECT_EQ(encoding("new"), kInt);
  EXPECT_EQ(s.Feed({"APPEND", "new2", "ab"}), Int(2));
  EXPECT_EQ(encoding("new2"), kEmbstr);
  EXPECT_EQ(s.Feed({"SETBIT", "new2", "0", "1"}), Int(0));
  EXPECT_EQ(encoding("new2"), kRaw);
  // The item is still an item to every reader.
  EXPECT_EQ(s.Feed({"GET", "new2"}), Bulk("\xe1"
                                          "b"));
  EXPECT_EQ(s.Feed({"TYPE", "new2"}), "+string\r\n");
}

}  // namespace
}  // namespace pmindex::server::testing
