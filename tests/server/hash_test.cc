// RESP hashes and the collection layer under them (collections.h,
// resp_hash_commands.cc): the commands against a std::map model over the
// map store and over KvStore, WRONGTYPE across types, removal of emptied
// hashes, DEL of a big hash and its reclaim by the background step, the
// keyspace commands on hashes (RENAME, COPY, EXPIRE, SCAN TYPE...),
// MULTI/EXEC and WATCH, RESP3 replies, a KvStore reopen, and the
// consistency check on a damaged store.
#include <gtest/gtest.h>

#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "server/collections.h"
#include "server/databases.h"
#include "server/keyspace.h"
#include "server/maintenance.h"
#include "server/memcache_protocol.h"
#include "server/resp_protocol.h"
#include "tests/server/map_store.h"
#include "tests/server/protocol_harness.h"
#include "tests/server/resp_encode.h"
#include "tests/support/status.h"
#ifdef PMINDEX_SERVER_TEST_KV
#include "pmindex/kv.h"
#include "server/kv_backed_store.h"
#include "tests/support/temp_files.h"
#endif

namespace pmindex::server::testing {
namespace {

// prefix followed by n in decimal (built by append: GCC 12's -Wrestrict
// misfires on `"literal" + std::to_string(n)`).
template <class N>
std::string Num(std::string_view prefix, N n) {
  std::string s(prefix);
  s.append(std::to_string(n));
  return s;
}

std::string Bulk(std::string_view s) {
  return Num("$", s.size()) + "\r\n" + std::string(s) + "\r\n";
}
std::string Int(int64_t n) { return Num(":", n) + "\r\n"; }
constexpr std::string_view kWrongTypeReply =
    "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

// 16 databases over one store, and connections to them.
class Server {
 public:
  explicit Server(Store* base = nullptr) : base_(base != nullptr ? base : &map_) {
    auto d = Databases::Open(*base_, 16);
    PMINDEX_EXPECT_OK(d);
    dbs = std::move(d.value());
    keyspace = std::make_unique<Keyspace>(*dbs, stats, [this] { return now_ms; });
  }

  class Conn {
   public:
    explicit Conn(Server& s) : protocol_(s.keyspace->db(0), s.shared_) {}
    std::string Feed(std::string_view bytes) {
      buffer_.append(bytes);
      std::string all;
      for (;;) {
        std::string out;
        const size_t used = protocol_.Consume(buffer_, &out);
        buffer_.erase(0, used);
        if (out.empty()) return all;
        all += out;
      }
    }

   private:
    RespProtocol protocol_;
    std::string buffer_;
  };

  // Records of the base store whose 2-byte region field (after the
  // namespace) is in [lo, hi), in every namespace but 0.
  size_t CountRegion(uint16_t lo, uint16_t hi) {
    std::vector<std::pair<std::string, std::string>> all;
    base_->Range("", std::nullopt, SIZE_MAX, &all);
    size_t n = 0;
    for (const auto& [k, v] : all) {
      if (k.size() < 6 || k.compare(0, 4, std::string(4, '\0')) == 0) continue;
      const uint16_t r = static_cast<uint16_t>((static_cast<uint8_t>(k[4]) << 8) |
                                               static_cast<uint8_t>(k[5]));
      n += r >= lo && r < hi;
    }
    return n;
  }
  size_t Elements() { return CountRegion(0x4000, 0x8000); }
  size_t GarbageRecords() { return CountRegion(0x8000, 0x8001); }

  Store& base() { return *base_; }

  int64_t now_ms = kStartMs;
  Stats stats;
  std::unique_ptr<Databases> dbs;
  std::unique_ptr<Keyspace> keyspace;

 private:
  MapStore map_;
  Store* base_;
  RespShared shared_;
};

// The RESP2 reply of HGETALL for `m`.
std::string FlatMap(const std::map<std::string, std::string>& m) {
  std::string s = Num("*", m.size() * 2) + "\r\n";
  for (const auto& [f, v] : m) s += Bulk(f) + Bulk(v);
  return s;
}

// Random HSET/HDEL/HINCRBY/HSETNX against a model, checked field by field
// and whole.
void RunModel(Server& s) {
  Server::Conn c(s);
  std::mt19937_64 rng(7);
  std::map<std::string, std::map<std::string, std::string>> model;
  auto field = [&] { return Num("f", rng() % 40); };
  for (int step = 0; step < 1500; ++step) {
    const std::string key = Num("h", rng() % 4);
    auto& h = model[key];
    switch (rng() % 5) {
      case 0:
      case 1: {
        std::vector<std::string> args{"HSET", key};
        std::map<std::string, std::string> set;
        for (int i = 0, n = 1 + static_cast<int>(rng() % 3); i < n; ++i) {
          const std::string f = field(), v = Num("v", rng() % 1000);
          args.push_back(f);
          args.push_back(v);
          set[f] = v;
        }
        int64_t added = 0;
        for (const auto& [f, v] : set) added += h.count(f) == 0;
        for (const auto& [f, v] : set) h[f] = v;
        ASSERT_EQ(c.Feed(Cmd(args)), Int(added)) << step;
        break;
      }
      case 2: {
        const std::string f1 = field(), f2 = field();
        int64_t removed = static_cast<int64_t>(h.erase(f1));
        if (f2 != f1) removed += static_cast<int64_t>(h.erase(f2));
        ASSERT_EQ(c.Feed(Cmd({"HDEL", key, f1, f2})), Int(removed)) << step;
        break;
      }
      case 3: {
        const std::string f = Num("n", rng() % 5);
        const int64_t by = static_cast<int64_t>(rng() % 21) - 10;
        const int64_t now = (h.count(f) ? std::stoll(h[f]) : 0) + by;
        h[f] = std::to_string(now);
        ASSERT_EQ(c.Feed(Cmd({"HINCRBY", key, f, std::to_string(by)})), Int(now)) << step;
        break;
      }
      case 4: {
        const std::string f = field();
        const bool fresh = h.count(f) == 0;
        if (fresh) h[f] = "nx";
        ASSERT_EQ(c.Feed(Cmd({"HSETNX", key, f, "nx"})), Int(fresh ? 1 : 0)) << step;
        break;
      }
    }
    const std::string f = field();
    ASSERT_EQ(c.Feed(Cmd({"HGET", key, f})), h.count(f) ? Bulk(h[f]) : "$-1\r\n") << step;
    ASSERT_EQ(c.Feed(Cmd({"HLEN", key})), Int(static_cast<int64_t>(h.size()))) << step;
    ASSERT_EQ(c.Feed(Cmd({"EXISTS", key})), Int(h.empty() ? 0 : 1)) << step;
  }
  for (auto& [key, h] : model) {
    EXPECT_EQ(c.Feed(Cmd({"HGETALL", key})), FlatMap(h));
    EXPECT_EQ(c.Feed(Cmd({"TYPE", key})), h.empty() ? "+none\r\n" : "+hash\r\n");
    std::string keys = Num("*", h.size()) + "\r\n", vals = keys;
    for (const auto& [f, v] : h) keys += Bulk(f), vals += Bulk(v);
    EXPECT_EQ(c.Feed(Cmd({"HKEYS", key})), keys);
    EXPECT_EQ(c.Feed(Cmd({"HVALS", key})), vals);
  }
  const CollectionReport report = VerifyCollections(*s.dbs);
  EXPECT_TRUE(report.problems.empty()) << report.problems.front();
}

TEST(Hash, CommandsAgainstAModelOverTheMapStore) {
  Server s;
  RunModel(s);
}

#ifdef PMINDEX_SERVER_TEST_KV
TEST(Hash, CommandsAgainstAModelOverKvStore) {
  auto kv = KvStore::CreateInMemory("lbtree");
  PMINDEX_ASSERT_OK(kv);
  KvBackedStore store(*kv.value());
  Server s(&store);
  RunModel(s);
}

TEST(Hash, KvStoreReopenKeepsHashes) {
  pmindex::testing::TempDir dir;
  const std::string path = dir.path("hash.pool");
  DbOptions small;
  small.size = 8ull << 20;
  small.max_size = 64ull << 20;
  for (int round = 0; round < 2; ++round) {
    auto kv = round == 0 ? KvStore::Create(path, "lbtree", "", small) : KvStore::Open(path);
    PMINDEX_ASSERT_OK(kv);
    {
      KvBackedStore store(*kv.value());
      Server s(&store);
      Server::Conn c(s);
      if (round == 0) {
        ASSERT_EQ(c.Feed(Cmd({"HSET", "h", "a", "1", "b", "2"})), Int(2));
        ASSERT_EQ(c.Feed(Cmd({"SELECT", "3"}) + Cmd({"HSET", "g", "x", "y"})), "+OK\r\n" + Int(1));
        ASSERT_EQ(c.Feed(Cmd({"HSET", "gone", "x", "y"}) + Cmd({"DEL", "gone"})), Int(1) + Int(1));
      } else {
        EXPECT_EQ(c.Feed(Cmd({"HGETALL", "h"})), "*4\r\n" + Bulk("a") + Bulk("1") + Bulk("b") +
                                                     Bulk("2"));
        EXPECT_EQ(c.Feed(Cmd({"SELECT", "3"}) + Cmd({"HGET", "g", "x"})), "+OK\r\n" + Bulk("y"));
        EXPECT_EQ(c.Feed(Cmd({"EXISTS", "gone"})), Int(0));
        // New generations never reuse one handed out before the reopen.
        ASSERT_EQ(c.Feed(Cmd({"HSET", "gone", "z", "1"}) + Cmd({"HGETALL", "gone"})),
                  Int(1) + "*2\r\n" + Bulk("z") + Bulk("1"));
        const CollectionReport r = VerifyCollections(*s.dbs);
        EXPECT_TRUE(r.problems.empty()) << r.problems.front();
        EXPECT_EQ(r.collections, 3u);
      }
    }
    PMINDEX_ASSERT_OK(kv.value()->Close());
  }
}
#endif

TEST(Hash, WrongTypeAcrossStringsAndHashes) {
  Server s;
  Server::Conn c(s);
  ASSERT_EQ(c.Feed(Cmd({"SET", "s", "1"}) + Cmd({"HSET", "h", "f", "v"})), "+OK\r\n" + Int(1));
  for (const auto& cmd : std::vector<std::vector<std::string>>{
           {"HSET", "s", "f", "v"}, {"HGET", "s", "f"}, {"HGETALL", "s"}, {"HDEL", "s", "f"},
           {"HLEN", "s"}, {"HINCRBY", "s", "f", "1"}, {"HSCAN", "s", "0"}, {"GET", "h"},
           {"INCR", "h"}, {"APPEND", "h", "x"}, {"GETRANGE", "h", "0", "1"}, {"STRLEN", "h"},
           {"GETSET", "h", "x"}, {"GETDEL", "h"}, {"SET", "h", "x", "GET"}}) {
    EXPECT_EQ(c.Feed(Cmd(cmd)), kWrongTypeReply) << cmd[0];
  }
  // Redis's MGET answers nil for a key of another type; SETNX finds it.
  EXPECT_EQ(c.Feed(Cmd({"MGET", "h", "s"})), "*2\r\n$-1\r\n" + Bulk("1"));
  EXPECT_EQ(c.Feed(Cmd({"SETNX", "h", "x"})), Int(0));
  EXPECT_EQ(c.Feed(Cmd({"SET", "h", "x", "NX"})), "$-1\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HGET", "h", "f"})), Bulk("v"));
  // SET replaces a hash whole; its elements are garbage-listed at once.
  EXPECT_EQ(s.Elements(), 1u);
  EXPECT_EQ(c.Feed(Cmd({"SET", "h", "str"})), "+OK\r\n");
  EXPECT_EQ(c.Feed(Cmd({"TYPE", "h"}) + Cmd({"GET", "h"})), "+string\r\n" + Bulk("str"));
  EXPECT_EQ(s.GarbageRecords(), 1u);
  // MSET too, and SET XX.
  ASSERT_EQ(c.Feed(Cmd({"HSET", "h2", "f", "v"}) + Cmd({"HSET", "h3", "f", "v"})), Int(1) + Int(1));
  EXPECT_EQ(c.Feed(Cmd({"MSET", "h2", "a", "x", "b"}) + Cmd({"SET", "h3", "c", "XX"})),
            "+OK\r\n+OK\r\n");
  EXPECT_EQ(c.Feed(Cmd({"MGET", "h2", "h3"})), "*2\r\n" + Bulk("a") + Bulk("c"));
  EXPECT_EQ(s.GarbageRecords(), 3u);
  while (s.dbs->ReclaimGarbageStep(8) > 0) {
  }
  EXPECT_EQ(s.Elements(), 0u);
  EXPECT_EQ(s.GarbageRecords(), 0u);
}

TEST(Hash, EmptiedHashIsRemoved) {
  Server s;
  Server::Conn c(s);
  ASSERT_EQ(c.Feed(Cmd({"HSET", "h", "a", "1", "b", "2"})), Int(2));
  EXPECT_EQ(c.Feed(Cmd({"HDEL", "h", "a", "zz"})), Int(1));
  EXPECT_EQ(c.Feed(Cmd({"EXISTS", "h"})), Int(1));
  EXPECT_EQ(c.Feed(Cmd({"HDEL", "h", "b"})), Int(1));
  EXPECT_EQ(c.Feed(Cmd({"EXISTS", "h"}) + Cmd({"TYPE", "h"}) + Cmd({"DBSIZE"})),
            Int(0) + "+none\r\n" + Int(0));
  EXPECT_EQ(c.Feed(Cmd({"HGETALL", "h"}) + Cmd({"HLEN", "h"}) + Cmd({"HDEL", "h", "b"})),
            "*0\r\n" + Int(0) + Int(0));
  EXPECT_EQ(s.Elements(), 0u);
  // A fresh hash at the same key starts empty (a new generation).
  EXPECT_EQ(c.Feed(Cmd({"HSET", "h", "c", "3"}) + Cmd({"HGETALL", "h"})),
            Int(1) + "*2\r\n" + Bulk("c") + Bulk("3"));
}

TEST(Hash, DelOfABigHashReturnsAtOnceAndIsReclaimedInBatches) {
  Server s;
  Server::Conn c(s);
  constexpr int kFields = 3000;
  for (int i = 0; i < kFields; i += 100) {
    std::vector<std::string> args{"HSET", "big"};
    for (int j = i; j < i + 100; ++j) {
      args.push_back(Num("field", j));
      args.push_back("v");
    }
    ASSERT_EQ(c.Feed(Cmd(args)), Int(100));
  }
  ASSERT_EQ(c.Feed(Cmd({"HSET", "small", "f", "v"}) + Cmd({"DBSIZE"})), Int(1) + Int(2));
  EXPECT_EQ(s.Elements(), static_cast<size_t>(kFields) + 1);
  // DEL writes the metadata's removal and one garbage record: the
  // elements stay until the background step, but no command sees them.
  EXPECT_EQ(c.Feed(Cmd({"DEL", "big"})), Int(1));
  EXPECT_EQ(s.Elements(), static_cast<size_t>(kFields) + 1);
  EXPECT_EQ(s.GarbageRecords(), 1u);
  EXPECT_EQ(c.Feed(Cmd({"EXISTS", "big"}) + Cmd({"HLEN", "big"}) + Cmd({"DBSIZE"})),
            Int(0) + Int(0) + Int(1));
  // A new hash under the same key sees none of the old fields.
  EXPECT_EQ(c.Feed(Cmd({"HSET", "big", "x", "1"}) + Cmd({"HLEN", "big"})), Int(1) + Int(1));
  size_t steps = 0, total = 0;
  for (;;) {
    const size_t n = s.dbs->ReclaimGarbageStep(256);
    ASSERT_LE(n, 256u);
    total += n;
    if (n == 0) break;
    ++steps;
  }
  EXPECT_GE(steps, static_cast<size_t>(kFields) / 256);
  EXPECT_EQ(total, static_cast<size_t>(kFields) + 1);  // the elements and the garbage record
  EXPECT_EQ(s.Elements(), 2u);                         // big's x and small's f
  EXPECT_EQ(s.GarbageRecords(), 0u);
  EXPECT_EQ(c.Feed(Cmd({"HGETALL", "big"}) + Cmd({"HGET", "small", "f"})),
            "*2\r\n" + Bulk("x") + Bulk("1") + Bulk("v"));
  // The maintenance cycle runs the same step.
  ASSERT_EQ(c.Feed(Cmd({"UNLINK", "big", "small"})), Int(2));
  Maintenance m(*s.dbs, s.stats, [&s] { return s.now_ms; }, Maintenance::Options{});
  const Maintenance::Work w = m.Cycle();
  EXPECT_EQ(w.garbage, 4u);
  EXPECT_EQ(s.Elements(), 0u);
}

TEST(Hash, RenameCopyAndExpire) {
  Server s;
  Server::Conn c(s);
  const std::string ab = "*4\r\n" + Bulk("a") + Bulk("1") + Bulk("b") + Bulk("2");
  ASSERT_EQ(c.Feed(Cmd({"HSET", "h", "a", "1", "b", "2"})), Int(2));
  // RENAME moves the metadata only.
  EXPECT_EQ(c.Feed(Cmd({"RENAME", "h", "r"})), "+OK\r\n");
  EXPECT_EQ(c.Feed(Cmd({"EXISTS", "h"}) + Cmd({"HGETALL", "r"})), Int(0) + ab);
  EXPECT_EQ(s.Elements(), 2u);
  // RENAME onto a hash replaces it (its elements garbage-listed).
  ASSERT_EQ(c.Feed(Cmd({"HSET", "other", "z", "9"}) + Cmd({"RENAMENX", "r", "other"})),
            Int(1) + Int(0));
  EXPECT_EQ(c.Feed(Cmd({"RENAME", "other", "r"}) + Cmd({"HGETALL", "r"})),
            "+OK\r\n*2\r\n" + Bulk("z") + Bulk("9"));
  EXPECT_EQ(s.GarbageRecords(), 1u);
  ASSERT_EQ(c.Feed(Cmd({"HSET", "r", "a", "1", "b", "2"}) + Cmd({"HDEL", "r", "z"})),
            Int(2) + Int(1));
  // COPY makes an independent hash (a new generation), also to another
  // database.
  EXPECT_EQ(c.Feed(Cmd({"COPY", "r", "c"}) + Cmd({"COPY", "r", "c"})), Int(1) + Int(0));
  EXPECT_EQ(c.Feed(Cmd({"HSET", "c", "a", "changed"}) + Cmd({"HGETALL", "r"})), Int(0) + ab);
  EXPECT_EQ(c.Feed(Cmd({"COPY", "r", "c", "DB", "2", "REPLACE"}) + Cmd({"SELECT", "2"}) +
                   Cmd({"HGETALL", "c"}) + Cmd({"SELECT", "0"})),
            Int(1) + "+OK\r\n" + ab + "+OK\r\n");
  EXPECT_EQ(c.Feed(Cmd({"COPY", "r", "c", "REPLACE"}) + Cmd({"HGET", "c", "a"})),
            Int(1) + Bulk("1"));
  // The expiry commands.
  EXPECT_EQ(c.Feed(Cmd({"TTL", "r"}) + Cmd({"EXPIRE", "r", "10"}) + Cmd({"TTL", "r"}) +
                   Cmd({"PEXPIRETIME", "r"})),
            Int(-1) + Int(1) + Int(10) + Int(kStartMs + 10000));
  EXPECT_EQ(c.Feed(Cmd({"EXPIRE", "r", "5", "GT"}) + Cmd({"PERSIST", "r"}) + Cmd({"TTL", "r"})),
            Int(0) + Int(1) + Int(-1));
  EXPECT_EQ(c.Feed(Cmd({"PEXPIRE", "r", "1000"}) + Cmd({"HSET", "r", "c", "3"}) +
                   Cmd({"PTTL", "r"})),
            Int(1) + Int(1) + Int(1000));
  s.now_ms += 1000;
  // Expired: absent to every command; its key can be reused at once.
  EXPECT_EQ(c.Feed(Cmd({"EXISTS", "r"}) + Cmd({"HGET", "r", "a"}) + Cmd({"TYPE", "r"}) +
                   Cmd({"TTL", "r"})),
            Int(0) + "$-1\r\n+none\r\n" + Int(-2));
  EXPECT_EQ(c.Feed(Cmd({"COPY", "r", "x"}) + Cmd({"KEYS", "*"})), Int(0) + "*1\r\n" + Bulk("c"));
  while (s.dbs->ReclaimGarbageStep(64) > 0) {
  }
  ASSERT_EQ(s.GarbageRecords(), 0u);
  EXPECT_EQ(s.Elements(), 7u);  // r: three; c: two here, two in db 2
  // The background expiry removes it and garbage-lists its elements; the
  // next cycle reclaims them.
  Maintenance m(*s.dbs, s.stats, [&s] { return s.now_ms; }, Maintenance::Options{});
  EXPECT_EQ(m.Cycle().expired, 1u);
  EXPECT_EQ(s.GarbageRecords(), 1u);
  EXPECT_EQ(m.Cycle().garbage, 4u);
  EXPECT_EQ(s.Elements(), 4u);
  EXPECT_EQ(c.Feed(Cmd({"DBSIZE"})), Int(1));
  // EXPIRE in the past deletes.
  EXPECT_EQ(c.Feed(Cmd({"EXPIRE", "c", "-1"}) + Cmd({"EXISTS", "c"})), Int(1) + Int(0));
  // A write over an expired hash starts a fresh one.
  ASSERT_EQ(c.Feed(Cmd({"HSET", "e", "old", "1"}) + Cmd({"PEXPIRE", "e", "5"})), Int(1) + Int(1));
  s.now_ms += 5;
  EXPECT_EQ(c.Feed(Cmd({"HSET", "e", "new", "2"}) + Cmd({"HGETALL", "e"}) + Cmd({"TTL", "e"})),
            Int(1) + "*2\r\n" + Bulk("new") + Bulk("2") + Int(-1));
  const CollectionReport r = VerifyCollections(*s.dbs);
  EXPECT_TRUE(r.problems.empty()) << r.problems.front();
}

TEST(Hash, KeyspaceCommandsSeeHashes) {
  Server s;
  Server::Conn c(s);
  ASSERT_EQ(c.Feed(Cmd({"HSET", "h", "f", "v"}) + Cmd({"SET", "s", "1"})), Int(1) + "+OK\r\n");
  EXPECT_EQ(c.Feed(Cmd({"DBSIZE"}) + Cmd({"EXISTS", "h", "s", "n"})), Int(2) + Int(2));
  EXPECT_EQ(c.Feed(Cmd({"SCAN", "0", "TYPE", "hash"})), "*2\r\n$1\r\n0\r\n*1\r\n" + Bulk("h"));
  EXPECT_EQ(c.Feed(Cmd({"SCAN", "0", "TYPE", "string"})), "*2\r\n$1\r\n0\r\n*1\r\n" + Bulk("s"));
  EXPECT_EQ(c.Feed(Cmd({"OBJECT", "ENCODING", "h"})), Bulk("listpack"));
  ASSERT_EQ(c.Feed(Cmd({"HSET", "big", "f", std::string(65, 'x')})), Int(1));
  EXPECT_EQ(c.Feed(Cmd({"OBJECT", "ENCODING", "big"})), Bulk("hashtable"));
  ASSERT_EQ(c.Feed(Cmd({"DEL", "big"})), Int(1));
  EXPECT_EQ(c.Feed(Cmd({"RANDOMKEY"})).substr(0, 4), "$1\r\n");
  const std::string info = c.Feed(Cmd({"INFO", "keyspace"}));
  EXPECT_NE(info.find("db0:keys=2,expires=0"), std::string::npos) << info;
  // FLUSHDB and SWAPDB move hashes with their namespace.
  EXPECT_EQ(c.Feed(Cmd({"SWAPDB", "0", "1"}) + Cmd({"HGET", "h", "f"}) + Cmd({"SELECT", "1"}) +
                   Cmd({"HGET", "h", "f"})),
            "+OK\r\n$-1\r\n+OK\r\n" + Bulk("v"));
  EXPECT_EQ(c.Feed(Cmd({"FLUSHDB"}) + Cmd({"HGET", "h", "f"}) + Cmd({"DBSIZE"})),
            "+OK\r\n$-1\r\n" + Int(0));
  while (s.dbs->ReclaimStep(64) > 0) {
  }
  EXPECT_EQ(s.Elements(), 0u);
}

TEST(Hash, MultiExecAndWatch) {
  Server s;
  Server::Conn a(s), b(s);
  EXPECT_EQ(a.Feed(Cmd({"MULTI"}) + Cmd({"HSET", "h", "n", "1"}) + Cmd({"HINCRBY", "h", "n", "2"}) +
                   Cmd({"HGET", "h", "n"}) + Cmd({"SET", "s", "x"}) + Cmd({"HGET", "s", "f"}) +
                   Cmd({"HGETALL", "h"}) + Cmd({"EXEC"})),
            "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*6\r\n" +
                Int(1) + Int(3) + Bulk("3") + "+OK\r\n" + std::string(kWrongTypeReply) + "*2\r\n" +
                Bulk("n") + Bulk("3"));
  // A write to a watched hash by another client fails the EXEC.
  ASSERT_EQ(a.Feed(Cmd({"WATCH", "h"})), "+OK\r\n");
  ASSERT_EQ(b.Feed(Cmd({"HSET", "h", "other", "1"})), Int(1));
  EXPECT_EQ(a.Feed(Cmd({"MULTI"}) + Cmd({"HSET", "h", "n", "9"}) + Cmd({"EXEC"})),
            "+OK\r\n+QUEUED\r\n*-1\r\n");
  EXPECT_EQ(a.Feed(Cmd({"HGET", "h", "n"})), Bulk("3"));
  // A read-only command on it does not.
  ASSERT_EQ(a.Feed(Cmd({"WATCH", "h"})), "+OK\r\n");
  ASSERT_EQ(b.Feed(Cmd({"HGET", "h", "n"})), Bulk("3"));
  EXPECT_EQ(a.Feed(Cmd({"MULTI"}) + Cmd({"HDEL", "h", "n", "other"}) + Cmd({"EXEC"})),
            "+OK\r\n+QUEUED\r\n*1\r\n" + Int(2));
  EXPECT_EQ(a.Feed(Cmd({"EXISTS", "h"})), Int(0));
}

TEST(Hash, RepliesAndErrors) {
  Server s;
  Server::Conn c(s);
  EXPECT_EQ(c.Feed(Cmd({"HSET", "h", "f"})),
            "-ERR wrong number of arguments for 'hset' command\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HMSET", "h", "a", "1", "b", "22"})), "+OK\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HMGET", "h", "a", "x", "b"})),
            "*3\r\n" + Bulk("1") + "$-1\r\n" + Bulk("22"));
  EXPECT_EQ(c.Feed(Cmd({"HMGET", "nokey", "a"})), "*1\r\n$-1\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HSTRLEN", "h", "b"}) + Cmd({"HSTRLEN", "h", "x"}) +
                   Cmd({"HEXISTS", "h", "a"}) + Cmd({"HEXISTS", "h", "x"})),
            Int(2) + Int(0) + Int(1) + Int(0));
  EXPECT_EQ(c.Feed(Cmd({"HINCRBY", "h", "a", "x"})),
            "-ERR value is not an integer or out of range\r\n");
  ASSERT_EQ(c.Feed(Cmd({"HSET", "h", "s", "abc", "big", "9223372036854775807"})), Int(2));
  EXPECT_EQ(c.Feed(Cmd({"HINCRBY", "h", "s", "1"})), "-ERR hash value is not an integer\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HINCRBY", "h", "big", "1"})),
            "-ERR increment or decrement would overflow\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HINCRBYFLOAT", "h", "f", "10.5"}) +
                   Cmd({"HINCRBYFLOAT", "h", "f", "0.1"})),
            Bulk("10.5") + Bulk("10.6"));
  EXPECT_EQ(c.Feed(Cmd({"HINCRBYFLOAT", "h", "s", "1"})), "-ERR hash value is not a float\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HINCRBYFLOAT", "h", "f", "x"})), "-ERR value is not a valid float\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HINCRBYFLOAT", "h", "f", "+inf"})), "-ERR value is NaN or Infinity\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HSET", "h", "huge", "1.1e4932"}) +
                   Cmd({"HINCRBYFLOAT", "h", "huge", "1.1e4932"})),
            Int(1) + "-ERR increment would produce NaN or Infinity\r\n");
  // HRANDFIELD.
  ASSERT_EQ(c.Feed(Cmd({"DEL", "h"}) + Cmd({"HSET", "r", "a", "1", "b", "2", "c", "3"})),
            Int(1) + Int(3));
  EXPECT_EQ(c.Feed(Cmd({"HRANDFIELD", "nokey"}) + Cmd({"HRANDFIELD", "nokey", "3"}) +
                   Cmd({"HRANDFIELD", "r", "0"})),
            "$-1\r\n*0\r\n*0\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HRANDFIELD", "r", "5"})).substr(0, 4), "*3\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HRANDFIELD", "r", "-5"})).substr(0, 4), "*5\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HRANDFIELD", "r", "2", "WITHVALUES"})).substr(0, 4), "*4\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HRANDFIELD", "r", "-9223372036854770000", "WITHVALUES"})),
            "-ERR value is out of range\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HRANDFIELD", "r", "1", "x"})), "-ERR syntax error\r\n");
  const std::string one = c.Feed(Cmd({"HRANDFIELD", "r"}));
  EXPECT_TRUE(one == Bulk("a") || one == Bulk("b") || one == Bulk("c")) << one;
  // HSCAN walks every field once, whatever COUNT.
  std::vector<std::string> args{"HSET", "sc"};
  for (int i = 0; i < 25; ++i) args.push_back(Num("k", i)), args.push_back("v");
  ASSERT_EQ(c.Feed(Cmd(args)), Int(25));
  std::string cursor = "0";
  size_t seen = 0;
  for (int call = 0; call < 20; ++call) {
    const std::string r = c.Feed(Cmd({"HSCAN", "sc", cursor, "COUNT", "7"}));
    ASSERT_EQ(r.substr(0, 5), "*2\r\n$") << r;
    const size_t len_end = r.find("\r\n", 5);
    const size_t len = std::stoul(r.substr(5, len_end - 5));
    cursor = r.substr(len_end + 2, len);
    const size_t arr = r.find('*', len_end + 2 + len);
    seen += std::stoul(r.substr(arr + 1)) / 2;
    if (cursor == "0") break;
  }
  EXPECT_EQ(cursor, "0");
  EXPECT_EQ(seen, 25u);
  EXPECT_EQ(c.Feed(Cmd({"HSCAN", "sc", "0", "MATCH", "k1*", "COUNT", "100"})).substr(0, 14),
            "*2\r\n$1\r\n0\r\n*22");
  EXPECT_EQ(c.Feed(Cmd({"HSCAN", "nokey", "0"})), "*2\r\n$1\r\n0\r\n*0\r\n");
}

TEST(Hash, Resp3Replies) {
  Server s;
  Server::Conn c(s);
  ASSERT_EQ(c.Feed(Cmd({"HELLO", "3"})).substr(0, 1), "%");
  ASSERT_EQ(c.Feed(Cmd({"HSET", "h", "a", "1"})), Int(1));
  EXPECT_EQ(c.Feed(Cmd({"HGETALL", "h"})), "%1\r\n" + Bulk("a") + Bulk("1"));
  EXPECT_EQ(c.Feed(Cmd({"HGETALL", "nokey"})), "%0\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HGET", "h", "x"})), "_\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HRANDFIELD", "h", "1", "WITHVALUES"})),
            "*1\r\n*2\r\n" + Bulk("a") + Bulk("1"));
  EXPECT_EQ(c.Feed(Cmd({"HRANDFIELD", "h", "-2", "WITHVALUES"})),
            "*2\r\n*2\r\n" + Bulk("a") + Bulk("1") + "*2\r\n" + Bulk("a") + Bulk("1"));
}

TEST(Hash, MemcachedOnAHashKey) {
  Server s;
  Server::Conn c(s);
  MemcacheProtocol mc(s.keyspace->db(0));
  auto feed = [&mc](std::string_view in) {
    std::string out;
    EXPECT_EQ(mc.Consume(in, &out), in.size());
    return out;
  };
  ASSERT_EQ(c.Feed(Cmd({"HSET", "h", "f", "v"}) + Cmd({"HSET", "g", "f", "v"})), Int(1) + Int(1));
  // Reads miss; writes that would read it as an item refuse; add finds
  // the key taken; set replaces and delete deletes the hash whole.
  EXPECT_EQ(feed("get h\r\n"), "END\r\n");
  const std::string refused = "CLIENT_ERROR the key holds a RESP hash, list, set or sorted set\r\n";
  EXPECT_EQ(feed("append h 0 0 1\r\nx\r\n"), refused);
  EXPECT_EQ(feed("incr h 1\r\n"), refused);
  EXPECT_EQ(feed("touch h 10\r\n"), refused);
  EXPECT_EQ(feed("add h 0 0 1\r\nx\r\n"), "NOT_STORED\r\n");
  EXPECT_EQ(c.Feed(Cmd({"HGET", "h", "f"})), Bulk("v"));
  EXPECT_EQ(feed("set h 0 0 1\r\nx\r\n"), "STORED\r\n");
  EXPECT_EQ(feed("get h\r\n"), "VALUE h 0 1\r\nx\r\nEND\r\n");
  EXPECT_EQ(feed("delete g\r\n"), "DELETED\r\n");
  EXPECT_EQ(c.Feed(Cmd({"TYPE", "h"}) + Cmd({"EXISTS", "g"})), "+string\r\n" + Int(0));
  EXPECT_EQ(s.GarbageRecords(), 2u);
  const CollectionReport r = VerifyCollections(*s.dbs);
  EXPECT_TRUE(r.problems.empty());
}

TEST(Hash, VerifyFindsADamagedStore) {
  Server s;
  Server::Conn c(s);
  ASSERT_EQ(c.Feed(Cmd({"HSET", "h", "a", "1", "b", "2"}) + Cmd({"HSET", "g", "x", "1"})),
            Int(2) + Int(1));
  CollectionReport r = VerifyCollections(*s.dbs);
  EXPECT_TRUE(r.problems.empty());
  EXPECT_EQ(r.collections, 2u);
  EXPECT_EQ(r.elements, 3u);
  // Damage: an element removed behind the metadata's back, and an
  // element of a generation nobody owns.
  std::vector<std::pair<std::string, std::string>> all;
  s.base().Range("", std::nullopt, SIZE_MAX, &all);
  std::string element;
  for (const auto& [k, v] : all) {
    if (k.size() > 6 && k.compare(0, 4, std::string(4, '\0')) != 0 &&
        (static_cast<uint8_t>(k[4]) & 0xc0) == 0x40 && k.back() == 'a')
      element = k;
  }
  ASSERT_FALSE(element.empty());
  PMINDEX_ASSERT_OK(s.base().Remove(element));
  const uint32_t ns = s.dbs->ns(0);
  PMINDEX_ASSERT_OK(s.base().Put(
      collection_keys::ElementPrefix(ns, 5, 999999, sub_space::kHashField) + "z", "v"));
  r = VerifyCollections(*s.dbs);
  ASSERT_EQ(r.problems.size(), 2u);
  auto reported = [&r](std::string_view what) {
    for (const std::string& p : r.problems)
      if (p.find(what) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(reported("count")) << r.problems[0] << "\n" << r.problems[1];
  EXPECT_TRUE(reported("999999")) << r.problems[0] << "\n" << r.problems[1];
  // A garbage-listed generation's elements are fine.
  ASSERT_EQ(c.Feed(Cmd({"DEL", "g"})), Int(1));
  r = VerifyCollections(*s.dbs);
  EXPECT_EQ(r.problems.size(), 2u);
  EXPECT_EQ(r.garbage_generations, 1u);
  EXPECT_EQ(r.garbage_elements, 1u);
}

}  // namespace
}  // namespace pmindex::server::testing
