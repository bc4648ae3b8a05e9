// The blocking list commands over the Asio server with real sockets
// (resp_blocking.h): a parked client is served by another connection's
// push, waiters are served in order of arrival, a push inside MULTI/EXEC
// serves after the commit, a timeout answers a null (RESP2 and RESP3), a
// client that leaves while parked is forgotten, what a parked client
// pipelined runs after its answer, CLIENT UNBLOCK, BZPOPMIN, and RENAME
// onto an awaited key.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/databases.h"
#include "server/keyspace.h"
#include "server/server.h"
#include "tests/server/map_store.h"
#include "tests/server/resp_encode.h"
#include "tests/support/status.h"

namespace pmindex::server::testing {
namespace {

// Concatenates (GCC 12 misreads chains of operator+ on temporaries).
template <class... T>
std::string Cat(const T&... parts) {
  std::string s;
  (s.append(std::string_view(parts)), ...);
  return s;
}

std::string Bulk(const std::string& s) {
  return Cat("$", std::to_string(s.size()), "\r\n", s, "\r\n");
}
std::string Pair(const std::string& k, const std::string& v) {
  return Cat("*2\r\n", Bulk(k), Bulk(v));
}

// A client socket; every read has a deadline.
class Conn {
 public:
  explicit Conn(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Conn() { Close(); }
  bool ok() const { return ok_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  void Send(const std::string& s) {
    ASSERT_EQ(send(fd_, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
  }
  // Reads until `n` bytes came or `wait_ms` passed.
  std::string Read(size_t n, int wait_ms = 10000) {
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      char buf[4096];
      const ssize_t r = recv(fd_, buf, sizeof buf, 0);
      if (r <= 0) break;
      got.append(buf, static_cast<size_t>(r));
    }
    return got;
  }
  // Sends a command and reads a reply of the expected length.
  std::string Call(const std::vector<std::string>& args, size_t expect_bytes) {
    Send(Cmd(args));
    return Read(expect_bytes);
  }
  // True iff nothing arrives for a while (the client is parked).
  bool Silent() { return Read(1, 100).empty(); }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

class BlockingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = Databases::Open(store_, 16);
    PMINDEX_ASSERT_OK(d);
    dbs_ = std::move(d.value());
    keyspace_ = std::make_unique<Keyspace>(*dbs_, stats_);
    Server::Options o;
    o.memcached_port = Server::kPortOff;
    o.resp_port = Server::kPortAuto;
    o.threads = 2;  // parked and pushing clients on different loops too
    server_ = std::make_unique<Server>(keyspace_->db(0), o);
    PMINDEX_ASSERT_OK(server_->Listen());
    port_ = server_->port(Server::Wire::kResp);
    runner_ = std::thread([this] { server_->Run(); });
  }
  void TearDown() override {
    server_->Stop();
    runner_.join();
  }
  // Reads INFO clients until its blocked_clients is n (or 10 s passed).
  bool WaitBlocked(int n) {
    Conn c(port_);
    const std::string want = Cat("blocked_clients:", std::to_string(n), "\r\n");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      c.Send(Cmd({"INFO", "clients"}));
      // A bulk string: "$len\r\n", the text, "\r\n".
      std::string got = c.Read(1);
      while (!got.empty() && got.find("\r\n") == std::string::npos) got += c.Read(1);
      if (got.empty()) return false;
      const size_t eol = got.find("\r\n");
      const size_t total = eol + 2 + std::stoul(got.substr(1, eol - 1)) + 2;
      while (got.size() < total) {
        const std::string more = c.Read(total - got.size());
        if (more.empty()) return false;
        got += more;
      }
      if (got.find(want) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  MapStore store_;
  Stats stats_;
  std::unique_ptr<Databases> dbs_;
  std::unique_ptr<Keyspace> keyspace_;
  std::unique_ptr<Server> server_;
  std::thread runner_;
  int port_ = 0;
};

TEST_F(BlockingTest, TwoWaitersAreServedInOrderOfArrival) {
  Conn first(port_), second(port_), pusher(port_);
  ASSERT_TRUE(first.ok() && second.ok() && pusher.ok());
  first.Send(Cmd({"BLPOP", "q", "0"}));
  ASSERT_TRUE(WaitBlocked(1));
  second.Send(Cmd({"BRPOP", "other", "q", "0"}));
  ASSERT_TRUE(WaitBlocked(2));
  EXPECT_TRUE(first.Silent());
  // One element: the first to arrive gets it; the second waits on.
  EXPECT_EQ(pusher.Call({"RPUSH", "q", "a"}, 4), ":1\r\n");
  const std::string want_a = Pair("q", "a");
  EXPECT_EQ(first.Read(want_a.size()), want_a);
  ASSERT_TRUE(WaitBlocked(1));
  EXPECT_TRUE(second.Silent());
  EXPECT_EQ(pusher.Call({"LPUSH", "q", "b"}, 4), ":1\r\n");
  const std::string want_b = Pair("q", "b");
  EXPECT_EQ(second.Read(want_b.size()), want_b);
  ASSERT_TRUE(WaitBlocked(0));
  // Both pops happened: the list is gone.
  EXPECT_EQ(pusher.Call({"EXISTS", "q"}, 4), ":0\r\n");
}

TEST_F(BlockingTest, TimeoutAnswersNullInRespTwoAndThree) {
  Conn two(port_), three(port_);
  two.Send(Cmd({"BLPOP", "q", "0.05"}));
  EXPECT_EQ(two.Read(5), "*-1\r\n");
  three.Send(Cmd({"HELLO", "3"}));
  ASSERT_FALSE(three.Read(1).empty());
  three.Read(1 << 16, 200);  // the rest of HELLO's map
  three.Send(Cmd({"BLMOVE", "q", "d", "LEFT", "LEFT", "0.05"}));
  EXPECT_EQ(three.Read(3), "_\r\n");
  ASSERT_TRUE(WaitBlocked(0));
  // The connection goes on after a timeout.
  EXPECT_EQ(two.Call({"PING"}, 7), "+PONG\r\n");
}

TEST_F(BlockingTest, PushInsideExecServesAfterTheCommit) {
  Conn waiter(port_), pusher(port_);
  waiter.Send(Cmd({"BLPOP", "q", "0"}));
  ASSERT_TRUE(WaitBlocked(1));
  pusher.Send(Cmd({"MULTI"}) + Cmd({"LPUSH", "q", "a"}) + Cmd({"LPUSH", "q", "b"}) +
              Cmd({"LPUSH", "q", "c"}));
  pusher.Read(5 + 3 * 9);
  EXPECT_TRUE(waiter.Silent());  // queued, not yet run
  EXPECT_EQ(pusher.Call({"EXEC"}, 16), "*3\r\n:1\r\n:2\r\n:3\r\n");
  const std::string want = Pair("q", "c");
  EXPECT_EQ(waiter.Read(want.size()), want);
  EXPECT_EQ(pusher.Call({"LRANGE", "q", "0", "-1"}, 18), "*2\r\n$1\r\nb\r\n$1\r\na\r\n");
}

TEST_F(BlockingTest, AClientThatLeavesWhileParkedIsForgotten) {
  {
    Conn gone(port_);
    gone.Send(Cmd({"BLPOP", "q", "0"}));
    ASSERT_TRUE(WaitBlocked(1));
  }
  ASSERT_TRUE(WaitBlocked(0));
  Conn pusher(port_);
  EXPECT_EQ(pusher.Call({"RPUSH", "q", "a"}, 4), ":1\r\n");
  EXPECT_EQ(pusher.Call({"LLEN", "q"}, 4), ":1\r\n");  // nobody took it
}

TEST_F(BlockingTest, PipelinedCommandsRunAfterTheParkedOne) {
  Conn waiter(port_), pusher(port_);
  waiter.Send(Cmd({"BLMOVE", "src", "dst", "RIGHT", "LEFT", "0"}) + Cmd({"LLEN", "dst"}) +
              Cmd({"PING"}));
  ASSERT_TRUE(WaitBlocked(1));
  EXPECT_TRUE(waiter.Silent());
  EXPECT_EQ(pusher.Call({"RPUSH", "src", "x", "y"}, 4), ":2\r\n");
  EXPECT_EQ(waiter.Read(7 + 4 + 7), "$1\r\ny\r\n:1\r\n+PONG\r\n");
  // A waiter on the destination of a served BLMOVE is served in turn.
  Conn chained(port_);
  chained.Send(Cmd({"BLPOP", "dst2", "0"}));
  ASSERT_TRUE(WaitBlocked(1));
  waiter.Send(Cmd({"BLMOVE", "src2", "dst2", "LEFT", "LEFT", "0"}));
  ASSERT_TRUE(WaitBlocked(2));
  EXPECT_EQ(pusher.Call({"RPUSH", "src2", "z"}, 4), ":1\r\n");
  EXPECT_EQ(waiter.Read(7), "$1\r\nz\r\n");
  const std::string want = Pair("dst2", "z");
  EXPECT_EQ(chained.Read(want.size()), want);
  EXPECT_EQ(pusher.Call({"EXISTS", "src2", "dst2"}, 4), ":0\r\n");
}

TEST_F(BlockingTest, ClientUnblockAndSortedSetsAndRename) {
  Conn waiter(port_), other(port_);
  const std::string id = waiter.Call({"CLIENT", "ID"}, 3);
  ASSERT_EQ(id.substr(0, 1), ":");
  const std::string n = id.substr(1, id.find('\r') - 1);
  waiter.Send(Cmd({"BLPOP", "q", "0"}));
  ASSERT_TRUE(WaitBlocked(1));
  EXPECT_EQ(other.Call({"CLIENT", "UNBLOCK", n, "ERROR"}, 4), ":1\r\n");
  const std::string unblocked = "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n";
  EXPECT_EQ(waiter.Read(unblocked.size()), unblocked);
  EXPECT_EQ(other.Call({"CLIENT", "UNBLOCK", n}, 4), ":0\r\n");
  // BZPOPMIN is served by a ZADD: the lowest score.
  waiter.Send(Cmd({"BZPOPMIN", "z", "0"}));
  ASSERT_TRUE(WaitBlocked(1));
  EXPECT_EQ(other.Call({"ZADD", "z", "2", "b", "1", "a"}, 4), ":2\r\n");
  const std::string want_z = Cat("*3\r\n", Bulk("z"), Bulk("a"), Bulk("1"));
  EXPECT_EQ(waiter.Read(want_z.size()), want_z);
  // A list renamed onto the awaited key serves it.
  waiter.Send(Cmd({"BRPOP", "moved", "0"}));
  ASSERT_TRUE(WaitBlocked(1));
  EXPECT_EQ(other.Call({"RPUSH", "tmp", "x", "y"}, 4), ":2\r\n");
  EXPECT_EQ(other.Call({"RENAME", "tmp", "moved"}, 5), "+OK\r\n");
  const std::string want_m = Pair("moved", "y");
  EXPECT_EQ(waiter.Read(want_m.size()), want_m);
  ASSERT_TRUE(WaitBlocked(0));
}

}  // namespace
}  // namespace pmindex::server::testing
