// SORT and SORT_RO (resp_sort_commands.cc) over databases on the map
// store: numeric and ALPHA order of lists, sets and sorted sets, LIMIT,
// BY (string keys, hash fields, nosort), GET, STORE, the errors Redis
// gives, WATCH of the destination, the keys COMMAND GETKEYS and cluster
// routing see, and the refusals of cluster mode.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/cluster.h"
#include "server/databases.h"
#include "server/keyspace.h"
#include "server/resp_protocol.h"
#include "tests/server/map_store.h"
#include "tests/server/protocol_harness.h"

namespace pmindex::server::testing {
namespace {

std::string Cmd(const std::vector<std::string>& args) {
  std::string s = "*";
  s.append(std::to_string(args.size())).append("\r\n");
  for (const std::string& a : args)
    s.append("$").append(std::to_string(a.size())).append("\r\n").append(a).append("\r\n");
  return s;
}

// A RESP2 array of bulk strings ("" in `nulls` positions: a null bulk).
std::string Bulks(const std::vector<std::string>& v, const std::vector<size_t>& nulls = {}) {
  std::string s = "*";
  s.append(std::to_string(v.size())).append("\r\n");
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::find(nulls.begin(), nulls.end(), i) != nulls.end()) {
      s.append("$-1\r\n");
      continue;
    }
    s.append("$").append(std::to_string(v[i].size())).append("\r\n").append(v[i]).append("\r\n");
  }
  return s;
}

std::string Int(int64_t n) {
  std::string s = ":";
  s.append(std::to_string(n)).append("\r\n");
  return s;
}

// 16 databases over the map store; optionally node A (slots 0-8191) of a
// two-node cluster.
class Server {
 public:
  explicit Server(bool cluster_mode = false)
      : cluster_(std::make_shared<const ClusterMap>(ClusterMap::Parse(Map()).value()),
                 std::string(40, 'a'), ""),
        shared_(RespSettings{.cluster = cluster_mode ? &cluster_ : nullptr}) {
    dbs_ = std::move(Databases::Open(map_, 16).value());
    keyspace_ = std::make_unique<Keyspace>(*dbs_, stats_, [this] { return now_ms; });
    protocol = Connect();
  }
  std::unique_ptr<RespProtocol> Connect() {
    return std::make_unique<RespProtocol>(keyspace_->db(0), shared_);
  }
  std::string Feed(const std::vector<std::string>& args) { return Feed(*protocol, args); }
  static std::string Feed(RespProtocol& p, const std::vector<std::string>& args) {
    std::string in = Cmd(args), all;
    for (;;) {
      std::string out;
      in.erase(0, p.Consume(in, &out));
      if (out.empty()) return all;
      all += out;
    }
  }

  int64_t now_ms = kStartMs;

 private:
  static std::string Map() {
    std::string m = "epoch 1\nnode ";
    m.append(40, 'a').append(" 127.0.0.1:7001 0-8191\nnode ");
    m.append(40, 'b').append(" 127.0.0.1:7002 8192-16383\n");
    return m;
  }
  Cluster cluster_;
  RespShared shared_;
  MapStore map_;
  Stats stats_;
  std::unique_ptr<Databases> dbs_;
  std::unique_ptr<Keyspace> keyspace_;

 public:
  // Declared last: destroyed before what it uses.
  std::unique_ptr<RespProtocol> protocol;
};

TEST(Sort, NumbersAlphaAndDescOfEveryType) {
  Server s;
  s.Feed({"RPUSH", "l", "3", "-1.5", "10", "2", "1e1", "0x10"});
  s.Feed({"SADD", "s", "3", "-1.5", "10", "2"});
  s.Feed({"ZADD", "z", "1", "10", "2", "3", "3", "-1.5", "4", "2"});
  // Numbers; equal numbers ("10", "1e1") by their bytes. strtod reads hex.
  EXPECT_EQ(s.Feed({"SORT", "l"}), Bulks({"-1.5", "2", "3", "10", "1e1", "0x10"}));
  EXPECT_EQ(s.Feed({"SORT", "l", "DESC"}), Bulks({"0x10", "1e1", "10", "3", "2", "-1.5"}));
  EXPECT_EQ(s.Feed({"SORT", "s"}), Bulks({"-1.5", "2", "3", "10"}));
  EXPECT_EQ(s.Feed({"SORT", "z", "desc"}), Bulks({"10", "3", "2", "-1.5"}));
  // ALPHA: bytes.
  EXPECT_EQ(s.Feed({"SORT", "s", "ALPHA"}), Bulks({"-1.5", "10", "2", "3"}));
  EXPECT_EQ(s.Feed({"SORT_RO", "z", "ALPHA", "DESC"}), Bulks({"3", "2", "10", "-1.5"}));
  // ASC after DESC: the last one counts.
  EXPECT_EQ(s.Feed({"SORT", "s", "DESC", "ASC"}), Bulks({"-1.5", "2", "3", "10"}));
  // A missing key is an empty list; nothing is stored for it.
  EXPECT_EQ(s.Feed({"SORT", "nokey"}), "*0\r\n");
  EXPECT_EQ(s.Feed({"SORT", "nokey", "STORE", "d"}), Int(0));
  EXPECT_EQ(s.Feed({"EXISTS", "d"}), Int(0));
}

TEST(Sort, LimitIsClampedAsRedisDoes) {
  Server s;
  s.Feed({"RPUSH", "l", "5", "1", "4", "2", "3"});
  EXPECT_EQ(s.Feed({"SORT", "l", "LIMIT", "1", "2"}), Bulks({"2", "3"}));
  EXPECT_EQ(s.Feed({"SORT", "l", "LIMIT", "-5", "2"}), Bulks({"1", "2"}));
  EXPECT_EQ(s.Feed({"SORT", "l", "LIMIT", "3", "-1"}), Bulks({"4", "5"}));
  EXPECT_EQ(s.Feed({"SORT", "l", "LIMIT", "3", "100"}), Bulks({"4", "5"}));
  EXPECT_EQ(s.Feed({"SORT", "l", "LIMIT", "5", "1"}), "*0\r\n");
  EXPECT_EQ(s.Feed({"SORT", "l", "LIMIT", "0", "0"}), "*0\r\n");
  EXPECT_EQ(s.Feed({"SORT", "l", "DESC", "LIMIT", "0", "2"}), Bulks({"5", "4"}));
  EXPECT_EQ(s.Feed({"SORT", "l", "LIMIT", "1", "x"}),
            "-ERR value is not an integer or out of range\r\n");
  // LIMIT needs two arguments.
  EXPECT_EQ(s.Feed({"SORT", "l", "LIMIT", "1"}), "-ERR syntax error\r\n");
}

TEST(Sort, ByStringKeysAndHashFields) {
  Server s;
  s.Feed({"RPUSH", "l", "a", "b", "c", "d"});
  s.Feed({"MSET", "w_a", "3", "w_b", "1", "w_c", "2"});  // w_d is missing: 0
  EXPECT_EQ(s.Feed({"SORT", "l", "BY", "w_*"}), Bulks({"d", "b", "c", "a"}));
  EXPECT_EQ(s.Feed({"SORT", "l", "BY", "w_*", "DESC"}), Bulks({"a", "c", "b", "d"}));
  // ALPHA BY: a missing value sorts first.
  s.Feed({"MSET", "t_a", "x", "t_b", "z", "t_c", "y"});
  EXPECT_EQ(s.Feed({"SORT", "l", "BY", "t_*", "ALPHA"}), Bulks({"d", "a", "c", "b"}));
  // A hash field, after the '*'; a key of another type counts as missing.
  s.Feed({"HSET", "h_a", "f", "9"});
  s.Feed({"HSET", "h_b", "f", "-4"});
  s.Feed({"HSET", "h_c", "g", "100"});  // no field f: 0
  s.Feed({"SADD", "h_d", "f"});         // a set: missing
  EXPECT_EQ(s.Feed({"SORT", "l", "BY", "h_*->f"}), Bulks({"b", "c", "d", "a"}));
  // The sort weight must be a number.
  s.Feed({"SET", "w_d", "nan"});
  EXPECT_EQ(s.Feed({"SORT", "l", "BY", "w_*"}),
            "-ERR One or more scores can't be converted into double\r\n");
  s.Feed({"SET", "w_d", "1x"});
  EXPECT_EQ(s.Feed({"SORT", "l", "BY", "w_*", "STORE", "dst"}),
            "-ERR One or more scores can't be converted into double\r\n");
  EXPECT_EQ(s.Feed({"EXISTS", "dst"}), Int(0));
  s.Feed({"RPUSH", "words", "b", "a"});
  EXPECT_EQ(s.Feed({"SORT", "words"}),
            "-ERR One or more scores can't be converted into double\r\n");
}

TEST(Sort, ByNosortKeepsEachTypesOwnOrder) {
  Server s;
  s.Feed({"RPUSH", "l", "c", "a", "d", "b"});
  EXPECT_EQ(s.Feed({"SORT", "l", "BY", "nosort"}), Bulks({"c", "a", "d", "b"}));
  EXPECT_EQ(s.Feed({"SORT", "l", "BY", "nosort", "DESC"}), Bulks({"b", "d", "a", "c"}));
  EXPECT_EQ(s.Feed({"SORT", "l", "BY", "nosort", "LIMIT", "1", "2"}), Bulks({"a", "d"}));
  EXPECT_EQ(s.Feed({"SORT", "l", "BY", "nosort", "DESC", "LIMIT", "1", "2"}), Bulks({"d", "a"}));
  // A sorted set: score order (not member order).
  s.Feed({"ZADD", "z", "3", "a", "1", "c", "2", "b"});
  EXPECT_EQ(s.Feed({"SORT", "z", "BY", "nosort"}), Bulks({"c", "b", "a"}));
  EXPECT_EQ(s.Feed({"SORT", "z", "BY", "nosort", "DESC", "LIMIT", "0", "2"}), Bulks({"a", "b"}));
  // Non-numbers are fine when nothing is sorted.
  EXPECT_EQ(s.Feed({"SORT", "z", "BY", "nosort", "GET", "#"}), Bulks({"c", "b", "a"}));
  // A set with STORE is sorted ALPHA (Redis's rule, for a deterministic
  // result).
  s.Feed({"SADD", "set", "b", "10", "a", "9"});
  EXPECT_EQ(s.Feed({"SORT", "set", "BY", "nosort", "STORE", "d"}), Int(4));
  EXPECT_EQ(s.Feed({"LRANGE", "d", "0", "-1"}), Bulks({"10", "9", "a", "b"}));
}

TEST(Sort, GetPatterns) {
  Server s;
  s.Feed({"RPUSH", "l", "2", "1", "3"});
  s.Feed({"MSET", "n_1", "one", "n_2", "two"});
  s.Feed({"HSET", "o_1", "name", "x1"});
  s.Feed({"HSET", "o_3", "name", "x3"});
  EXPECT_EQ(s.Feed({"SORT", "l", "GET", "n_*"}), Bulks({"one", "two", ""}, {2}));
  EXPECT_EQ(s.Feed({"SORT", "l", "GET", "#", "GET", "n_*", "GET", "o_*->name"}),
            Bulks({"1", "one", "x1", "2", "two", "", "3", "", "x3"}, {5, 7}));
  // A pattern without '*' names no key: null for every element.
  EXPECT_EQ(s.Feed({"SORT", "l", "GET", "n_1", "LIMIT", "0", "1"}), Bulks({""}, {0}));
  // "->" with nothing after it is part of the key name.
  s.Feed({"SET", "k_1->", "v"});
  EXPECT_EQ(s.Feed({"SORT", "l", "GET", "k_*->", "LIMIT", "0", "1"}), Bulks({"v"}));
  // RESP3: the nulls are RESP3 nulls.
  s.Feed({"HELLO", "3"});
  EXPECT_EQ(s.Feed({"SORT", "l", "GET", "n_*", "DESC"}), "*3\r\n_\r\n$3\r\ntwo\r\n$3\r\none\r\n");
}

TEST(Sort, StoreReplacesTheDestinationWithAList) {
  Server s;
  s.Feed({"SADD", "s", "3", "1", "2"});
  s.Feed({"SET", "dst", "a string"});
  EXPECT_EQ(s.Feed({"SORT", "s", "STORE", "dst"}), Int(3));
  EXPECT_EQ(s.Feed({"TYPE", "dst"}), "+list\r\n");
  EXPECT_EQ(s.Feed({"LRANGE", "dst", "0", "-1"}), Bulks({"1", "2", "3"}));
  // A list destination is replaced, not appended to; GET's nulls are
  // stored as empty strings.
  s.Feed({"SET", "v_2", "two"});
  EXPECT_EQ(s.Feed({"SORT", "s", "GET", "#", "GET", "v_*", "STORE", "dst"}), Int(6));
  EXPECT_EQ(s.Feed({"LRANGE", "dst", "0", "-1"}), Bulks({"1", "", "2", "two", "3", ""}));
  // The source may be the destination.
  EXPECT_EQ(s.Feed({"SORT", "dst", "ALPHA", "DESC", "LIMIT", "0", "2", "STORE", "dst"}), Int(2));
  EXPECT_EQ(s.Feed({"LRANGE", "dst", "0", "-1"}), Bulks({"two", "3"}));
  // An empty result deletes the destination.
  EXPECT_EQ(s.Feed({"SORT", "nokey", "STORE", "dst"}), Int(0));
  EXPECT_EQ(s.Feed({"EXISTS", "dst"}), Int(0));
  // The last STORE counts.
  EXPECT_EQ(s.Feed({"SORT", "s", "STORE", "d1", "STORE", "d2"}), Int(3));
  EXPECT_EQ(s.Feed({"EXISTS", "d1", "d2"}), Int(1));
  EXPECT_EQ(s.Feed({"LLEN", "d2"}), Int(3));
  // Inside MULTI/EXEC.
  EXPECT_EQ(s.Feed({"MULTI"}), "+OK\r\n");
  s.Feed({"SADD", "s", "0"});
  s.Feed({"SORT", "s", "DESC", "STORE", "d3"});
  EXPECT_EQ(s.Feed({"EXEC"}), "*2\r\n:1\r\n:4\r\n");
  EXPECT_EQ(s.Feed({"LRANGE", "d3", "0", "-1"}), Bulks({"3", "2", "1", "0"}));
}

TEST(Sort, ErrorsAsRedis) {
  Server s;
  s.Feed({"SET", "str", "1"});
  s.Feed({"HSET", "h", "f", "1"});
  s.Feed({"RPUSH", "l", "1"});
  const std::string wrongtype =
      "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
  EXPECT_EQ(s.Feed({"SORT", "str"}), wrongtype);
  EXPECT_EQ(s.Feed({"SORT", "h"}), wrongtype);
  EXPECT_EQ(s.Feed({"SORT", "l", "BOGUS"}), "-ERR syntax error\r\n");
  // Options are checked before the key's type.
  EXPECT_EQ(s.Feed({"SORT", "str", "BOGUS"}), "-ERR syntax error\r\n");
  EXPECT_EQ(s.Feed({"SORT", "l", "STORE"}), "-ERR syntax error\r\n");
  EXPECT_EQ(s.Feed({"SORT_RO", "l", "STORE", "d"}), "-ERR syntax error\r\n");
  EXPECT_EQ(s.Feed({"SORT"}), "-ERR wrong number of arguments for 'sort' command\r\n");
  // A failed STORE leaves the destination as it was.
  s.Feed({"SET", "dst", "kept"});
  s.Feed({"RPUSH", "bad", "x"});
  EXPECT_EQ(s.Feed({"SORT", "bad", "STORE", "dst"}),
            "-ERR One or more scores can't be converted into double\r\n");
  EXPECT_EQ(s.Feed({"GET", "dst"}), "$4\r\nkept\r\n");
}

TEST(Sort, WatchedDestinationFailsExecEvenWhenTheResultIsEmpty) {
  // Redis's suite: "EXEC fail on WATCHed key modified by SORT with STORE
  // even if the result is empty".
  Server s;
  s.Feed({"RPUSH", "foo", "bar"});
  EXPECT_EQ(s.Feed({"WATCH", "foo"}), "+OK\r\n");
  auto other = s.Connect();
  EXPECT_EQ(Server::Feed(*other, {"SORT", "emptylist", "STORE", "foo"}), Int(0));
  s.Feed({"MULTI"});
  s.Feed({"PING"});
  EXPECT_EQ(s.Feed({"EXEC"}), "*-1\r\n");
  // And a non-empty result does too.
  s.Feed({"RPUSH", "src", "1"});
  s.Feed({"WATCH", "foo"});
  EXPECT_EQ(Server::Feed(*other, {"SORT", "src", "STORE", "foo"}), Int(1));
  s.Feed({"MULTI"});
  s.Feed({"PING"});
  EXPECT_EQ(s.Feed({"EXEC"}), "*-1\r\n");
}

TEST(Sort, StoreKeyIsAKeyOfTheCommand) {
  Server s;
  EXPECT_EQ(s.Feed({"COMMAND", "GETKEYS", "SORT", "src", "LIMIT", "0", "1", "GET", "store", "BY",
                    "store", "STORE", "dst"}),
            Bulks({"src", "dst"}));
  EXPECT_EQ(s.Feed({"COMMAND", "GETKEYS", "SORT_RO", "src", "STORE", "dst"}), Bulks({"src"}));
  // The destination's key is checked as any key is.
  EXPECT_EQ(s.Feed({"SORT", "src", "STORE", ""}).rfind("-ERR invalid key length", 0), 0u);
}

TEST(Sort, ClusterModeRefusesPatternsAndRoutesTheDestination) {
  Server s(/*cluster_mode=*/true);
  // Keys of one slot of this node (the hash tag {a} is slot 15495, of
  // node b; {b} is 3300, of node a).
  s.Feed({"RPUSH", "{b}l", "2", "1"});
  EXPECT_EQ(s.Feed({"SORT", "{b}l"}), Bulks({"1", "2"}));
  EXPECT_EQ(s.Feed({"SORT", "{b}l", "BY", "{b}w_*"}),
            "-ERR BY option of SORT denied in Cluster mode.\r\n");
  EXPECT_EQ(s.Feed({"SORT", "{b}l", "GET", "#"}),
            "-ERR GET option of SORT denied in Cluster mode.\r\n");
  // BY without '*' sorts nothing and names no key: allowed.
  EXPECT_EQ(s.Feed({"SORT", "{b}l", "BY", "nosort"}), Bulks({"2", "1"}));
  EXPECT_EQ(s.Feed({"SORT", "{b}l", "STORE", "{b}d"}), Int(2));
  EXPECT_EQ(s.Feed({"SORT", "{b}l", "STORE", "{c}d"}),
            "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
}

}  // namespace
}  // namespace pmindex::server::testing
