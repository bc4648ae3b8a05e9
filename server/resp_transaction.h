// MULTI/EXEC/DISCARD/WATCH/UNWATCH, and running commands atomically over
// several keys and databases (RENAME, COPY, MSETNX).
//
// MULTI queues a connection's commands (each checked at once: an unknown
// command, a wrong number of arguments or a bad key is a queueing error,
// and EXEC then answers EXECABORT and runs nothing). EXEC runs the queue in
// one store transaction (TxnScope): every command's handler, unchanged,
// over an item layer whose store is the transaction (txn_store.h), so the
// commands see each other's writes and commit all or none, durably before
// EXEC's reply. An error a command replies while it runs is that
// command's reply only (Redis's rule); a transaction conflict (another
// client wrote a key the transaction read or wrote) runs the whole queue
// again, from the database selected at EXEC, on a new snapshot.
//
// WATCH records each key's version (and database namespace) and whether it
// was live (present, not expired). EXEC, inside its transaction, fails
// with a null reply if a watched key changed: live then, and now absent,
// expired or of another version; not live then and live now; or its
// database was flushed or swapped and the key was or is live (Redis 7.0's
// rules, stale keys included). The watched keys are read in the
// transaction, so they are validated at its commit.
//
// Memory: a queue holds at most kMaxQueuedBytes of arguments and
// kMaxQueuedCommands commands (more is a queueing error), and a connection
// watches at most kMaxWatchedKeys keys.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/databases.h"
#include "server/items.h"
#include "server/resp_command.h"
#include "server/txn_store.h"

namespace pmindex::server {

struct RespTransaction {
  static constexpr size_t kMaxQueuedBytes = 64u << 20;
  static constexpr size_t kMaxQueuedCommands = 1u << 20;
  static constexpr size_t kMaxWatchedKeys = 1u << 16;

  struct Queued {
    const Command* command;
    std::vector<std::string> args;
  };
  struct Watched {
    int db;
    std::string key;
    uint32_t ns;  // the database's namespace at WATCH (0 without databases)
    uint64_t version;
    bool live;
  };

  bool in_multi = false;
  bool dirty = false;  // a queueing error: EXEC answers EXECABORT
  size_t queued_bytes = 0;
  std::vector<Queued> queue;
  std::vector<Watched> watched;
};

// The dispatcher's hooks (resp_protocol.cc). The item layer of the
// client's selected database (`db0` is database 0's).
Items& ClientItems(Items& db0, const RespClient& client);
// Inside MULTI, queues a command that passed the dispatcher's checks and
// replies QUEUED (true); false if the command is to run now.
bool QueueInMulti(const Command& command, std::span<const std::string_view> args,
                  RespClient& client, RespReply& reply);
// A command failed the dispatcher's checks: inside MULTI, EXEC will abort.
void FlagMultiError(RespClient& client);
// Inside MULTI: sets *keys to the keys of every queued command (views into
// the queue, valid until it changes); else clears it.
void QueuedKeys(const RespClient& client, std::vector<std::string_view>* keys);
// Ends MULTI without running the queue, and forgets the watched keys
// (DISCARD's effect, without its reply).
void DiscardMulti(RespClient& client);

// One store transaction over the databases an item layer belongs to: over
// a DbTransaction when it has a keyspace (every database), else over one
// StoreTransaction of its store (database 0 only). Stores and item layers
// per database are made on first use.
class TxnScope {
 public:
  // `items`: a database's item layer outside any transaction.
  explicit TxnScope(Items& items);
  ~TxnScope();
  TxnScope(const TxnScope&) = delete;
  TxnScope& operator=(const TxnScope&) = delete;

  int count() const;
  // REQUIRES: 0 <= i < count().
  TxnStore& db(int i);
  Items& items(int i);
  // Database i's namespace in the transaction (0 without databases).
  uint32_t ns(int i) const;
  DbTransaction* databases() { return dbt_.get(); }
  // A store call was refused because the transaction cannot commit.
  bool conflict() const;
  [[nodiscard]] Status Commit();

  // The scope a transaction's item layer belongs to, or nullptr for an
  // item layer outside transactions.
  static TxnScope* Of(Items& items);

 private:
  Items& origin_;
  Keyspace* keyspace_;
  std::unique_ptr<DbTransaction> dbt_;
  std::unique_ptr<StoreTransaction> plain_;
  std::vector<std::unique_ptr<TxnStore>> stores_;
  std::vector<std::unique_ptr<Items>> items_;
};

// Runs `body(scope, reply)` atomically, and sends the reply it wrote only
// once its writes are committed: inside an EXEC, in EXEC's transaction
// (committed by EXEC); otherwise in a transaction of its own, committed
// before the reply, and run again from the start (its reply discarded) if
// the commit or a read meets a conflict. So `body` may run several times
// and must only read and write through `scope` (and compute).
//
// `body` writes exactly one reply (any RESP type: arrays, maps, doubles,
// or an error line of its own) into `reply` and returns OK; or it returns
// an error and writes nothing: WrongTypeError() (collections.h) replies
// WRONGTYPE, InvalidArgument's message is replied as is ("ERR ..."),
// Aborted means a conflict (run again), others are store errors (nothing
// is committed). A body that returns WRONGTYPE or InvalidArgument must
// not have written anything (its transaction is still committed, so that
// the reads behind the error are validated; inside EXEC, Redis's rule is
// that a failed command's writes stay): check before writing.
void RunInTransaction(CommandCall& c, const std::function<Status(TxnScope&, RespReply&)>& body);

// Runs `body(scope)` atomically and replies with its result: inside an
// EXEC, in EXEC's transaction; otherwise in a transaction of its own,
// committed (and run again on a conflict). `body` returns the integer to
// reply, or an error: InvalidArgument's message is replied as is (e.g.
// "ERR no such key"), other statuses as store errors. `ok_reply`: reply
// +OK instead of the integer.
void RunAtomically(CommandCall& c, const std::function<Result<int64_t>(TxnScope&)>& body,
                   bool ok_reply = false);

}  // namespace pmindex::server
