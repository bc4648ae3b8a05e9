// The RESP handler against the test-only MapStore: exact replies, binary
// keys and values, SCAN cursors, protocol errors; each script also fed cut
// at every byte position.
#include "server/resp_protocol.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <set>
#include <string>

#include "tests/server/protocol_harness.h"

namespace pmindex::server::testing {
namespace {

using Resp = Harness<RespProtocol>;

// A request as clients send it: an array of bulk strings.
std::string Cmd(std::initializer_list<std::string_view> args) {
  // (Appends, not "literal" + std::string: GCC 12 warns about the latter
  // with -Wrestrict, wrongly.)
  std::string s = "*";
  s.append(std::to_string(args.size())).append("\r\n");
  for (std::string_view a : args)
    s.append("$").append(std::to_string(a.size())).append("\r\n").append(a).append("\r\n");
  return s;
}

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

TEST(Resp, ErrorsKeepTheConnection) {
  ExpectScript(Cmd({"NOSUCH", "a"}) + Cmd({"GET"}) + Cmd({"get", "a", "b"}) + Cmd({"SELECT", "1"}) +
                   Cmd({"SELECT", "0"}) + Cmd({"CLIENT", "SETINFO", "LIB-NAME", "x"}) +
                   Cmd({"COMMAND", "DOCS"}) + "*0\r\n" + Cmd({"GET", "a"}),
               "-ERR unknown command 'NOSUCH', with args beginning with: 'a' \r\n"
               "-ERR wrong number of arguments for 'get' command\r\n"
               "-ERR wrong number of arguments for 'get' command\r\n"
               "-ERR DB index is out of range\r\n+OK\r\n+OK\r\n*0\r\n$-1\r\n");
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
  ExpectScript("*1\r\n$65\r\n", "-ERR Protocol error: invalid bulk length\r\n", true, 64);
  ExpectScript("*z\r\n", "-ERR Protocol error: invalid multibulk length\r\n", true);
  ExpectScript("*99999999\r\n", "-ERR Protocol error: invalid multibulk length\r\n", true);
  ExpectScript("*1\r\n$1\r\nab\r\n", "-ERR Protocol error: expected CRLF after a bulk string\r\n",
               true);
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
  EXPECT_NE(info.find("db0:keys=2\r\n"), std::string::npos) << info;
  EXPECT_EQ(h.Feed(Cmd({"FLUSHDB"}) + Cmd({"DBSIZE"}) + Cmd({"FLUSHALL", "ASYNC"})),
            "+OK\r\n:0\r\n+OK\r\n");
}

TEST(Resp, SharesItemsWithMemcached) {
  // One store, both protocols: an item stored with flags and expiry over
  // memcached reads over RESP as its data.
  Resp h;
  std::string enc;
  item_codec::Encode("hello", 42, kStartMs + 5000, &enc);
  ASSERT_TRUE(h.store.Put("k", enc).ok());
  EXPECT_EQ(h.Feed(Cmd({"GET", "k"}) + Cmd({"TTL", "k"})), "$5\r\nhello\r\n:5\r\n");
}

}  // namespace
}  // namespace pmindex::server::testing
