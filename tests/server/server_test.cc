// The Asio server in-process, over the test-only MapStore, with real
// sockets: concurrent pipelining clients on both protocols, clients that
// vanish mid-request, the connection limit and the shutdown drain. (The
// same server over the real KvStore, as the pmserver binary, is tested by
// tests/server/protocol_test.py.)
#include "server/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "pmindex/version.h"
#include "server/protocol.h"
#include "tests/server/map_store.h"
#include "tests/support/status.h"

namespace pmindex::server::testing {
namespace {

// A blocking client socket with a deadline on every read.
class Client {
 public:
  explicit Client(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Client() { Close(); }
  bool connected() const { return connected_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  bool Send(std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Reads until `n` bytes arrived, the peer closed, or 10 s passed.
  std::string Read(size_t n) {
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[65536];
      const ssize_t r = recv(fd_, buf, sizeof buf, 0);
      if (r <= 0) break;
      got.append(buf, static_cast<size_t>(r));
    }
    return got;
  }
  // True if the peer closed the connection within 10 s (after any data).
  bool ClosedByPeer() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t r = recv(fd_, buf, sizeof buf, 0);
      if (r <= 0) return true;
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// A server on free ports, run by its own threads until the test ends.
class ServerTest : public ::testing::Test {
 protected:
  void Start(Server::Options o) {
    o.memcached_port = Server::kPortAuto;
    o.resp_port = Server::kPortAuto;
    server_ = std::make_unique<Server>(items_, o);
    PMINDEX_ASSERT_OK(server_->Listen());
    mc_port_ = server_->port(Server::Wire::kMemcached);
    resp_port_ = server_->port(Server::Wire::kResp);
    ASSERT_GT(mc_port_, 0);
    ASSERT_GT(resp_port_, 0);
    runner_ = std::thread([this] {
      server_->Run();
      stopped_ = true;
    });
  }
  void StopAndJoin() {
    if (!runner_.joinable()) return;
    server_->Stop();
    runner_.join();
  }
  void TearDown() override { StopAndJoin(); }

  MapStore store_;
  Stats stats_;
  Items items_{store_, stats_};
  std::unique_ptr<Server> server_;
  std::thread runner_;
  std::atomic<bool> stopped_{false};
  int mc_port_ = 0, resp_port_ = 0;
};

TEST_F(ServerTest, ConcurrentPipelinedClientsOnBothProtocols) {
  Server::Options o;
  o.threads = 3;
  Start(o);
  constexpr int kClients = 6, kKeys = 300;
  std::vector<std::thread> clients;
  std::vector<std::string> failures(kClients);
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      const bool mc = c % 2 == 0;
      Client cl(mc ? mc_port_ : resp_port_);
      if (!cl.connected()) {
        failures[c] = "connect";
        return;
      }
      std::string req, want;
      for (int i = 0; i < kKeys; ++i) {
        const std::string k = "c" + std::to_string(c) + "k" + std::to_string(i);
        const std::string v = std::string(static_cast<size_t>(i % 50), 'v') + std::to_string(i);
        if (mc) {
          req += "set " + k + " " + std::to_string(i) + " 0 " + std::to_string(v.size()) + "\r\n" +
                 v + "\r\nget " + k + "\r\n";
          want += "STORED\r\nVALUE " + k + " " + std::to_string(i) + " " +
                  std::to_string(v.size()) + "\r\n" + v + "\r\nEND\r\n";
        } else {
          req += "*3\r\n$3\r\nSET\r\n$" + std::to_string(k.size()) + "\r\n" + k + "\r\n$" +
                 std::to_string(v.size()) + "\r\n" + v + "\r\n*2\r\n$3\r\nGET\r\n$" +
                 std::to_string(k.size()) + "\r\n" + k + "\r\n";
          want += "+OK\r\n$" + std::to_string(v.size()) + "\r\n" + v + "\r\n";
        }
      }
      // All at once: the server sees the requests cut at arbitrary points.
      if (!cl.Send(req)) failures[c] = "send";
      const std::string got = cl.Read(want.size());
      if (got != want) failures[c] = "replies differ (" + std::to_string(got.size()) + " bytes)";
    });
  }
  for (auto& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) EXPECT_EQ(failures[c], "") << "client " << c;
  EXPECT_EQ(store_.Info().keys, static_cast<uint64_t>(kClients * kKeys));
  EXPECT_EQ(Stats::Read(stats_.total_connections), static_cast<uint64_t>(kClients));
}

TEST_F(ServerTest, ClientVanishingMidRequestChangesNothing) {
  Start({});
  {
    Client a(mc_port_);
    ASSERT_TRUE(a.Send("set half 0 0 10\r\nabc"));  // then gone
    Client b(resp_port_);
    ASSERT_TRUE(b.Send("*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$10\r\nab"));
  }
  Client c(mc_port_);
  ASSERT_TRUE(c.Send("get half\r\n"));
  EXPECT_EQ(c.Read(5), "END\r\n");
  EXPECT_EQ(store_.Info().keys, 0u);
}

TEST_F(ServerTest, GarbageGetsAnErrorAndOtherClientsGoOn) {
  Start({});
  Client good(mc_port_);
  Client bad(mc_port_);
  ASSERT_TRUE(bad.Send(std::string(kMaxLineBytes + 10, 'x')));
  EXPECT_EQ(bad.Read(28), "CLIENT_ERROR line too long\r\n");
  EXPECT_TRUE(bad.ClosedByPeer());
  Client bad_resp(resp_port_);
  ASSERT_TRUE(bad_resp.Send("*1\r\n$-5\r\n"));
  EXPECT_EQ(bad_resp.Read(41), "-ERR Protocol error: invalid bulk length\r\n");
  EXPECT_TRUE(bad_resp.ClosedByPeer());
  ASSERT_TRUE(good.Send("version\r\n"));
  EXPECT_EQ(good.Read(13), "VERSION " PMINDEX_VERSION_STRING "\r\n");
}

TEST_F(ServerTest, ConnectionsOverTheLimitAreRefused) {
  Server::Options o;
  o.max_connections = 2;
  Start(o);
  Client a(mc_port_), b(resp_port_);
  ASSERT_TRUE(a.Send("version\r\n"));
  ASSERT_FALSE(a.Read(5).empty());  // both accepted and counted
  ASSERT_TRUE(b.Send("PING\r\n"));
  ASSERT_EQ(b.Read(7), "+PONG\r\n");
  Client c(mc_port_);
  EXPECT_EQ(c.Read(40), "SERVER_ERROR too many open connections\r\n");
  Client d(resp_port_);
  EXPECT_EQ(d.Read(36), "-ERR max number of clients reached\r\n");
  EXPECT_EQ(Stats::Read(stats_.rejected_connections), 2u);
}

TEST_F(ServerTest, StopAnswersWhatWasSentThenCloses) {
  Start({});
  Client idle(resp_port_);
  Client busy(mc_port_);
  ASSERT_TRUE(idle.Send("PING\r\n"));
  ASSERT_EQ(idle.Read(7), "+PONG\r\n");
  ASSERT_TRUE(busy.Send("set a 0 0 1\r\nx\r\n"));
  ASSERT_EQ(busy.Read(8), "STORED\r\n");
  StopAndJoin();  // returns only once every session ended
  EXPECT_TRUE(stopped_);
  EXPECT_TRUE(idle.ClosedByPeer());
  EXPECT_TRUE(busy.ClosedByPeer());
  Client late(mc_port_);
  EXPECT_FALSE(late.connected() && late.Send("get a\r\n") && !late.Read(1).empty());
}

TEST_F(ServerTest, StopDropsAClientThatDoesNotReadAfterTheGrace) {
  Server::Options o;
  o.shutdown_grace_ms = 200;
  Start(o);
  Client hog(mc_port_);
  ASSERT_TRUE(hog.Send("set big 0 0 500000\r\n" + std::string(500000, 'b') + "\r\n"));
  std::string many;
  for (int i = 0; i < 200; ++i) many += "get big\r\n";
  // 100 MB of replies nobody reads: the server's write cannot finish.
  ASSERT_TRUE(hog.Send(many));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  StopAndJoin();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

}  // namespace
}  // namespace pmindex::server::testing
