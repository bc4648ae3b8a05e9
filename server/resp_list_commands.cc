// RESP lists (collections.h): one metadata record with the positions of
// the first element (head) and one past the last (tail), and one element
// record per element, 'i' + OrderedInt64(position) -> element, so that the
// elements of a list are one range of the store in list order, index i is
// at position head + i, and a push or pop at either end, LINDEX and LSET
// are one point read or write (O(log n) store work). LINSERT and LREM
// rewrite the positions of the elements on one side of the change
// (docs/server.md states each command's cost).
//
// And the blocking forms (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) over
// resp_blocking.h: each serves itself as its non-blocking form when it
// can, else parks its connection until a push serves it or its timeout.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "server/collections.h"
#include "server/numbers.h"
#include "server/resp_blocking.h"
#include "server/resp_command.h"
#include "server/resp_list.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

constexpr char kItem = sub_space::kListItem;
// Elements read per range scan by the commands that walk a list.
constexpr int64_t kBatch = 256;
// A blocked client's pop, or a push, gives up after this many conflicts
// with other writers (each run on a new snapshot).
constexpr int kMaxServeRuns = 1000;

constexpr std::string_view kPositive = "ERR value is out of range, must be positive";

Status MissingElement() { return Status::Corruption("a list element is missing"); }

}  // namespace

// ---------------------------------------------------------------- List

List::List(Collection c) : c_(std::move(c)) {}

std::string List::Position(int64_t p) { return OrderedInt64(p); }

Status List::Push(End end, std::string_view value) {
  CollectionMeta& m = c_.mutable_meta();
  const int64_t p = end == End::kLeft ? m.head - 1 : m.tail;
  PMINDEX_RETURN_IF_ERROR(c_.Put(kItem, Position(p), value));
  if (end == End::kLeft) {
    m.head = p;
  } else {
    m.tail = p + 1;
  }
  c_.add_count(1);
  return Status::OK();
}

Result<std::string> List::Pop(End end) {
  if (size() == 0) return Status::NotFound();
  CollectionMeta& m = c_.mutable_meta();
  const int64_t p = end == End::kLeft ? m.head : m.tail - 1;
  Result<std::string> v = c_.Get(kItem, Position(p));
  if (!v.ok()) return v.status().is_not_found() ? MissingElement() : v.status();
  Result<bool> gone = c_.Remove(kItem, Position(p));
  if (!gone.ok()) return gone.status();
  if (end == End::kLeft) {
    ++m.head;
  } else {
    --m.tail;
  }
  c_.add_count(-1);
  return v;
}

Status List::PopMany(End end, int64_t n, std::vector<std::string>* out) {
  n = std::min(n, size());
  if (n <= 0) return Status::OK();
  const size_t first = out->size();
  CollectionMeta& m = c_.mutable_meta();
  if (end == End::kLeft) {
    PMINDEX_RETURN_IF_ERROR(Read(0, n, out));
  } else {
    PMINDEX_RETURN_IF_ERROR(Read(size() - n, size(), out));
    std::reverse(out->begin() + static_cast<std::ptrdiff_t>(first), out->end());
  }
  const int64_t from = end == End::kLeft ? m.head : m.tail - n;
  for (int64_t p = from; p < from + n; ++p) {
    Result<bool> r = c_.Remove(kItem, Position(p));
    if (!r.ok()) return r.status();
  }
  if (end == End::kLeft) {
    m.head += n;
  } else {
    m.tail -= n;
  }
  c_.add_count(-n);
  return Status::OK();
}

Status List::Read(int64_t from, int64_t to, std::vector<std::string>* out) {
  from = std::max<int64_t>(from, 0);
  to = std::min<int64_t>(to, size());
  if (from >= to) return Status::OK();
  std::vector<std::pair<std::string, std::string>> got;
  const std::string lo = Position(head() + from), hi = Position(head() + to);
  c_.Range(kItem, lo, std::string_view(hi), static_cast<size_t>(to - from), &got);
  if (got.size() != static_cast<size_t>(to - from)) return MissingElement();
  for (auto& [pos, v] : got) out->push_back(std::move(v));
  return Status::OK();
}

Result<std::string> List::At(int64_t index) {
  Result<std::string> v = c_.Get(kItem, Position(head() + index));
  if (!v.ok() && v.status().is_not_found()) return MissingElement();
  return v;
}

Status List::Set(int64_t index, std::string_view value) {
  return c_.Put(kItem, Position(head() + index), value);
}

Status List::Rewrite(int64_t from, const std::vector<std::string>& values) {
  // The elements at from.. become `values`; positions past the new end are
  // removed. Positions from head + from on are rewritten in place.
  const int64_t old_size = size();
  for (size_t i = 0; i < values.size(); ++i)
    PMINDEX_RETURN_IF_ERROR(c_.Put(kItem, Position(head() + from + static_cast<int64_t>(i)),
                                   values[i]));
  const int64_t new_size = from + static_cast<int64_t>(values.size());
  for (int64_t i = new_size; i < old_size; ++i) {
    Result<bool> r = c_.Remove(kItem, Position(head() + i));
    if (!r.ok()) return r.status();
  }
  c_.mutable_meta().tail = head() + new_size;
  c_.set_count(static_cast<uint64_t>(new_size));
  return Status::OK();
}

Status List::Insert(int64_t index, std::string_view value) {
  // Shifts the shorter side by one position: the elements before `index`
  // one to the left (head - 1), or those from `index` on one to the right.
  CollectionMeta& m = c_.mutable_meta();
  const int64_t n = size();
  if (index <= n / 2) {
    std::vector<std::string> before;
    PMINDEX_RETURN_IF_ERROR(Read(0, index, &before));
    for (int64_t i = 0; i < index; ++i)
      PMINDEX_RETURN_IF_ERROR(
          c_.Put(kItem, Position(m.head + i - 1), before[static_cast<size_t>(i)]));
    PMINDEX_RETURN_IF_ERROR(c_.Put(kItem, Position(m.head + index - 1), value));
    --m.head;
  } else {
    std::vector<std::string> after;
    PMINDEX_RETURN_IF_ERROR(Read(index, n, &after));
    for (int64_t i = n - 1; i >= index; --i)
      PMINDEX_RETURN_IF_ERROR(
          c_.Put(kItem, Position(m.head + i + 1), after[static_cast<size_t>(i - index)]));
    PMINDEX_RETURN_IF_ERROR(c_.Put(kItem, Position(m.head + index), value));
    ++m.tail;
  }
  c_.add_count(1);
  return Status::OK();
}

Status List::Trim(int64_t start, int64_t stop) {
  // Keeps [start, stop] (clamped; empty if start > stop): removes the
  // elements outside it, O(removed) point removes.
  CollectionMeta& m = c_.mutable_meta();
  const int64_t n = size();
  start = std::clamp<int64_t>(start, 0, n);
  stop = std::clamp<int64_t>(stop + 1, start, n);
  for (int64_t i = 0; i < start; ++i) {
    Result<bool> r = c_.Remove(kItem, Position(m.head + i));
    if (!r.ok()) return r.status();
  }
  for (int64_t i = stop; i < n; ++i) {
    Result<bool> r = c_.Remove(kItem, Position(m.head + i));
    if (!r.ok()) return r.status();
  }
  m.tail = m.head + stop;
  m.head += start;
  c_.set_count(static_cast<uint64_t>(stop - start));
  return Status::OK();
}

Result<std::optional<List>> FindList(TxnScope& scope, int db, std::string_view key) {
  Result<Collection> c = Collection::Find(scope, db, key, CollectionType::kList);
  if (!c.ok()) {
    if (c.status().is_not_found()) return std::optional<List>();
    return c.status();
  }
  return std::optional<List>(List(std::move(c.value())));
}

Result<List> FindOrCreateList(TxnScope& scope, int db, std::string_view key) {
  Result<Collection> c = Collection::FindOrCreate(scope, db, key, CollectionType::kList);
  if (!c.ok()) return c.status();
  return List(std::move(c.value()));
}

void NoteKeyReady(CommandCall& c, int db, std::string_view key) {
  if (c.shared.blocking().any()) c.client.ready_keys.emplace_back(db, std::string(key));
}

bool ParseTimeout(CommandCall& c, std::string_view arg, int64_t* deadline_ms) {
  // Seconds, fractional allowed (Redis rounds up to the millisecond).
  long double secs = 0;
  std::string buf(arg);
  char* end = nullptr;
  errno = 0;
  if (!buf.empty() && !std::isspace(static_cast<unsigned char>(buf[0])))
    secs = std::strtold(buf.c_str(), &end);
  if (buf.empty() || end != buf.c_str() + buf.size() || std::isnan(secs) || std::isinf(secs) ||
      errno == ERANGE) {
    c.reply.Error("ERR timeout is not a float or out of range");
    return false;
  }
  const long double ms = std::ceil(secs * 1000.0L);
  if (ms < 0) {
    c.reply.Error("ERR timeout is negative");
    return false;
  }
  // A deadline past the steady clock's range (~73 million years).
  if (ms > static_cast<long double>(std::numeric_limits<int64_t>::max() / 4)) {
    c.reply.Error("ERR timeout is not a float or out of range");
    return false;
  }
  const auto n = static_cast<int64_t>(ms);
  *deadline_ms = n == 0 ? 0 : SteadyMs() + n;
  return true;
}

namespace {

bool InTransaction(CommandCall& c) { return TxnScope::Of(c.items) != nullptr; }

// Runs a parked client's pop in a transaction of its own (any thread):
// true if it was served (its reply, or an error it answers, in *reply).
bool ServeInTransaction(Items& items, int protocol, const ServeBody& body, std::string* reply,
                        std::vector<std::string>* pushed) {
  for (int run = 0; run < kMaxServeRuns; ++run) {
    reply->clear();
    pushed->clear();
    TxnScope scope(items);
    RespReply r(reply, protocol);
    bool served = false;
    Status s = body(scope, r, &served, pushed);
    if (scope.conflict() || s.is_aborted()) continue;
    if (s.ok() && !served) return false;
    if (s.ok()) s = scope.Commit();
    if (s.is_aborted()) continue;
    if (!s.ok()) {
      // An error the command answers (WRONGTYPE of BLMOVE's destination)
      // or a store error: the client gets it, nothing is applied.
      reply->clear();
      pushed->clear();
      r.Error(s.is_invalid_argument() || IsWrongType(s) ? std::string(s.message())
                                                         : "ERR " + StoreErrorText(s));
    }
    return true;
  }
  return false;  // kept conflicting: it stays parked, the next push retries
}

}  // namespace

void RunBlocking(CommandCall& c, std::vector<std::string> keys, int64_t deadline_ms,
                 const ServeBody& now, ServeBody later, bool null_bulk_in_multi) {
  const int db = c.items.db_index();
  BlockingRegistry& reg = c.shared.blocking();
  // Clients parked on one of the keys come first: this one queues behind.
  bool queue = false;
  for (const std::string& k : keys) queue = queue || reg.HasWaiters(db, k);
  const bool in_tx = InTransaction(c);
  if (!queue || in_tx) {
    const size_t before = c.reply.out()->size();
    std::vector<std::string> pushed;
    RunInTransaction(c, [&](TxnScope& scope, RespReply& r) -> Status {
      bool served = false;
      pushed.clear();
      Status s = now(scope, r, &served, &pushed);
      if (s.ok() && !served && in_tx) {
        // Inside MULTI/EXEC a blocking command does not block: it answers
        // at once, as on a timeout.
        if (null_bulk_in_multi) {
          r.NullBulk();
        } else {
          r.NullArray();
        }
      }
      return s;
    });
    for (const std::string& k : pushed) NoteKeyReady(c, db, k);
    if (c.reply.out()->size() != before) return;  // served, or an error
  }
  auto w = std::make_shared<Waiter>();
  w->client_id = c.client.id;
  w->db = db;
  w->keys = std::move(keys);
  w->deadline_ms = deadline_ms;
  const int protocol = c.reply.protocol();
  Items* items = &c.items;
  w->serve = [items, protocol, body = std::move(later)](std::string* reply,
                                                         std::vector<std::string>* pushed) {
    return ServeInTransaction(*items, protocol, body, reply, pushed);
  };
  if (c.waker != nullptr) w->wake = *c.waker;
  RespReply(&w->timeout_reply, protocol).NullArray();
  if (reg.Park(w)) {
    c.reply.out()->append(w->reply);
    return;
  }
  c.park = std::move(w);
}

// ---------------------------------------------------------------- commands

namespace {

using End = List::End;

bool ParseEnd(CommandCall& c, std::string_view arg, End* end) {
  if (EqualsIgnoreCase(arg, "left")) {
    *end = End::kLeft;
  } else if (EqualsIgnoreCase(arg, "right")) {
    *end = End::kRight;
  } else {
    c.reply.Error(kSyntax);
    return false;
  }
  return true;
}

bool ParseInt(CommandCall& c, std::string_view arg, int64_t* v) {
  if (ParseNumber(arg, v)) return true;
  c.reply.Error(kNotInteger);
  return false;
}

// Redis's getRangeLong: an integer in [lo, hi], else `error` (also for
// what is not an integer).
bool ParseRange(CommandCall& c, std::string_view arg, int64_t lo, int64_t hi,
                std::string_view error, int64_t* v) {
  if (ParseNumber(arg, v) && *v >= lo && *v <= hi) return true;
  c.reply.Error(error);
  return false;
}

// LPUSH, RPUSH, LPUSHX, RPUSHX.
void PushCommand(CommandCall& c, End end, bool only_existing) {
  const std::string_view key = c.args[1];
  const int db = c.items.db_index();
  bool pushed = false;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& r) -> Status {
    pushed = false;
    std::optional<List> l;
    if (only_existing) {
      Result<std::optional<List>> f = FindList(scope, db, key);
      if (!f.ok()) return f.status();
      if (!f.value()) {
        r.Integer(0);
        return Status::OK();
      }
      l = std::move(f.value());
    } else {
      Result<List> f = FindOrCreateList(scope, db, key);
      if (!f.ok()) return f.status();
      l = std::move(f.value());
    }
    for (size_t i = 2; i < c.argc(); ++i) PMINDEX_RETURN_IF_ERROR(l->Push(end, c.args[i]));
    PMINDEX_RETURN_IF_ERROR(l->Save());
    r.Integer(l->size());
    pushed = true;
    return Status::OK();
  });
  if (pushed) NoteKeyReady(c, db, key);
}

void LPush(CommandCall& c) { PushCommand(c, End::kLeft, false); }
void RPush(CommandCall& c) { PushCommand(c, End::kRight, false); }
void LPushX(CommandCall& c) { PushCommand(c, End::kLeft, true); }
void RPushX(CommandCall& c) { PushCommand(c, End::kRight, true); }

// LPOP, RPOP [count].
void PopCommand(CommandCall& c, End end) {
  if (c.argc() > 3) {
    return c.reply.Error("ERR wrong number of arguments for '" + c.command.full_name +
                         "' command");
  }
  const bool has_count = c.argc() == 3;
  int64_t count = 0;
  if (has_count && !ParseRange(c, c.args[2], 0, std::numeric_limits<int64_t>::max(), kPositive,
                               &count)) {
    return;
  }
  const std::string_view key = c.args[1];
  const int db = c.items.db_index();
  RunInTransaction(c, [&](TxnScope& scope, RespReply& r) -> Status {
    Result<std::optional<List>> f = FindList(scope, db, key);
    if (!f.ok()) return f.status();
    if (!f.value()) {
      if (has_count) {
        r.NullArray();
      } else {
        r.NullBulk();
      }
      return Status::OK();
    }
    List& l = *f.value();
    if (!has_count) {
      Result<std::string> v = l.Pop(end);
      if (!v.ok()) return v.status();
      PMINDEX_RETURN_IF_ERROR(l.Save());
      r.Bulk(*v);
      return Status::OK();
    }
    std::vector<std::string> out;
    PMINDEX_RETURN_IF_ERROR(l.PopMany(end, count, &out));
    PMINDEX_RETURN_IF_ERROR(l.Save());
    r.BulkArray(out);
    return Status::OK();
  });
}

void LPop(CommandCall& c) { PopCommand(c, End::kLeft); }
void RPop(CommandCall& c) { PopCommand(c, End::kRight); }

void LLen(CommandCall& c) {
  const std::string_view key = c.args[1];
  const int db = c.items.db_index();
  RunInTransaction(c, [&](TxnScope& scope, RespReply& r) -> Status {
    Result<std::optional<List>> f = FindList(scope, db, key);
    if (!f.ok()) return f.status();
    r.Integer(f.value() ? f.value()->size() : 0);
    return Status::OK();
  });
}

// Redis's index: negative counts from the tail.
int64_t Normalize(int64_t index, int64_t size) { return index < 0 ? index + size : index; }

void LIndex(CommandCall& c) {
  int64_t index = 0;
  if (!ParseInt(c, c.args[2], &index)) return;
  const std::string_view key = c.args[1];
  const int db = c.items.db_index();
  RunInTransaction(c, [&](TxnScope& scope, RespReply& r) -> Status {
    Result<std::optional<List>> f = FindList(scope, db, key);
    if (!f.ok()) return f.status();
    if (!f.value()) {
      r.NullBulk();
      return Status::OK();
    }
    List& l = *f.value();
    const int64_t i = Normalize(index, l.size());
    if (i < 0 || i >= l.size()) {
      r.NullBulk();
      return Status::OK();
    }
    Result<std::string> v = l.At(i);
    if (!v.ok()) return v.status();
    r.Bulk(*v);
    return Status::OK();
  });
}

void LRange(CommandCall& c) {
  int64_t start = 0, stop = 0;
  if (!ParseInt(c, c.args[2], &start) || !ParseInt(c, c.args[3], &stop)) return;
  const std::string_view key = c.args[1];
  const int db = c.items.db_index();
  RunInTransaction(c, [&](TxnScope& scope, RespReply& r) -> Status {
    Result<std::optional<List>> f = FindList(scope, db, key);
    if (!f.ok()) return f.status();
    std::vector<std::string> out;
    if (f.value()) {
      List& l = *f.value();
      const int64_t n = l.size();
      const int64_t from = std::max<int64_t>(Normalize(start, n), 0);
      const int64_t to = std::min<int64_t>(Normalize(stop, n), n - 1);
      if (from <= to) PMINDEX_RETURN_IF_ERROR(l.Read(from, to + 1, &out));
    }
    r.BulkArray(out);
    return Status::OK();
  });
}

void LSet(CommandCall& c) {
  int64_t index = 0;
  if (!ParseInt(c, c.args[2], &index)) return;
  const std::string_view key = c.args[1];
  const int db = c.items.db_index();
  RunInTransaction(c, [&](TxnScope& scope, RespReply& r) -> Status {
    Result<std::optional<List>> f = FindList(scope, db, key);
    if (!f.ok()) return f.status();
    if (!f.value()) return Status::InvalidArgument("ERR no such key");
    List& l = *f.value();
    const int64_t i = Normalize(index, l.size());
    if (i < 0 || i >= l.size()) return Status::InvalidArgument("ERR index out of range");
    PMINDEX_RETURN_IF_ERROR(l.Set(i, c.args[3]));
    PMINDEX_RETURN_IF_ERROR(l.Save());
    r.Simple("OK");
    return Status::OK();
  });
}

void LTrim(CommandCall& c) {
  int64_t start = 0, stop = 0;
  if (!ParseInt(c, c.args[2], &start) || !ParseInt(c, c.args[3], &stop)) return;
  const std::string_view key = c.args[1];
  const int db = c.items.db_index();
  RunInTransaction(c, [&](TxnScope& scope, RespReply& r) -> Status {
    Result<std::optional<List>> f = FindList(scope, db, key);
    if (!f.ok()) return f.status();
    if (f.value()) {
      List& l = *f.value();
      const int64_t n = l.size();
      const int64_t from = std::max<int64_t>(Normalize(start, n), 0);
      const int64_t to = std::min<int64_t>(Normalize(stop, n), n - 1);
      if (from > to) {
        PMINDEX_RETURN_IF_ERROR(l.Trim(0, -1));
      } else if (from > 0 || to < n - 1) {
        PMINDEX_RETURN_IF_ERROR(l.Trim(from, to));
      }
      PMINDEX_RETURN_IF_ERROR(l.Save());
    }
    r.Simple("OK");
    return Status::OK();
  });
}

// Calls f(index, element) for the elements from the head (or from the
// tail when `reverse`), in batches, until f returns false.
template <class F>
Status Walk(List& l, bool reverse, F&& f) {
  const int64_t n = l.size();
  std::vector<std::string> batch;
  if (!reverse) {
    for (int64_t from = 0; from < n; from += kBatch) {
      batch.clear();
      PMINDEX_RETURN_IF_ERROR(l.Read(from, from + kBatch, &batch));
      for (size_t i = 0; i < batch.size(); ++i)
        if (!f(from + static_cast<int64_t>(i), batch[i])) return Status::OK();
    }
  } else {
    for (int64_t to = n; to > 0; to -= kBatch) {
      batch.clear();
      const int64_t from = std::max<int64_t>(to - kBatch, 0);
      PMINDEX_RETURN_IF_ERROR(l.Read(from, to, &batch));
      for (size_t i = batch.size(); i-- > 0;)
        if (!f(from + static_cast<int64_t>(i), batch[i])) return Status::OK();
    }
  }
  return Status::OK();
}

void LRem(CommandCall& c) {
  int64_t count = 0;
  if (!ParseInt(c, c.args[2], &count)) return;
  const std::string_view key = c.args[1];
  const std::string_view element = c.args[3];
  const int db = c.items.db_index();
  RunInTransaction(c, [&](TxnScope& scope, RespReply& r) -> Status {
    Result<std::optional<List>> f = FindList(scope, db, key);
    if (!f.ok()) return f.status();
    if (!f.value()) {
      r.Integer(0);
      return Status::OK();
    }
    List& l = *f.value();
    // The indexes to remove, up to |count| (0: all), from the head for
    // count >= 0, from the tail otherwise.
    std::vector<int64_t> gone;
    const uint64_t limit = count == 0 ? ~uint64_t{0} : count < 0 ? 0 - static_cast<uint64_t>(count)
                                                                  : static_cast<uint64_t>(count);
    PMINDEX_RETURN_IF_ERROR(Walk(l, count < 0, [&](int64_t i, const std::string& v) {
      if (v == element) gone.push_back(i);
      return gone.size() < limit;
    }));
    if (!gone.empty()) {
      std::sort(gone.begin(), gone.end());
      // The elements after the first removed one, without the removed.
      std::vector<std::string> tail;
      PMINDEX_RETURN_IF_ERROR(l.Read(gone.front(), l.size(), &tail));
      std::vector<std::string> kept;
      size_t g = 0;
      for (size_t i = 0; i < tail.size(); ++i) {
        const int64_t index = gone.front() + static_cast<int64_t>(i);
        if (g < gone.size() && gone[g] == index) {
          ++g;
          continue;
        }
        kept.push_back(std::move(tail[i]));
      }
      PMINDEX_RETURN_IF_ERROR(l.Rewrite(gone.front(), kept));
      PMINDEX_RETURN_IF_ERROR(l.Save());
    }
    r.Integer(static_cast<int64_t>(gone.size()));
    return Status::OK();
  });
}

void LInsert(CommandCall& c) {
  bool after = false;
  if (EqualsIgnoreCase(c.args[2], "after")) {
    after = true;
  } else if (!EqualsIgnoreCase(c.args[2], "before")) {
    return c.reply.Error(kSyntax);
  }
  const std::string_view key = c.args[1];
  const std::string_view pivot = c.args[3];
  const std::string_view element = c.args[4];
  const int db = c.items.db_index();
  bool pushed = false;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& r) -> Status {
    pushed = false;
    Result<std::optional<List>> f = FindList(scope, db, key);
    if (!f.ok()) return f.status();
    if (!f.value()) {
      r.Integer(0);
      return Status::OK();
    }
    List& l = *f.value();
    int64_t at = -1;
    PMINDEX_RETURN_IF_ERROR(Walk(l, false, [&](int64_t i, const std::string& v) {
      if (v != pivot) return true;
      at = i;
      return false;
    }));
    if (at < 0) {
      r.Integer(-1);
      return Status::OK();
    }
    PMINDEX_RETURN_IF_ERROR(l.Insert(after ? at + 1 : at, element));
    PMINDEX_RETURN_IF_ERROR(l.Save());
    r.Integer(l.size());
    pushed = true;
    return Status::OK();
  });
  if (pushed) NoteKeyReady(c, db, key);
}

void LPos(CommandCall& c) {
  int64_t rank = 1, count = -1, maxlen = 0;  // count -1: not given
  for (size_t j = 3; j < c.argc(); ++j) {
    const bool more = j + 1 < c.argc();
    if (EqualsIgnoreCase(c.args[j], "rank") && more) {
      if (!ParseInt(c, c.args[++j], &rank)) return;
      if (rank == 0) {
        return c.reply.Error(
            "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... "
            "or use negative to start from the end of the list");
      }
      if (rank == std::numeric_limits<int64_t>::min()) {
        return c.reply.Error("ERR value is out of range");
      }
    } else if (EqualsIgnoreCase(c.args[j], "count") && more) {
      if (!ParseRange(c, c.args[++j], 0, std::numeric_limits<int64_t>::max(),
                      "ERR COUNT can't be negative", &count)) {
        return;
      }
    } else if (EqualsIgnoreCase(c.args[j], "maxlen") && more) {
      if (!ParseRange(c, c.args[++j], 0, std::numeric_limits<int64_t>::max(),
                      "ERR MAXLEN can't be negative", &maxlen)) {
        return;
      }
    } else {
      return c.reply.Error(kSyntax);
    }
  }
  const std::string_view key = c.args[1];
  const std::string_view element = c.args[2];
  const int db = c.items.db_index();
  RunInTransaction(c, [&](TxnScope& scope, RespReply& r) -> Status {
    Result<std::optional<List>> f = FindList(scope, db, key);
    if (!f.ok()) return f.status();
    std::vector<int64_t> found;
    if (f.value()) {
      const bool reverse = rank < 0;
      const int64_t skip = (reverse ? -rank : rank) - 1;  // matches before the first reported
      int64_t seen = 0, matches = 0;
      PMINDEX_RETURN_IF_ERROR(Walk(*f.value(), reverse, [&](int64_t i, const std::string& v) {
        if (maxlen > 0 && seen++ >= maxlen) return false;
        if (v != element) return true;
        if (matches++ < skip) return true;
        found.push_back(i);
        return count == 0 || static_cast<int64_t>(found.size()) < std::max<int64_t>(count, 1);
      }));
    }
    if (count >= 0) {
      r.Array(found.size());
      for (int64_t i : found) r.Integer(i);
    } else if (found.empty()) {
      r.NullBulk();
    } else {
      r.Integer(found.front());
    }
    return Status::OK();
  });
}

// Pops from the first non-empty list of `keys`: [key, element] (count < 0)
// or [key, [elements...]] (LMPOP's form). `skip_wrong`: a key of another
// type is passed over (a parked client is served from lists only), not an
// error.
ServeBody PopBody(int db, std::vector<std::string> keys, End end, int64_t count,
                  bool skip_wrong) {
  return [db, keys = std::move(keys), end, count, skip_wrong](
             TxnScope& scope, RespReply& r, bool* served, std::vector<std::string>*) -> Status {
    for (const std::string& key : keys) {
      Result<std::optional<List>> f = FindList(scope, db, key);
      if (!f.ok()) {
        if (skip_wrong && IsWrongType(f.status())) continue;
        return f.status();
      }
      if (!f.value() || f.value()->size() == 0) continue;
      List& l = *f.value();
      r.Array(2);
      r.Bulk(key);
      if (count < 0) {
        Result<std::string> v = l.Pop(end);
        if (!v.ok()) return v.status();
        PMINDEX_RETURN_IF_ERROR(l.Save());
        r.Bulk(*v);
      } else {
        std::vector<std::string> out;
        PMINDEX_RETURN_IF_ERROR(l.PopMany(end, count, &out));
        PMINDEX_RETURN_IF_ERROR(l.Save());
        r.BulkArray(out);
      }
      *served = true;
      return Status::OK();
    }
    return Status::OK();
  };
}

// Moves one element from an end of `src` to an end of `dst` (LMOVE):
// replies it; nothing if src is empty. dst of another type is WRONGTYPE
// (checked before anything moves); src of another type too, unless
// `skip_wrong` (then src counts as empty).
ServeBody MoveBody(int db, std::string src, std::string dst, End from, End to, bool skip_wrong) {
  return [db, src = std::move(src), dst = std::move(dst), from, to, skip_wrong](
             TxnScope& scope, RespReply& r, bool* served,
             std::vector<std::string>* pushed) -> Status {
    Result<std::optional<List>> s = FindList(scope, db, src);
    if (!s.ok()) return skip_wrong && IsWrongType(s.status()) ? Status::OK() : s.status();
    if (!s.value() || s.value()->size() == 0) return Status::OK();
    List& sl = *s.value();
    if (src == dst) {
      Result<std::string> v = sl.Pop(from);
      if (!v.ok()) return v.status();
      PMINDEX_RETURN_IF_ERROR(sl.Push(to, *v));
      PMINDEX_RETURN_IF_ERROR(sl.Save());
      r.Bulk(*v);
    } else {
      Result<List> d = FindOrCreateList(scope, db, dst);
      if (!d.ok()) return d.status();
      Result<std::string> v = sl.Pop(from);
      if (!v.ok()) return v.status();
      PMINDEX_RETURN_IF_ERROR(sl.Save());
      PMINDEX_RETURN_IF_ERROR(d->Push(to, *v));
      PMINDEX_RETURN_IF_ERROR(d->Save());
      r.Bulk(*v);
    }
    pushed->push_back(dst);
    *served = true;
    return Status::OK();
  };
}

// LMOVE src dst from to; RPOPLPUSH src dst (RIGHT LEFT).
void MoveCommand(CommandCall& c, End from, End to) {
  const int db = c.items.db_index();
  const ServeBody body = MoveBody(db, std::string(c.args[1]), std::string(c.args[2]), from, to,
                                  false);
  std::vector<std::string> pushed;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& r) -> Status {
    bool served = false;
    pushed.clear();
    Status s = body(scope, r, &served, &pushed);
    if (s.ok() && !served) r.NullBulk();
    return s;
  });
  for (const std::string& k : pushed) NoteKeyReady(c, db, k);
}

void LMove(CommandCall& c) {
  End from, to;
  if (!ParseEnd(c, c.args[3], &from) || !ParseEnd(c, c.args[4], &to)) return;
  MoveCommand(c, from, to);
}

void RPopLPush(CommandCall& c) { MoveCommand(c, End::kRight, End::kLeft); }

// LMPOP numkeys key... LEFT|RIGHT [COUNT n] from args[at] on: the keys,
// the end and the count (1 if not given). False: an error was replied.
bool ParseMpop(CommandCall& c, size_t at, std::vector<std::string>* keys, End* end,
               int64_t* count) {
  int64_t numkeys = 0;
  if (!ParseRange(c, c.args[at], 1, std::numeric_limits<int64_t>::max(),
                  "ERR numkeys should be greater than 0", &numkeys)) {
    return false;
  }
  const size_t where = at + 1 + static_cast<size_t>(std::min<int64_t>(numkeys, 1 << 30));
  if (numkeys > static_cast<int64_t>(c.argc()) || where >= c.argc()) {
    c.reply.Error(kSyntax);
    return false;
  }
  for (size_t i = at + 1; i < where; ++i) {
    if (!CheckKey(c, c.args[i])) return false;
    keys->emplace_back(c.args[i]);
  }
  if (!ParseEnd(c, c.args[where], end)) return false;
  *count = -1;
  for (size_t j = where + 1; j < c.argc(); ++j) {
    if (*count == -1 && EqualsIgnoreCase(c.args[j], "count") && j + 1 < c.argc()) {
      if (!ParseRange(c, c.args[++j], 1, std::numeric_limits<int64_t>::max(),
                      "ERR count should be greater than 0", count)) {
        return false;
      }
    } else {
      c.reply.Error(kSyntax);
      return false;
    }
  }
  if (*count == -1) *count = 1;
  return true;
}

void LMPop(CommandCall& c) {
  std::vector<std::string> keys;
  End end;
  int64_t count = 0;
  if (!ParseMpop(c, 1, &keys, &end, &count)) return;
  const ServeBody body = PopBody(c.items.db_index(), std::move(keys), end, count, false);
  RunInTransaction(c, [&](TxnScope& scope, RespReply& r) -> Status {
    bool served = false;
    std::vector<std::string> pushed;
    Status s = body(scope, r, &served, &pushed);
    if (s.ok() && !served) r.NullArray();
    return s;
  });
}

// BLPOP key... timeout; BRPOP.
void BlockingPop(CommandCall& c, End end) {
  int64_t deadline = 0;
  if (!ParseTimeout(c, c.args[c.argc() - 1], &deadline)) return;
  std::vector<std::string> keys(c.args.begin() + 1, c.args.end() - 1);
  const int db = c.items.db_index();
  RunBlocking(c, keys, deadline, PopBody(db, keys, end, -1, false),
              PopBody(db, keys, end, -1, true), false);
}

void BLPop(CommandCall& c) { BlockingPop(c, End::kLeft); }
void BRPop(CommandCall& c) { BlockingPop(c, End::kRight); }

void BlockingMove(CommandCall& c, End from, End to, std::string_view timeout) {
  int64_t deadline = 0;
  if (!ParseTimeout(c, timeout, &deadline)) return;
  const int db = c.items.db_index();
  std::string src(c.args[1]), dst(c.args[2]);
  RunBlocking(c, {src}, deadline, MoveBody(db, src, dst, from, to, false),
              MoveBody(db, src, dst, from, to, true), true);
}

void BLMove(CommandCall& c) {
  End from, to;
  if (!ParseEnd(c, c.args[3], &from) || !ParseEnd(c, c.args[4], &to)) return;
  BlockingMove(c, from, to, c.args[5]);
}

void BRPopLPush(CommandCall& c) { BlockingMove(c, End::kRight, End::kLeft, c.args[3]); }

// BLMPOP timeout numkeys key... LEFT|RIGHT [COUNT n].
void BLMPop(CommandCall& c) {
  int64_t deadline = 0;
  if (!ParseTimeout(c, c.args[1], &deadline)) return;
  std::vector<std::string> keys;
  End end;
  int64_t count = 0;
  if (!ParseMpop(c, 2, &keys, &end, &count)) return;
  const int db = c.items.db_index();
  RunBlocking(c, keys, deadline, PopBody(db, keys, end, count, false),
              PopBody(db, keys, end, count, true), false);
}

// The list commands (registered by RegisterListCommands).
const CommandSpec kListCommands[] = {
    {"lpush", -3, kWrite | kDenyOom | kFast, 1, 1, 1, "RW INSERT",
     "Prepends elements to a list; creates it if needed.", LPush},
    {"rpush", -3, kWrite | kDenyOom | kFast, 1, 1, 1, "RW INSERT",
     "Appends elements to a list; creates it if needed.", RPush},
    {"lpushx", -3, kWrite | kDenyOom | kFast, 1, 1, 1, "RW INSERT",
     "Prepends elements to a list only when it exists.", LPushX},
    {"rpushx", -3, kWrite | kDenyOom | kFast, 1, 1, 1, "RW INSERT",
     "Appends elements to a list only when it exists.", RPushX},
    {"lpop", -2, kWrite | kFast, 1, 1, 1, "RW ACCESS DELETE",
     "Removes and returns the first elements of a list.", LPop},
    {"rpop", -2, kWrite | kFast, 1, 1, 1, "RW ACCESS DELETE",
     "Removes and returns the last elements of a list.", RPop},
    {"llen", 2, kReadonly | kFast, 1, 1, 1, "RO", "Returns the length of a list.", LLen},
    {"lindex", 3, kReadonly, 1, 1, 1, "RO ACCESS", "Returns an element of a list by its index.",
     LIndex},
    {"lrange", 4, kReadonly, 1, 1, 1, "RO ACCESS", "Returns a range of elements of a list.",
     LRange},
    {"lset", 4, kWrite | kDenyOom, 1, 1, 1, "RW UPDATE", "Sets the element of a list at an index.",
     LSet},
    {"ltrim", 4, kWrite, 1, 1, 1, "RW DELETE", "Keeps only a range of a list's elements.", LTrim},
    {"lrem", 4, kWrite, 1, 1, 1, "RW DELETE", "Removes elements equal to a value from a list.",
     LRem},
    {"linsert", 5, kWrite | kDenyOom, 1, 1, 1, "RW INSERT",
     "Inserts an element before or after another in a list.", LInsert},
    {"lpos", -3, kReadonly, 1, 1, 1, "RO",
     "Returns the indexes of the elements of a list equal to a value.", LPos},
    {"lmove", 5, kWrite | kDenyOom, 1, 2, 1, "RW ACCESS DELETE",
     "Moves an element from one end of a list to an end of another.", LMove},
    {"rpoplpush", 3, kWrite | kDenyOom, 1, 2, 1, "RW ACCESS DELETE",
     "Moves the last element of a list to the head of another.", RPopLPush},
    {"lmpop", -4, kWrite | kMovableKeys, 0, 0, 0, "RW ACCESS DELETE",
     "Pops elements from the first non-empty list of several.", LMPop},
    {"blpop", -3, kWrite | kNoScript | kBlocking, 1, -2, 1, "RW ACCESS DELETE",
     "Pops the first element of the first non-empty list, or blocks until one is pushed.", BLPop},
    {"brpop", -3, kWrite | kNoScript | kBlocking, 1, -2, 1, "RW ACCESS DELETE",
     "Pops the last element of the first non-empty list, or blocks until one is pushed.", BRPop},
    {"blmove", 6, kWrite | kDenyOom | kNoScript | kBlocking, 1, 2, 1, "RW ACCESS DELETE",
     "LMOVE, or blocks until the source has an element.", BLMove},
    {"brpoplpush", 4, kWrite | kDenyOom | kNoScript | kBlocking, 1, 2, 1, "RW ACCESS DELETE",
     "RPOPLPUSH, or blocks until the source has an element.", BRPopLPush},
    {"blmpop", -5, kWrite | kBlocking | kMovableKeys, 0, 0, 0, "RW ACCESS DELETE",
     "LMPOP, or blocks until one of the lists has an element.", BLMPop},
};

}  // namespace

void RegisterListCommands(CommandTable& t) { AddCommands(t, kListCommands, "list", "list"); }

}  // namespace pmindex::server
