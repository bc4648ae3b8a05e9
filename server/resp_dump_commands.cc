// DUMP, RESTORE, RESTORE-ASKING and MIGRATE: a key's value serialized and
// recreated, on this node or on another (cluster resharding moves keys
// with MIGRATE, as redis-cli --cluster does with Redis).
//
// The serialized form is pmserver's own, not Redis's RDB encoding: a
// Redis server refuses it, as pmserver refuses Redis's ("DUMP payload
// version or checksum are wrong"):
//
//   string:      ['S'][flags: 4 bytes LE][data]
//   collection:  ['C'][type: 1 byte][count, head, tail: 8 bytes LE each]
//                then per element: [sub: 1 byte][member length: 4 bytes LE]
//                [member][value length: 4 bytes LE][value]
//   then         [format: 2 bytes LE, kDumpFormat][checksum: 8 bytes LE,
//                 FNV-1a 64 of everything before it]
//
// A collection's elements are its records as stored (every sub-space:
// a sorted set's score index, a list's positions), so RESTORE rebuilds it
// in one transaction under a new generation without knowing the type's
// rules. Its payload is one bulk string: a collection larger than a
// request may carry (--proto-max-bulk-len) cannot be moved this way.
//
// The expiry travels as RESTORE's ttl argument, as in Redis.
//
// MIGRATE connects to the target (a blocking connection from the calling
// event-loop thread, bounded by its timeout, as Redis's blocks its one
// thread), sends one RESTORE-ASKING per key with REPLACE if asked, and
// removes each key here once the target acknowledged it (unless COPY). On
// a slot this node is migrating it holds the slot's lock exclusively
// (Cluster::SlotLock) from reading the keys to removing them, so no
// command changes a key between its copy and its removal.
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "server/cluster.h"
#include "server/collections.h"
#include "server/key_slot.h"
#include "server/numbers.h"
#include "server/resp_command.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

constexpr uint16_t kDumpFormat = 0x5001;
constexpr char kTypeString = 'S';
constexpr char kTypeCollection = 'C';
constexpr size_t kTrailerBytes = 2 + 8;
constexpr std::string_view kBadPayload = "ERR DUMP payload version or checksum are wrong";

uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

void PutLittle(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetLittle(std::string_view s, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[static_cast<size_t>(i)]);
  return v;
}

void Seal(std::string* out) {
  PutLittle(kDumpFormat, 2, out);
  PutLittle(Fnv1a64(*out), 8, out);
}

// The sub-spaces a type keeps its elements in.
std::string_view SubSpaces(CollectionType t) {
  switch (t) {
    case CollectionType::kHash:
      return "f";
    case CollectionType::kList:
      return "i";
    case CollectionType::kSet:
      return "m";
    case CollectionType::kZset:
      return "ms";
  }
  return "";
}

Result<std::string> SerializeCollection(Collection& c) {
  std::string out(1, kTypeCollection);
  out.push_back(static_cast<char>(c.type()));
  PutLittle(c.count(), 8, &out);
  PutLittle(static_cast<uint64_t>(c.meta().head), 8, &out);
  PutLittle(static_cast<uint64_t>(c.meta().tail), 8, &out);
  constexpr size_t kBatch = 1024;
  std::vector<std::pair<std::string, std::string>> batch;
  for (char sub : SubSpaces(c.type())) {
    std::string from;
    for (;;) {
      batch.clear();
      const size_t n = c.Range(sub, from, std::nullopt, kBatch, &batch);
      for (const auto& [m, v] : batch) {
        out.push_back(sub);
        PutLittle(m.size(), 4, &out);
        out.append(m);
        PutLittle(v.size(), 4, &out);
        out.append(v);
      }
      if (n < kBatch) break;
      from = batch.back().first;
      from.push_back('\0');
    }
  }
  Seal(&out);
  return out;
}

// A key's value, serialized, with its expiry and version.
struct Dumped {
  std::string payload;
  int64_t expiry_ms = 0;
  uint64_t version = 0;
  bool collection = false;
};

// The live value at `key`, serialized; NotFound if there is none.
Result<Dumped> DumpKey(Items& items, std::string_view key) {
  Result<KeyState> st = PeekKey(items, key);
  if (!st.ok()) return st.status();
  if (st->kind == KeyKind::kNone) return Status::NotFound();
  Dumped d;
  d.expiry_ms = st->expiry_ms;
  d.version = st->version;
  if (st->kind == KeyKind::kString) {
    Item item;
    if (!item_codec::Decode(st->stored, &item))
      return Status::Corruption("the stored value is not a pmserver item");
    d.payload.assign(1, kTypeString);
    PutLittle(item.flags, 4, &d.payload);
    d.payload.append(item.data);
    Seal(&d.payload);
    return d;
  }
  d.collection = true;
  PMINDEX_RETURN_IF_ERROR(RunOnItems(items, [&](TxnScope& scope, int db) -> Status {
    Result<Collection> c = FindAnyCollection(scope, db, key);
    if (!c.ok()) return c.status();
    Result<std::string> p = SerializeCollection(*c);
    if (!p.ok()) return p.status();
    d.payload = std::move(p).value();
    return Status::OK();
  }));
  return d;
}

// A payload, checked and split: a string item, or a collection's header
// and elements. False if it is not one of ours or is damaged.
struct Restored {
  bool collection = false;
  Item item;                    // a string
  CollectionMeta meta;          // a collection: type, count, head, tail
  struct Element {
    char sub;
    std::string_view member, value;
  };
  std::vector<Element> elements;
};

bool Deserialize(std::string_view p, Restored* r) {
  if (p.size() < 1 + kTrailerBytes) return false;
  const std::string_view body = p.substr(0, p.size() - 8);
  if (GetLittle(p.substr(p.size() - 8), 8) != Fnv1a64(body)) return false;
  if (GetLittle(p.substr(p.size() - kTrailerBytes), 2) != kDumpFormat) return false;
  std::string_view rest = p.substr(1, p.size() - 1 - kTrailerBytes);
  if (p[0] == kTypeString) {
    if (rest.size() < 4) return false;
    r->item.flags = static_cast<uint32_t>(GetLittle(rest, 4));
    r->item.data = std::string(rest.substr(4));
    return true;
  }
  if (p[0] != kTypeCollection || rest.size() < 1 + 24) return false;
  const auto type = static_cast<uint8_t>(rest[0]);
  if (type < static_cast<uint8_t>(CollectionType::kHash) ||
      type > static_cast<uint8_t>(CollectionType::kZset))
    return false;
  r->collection = true;
  r->meta.type = static_cast<CollectionType>(type);
  r->meta.count = GetLittle(rest.substr(1), 8);
  r->meta.head = static_cast<int64_t>(GetLittle(rest.substr(9), 8));
  r->meta.tail = static_cast<int64_t>(GetLittle(rest.substr(17), 8));
  rest.remove_prefix(25);
  const std::string_view subs = SubSpaces(r->meta.type);
  while (!rest.empty()) {
    Restored::Element e{};
    if (rest.size() < 5 || subs.find(rest[0]) == std::string_view::npos) return false;
    e.sub = rest[0];
    const uint64_t mlen = GetLittle(rest.substr(1), 4);
    rest.remove_prefix(5);
    if (rest.size() < mlen + 4) return false;
    e.member = rest.substr(0, mlen);
    const uint64_t vlen = GetLittle(rest.substr(mlen), 4);
    rest.remove_prefix(mlen + 4);
    if (rest.size() < vlen) return false;
    e.value = rest.substr(0, vlen);
    rest.remove_prefix(vlen);
    r->elements.push_back(e);
  }
  return r->meta.count > 0;
}

void Dump(CommandCall& c) {
  Result<Dumped> d = DumpKey(c.items, c.args[1]);
  if (!d.ok()) {
    if (d.status().is_not_found()) return c.reply.NullBulk();
    if (IsWrongType(d.status())) return c.reply.Error(d.status().message());
    return ReplyStoreError(c, d.status());
  }
  c.reply.Bulk(d->payload);
}

// Writes a restored collection at `key`: whatever the key holds goes
// (the caller checked REPLACE), then the elements under a new generation.
Status RestoreCollection(Items& items, std::string_view key, const Restored& r,
                         int64_t expiry_ms, bool replace, bool* busy) {
  return RunOnItems(items, [&](TxnScope& scope, int db) -> Status {
    Result<KeyKind> kind = KindOfKey(scope, db, key);
    if (!kind.ok()) return kind.status();
    *busy = *kind != KeyKind::kNone && !replace;
    if (*busy) return Status::OK();
    Result<bool> gone = DeleteKey(scope, db, key);
    if (!gone.ok()) return gone.status();
    Result<Collection> c = Collection::Create(scope, db, key, r.meta.type);
    if (!c.ok()) return c.status();
    for (const Restored::Element& e : r.elements)
      PMINDEX_RETURN_IF_ERROR(c->Put(e.sub, e.member, e.value));
    CollectionMeta& m = c->mutable_meta();
    m.count = r.meta.count;
    m.head = r.meta.head;
    m.tail = r.meta.tail;
    m.expiry_ms = expiry_ms;
    return c->Save();
  });
}

// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]
void Restore(CommandCall& c) {
  bool replace = false, absttl = false;
  for (size_t i = 4; i < c.argc(); ++i) {
    if (EqualsIgnoreCase(c.args[i], "replace")) {
      replace = true;
    } else if (EqualsIgnoreCase(c.args[i], "absttl")) {
      absttl = true;
    } else if ((EqualsIgnoreCase(c.args[i], "idletime") || EqualsIgnoreCase(c.args[i], "freq")) &&
               i + 1 < c.argc()) {
      // Eviction hints: pmserver does not evict, so they change nothing.
      int64_t v = 0;
      if (!ParseNumber(c.args[i + 1], &v) || v < 0)
        return c.reply.Error(EqualsIgnoreCase(c.args[i], "freq")
                                 ? "ERR Invalid FREQ value, must be >= 0 and <= 255"
                                 : "ERR Invalid IDLETIME value, must be >= 0");
      ++i;
    } else {
      return c.reply.Error(kSyntax);
    }
  }
  int64_t ttl = 0;
  if (!ParseNumber(c.args[2], &ttl)) return c.reply.Error(kNotInteger);
  if (ttl < 0) return c.reply.Error("ERR Invalid TTL value, must be >= 0");
  Restored restored;
  if (!Deserialize(c.args[3], &restored)) return c.reply.Error(kBadPayload);
  const int64_t now = c.items.NowMs();
  const int64_t expiry = ttl == 0 ? 0 : absttl ? ttl : now + ttl;
  bool busy = false;
  if (restored.collection) {
    if (expiry != 0 && expiry <= now) {
      // Already expired: restored as gone (Redis deletes the key).
      const Status s = RunOnItems(c.items, [&](TxnScope& scope, int db) -> Status {
        Result<KeyKind> kind = KindOfKey(scope, db, c.args[1]);
        if (!kind.ok()) return kind.status();
        busy = *kind != KeyKind::kNone && !replace;
        return busy ? Status::OK() : DeleteKey(scope, db, c.args[1]).status();
      });
      if (!s.ok()) return ReplyStoreError(c, s);
    } else {
      const Status s = RestoreCollection(c.items, c.args[1], restored, expiry, replace, &busy);
      if (!s.ok()) return ReplyStoreError(c, s);
    }
    if (busy) return c.reply.Error("BUSYKEY Target key name already exists.");
    return c.reply.Simple("OK");
  }
  const Item* item = &restored.item;
  if (!CheckData(c, item->data)) return;
  const Status s = c.items.Edit(c.args[1], [&](const Item* live) {
    busy = live != nullptr && !replace;
    if (busy) return ItemEdit::Keep();
    // An expiry already past: the key is restored as gone (Redis deletes it).
    if (expiry != 0 && expiry <= now) return live != nullptr ? ItemEdit::Remove() : ItemEdit::Keep();
    return ItemEdit::Put(item->data, item->flags, expiry);
  });
  if (!s.ok()) return ReplyStoreError(c, s);
  if (busy) return c.reply.Error("BUSYKEY Target key name already exists.");
  c.reply.Simple("OK");
}

// A blocking connection to another server, for MIGRATE: sends RESP
// commands and reads simple replies, every step bounded by a deadline.
class TargetConnection {
 public:
  ~TargetConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  // Empty on success, else what failed.
  std::string Connect(const std::string& host, const std::string& port, int timeout_ms) {
    deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr)
      return "cannot resolve " + host;
    std::string err = "cannot connect";
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      fd_ = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd_ < 0) continue;
      if (::connect(fd_, a->ai_addr, a->ai_addrlen) == 0 ||
          (errno == EINPROGRESS && Wait(POLLOUT) && SocketError() == 0)) {
        err.clear();
        break;
      }
      ::close(fd_);
      fd_ = -1;
    }
    ::freeaddrinfo(res);
    return err;
  }
  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n > 0) {
        bytes.remove_prefix(static_cast<size_t>(n));
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!Wait(POLLOUT)) return false;
      } else {
        return false;
      }
    }
    return true;
  }
  // The next reply line ("+OK", "-ERR ..."), or nullopt on a timeout or a
  // closed connection. Only simple replies are expected.
  std::optional<std::string> ReadLine() {
    for (;;) {
      const size_t nl = in_.find("\r\n");
      if (nl != std::string::npos) {
        std::string line = in_.substr(0, nl);
        in_.erase(0, nl + 2);
        return line;
      }
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0) {
        in_.append(buf, static_cast<size_t>(n));
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!Wait(POLLIN)) return std::nullopt;
      } else {
        return std::nullopt;
      }
    }
  }

 private:
  bool Wait(short events) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline_ - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd p{fd_, events, 0};
    return ::poll(&p, 1, static_cast<int>(left)) == 1;
  }
  int SocketError() {
    int e = 0;
    socklen_t len = sizeof e;
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &e, &len);
    return e;
  }

  int fd_ = -1;
  std::chrono::steady_clock::time_point deadline_;
  std::string in_;
};

void AppendCommand(std::initializer_list<std::string_view> args, std::string* out) {
  out->append("*").append(std::to_string(args.size())).append("\r\n");
  for (std::string_view a : args)
    out->append("$").append(std::to_string(a.size())).append("\r\n").append(a).append("\r\n");
}

// MIGRATE's options from args[6] on: COPY, REPLACE, AUTH, AUTH2, and KEYS
// (which takes the rest); the key argument joins *keys. False after
// replying the error.
bool ParseMigrateOptions(CommandCall& c, bool* copy, bool* replace,
                         std::vector<std::string_view>* keys, std::vector<std::string_view>* auth) {
  for (size_t i = 6; i < c.argc(); ++i) {
    if (EqualsIgnoreCase(c.args[i], "copy")) {
      *copy = true;
    } else if (EqualsIgnoreCase(c.args[i], "replace")) {
      *replace = true;
    } else if (EqualsIgnoreCase(c.args[i], "auth") && i + 1 < c.argc()) {
      *auth = {c.args[++i]};
    } else if (EqualsIgnoreCase(c.args[i], "auth2") && i + 2 < c.argc()) {
      *auth = {c.args[i + 1], c.args[i + 2]};
      i += 2;
    } else if (EqualsIgnoreCase(c.args[i], "keys")) {
      if (!c.args[3].empty()) {
        c.reply.Error(
            "ERR When using MIGRATE KEYS option, the key argument must be set to the empty "
            "string");
        return false;
      }
      keys->assign(c.args.begin() + static_cast<ptrdiff_t>(i) + 1, c.args.end());
      break;
    } else {
      c.reply.Error(kSyntax);
      return false;
    }
  }
  if (!c.args[3].empty()) keys->push_back(c.args[3]);
  return true;
}

// A key the target took, removed here only as it was copied: a newer
// write (outside a cluster move, where nothing holds the slot) stays. A
// collection goes with its elements (garbage-listed), if its metadata is
// unchanged.
Status RemoveMigrated(CommandCall& c, std::string_view key, uint64_t version, bool collection) {
  if (!collection) return c.items.store().RemoveIfVersion(key, version).status();
  return RunOnItems(c.items, [&](TxnScope& scope, int db) -> Status {
    Result<StoredValue> cur = scope.db(db).Get(key);
    if (!cur.ok() || cur->version != version)
      return cur.ok() || cur.status().is_not_found() ? Status::OK() : cur.status();
    return DeleteKey(scope, db, key).status();
  });
}

// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
//         [AUTH password] [AUTH2 username password] [KEYS key [key ...]]
void Migrate(CommandCall& c) {
  bool copy = false, replace = false;
  std::vector<std::string_view> keys, auth;
  if (!ParseMigrateOptions(c, &copy, &replace, &keys, &auth)) return;
  for (std::string_view k : keys)
    if (!CheckKey(c, k)) return;
  int64_t db = 0, timeout = 0;
  if (!ParseNumber(c.args[4], &db) || !ParseNumber(c.args[5], &timeout) || db < 0)
    return c.reply.Error(kNotInteger);
  if (timeout <= 0) timeout = 1000;

  // On slots this node is migrating, no command touches the keys from
  // here to their removal.
  std::vector<std::unique_lock<std::shared_mutex>> locks;
  if (Cluster* cluster = c.shared.cluster(); cluster != nullptr) {
    std::set<size_t> stripes;
    for (std::string_view k : keys) stripes.insert(Cluster::SlotLockStripe(KeySlot(k)));
    for (size_t s : stripes) locks.emplace_back(cluster->StripeLock(s));
  }
  struct Moving {
    std::string_view key;
    uint64_t version;
    bool collection;
  };
  std::vector<Moving> moving;
  std::string request;
  if (db != 0) AppendCommand({"SELECT", c.args[4]}, &request);
  if (auth.size() == 1) AppendCommand({"AUTH", auth[0]}, &request);
  if (auth.size() == 2) AppendCommand({"AUTH", auth[0], auth[1]}, &request);
  const size_t preamble = (db != 0) + !auth.empty();
  const int64_t now = c.items.NowMs();
  for (std::string_view k : keys) {
    Result<Dumped> item = DumpKey(c.items, k);
    if (!item.ok()) {
      if (item.status().is_not_found()) continue;
      return ReplyStoreError(c, item.status());
    }
    const std::string ttl =
        std::to_string(item->expiry_ms == 0 ? 0 : std::max<int64_t>(1, item->expiry_ms - now));
    const std::string& payload = item->payload;
    if (replace) {
      AppendCommand({"RESTORE-ASKING", k, ttl, payload, "REPLACE"}, &request);
    } else {
      AppendCommand({"RESTORE-ASKING", k, ttl, payload}, &request);
    }
    moving.push_back({k, item->version, item->collection});
  }
  if (moving.empty()) return c.reply.Simple("NOKEY");

  TargetConnection target;
  const std::string err = target.Connect(std::string(c.args[1]), std::string(c.args[2]),
                                         static_cast<int>(std::min<int64_t>(timeout, 1 << 30)));
  if (!err.empty())
    return c.reply.Error("IOERR error or timeout connecting to the client: " + err);
  if (!target.Send(request))
    return c.reply.Error("IOERR error or timeout writing to target instance");
  for (size_t p = 0; p < preamble; ++p) {
    std::optional<std::string> line = target.ReadLine();
    if (!line) return c.reply.Error("IOERR error or timeout reading to target instance");
    if (!line->empty() && (*line)[0] == '-')
      return c.reply.Error("ERR Target instance replied with error: " + line->substr(1));
  }
  std::string first_error;
  for (const Moving& m : moving) {
    std::optional<std::string> line = target.ReadLine();
    if (!line) return c.reply.Error("IOERR error or timeout reading to target instance");
    if (!line->empty() && (*line)[0] == '-') {
      if (first_error.empty()) first_error = line->substr(1);
      continue;  // kept here: the target did not take it
    }
    if (!copy) {
      Status s = RemoveMigrated(c, m.key, m.version, m.collection);
      if (!s.ok()) return ReplyStoreError(c, s);
    }
  }
  if (!first_error.empty())
    return c.reply.Error("ERR Target instance replied with error: " + first_error);
  c.reply.Simple("OK");
}

}  // namespace

void RegisterDumpCommands(CommandTable& t) {
  t.Add({.name = "dump",
         .arity = 2,
         .flags = kReadonly,
         .first_key = 1,
         .last_key = 1,
         .key_step = 1,
         .group = "generic",
         .summary = "A serialized form of a key's value (pmserver's own format).",
         .key_flags = "RO ACCESS",
         .categories = "keyspace",
         .handler = Dump});
  const Command restore{.name = "restore",
                        .arity = -4,
                        .flags = kWrite | kDenyOom,
                        .first_key = 1,
                        .last_key = 1,
                        .key_step = 1,
                        .group = "generic",
                        .summary = "Creates a key from a DUMP payload.",
                        .key_flags = "OW UPDATE",
                        .categories = "keyspace dangerous",
                        .handler = Restore};
  t.Add(restore);
  Command asking = restore;
  asking.name = "restore-asking";
  asking.flags |= kAsking;
  asking.summary = "RESTORE, served on a slot being imported (MIGRATE sends it).";
  t.Add(asking);
  t.Add({.name = "migrate",
         .arity = -6,
         .flags = kWrite | kMovableKeys,
         .group = "generic",
         .summary = "Moves keys to another server.",
         .categories = "keyspace dangerous",
         .handler = Migrate});
}

}  // namespace pmindex::server
