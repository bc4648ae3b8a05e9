// The RESP handler against the test-only MapStore: exact replies, binary
// keys and values, SCAN cursors, protocol errors; each script also fed cut
// at every byte position.
#include "server/resp_protocol.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server/resp_shared.h"
#include "tests/server/protocol_harness.h"
#include "tests/server/resp_encode.h"
#include "tests/support/status.h"

namespace pmindex::server::testing {
namespace {

using Resp = Harness<RespProtocol>;

std::string BulkReply(std::string_view s) {
  std::string r = "$";
  r.append(std::to_string(s.size())).append("\r\n").append(s).append("\r\n");
  return r;
}

void ExpectScript(std::string_view script, std::string_view expected, bool closes = false,
                  size_t max_value = size_t{1} << 20) {
  ExpectSameForEverySplit<RespProtocol>(script, expected, closes, max_value);
}

TEST(Resp, PingEchoAndInline) {
  ExpectScript(Cmd({"PING"}) + Cmd({"ping", "hi"}) + "PING\r\n  ping \t there \n" +
                   Cmd({"ECHO", "x y"}) + "\r\n",
               "+PONG\r\n$2\r\nhi\r\n+PONG\r\n$5\r\nthere\r\n$3\r\nx y\r\n");
}

TEST(Resp, GetSetBinarySafe) {
  const std::string key("k\0\r\n", 4), value("\r\n$3\r\n\0", 7);
  ExpectScript(Cmd({"SET", key, value}) + Cmd({"GET", key}) + Cmd({"GET", "k"}) +
                   Cmd({"SET", "e", ""}) + Cmd({"GET", "e"}),
               "+OK\r\n" + BulkReply(value) + "$-1\r\n+OK\r\n$0\r\n\r\n");
}

TEST(Resp, SetNxXx) {
  ExpectScript(Cmd({"SET", "a", "1", "XX"}) + Cmd({"SET", "a", "1", "nx"}) +
                   Cmd({"SET", "a", "2", "NX"}) + Cmd({"SET", "a", "3", "XX"}) + Cmd({"GET", "a"}) +
                   Cmd({"SET", "a", "4", "NX", "XX"}) + Cmd({"SET", "a", "4", "BOGUS"}),
               "$-1\r\n+OK\r\n$-1\r\n+OK\r\n$1\r\n3\r\n-ERR syntax error\r\n-ERR syntax error\r\n");
}

TEST(Resp, ExpiryExPxTtl) {
  Resp h;
  EXPECT_EQ(h.Feed(Cmd({"SET", "s", "v", "EX", "10"}) + Cmd({"SET", "p", "v", "PX", "1500"}) +
                   Cmd({"SET", "n", "v"})),
            "+OK\r\n+OK\r\n+OK\r\n");
  EXPECT_EQ(h.Feed(Cmd({"TTL", "s"}) + Cmd({"PTTL", "p"}) + Cmd({"TTL", "n"}) +
                   Cmd({"TTL", "none"})),
            ":10\r\n:1500\r\n:-1\r\n:-2\r\n");
  h.now_ms += 1500;
  EXPECT_EQ(h.Feed(Cmd({"GET", "p"}) + Cmd({"GET", "s"})), "$-1\r\n$1\r\nv\r\n");
  EXPECT_EQ(h.Feed(Cmd({"EXPIRE", "n", "1"}) + Cmd({"EXPIRE", "none", "1"}) +
                   Cmd({"PEXPIRE", "s", "0"})),
            ":1\r\n:0\r\n:1\r\n");
  EXPECT_EQ(h.Feed(Cmd({"EXISTS", "s"})), ":0\r\n");  // expiry <= 0 removes at once
  h.now_ms += 1000;
  EXPECT_EQ(h.Feed(Cmd({"GET", "n"})), "$-1\r\n");
  // SET without an expiry clears an earlier one, as in Redis.
  EXPECT_EQ(h.Feed(Cmd({"SET", "x", "1", "EX", "1"}) + Cmd({"SET", "x", "2"}) + Cmd({"TTL", "x"})),
            "+OK\r\n+OK\r\n:-1\r\n");
  EXPECT_EQ(h.Feed(Cmd({"SET", "x", "1", "EX", "0"}) + Cmd({"SET", "x", "1", "PX", "-5"}) +
                   Cmd({"SET", "x", "1", "EX", "z"})),
            "-ERR invalid expire time in 'set' command\r\n"
            "-ERR invalid expire time in 'set' command\r\n"
            "-ERR value is not an integer or out of range\r\n");
}

TEST(Resp, DelExistsCountEveryKey) {
  ExpectScript(Cmd({"MSET", "a", "1", "b", "2", "c", "3"}) + Cmd({"EXISTS", "a", "a", "x", "b"}) +
                   Cmd({"DEL", "a", "x", "b", "a"}) + Cmd({"MGET", "a", "b", "c", "x"}) +
                   Cmd({"DBSIZE"}),
               "+OK\r\n:3\r\n:2\r\n*4\r\n$-1\r\n$-1\r\n$1\r\n3\r\n$-1\r\n:1\r\n");
}

TEST(Resp, Incr) {
  ExpectScript(Cmd({"INCR", "n"}) + Cmd({"INCRBY", "n", "41"}) + Cmd({"DECR", "n"}) +
                   Cmd({"DECRBY", "n", "-10"}) + Cmd({"SET", "s", "abc"}) + Cmd({"INCR", "s"}) +
                   Cmd({"SET", "m", "9223372036854775807"}) + Cmd({"INCR", "m"}) +
                   Cmd({"INCRBY", "n", "x"}) + Cmd({"DECRBY", "n", "-9223372036854775808"}) +
                   Cmd({"GET", "n"}),
               ":1\r\n:42\r\n:41\r\n:51\r\n+OK\r\n"
               "-ERR value is not an integer or out of range\r\n+OK\r\n"
               "-ERR increment or decrement would overflow\r\n"
               "-ERR value is not an integer or out of range\r\n"
               "-ERR decrement would overflow\r\n$2\r\n51\r\n");
}

TEST(Resp, MsetIsAllOrNothingOnSizeErrors) {
  // 64-byte store values: 51 bytes of data at most.
  ExpectScript(Cmd({"MSET", "a", "1", "b", std::string(52, 'x')}) + Cmd({"EXISTS", "a"}) +
                   Cmd({"MSET", "a"}) + Cmd({"SET", "k", std::string(52, 'x')}),
               "-ERR value too large (at most 51 bytes)\r\n:0\r\n"
               "-ERR wrong number of arguments for 'mset' command\r\n"
               "-ERR value too large (at most 51 bytes)\r\n",
               false, 64);
}

TEST(Resp, KeyLengthLimits) {
  Resp h;
  EXPECT_EQ(h.Feed(Cmd({"SET", "", "v"})), "-ERR invalid key length (1 to 1024 bytes)\r\n");
  EXPECT_EQ(h.Feed(Cmd({"GET", std::string(1025, 'k')})),
            "-ERR invalid key length (1 to 1024 bytes)\r\n");
  EXPECT_EQ(h.Feed(Cmd({"SET", std::string(1024, 'k'), "v"})), "+OK\r\n");
}

TEST(Resp, ScanVisitsEveryKeyOnceInOrder) {
  Resp h;
  std::set<std::string> want;
  for (int i = 0; i < 25; ++i) {
    std::string k = "key" + std::to_string(i);
    if (i == 7) k = std::string("\0\xff", 2);  // binary keys walk too
    want.insert(k);
    ASSERT_EQ(h.Feed(Cmd({"SET", k, "v"})), "+OK\r\n");
  }
  ASSERT_EQ(h.Feed(Cmd({"SET", "gone", "v", "PX", "1"})), "+OK\r\n");
  h.now_ms += 1;  // an expired key is not listed
  std::string cursor = "0";
  std::vector<std::string> seen;
  int calls = 0;
  do {
    const std::string r = h.Feed(Cmd({"SCAN", cursor, "COUNT", "7"}));
    ASSERT_EQ(r.rfind("*2\r\n$", 0), 0u) << r;
    // *2 $len cursor *n ($len key)*
    size_t p = 4;
    auto bulk = [&](std::string* s) {
      const size_t eol = r.find("\r\n", p);
      const size_t len = std::stoul(r.substr(p + 1, eol - p - 1));
      *s = r.substr(eol + 2, len);
      p = eol + 2 + len + 2;
    };
    bulk(&cursor);
    const size_t eol = r.find("\r\n", p);
    const size_t n = std::stoul(r.substr(p + 1, eol - p - 1));
    p = eol + 2;
    for (size_t i = 0; i < n; ++i) bulk(&seen.emplace_back());
    EXPECT_EQ(p, r.size());
    ++calls;
  } while (cursor != "0" && calls < 100);
  EXPECT_EQ(calls, 4);  // 26 stored keys, 7 a call
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()), want);
  EXPECT_EQ(seen.size(), want.size());
}

TEST(Resp, ScanMatchAndErrors) {
  Resp h;
  ASSERT_EQ(h.Feed(Cmd({"MSET", "user:1", "a", "user:2", "b", "item:1", "c"})), "+OK\r\n");
  EXPECT_EQ(h.Feed(Cmd({"SCAN", "0", "MATCH", "user:*", "COUNT", "100"})),
            "*2\r\n$1\r\n0\r\n*2\r\n$6\r\nuser:1\r\n$6\r\nuser:2\r\n");
  EXPECT_EQ(h.Feed(Cmd({"SCAN", "x"})), "-ERR invalid cursor\r\n");
  EXPECT_EQ(h.Feed(Cmd({"SCAN", "0", "COUNT", "0"})), "-ERR syntax error\r\n");
  EXPECT_EQ(h.Feed(Cmd({"SCAN", "0", "LIMIT", "1"})), "-ERR syntax error\r\n");
  // As Redis: a negative COUNT is a syntax error, a word is not an integer
  // (SCAN, HSCAN, SSCAN and ZSCAN parse their options alike).
  const std::vector<std::vector<std::string>> scans = {
      {"SCAN", "0"}, {"HSCAN", "h", "0"}, {"SSCAN", "s", "0"}, {"ZSCAN", "z", "0"}};
  for (std::vector<std::string> args : scans) {
    args.insert(args.end(), {"COUNT", "-1"});
    EXPECT_EQ(h.Feed(Cmd(args)), "-ERR syntax error\r\n") << args[0];
    args.back() = "ten";
    EXPECT_EQ(h.Feed(Cmd(args)), "-ERR value is not an integer or out of range\r\n") << args[0];
  }
}

TEST(Resp, CursorRoundTrips) {
  for (const std::string& key :
       {std::string("a"), std::string("\0", 1), std::string("\xff\xff", 2),
        std::string("\0\0\x01", 3), std::string(1024, '\xff'), std::string(1024, '\0')}) {
    const std::string c = KeyToCursor(key);
    ASSERT_FALSE(c.empty());
    EXPECT_TRUE(std::all_of(c.begin(), c.end(), [](char d) { return d >= '0' && d <= '9'; }));
    std::string back;
    ASSERT_TRUE(CursorToKey(c, 1024, &back)) << c;
    EXPECT_EQ(back, key);
  }
  EXPECT_EQ(KeyToCursor(""), "0");
  EXPECT_EQ(KeyToCursor("a"), std::to_string(0x0161));  // 0x01 then 'a'
  std::string key;
  EXPECT_TRUE(CursorToKey("0", 1024, &key));
  EXPECT_EQ(key, "");
  for (const char* bad : {"", "01", "-1", "12a", "1", "255", "513"})  // 513 = 0x0201
    EXPECT_FALSE(CursorToKey(bad, 1024, &key)) << bad;
  EXPECT_FALSE(CursorToKey(KeyToCursor(std::string(1025, 'k')), 1024, &key));
  EXPECT_FALSE(CursorToKey(std::string(5000, '9'), 1024, &key));
}

TEST(Resp, Glob) {
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("user:*", "user:42"));
  EXPECT_FALSE(GlobMatch("user:*", "item:42"));
  EXPECT_TRUE(GlobMatch("h?llo", "hello"));
  EXPECT_FALSE(GlobMatch("h?llo", "hllo"));
  EXPECT_TRUE(GlobMatch("h[ae]llo", "hallo"));
  EXPECT_FALSE(GlobMatch("h[ae]llo", "hillo"));
  EXPECT_TRUE(GlobMatch("h[^e]llo", "hallo"));
  EXPECT_FALSE(GlobMatch("h[^e]llo", "hello"));
  EXPECT_TRUE(GlobMatch("h[a-c]llo", "hbllo"));
  EXPECT_TRUE(GlobMatch("h[c-a]llo", "hbllo"));
  EXPECT_TRUE(GlobMatch("a\\*b", "a*b"));
  EXPECT_FALSE(GlobMatch("a\\*b", "axb"));
  EXPECT_TRUE(GlobMatch("*a*b*c*", "xxaxxbxxcxx"));
  EXPECT_FALSE(GlobMatch("*a*b*c*", "xxaxxcxxbxx"));
  EXPECT_TRUE(GlobMatch("**x", "abx"));
}

TEST(Resp, InlineQuotingAsRedis) {
  auto split = [](std::string_view line) {
    std::vector<std::string> args;
    EXPECT_TRUE(SplitInline(line, &args)) << line;
    return args;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("  set  a\tb "), (V{"set", "a", "b"}));
  EXPECT_EQ(split("set \"a b\" 'c d'"), (V{"set", "a b", "c d"}));
  EXPECT_EQ(split(R"(x "\x41\x4a\n\r\t\b\a\"\\\q" '\'\n')"),
            (V{"x", "AJ\n\r\t\b\a\"\\q", "'\\n"}));
  EXPECT_EQ(split(R"("\x4" "\xZZ")"), (V{"x4", "xZZ"}));  // not a hex escape
  EXPECT_EQ(split(R"(a"b c" e)"), (V{"ab c", "e"}));
  EXPECT_EQ(split("\"\" ''"), (V{"", ""}));
  std::vector<std::string> args;
  for (std::string_view bad : {"\"abc", "'abc", "\"a\"b", "'a'b", "\"a\\\"", "a\"b c\"d e"})
    EXPECT_FALSE(SplitInline(bad, &args)) << bad;
  ExpectScript("SET \"a key\" 'v 1'\r\nGET \"a key\"\r\nECHO \"\\x00\"\r\n",
               "+OK\r\n$3\r\nv 1\r\n$1\r\n" + std::string(1, '\0') + "\r\n");
  ExpectScript("PING\r\nSET \"a b\r\nPING\r\n",
               "+PONG\r\n-ERR Protocol error: unbalanced quotes in request\r\n", true);
}

TEST(Resp, ErrorsKeepTheConnection) {
  ExpectScript(Cmd({"NOSUCH", "a"}) + Cmd({"GET"}) + Cmd({"get", "a", "b"}) + Cmd({"SELECT", "1"}) +
                   Cmd({"SELECT", "0"}) + Cmd({"CLIENT", "SETINFO", "LIB-NAME", "x"}) +
                   "*0\r\n" + Cmd({"GET", "a"}),
               "-ERR unknown command 'NOSUCH', with args beginning with: 'a' \r\n"
               "-ERR wrong number of arguments for 'get' command\r\n"
               "-ERR wrong number of arguments for 'get' command\r\n"
               "-ERR DB index is out of range\r\n+OK\r\n+OK\r\n$-1\r\n");
}

TEST(Resp, UnknownCommandNameCannotBreakTheReplyLine) {
  Resp h;
  EXPECT_EQ(h.Feed(Cmd({"X\r\n+OK"})),
            "-ERR unknown command 'X  +OK', with args beginning with: \r\n");
  EXPECT_EQ(h.Feed(Cmd({"X", "a\nb", std::string(200, 'y'), "z"})),
            "-ERR unknown command 'X', with args beginning with: 'a b' '" + std::string(122, 'y') +
                "' \r\n");
}

TEST(Resp, TableChecksArityAndSubcommands) {
  // Redis's arity convention: GET is exactly 2, MGET at least 2; a
  // container command (CLIENT) names its subcommand.
  ExpectScript(Cmd({"gEt", "k"}) + Cmd({"MGET"}) + Cmd({"client"}) + Cmd({"CLIENT", "nosuch"}) +
                   Cmd({"client", "SETNAME"}) + Cmd({"Client", "setname", "x"}) +
                   Cmd({"ping", "a", "b"}),
               "$-1\r\n-ERR wrong number of arguments for 'mget' command\r\n"
               "-ERR wrong number of arguments for 'client' command\r\n"
               "-ERR unknown subcommand 'nosuch'. Try CLIENT HELP.\r\n"
               "-ERR wrong number of arguments for 'client|setname' command\r\n+OK\r\n"
               "-ERR wrong number of arguments for 'ping' command\r\n");
}

TEST(Resp, TableDescribesEveryCommand) {
  const CommandTable& t = RespCommands();
  const Command* mset = t.Find("MSet");
  ASSERT_NE(mset, nullptr);
  EXPECT_EQ(mset->arity, -3);
  EXPECT_EQ(mset->first_key, 1);
  EXPECT_EQ(mset->last_key, -1);
  EXPECT_EQ(mset->key_step, 2);
  EXPECT_EQ(t.Find("nosuch"), nullptr);
  t.ForEach([](const Command& c) {
    EXPECT_NE(c.arity, 0) << c.name;
    EXPECT_FALSE(c.group.empty()) << c.name;
    EXPECT_TRUE(c.handler != nullptr || !c.subcommands.empty()) << c.name;
    EXPECT_EQ((c.first_key == 0), (c.key_step == 0)) << c.name;
    for (const Command& sub : c.subcommands) {
      EXPECT_NE(sub.handler, nullptr) << sub.full_name;
      EXPECT_EQ(sub.full_name, std::string(c.name) + "|" + std::string(sub.name));
    }
  });
}

TEST(Resp, ProtocolErrorsClose) {
  ExpectScript(Cmd({"PING"}) + "*1\r\n+PING\r\n" + Cmd({"PING"}),
               "+PONG\r\n-ERR Protocol error: expected '$', got '+'\r\n", true);
  ExpectScript("*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length\r\n", true);
  ExpectScript("*1\r\n$536870913\r\n", "-ERR Protocol error: invalid bulk length\r\n", true);
  ExpectScript("*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n", true);
  ExpectScript("*z\r\n", "-ERR Protocol error: invalid multibulk length\r\n", true);
  ExpectScript("*99999999\r\n", "-ERR Protocol error: invalid multibulk length\r\n", true);
  ExpectScript("*1\r\n$1\r\nab\r\n", "-ERR Protocol error: expected CRLF after a bulk string\r\n",
               true);
}

TEST(Resp, OversizedBulkStringsAreDroppedAndRefused) {
  // 64-byte store values (51 bytes of data): a 65-byte bulk string is
  // larger than any item but within proto-max-bulk-len. The request is
  // dropped as it arrives and refused; the connection goes on.
  const std::string big(65, 'v');
  ExpectScript(Cmd({"SET", "k", big}) + Cmd({"MSET", "a", "1", "b", big, "c", "3"}) +
                   Cmd({"EXISTS", "a", "k"}) + Cmd({"PING"}),
               "-ERR value too large (at most 51 bytes)\r\n"
               "-ERR value too large (at most 51 bytes)\r\n:0\r\n+PONG\r\n",
               false, 64);
  // A broken length line after the big one is still a protocol error.
  ExpectScript("*3\r\n$3\r\nSET\r\n$65\r\n" + big + "\r\n$x\r\n",
               "-ERR Protocol error: invalid bulk length\r\n", true, 64);
  // Memory stays bounded: the dropped bytes are not kept.
  Resp h(64);
  EXPECT_EQ(h.Feed("*2\r\n$4\r\nECHO\r\n$100000\r\n" + std::string(50000, 'x')), "");
  EXPECT_EQ(h.pending(), 0u);
  EXPECT_EQ(h.Feed(std::string(50000, 'x') + "\r\n" + Cmd({"PING"})),
            "-ERR value too large (at most 51 bytes)\r\n+PONG\r\n");
}

TEST(Resp, LongLinesClose) {
  Resp h;
  EXPECT_EQ(h.Feed(std::string(kMaxLineBytes + 1, 'x')),
            "-ERR Protocol error: too big inline request\r\n");
  EXPECT_TRUE(h.protocol.close_requested());
  Resp m;
  std::string count = "*";
  count.append(kMaxLineBytes + 1, '1');
  EXPECT_EQ(m.Feed(count),
            "-ERR Protocol error: too big mbulk count string\r\n");
}

TEST(Resp, QuitRepliesThenCloses) {
  ExpectScript(Cmd({"SET", "a", "1"}) + "QUIT\r\n" + Cmd({"GET", "a"}), "+OK\r\n+OK\r\n", true);
}

TEST(Resp, FlushAndInfo) {
  Resp h;
  ASSERT_EQ(h.Feed(Cmd({"MSET", "a", "1", "b", "2"})), "+OK\r\n");
  const std::string info = h.Feed(Cmd({"INFO"}));
  EXPECT_EQ(info[0], '$');
  EXPECT_NE(info.find("server:pmserver\r\n"), std::string::npos) << info;
  EXPECT_NE(info.find("db0:keys=2,expires=0,avg_ttl=0\r\n"), std::string::npos) << info;
  EXPECT_EQ(h.Feed(Cmd({"FLUSHDB"}) + Cmd({"DBSIZE"}) + Cmd({"FLUSHALL", "ASYNC"})),
            "+OK\r\n:0\r\n+OK\r\n");
}

TEST(Resp, SharesItemsWithMemcached) {
  // One store, both protocols: an item stored with flags and expiry over
  // memcached reads over RESP as its data.
  Resp h;
  std::string enc;
  item_codec::Encode("hello", 42, kStartMs + 5000, &enc);
  PMINDEX_ASSERT_OK(h.store.Put("k", enc));
  EXPECT_EQ(h.Feed(Cmd({"GET", "k"}) + Cmd({"TTL", "k"})), "$5\r\nhello\r\n:5\r\n");
}

// ---- RESP3, HELLO, AUTH, CLIENT

TEST(Resp, ReplyWriterSpeaksBothVersions) {
  auto both = [](auto&& write) {
    std::string r2, r3;
    RespReply w2(&r2, 2), w3(&r3, 3);
    write(w2);
    write(w3);
    return std::make_pair(r2, r3);
  };
  EXPECT_EQ(both([](RespReply& r) {
              r.Map(1);
              r.Bulk("k");
              r.Set(2);
              r.Integer(1);
              r.NullBulk();
            }),
            std::make_pair(std::string("*2\r\n$1\r\nk\r\n*2\r\n:1\r\n$-1\r\n"),
                           std::string("%1\r\n$1\r\nk\r\n~2\r\n:1\r\n_\r\n")));
  EXPECT_EQ(both([](RespReply& r) {
              r.Double(1.5);
              r.Double(-1.0 / 0.0);
              r.Bool(true);
              r.Bool(false);
              r.NullArray();
            }),
            std::make_pair(std::string("$3\r\n1.5\r\n$4\r\n-inf\r\n:1\r\n:0\r\n*-1\r\n"),
                           std::string(",1.5\r\n,-inf\r\n#t\r\n#f\r\n_\r\n")));
  EXPECT_EQ(both([](RespReply& r) {
              r.Verbatim("a\nb");
              r.BigNumber("123");
            }),
            std::make_pair(std::string("$3\r\na\nb\r\n$3\r\n123\r\n"),
                           std::string("=7\r\ntxt:a\nb\r\n(123\r\n")));
  EXPECT_EQ(DoubleText(0.1), "0.10000000000000001");
  EXPECT_EQ(DoubleText(3), "3");
}

std::string HelloMap(int proto, int id) {
  std::string fields = BulkReply("server") + BulkReply("redis") + BulkReply("version") +
                       BulkReply(kRedisCompatibleVersion) + BulkReply("proto") + ":" +
                       std::to_string(proto) + "\r\n" + BulkReply("id") + ":" +
                       std::to_string(id) + "\r\n" + BulkReply("mode") +
                       BulkReply("standalone") + BulkReply("role") + BulkReply("master") +
                       BulkReply("modules") + "*0\r\n";
  return (proto == 3 ? "%7\r\n" : "*14\r\n") + fields;
}

TEST(Resp, HelloSwitchesToResp3) {
  ExpectScript(Cmd({"HELLO"}) + Cmd({"GET", "k"}) + Cmd({"hello", "3"}) + Cmd({"GET", "k"}) +
                   Cmd({"MGET", "k", "k"}) + Cmd({"SET", "k", "v", "XX"}) + Cmd({"HELLO", "2"}) +
                   Cmd({"GET", "k"}),
               HelloMap(2, 1) + "$-1\r\n" + HelloMap(3, 1) + "_\r\n*2\r\n_\r\n_\r\n_\r\n" +
                   HelloMap(2, 1) + "$-1\r\n");
}

TEST(Resp, HelloErrors) {
  ExpectScript(Cmd({"HELLO", "4"}) + Cmd({"HELLO", "1"}) + Cmd({"HELLO", "x"}) +
                   Cmd({"HELLO", "3", "BOGUS"}) + Cmd({"HELLO", "3", "AUTH", "default"}) +
                   Cmd({"HELLO", "3", "SETNAME", "a b"}) + Cmd({"GET", "k"}),
               "-NOPROTO unsupported protocol version\r\n"
               "-NOPROTO unsupported protocol version\r\n"
               "-ERR Protocol version is not an integer or out of range\r\n"
               "-ERR Syntax error in HELLO option 'BOGUS'\r\n"
               "-ERR Syntax error in HELLO option 'AUTH'\r\n"
               "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
               "$-1\r\n");  // still RESP2: no HELLO succeeded
}

TEST(Resp, HelloSetsNameAndAuthenticates) {
  RespShared shared(RespSettings{.requirepass = "secret"});
  Harness<RespProtocol> h(size_t{1} << 20, shared);
  EXPECT_EQ(h.Feed(Cmd({"HELLO", "3"})),
            "-NOAUTH HELLO must be called with the client already authenticated, otherwise the "
            "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
            "select the RESP protocol version at the same time\r\n");
  EXPECT_EQ(h.Feed(Cmd({"HELLO", "3", "AUTH", "default", "wrong"})),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  EXPECT_EQ(h.Feed(Cmd({"HELLO", "3", "AUTH", "default", "secret", "SETNAME", "app"})),
            HelloMap(3, 1));
  EXPECT_EQ(h.Feed(Cmd({"CLIENT", "GETNAME"}) + Cmd({"GET", "k"})), "$3\r\napp\r\n_\r\n");
}

TEST(Resp, PasswordGatesEveryCommandButAuthHelloQuit) {
  RespShared shared(RespSettings{.requirepass = "secret"});
  Harness<RespProtocol> h(size_t{1} << 20, shared);
  const std::string noauth = "-NOAUTH Authentication required.\r\n";
  const std::string wrongpass =
      "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
  EXPECT_EQ(h.Feed(Cmd({"GET", "k"}) + Cmd({"PING"}) + Cmd({"CLIENT", "ID"}) +
                   Cmd({"SET", "k", "v"})),
            noauth + noauth + noauth + noauth);
  // Unknown commands and wrong arity are reported as such first (as Redis).
  EXPECT_EQ(h.Feed(Cmd({"NOSUCH"}) + Cmd({"GET"})),
            "-ERR unknown command 'NOSUCH', with args beginning with: \r\n"
            "-ERR wrong number of arguments for 'get' command\r\n");
  EXPECT_EQ(h.Feed(Cmd({"AUTH", "wrong"}) + Cmd({"AUTH", "nobody", "secret"}) +
                   Cmd({"AUTH", "a", "b", "c"}) + Cmd({"GET", "k"})),
            wrongpass + wrongpass + "-ERR syntax error\r\n" + noauth);
  EXPECT_EQ(h.Feed(Cmd({"AUTH", "secret"}) + Cmd({"GET", "k"}) +
                   Cmd({"AUTH", "default", "secret"})),
            "+OK\r\n$-1\r\n+OK\r\n");
  // A wrong password later does not undo the authentication (as Redis).
  EXPECT_EQ(h.Feed(Cmd({"AUTH", "x"}) + Cmd({"GET", "k"})), wrongpass + "$-1\r\n");

  Harness<RespProtocol> q(size_t{1} << 20, shared);
  EXPECT_EQ(q.Feed(Cmd({"QUIT"})), "+OK\r\n");
  EXPECT_TRUE(q.protocol.close_requested());
}

TEST(Resp, AuthWithoutPassword) {
  ExpectScript(Cmd({"AUTH", "x"}) + Cmd({"AUTH", "default", "anything"}) +
                   Cmd({"AUTH", "other", "x"}),
               "-ERR AUTH <password> called without any password configured for the default "
               "user. Are you sure your configuration is correct?\r\n+OK\r\n"
               "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
}

TEST(Resp, ProtectedModeRefusesOnlyRemotePeersWithoutPassword) {
  RespShared open(RespSettings{});
  EXPECT_FALSE(open.RefuseConnection(true));
  EXPECT_TRUE(open.RefuseConnection(false));
  RespShared off(RespSettings{.protected_mode = false});
  EXPECT_FALSE(off.RefuseConnection(false));
  RespShared locked(RespSettings{.requirepass = "p"});
  EXPECT_FALSE(locked.RefuseConnection(false));
}

TEST(Resp, ClientNamesIdsAndInfo) {
  Resp h;
  EXPECT_EQ(h.Feed(Cmd({"CLIENT", "ID"}) + Cmd({"CLIENT", "GETNAME"}) +
                   Cmd({"CLIENT", "SETNAME", "a b"}) + Cmd({"CLIENT", "SETNAME", "worker-1"}) +
                   Cmd({"CLIENT", "GETNAME"}) + Cmd({"CLIENT", "SETINFO", "LIB-NAME", "x y"}) +
                   Cmd({"CLIENT", "SETINFO", "LIB-VER", "1.0"}) +
                   Cmd({"CLIENT", "SETINFO", "OTHER", "1"}) + Cmd({"CLIENT", "NO-EVICT", "on"}) +
                   Cmd({"CLIENT", "NO-EVICT", "maybe"})),
            ":1\r\n$-1\r\n"
            "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
            "+OK\r\n$8\r\nworker-1\r\n"
            "-ERR lib-name cannot contain spaces, newlines or special characters.\r\n+OK\r\n"
            "-ERR Unrecognized option 'OTHER'\r\n+OK\r\n-ERR syntax error\r\n");
  const std::string info = h.Feed(Cmd({"CLIENT", "INFO"}));
  EXPECT_EQ(info.rfind("$", 0), 0u) << info;
  for (const char* field : {"id=1 ", " name=worker-1 ", " flags=e ", " db=0 ",
                            " cmd=client|info ", " resp=2 lib-ver=1.0\n"})
    EXPECT_NE(info.find(field), std::string::npos) << field << " in " << info;
}

TEST(Resp, ClientListAndKillAcrossConnections) {
  RespShared shared;
  Harness<RespProtocol> a(size_t{1} << 20, shared);
  Harness<RespProtocol> b(size_t{1} << 20, shared);
  ASSERT_EQ(b.Feed(Cmd({"CLIENT", "SETNAME", "bee"})), "+OK\r\n");
  const std::string list = a.Feed(Cmd({"CLIENT", "LIST"}));
  EXPECT_NE(list.find("id=1 "), std::string::npos) << list;
  EXPECT_NE(list.find("id=2 addr= laddr= fd=-1 name=bee "), std::string::npos) << list;
  EXPECT_LT(list.find("id=1 "), list.find("id=2 "));
  EXPECT_EQ(a.Feed(Cmd({"CLIENT", "LIST", "TYPE", "pubsub"}) +
                   Cmd({"CLIENT", "LIST", "TYPE", "bogus"}) + Cmd({"CLIENT", "LIST", "ID", "x"})),
            "$0\r\n\r\n-ERR Unknown client type 'bogus'\r\n-ERR Invalid client ID\r\n");
  const std::string only_b = a.Feed(Cmd({"CLIENT", "LIST", "ID", "2", "99"}));
  EXPECT_EQ(only_b.find("id=1 "), std::string::npos);
  EXPECT_NE(only_b.find("id=2 "), std::string::npos);
  // Kill the other connection: it closes at its next input.
  EXPECT_EQ(a.Feed(Cmd({"CLIENT", "KILL", "ID", "99"}) + Cmd({"CLIENT", "KILL", "ID", "0"}) +
                   Cmd({"CLIENT", "KILL", "ID", "2"})),
            ":0\r\n-ERR client-id should be greater than 0\r\n:1\r\n");
  EXPECT_EQ(b.Feed(Cmd({"PING"})), "");
  EXPECT_TRUE(b.protocol.close_requested());
  EXPECT_FALSE(a.protocol.close_requested());
  // SKIPME defaults to yes in the new form; the old form (an address)
  // may kill the caller, which replies and then closes.
  EXPECT_EQ(a.Feed(Cmd({"CLIENT", "KILL", "ID", "1"}) + Cmd({"CLIENT", "KILL", "1.2.3.4:5"})),
            ":0\r\n-ERR No such client\r\n");
  EXPECT_EQ(a.Feed(Cmd({"CLIENT", "KILL", "ID", "1", "SKIPME", "no"}) + Cmd({"PING"})), ":1\r\n");
  EXPECT_TRUE(a.protocol.close_requested());
}

// ---- COMMAND, CONFIG, INFO, TIME, FUNCTION

TEST(Resp, CommandInfoDescribesKeyPositions) {
  Resp h;
  // MSET: keys from 1 to the last argument, every second one.
  const std::string mset = h.Feed(Cmd({"COMMAND", "INFO", "mset"}));
  EXPECT_EQ(mset.rfind("*1\r\n*10\r\n$4\r\nmset\r\n:-3\r\n*2\r\n+write\r\n+denyoom\r\n"
                       ":1\r\n:-1\r\n:2\r\n*3\r\n+@write\r\n+@string\r\n+@slow\r\n",
                       0),
            0u)
      << mset;
  EXPECT_NE(mset.find("$7\r\nlastkey\r\n:-1\r\n$7\r\nkeystep\r\n:2\r\n"), std::string::npos);
  // RESP3: sets and maps.
  ASSERT_EQ(h.Feed(Cmd({"HELLO", "3"})).substr(0, 4), "%7\r\n");
  const std::string get = h.Feed(Cmd({"COMMAND", "INFO", "get", "nosuch", "client|kill"}));
  EXPECT_EQ(get.rfind("*3\r\n*10\r\n$3\r\nget\r\n:2\r\n~2\r\n+readonly\r\n+fast\r\n"
                      ":1\r\n:1\r\n:1\r\n"
                      "~3\r\n+@read\r\n+@string\r\n+@fast\r\n~0\r\n~1\r\n%3\r\n$5\r\nflags\r\n"
                      "~2\r\n+RO\r\n+access\r\n",
                      0),
            0u)
      << get;
  EXPECT_NE(get.find("~0\r\n_\r\n*10\r\n$11\r\nclient|kill\r\n:-3\r\n"), std::string::npos) << get;
}

TEST(Resp, CommandCountListGetKeysDocs) {
  Resp h;
  EXPECT_EQ(h.Feed(Cmd({"COMMAND", "COUNT"})),
            std::string(":").append(std::to_string(RespCommands().size())).append("\r\n"));
  EXPECT_EQ(h.Feed(Cmd({"COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"}) +
                   Cmd({"COMMAND", "GETKEYS", "GET", "k"}) +
                   Cmd({"COMMAND", "GETKEYS", "PING", "x"}) +
                   Cmd({"COMMAND", "GETKEYS", "NOSUCH", "k"}) +
                   Cmd({"COMMAND", "GETKEYS", "GET", "a", "b"})),
            "*2\r\n$1\r\na\r\n$1\r\nb\r\n*1\r\n$1\r\nk\r\n"
            "-ERR The command has no key arguments\r\n-ERR Invalid command specified\r\n"
            "-ERR Invalid number of arguments specified for command\r\n");
  EXPECT_EQ(h.Feed(Cmd({"COMMAND", "LIST", "FILTERBY", "PATTERN", "config*"})),
            "*5\r\n$6\r\nconfig\r\n$10\r\nconfig|get\r\n$10\r\nconfig|set\r\n"
            "$16\r\nconfig|resetstat\r\n$11\r\nconfig|help\r\n");
  EXPECT_EQ(h.Feed(Cmd({"COMMAND", "DOCS", "echo", "nosuch"})),
            "*2\r\n$4\r\necho\r\n*4\r\n$7\r\nsummary\r\n$26\r\nAnswers the message given.\r\n"
            "$5\r\ngroup\r\n$10\r\nconnection\r\n");
  // Every command and subcommand has an entry (COMMAND alone lists them).
  const std::string all = h.Feed(Cmd({"COMMAND"}));
  EXPECT_EQ(all.rfind(std::string("*").append(std::to_string(RespCommands().size())), 0), 0u);
}

TEST(Resp, ConfigGetSet) {
  RespShared shared(RespSettings{.requirepass = "", .port = 6380, .max_connections = 7});
  Harness<RespProtocol> h(size_t{1} << 20, shared);
  EXPECT_EQ(h.Feed(Cmd({"CONFIG", "GET", "save"}) + Cmd({"CONFIG", "GET", "APPENDONLY"}) +
                   Cmd({"CONFIG", "GET", "max*", "port"}) + Cmd({"CONFIG", "GET", "nosuch"})),
            "*2\r\n$4\r\nsave\r\n$0\r\n\r\n*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n"
            "*8\r\n$10\r\nmaxclients\r\n$1\r\n7\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"
            "$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n$4\r\nport\r\n$4\r\n6380\r\n*0\r\n");
  EXPECT_EQ(h.Feed(Cmd({"CONFIG", "SET", "nosuch", "1"}) + Cmd({"CONFIG", "SET", "port", "1"}) +
                   Cmd({"CONFIG", "SET", "save", "900 1"}) + Cmd({"CONFIG", "SET", "save", ""}) +
                   Cmd({"CONFIG", "SET", "protected-mode", "maybe"}) +
                   Cmd({"CONFIG", "SET", "requirepass", "p", "requirepass", "q"}) +
                   Cmd({"CONFIG", "SET", "save", ""})),
            "-ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'\r\n"
            "-ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable "
            "config\r\n"
            "-ERR CONFIG SET failed (possibly related to argument 'save') - pmserver cannot change "
            "it\r\n+OK\r\n"
            "-ERR CONFIG SET failed (possibly related to argument 'protected-mode') - argument "
            "must be 'yes' or 'no'\r\n"
            "-ERR CONFIG SET failed (possibly related to argument 'requirepass') - duplicate "
            "parameter\r\n+OK\r\n");
  // All or none: the failing second pair undoes the first.
  EXPECT_EQ(h.Feed(Cmd({"CONFIG", "SET", "requirepass", "p", "protected-mode", "maybe"}) +
                   Cmd({"CONFIG", "GET", "requirepass"})),
            "-ERR CONFIG SET failed (possibly related to argument 'protected-mode') - argument "
            "must be 'yes' or 'no'\r\n*2\r\n$11\r\nrequirepass\r\n$0\r\n\r\n");
  EXPECT_FALSE(shared.PasswordRequired());
  // A password set at run time: this connection stays authenticated (it
  // connected without one, as in Redis); a new one must authenticate.
  EXPECT_EQ(h.Feed(Cmd({"CONFIG", "SET", "requirepass", "pw"}) + Cmd({"GET", "k"})),
            "+OK\r\n$-1\r\n");
  Harness<RespProtocol> late(size_t{1} << 20, shared);
  EXPECT_EQ(late.Feed(Cmd({"GET", "k"}) + Cmd({"AUTH", "pw"}) + Cmd({"GET", "k"})),
            "-NOAUTH Authentication required.\r\n+OK\r\n$-1\r\n");
  EXPECT_EQ(h.Feed(Cmd({"CONFIG", "SET", "requirepass", ""})), "+OK\r\n");
  EXPECT_FALSE(shared.PasswordRequired());
}

TEST(Resp, InfoSections) {
  Resp h;
  ASSERT_EQ(h.Feed(Cmd({"SET", "a", "1"}) + Cmd({"GET", "a"}) + Cmd({"GET", "a"})),
            "+OK\r\n$1\r\n1\r\n$1\r\n1\r\n");
  const std::string all = h.Feed(Cmd({"INFO"}));
  for (const char* s : {"# Server\r\n", "redis_version:7.0.15\r\n", "# Clients\r\n",
                        "connected_clients:1\r\n", "# Memory\r\n", "# Persistence\r\n",
                        "loading:0\r\n", "# Stats\r\n", "keyspace_hits:2\r\n", "# Keyspace\r\n",
                        "db0:keys=1,expires=0,avg_ttl=0\r\n", "# Replication\r\n", "role:master\r\n"})
    EXPECT_NE(all.find(s), std::string::npos) << s;
  EXPECT_EQ(all.find("# Commandstats"), std::string::npos);  // not by default
  const std::string two = h.Feed(Cmd({"INFO", "KEYSPACE", "clients"}));
  EXPECT_NE(two.find("# Clients\r\n"), std::string::npos);
  EXPECT_NE(two.find("# Keyspace\r\n"), std::string::npos);
  EXPECT_EQ(two.find("# Server"), std::string::npos);
  const std::string stats = h.Feed(Cmd({"INFO", "commandstats"}));
  EXPECT_NE(stats.find("cmdstat_get:calls=2,usec="), std::string::npos) << stats;
  EXPECT_NE(stats.find(",rejected_calls=0,failed_calls=0\r\n"), std::string::npos) << stats;
  EXPECT_NE(stats.find("cmdstat_info:calls=2,"), std::string::npos) << stats;
  ASSERT_EQ(h.Feed(Cmd({"GET"}) + Cmd({"CONFIG", "RESETSTAT"})),
            "-ERR wrong number of arguments for 'get' command\r\n+OK\r\n");
  const std::string reset = h.Feed(Cmd({"INFO", "everything"}));
  EXPECT_EQ(reset.find("cmdstat_get"), std::string::npos) << reset;
  // (A command is counted once it ran: this INFO is not, the RESETSTAT is.)
  EXPECT_NE(reset.find("cmdstat_config|resetstat:calls=1,"), std::string::npos) << reset;
  EXPECT_EQ(h.Feed(Cmd({"INFO", "nosuch"})), "$0\r\n\r\n");
}

TEST(Resp, TimeAndFunctionFlush) {
  Resp h;
  const std::string t = h.Feed(Cmd({"TIME"}));
  ASSERT_EQ(t.rfind("*2\r\n$10\r\n", 0), 0u) << t;
  EXPECT_EQ(h.Feed(Cmd({"FUNCTION", "FLUSH"}) + Cmd({"FUNCTION", "FLUSH", "ASYNC"}) +
                   Cmd({"FUNCTION", "FLUSH", "x"}) + Cmd({"FUNCTION", "LIST"})),
            "+OK\r\n+OK\r\n-ERR FUNCTION FLUSH only supports SYNC|ASYNC option\r\n"
            "-ERR unknown subcommand 'LIST'. Try FUNCTION HELP.\r\n");
}

// ---- String commands

TEST(Resp, SetWithGetKeepTtlAndConditions) {
  Resp h;
  EXPECT_EQ(h.Feed(Cmd({"SET", "k", "v", "GET"}) + Cmd({"SET", "k", "w", "NX", "GET"}) +
                   Cmd({"SET", "x", "w", "XX", "GET"}) + Cmd({"SET", "k", "x", "XX", "GET"}) +
                   Cmd({"EXISTS", "x"})),
            "$-1\r\n$1\r\nv\r\n$-1\r\n$1\r\nv\r\n:0\r\n");
  EXPECT_EQ(h.Feed(Cmd({"SET", "k", "y", "EX", "100"}) + Cmd({"SET", "k", "z", "KEEPTTL"}) +
                   Cmd({"TTL", "k"}) + Cmd({"SET", "k", "z"}) + Cmd({"TTL", "k"})),
            "+OK\r\n+OK\r\n:100\r\n+OK\r\n:-1\r\n");
  // Redis's option rules: one expiry kind (repeatable), KEEPTTL alone.
  EXPECT_EQ(h.Feed(Cmd({"SET", "k", "y", "KEEPTTL", "EX", "1"}) +
                   Cmd({"SET", "k", "y", "PX", "1", "EX", "1"}) +
                   Cmd({"SET", "k", "y", "EX", "10", "EX", "20"}) + Cmd({"TTL", "k"}) +
                   Cmd({"SET", "k", "y", "EX"}) + Cmd({"SET", "k", "y", "EX", "-1"}) +
                   Cmd({"SET", "k", "y", "EX", "9223372036854775807"}) +
                   Cmd({"SET", "k", "y", "PXAT", "9223372036854775807"})),
            "-ERR syntax error\r\n-ERR syntax error\r\n+OK\r\n:20\r\n-ERR syntax error\r\n"
            "-ERR invalid expire time in 'set' command\r\n"
            "-ERR invalid expire time in 'set' command\r\n+OK\r\n");
}

TEST(Resp, SetNxSetExGetSetGetDel) {
  ExpectScript(Cmd({"SETNX", "k", "1"}) + Cmd({"SETNX", "k", "2"}) + Cmd({"GET", "k"}) +
                   Cmd({"SETEX", "e", "100", "v"}) + Cmd({"TTL", "e"}) +
                   Cmd({"PSETEX", "p", "1500", "v"}) + Cmd({"PTTL", "p"}) +
                   Cmd({"SETEX", "e", "0", "v"}) + Cmd({"PSETEX", "e", "x", "v"}) +
                   Cmd({"GETSET", "e", "w"}) + Cmd({"TTL", "e"}) + Cmd({"GETSET", "n", "v"}) +
                   Cmd({"GETDEL", "n"}) + Cmd({"GETDEL", "n"}) + Cmd({"EXISTS", "n"}),
               ":1\r\n:0\r\n$1\r\n1\r\n+OK\r\n:100\r\n+OK\r\n:1500\r\n"
               "-ERR invalid expire time in 'setex' command\r\n"
               "-ERR value is not an integer or out of range\r\n$1\r\nv\r\n:-1\r\n$-1\r\n"
               "$1\r\nv\r\n$-1\r\n:0\r\n");
}

TEST(Resp, GetEx) {
  Resp h;
  ASSERT_EQ(h.Feed(Cmd({"SET", "k", "v"})), "+OK\r\n");
  EXPECT_EQ(h.Feed(Cmd({"GETEX", "k", "EX", "50"}) + Cmd({"TTL", "k"}) +
                   Cmd({"GETEX", "k", "PERSIST"}) + Cmd({"TTL", "k"}) +
                   Cmd({"GETEX", "k", "PERSIST", "EX", "4"}) +
                   Cmd({"GETEX", "nope", "EX", "-3"}) + Cmd({"GETEX", "k", "EX", "-3"}) +
                   Cmd({"GETEX", "k"}) + Cmd({"GETEX", "k", "EXAT", "1"}) + Cmd({"EXISTS", "k"})),
            "$1\r\nv\r\n:50\r\n$1\r\nv\r\n:-1\r\n-ERR syntax error\r\n$-1\r\n"
            "-ERR invalid expire time in 'getex' command\r\n$1\r\nv\r\n$1\r\nv\r\n:0\r\n");
}

TEST(Resp, AppendStrlenSetRangeGetRange) {
  ExpectScript(Cmd({"APPEND", "a", "hello"}) + Cmd({"APPEND", "a", " world"}) +
                   Cmd({"STRLEN", "a"}) + Cmd({"STRLEN", "nope"}) +
                   Cmd({"SETRANGE", "a", "6", "WORLD"}) + Cmd({"GET", "a"}) +
                   Cmd({"SETRANGE", "b", "3", "x"}) + Cmd({"GET", "b"}) +
                   Cmd({"SETRANGE", "c", "0", ""}) + Cmd({"EXISTS", "c"}) +
                   Cmd({"SETRANGE", "a", "-1", "x"}) + Cmd({"GETRANGE", "a", "0", "4"}) +
                   Cmd({"GETRANGE", "a", "-5", "-1"}) + Cmd({"GETRANGE", "a", "-1", "-5"}) +
                   Cmd({"GETRANGE", "a", "5", "1000"}) + Cmd({"GETRANGE", "nope", "0", "1"}) +
                   Cmd({"SUBSTR", "a", "0", "2"}) + Cmd({"GETRANGE", "a", "x", "1"}),
               ":5\r\n:11\r\n:11\r\n:0\r\n:11\r\n$11\r\nhello WORLD\r\n:4\r\n$4\r\n" +
                   std::string(3, '\0') +
                   "x\r\n:0\r\n:0\r\n-ERR offset is out of range\r\n$5\r\nhello\r\n"
                   "$5\r\nWORLD\r\n$0\r\n\r\n$6\r\n WORLD\r\n$0\r\n\r\n$3\r\nhel\r\n"
                   "-ERR value is not an integer or out of range\r\n");
}

TEST(Resp, StringLimitsAreRedisErrors) {
  // 64-byte store values: 51 bytes of data at most.
  ExpectScript(Cmd({"SET", "k", std::string(50, 'x')}) + Cmd({"APPEND", "k", "yy"}) +
                   Cmd({"STRLEN", "k"}) + Cmd({"SETRANGE", "k", "51", "z"}) +
                   Cmd({"SETRANGE", "k", "50", "z"}) + Cmd({"SETBIT", "k", "408", "1"}) +
                   Cmd({"SETBIT", "k", "407", "1"}),
               "+OK\r\n-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n:50\r\n"
               "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n:51\r\n"
               "-ERR bit offset is not an integer or out of range\r\n:0\r\n",
               false, 64);
}

TEST(Resp, SetBitGetBit) {
  ExpectScript(Cmd({"SETBIT", "b", "7", "1"}) + Cmd({"SETBIT", "b", "7", "1"}) +
                   Cmd({"SETBIT", "b", "9", "1"}) + Cmd({"GET", "b"}) +
                   Cmd({"GETBIT", "b", "9"}) + Cmd({"GETBIT", "b", "8"}) +
                   Cmd({"GETBIT", "b", "1000"}) + Cmd({"GETBIT", "nope", "0"}) +
                   Cmd({"SETBIT", "b", "7", "0"}) + Cmd({"SETBIT", "b", "-1", "1"}) +
                   Cmd({"SETBIT", "b", "1", "2"}) + Cmd({"SETBIT", "z", "3", "0"}) +
                   Cmd({"GET", "z"}),
               ":0\r\n:1\r\n:0\r\n$2\r\n\x01\x40\r\n:1\r\n:0\r\n:0\r\n:0\r\n:1\r\n"
               "-ERR bit offset is not an integer or out of range\r\n"
               "-ERR bit is not an integer or out of range\r\n:0\r\n$1\r\n" +
                   std::string(1, '\0') + "\r\n");
}

TEST(Resp, IncrByFloatFormatsAsRedis) {
  ExpectScript(Cmd({"SET", "f", "10.50"}) + Cmd({"INCRBYFLOAT", "f", "0.1"}) +
                   Cmd({"INCRBYFLOAT", "f", "-5.0e3"}) + Cmd({"INCRBYFLOAT", "n", "3.0e3"}) +
                   Cmd({"INCRBYFLOAT", "f", "abc"}) + Cmd({"INCRBYFLOAT", "f", "1e5000"}) +
                   Cmd({"SET", "s", " 1"}) + Cmd({"INCRBYFLOAT", "s", "1"}) +
                   Cmd({"SET", "g", "1.5"}) + Cmd({"INCRBYFLOAT", "g", "-1.5"}) +
                   Cmd({"INCRBYFLOAT", "g", "inf"}),
               "+OK\r\n$4\r\n10.6\r\n$23\r\n-4989.39999999999999991\r\n$4\r\n3000\r\n"
               "-ERR value is not a valid float\r\n-ERR value is not a valid float\r\n+OK\r\n"
               "-ERR value is not a valid float\r\n+OK\r\n$1\r\n0\r\n"
               "-ERR increment would produce NaN or Infinity\r\n");
}

TEST(Resp, Lcs) {
  Resp h;
  ASSERT_EQ(h.Feed(Cmd({"MSET", "a", "ohmytext", "b", "mynewtext"})), "+OK\r\n");
  EXPECT_EQ(h.Feed(Cmd({"LCS", "a", "b"}) + Cmd({"LCS", "a", "b", "LEN"}) +
                   Cmd({"LCS", "a", "nope"}) + Cmd({"LCS", "a", "b", "IDX", "LEN"})),
            "$6\r\nmytext\r\n:6\r\n$0\r\n\r\n"
            "-ERR If you want both the length and indexes, please just use IDX.\r\n");
  EXPECT_EQ(h.Feed(Cmd({"LCS", "a", "b", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"})),
            "*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n"
            "$3\r\nlen\r\n:6\r\n");
  ASSERT_EQ(h.Feed(Cmd({"HELLO", "3"})).substr(0, 4), "%7\r\n");
  EXPECT_EQ(h.Feed(Cmd({"LCS", "a", "b", "IDX"})),
            "%2\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n"
            "*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n");
}

// ---- Keyspace commands

TEST(Resp, TypeTouchUnlinkPersist) {
  ExpectScript(Cmd({"MSET", "a", "1", "b", "2"}) + Cmd({"TYPE", "a"}) + Cmd({"TYPE", "x"}) +
                   Cmd({"TOUCH", "a", "b", "x"}) + Cmd({"UNLINK", "b", "x"}) +
                   Cmd({"EXPIRE", "a", "10"}) + Cmd({"PERSIST", "a"}) + Cmd({"PERSIST", "a"}) +
                   Cmd({"PERSIST", "x"}) + Cmd({"TTL", "a"}),
               "+OK\r\n+string\r\n+none\r\n:2\r\n:1\r\n:1\r\n:1\r\n:0\r\n:0\r\n:-1\r\n");
}

TEST(Resp, ExpireOptionsAndOverflow) {
  Resp h;
  ASSERT_EQ(h.Feed(Cmd({"MSET", "a", "1", "b", "2"})), "+OK\r\n");
  EXPECT_EQ(h.Feed(Cmd({"EXPIRE", "a", "100", "NX"}) + Cmd({"EXPIRE", "a", "200", "NX"}) +
                   Cmd({"EXPIRE", "a", "50", "GT"}) + Cmd({"EXPIRE", "a", "300", "GT"}) +
                   Cmd({"EXPIRE", "a", "400", "LT"}) + Cmd({"EXPIRE", "a", "100", "LT"}) +
                   Cmd({"TTL", "a"}) + Cmd({"EXPIRE", "b", "100", "XX"}) +
                   Cmd({"EXPIRE", "b", "100", "GT"}) + Cmd({"EXPIRE", "b", "100", "LT"}) +
                   Cmd({"TTL", "b"})),
            ":1\r\n:0\r\n:0\r\n:1\r\n:0\r\n:1\r\n:100\r\n:0\r\n:0\r\n:1\r\n:100\r\n");
  EXPECT_EQ(h.Feed(Cmd({"EXPIRE", "a", "1", "NX", "XX"}) + Cmd({"EXPIRE", "a", "1", "GT", "LT"}) +
                   Cmd({"EXPIRE", "a", "1", "FOO"}) +
                   Cmd({"EXPIRE", "a", "9223372036854775807"}) +
                   Cmd({"EXPIRE", "a", "-9223372036854775808"}) +
                   Cmd({"PEXPIRE", "a", "9223372036854775807"}) +
                   Cmd({"EXPIREAT", "a", "9223372036854775807"}) + Cmd({"EXISTS", "a"})),
            "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n"
            "-ERR GT and LT options at the same time are not compatible\r\n"
            "-ERR Unsupported option FOO\r\n"
            "-ERR invalid expire time in 'expire' command\r\n"
            "-ERR invalid expire time in 'expire' command\r\n"
            "-ERR invalid expire time in 'pexpire' command\r\n"
            "-ERR invalid expire time in 'expireat' command\r\n:1\r\n");
  // Absolute times, and a time in the past deletes the key.
  const std::string at = std::to_string(kStartMs / 1000 + 60);
  EXPECT_EQ(h.Feed(Cmd({"EXPIREAT", "a", at}) + Cmd({"TTL", "a"}) + Cmd({"EXPIRETIME", "a"}) +
                   Cmd({"PEXPIRETIME", "a"}) + Cmd({"PEXPIREAT", "a", "1"}) +
                   Cmd({"EXISTS", "a"}) + Cmd({"EXPIRETIME", "a"}) + Cmd({"EXPIRETIME", "b"}) +
                   Cmd({"PERSIST", "b"}) + Cmd({"PEXPIRETIME", "b"}) +
                   Cmd({"EXPIRE", "nope", "10"})),
            ":1\r\n:60\r\n:" + at + "\r\n:" + at + "000\r\n:1\r\n:0\r\n:-2\r\n:" +
                std::to_string(kStartMs / 1000 + 100) + "\r\n:1\r\n:-1\r\n:0\r\n");
}

TEST(Resp, KeysRandomKeyScanType) {
  Resp h;
  EXPECT_EQ(h.Feed(Cmd({"RANDOMKEY"}) + Cmd({"KEYS", "*"})), "$-1\r\n*0\r\n");
  ASSERT_EQ(h.Feed(Cmd({"MSET", "k1", "v", "k2", "v", "x1", "v"}) +
                   Cmd({"SET", "gone", "v", "PX", "1"})),
            "+OK\r\n+OK\r\n");
  h.now_ms += 1;
  EXPECT_EQ(h.Feed(Cmd({"KEYS", "k*"}) + Cmd({"KEYS", "*"}) + Cmd({"KEYS", "z*"})),
            "*2\r\n$2\r\nk1\r\n$2\r\nk2\r\n*3\r\n$2\r\nk1\r\n$2\r\nk2\r\n$2\r\nx1\r\n*0\r\n");
  std::set<std::string> picked;
  for (int i = 0; i < 50; ++i) picked.insert(h.Feed(Cmd({"RANDOMKEY"})));
  for (const std::string& p : picked)
    EXPECT_TRUE(p == "$2\r\nk1\r\n" || p == "$2\r\nk2\r\n" || p == "$2\r\nx1\r\n") << p;
  EXPECT_EQ(h.Feed(Cmd({"SCAN", "0", "TYPE", "string", "COUNT", "100"}) +
                   Cmd({"SCAN", "0", "TYPE", "list", "COUNT", "100"})),
            "*2\r\n$1\r\n0\r\n*3\r\n$2\r\nk1\r\n$2\r\nk2\r\n$2\r\nx1\r\n*2\r\n$1\r\n0\r\n*0\r\n");
}

TEST(Resp, ObjectAnswersHonestly) {
  ExpectScript(
      Cmd({"MSET", "i", "12345", "n", "-0", "z", "0123", "s", "abc", "r", std::string(45, 'x')}) +
          Cmd({"OBJECT", "ENCODING", "i"}) + Cmd({"OBJECT", "ENCODING", "n"}) +
          Cmd({"OBJECT", "ENCODING", "z"}) + Cmd({"OBJECT", "ENCODING", "s"}) +
          Cmd({"OBJECT", "ENCODING", "r"}) + Cmd({"OBJECT", "ENCODING", "none"}) +
          Cmd({"OBJECT", "REFCOUNT", "s"}) + Cmd({"OBJECT", "FREQ", "none"}) +
          Cmd({"OBJECT", "IDLETIME", "s"}) + Cmd({"OBJECT", "ENCODING"}),
      "+OK\r\n$3\r\nint\r\n$6\r\nembstr\r\n$6\r\nembstr\r\n$6\r\nembstr\r\n"
      "$3\r\nraw\r\n$-1\r\n:1\r\n$-1\r\n:0\r\n"
      "-ERR wrong number of arguments for 'object|encoding' command\r\n");
}

TEST(Resp, ObjectIdletimeCountsFromTheLastAccess) {
  Resp h;
  h.stats.start_ms = h.now_ms;
  EXPECT_EQ(h.Feed(Cmd({"SET", "k", "v"}) + Cmd({"SET", "j", "v"}) +
                   Cmd({"OBJECT", "IDLETIME", "k"}) + Cmd({"OBJECT", "IDLETIME", "none"})),
            "+OK\r\n+OK\r\n:0\r\n$-1\r\n");
  h.now_ms += 5'400;
  // A read is an access; TYPE, EXISTS, TTL and OBJECT are not (Redis).
  EXPECT_EQ(h.Feed(Cmd({"OBJECT", "IDLETIME", "k"}) + Cmd({"GET", "k"}) +
                   Cmd({"OBJECT", "IDLETIME", "k"}) + Cmd({"OBJECT", "IDLETIME", "j"})),
            ":5\r\n$1\r\nv\r\n:0\r\n:5\r\n");
  h.now_ms += 3'000;
  EXPECT_EQ(h.Feed(Cmd({"TYPE", "k"}) + Cmd({"EXISTS", "k"}) + Cmd({"TTL", "k"}) +
                   Cmd({"OBJECT", "ENCODING", "k"}) + Cmd({"OBJECT", "IDLETIME", "k"})),
            "+string\r\n:1\r\n:-1\r\n$6\r\nembstr\r\n:3\r\n");
  // EXEC accesses its queue's keys; a write is an access.
  EXPECT_EQ(
      h.Feed(Cmd({"MULTI"}) + Cmd({"STRLEN", "k"}) + Cmd({"EXEC"}) + Cmd({"APPEND", "j", "w"}) +
             Cmd({"OBJECT", "IDLETIME", "k"}) + Cmd({"OBJECT", "IDLETIME", "j"})),
      "+OK\r\n+QUEUED\r\n*1\r\n:1\r\n:2\r\n:0\r\n:0\r\n");
  // FREQ: Redis's answer when the policy is not LFU.
  EXPECT_EQ(h.Feed(Cmd({"OBJECT", "FREQ", "k"})).substr(0, 43),
            "-ERR An LFU maxmemory policy is not selecte");
}

// The access clock keeps the kAccessWays most recently accessed keys of a
// bucket exactly; for a key it evicted it answers a lower bound (now minus
// the newest evicted second), and for a key never accessed, the time since
// the start.
TEST(Resp, AccessClockIsExactPerBucketAndALowerBoundBeyond) {
  constexpr size_t kKeys = RespShared::kAccessWays + 2;
  std::vector<std::vector<std::string>> by_bucket(RespShared::kAccessBuckets);
  std::vector<std::string>* same = nullptr;
  for (int i = 0; same == nullptr; ++i) {
    std::string k = "key" + std::to_string(i);
    std::vector<std::string>& b = by_bucket[RespShared::AccessKeyOf(0, k).bucket];
    b.push_back(std::move(k));
    if (b.size() == kKeys) same = &b;
  }
  RespShared clock;
  const std::vector<std::string>& k = *same;
  constexpr int64_t kStart = 1'000'000'000'000;  // ms
  auto at = [&](int64_t s) { return kStart + s * 1000; };
  EXPECT_EQ(clock.IdleSeconds(0, k[0], at(50), kStart), 50);  // never accessed
  for (size_t i = 0; i < RespShared::kAccessWays; ++i) clock.Touch(0, k[i], at(10 + int64_t(i)));
  clock.Touch(0, k[1], at(20));  // k[0] is now the least recently accessed
  for (size_t i = 1; i < RespShared::kAccessWays; ++i)
    EXPECT_EQ(clock.IdleSeconds(0, k[i], at(30), kStart), i == 1 ? 10 : 30 - (10 + int64_t(i)));
  // k[7] evicts k[0] (second 10), k[8] then evicts k[2] (second 12).
  clock.Touch(0, k[kKeys - 2], at(25));
  EXPECT_EQ(clock.IdleSeconds(0, k[0], at(30), kStart), 20);  // its time: the floor
  clock.Touch(0, k[kKeys - 1], at(26));
  EXPECT_EQ(clock.IdleSeconds(0, k[0], at(30), kStart), 18);  // at least 18 (truly 20)
  EXPECT_EQ(clock.IdleSeconds(0, k[2], at(30), kStart), 18);
  EXPECT_EQ(clock.IdleSeconds(0, k[kKeys - 1], at(30), kStart), 4);
  EXPECT_EQ(clock.IdleSeconds(0, k[1], at(30), kStart), 10);
  // Another database's key of the same name is another key.
  EXPECT_EQ(clock.IdleSeconds(1, k[1], at(30), kStart), 30);
}

TEST(Resp, ReadModifyWritesAreAtomicPerKey) {
  // Two connections interleave APPEND on one key through one store; every
  // append must land (Items::Edit retries on a concurrent change).
  Resp h;
  std::vector<std::thread> threads;
  RespShared& shared = h.protocol.shared();
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h, &shared] {
      RespProtocol p(h.items, shared);
      for (int i = 0; i < 200; ++i) {
        std::string out;
        p.Consume(Cmd({"APPEND", "k", "x"}) + Cmd({"INCRBYFLOAT", "f", "0.5"}), &out);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(h.Feed(Cmd({"STRLEN", "k"}) + Cmd({"GET", "f"})), ":800\r\n$3\r\n400\r\n");
}

}  // namespace
}  // namespace pmindex::server::testing
