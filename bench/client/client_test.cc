// pmclient's records and wire code: key names, checked values, request
// encoding, reply parsing in whole and in pieces, addresses.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <string>
#include <vector>

#include "client/records.h"
#include "client/wire.h"
#include "workload.h"

namespace pmindex::client {
namespace {

// ------------------------------------------------------------- records
TEST(ClientRecords, KeyNamesArePaddedAndParseBack) {
  EXPECT_EQ(KeyName(0), "user00000000000000000000");
  EXPECT_EQ(KeyName(42), "user00000000000000000042");
  EXPECT_EQ(KeyName(UINT64_MAX), "user18446744073709551615");
  workload::Rng rng(7);
  for (int i = 0; i < 1000; ++i) {
    const Key k = rng.Next() >> rng.Below(64);
    Key back = 0;
    ASSERT_TRUE(ParseKeyName(KeyName(k), &back)) << k;
    EXPECT_EQ(back, k);
  }
  Key k;
  EXPECT_FALSE(ParseKeyName("user42", &k));                     // not padded
  EXPECT_FALSE(ParseKeyName("uSer00000000000000000042", &k));   // prefix
  EXPECT_FALSE(ParseKeyName("user0000000000000000004x", &k));   // digit
  EXPECT_FALSE(ParseKeyName("user18446744073709551616", &k));   // 2^64
}

TEST(ClientRecords, BytewiseOrderIsKeyOrder) {
  workload::Rng rng(11);
  for (int i = 0; i < 10000; ++i) {
    const Key a = rng.Next() >> rng.Below(64), b = rng.Next() >> rng.Below(64);
    EXPECT_EQ(a < b, KeyName(a) < KeyName(b)) << a << " " << b;
  }
}

TEST(ClientRecords, ValuesCheckAgainstTheirKeyAndVersion) {
  std::string v, again;
  FormatValue(12345, 0, 1024, &v);
  ASSERT_EQ(v.size(), 1024u);
  EXPECT_EQ(v.substr(0, 32), "00000000000030390000000000000000");
  FormatValue(12345, 0, 1024, &again);
  EXPECT_EQ(v, again);  // deterministic
  EXPECT_EQ(CheckValue(v, 12345, 1024, true), nullptr);
  EXPECT_EQ(CheckValue(v, 12345, 1024, false), nullptr);
  EXPECT_STREQ(CheckValue(v, 12346, 1024, false), "value of another key");
  EXPECT_STREQ(CheckValue(v.substr(0, 1000), 12345, 1024, false), "value of the wrong size");

  std::string v7;
  FormatValue(12345, 7, 1024, &v7);
  EXPECT_NE(v7.substr(32), v.substr(32));  // the filler depends on the version
  EXPECT_EQ(CheckValue(v7, 12345, 1024, false), nullptr);
  EXPECT_STREQ(CheckValue(v7, 12345, 1024, true), "value of a version no operation wrote yet");

  std::string bad = v7;
  bad[700] = bad[700] == 'A' ? 'B' : 'A';
  EXPECT_STREQ(CheckValue(bad, 12345, 1024, false), "value with corrupt data");
  bad = v7;
  bad[20] = 'z';  // not a hex digit
  EXPECT_STREQ(CheckValue(bad, 12345, 1024, false), "value without a key/version header");
  // A value of another version with its header rewritten to this version.
  bad = v7;
  bad.replace(16, 16, v.substr(16, 16));
  EXPECT_STREQ(CheckValue(bad, 12345, 1024, false), "value with corrupt data");

  // Longer than the filler's 64 KiB pattern: it wraps around.
  std::string large;
  FormatValue(5, 1, 200000, &large);
  EXPECT_EQ(CheckValue(large, 5, 200000, false), nullptr);
  large[150000] = large[150000] == 'A' ? 'B' : 'A';
  EXPECT_STREQ(CheckValue(large, 5, 200000, false), "value with corrupt data");

  std::string minimal;
  FormatValue(UINT64_MAX, UINT64_MAX, kValueHeaderBytes, &minimal);
  EXPECT_EQ(minimal, "ffffffffffffffffffffffffffffffff");
  EXPECT_EQ(CheckValue(minimal, UINT64_MAX, kValueHeaderBytes, false), nullptr);
}

TEST(ClientRecords, VersionOfAnOpIsItsUpdateCount) {
  workload::Op op;
  op.key = 99;
  op.value = workload::ValueFor(99);
  EXPECT_EQ(VersionOf(op), 0u);
  op.value = workload::ValueFor(99) + 5;
  EXPECT_EQ(VersionOf(op), 5u);
}

// ------------------------------------------------------------ encoders
TEST(ClientWire, RespCommandsAreArraysOfBulkStrings) {
  std::string out;
  AppendResp(&out, {"SET", "k", "v\r\nx"});
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\nv\r\nx\r\n");
  out.clear();
  std::vector<std::string_view> args = {"MGET", "a", ""};
  AppendResp(&out, args);
  EXPECT_EQ(out, "*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$0\r\n\r\n");
}

TEST(ClientWire, MemcachedRequests) {
  std::string out;
  AppendMcRetrieve(&out, "get", "user1");
  AppendMcStore(&out, "add", "user1", 5, 0, "abc");
  AppendMcStore(&out, "set", "k", 0, 100, "");
  AppendMcDelete(&out, "k");
  EXPECT_EQ(out, "get user1\r\nadd user1 5 0 3\r\nabc\r\nset k 0 100 0\r\n\r\ndelete k\r\n");
}

TEST(ClientWire, PmserverScanCursorIsTheDecimalOf0x01AndTheKey) {
  EXPECT_EQ(PmserverScanCursor(""), "1");
  EXPECT_EQ(PmserverScanCursor("a"), "353");           // 0x0161
  EXPECT_EQ(PmserverScanCursor(std::string(1, '\0')), "256");  // 0x0100
  EXPECT_EQ(PmserverScanCursor("ab"), "90466");        // 0x016162
  // Keys of up to 14 bytes against 128-bit arithmetic.
  workload::Rng rng(3);
  for (int i = 0; i < 500; ++i) {
    std::string key(rng.Below(15), '\0');
    for (char& c : key) c = static_cast<char>(rng.Below(256));
    unsigned __int128 n = 1;
    for (char c : key) n = n * 256 + static_cast<unsigned char>(c);
    std::string want;
    for (; n != 0; n /= 10) want.insert(want.begin(), static_cast<char>('0' + n % 10));
    EXPECT_EQ(PmserverScanCursor(key), want);
  }
  // Cursor order is key order for keys of one length (pmclient's keys).
  EXPECT_LT(PmserverScanCursor(KeyName(41)), PmserverScanCursor(KeyName(42)));
}

// ------------------------------------------------------------- parsers
// Parses `in` with the protocol's parser.
ParseStatus Parse(Protocol p, std::string_view in, McShape shape, Reply* r, size_t* used,
                  std::string* err) {
  return p == Protocol::kResp ? ParseResp(in, r, used, err) : ParseMemcached(in, shape, r, used, err);
}

// Every proper prefix of a reply is incomplete; the whole reply, followed
// by the start of another, is complete and consumes exactly its bytes.
void ExpectIncompleteUntilWhole(Protocol p, const std::string& reply, McShape shape) {
  Reply r;
  size_t used = 0;
  std::string err;
  for (size_t n = 0; n < reply.size(); ++n)
    ASSERT_EQ(Parse(p, std::string_view(reply).substr(0, n), shape, &r, &used, &err),
              ParseStatus::kIncomplete)
        << "prefix of " << n << " bytes of " << reply;
  const std::string more = reply + (p == Protocol::kResp ? "+OK\r\n" : "STORED\r\n");
  ASSERT_EQ(Parse(p, more, shape, &r, &used, &err), ParseStatus::kComplete) << err;
  EXPECT_EQ(used, reply.size());
}

TEST(ClientWire, RespRepliesOfEveryType) {
  Reply r;
  size_t used = 0;
  std::string err;
  ASSERT_EQ(ParseResp("+OK\r\n", &r, &used, &err), ParseStatus::kComplete);
  EXPECT_EQ(r.kind, Reply::Kind::kStatus);
  EXPECT_EQ(r.text, "OK");
  ASSERT_EQ(ParseResp("-ERR unknown command 'ZADD'\r\n", &r, &used, &err), ParseStatus::kComplete);
  EXPECT_EQ(r.kind, Reply::Kind::kError);
  EXPECT_EQ(r.text, "ERR unknown command 'ZADD'");
  ASSERT_EQ(ParseResp(":-17\r\n", &r, &used, &err), ParseStatus::kComplete);
  EXPECT_EQ(r.kind, Reply::Kind::kInteger);
  EXPECT_EQ(r.integer, -17);
  ASSERT_EQ(ParseResp("$5\r\na\r\nbc\r\n", &r, &used, &err), ParseStatus::kComplete);
  EXPECT_EQ(r.kind, Reply::Kind::kBulk);
  EXPECT_EQ(r.text, "a\r\nbc");  // binary-safe
  ASSERT_EQ(ParseResp("$0\r\n\r\n", &r, &used, &err), ParseStatus::kComplete);
  EXPECT_EQ(r.kind, Reply::Kind::kBulk);
  EXPECT_EQ(r.text, "");
  ASSERT_EQ(ParseResp("$-1\r\n", &r, &used, &err), ParseStatus::kComplete);
  EXPECT_EQ(r.kind, Reply::Kind::kNil);
  ASSERT_EQ(ParseResp("*-1\r\n", &r, &used, &err), ParseStatus::kComplete);
  EXPECT_EQ(r.kind, Reply::Kind::kNil);
  // SCAN's reply: [cursor, [keys]], and an MGET with a nil.
  ASSERT_EQ(ParseResp("*2\r\n$1\r\n0\r\n*2\r\n$2\r\nk1\r\n$2\r\nk2\r\n", &r, &used, &err),
            ParseStatus::kComplete);
  ASSERT_EQ(r.kind, Reply::Kind::kArray);
  ASSERT_EQ(r.size, 2u);
  EXPECT_EQ(r.at(0).text, "0");
  ASSERT_EQ(r.at(1).size, 2u);
  EXPECT_EQ(r.at(1).at(1).text, "k2");
  // The same Reply reused for a shorter array: size says how many count.
  ASSERT_EQ(ParseResp("*3\r\n$1\r\na\r\n$-1\r\n:5\r\n", &r, &used, &err), ParseStatus::kComplete);
  ASSERT_EQ(r.size, 3u);
  EXPECT_EQ(r.at(1).kind, Reply::Kind::kNil);
  EXPECT_EQ(r.at(2).integer, 5);
  ASSERT_EQ(ParseResp("*0\r\n", &r, &used, &err), ParseStatus::kComplete);
  EXPECT_EQ(r.kind, Reply::Kind::kArray);
  EXPECT_EQ(r.size, 0u);
}

TEST(ClientWire, RespRepliesArriveInPieces) {
  for (const std::string reply :
       {"+OK\r\n", "-ERR x\r\n", ":123\r\n", "$3\r\nabc\r\n", "$-1\r\n",
        "*2\r\n$1\r\n0\r\n*2\r\n$2\r\nk1\r\n$-1\r\n", "*0\r\n", "$2\r\n\r\n\r\n"})
    ExpectIncompleteUntilWhole(Protocol::kResp, reply, McShape::kLine);
}

TEST(ClientWire, MalformedRespIsRefused) {
  Reply r;
  size_t used = 0;
  std::string err;
  for (const std::string bad :
       {"?\r\n", "\r\n", ":12x\r\n", ":\r\n", "$-2\r\n", "$abc\r\n", "$3\r\nabcd\r\n",
        "*-5\r\n", "$99999999999\r\n", "*2\r\n+OK\r\n!\r\n",
        "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"}) {
    EXPECT_EQ(ParseResp(bad, &r, &used, &err), ParseStatus::kMalformed) << bad;
    EXPECT_FALSE(err.empty());
  }
  // A line that never ends is refused once it is longer than any reply line.
  EXPECT_EQ(ParseResp("+" + std::string(kMaxLine + 1, 'x'), &r, &used, &err),
            ParseStatus::kMalformed);
}

TEST(ClientWire, MemcachedReplies) {
  Reply r;
  size_t used = 0;
  std::string err;
  ASSERT_EQ(ParseMemcached("STORED\r\n", McShape::kLine, &r, &used, &err), ParseStatus::kComplete);
  EXPECT_EQ(r.kind, Reply::Kind::kStatus);
  EXPECT_EQ(r.text, "STORED");
  for (const char* e : {"ERROR\r\n", "CLIENT_ERROR bad data chunk\r\n", "SERVER_ERROR out of memory\r\n"}) {
    ASSERT_EQ(ParseMemcached(e, McShape::kValues, &r, &used, &err), ParseStatus::kComplete) << e;
    EXPECT_EQ(r.kind, Reply::Kind::kError) << e;
  }
  ASSERT_EQ(ParseMemcached("END\r\n", McShape::kValues, &r, &used, &err), ParseStatus::kComplete);
  EXPECT_EQ(r.kind, Reply::Kind::kArray);
  EXPECT_EQ(r.size, 0u);
  ASSERT_EQ(ParseMemcached("VALUE a 0 3\r\nx\r\n\r\nVALUE bb 7 0 99\r\n\r\nEND\r\n", McShape::kValues,
                           &r, &used, &err),
            ParseStatus::kComplete)
      << err;
  ASSERT_EQ(r.size, 2u);
  EXPECT_EQ(r.at(0).key, "a");
  EXPECT_EQ(r.at(0).text, "x\r\n");
  EXPECT_EQ(r.at(0).integer, 0);
  EXPECT_EQ(r.at(1).key, "bb");
  EXPECT_EQ(r.at(1).text, "");
  EXPECT_EQ(r.at(1).integer, 99);  // gets: the cas unique
  for (const std::string bad : {"VALUE a 0\r\n", "VALUE a x 3\r\nabc\r\nEND\r\n",
                                "VALUE a 0 3\r\nabcd\r\nEND\r\n", "STORED\r\n",
                                "VALUE a 0 -1\r\n", "VALUE a 0 1 2 3\r\nx\r\nEND\r\n"})
    EXPECT_EQ(ParseMemcached(bad, McShape::kValues, &r, &used, &err), ParseStatus::kMalformed)
        << bad;
}

TEST(ClientWire, MemcachedRepliesArriveInPieces) {
  ExpectIncompleteUntilWhole(Protocol::kMemcached, "DELETED\r\n", McShape::kLine);
  ExpectIncompleteUntilWhole(Protocol::kMemcached, "END\r\n", McShape::kValues);
  ExpectIncompleteUntilWhole(Protocol::kMemcached, "VALUE k 0 5\r\nEND\r\n\r\nEND\r\n",
                             McShape::kValues);
  ExpectIncompleteUntilWhole(Protocol::kMemcached, "VALUE k 1 2 3\r\nab\r\nVALUE j 0 0\r\n\r\nEND\r\n",
                             McShape::kValues);
}

// ---------------------------------------------------------- the reader
// A source that hands out `bytes` in reads of the given sizes (cycled).
ReplyReader::Source Chunked(std::string bytes, std::vector<size_t> sizes) {
  auto state = std::make_shared<std::pair<std::string, size_t>>(std::move(bytes), 0);
  auto turn = std::make_shared<size_t>(0);
  return [state, turn, sizes](char* buf, size_t n) -> Result<size_t> {
    auto& [data, pos] = *state;
    const size_t want = std::min({n, sizes[(*turn)++ % sizes.size()], data.size() - pos});
    std::copy_n(data.data() + pos, want, buf);
    pos += want;
    return want;
  };
}

TEST(ClientWire, ReaderReassemblesRepliesSplitAcrossReads) {
  std::string big(200000, 'v');  // larger than the reader's first buffer
  std::string stream = "+OK\r\n$" + std::to_string(big.size()) + "\r\n" + big +
                       "\r\n*2\r\n$1\r\na\r\n$-1\r\n:7\r\n";
  for (std::vector<size_t> sizes :
       std::vector<std::vector<size_t>>{{1}, {2, 3}, {7, 1, 4096}, {1 << 20}}) {
    ReplyReader reader(Chunked(stream, sizes));
    Reply r;
    ASSERT_TRUE(reader.Read(Protocol::kResp, McShape::kLine, &r).ok());
    EXPECT_EQ(r.text, "OK");
    ASSERT_TRUE(reader.Read(Protocol::kResp, McShape::kLine, &r).ok());
    EXPECT_EQ(r.text, big);
    ASSERT_TRUE(reader.Read(Protocol::kResp, McShape::kLine, &r).ok());
    ASSERT_EQ(r.size, 2u);
    EXPECT_EQ(r.at(0).text, "a");
    ASSERT_TRUE(reader.Read(Protocol::kResp, McShape::kLine, &r).ok());
    EXPECT_EQ(r.integer, 7);
    EXPECT_EQ(reader.buffered(), 0u);
    Status end = reader.Read(Protocol::kResp, McShape::kLine, &r);
    EXPECT_EQ(end.code(), Status::Code::kIOError);
    EXPECT_NE(end.message().find("closed the connection"), std::string_view::npos);
  }
}

TEST(ClientWire, ReaderReadsMemcachedShapesInTurn) {
  const std::string stream = "STORED\r\nVALUE k 0 3\r\nabc\r\nEND\r\nNOT_FOUND\r\nEND\r\n";
  ReplyReader reader(Chunked(stream, {3}));
  Reply r;
  ASSERT_TRUE(reader.Read(Protocol::kMemcached, McShape::kLine, &r).ok());
  EXPECT_EQ(r.text, "STORED");
  ASSERT_TRUE(reader.Read(Protocol::kMemcached, McShape::kValues, &r).ok());
  ASSERT_EQ(r.size, 1u);
  EXPECT_EQ(r.at(0).text, "abc");
  ASSERT_TRUE(reader.Read(Protocol::kMemcached, McShape::kLine, &r).ok());
  EXPECT_EQ(r.text, "NOT_FOUND");
  ASSERT_TRUE(reader.Read(Protocol::kMemcached, McShape::kValues, &r).ok());
  EXPECT_EQ(r.size, 0u);
}

TEST(ClientWire, ReaderReportsTruncationAndGarbage) {
  Reply r;
  ReplyReader cut(Chunked("$10\r\nabc", {2}));
  Status s = cut.Read(Protocol::kResp, McShape::kLine, &r);
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_NE(s.message().find("middle of a reply"), std::string_view::npos);
  ReplyReader garbage(Chunked("HTTP/1.1 400 Bad Request\r\n", {5}));
  EXPECT_EQ(garbage.Read(Protocol::kResp, McShape::kLine, &r).code(), Status::Code::kCorruption);
  ReplyReader failing([](char*, size_t) -> Result<size_t> { return Status::IOError("boom"); });
  EXPECT_EQ(failing.Read(Protocol::kResp, McShape::kLine, &r).ToString(),
            Status::IOError("boom").ToString());
}

TEST(ClientWire, ParsersSurviveGarbage) {
  // Random bytes, and valid replies with bytes changed, cut or repeated:
  // any status but a crash; a complete parse consumes at most the input.
  const std::vector<std::string> valid = {
      "*2\r\n$1\r\n0\r\n*2\r\n$2\r\nk1\r\n$2\r\nk2\r\n", "$5\r\nhello\r\n", ":42\r\n",
      "VALUE k 0 3 7\r\nabc\r\nVALUE j 1 0\r\n\r\nEND\r\n", "-ERR x\r\n"};
  const std::string alphabet = "*$:+-\r\n0123456789-VALUEND kx";
  workload::Rng rng(19);
  Reply r;
  std::string err;
  for (int i = 0; i < 20000; ++i) {
    std::string in;
    if (i % 2 == 0) {
      in.resize(rng.Below(40));
      for (char& c : in) c = alphabet[rng.Below(alphabet.size())];
    } else {
      in = valid[rng.Below(valid.size())];
      for (uint64_t m = rng.Below(4) + 1; m > 0; --m) {
        const size_t at = rng.Below(in.size());
        switch (rng.Below(3)) {
          case 0: in[at] = alphabet[rng.Below(alphabet.size())]; break;
          case 1: in.erase(at, 1); break;
          default: in.insert(at, 1, alphabet[rng.Below(alphabet.size())]); break;
        }
        if (in.empty()) break;
      }
    }
    size_t used = 0;
    if (ParseResp(in, &r, &used, &err) == ParseStatus::kComplete) {
      EXPECT_LE(used, in.size());
    }
    for (McShape shape : {McShape::kLine, McShape::kValues}) {
      if (ParseMemcached(in, shape, &r, &used, &err) == ParseStatus::kComplete) {
        EXPECT_LE(used, in.size());
      }
    }
  }
}

TEST(ClientWire, SendBuffersRepliesThatArriveMeanwhile) {
  // A "server" that writes 8 MiB of replies before it reads a byte, and
  // then reads an 8 MiB request: more than both directions' socket
  // buffers hold. A send that only waited for the socket to take data
  // would wait forever on a server that waits for its replies to be read.
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const size_t n = size_t{8} << 20;
  std::string reply;  // appends: GCC 12's -Wrestrict misfires on "$" + std::string
  reply.append("$").append(std::to_string(n)).append("\r\n").append(n, 'r').append("\r\n");
  std::string request(n, 'q');
  size_t server_read = 0;
  std::thread server([&] {
    for (size_t off = 0; off < reply.size();) {
      const ssize_t w = write(sv[1], reply.data() + off, reply.size() - off);
      if (w <= 0) return;
      off += static_cast<size_t>(w);
    }
    std::vector<char> buf(1 << 16);
    while (server_read < request.size()) {
      const ssize_t got = read(sv[1], buf.data(), buf.size());
      if (got <= 0) return;
      server_read += static_cast<size_t>(got);
    }
  });
  auto conn = Connection::Adopt(sv[0], 10000);
  ASSERT_TRUE(conn->Send(request).ok());
  Reply r;
  Status s = conn->Receive(Protocol::kResp, McShape::kLine, &r);
  server.join();
  close(sv[1]);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.kind, Reply::Kind::kBulk);
  EXPECT_EQ(r.text.size(), n);
  EXPECT_EQ(server_read, request.size());
}

TEST(ClientWire, HostPort) {
  std::string h, p;
  ASSERT_TRUE(SplitHostPort("127.0.0.1:6379", &h, &p).ok());
  EXPECT_EQ(h, "127.0.0.1");
  EXPECT_EQ(p, "6379");
  ASSERT_TRUE(SplitHostPort("[::1]:11211", &h, &p).ok());
  EXPECT_EQ(h, "::1");
  EXPECT_EQ(p, "11211");
  ASSERT_TRUE(SplitHostPort("localhost:1", &h, &p).ok());
  for (const char* bad : {"localhost", ":80", "host:", "host:0", "host:65536", "host:8x", "[::1]80",
                          "[::1"})
    EXPECT_TRUE(SplitHostPort(bad, &h, &p).is_invalid_argument()) << bad;
}

}  // namespace
}  // namespace pmindex::client
