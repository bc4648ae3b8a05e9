#include "server/server.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>
#include <utility>

#include "asio.hpp"
#include "server/keyspace.h"
#include "server/memcache_protocol.h"
#include "server/resp_protocol.h"
#include "sync/mutex.h"

namespace pmindex::server {

using asio::ip::tcp;

namespace {
// Bytes asked of the socket per read.
constexpr size_t kReadChunk = 64 * 1024;
// What a parked connection buffers of what its client sends meanwhile
// before it stops reading (Redis buffers it too, up to its query buffer
// limit).
constexpr size_t kParkedInputLimit = 4 * kReadChunk;

// What a RESP connection refused by protected mode is told (Redis's
// DENIED error, in pmserver's terms), before it is closed.
constexpr std::string_view kProtectedModeRefusal =
    "-DENIED pmserver is running in protected mode: no password is set, so it accepts RESP "
    "connections from the loopback interface only. To accept others, start it with a password "
    "(--requirepass or --requirepass-file), or turn protected mode off (--protected-mode no, "
    "or CONFIG SET protected-mode no from a loopback connection) if the network is trusted.\r\n";

bool IsLoopback(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).is_loopback();
  return a.is_loopback();
}

// "ip:port", as Redis's CLIENT LIST writes addresses.
std::string EndpointText(const tcp::endpoint& e) {
  return e.address().to_string() + ":" + std::to_string(e.port());
}
}  // namespace

// One listening socket and the protocol it serves.
struct Listener {
  Listener(asio::io_context& io, Server::Wire p) : acceptor(io), retry(io), protocol(p) {}
  tcp::acceptor acceptor;
  asio::steady_timer retry;  // after an accept error (out of file descriptors)
  Server::Wire protocol;
  int port = 0;
};

struct Server::Impl {
  Impl(Server& s, Items& i, Options o)
      : self(s), items(i), options(std::move(o)), resp_shared(MakeRespSettings(options, i)),
        loops(MakeLoops(options.threads)),
        strand(asio::make_strand(*loops[0])), grace(strand), signals(strand) {}
  ~Impl() {
    sync::MutexLock lock(mu);
    destroying = true;
  }

  static RespSettings MakeRespSettings(const Options& o, Items& items) {
    RespSettings r;
    r.databases = items.keyspace() != nullptr ? items.keyspace()->count() : 1;
    r.requirepass = o.requirepass;
    r.protected_mode = o.protected_mode;
    r.bind = o.bind;
    r.port = o.resp_port;
    r.threads = o.threads;
    r.max_connections = o.max_connections;
    r.proto_max_bulk_len = o.proto_max_bulk_len;
    r.cluster = o.cluster;
    return r;
  }
  static std::vector<std::unique_ptr<asio::io_context>> MakeLoops(int threads) {
    std::vector<std::unique_ptr<asio::io_context>> loops;
    // One thread runs each loop.
    for (int i = 0; i < std::max(threads, 1); ++i) loops.push_back(std::make_unique<asio::io_context>(1));
    return loops;
  }
  void Accept(Listener& l);
  void StopOnStrand();
  // Lets every loop's run() return once its work is done (strand only).
  void ReleaseLoops() {
    for (auto& g : guards) g.reset();
  }
  // Session bookkeeping (any thread).
  bool Register(Session* s);
  void Unregister(Session* s);

  // Declared first, destroyed last: destroying `io` destroys the pending
  // handlers, and with them the sessions, which unregister here.
  sync::Mutex mu;
  std::unordered_set<Session*> sessions PMINDEX_GUARDED_BY(mu);
  bool stopping PMINDEX_GUARDED_BY(mu) = false;
  bool destroying PMINDEX_GUARDED_BY(mu) = false;

  Server& self;
  Items& items;
  Options options;
  RespShared resp_shared;  // what every RESP connection shares
  // One event loop per thread, as memcached's worker threads: a
  // connection is given to one loop when it is accepted (round-robin) and
  // all its handlers run on that loop's thread, so they never run at once
  // and never move between threads.
  std::vector<std::unique_ptr<asio::io_context>> loops;
  // Keep the loops running while they have no connection; released when
  // the shutdown has ended every session.
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  size_t next_loop = 0;  // strand only
  // Server-level objects (listeners, timers, signals) live on loops[0] and
  // are used on this strand only.
  asio::strand<asio::io_context::executor_type> strand;
  std::vector<std::unique_ptr<Listener>> listeners;
  asio::steady_timer grace;
  asio::signal_set signals;
  bool stopping_on_strand = false;
};

// One connection. Every member function runs on the thread of the loop
// that owns its socket.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server::Impl& server, tcp::socket socket, std::unique_ptr<Protocol> protocol)
      : server_(server), socket_(std::move(socket)), protocol_(std::move(protocol)),
        park_timer_(socket_.get_executor()) {}
  ~Session() { server_.Unregister(this); }

  void Start() { Read(); }
  // Ends the session after the requests it has read: a pending read is
  // cancelled (so the read handler closes), a pending write completes.
  void Drain() {
    draining_ = true;
    park_timer_.cancel();
    if (!writing_) {
      asio::error_code ec;
      socket_.cancel(ec);
    }
  }
  // Drops the connection now (the grace period is over).
  void Abort() {
    park_timer_.cancel();
    asio::error_code ec;
    socket_.close(ec);
  }
  tcp::socket& socket() { return socket_; }
  Protocol& protocol() { return *protocol_; }

  // The parked request may have its reply (Protocol::set_waker), or its
  // deadline passed (`timed_out`).
  void OnWake(bool timed_out) {
    if (!protocol_->parked()) return;
    if (writing_) {  // out_ is being written: after the write
      wake_pending_ = true;
      timeout_pending_ |= timed_out;
      return;
    }
    if (!protocol_->Unpark(&out_, timed_out)) return;  // not served yet
    park_timer_.cancel();
    ++park_seq_;
    // What arrived while parked runs now, after the reply.
    Process({});
  }

 private:
  void Read() {
    // The session ends when the last handler returns; one read at a time.
    if (draining_ || reading_) return;
    reading_ = true;
    socket_.async_read_some(asio::buffer(chunk_.get(), kReadChunk),
                            [self = shared_from_this()](const asio::error_code& ec, size_t n) {
                              self->OnRead(ec, n);
                            });
  }

  // Parked: arms the deadline (once per park) and reads on, to see the
  // client leave; what it sends meanwhile waits in in_ (up to a bound,
  // then reading pauses until the reply).
  void WhileParked() {
    const int64_t deadline = protocol_->park_deadline_ms();
    if (deadline > 0 && armed_seq_ != park_seq_) {
      armed_seq_ = park_seq_;
      const int64_t wait_ms = std::max<int64_t>(0, deadline - SteadyMs());
      park_timer_.expires_after(std::chrono::milliseconds(wait_ms));
      park_timer_.async_wait(
          [self = shared_from_this(), seq = park_seq_](const asio::error_code& ec) {
            if (!ec && seq == self->park_seq_) self->OnWake(true);
          });
    }
    if (in_.size() < kParkedInputLimit) Read();
  }

  void OnRead(const asio::error_code& ec, size_t n) {
    reading_ = false;
    Stats::Add(server_.items.stats().bytes_read, n);
    if (protocol_->parked()) {
      if (ec) {  // the client left (or the server drains): withdraw
        protocol_->Abandon();
        park_timer_.cancel();
        ++park_seq_;
        return Close();
      }
      in_.append(chunk_.get(), n);
      return WhileParked();
    }
    if (!in_.empty()) {
      in_.append(chunk_.get(), n);
      return Process(ec);
    }
    // The common case: nothing is left from earlier reads, so the requests
    // run straight from the read buffer, and only an incomplete tail (or
    // what the reply budget left) is kept.
    const std::string_view got(chunk_.get(), n);
    const size_t used = n == 0 ? 0 : protocol_->Consume(got, &out_);
    ReserveInput();
    in_.assign(got.substr(used));
    Continue(ec);
  }

  // Runs what the input holds, then writes the replies, or reads more if
  // there are none. An error or end of input (`ec`) ends the session once
  // the input is used up; an incomplete request at its end is dropped
  // (nothing of it ran).
  void Process(const asio::error_code& ec) {
    if (!in_.empty() && !protocol_->parked()) {
      const size_t used = protocol_->Consume(in_, &out_);
      in_.erase(0, used);
      ReserveInput();
    }
    Continue(ec);
  }

  // Room for the whole of a large request once its framing told its size
  // (one allocation, not a doubling series that peaks at twice the size).
  void ReserveInput() {
    const size_t want = protocol_->pending_request_bytes();
    if (want > in_.capacity()) in_.reserve(want);
  }

  void Continue(const asio::error_code& ec) {
    if (!out_.empty()) return Write();
    if (ec || protocol_->close_requested()) {
      protocol_->Abandon();
      return Close();
    }
    if (protocol_->parked()) return WhileParked();
    Read();
  }

  void Write() {
    writing_ = true;
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](const asio::error_code& ec, size_t n) {
                        self->writing_ = false;
                        Stats::Add(self->server_.items.stats().bytes_written, n);
                        self->out_.clear();
                        if (ec || self->protocol_->close_requested()) {
                          self->protocol_->Abandon();
                          return self->Close();
                        }
                        if (self->wake_pending_) {
                          self->wake_pending_ = false;
                          const bool timed_out = std::exchange(self->timeout_pending_, false);
                          return self->OnWake(timed_out);
                        }
                        // Requests left by the reply budget run before the
                        // next read (also when draining: they were read).
                        self->Process({});
                      });
  }

  void Close() {
    asio::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  Server::Impl& server_;
  tcp::socket socket_;
  std::unique_ptr<Protocol> protocol_;
  // What each read receives (not zeroed: a std::string resized for every
  // read would clear 64 KiB per request).
  std::unique_ptr<char[]> chunk_{new char[kReadChunk]};
  std::string in_;   // received, not yet consumed
  std::string out_;  // replies being written
  bool writing_ = false;
  bool reading_ = false;
  bool draining_ = false;
  // Parking: the deadline's timer; park_seq_ counts parks ended, so that a
  // timer of an earlier park does nothing; armed_seq_ is the park whose
  // timer is set; a wake (or timeout) that came during a write.
  asio::steady_timer park_timer_;
  uint64_t park_seq_ = 0;
  uint64_t armed_seq_ = ~uint64_t{0};
  bool wake_pending_ = false;
  bool timeout_pending_ = false;
};

bool Server::Impl::Register(Session* s) {
  sync::MutexLock lock(mu);
  if (stopping) return false;
  sessions.insert(s);
  return true;
}

void Server::Impl::Unregister(Session* s) {
  bool last = false;
  {
    sync::MutexLock lock(mu);
    if (sessions.erase(s) == 0) return;
    last = stopping && sessions.empty() && !destroying;
  }
  Stats::Add(items.stats().curr_connections, static_cast<uint64_t>(-1));
  // The last session of a shutdown: nothing is left to wait for.
  if (last) {
    asio::post(strand, [this] {
      grace.cancel();
      ReleaseLoops();
    });
  }
}

void Server::Impl::Accept(Listener& l) {
  // The new socket goes to the next loop; this handler runs on the
  // server's strand, as everything that touches the listeners.
  asio::io_context& loop = *loops[next_loop++ % loops.size()];
  l.acceptor.async_accept(loop, asio::bind_executor(strand, [this, &l](
                                                     const asio::error_code& ec,
                                                     tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !l.acceptor.is_open()) return;
    if (ec) {
      // Typically EMFILE: try again shortly rather than spin or give up.
      l.retry.expires_after(std::chrono::milliseconds(100));
      l.retry.async_wait(asio::bind_executor(strand, [this, &l](const asio::error_code& e) {
        if (!e && l.acceptor.is_open()) Accept(l);
      }));
      return;
    }
    Stats& stats = items.stats();
    asio::error_code ignored;
    const tcp::endpoint peer = socket.remote_endpoint(ignored);
    const tcp::endpoint local = socket.local_endpoint(ignored);
    std::string_view refusal;
    if (Stats::Read(stats.curr_connections) >= options.max_connections) {
      refusal = l.protocol == Server::Wire::kMemcached
                    ? "SERVER_ERROR too many open connections\r\n"
                    : "-ERR max number of clients reached\r\n";
    } else if (l.protocol == Server::Wire::kResp &&
               resp_shared.RefuseConnection(IsLoopback(peer.address()))) {
      refusal = kProtectedModeRefusal;
    }
    if (!refusal.empty()) {
      Stats::Add(stats.rejected_connections);
      const std::string_view msg = refusal;
      socket.non_blocking(true, ignored);
      socket.write_some(asio::buffer(msg), ignored);  // a fresh socket's buffer takes it
      socket.close(ignored);
      return Accept(l);
    }
    socket.set_option(tcp::no_delay(true), ignored);
    std::unique_ptr<Protocol> protocol;
    RespProtocol* resp = nullptr;
    if (l.protocol == Server::Wire::kMemcached) {
      protocol = std::make_unique<MemcacheProtocol>(items, options.max_item_size);
    } else {
      auto p = std::make_unique<RespProtocol>(items, resp_shared, EndpointText(peer),
                                              EndpointText(local));
      resp = p.get();
      protocol = std::move(p);
    }
    auto session = std::make_shared<Session>(*this, std::move(socket), std::move(protocol));
    // A parked request's reply is collected on the session's own thread.
    session->protocol().set_waker([weak = std::weak_ptr<Session>(session),
                                   executor = session->socket().get_executor()] {
      asio::post(executor, [weak] {
        if (auto s = weak.lock()) s->OnWake(false);
      });
    });
    if (resp != nullptr) {
      // CLIENT KILL from another connection closes this one on its own
      // loop's thread.
      resp_shared.clients().Update(
          resp->client(), [weak = std::weak_ptr<Session>(session),
                           executor = session->socket().get_executor()](RespClient& c) {
            c.on_kill = [weak, executor] {
              asio::post(executor, [weak] {
                if (auto s = weak.lock()) s->Abort();
              });
            };
          });
    }
    if (Register(session.get())) {
      Stats::Add(stats.curr_connections);
      Stats::Add(stats.total_connections);
      asio::post(session->socket().get_executor(), [session] { session->Start(); });
    }
    Accept(l);
  }));
}

void Server::Impl::StopOnStrand() {
  if (stopping_on_strand) return;
  stopping_on_strand = true;
  asio::error_code ignored;
  signals.cancel(ignored);
  for (auto& l : listeners) {
    l->acceptor.close(ignored);
    l->retry.cancel();
  }
  std::vector<std::shared_ptr<Session>> live;
  {
    sync::MutexLock lock(mu);
    stopping = true;
    for (Session* s : sessions) {
      // A session whose last reference is going away is ending already.
      if (auto p = s->weak_from_this().lock()) live.push_back(std::move(p));
    }
  }
  if (live.empty()) {
    ReleaseLoops();
    return;
  }
  for (auto& s : live) asio::post(s->socket().get_executor(), [s] { s->Drain(); });
  grace.expires_after(std::chrono::milliseconds(options.shutdown_grace_ms));
  grace.async_wait([this](const asio::error_code& ec) {
    if (ec) return;  // cancelled: every session ended in time
    sync::MutexLock lock(mu);
    for (Session* s : sessions) {
      if (auto p = s->weak_from_this().lock())
        asio::post(p->socket().get_executor(), [p] { p->Abort(); });
    }
  });
}

bool Server::IsLoopbackAddress(const std::string& bind) {
  asio::error_code ec;
  const asio::ip::address a = asio::ip::make_address(bind, ec);
  return !ec && IsLoopback(a);
}

Server::Server(Items& items, Options options)
    : impl_(std::make_unique<Impl>(*this, items, std::move(options))) {}

Server::~Server() = default;

Status Server::Listen() {
  asio::error_code ec;
  const asio::ip::address address = asio::ip::make_address(impl_->options.bind, ec);
  if (ec) return Status::InvalidArgument("bad bind address '" + impl_->options.bind + "'");
  const std::pair<Wire, int> wanted[] = {{Wire::kMemcached, impl_->options.memcached_port},
                                             {Wire::kResp, impl_->options.resp_port}};
  for (const auto& [protocol, port] : wanted) {
    if (port == kPortOff) continue;
    if (port < kPortAuto || port > 65535) return Status::InvalidArgument("bad port");
    auto l = std::make_unique<Listener>(*impl_->loops[0], protocol);
    const tcp::endpoint endpoint(address, static_cast<uint16_t>(port == kPortAuto ? 0 : port));
    l->acceptor.open(endpoint.protocol(), ec);
    if (!ec) l->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) l->acceptor.bind(endpoint, ec);
    if (!ec) l->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status::IOError("cannot listen on " + impl_->options.bind + ":" +
                             std::to_string(endpoint.port()) + ": " + ec.message());
    }
    l->port = l->acceptor.local_endpoint().port();
    impl_->listeners.push_back(std::move(l));
  }
  if (impl_->listeners.empty()) return Status::InvalidArgument("every protocol's port is off");
  // Nothing runs yet, so the strand's objects may be used here. The
  // signal handlers are installed now, before the caller announces the
  // ports: a signal from then on stops the server cleanly.
  Impl& impl = *impl_;
  for (auto& l : impl.listeners) impl.Accept(*l);
  if (impl.options.stop_on_signals) {
    impl.signals.add(SIGINT, ec);
    if (!ec) impl.signals.add(SIGTERM, ec);
    if (ec) return Status::IOError("cannot handle SIGINT/SIGTERM: " + ec.message());
    impl.signals.async_wait([&impl](const asio::error_code& e, int) {
      if (!e) impl.StopOnStrand();
    });
  }
  return Status::OK();
}

int Server::port(Wire p) const {
  for (const auto& l : impl_->listeners)
    if (l->protocol == p) return l->port;
  return 0;
}

void Server::Run() {
  Impl& impl = *impl_;
  impl.items.stats().threads = impl.options.threads;
  for (auto& loop : impl.loops) impl.guards.push_back(asio::make_work_guard(*loop));
  std::vector<std::thread> threads;
  for (size_t i = 1; i < impl.loops.size(); ++i) {
    threads.emplace_back([loop = impl.loops[i].get()] { loop->run(); });
  }
  impl.loops[0]->run();
  for (auto& t : threads) t.join();
}

void Server::Stop() {
  asio::post(impl_->strand, [impl = impl_.get()] { impl->StopOnStrand(); });
}

}  // namespace pmindex::server
