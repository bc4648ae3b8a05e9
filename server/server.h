// pmserver's network side: listeners for the memcached text protocol and
// RESP, and one session per connection, on standalone Asio.
//
// Threads: Options::threads event loops (asio::io_context), each run by
// one thread, as memcached's worker threads. An accepted connection goes
// to the next loop (round-robin) and all its handlers run on that loop's
// thread, so they never run at once, need no lock and never move between
// threads; connections on different loops run in parallel. A session reads, runs every complete request in what it
// read (Protocol::Consume, which calls the store synchronously on the
// event-loop thread), writes the replies, and reads again only after the
// write finished: a client that sends faster than it reads is slowed down,
// not buffered without bound.
//
// Durability: a reply is produced after its store call returned (the
// store's persist point) and is written after it, never before.
//
// Shutdown (Stop, SIGINT, SIGTERM): the listeners close; each session
// finishes the requests it has already read, sends their replies and
// closes. Sessions still busy after Options::shutdown_grace_ms (a client
// that does not read its replies) are dropped. Run then returns, and the
// caller closes the store.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "pmindex/status.h"
#include "server/items.h"

namespace pmindex::server {

class Session;
class Cluster;

class Server {
 public:
  // A port: 1..65535, kPortOff (do not listen) or kPortAuto (a free port
  // the kernel picks; read it back with port() after Listen).
  static constexpr int kPortOff = 0;
  static constexpr int kPortAuto = -1;

  // The wire protocols a server listens for.
  enum class Wire : uint8_t { kMemcached, kResp };

  struct Options {
    std::string bind = "127.0.0.1";
    int memcached_port = 11211;
    int resp_port = 6379;
    int threads = 1;
    size_t max_connections = 1024;
    int shutdown_grace_ms = 5000;
    bool stop_on_signals = false;  // SIGINT and SIGTERM call Stop()
    // RESP: the password ("" = none) and Redis's protected mode (with no
    // password, connections from beyond loopback are refused).
    std::string requirepass;
    bool protected_mode = true;
    // The largest bulk string a RESP request may carry (Redis's
    // proto-max-bulk-len); larger is a protocol error that closes the
    // connection. Values larger than one store value are stored in pieces
    // (chunked_values.h).
    size_t proto_max_bulk_len = size_t{512} << 20;
    // memcached: the largest data a storage command may carry (memcached's
    // -I); larger is answered SERVER_ERROR object too large for cache.
    size_t max_item_size = size_t{1} << 20;
    // Cluster mode's map and node (cluster.h), or nullptr. Must outlive
    // the server.
    Cluster* cluster = nullptr;
  };

  // True iff `bind` is an IP address of the loopback interface
  // (127.0.0.0/8, ::1, or ::ffff:127.x.y.z).
  static bool IsLoopbackAddress(const std::string& bind);

  // `items` must outlive the server.
  Server(Items& items, Options options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens on the enabled ports. InvalidArgument for a bad
  // address or no enabled port, IOError if a port cannot be bound.
  [[nodiscard]] Status Listen();
  // The bound port of a protocol, 0 if it is off. REQUIRES: Listen() ok.
  int port(Wire p) const;
  // Runs the event loop on Options::threads threads (the caller's one of
  // them) until Stop() and the end of every connection.
  void Run();
  // Starts the shutdown described above; thread-safe, idempotent.
  void Stop();

 private:
  struct Impl;
  friend class Session;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pmindex::server
