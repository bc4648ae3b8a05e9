// Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
// BZPOPMAX): the clients parked on keys, and their wake-up.
//
// A blocking command first tries to serve itself in one transaction of its
// own, as its non-blocking form. If every key it waits on is empty it
// PARKS its connection: the command's handler hands a Waiter to
// BlockingRegistry::Park and sets CommandCall::park; the protocol then
// runs nothing more of that connection's input (the server keeps reading
// it, to notice a disconnect) until the waiter is done. A parked client
// holds no store transaction and no latch: it is an entry in the
// registry, and its event loop serves the other connections meanwhile.
//
// Wake-up: a command that may have made a key non-empty (a push, LMOVE's
// destination) records the key (NoteKeyReady) and the dispatcher calls
// ServeReady once the command -- or the EXEC that ran it -- has committed.
// ServeReady serves the clients parked on each key in order of arrival:
// each waiter's `serve` runs its pop as one durable transaction of its own
// on the caller's thread, and the reply it wrote is handed to the waiter's
// connection (`wake`, which posts to that connection's event loop). It
// stops at the first waiter a key cannot serve (the key is empty again).
// Serving holds the registry's mutex, so waiters are served one at a time
// and in order; no store transaction is open when that mutex is taken.
//
// Timeout and disconnect: the parked connection's own thread calls Cancel;
// if the waiter was still parked it leaves the registry (and its
// connection answers the timeout reply, or closes); if it was served
// meanwhile, its reply stands.
//
// Race-freedom: Park registers the waiter before it tries the keys again,
// under the mutex; a pusher commits before it looks for waiters. So a push
// that committed after the command's first attempt is seen either by
// Park's attempt or by the pusher's ServeReady.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sync/mutex.h"

namespace pmindex::server {

// One parked client.
struct Waiter {
  // Set before Park, constant after.
  uint64_t client_id = 0;         // its connection's (CLIENT UNBLOCK)
  int db = 0;                     // the database its keys are in
  std::vector<std::string> keys;  // the keys it waits on, in its order
  int64_t deadline_ms = 0;        // steady clock (SteadyMs); 0: forever
  // Tries to serve the client, on any thread, in a transaction of its own:
  // returns true with the reply (or an error line) in *reply if it was
  // served, false if every key is still empty (it stays parked). A served
  // pop that pushed elsewhere (BLMOVE) appends the keys it pushed to to
  // *pushed (same database).
  std::function<bool(std::string* reply, std::vector<std::string>* pushed)> serve;
  // Asks the client's connection to collect its reply (Unpark), from any
  // thread; empty when no server runs the connection (tests).
  std::function<void()> wake;
  // The reply on timeout (Redis's null array, in the client's protocol).
  std::string timeout_reply;

  // Guarded by the registry's mutex.
  bool parked = false;  // in the registry's queues
  bool done = false;    // served: `reply` holds the answer
  std::string reply;
};

class BlockingRegistry {
 public:
  // Registers `w` under each of its keys, behind the clients already
  // parked there, then serves those keys' waiters in order (w among them).
  // Returns true iff w was served at once (its reply is in w->reply and it
  // is not parked); false: w is parked.
  bool Park(const std::shared_ptr<Waiter>& w);
  // Keys of database `db` that may have become non-empty, committed:
  // serves their waiters (above).
  void ServeReady(int db, const std::vector<std::string>& keys);
  // The waiter's own connection gives up (timeout, disconnect). True iff
  // it was still parked (it is removed now); false if it was served (its
  // reply is in w->reply).
  bool Cancel(Waiter& w);
  // CLIENT UNBLOCK: ends the park of client `client_id` at once, with its
  // timeout reply or (`error`) Redis's UNBLOCKED error. False if that
  // client is not parked.
  bool Unblock(uint64_t client_id, bool error);
  // Takes a served waiter's reply: true iff w is done (*out gets it).
  bool TakeReply(Waiter& w, std::string* out);

  // True iff any client is parked: a pusher records ready keys only then.
  bool any() const { return parked_.load(std::memory_order_seq_cst) > 0; }
  // True iff a client is parked on (db, key): a new blocking command then
  // queues behind it instead of serving itself first.
  bool HasWaiters(int db, std::string_view key) const;
  // Parked clients (INFO blocked_clients).
  size_t size() const { return parked_.load(std::memory_order_relaxed); }

 private:
  using Key = std::pair<int, std::string>;
  // Serves the waiters of `keys` (and the keys served pops push to);
  // appends the waiters served to *woken.
  void ServeLocked(int db, std::vector<std::string> keys,
                   std::vector<std::shared_ptr<Waiter>>* woken) PMINDEX_REQUIRES(mu_);
  // Removes w from every queue.
  void RemoveLocked(Waiter& w) PMINDEX_REQUIRES(mu_);

  mutable sync::Mutex mu_;
  std::map<Key, std::deque<std::shared_ptr<Waiter>>> by_key_ PMINDEX_GUARDED_BY(mu_);
  std::atomic<size_t> parked_{0};
};

}  // namespace pmindex::server
