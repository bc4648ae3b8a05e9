// RESP over databases (databases.h, keyspace.h): SELECT, DBSIZE, FLUSHDB,
// FLUSHALL, SWAPDB, INFO keyspace, MULTI/EXEC/DISCARD/WATCH/UNWATCH,
// RENAME/RENAMENX/COPY/MSETNX, over the map store; and EXEC's atomicity
// under concurrent clients over KvStore.
#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/databases.h"
#include "server/keyspace.h"
#include "server/resp_protocol.h"
#include "server/resp_shared.h"
#include "server/resp_transaction.h"
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

// 16 databases over one store, and any number of connections to them.
class Server {
 public:
  explicit Server(Store* base = nullptr) : base_(base != nullptr ? *base : map_) {
    auto d = Databases::Open(base_, 16);
    PMINDEX_EXPECT_OK(d);
    dbs = std::move(d.value());
    keyspace = std::make_unique<Keyspace>(*dbs, stats, [this] { return now_ms; });
  }

  class Conn {
   public:
    Conn(Server& s) : protocol_(s.keyspace->db(0), s.shared_) {}
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
    RespClient& client() { return protocol_.client(); }

   private:
    RespProtocol protocol_;
    std::string buffer_;
  };

  int64_t now_ms = kStartMs;
  Stats stats;
  std::unique_ptr<Databases> dbs;
  std::unique_ptr<Keyspace> keyspace;

 private:
  MapStore map_;
  Store& base_;
  RespShared shared_;
};

TEST(RespDb, SelectDbsizeAndSeparateDatabases) {
  Server s;
  Server::Conn c(s);
  EXPECT_EQ(c.Feed(Cmd({"SET", "k", "zero"}) + Cmd({"SELECT", "1"}) + Cmd({"GET", "k"}) +
                   Cmd({"SET", "k", "one"}) + Cmd({"SET", "j", "x"}) + Cmd({"DBSIZE"})),
            "+OK\r\n+OK\r\n$-1\r\n+OK\r\n+OK\r\n:2\r\n");
  EXPECT_EQ(c.client().db, 1);
  EXPECT_EQ(c.Feed(Cmd({"SELECT", "16"}) + Cmd({"SELECT", "-1"}) + Cmd({"SELECT", "x"}) +
                   Cmd({"SELECT", "0"}) + Cmd({"GET", "k"}) + Cmd({"DBSIZE"})),
            "-ERR DB index is out of range\r\n-ERR DB index is out of range\r\n"
            "-ERR value is not an integer or out of range\r\n+OK\r\n$4\r\nzero\r\n:1\r\n");
  // Another connection starts in database 0.
  Server::Conn d(s);
  EXPECT_EQ(d.Feed(Cmd({"GET", "k"})), "$4\r\nzero\r\n");
  // INFO's keyspace section, per database.
  const std::string info = d.Feed(Cmd({"INFO"}));
  EXPECT_NE(info.find("db0:keys=1,expires=0,avg_ttl=0\r\n"), std::string::npos) << info;
  EXPECT_NE(info.find("db1:keys=2,expires=0,avg_ttl=0\r\n"), std::string::npos) << info;
  EXPECT_EQ(info.find("db2:"), std::string::npos) << info;
}

TEST(RespDb, FlushdbFlushallSwapdb) {
  Server s;
  Server::Conn c(s);
  EXPECT_EQ(c.Feed(Cmd({"SET", "a", "0"}) + Cmd({"SELECT", "1"}) + Cmd({"SET", "a", "1"}) +
                   Cmd({"SET", "b", "1", "EX", "100"}) + Cmd({"SWAPDB", "0", "1"}) +
                   Cmd({"GET", "a"}) + Cmd({"DBSIZE"})),
            "+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n$1\r\n0\r\n:1\r\n");
  const std::string info = c.Feed(Cmd({"INFO"}));
  EXPECT_NE(info.find("db0:keys=2,expires=1,avg_ttl=0\r\n"), std::string::npos) << info;
  EXPECT_EQ(c.Feed(Cmd({"SWAPDB", "x", "1"}) + Cmd({"SWAPDB", "0", "y"}) +
                   Cmd({"SWAPDB", "0", "16"}) + Cmd({"SWAPDB", "0"}) + Cmd({"FLUSHDB", "NOW"})),
            "-ERR invalid first DB index\r\n-ERR invalid second DB index\r\n"
            "-ERR DB index is out of range\r\n"
            "-ERR wrong number of arguments for 'swapdb' command\r\n-ERR syntax error\r\n");
  // FLUSHDB flushes the selected database only.
  EXPECT_EQ(c.Feed(Cmd({"FLUSHDB", "ASYNC"}) + Cmd({"DBSIZE"}) + Cmd({"SELECT", "0"}) +
                   Cmd({"GET", "a"}) + Cmd({"FLUSHALL", "SYNC"}) + Cmd({"DBSIZE"})),
            "+OK\r\n:0\r\n+OK\r\n$1\r\n1\r\n+OK\r\n:0\r\n");
  EXPECT_TRUE(s.dbs->reclaim_pending());
}

TEST(RespDb, MultiExecRunsTheQueueAtOnce) {
  Server s;
  Server::Conn c(s), other(s);
  EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"SET", "a", "1"}) + Cmd({"INCR", "a"}) +
                   Cmd({"GET", "a"}) + Cmd({"PING"})),
            "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n");
  // Nothing ran before EXEC.
  EXPECT_EQ(other.Feed(Cmd({"GET", "a"})), "$-1\r\n");
  EXPECT_EQ(c.Feed(Cmd({"EXEC"})), "*4\r\n+OK\r\n:2\r\n$1\r\n2\r\n+PONG\r\n");
  EXPECT_EQ(other.Feed(Cmd({"GET", "a"})), "$1\r\n2\r\n");
  // A runtime error is that command's reply; the others apply.
  EXPECT_EQ(c.Feed(Cmd({"SET", "s", "text"}) + Cmd({"MULTI"}) + Cmd({"INCR", "s"}) +
                   Cmd({"SET", "t", "1"}) + Cmd({"EXEC"})),
            "+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n"
            "*2\r\n-ERR value is not an integer or out of range\r\n+OK\r\n");
  // DISCARD, and the errors of the control commands.
  EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"DEL", "a"}) + Cmd({"MULTI"}) + Cmd({"WATCH", "x"}) +
                   Cmd({"DISCARD"}) + Cmd({"GET", "a"}) + Cmd({"EXEC"}) + Cmd({"DISCARD"})),
            "+OK\r\n+QUEUED\r\n-ERR MULTI calls can not be nested\r\n"
            "-ERR WATCH inside MULTI is not allowed\r\n+OK\r\n$1\r\n2\r\n"
            "-ERR EXEC without MULTI\r\n-ERR DISCARD without MULTI\r\n");
  // An empty transaction.
  EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"EXEC"})), "+OK\r\n*0\r\n");
}

TEST(RespDb, QueueingErrorsAbortExec) {
  Server s;
  Server::Conn c(s);
  EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"SET", "a", "1"}) + Cmd({"NOSUCH"}) +
                   Cmd({"SET", "b", "2"}) + Cmd({"EXEC"}) + Cmd({"EXISTS", "a", "b"})),
            "+OK\r\n+QUEUED\r\n-ERR unknown command 'NOSUCH', with args beginning with: \r\n"
            "+QUEUED\r\n-EXECABORT Transaction discarded because of previous errors.\r\n:0\r\n");
  EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"SET", "a"}) + Cmd({"EXEC"}) + Cmd({"PING"})),
            "+OK\r\n-ERR wrong number of arguments for 'set' command\r\n"
            "-EXECABORT Transaction discarded because of previous errors.\r\n+PONG\r\n");
  // A key the store cannot take is a queueing error too.
  const std::string long_key(s.keyspace->db(0).max_key_bytes() + 1, 'k');
  const std::string reply = c.Feed(Cmd({"MULTI"}) + Cmd({"GET", long_key}) + Cmd({"EXEC"}));
  EXPECT_NE(reply.find("-EXECABORT"), std::string::npos) << reply;
}

TEST(RespDb, SelectInsideMultiAndFlushInsideExec) {
  Server s;
  Server::Conn c(s);
  EXPECT_EQ(
      c.Feed(Cmd({"SET", "old", "x"}) + Cmd({"MULTI"}) + Cmd({"SET", "a", "0"}) +
             Cmd({"SELECT", "3"}) + Cmd({"SET", "a", "3"}) + Cmd({"SELECT", "0"}) +
             Cmd({"FLUSHDB"}) + Cmd({"SET", "b", "after"}) + Cmd({"SELECT", "3"}) + Cmd({"EXEC"})),
      "+OK\r\n+OK\r\n"
      "+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n"
      "*7\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n");
  // SELECT inside MULTI stays selected after EXEC, as in Redis.
  EXPECT_EQ(c.client().db, 3);
  EXPECT_EQ(c.Feed(Cmd({"GET", "a"}) + Cmd({"SELECT", "0"}) + Cmd({"GET", "a"}) +
                   Cmd({"GET", "old"}) + Cmd({"GET", "b"})),
            "$1\r\n3\r\n+OK\r\n$-1\r\n$-1\r\n$5\r\nafter\r\n");
  // FLUSHALL and SWAPDB in a transaction.
  EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"SWAPDB", "0", "3"}) + Cmd({"GET", "a"}) +
                   Cmd({"FLUSHALL"}) + Cmd({"DBSIZE"}) + Cmd({"EXEC"})),
            "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n"
            "*4\r\n+OK\r\n$1\r\n3\r\n+OK\r\n:0\r\n");
  EXPECT_EQ(c.Feed(Cmd({"SELECT", "3"}) + Cmd({"DBSIZE"})), "+OK\r\n:0\r\n");
}

TEST(RespDb, WatchFailsExecWhenAWatchedKeyChanged) {
  Server s;
  Server::Conn c(s), other(s);
  auto exec_ping = [&] { return c.Feed(Cmd({"MULTI"}) + Cmd({"PING"}) + Cmd({"EXEC"})); };
  const std::string ran = "+OK\r\n+QUEUED\r\n*1\r\n+PONG\r\n";
  const std::string failed = "+OK\r\n+QUEUED\r\n*-1\r\n";
  // Unchanged: EXEC runs. Changed by another client: null.
  EXPECT_EQ(c.Feed(Cmd({"SET", "x", "30"}) + Cmd({"WATCH", "x", "y"})), "+OK\r\n+OK\r\n");
  EXPECT_EQ(exec_ping(), ran);
  EXPECT_EQ(c.Feed(Cmd({"WATCH", "x"})), "+OK\r\n");
  EXPECT_EQ(other.Feed(Cmd({"SET", "x", "30"})), "+OK\r\n");  // same value: still a change
  EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"SET", "z", "1"}) + Cmd({"EXEC"}) + Cmd({"GET", "z"})),
            "+OK\r\n+QUEUED\r\n*-1\r\n$-1\r\n");
  // After a failed EXEC the key is no longer watched; UNWATCH forgets.
  EXPECT_EQ(other.Feed(Cmd({"SET", "x", "40"})), "+OK\r\n");
  EXPECT_EQ(exec_ping(), ran);
  EXPECT_EQ(c.Feed(Cmd({"WATCH", "x"})), "+OK\r\n");
  EXPECT_EQ(other.Feed(Cmd({"SET", "x", "50"})), "+OK\r\n");
  EXPECT_EQ(c.Feed(Cmd({"UNWATCH"})), "+OK\r\n");
  EXPECT_EQ(exec_ping(), ran);
  // A key created, or touched by EXPIRE.
  EXPECT_EQ(c.Feed(Cmd({"WATCH", "new"})), "+OK\r\n");
  EXPECT_EQ(other.Feed(Cmd({"SET", "new", "v"})), "+OK\r\n");
  EXPECT_EQ(exec_ping(), failed);
  EXPECT_EQ(c.Feed(Cmd({"WATCH", "x"})), "+OK\r\n");
  EXPECT_EQ(other.Feed(Cmd({"EXPIRE", "x", "100"})), ":1\r\n");
  EXPECT_EQ(exec_ping(), failed);
  // WATCH remembers the database of the key.
  EXPECT_EQ(c.Feed(Cmd({"SELECT", "5"}) + Cmd({"SET", "x", "1"}) + Cmd({"WATCH", "x"}) +
                   Cmd({"SELECT", "0"})),
            "+OK\r\n+OK\r\n+OK\r\n+OK\r\n");
  EXPECT_EQ(other.Feed(Cmd({"SET", "x", "0 changed"})), "+OK\r\n");
  EXPECT_EQ(exec_ping(), ran);
  EXPECT_EQ(c.Feed(Cmd({"SELECT", "5"}) + Cmd({"WATCH", "x"}) + Cmd({"SELECT", "0"})),
            "+OK\r\n+OK\r\n+OK\r\n");
  EXPECT_EQ(other.Feed(Cmd({"SELECT", "5"}) + Cmd({"SET", "x", "5 changed"})), "+OK\r\n+OK\r\n");
  EXPECT_EQ(exec_ping(), failed);
}

TEST(RespDb, WatchSeesFlushSwapAndExpiryAsRedisDoes) {
  Server s;
  Server::Conn c(s), other(s);
  auto exec_ping = [&] { return c.Feed(Cmd({"MULTI"}) + Cmd({"PING"}) + Cmd({"EXEC"})); };
  const std::string ran = "+OK\r\n+QUEUED\r\n*1\r\n+PONG\r\n";
  const std::string failed = "+OK\r\n+QUEUED\r\n*-1\r\n";
  // FLUSHDB/FLUSHALL touch a watched key that exists, not one that does not.
  for (const char* flush : {"FLUSHDB", "FLUSHALL"}) {
    EXPECT_EQ(c.Feed(Cmd({"SET", "x", "30"}) + Cmd({"WATCH", "x"})), "+OK\r\n+OK\r\n");
    EXPECT_EQ(other.Feed(Cmd({flush})), "+OK\r\n");
    EXPECT_EQ(exec_ping(), failed) << flush;
    EXPECT_EQ(c.Feed(Cmd({"WATCH", "x"})), "+OK\r\n");
    EXPECT_EQ(other.Feed(Cmd({flush})), "+OK\r\n");
    EXPECT_EQ(exec_ping(), ran) << flush;
  }
  // SWAPDB: a watched key that exists, or that the swap brings.
  EXPECT_EQ(c.Feed(Cmd({"SET", "x", "30"}) + Cmd({"WATCH", "x"})), "+OK\r\n+OK\r\n");
  EXPECT_EQ(other.Feed(Cmd({"SWAPDB", "0", "1"})), "+OK\r\n");
  EXPECT_EQ(exec_ping(), failed);
  EXPECT_EQ(c.Feed(Cmd({"WATCH", "x"})), "+OK\r\n");  // x is absent now in db 0
  EXPECT_EQ(other.Feed(Cmd({"SWAPDB", "0", "1"})), "+OK\r\n");
  EXPECT_EQ(exec_ping(), failed);
  // Expiry: a key live at WATCH and expired at EXEC fails it; a key
  // already expired at WATCH (stale), deleted or flushed, does not.
  EXPECT_EQ(c.Feed(Cmd({"FLUSHALL"}) + Cmd({"SET", "e", "1", "PX", "100"}) + Cmd({"WATCH", "e"})),
            "+OK\r\n+OK\r\n+OK\r\n");
  s.now_ms += 101;
  EXPECT_EQ(exec_ping(), failed);
  EXPECT_EQ(c.Feed(Cmd({"SET", "e", "1", "PX", "1"})), "+OK\r\n");
  s.now_ms += 2;
  EXPECT_EQ(c.Feed(Cmd({"WATCH", "e"})), "+OK\r\n");
  EXPECT_EQ(exec_ping(), ran);
  EXPECT_EQ(c.Feed(Cmd({"SET", "e", "1", "PX", "1"})), "+OK\r\n");
  s.now_ms += 2;
  EXPECT_EQ(c.Feed(Cmd({"WATCH", "e"}) + Cmd({"EXISTS", "e"})), "+OK\r\n:0\r\n");
  EXPECT_EQ(exec_ping(), ran);
  EXPECT_EQ(c.Feed(Cmd({"SET", "e", "1", "PX", "1"})), "+OK\r\n");
  s.now_ms += 2;
  EXPECT_EQ(c.Feed(Cmd({"WATCH", "e"}) + Cmd({"FLUSHDB"})), "+OK\r\n+OK\r\n");
  EXPECT_EQ(exec_ping(), ran);
}

TEST(RespDb, RenameCopyMsetnx) {
  Server s;
  Server::Conn c(s);
  EXPECT_EQ(c.Feed(Cmd({"SET", "a", "v", "EX", "100"}) + Cmd({"RENAME", "a", "b"}) +
                   Cmd({"GET", "a"}) + Cmd({"GET", "b"}) + Cmd({"TTL", "b"}) +
                   Cmd({"RENAME", "nope", "x"}) + Cmd({"RENAME", "b", "b"})),
            "+OK\r\n+OK\r\n$-1\r\n$1\r\nv\r\n:100\r\n-ERR no such key\r\n+OK\r\n");
  EXPECT_EQ(
      c.Feed(Cmd({"SET", "c", "w"}) + Cmd({"RENAMENX", "b", "c"}) + Cmd({"RENAMENX", "b", "d"}) +
             Cmd({"GET", "d"}) + Cmd({"RENAMENX", "nope", "x"})),
      "+OK\r\n:0\r\n:1\r\n$1\r\nv\r\n-ERR no such key\r\n");
  EXPECT_EQ(c.Feed(Cmd({"COPY", "d", "e"}) + Cmd({"COPY", "d", "c"}) +
                   Cmd({"COPY", "d", "c", "REPLACE"}) + Cmd({"GET", "c"}) +
                   Cmd({"COPY", "d", "d"}) + Cmd({"COPY", "nope", "f"}) +
                   Cmd({"COPY", "d", "d", "DB", "2"}) + Cmd({"COPY", "d", "d", "DB", "16"}) +
                   Cmd({"COPY", "d", "d", "DB", "x"}) + Cmd({"COPY", "d", "g", "BOGUS"})),
            ":1\r\n:0\r\n:1\r\n$1\r\nv\r\n-ERR source and destination objects are the same\r\n"
            ":0\r\n:1\r\n-ERR DB index is out of range\r\n"
            "-ERR value is not an integer or out of range\r\n-ERR syntax error\r\n");
  EXPECT_EQ(c.Feed(Cmd({"SELECT", "2"}) + Cmd({"GET", "d"}) + Cmd({"TTL", "d"})),
            "+OK\r\n$1\r\nv\r\n:100\r\n");
  EXPECT_EQ(c.Feed(Cmd({"MSETNX", "m1", "1", "m2", "2"}) + Cmd({"MSETNX", "m3", "3", "m1", "x"}) +
                   Cmd({"MGET", "m1", "m2", "m3"}) + Cmd({"MSETNX", "m4"}) +
                   Cmd({"MSETNX", "m4", "4", "m5"})),
            ":1\r\n:0\r\n*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n"
            "-ERR wrong number of arguments for 'msetnx' command\r\n"
            "-ERR wrong number of arguments for 'msetnx' command\r\n");
  // An expired source is absent; an expired destination is overwritten.
  EXPECT_EQ(c.Feed(Cmd({"SET", "old", "1", "PX", "10"}) + Cmd({"SET", "src", "2"})),
            "+OK\r\n+OK\r\n");
  s.now_ms += 20;
  EXPECT_EQ(c.Feed(Cmd({"RENAME", "old", "x"}) + Cmd({"RENAMENX", "src", "old"}) +
                   Cmd({"GET", "old"}) + Cmd({"MSETNX", "old", "3"})),
            "-ERR no such key\r\n:1\r\n$1\r\n2\r\n:0\r\n");
  // Inside MULTI they are part of EXEC's transaction.
  EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"RENAME", "old", "new"}) + Cmd({"COPY", "new", "n2"}) +
                   Cmd({"EXEC"}) + Cmd({"MGET", "old", "new", "n2"})),
            "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n:1\r\n"
            "*3\r\n$-1\r\n$1\r\n2\r\n$1\r\n2\r\n");
}

TEST(RespDb, MoveToAnotherDatabase) {
  Server s;
  Server::Conn c(s);
  // Moved with its expiry; a missing key, or one present in the target,
  // stays where it is (0).
  EXPECT_EQ(c.Feed(Cmd({"SET", "k", "v", "EX", "100"}) + Cmd({"MOVE", "k", "3"}) +
                   Cmd({"EXISTS", "k"}) + Cmd({"MOVE", "k", "3"}) + Cmd({"SELECT", "3"}) +
                   Cmd({"GET", "k"}) + Cmd({"TTL", "k"}) + Cmd({"DBSIZE"})),
            "+OK\r\n:1\r\n:0\r\n:0\r\n+OK\r\n$1\r\nv\r\n:100\r\n:1\r\n");
  EXPECT_EQ(c.Feed(Cmd({"SET", "k2", "here"}) + Cmd({"SELECT", "0"}) + Cmd({"SET", "k2", "there"}) +
                   Cmd({"MOVE", "k2", "3"}) + Cmd({"GET", "k2"}) + Cmd({"DBSIZE"})),
            "+OK\r\n+OK\r\n+OK\r\n:0\r\n$5\r\nthere\r\n:1\r\n");
  // Redis's errors.
  EXPECT_EQ(c.Feed(Cmd({"MOVE", "k2", "0"}) + Cmd({"MOVE", "k2", "16"}) + Cmd({"MOVE", "k2", "x"}) +
                   Cmd({"MOVE", "k2"})),
            "-ERR source and destination objects are the same\r\n"
            "-ERR DB index is out of range\r\n"
            "-ERR value is not an integer or out of range\r\n"
            "-ERR wrong number of arguments for 'move' command\r\n");
  // A collection goes whole; inside MULTI it is part of EXEC's transaction.
  EXPECT_EQ(c.Feed(Cmd({"RPUSH", "l", "a", "b"}) + Cmd({"MULTI"}) + Cmd({"MOVE", "l", "5"}) +
                   Cmd({"EXEC"}) + Cmd({"EXISTS", "l"}) + Cmd({"SELECT", "5"}) +
                   Cmd({"LRANGE", "l", "0", "-1"})),
            ":2\r\n+OK\r\n+QUEUED\r\n*1\r\n:1\r\n:0\r\n+OK\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n");
}

TEST(RespDb, WatchedKeysAreBounded) {
  Server s;
  Server::Conn c(s);
  // WATCH of keys [from, to), in one request.
  auto watch = [](size_t from, size_t to) {
    std::string w = "*";
    w.append(std::to_string(to - from + 1)).append("\r\n$5\r\nWATCH\r\n");
    for (size_t i = from; i < to; ++i) {
      const std::string k = std::to_string(i);
      w.append("$").append(std::to_string(k.size())).append("\r\n").append(k).append("\r\n");
    }
    return w;
  };
  const size_t n = RespTransaction::kMaxWatchedKeys;
  EXPECT_EQ(c.Feed(watch(0, n / 2) + watch(n / 2, n)), "+OK\r\n+OK\r\n");
  EXPECT_EQ(c.Feed(Cmd({"WATCH", "one-more"})), "-ERR too many watched keys (at most 65536)\r\n");
  EXPECT_EQ(c.Feed(Cmd({"UNWATCH"}) + Cmd({"WATCH", "one-more"})), "+OK\r\n+OK\r\n");
}

TEST(RespDb, MultiScriptCutAnywhere) {
  const std::string script = Cmd({"MULTI"}) + Cmd({"SET", "a", "1"}) + Cmd({"SELECT", "1"}) +
                             Cmd({"INCR", "a"}) + Cmd({"EXEC"}) + Cmd({"GET", "a"});
  const std::string expected =
      "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n+OK\r\n+OK\r\n:1\r\n$1\r\n1\r\n";
  for (size_t cut = 0; cut <= script.size(); ++cut) {
    Server s;
    Server::Conn c(s);
    std::string out = c.Feed(script.substr(0, cut));
    out += c.Feed(script.substr(cut));
    ASSERT_EQ(out, expected) << "cut at " << cut;
  }
}

TEST(RespDb, DbsizeAndKeyspaceInfoFollowWritesOfEveryType) {
  Server s;
  Server::Conn c(s);
  auto keyspace = [&c] {
    const std::string info = c.Feed(Cmd({"INFO", "keyspace"}));
    const size_t at = info.find("db0:");
    return at == std::string::npos ? std::string("none")
                                   : info.substr(at, info.find("\r\n", at) - at);
  };
  EXPECT_EQ(
      c.Feed(Cmd({"SET", "a", "1"}) + Cmd({"HSET", "h", "f", "v"}) + Cmd({"RPUSH", "l", "x"}) +
             Cmd({"SADD", "s", "m"}) + Cmd({"ZADD", "z", "1", "m"}) + Cmd({"EXPIRE", "a", "100"}) +
             Cmd({"EXPIRE", "h", "100"}) + Cmd({"DBSIZE"})),
      "+OK\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n:5\r\n");
  EXPECT_EQ(keyspace(), "db0:keys=5,expires=2,avg_ttl=0");
  // PERSIST, removals of a last element, DEL, RENAME over a key.
  EXPECT_EQ(c.Feed(Cmd({"PERSIST", "a"}) + Cmd({"LPOP", "l"}) + Cmd({"SREM", "s", "m"}) +
                   Cmd({"DEL", "z"}) + Cmd({"RENAME", "h", "a"}) + Cmd({"DBSIZE"})),
            ":1\r\n$1\r\nx\r\n:1\r\n:1\r\n+OK\r\n:1\r\n");
  EXPECT_EQ(keyspace(), "db0:keys=1,expires=1,avg_ttl=0");
  // Inside EXEC, DBSIZE sees the transaction's own writes; after it, the
  // counters have them.
  EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"SET", "x", "1"}) + Cmd({"SET", "y", "1"}) +
                   Cmd({"DBSIZE"}) + Cmd({"EXEC"}) + Cmd({"DBSIZE"})),
            "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n+OK\r\n+OK\r\n:3\r\n:3\r\n");
  // A key that expired counts until it is removed (as in Redis); reading
  // it removes it.
  EXPECT_EQ(c.Feed(Cmd({"SET", "e", "1", "PX", "100"})), "+OK\r\n");
  s.now_ms += 1000;
  EXPECT_EQ(c.Feed(Cmd({"DBSIZE"}) + Cmd({"GET", "e"}) + Cmd({"DBSIZE"})), ":4\r\n$-1\r\n:3\r\n");
  EXPECT_EQ(keyspace(), "db0:keys=3,expires=1,avg_ttl=0");
  EXPECT_EQ(c.Feed(Cmd({"FLUSHALL"}) + Cmd({"DBSIZE"})), "+OK\r\n:0\r\n");
  EXPECT_EQ(keyspace(), "none");
}

TEST(RespDb, MaxmemoryRefusesDenyOomCommandsAsRedis) {
  Server s;
  Server::Conn c(s), admin(s);
  EXPECT_EQ(c.Feed(Cmd({"SET", "k", "v"}) + Cmd({"CONFIG", "GET", "maxmemory"})),
            "+OK\r\n*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n");
  // The map store's used memory is its keys' and values' bytes: over 1.
  const std::string oom = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
  EXPECT_EQ(admin.Feed(Cmd({"CONFIG", "SET", "maxmemory", "1"})), "+OK\r\n");
  // Commands flagged deny-oom are refused; reads and deletions run.
  EXPECT_EQ(c.Feed(Cmd({"SET", "a", "1"}) + Cmd({"LPUSH", "l", "x"}) + Cmd({"GET", "k"}) +
                   Cmd({"EXISTS", "a", "l"}) + Cmd({"INCR", "k"})),
            oom + oom + "$1\r\nv\r\n:0\r\n" + oom);
  EXPECT_NE(c.Feed(Cmd({"INFO", "memory"})).find("maxmemory:1\r\n"), std::string::npos);
  // Inside MULTI, everything but EXEC/DISCARD is refused, and DISCARD works.
  EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"SET", "x", "1"}) + Cmd({"GET", "x"}) + Cmd({"DISCARD"}) +
                   Cmd({"PING"})),
            "+OK\r\n" + oom + oom + "+OK\r\n+PONG\r\n");
  // An OOM while queueing fails EXEC even once memory is back.
  EXPECT_EQ(admin.Feed(Cmd({"CONFIG", "SET", "maxmemory", "0"})), "+OK\r\n");
  EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"SET", "foo1", "1"})), "+OK\r\n+QUEUED\r\n");
  EXPECT_EQ(admin.Feed(Cmd({"CONFIG", "SET", "maxmemory", "1"})), "+OK\r\n");
  EXPECT_EQ(c.Feed(Cmd({"LPUSH", "l", "x"})), oom);
  EXPECT_EQ(admin.Feed(Cmd({"CONFIG", "SET", "maxmemory", "0"})), "+OK\r\n");
  EXPECT_EQ(c.Feed(Cmd({"SET", "foo2", "2"}) + Cmd({"EXEC"}) + Cmd({"EXISTS", "foo1", "foo2"})),
            "+QUEUED\r\n-EXECABORT Transaction discarded because of previous errors.\r\n:0\r\n");
  // EXEC of reads only runs over the limit; EXEC with a deny-oom command
  // is aborted with the reason, and the client leaves MULTI.
  EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"GET", "k"}) + Cmd({"PING"})),
            "+OK\r\n+QUEUED\r\n+QUEUED\r\n");
  EXPECT_EQ(admin.Feed(Cmd({"CONFIG", "SET", "maxmemory", "1"})), "+OK\r\n");
  EXPECT_EQ(c.Feed(Cmd({"EXEC"})), "*2\r\n$1\r\nv\r\n+PONG\r\n");
  EXPECT_EQ(admin.Feed(Cmd({"CONFIG", "SET", "maxmemory", "0"})), "+OK\r\n");
  EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"SET", "x", "1"}) + Cmd({"GET", "x"})),
            "+OK\r\n+QUEUED\r\n+QUEUED\r\n");
  EXPECT_EQ(admin.Feed(Cmd({"CONFIG", "SET", "maxmemory", "1"})), "+OK\r\n");
  EXPECT_EQ(c.Feed(Cmd({"EXEC"}) + Cmd({"EXEC"}) + Cmd({"EXISTS", "x"})),
            "-EXECABORT Transaction discarded because of: OOM command not allowed when used "
            "memory > 'maxmemory'.\r\n-ERR EXEC without MULTI\r\n:0\r\n");
  // A limit above the used memory lets writes run again; units as Redis.
  EXPECT_EQ(admin.Feed(Cmd({"CONFIG", "SET", "maxmemory", "1gb"}) +
                       Cmd({"CONFIG", "GET", "maxmemory"}) + Cmd({"SET", "a", "1"})),
            "+OK\r\n*2\r\n$9\r\nmaxmemory\r\n$10\r\n1073741824\r\n+OK\r\n");
  EXPECT_EQ(admin.Feed(Cmd({"CONFIG", "SET", "maxmemory", "bla"}) +
                       Cmd({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}) +
                       Cmd({"CONFIG", "SET", "maxmemory-policy", "noeviction"})),
            "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must "
            "be a memory value\r\n-ERR CONFIG SET failed (possibly related to argument "
            "'maxmemory-policy') - pmserver cannot change it\r\n+OK\r\n");
}

TEST(RespDb, MemoryValuesParseAsRedis) {
  uint64_t n = 0;
  EXPECT_TRUE(ParseMemoryValue("0", &n) && n == 0);
  EXPECT_TRUE(ParseMemoryValue("100", &n) && n == 100);
  EXPECT_TRUE(ParseMemoryValue("7B", &n) && n == 7);
  EXPECT_TRUE(ParseMemoryValue("2k", &n) && n == 2000);
  EXPECT_TRUE(ParseMemoryValue("2KB", &n) && n == 2048);
  EXPECT_TRUE(ParseMemoryValue("3m", &n) && n == 3000000);
  EXPECT_TRUE(ParseMemoryValue("3mb", &n) && n == 3u << 20);
  EXPECT_TRUE(ParseMemoryValue("1g", &n) && n == 1000000000);
  EXPECT_TRUE(ParseMemoryValue("4Gb", &n) && n == uint64_t{4} << 30);
  for (std::string_view bad :
       {"", "-1", "1.5mb", "mb", "1tb", " 1", "1 ", "99999999999gb", "18446744073709551616"}) {
    EXPECT_FALSE(ParseMemoryValue(bad, &n)) << bad;
  }
}

TEST(RespDb, SaveAndShutdownInsideMultiAbortExec) {
  Server s;
  Server::Conn c(s);
  for (std::string_view cmd : {"SAVE", "SHUTDOWN"}) {
    EXPECT_EQ(c.Feed(Cmd({"MULTI"}) + Cmd({"SET", "foo", "bar"}) + Cmd({cmd}) + Cmd({"EXEC"}) +
                     Cmd({"GET", "foo"})),
              "+OK\r\n+QUEUED\r\n-ERR Command not allowed inside a transaction\r\n"
              "-EXECABORT Transaction discarded because of previous errors.\r\n$-1\r\n")
        << cmd;
  }
  // Outside MULTI: SAVE has nothing to do (every write is durable), and a
  // client cannot stop the server.
  EXPECT_EQ(c.Feed(Cmd({"SAVE"}) + Cmd({"SHUTDOWN", "NOSAVE"}) + Cmd({"PING"})),
            "+OK\r\n-ERR SHUTDOWN is not served: stop pmserver with SIGTERM\r\n+PONG\r\n");
}

#ifdef PMINDEX_SERVER_TEST_KV
TEST(RespDb, ConcurrentExecsAreAllOrNothingOverKvStore) {
  // Clients run MULTI INCR x INCR y EXEC (and WATCH-free INCRs of x
  // alone) at once over KvStore: EXEC's conflicts are retried inside, so
  // every EXEC applies both increments once, and x - y counts the lone
  // INCRs.
  auto kv = KvStore::CreateInMemory("lbtree");
  PMINDEX_ASSERT_OK(kv);
  {
    KvBackedStore store(*kv.value());
    Server s(&store);
    constexpr int kThreads = 4, kExecs = 60;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&s, t] {
        Server::Conn c(s);
        for (int i = 0; i < kExecs; ++i) {
          const std::string r =
              c.Feed(Cmd({"MULTI"}) + Cmd({"INCR", "x"}) + Cmd({"INCR", "y"}) + Cmd({"EXEC"}));
          ASSERT_EQ(r.substr(0, 28), "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:") << r;
          if (t == 0) {
            ASSERT_EQ(c.Feed(Cmd({"INCR", "x"})).substr(0, 1), ":");
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    Server::Conn c(s);
    EXPECT_EQ(c.Feed(Cmd({"MGET", "x", "y"})),
              "*2\r\n$3\r\n" + std::to_string(kThreads * kExecs + kExecs) + "\r\n$3\r\n" +
                  std::to_string(kThreads * kExecs) + "\r\n");
  }
  PMINDEX_ASSERT_OK(kv.value()->Verify());
  PMINDEX_ASSERT_OK(kv.value()->Close());
}
#endif

}  // namespace
}  // namespace pmindex::server::testing
