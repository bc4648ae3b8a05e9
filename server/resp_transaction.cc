// RESP transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH
// (resp_transaction.h), and TxnScope/RunAtomically for the multi-key
// commands.
#include "server/resp_transaction.h"

#include "server/collections.h"
#include "server/keyspace.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

// An EXEC that keeps meeting conflicts gives up after this many runs
// (each on a new snapshot), with an error and nothing applied.
constexpr int kMaxExecRuns = 1000;

RespTransaction& StateOf(RespClient& client) {
  if (client.tx == nullptr) client.tx = std::make_shared<RespTransaction>();
  return *client.tx;
}

void EndMulti(RespClient& client) {
  if (client.tx == nullptr) return;
  client.tx->in_multi = false;
  client.tx->dirty = false;
  client.tx->queued_bytes = 0;
  client.tx->queue.clear();
  client.tx->queue.shrink_to_fit();
}

void Unwatch(RespClient& client) {
  if (client.tx != nullptr) client.tx->watched.clear();
}

bool Live(const Result<StoredValue>& r, int64_t now_ms) {
  return r.ok() && KindOfStored(r->value, now_ms) != KeyKind::kNone;
}

}  // namespace

// ---------------------------------------------------------------- hooks

Items& ClientItems(Items& db0, const RespClient& client) {
  Keyspace* ks = db0.keyspace();
  if (ks == nullptr || client.db == db0.db_index()) return db0;
  return ks->db(client.db);
}

bool QueueInMulti(const Command& command, std::span<const std::string_view> args,
                  RespClient& client, RespReply& reply) {
  if (client.tx == nullptr || !client.tx->in_multi) return false;
  const std::string_view name = command.full_name;
  // What runs at once even inside MULTI (as in Redis).
  const std::string_view top = name.substr(0, name.find('|'));
  if (top == "multi" || top == "exec" || top == "discard" || top == "watch" || top == "quit" ||
      top == "reset") {
    return false;
  }
  RespTransaction& t = *client.tx;
  if (command.flags & kNoMulti) {
    t.dirty = true;
    reply.Error("ERR Command not allowed inside a transaction");
    return true;
  }
  size_t bytes = 0;
  for (std::string_view a : args) bytes += a.size();
  if (t.queue.size() >= RespTransaction::kMaxQueuedCommands ||
      t.queued_bytes + bytes > RespTransaction::kMaxQueuedBytes) {
    t.dirty = true;
    reply.Error("ERR MULTI queue too large (at most " +
                std::to_string(RespTransaction::kMaxQueuedBytes >> 20) + " MiB of arguments)");
    return true;
  }
  t.queued_bytes += bytes;
  t.queue.push_back({&command, std::vector<std::string>(args.begin(), args.end())});
  reply.Simple("QUEUED");
  return true;
}

void FlagMultiError(RespClient& client) {
  if (client.tx != nullptr && client.tx->in_multi) client.tx->dirty = true;
}

// ---------------------------------------------------------------- TxnScope

TxnScope::TxnScope(Items& items) : origin_(items), keyspace_(items.keyspace()) {
  if (keyspace_ != nullptr) {
    dbt_ = keyspace_->databases().Begin();
  } else {
    plain_ = items.store().Begin();
  }
  stores_.resize(static_cast<size_t>(count()));
  items_.resize(static_cast<size_t>(count()));
}

TxnScope::~TxnScope() {
  items_.clear();
  stores_.clear();
}

int TxnScope::count() const { return keyspace_ != nullptr ? keyspace_->count() : 1; }

uint32_t TxnScope::ns(int i) const { return dbt_ != nullptr ? dbt_->ns(i) : 0; }

TxnStore& TxnScope::db(int i) {
  std::unique_ptr<TxnStore>& s = stores_[static_cast<size_t>(i)];
  if (s == nullptr) {
    if (dbt_ != nullptr) {
      DbTransaction* t = dbt_.get();
      s = std::make_unique<TxnStore>(t->db(i), keyspace_->db(i).store(),
                                     [t, i] { return t->Flush(i); });
    } else {
      s = std::make_unique<TxnStore>(*plain_, origin_.store());
    }
    s->set_scope(this);
  }
  return *s;
}

Items& TxnScope::items(int i) {
  std::unique_ptr<Items>& it = items_[static_cast<size_t>(i)];
  if (it == nullptr) {
    Items& origin = keyspace_ != nullptr ? keyspace_->db(i) : origin_;
    it = std::make_unique<Items>(db(i), origin.stats(), [&origin] { return origin.NowMs(); });
    // For the number of databases (SELECT); the store is the transaction.
    it->AttachKeyspace(keyspace_, i);
  }
  return *it;
}

bool TxnScope::conflict() const {
  for (const auto& s : stores_)
    if (s != nullptr && s->conflict()) return true;
  return false;
}

Status TxnScope::Commit() { return dbt_ != nullptr ? dbt_->Commit() : plain_->Commit(); }

TxnScope* TxnScope::Of(Items& items) {
  auto* s = dynamic_cast<TxnStore*>(&items.store());
  return s != nullptr ? s->scope() : nullptr;
}

void RunInTransaction(CommandCall& c, const std::function<Status(TxnScope&, RespReply&)>& body) {
  // The reply is written aside and sent once the run that wrote it counts.
  std::string out;
  auto finish = [&](const Status& s) {
    if (s.ok()) {
      c.reply.out()->append(out);
      return;
    }
    if (s.is_invalid_argument() || IsWrongType(s)) return c.reply.Error(s.message());
    ReplyStoreError(c, s);
  };
  if (TxnScope* scope = TxnScope::Of(c.items)) {
    RespReply aside(&out, c.reply.protocol());
    return finish(body(*scope, aside));
  }
  for (int run = 0; run < kMaxExecRuns; ++run) {
    out.clear();
    RespReply aside(&out, c.reply.protocol());
    TxnScope scope(c.items);
    const Status r = body(scope, aside);
    if (scope.conflict() || r.is_aborted()) continue;
    if (!r.ok() && !r.is_invalid_argument() && !IsWrongType(r)) return finish(r);
    const Status s = scope.Commit();
    if (s.is_aborted()) continue;
    if (!s.ok()) return ReplyStoreError(c, s);
    return finish(r);
  }
  c.reply.Error("ERR the command kept conflicting with other clients' writes; nothing was changed");
}

void RunAtomically(CommandCall& c, const std::function<Result<int64_t>(TxnScope&)>& body,
                   bool ok_reply) {
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    Result<int64_t> r = body(scope);
    if (!r.ok()) return r.status();
    if (ok_reply) {
      reply.Simple("OK");
    } else {
      reply.Integer(*r);
    }
    return Status::OK();
  });
}

// ---------------------------------------------------------------- commands

namespace {

void Multi(CommandCall& c) {
  RespTransaction& t = StateOf(c.client);
  if (t.in_multi) return c.reply.Error("ERR MULTI calls can not be nested");
  t.in_multi = true;
  c.reply.Simple("OK");
}

void Discard(CommandCall& c) {
  if (c.client.tx == nullptr || !c.client.tx->in_multi)
    return c.reply.Error("ERR DISCARD without MULTI");
  EndMulti(c.client);
  Unwatch(c.client);
  c.reply.Simple("OK");
}

void Watch(CommandCall& c) {
  RespTransaction& t = StateOf(c.client);
  if (t.in_multi) return c.reply.Error("ERR WATCH inside MULTI is not allowed");
  if (t.watched.size() + c.argc() - 1 > RespTransaction::kMaxWatchedKeys) {
    return c.reply.Error("ERR too many watched keys (at most " +
                         std::to_string(RespTransaction::kMaxWatchedKeys) + ")");
  }
  Keyspace* ks = c.items.keyspace();
  const int64_t now = c.items.NowMs();
  for (size_t i = 1; i < c.argc(); ++i) {
    RespTransaction::Watched w{c.client.db, std::string(c.args[i]),
                               ks != nullptr ? ks->databases().ns(c.client.db) : 0, 0, false};
    Result<StoredValue> r = c.items.store().Get(w.key);
    if (!r.ok() && !r.status().is_not_found()) return ReplyStoreError(c, r.status());
    w.live = Live(r, now);
    if (r.ok()) w.version = r->version;
    t.watched.push_back(std::move(w));
  }
  c.reply.Simple("OK");
}

void UnwatchCommand(CommandCall& c) {
  Unwatch(c.client);
  c.reply.Simple("OK");
}

// Whether a watched key changed (resp_transaction.h), read in the
// transaction.
Result<bool> WatchedChanged(TxnScope& scope, const RespTransaction::Watched& w, int64_t now) {
  if (w.db >= scope.count()) return true;
  Result<StoredValue> r = scope.db(w.db).Get(w.key);
  if (!r.ok() && !r.status().is_not_found()) return r.status();
  const bool live = Live(r, now);
  if (scope.ns(w.db) != w.ns) return w.live || live;
  if (w.live) return !live || r->version != w.version;
  return live;
}

void Exec(CommandCall& c) {
  if (c.client.tx == nullptr || !c.client.tx->in_multi)
    return c.reply.Error("ERR EXEC without MULTI");
  RespTransaction& t = *c.client.tx;
  if (t.dirty) {
    EndMulti(c.client);
    Unwatch(c.client);
    return c.reply.Error("EXECABORT Transaction discarded because of previous errors.");
  }
  // The queue leaves the state first: the commands run with the client
  // out of MULTI (a queued MULTI-control command cannot exist).
  std::vector<RespTransaction::Queued> queue = std::move(t.queue);
  std::vector<RespTransaction::Watched> watched = std::move(t.watched);
  EndMulti(c.client);
  Unwatch(c.client);
  // The database selected at EXEC: every run starts from it.
  const int db_at_exec = c.client.db;
  Items& top = c.items;
  // The item layer of database 0 outside the transaction (the scope's
  // origin): c.items is the selected database's.
  for (int run = 0; run < kMaxExecRuns; ++run) {
    c.client.db = db_at_exec;
    TxnScope scope(top);
    const int64_t now = top.NowMs();
    bool changed = false;
    Status failed;
    for (const RespTransaction::Watched& w : watched) {
      Result<bool> ch = WatchedChanged(scope, w, now);
      if (!ch.ok()) {
        failed = ch.status();
        break;
      }
      changed |= *ch;
    }
    if (scope.conflict()) continue;
    if (!failed.ok()) return ReplyStoreError(c, failed);
    if (changed) return c.reply.NullArray();
    std::string replies;
    RespReply r(&replies, c.reply.protocol());
    r.Array(queue.size());
    for (const RespTransaction::Queued& q : queue) {
      std::vector<std::string_view> args(q.args.begin(), q.args.end());
      const int selected = c.client.db.load(std::memory_order_relaxed);
      const int db = selected < scope.count() ? selected : 0;
      CommandCall call{*q.command, args, scope.items(db), c.client, c.shared, r};
      q.command->handler(call);
      if (call.close) c.close = true;
    }
    if (scope.conflict()) continue;
    const Status s = scope.Commit();
    if (s.is_aborted()) continue;
    if (!s.ok()) {
      c.client.db = db_at_exec;
      return ReplyStoreError(c, s);
    }
    c.reply.out()->append(replies);
    return;
  }
  c.client.db = db_at_exec;
  c.reply.Error(
      "ERR the transaction kept conflicting with other clients' writes; nothing was changed");
}

}  // namespace

void RegisterTransactionCommands(CommandTable& t) {
  t.Add({.name = "multi",
         .arity = 1,
         .flags = kNoScript | kLoading | kStale | kFast | kAllowBusy,
         .group = "transactions",
         .summary = "Starts a transaction.",
         .categories = "transaction",
         .handler = Multi});
  t.Add({.name = "exec",
         .arity = 1,
         .flags = kNoScript | kLoading | kStale | kSkipSlowlog,
         .group = "transactions",
         .summary = "Executes all commands in a transaction, in one store transaction.",
         .categories = "transaction",
         .handler = Exec});
  t.Add({.name = "discard",
         .arity = 1,
         .flags = kNoScript | kLoading | kStale | kFast | kAllowBusy,
         .group = "transactions",
         .summary = "Discards a transaction.",
         .categories = "transaction",
         .handler = Discard});
  t.Add({.name = "watch",
         .arity = -2,
         .flags = kNoScript | kLoading | kStale | kFast | kAllowBusy,
         .first_key = 1,
         .last_key = -1,
         .key_step = 1,
         .group = "transactions",
         .summary = "Monitors changes to keys to determine the execution of a transaction.",
         .categories = "transaction",
         .handler = Watch});
  t.Add({.name = "unwatch",
         .arity = 1,
         .flags = kNoScript | kLoading | kStale | kFast | kAllowBusy,
         .group = "transactions",
         .summary = "Forgets about all watched keys.",
         .categories = "transaction",
         .handler = UnwatchCommand});
}

void QueuedKeys(const RespClient& client, std::vector<std::string_view>* keys) {
  keys->clear();
  if (client.tx == nullptr || !client.tx->in_multi) return;
  std::vector<std::string_view> args, some;
  for (const RespTransaction::Queued& q : client.tx->queue) {
    args.assign(q.args.begin(), q.args.end());
    if (CommandKeys(*q.command, args, &some)) keys->insert(keys->end(), some.begin(), some.end());
  }
}

void DiscardMulti(RespClient& client) {
  EndMulti(client);
  Unwatch(client);
}

}  // namespace pmindex::server
