// Values larger than one store value (server/chunked_values.h): stored in
// pieces by the databases' views, read whole, replaced atomically, and
// their pieces reclaimed whatever drops them (DEL, overwrite, expiry,
// RENAME, COPY, MOVE, SWAPDB, FLUSHDB, RESTORE, EXEC). Most tests run over
// a map store whose values are at most kPiece bytes, so that a value of a
// few KiB is already in pieces; the round trips at KvStore's own limit run
// over KvStore.
#include <gtest/gtest.h>

#include <atomic>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/chunked_values.h"
#include "server/collections.h"
#include "server/databases.h"
#include "server/keyspace.h"
#include "server/memcache_protocol.h"
#include "server/resp_protocol.h"
#include "tests/server/map_store.h"
#include "tests/server/protocol_harness.h"
#include "tests/server/resp_encode.h"
#include "tests/support/status.h"
#ifdef PMINDEX_SERVER_TEST_KV
#include "pmindex/kv.h"
#include "server/kv_backed_store.h"
#endif

namespace pmindex::server::testing {
namespace {

constexpr size_t kPiece = 256;  // the map store's value limit

std::string Bulk(std::string_view v) {
  return std::string("$") + std::to_string(v.size()) + std::string("\r\n") + std::string(v) +
         "\r\n";
}

// n bytes, byte i = seed + i mod 251 (so a piece out of place shows).
std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((seed + i) % 251);
  return s;
}

// 16 databases over `base` and RESP and memcached connections to them.
class Server {
 public:
  explicit Server(Store& base) : base_(base) {
    auto d = Databases::Open(base_, 16);
    PMINDEX_EXPECT_OK(d);
    dbs = std::move(d.value());
    keyspace = std::make_unique<Keyspace>(*dbs, stats, [this] { return now_ms; });
  }

  template <class P>
  class Conn {
   public:
    template <class... Extra>
    explicit Conn(Server& s, Extra&&... extra)
        : protocol(s.keyspace->db(0), std::forward<Extra>(extra)...) {}
    std::string Feed(std::string_view bytes) {
      buffer_.append(bytes);
      std::string all;
      for (;;) {
        std::string out;
        const size_t used = protocol.Consume(buffer_, &out);
        buffer_.erase(0, used);
        if (out.empty()) return all;
        all += out;
      }
    }
    P protocol;

   private:
    std::string buffer_;
  };

  // Records in the base store with no value in it: the table and the
  // generation counter (written by the first large value).
  uint64_t EmptyKeys() {
    Items& items = keyspace->db(0);
    PMINDEX_EXPECT_OK(items.Write(StoreMode::kSet, "warm-up",
                                  std::string(base_.max_value_bytes() + 1, 'w'), 0, 0));
    PMINDEX_EXPECT_OK(items.Delete("warm-up"));
    return SettledKeys();
  }
  // Records in the base store once every garbage generation is reclaimed.
  uint64_t SettledKeys() {
    while (dbs->ReclaimGarbageStep(1000) > 0 || dbs->ReclaimStep(1000) > 0 ||
           dbs->reclaim_pending()) {
    }
    return base_.Info().keys;
  }
  void ExpectConsistent() {
    const CollectionReport r = VerifyCollections(*dbs);
    EXPECT_TRUE(r.problems.empty()) << r.problems.front();
  }

  int64_t now_ms = kStartMs;
  Stats stats;
  std::unique_ptr<Databases> dbs;
  std::unique_ptr<Keyspace> keyspace;
  RespShared shared;

 private:
  Store& base_;
};

using RespConn = Server::Conn<RespProtocol>;
using McConn = Server::Conn<MemcacheProtocol>;

TEST(LargeValues, StoredInPiecesAndReadWhole) {
  MapStore base(kPiece);
  Server s(base);
  RespConn c(s, s.shared);
  const uint64_t empty = s.EmptyKeys();
  const std::string v = Pattern(10 * kPiece + 7, 1);
  EXPECT_EQ(
      c.Feed(Cmd({"SET", "k", v}) + Cmd({"GET", "k"}) + Cmd({"STRLEN", "k"})),
      std::string("+OK\r\n") + Bulk(v) + std::string(":") + std::to_string(v.size()) + "\r\n");
  // A head and 11 pieces (the item header makes the value 1 byte longer).
  EXPECT_EQ(base.Info().keys, empty + 12);
  EXPECT_EQ(VerifyCollections(*s.dbs).large_values, 1u);
  EXPECT_EQ(VerifyCollections(*s.dbs).pieces, 11u);
  // Peek gives the head's prefix (the item header and the first bytes)
  // with the version Get gives; EXISTS, TYPE, TTL read no more.
  Store& view = s.keyspace->db(0).store();
  Result<StoredValue> peek = view.Peek("k");
  Result<StoredValue> whole = view.Get("k");
  PMINDEX_ASSERT_OK(peek);
  PMINDEX_ASSERT_OK(whole);
  EXPECT_EQ(peek->value, whole->value.substr(0, chunk_codec::kPrefixBytes));
  EXPECT_EQ(peek->version, whole->version);
  EXPECT_EQ(c.Feed(Cmd({"EXISTS", "k"}) + Cmd({"TYPE", "k"}) + Cmd({"TTL", "k"})),
            ":1\r\n+string\r\n:-1\r\n");
  // Reads of a part, across pieces.
  EXPECT_EQ(c.Feed(Cmd({"GETRANGE", "k", "250", "520"})), Bulk(v.substr(250, 271)));
  // A small value in its place: the pieces are garbage, then reclaimed.
  EXPECT_EQ(c.Feed(Cmd({"SET", "k", "small"}) + Cmd({"GET", "k"})), "+OK\r\n$5\r\nsmall\r\n");
  EXPECT_EQ(s.SettledKeys(), empty + 1);
  // A stored value that starts as a head does is stored in pieces too, and
  // reads back as written.
  const std::string tagged(1, static_cast<char>(chunk_codec::kTag));
  PMINDEX_ASSERT_OK(s.keyspace->db(0).store().Put("raw", tagged + "abc"));
  Result<StoredValue> raw = s.keyspace->db(0).store().Get("raw");
  PMINDEX_ASSERT_OK(raw);
  EXPECT_EQ(raw->value, tagged + "abc");
  s.ExpectConsistent();
}

TEST(LargeValues, PartialWritesAndStringCommands) {
  MapStore base(kPiece);
  Server s(base);
  RespConn c(s, s.shared);
  std::string v = Pattern(5 * kPiece, 3);
  EXPECT_EQ(c.Feed(Cmd({"SET", "k", v})), "+OK\r\n");
  // SETRANGE in the middle, across a piece boundary, and past the end.
  const std::string patch(100, 'P');
  v.replace(kPiece - 50, 100, patch);
  EXPECT_EQ(c.Feed(Cmd({"SETRANGE", "k", std::to_string(kPiece - 50), patch})),
            std::string(":") + std::to_string(v.size()) + "\r\n");
  v.resize(7 * kPiece, '\0');
  v.replace(7 * kPiece - 3, 3, "end");
  EXPECT_EQ(c.Feed(Cmd({"SETRANGE", "k", std::to_string(7 * kPiece - 3), "end"})),
            std::string(":") + std::to_string(v.size()) + "\r\n");
  EXPECT_EQ(c.Feed(Cmd({"GET", "k"})), Bulk(v));
  const std::string tail = Pattern(3 * kPiece, 9);
  v += tail;
  EXPECT_EQ(c.Feed(Cmd({"APPEND", "k", tail}) + Cmd({"GET", "k"})),
            std::string(":") + std::to_string(v.size()) + std::string("\r\n") + Bulk(v));
  // SET ... GET, GETEX, GETDEL return the whole old value.
  const std::string w = Pattern(4 * kPiece, 5);
  EXPECT_EQ(c.Feed(Cmd({"SET", "k", w, "GET"})), Bulk(v));
  EXPECT_EQ(c.Feed(Cmd({"GETEX", "k", "EX", "100"}) + Cmd({"TTL", "k"})), Bulk(w) + ":100\r\n");
  EXPECT_EQ(c.Feed(Cmd({"GETDEL", "k"}) + Cmd({"EXISTS", "k"})), Bulk(w) + ":0\r\n");
  s.ExpectConsistent();
}

TEST(LargeValues, EveryWayOfDroppingAValueReclaimsItsPieces) {
  MapStore base(kPiece);
  Server s(base);
  RespConn c(s, s.shared);
  const uint64_t empty = s.EmptyKeys();
  const std::string v = Pattern(6 * kPiece, 7);
  const std::string w = Pattern(3 * kPiece + 1, 8);
  // DEL.
  EXPECT_EQ(c.Feed(Cmd({"SET", "a", v}) + Cmd({"DEL", "a"})), "+OK\r\n:1\r\n");
  EXPECT_EQ(s.SettledKeys(), empty);
  // Overwrite by another large value, then RENAME, COPY to another
  // database.
  EXPECT_EQ(c.Feed(Cmd({"SET", "a", v}) + Cmd({"SET", "a", w}) + Cmd({"RENAME", "a", "b"}) +
                   Cmd({"COPY", "b", "c", "DB", "1"}) + Cmd({"GET", "b"})),
            std::string("+OK\r\n+OK\r\n+OK\r\n:1\r\n") + Bulk(w));
  const uint64_t two = s.SettledKeys();
  EXPECT_EQ(two, empty + 2 * 5);  // b and c (in db 1): a head and 4 pieces each
  EXPECT_EQ(
      c.Feed(Cmd({"SELECT", "1"}) + Cmd({"GET", "c"}) + Cmd({"SWAPDB", "0", "1"}) +
             Cmd({"GET", "b"}) + Cmd({"DEL", "b"}) + Cmd({"SELECT", "0"}) + Cmd({"GET", "c"})),
      std::string("+OK\r\n") + Bulk(w) + std::string("+OK\r\n") + Bulk(w) +
          std::string(":1\r\n+OK\r\n") + Bulk(w));
  EXPECT_EQ(s.SettledKeys(), empty + 5);
  // DUMP and RESTORE REPLACE over it.
  const std::string dumped = c.Feed(Cmd({"DUMP", "c"}));
  ASSERT_EQ(dumped[0], '$') << dumped;
  const size_t nl = dumped.find("\r\n");
  const std::string payload = dumped.substr(nl + 2, dumped.size() - nl - 4);
  EXPECT_EQ(c.Feed(Cmd({"RESTORE", "c", "0", payload, "REPLACE"}) + Cmd({"GET", "c"})),
            std::string("+OK\r\n") + Bulk(w));
  EXPECT_EQ(s.SettledKeys(), empty + 5);
  // Expiry: the sweep drops the head and garbage-lists the pieces.
  EXPECT_EQ(c.Feed(Cmd({"PEXPIRE", "c", "10"})), ":1\r\n");
  s.now_ms += 20;
  EXPECT_EQ(s.dbs->ExpireStep(100,
                              [&](std::string_view v) {
                                return item_codec::ExpiredAt(v, s.now_ms) ||
                                       collection_codec::ExpiredAt(v, s.now_ms);
                              }),
            1u);
  EXPECT_EQ(s.SettledKeys(), empty);
  // Inside EXEC, and FLUSHDB.
  EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"SET", "x", v}) + Cmd({"APPEND", "x", "!"}) +
                   Cmd({"SET", "y", w}) + Cmd({"EXEC"}) + Cmd({"STRLEN", "x"})),
            std::string("+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n+OK\r\n:") +
                std::to_string(v.size() + 1) + std::string("\r\n+OK\r\n:") +
                std::to_string(v.size() + 1) + "\r\n");
  EXPECT_EQ(c.Feed(Cmd({"FLUSHDB"}) + Cmd({"DBSIZE"})), "+OK\r\n:0\r\n");
  EXPECT_EQ(s.SettledKeys(), empty);
  s.ExpectConsistent();
}

TEST(LargeValues, MemcachedCommandsAndItemSizeLimit) {
  MapStore base(kPiece);
  Server s(base);
  McConn c(s, 8 * kPiece);  // -I: 2 KiB
  const std::string v = Pattern(5 * kPiece, 11);
  const std::string head = std::string("VALUE k 7 ") + std::to_string(v.size()) + "\r\n";
  EXPECT_EQ(c.Feed(std::string("set k 7 0 ") + std::to_string(v.size()) + std::string("\r\n") + v +
                   "\r\nget k\r\n"),
            std::string("STORED\r\n") + head + v + "\r\nEND\r\n");
  EXPECT_EQ(c.Feed("append k 0 0 3\r\nabc\r\nprepend k 0 0 3\r\nxyz\r\nget k\r\n"),
            std::string("STORED\r\nSTORED\r\nVALUE k 7 ") + std::to_string(v.size() + 6) +
                std::string("\r\nxyz") + v + "abc\r\nEND\r\n");
  // cas with the version gets reports.
  const std::string gets = c.Feed("gets k\r\n");
  const size_t sp = gets.find(' ', gets.find(' ', gets.find(' ', 6) + 1) + 1);
  const std::string cas = gets.substr(sp + 1, gets.find("\r\n") - sp - 1);
  EXPECT_EQ(c.Feed(std::string("cas k 1 0 3 ") + cas + std::string("\r\nnew\r\ncas k 1 0 3 ") +
                   cas + "\r\nold\r\n"),
            "STORED\r\nEXISTS\r\n");
  // Over -I: refused, the data swallowed, the connection goes on.
  const std::string big(8 * kPiece + 1, 'b');
  EXPECT_EQ(c.Feed(std::string("set big 0 0 ") + std::to_string(big.size()) + std::string("\r\n") +
                   big + "\r\nget k\r\n"),
            "SERVER_ERROR object too large for cache\r\nVALUE k 1 3\r\nnew\r\nEND\r\n");
  // An append past -I stores nothing.
  EXPECT_EQ(c.Feed(std::string("set k 0 0 ") + std::to_string(v.size()) + std::string("\r\n") + v +
                   std::string("\r\nappend k 0 0 ") + std::to_string(4 * kPiece) +
                   std::string("\r\n") + std::string(4 * kPiece, 'a') + "\r\n"),
            "STORED\r\nNOT_STORED\r\n");
  EXPECT_FALSE(c.protocol.close_requested());
}

TEST(LargeValues, RespLimitsFollowProtoMaxBulkLen) {
  MapStore base(kPiece);
  Server s(base);
  RespConn c(s, s.shared);
  EXPECT_EQ(c.Feed(Cmd({"CONFIG", "SET", "proto-max-bulk-len", "1000"}) +
                   Cmd({"CONFIG", "SET", "proto-max-bulk-len", "1mb"}) +
                   Cmd({"CONFIG", "GET", "proto-max-bulk-len"})),
            std::string("-ERR CONFIG SET failed (possibly related to argument "
                        "'proto-max-bulk-len') - argument must be between 1048576 and ") +
                std::to_string(Databases::kMaxValueBytes - item_codec::kMaxHeaderBytes) +
                " inclusive\r\n+OK\r\n*2\r\n$18\r\nproto-max-bulk-len\r\n$7\r\n1048576\r\n");
  // SETRANGE and APPEND past it: Redis's error, nothing written.
  EXPECT_EQ(c.Feed(Cmd({"SET", "k", "abc"}) + Cmd({"SETRANGE", "k", "1048576", "x"}) +
                   Cmd({"SETRANGE", "k", "1048575", "x"}) + Cmd({"STRLEN", "k"})),
            "+OK\r\n-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
            ":1048576\r\n:1048576\r\n");
  EXPECT_EQ(c.Feed(Cmd({"APPEND", "k", "y"}) + Cmd({"SETBIT", "k", "8388608", "1"})),
            "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
            "-ERR bit offset is not an integer or out of range\r\n");
  // A bulk string past it: Redis's protocol error, and the connection
  // closes as Redis's does.
  EXPECT_EQ(c.Feed("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048577\r\n"),
            "-ERR Protocol error: invalid bulk length\r\n");
  EXPECT_TRUE(c.protocol.close_requested());
  s.ExpectConsistent();
}

// A reader never sees part of one value and part of another, while
// writers replace a value of many pieces.
TEST(LargeValues, ReadersSeeOldOrNewNeverAMix) {
  MapStore base(kPiece);
  Server s(base);
  Items& items = s.keyspace->db(0);
  const std::string a(20 * kPiece, 'a'), b(13 * kPiece, 'b');
  PMINDEX_ASSERT_OK(items.Write(StoreMode::kSet, "k", a, 0, 0));
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, reads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const std::string& v = (i + t) % 2 ? a : b;
        PMINDEX_EXPECT_OK(items.Write(StoreMode::kSet, "k", v, 0, 0));
      }
    });
  }
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        Result<Item> r = items.Get("k");
        if (!r.ok() || (r->data != a && r->data != b)) ++bad;
        ++reads;
      }
    });
  }
  // The replaced values' pieces are reclaimed meanwhile (a reader that
  // misses a piece reads the head again).
  threads.emplace_back([&] {
    while (!stop.load()) s.dbs->ReclaimGarbageStep(64);
  });
  threads[0].join();
  threads[1].join();
  stop = true;
  for (size_t t = 2; t < threads.size(); ++t) threads[t].join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(reads.load(), 0);
  // Each replaced value was garbage-listed: one value is left.
  s.SettledKeys();
  EXPECT_EQ(VerifyCollections(*s.dbs).large_values, 1u);
  s.ExpectConsistent();
}

#ifdef PMINDEX_SERVER_TEST_KV
class KvBase {
 public:
  KvBase() {
    auto kv = KvStore::CreateInMemory("lbtree");
    PMINDEX_EXPECT_OK(kv);
    kv_ = std::move(kv.value());
    store_ = std::make_unique<KvBackedStore>(*kv_);
  }
  ~KvBase() {
    store_.reset();
    PMINDEX_EXPECT_OK(kv_->Verify());
    PMINDEX_EXPECT_OK(kv_->Close());
  }
  Store& store() { return *store_; }

 private:
  std::unique_ptr<KvStore> kv_;
  std::unique_ptr<KvBackedStore> store_;
};

TEST(LargeValues, RoundTripsAroundKvStoresValueLimit) {
  KvBase kv;
  {
    Server s(kv.store());
    Items& items = s.keyspace->db(0);
    const uint64_t empty = s.EmptyKeys();
    const size_t mib = size_t{1} << 20;
    for (const size_t n : {mib - 1, mib, mib + 1, 5 * mib}) {
      const std::string v = Pattern(n, static_cast<int>(n % 97));
      PMINDEX_ASSERT_OK(items.Write(StoreMode::kSet, "k", v, 3, 0)) << n;
      Result<Item> r = items.Get("k");
      PMINDEX_ASSERT_OK(r) << n;
      EXPECT_EQ(r->data.size(), n);
      EXPECT_TRUE(r->data == v) << n;
      EXPECT_EQ(r->flags, 3u);
    }
    // Partial overwrite of the 5 MiB value through the item layer.
    PMINDEX_ASSERT_OK(items.Edit("k", [](const Item* live) {
      std::string d = live->data;
      d.replace(mib - 10, 20, std::string(20, 'Z'));
      return ItemEdit::Put(std::move(d), live->flags, 0);
    }));
    Result<Item> r = items.Get("k");
    PMINDEX_ASSERT_OK(r);
    EXPECT_EQ(r->data.substr(mib - 11, 22),
              r->data.substr(mib - 11, 1) + std::string(20, 'Z') + r->data.substr(mib + 10, 1));
    s.ExpectConsistent();
    PMINDEX_ASSERT_OK(items.Delete("k"));
    EXPECT_EQ(s.SettledKeys(), empty);
  }
}
#endif

}  // namespace
}  // namespace pmindex::server::testing
