// Cluster mode (cluster.h, resp_cluster_commands.cc): the map file's
// parsing and checks, installing a newer map, and what a RESP client sees:
// MOVED for a slot another node serves, CROSSSLOT, the CLUSTER replies,
// and the commands a cluster refuses; over the map store with databases.
#include "server/cluster.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <string>

#include "server/databases.h"
#include "server/key_slot.h"
#include "server/keyspace.h"
#include "server/resp_protocol.h"
#include "tests/server/map_store.h"
#include "tests/server/protocol_harness.h"
#include "tests/server/resp_encode.h"
#include "tests/support/status.h"

namespace pmindex::server::testing {
namespace {

const std::string kA(40, 'a');
const std::string kB(40, 'b');
const std::string kC(40, 'c');

std::string TwoNodes(int epoch = 1) {
  return "# two nodes\nepoch " + std::to_string(epoch) + "\nnode " + kA +
         " 127.0.0.1:7001 0-8191\nnode " + kB + " 127.0.0.1:7002 8192-16383\n";
}

// A key whose slot is in [lo, hi], with `prefix`.
std::string KeyIn(uint16_t lo, uint16_t hi, const std::string& prefix = "k") {
  for (int i = 0;; ++i) {
    std::string k = prefix + std::to_string(i);
    const uint16_t s = KeySlot(k);
    if (s >= lo && s <= hi) return k;
  }
}

// A PTTL reply of at most `max_ms` ms and more than a few seconds less (the
// node's clock is the wall clock, which moves while the test runs).
void ExpectTtlWithin(const std::string& reply, int64_t max_ms) {
  ASSERT_EQ(reply.rfind(":", 0), 0u) << reply;
  const int64_t ttl = std::stoll(reply.substr(1));
  EXPECT_LE(ttl, max_ms) << reply;
  EXPECT_GT(ttl, max_ms - 5000) << reply;
}

TEST(ClusterMap, ParsesAndMergesRanges) {
  auto m = ClusterMap::Parse("epoch 7\nnode " + kA + " h1:1 0-99 100-8191\r\nnode " + kB +
                             " h2:2 8192-16382,16383\nnode " + kC + " h3:3\n");
  PMINDEX_ASSERT_OK(m);
  EXPECT_EQ(m->epoch, 7u);
  ASSERT_EQ(m->nodes.size(), 3u);
  EXPECT_EQ(m->nodes[0].ranges, (std::vector<std::pair<uint16_t, uint16_t>>{{0, 8191}}));
  EXPECT_EQ(m->nodes[1].ranges, (std::vector<std::pair<uint16_t, uint16_t>>{{8192, 16383}}));
  EXPECT_TRUE(m->nodes[2].ranges.empty());  // a node may serve no slot
  EXPECT_EQ(m->owner[8191], 0);
  EXPECT_EQ(m->owner[8192], 1);
  EXPECT_EQ(m->Find(kC), 2);
  EXPECT_EQ(m->Find("x"), -1);
  // Format gives back a map that parses to the same.
  auto again = ClusterMap::Parse(m->Format());
  PMINDEX_ASSERT_OK(again);
  EXPECT_EQ(again->Format(), m->Format());
  EXPECT_EQ(again->owner, m->owner);
}

TEST(ClusterMap, RefusesBadMapsNamingTheLine) {
  const std::string a = "node " + kA + " h:1 ";
  const std::string b = "node " + kB + " h:2 ";
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"node " + kA + " h:1 0-16383\n", "no 'epoch N' line"},
      {"epoch 0\n" + a + "0-16383\n", "line 1: expected 'epoch N' with N > 0"},
      {"epoch 1\nepoch 2\n", "line 2: a second epoch line"},
      {"epoch 1\n", "no node"},
      {"epoch 1\n" + a + "0-16382\n", "slot 16383 is served by no node"},
      {"epoch 1\n" + a + "0-9000\n" + b + "9000-16383\n", "line 3: slot 9000 is given to two"},
      {"epoch 1\n" + a + "0-8191\nnode " + kA + " h:2 8192-16383\n", "line 3: node id"},
      {"epoch 1\n" + a + "0-8191\nnode " + kB + " h:1 8192-16383\n", "line 3: h:1 appears twice"},
      {"epoch 1\nnode ABC h:1 0-16383\n", "40 lower-case hex digits"},
      {"epoch 1\n" + a + "0-16384\n", "bad slots '0-16384'"},
      {"epoch 1\n" + a + "9-3\n", "bad slots '9-3'"},
      {"epoch 1\nnode " + kA + " h 0-16383\n", "expected HOST:PORT"},
      {"epoch 1\nnode " + kA + " h:70000 0-16383\n", "expected HOST:PORT"},
      {"epoch 1\nslots 0-16383\n", "line 2: unknown line 'slots'"},
  };
  for (const Case& c : cases) {
    auto m = ClusterMap::Parse(c.text);
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_TRUE(m.status().is_invalid_argument()) << c.text;
    EXPECT_NE(m.status().message().find(c.expect), std::string::npos)
        << c.text << " -> " << m.status().ToString();
  }
}

TEST(ClusterMap, InstallNeedsAHigherEpochAndRewritesTheFile) {
  const std::string path = ::testing::TempDir() + "/cluster_install.map";
  {
    std::ofstream f(path);
    f << TwoNodes(3);
  }
  auto loaded = Cluster::Load(path, kB);
  PMINDEX_ASSERT_OK(loaded);
  Cluster& c = **loaded;
  EXPECT_EQ(c.map()->epoch, 3u);
  // Not newer, not naming this node, or not a map: refused, map kept.
  EXPECT_TRUE(c.Install(TwoNodes(3)).is_invalid_argument());
  EXPECT_TRUE(c.Install("epoch 9\nnode " + kA + " h:1 0-16383\n").is_invalid_argument());
  EXPECT_TRUE(c.Install("garbage").is_invalid_argument());
  EXPECT_EQ(c.map()->epoch, 3u);
  // Newer: installed, and what a restart reads.
  const std::string moved = "epoch 4\nnode " + kA + " 127.0.0.1:7001 0-99\nnode " + kB +
                            " 127.0.0.1:7002 100-16383\n";
  PMINDEX_ASSERT_OK(c.Install(moved));
  EXPECT_EQ(c.map()->owner[50], 0);
  EXPECT_EQ(c.map()->owner[100], 1);
  auto reread = Cluster::Load(path, kB);
  PMINDEX_ASSERT_OK(reread);
  EXPECT_EQ((*reread)->map()->epoch, 4u);
  EXPECT_EQ((*reread)->map()->owner, c.map()->owner);
  // A node the map does not name cannot start on it.
  EXPECT_TRUE(Cluster::Load(path, kC).status().is_invalid_argument());
  EXPECT_TRUE(Cluster::Load(path + ".missing", kA).status().code() == Status::Code::kIOError);
  std::remove(path.c_str());
}


TEST(ClusterMap, MovesAreKeptInTheNodesFileAndEndedByTheMapThatCompletesThem) {
  const std::string path = ::testing::TempDir() + "/cluster_moves.map";
  {
    std::ofstream f(path);
    f << TwoNodes(1);
  }
  auto a = Cluster::Load(path, kA);
  PMINDEX_ASSERT_OK(a);
  Cluster& c = **a;
  using State = Cluster::SlotState;
  // Migrating needs a slot this node serves; importing one it does not.
  EXPECT_EQ(c.SetSlot(9000, State::kMigrating, kB).message(),
            "I'm not the owner of hash slot 9000");
  EXPECT_EQ(c.SetSlot(10, State::kImporting, kB).message(),
            "I'm already the owner of hash slot 10");
  EXPECT_EQ(c.SetSlot(10, State::kMigrating, kC).message(), "I don't know about node " + kC);
  EXPECT_EQ(c.SetSlot(10, State::kMigrating, kA).message(),
            "I can't migrate or import a slot to myself");
  PMINDEX_ASSERT_OK(c.SetSlot(10, State::kMigrating, kB));
  PMINDEX_ASSERT_OK(c.SetSlot(11, State::kMigrating, kB));
  PMINDEX_ASSERT_OK(c.SetSlot(9000, State::kImporting, kB));
  // Durable in the file: a restarted node keeps redirecting as before.
  auto again = Cluster::Load(path, kA);
  PMINDEX_ASSERT_OK(again);
  EXPECT_EQ((*again)->map()->migrating[10], 1);
  EXPECT_EQ((*again)->map()->migrating[11], 1);
  EXPECT_EQ((*again)->map()->importing[9000], 1);
  EXPECT_NE((*again)->map()->Format().find("migrating 10-11 " + kB + "\n"), std::string::npos);
  // A pushed map may not carry moves (they are each node's own).
  EXPECT_TRUE(c.Install("epoch 5\nnode " + kA + " h:1 0-16383\nnode " + kB +
                        " h:2\nmigrating 3 " + kB + "\n")
                  .is_invalid_argument());
  // A map giving slot 10 to kB and slot 9000 to kA ends those moves;
  // slot 11's goes on.
  const std::string next = "epoch 2\nnode " + kA + " 127.0.0.1:7001 0-9 11-8191 9000\nnode " +
                           kB + " 127.0.0.1:7002 10 8192-8999 9001-16383\n";
  PMINDEX_ASSERT_OK(c.Install(next));
  EXPECT_EQ(c.map()->migrating[10], ClusterMap::kNoOwner);
  EXPECT_EQ(c.map()->migrating[11], 1);
  EXPECT_EQ(c.map()->importing[9000], ClusterMap::kNoOwner);
  PMINDEX_ASSERT_OK(c.SetSlot(11, State::kStable, ""));
  EXPECT_EQ(c.map()->migrating[11], ClusterMap::kNoOwner);
  // A file whose moves do not fit its owners is refused at start.
  {
    std::ofstream f(path);
    f << TwoNodes(1) << "importing 5 " << kB << "\n";
  }
  EXPECT_NE(Cluster::Load(path, kA).status().message().find("slot 5 is importing"),
            std::string::npos);
  std::remove(path.c_str());
}

// One node (kA, slots 0-8191) of a two-node cluster, over databases on the
// map store.
class Node {
 public:
  explicit Node(bool cluster_mode = true)
      : cluster_(std::make_shared<const ClusterMap>(ClusterMap::Parse(TwoNodes()).value()), kA,
                 ""),
        shared_(RespSettings{.cluster = cluster_mode ? &cluster_ : nullptr}) {
    dbs_ = std::move(Databases::Open(map_, 16).value());
    keyspace_ = std::make_unique<Keyspace>(*dbs_, stats_);
    protocol_ = std::make_unique<RespProtocol>(keyspace_->db(0), shared_);
  }
  std::string Feed(std::string_view bytes) {
    std::string out;
    buffer_.append(bytes);
    buffer_.erase(0, protocol_->Consume(buffer_, &out));
    return out;
  }
  Cluster& cluster() { return cluster_; }

 private:
  Cluster cluster_;
  RespShared shared_;
  MapStore map_;
  Stats stats_;
  std::unique_ptr<Databases> dbs_;
  std::unique_ptr<Keyspace> keyspace_;
  std::unique_ptr<RespProtocol> protocol_;
  std::string buffer_;
};

TEST(ClusterResp, RedirectsKeysOfOtherNodesAndRefusesCrossSlot) {
  Node n;
  const std::string mine = KeyIn(0, 8191), theirs = KeyIn(8192, 16383);
  const std::string moved = "-MOVED " + std::to_string(KeySlot(theirs)) + " 127.0.0.1:7002\r\n";
  EXPECT_EQ(n.Feed(Cmd({"SET", mine, "v"}) + Cmd({"GET", mine})), "+OK\r\n$1\r\nv\r\n");
  EXPECT_EQ(n.Feed(Cmd({"SET", theirs, "v"}) + Cmd({"GET", theirs})), moved + moved);
  // Keys of one slot (a hash tag) are fine together; of two slots never,
  // even when this node serves both.
  EXPECT_EQ(n.Feed(Cmd({"MSET", "{t}1", "a", "{t}2", "b"})),
            KeySlot("t") <= 8191 ? "+OK\r\n" : "-MOVED " + std::to_string(KeySlot("t")) +
                                                   " 127.0.0.1:7002\r\n");
  const std::string mine2 = KeyIn(0, 8191, "j");
  ASSERT_NE(KeySlot(mine), KeySlot(mine2));
  EXPECT_EQ(n.Feed(Cmd({"MGET", mine, mine2})),
            "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
  EXPECT_EQ(n.Feed(Cmd({"DEL", mine, theirs})),
            "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
  // Inside MULTI a redirected command is a queueing error: EXEC aborts.
  EXPECT_EQ(n.Feed(Cmd({"MULTI"}) + Cmd({"SET", mine, "w"}) + Cmd({"GET", theirs}) +
                   Cmd({"EXEC"}) + Cmd({"GET", mine})),
            "+OK\r\n+QUEUED\r\n" + moved +
                "-EXECABORT Transaction discarded because of previous errors.\r\n$1\r\nv\r\n");
  // Commands without keys run anywhere; a cluster serves database 0 only.
  EXPECT_EQ(n.Feed(Cmd({"PING"}) + Cmd({"SELECT", "0"}) + Cmd({"SELECT", "1"}) +
                   Cmd({"SWAPDB", "0", "1"})),
            "+PONG\r\n+OK\r\n-ERR SELECT is not allowed in cluster mode\r\n"
            "-ERR SWAPDB is not allowed in cluster mode\r\n");
}

TEST(ClusterResp, ClusterCommandsDescribeTheMap) {
  Node n;
  EXPECT_EQ(n.Feed(Cmd({"CLUSTER", "MYID"})), "$40\r\n" + kA + "\r\n");
  EXPECT_EQ(n.Feed(Cmd({"CLUSTER", "KEYSLOT", "foo"}) + Cmd({"CLUSTER", "KEYSLOT", "{foo}x"})),
            ":12182\r\n:12182\r\n");
  EXPECT_EQ(n.Feed(Cmd({"CLUSTER", "SLOTS"})),
            "*2\r\n"
            "*3\r\n:0\r\n:8191\r\n*4\r\n$9\r\n127.0.0.1\r\n:7001\r\n$40\r\n" +
                kA +
                "\r\n*0\r\n"
                "*3\r\n:8192\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:7002\r\n$40\r\n" +
                kB + "\r\n*0\r\n");
  const std::string nodes = n.Feed(Cmd({"CLUSTER", "NODES"}));
  EXPECT_NE(nodes.find(kA + " 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-8191\n"),
            std::string::npos)
      << nodes;
  EXPECT_NE(nodes.find(kB + " 127.0.0.1:7002@17002 master - 0 0 1 connected 8192-16383\n"),
            std::string::npos)
      << nodes;
  const std::string info = n.Feed(Cmd({"CLUSTER", "INFO"}));
  EXPECT_NE(info.find("cluster_state:ok\r\n"), std::string::npos) << info;
  EXPECT_NE(info.find("cluster_known_nodes:2\r\n"), std::string::npos) << info;
  EXPECT_NE(n.Feed(Cmd({"INFO", "cluster"})).find("cluster_enabled:1"), std::string::npos);
  const std::string shards = n.Feed(Cmd({"CLUSTER", "SHARDS"}));
  EXPECT_EQ(shards.rfind("*2\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:8191\r\n$5\r\nnodes\r\n", 0), 0u)
      << shards;
  EXPECT_EQ(n.Feed(Cmd({"READONLY"}) + Cmd({"READWRITE"}) + Cmd({"ASKING"})),
            "+OK\r\n+OK\r\n+OK\r\n");
}

TEST(ClusterResp, KeysInSlotAreOneRangeOfTheStore) {
  Node n;
  // Three keys sharing a slot through a hash tag, one elsewhere.
  const std::string tag = KeyIn(0, 8191, "t");
  const uint16_t slot = KeySlot(tag);
  const std::string k1 = "{" + tag + "}1", k2 = "{" + tag + "}2", k3 = "{" + tag + "}3";
  const std::string other = KeyIn(0, 8191, "o");
  ASSERT_NE(KeySlot(other), slot);
  EXPECT_EQ(n.Feed(Cmd({"MSET", k2, "b", k1, "a", k3, "c"}) + Cmd({"SET", other, "x"})),
            "+OK\r\n+OK\r\n");
  const std::string s = std::to_string(slot);
  EXPECT_EQ(n.Feed(Cmd({"CLUSTER", "COUNTKEYSINSLOT", s})), ":3\r\n");
  EXPECT_EQ(n.Feed(Cmd({"CLUSTER", "GETKEYSINSLOT", s, "2"})),
            "*2\r\n$" + std::to_string(k1.size()) + "\r\n" + k1 + "\r\n$" +
                std::to_string(k2.size()) + "\r\n" + k2 + "\r\n");
  EXPECT_EQ(n.Feed(Cmd({"CLUSTER", "COUNTKEYSINSLOT", "16384"}) +
                   Cmd({"CLUSTER", "GETKEYSINSLOT", s, "-1"})),
            "-ERR Invalid slot\r\n-ERR Invalid number of keys\r\n");
}

TEST(ClusterResp, SetMapMovesSlotsAtOnce) {
  Node n;
  const std::string k = KeyIn(8192, 16383);
  const std::string slot = std::to_string(KeySlot(k));
  EXPECT_EQ(n.Feed(Cmd({"GET", k})), "-MOVED " + slot + " 127.0.0.1:7002\r\n");
  EXPECT_EQ(n.Feed(Cmd({"PMCLUSTER", "SETMAP", TwoNodes(1)})),
            "-ERR the map's epoch 1 is not above this node's 1\r\n");
  const std::string all_mine = "epoch 2\nnode " + kA + " 127.0.0.1:7001 0-16383\nnode " + kB +
                               " 127.0.0.1:7002\n";
  EXPECT_EQ(n.Feed(Cmd({"PMCLUSTER", "SETMAP", all_mine})), "+OK\r\n");
  EXPECT_EQ(n.Feed(Cmd({"GET", k})), "$-1\r\n");
  EXPECT_EQ(n.cluster().map()->epoch, 2u);
}


TEST(ClusterResp, MovingSlotAsksForKeysAlreadyGone) {
  Node n;
  const std::string tag = KeyIn(0, 8191, "m");
  const std::string slot = std::to_string(KeySlot(tag));
  const std::string here = "{" + tag + "}here", gone = "{" + tag + "}gone";
  EXPECT_EQ(n.Feed(Cmd({"SET", here, "1"})), "+OK\r\n");
  EXPECT_EQ(n.Feed(Cmd({"CLUSTER", "SETSLOT", slot, "MIGRATING", kB})), "+OK\r\n");
  const std::string ask = "-ASK " + slot + " 127.0.0.1:7002\r\n";
  // Keys still here are served; a key not here is asked of the target;
  // a request over both must wait for the move.
  EXPECT_EQ(n.Feed(Cmd({"GET", here}) + Cmd({"GET", gone}) + Cmd({"SET", gone, "x"}) +
                   Cmd({"MGET", here, gone})),
            "$1\r\n1\r\n" + ask + ask +
                "-TRYAGAIN Multiple keys request during rehashing of slot\r\n");
  EXPECT_EQ(n.Feed(Cmd({"CLUSTER", "SETSLOT", slot, "STABLE"}) + Cmd({"GET", gone})),
            "+OK\r\n$-1\r\n");
  // Importing: served only to a client that sent ASKING, for one command.
  const std::string theirs = KeyIn(8192, 16383);
  const std::string tslot = std::to_string(KeySlot(theirs));
  const std::string moved = "-MOVED " + tslot + " 127.0.0.1:7002\r\n";
  EXPECT_EQ(n.Feed(Cmd({"CLUSTER", "SETSLOT", tslot, "IMPORTING", kB}) + Cmd({"SET", theirs, "v"}) +
                   Cmd({"ASKING"}) + Cmd({"SET", theirs, "v"}) + Cmd({"GET", theirs}) +
                   Cmd({"ASKING"}) + Cmd({"GET", theirs})),
            "+OK\r\n" + moved + "+OK\r\n+OK\r\n" + moved + "+OK\r\n$1\r\nv\r\n");
  // EXEC is routed again: a queued key that moved away meanwhile aborts it.
  EXPECT_EQ(n.Feed(Cmd({"MULTI"}) + Cmd({"SET", gone, "y"})), "+OK\r\n+QUEUED\r\n");
  PMINDEX_ASSERT_OK(n.cluster().SetSlot(KeySlot(tag), Cluster::SlotState::kMigrating, kB));
  EXPECT_EQ(n.Feed(Cmd({"EXEC"}) + Cmd({"EXEC"})), ask + "-ERR EXEC without MULTI\r\n");
  PMINDEX_ASSERT_OK(n.cluster().SetSlot(KeySlot(tag), Cluster::SlotState::kStable, ""));
  EXPECT_EQ(n.Feed(Cmd({"GET", gone})), "$-1\r\n");
}

TEST(ClusterResp, DumpAndRestoreRoundTrip) {
  Node n;
  const std::string k = KeyIn(0, 8191, "d");
  const std::string k2 = "{" + k + "}2";
  EXPECT_EQ(n.Feed(Cmd({"SET", k, "value"})), "+OK\r\n");
  std::string dump = n.Feed(Cmd({"DUMP", k}));
  ASSERT_EQ(dump.rfind("$", 0), 0u) << dump;
  const std::string payload = dump.substr(dump.find("\r\n") + 2, dump.size() - dump.find("\r\n") - 4);
  EXPECT_EQ(n.Feed(Cmd({"RESTORE", k2, "0", payload}) + Cmd({"GET", k2}) +
                   Cmd({"RESTORE", k2, "0", payload}) + Cmd({"RESTORE", k2, "5000", payload, "REPLACE"}) +
                   Cmd({"PTTL", k2})).substr(0, 64),
            "+OK\r\n$5\r\nvalue\r\n-BUSYKEY Target key name already exists.\r\n+OK\r\n:");
  ExpectTtlWithin(n.Feed(Cmd({"PTTL", k2})), 5000);
  std::string damaged = payload;
  damaged[1] ^= 1;
  EXPECT_EQ(n.Feed(Cmd({"RESTORE", k2, "0", damaged, "REPLACE"}) + Cmd({"RESTORE", k2, "-1", payload}) +
                   Cmd({"DUMP", "{" + k + "}none"}) + Cmd({"MIGRATE", "127.0.0.1", "1", "", "0", "10", "KEYS", "{" + k + "}none"})),
            "-ERR DUMP payload version or checksum are wrong\r\n"
            "-ERR Invalid TTL value, must be >= 0\r\n$-1\r\n+NOKEY\r\n");
}

TEST(ClusterResp, DumpAndRestoreACollection) {
  Node n;
  const std::string k = KeyIn(0, 8191, "h");
  const std::string k2 = "{" + k + "}copy";
  EXPECT_EQ(n.Feed(Cmd({"HSET", k, "f1", "v1", "f2", "v2", "f3", ""})), ":3\r\n");
  const std::string dump = n.Feed(Cmd({"DUMP", k}));
  ASSERT_EQ(dump.rfind("$", 0), 0u) << dump;
  const size_t at = dump.find("\r\n") + 2;
  const std::string payload = dump.substr(at, dump.size() - at - 2);
  EXPECT_EQ(n.Feed(Cmd({"RESTORE", k2, "0", payload}) + Cmd({"HGETALL", k2}) + Cmd({"HLEN", k2}) +
                   Cmd({"TYPE", k2})),
            "+OK\r\n*6\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n$2\r\nf3\r\n$0\r\n"
            "\r\n:3\r\n+hash\r\n");
  // Over a string, with REPLACE and a TTL; without REPLACE it is refused.
  EXPECT_EQ(n.Feed(Cmd({"SET", k2, "s"}) + Cmd({"RESTORE", k2, "0", payload}) +
                   Cmd({"RESTORE", k2, "9000", payload, "REPLACE"}) + Cmd({"HGET", k2, "f2"}) +
                   Cmd({"PTTL", k2})).substr(0, 61),
            "+OK\r\n-BUSYKEY Target key name already exists.\r\n+OK\r\n$2\r\nv2\r\n:");
  ExpectTtlWithin(n.Feed(Cmd({"PTTL", k2})), 9000);
  // The copy is independent of the original.
  EXPECT_EQ(n.Feed(Cmd({"HDEL", k, "f1"}) + Cmd({"HGET", k2, "f1"})), ":1\r\n$2\r\nv1\r\n");
  std::string damaged = payload;
  damaged[2] ^= 1;
  EXPECT_EQ(n.Feed(Cmd({"RESTORE", k2, "0", damaged, "REPLACE"})),
            "-ERR DUMP payload version or checksum are wrong\r\n");
}

TEST(ClusterResp, OutsideClusterModeTheCommandsAreRefusedAsRedisDoes) {
  Node n(/*cluster_mode=*/false);
  const std::string off = "-ERR This instance has cluster support disabled\r\n";
  EXPECT_EQ(n.Feed(Cmd({"CLUSTER", "SLOTS"}) + Cmd({"CLUSTER", "INFO"}) + Cmd({"READONLY"}) +
                   Cmd({"ASKING"}) + Cmd({"PMCLUSTER", "MAP"})),
            off + off + off + off + off);
  // Every key is served here.
  EXPECT_EQ(n.Feed(Cmd({"SET", KeyIn(8192, 16383), "v"}) + Cmd({"SELECT", "1"})),
            "+OK\r\n+OK\r\n");
  EXPECT_NE(n.Feed(Cmd({"INFO", "cluster"})).find("cluster_enabled:0"), std::string::npos);
}

}  // namespace
}  // namespace pmindex::server::testing
