// RESP lists (resp_list_commands.cc) over 16 databases on the map store
// and on KvStore: random command sequences against a std::deque model,
// the replies and errors of each command, WRONGTYPE, the removal of an
// emptied key, MULTI/EXEC, LMOVE's atomicity under concurrent clients, and
// the blocking commands' non-blocking answers (no server: inside MULTI,
// and when a list has elements). The parking of blocking commands over
// real sockets is blocking_test.cc's.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server/databases.h"
#include "server/keyspace.h"
#include "server/resp_protocol.h"
#include "tests/server/map_store.h"
#include "tests/server/protocol_harness.h"
#include "tests/server/resp_encode.h"
#include "tests/support/status.h"
#ifdef PMINDEX_SERVER_TEST_KV
#include "pmindex/kv.h"
#include "server/kv_backed_store.h"
#endif

namespace pmindex::server::testing {
namespace {

// Concatenates (GCC 12 misreads chains of operator+ on temporaries).
template <class... T>
std::string Cat(const T&... parts) {
  std::string s;
  (s.append(std::string_view(parts)), ...);
  return s;
}

std::string Int(int64_t n) { return Cat(":", std::to_string(n), "\r\n"); }
std::string Bulk(const std::string& s) {
  return Cat("$", std::to_string(s.size()), "\r\n", s, "\r\n");
}
const std::string kNullBulk = "$-1\r\n";
const std::string kNullArray = "*-1\r\n";
const std::string kOk = "+OK\r\n";
const std::string kWrongType =
    "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
template <class C>
std::string Arr(const C& elems) {
  std::string s = Cat("*", std::to_string(elems.size()), "\r\n");
  for (const auto& e : elems) s += Bulk(e);
  return s;
}
std::string Ints(const std::vector<int64_t>& v) {
  std::string s = Cat("*", std::to_string(v.size()), "\r\n");
  for (int64_t i : v) s += Int(i);
  return s;
}

// 16 databases over one store (the map store, or the one given).
class Db {
 public:
  explicit Db(Store* base = nullptr) : base_(base != nullptr ? *base : map_) {
    auto d = Databases::Open(base_, 16);
    PMINDEX_EXPECT_OK(d);
    dbs = std::move(d.value());
    keyspace = std::make_unique<Keyspace>(*dbs, stats, [] { return kStartMs; });
  }

  class Conn {
   public:
    explicit Conn(Db& d) : protocol_(d.keyspace->db(0), d.shared_) {}
    std::string Feed(std::string_view bytes) {
      buffer_.append(bytes);
      std::string all;
      for (;;) {
        std::string out;
        const size_t used = protocol_.Consume(buffer_, &out);
        buffer_.erase(0, used);
        if (out.empty()) return all;
        all += out;
      }
    }
    std::string Run(const std::vector<std::string>& args) { return Feed(Cmd(args)); }

   private:
    RespProtocol protocol_;
    std::string buffer_;
  };

  Stats stats;
  std::unique_ptr<Databases> dbs;
  std::unique_ptr<Keyspace> keyspace;

 private:
  MapStore map_;
  Store& base_;
  RespShared shared_;
};

// Redis's range arithmetic: [from, to] of a list of n, or from > to.
std::pair<int64_t, int64_t> Clamp(int64_t start, int64_t stop, int64_t n) {
  if (start < 0) start += n;
  if (stop < 0) stop += n;
  start = std::max<int64_t>(start, 0);
  stop = std::min<int64_t>(stop, n - 1);
  return {start, stop};
}

// Runs `steps` random list commands on keys "a" and "b" against a model,
// checking every reply and, at the end, each list whole.
void RunModel(Db& db, uint32_t seed, int steps) {
  Db::Conn c(db);
  std::mt19937 rng(seed);
  std::map<std::string, std::deque<std::string>> model;
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  auto value = [&] { return Cat("v", std::to_string(pick(5))); };
  auto key = [&] { return pick(2) == 0 ? std::string("a") : std::string("b"); };
  // An index in [-n - 2, n + 2]: in range, or just out of it.
  auto index = [&](int64_t n) {
    return static_cast<int64_t>(pick(static_cast<int>(2 * n + 5))) - n - 2;
  };
  for (int step = 0; step < steps; ++step) {
    const std::string k = key();
    std::deque<std::string>& m = model[k];
    const auto n = static_cast<int64_t>(m.size());
    std::vector<std::string> args;
    std::string want;
    switch (pick(15)) {
      case 0:
      case 1: {  // LPUSH / RPUSH
        const bool left = pick(2) == 0;
        args = {left ? "LPUSH" : "RPUSH", k};
        for (int i = pick(3); i >= 0; --i) {
          args.push_back(value());
          if (left) {
            m.push_front(args.back());
          } else {
            m.push_back(args.back());
          }
        }
        want = Int(static_cast<int64_t>(m.size()));
        break;
      }
      case 2: {  // LPOP / RPOP without count
        const bool left = pick(2) == 0;
        args = {left ? "LPOP" : "RPOP", k};
        if (m.empty()) {
          want = kNullBulk;
        } else if (left) {
          want = Bulk(m.front());
          m.pop_front();
        } else {
          want = Bulk(m.back());
          m.pop_back();
        }
        break;
      }
      case 3: {  // LPOP / RPOP with count
        const bool left = pick(2) == 0;
        const int count = pick(4);
        args = {left ? "LPOP" : "RPOP", k, std::to_string(count)};
        if (m.empty()) {
          want = kNullArray;
        } else {
          std::vector<std::string> got;
          for (int i = 0; i < count && !m.empty(); ++i) {
            got.push_back(left ? m.front() : m.back());
            if (left) {
              m.pop_front();
            } else {
              m.pop_back();
            }
          }
          want = Arr(got);
        }
        break;
      }
      case 4: {  // LINDEX
        const int64_t i = index(n);
        args = {"LINDEX", k, std::to_string(i)};
        const int64_t j = i < 0 ? i + n : i;
        want = j >= 0 && j < n ? Bulk(m[static_cast<size_t>(j)]) : kNullBulk;
        break;
      }
      case 5: {  // LSET
        const int64_t i = index(n);
        const std::string v = value();
        args = {"LSET", k, std::to_string(i), v};
        const int64_t j = i < 0 ? i + n : i;
        if (n == 0) {
          want = "-ERR no such key\r\n";
        } else if (j < 0 || j >= n) {
          want = "-ERR index out of range\r\n";
        } else {
          m[static_cast<size_t>(j)] = v;
          want = kOk;
        }
        break;
      }
      case 6: {  // LRANGE
        const int64_t s = index(n), e = index(n);
        args = {"LRANGE", k, std::to_string(s), std::to_string(e)};
        auto [from, to] = Clamp(s, e, n);
        std::vector<std::string> got;
        for (int64_t i = from; i <= to; ++i) got.push_back(m[static_cast<size_t>(i)]);
        want = Arr(got);
        break;
      }
      case 7: {  // LREM
        const int count = pick(5) - 2;
        const std::string v = value();
        args = {"LREM", k, std::to_string(count), v};
        int64_t removed = 0;
        const int64_t limit = count == 0 ? n : std::abs(count);
        if (count >= 0) {
          for (auto it = m.begin(); it != m.end() && removed < limit;) {
            if (*it == v) {
              it = m.erase(it);
              ++removed;
            } else {
              ++it;
            }
          }
        } else {
          for (int64_t i = n - 1; i >= 0 && removed < limit; --i) {
            if (m[static_cast<size_t>(i)] == v) {
              m.erase(m.begin() + i);
              ++removed;
            }
          }
        }
        want = Int(removed);
        break;
      }
      case 8: {  // LTRIM (kept rare: it empties lists)
        if (pick(3) != 0) continue;
        const int64_t s = index(n) / 2, e = index(n);
        args = {"LTRIM", k, std::to_string(s), std::to_string(e)};
        auto [from, to] = Clamp(s, e, n);
        std::deque<std::string> kept;
        for (int64_t i = from; i <= to; ++i) kept.push_back(m[static_cast<size_t>(i)]);
        m = kept;
        want = kOk;
        break;
      }
      case 9: {  // LINSERT
        const bool after = pick(2) == 0;
        const std::string pivot = value(), v = value();
        args = {"LINSERT", k, after ? "AFTER" : "BEFORE", pivot, v};
        auto it = std::find(m.begin(), m.end(), pivot);
        if (n == 0) {
          want = Int(0);
        } else if (it == m.end()) {
          want = Int(-1);
        } else {
          m.insert(after ? it + 1 : it, v);
          want = Int(static_cast<int64_t>(m.size()));
        }
        break;
      }
      case 10: {  // LPOS [RANK] [COUNT] [MAXLEN]
        const std::string v = value();
        int64_t rank = pick(3) == 0 ? pick(5) - 2 : 1;
        if (rank == 0) rank = 1;
        const int64_t count = pick(2) == 0 ? -1 : pick(3);
        const int64_t maxlen = pick(3) == 0 ? pick(4) : 0;
        args = {"LPOS", k, v, "RANK", std::to_string(rank)};
        if (count >= 0) args.insert(args.end(), {"COUNT", std::to_string(count)});
        if (maxlen > 0) args.insert(args.end(), {"MAXLEN", std::to_string(maxlen)});
        std::vector<int64_t> found;
        int64_t matches = 0, seen = 0;
        for (int64_t step2 = 0; step2 < n; ++step2) {
          if (maxlen > 0 && seen++ >= maxlen) break;
          const int64_t i = rank > 0 ? step2 : n - 1 - step2;
          if (m[static_cast<size_t>(i)] != v) continue;
          if (++matches < std::abs(rank)) continue;
          found.push_back(i);
          if (count != 0 && static_cast<int64_t>(found.size()) >= std::max<int64_t>(count, 1))
            break;
        }
        if (count >= 0) {
          want = Ints(found);
        } else {
          want = found.empty() ? kNullBulk : Int(found.front());
        }
        break;
      }
      case 11:  // LLEN
        args = {"LLEN", k};
        want = Int(n);
        break;
      case 12: {  // LMOVE between a and b (or a list onto itself)
        const std::string src = key(), dst = key();
        const bool from_left = pick(2) == 0, to_left = pick(2) == 0;
        args = {"LMOVE", src, dst, from_left ? "LEFT" : "RIGHT", to_left ? "LEFT" : "RIGHT"};
        std::deque<std::string>& s = model[src];
        if (s.empty()) {
          want = kNullBulk;
        } else {
          const std::string v = from_left ? s.front() : s.back();
          if (from_left) {
            s.pop_front();
          } else {
            s.pop_back();
          }
          std::deque<std::string>& d = model[dst];
          if (to_left) {
            d.push_front(v);
          } else {
            d.push_back(v);
          }
          want = Bulk(v);
        }
        break;
      }
      case 13: {  // LPUSHX / RPUSHX
        const bool left = pick(2) == 0;
        const std::string v = value();
        args = {left ? "LPUSHX" : "RPUSHX", k, v};
        if (m.empty()) {
          want = Int(0);
        } else {
          if (left) {
            m.push_front(v);
          } else {
            m.push_back(v);
          }
          want = Int(static_cast<int64_t>(m.size()));
        }
        break;
      }
      default:  // EXISTS: an emptied list is no key
        args = {"EXISTS", k};
        want = Int(m.empty() ? 0 : 1);
        break;
    }
    const std::string got = c.Run(args);
    std::string shown;
    for (const std::string& a : args) shown += a + " ";
    ASSERT_EQ(got, want) << "step " << step << ": " << shown;
  }
  for (const char* k : {"a", "b"}) {
    const std::deque<std::string>& m = model[k];
    EXPECT_EQ(c.Run({"LRANGE", k, "0", "-1"}), Arr(m)) << k;
    EXPECT_EQ(c.Run({"TYPE", k}), m.empty() ? "+none\r\n" : "+list\r\n") << k;
  }
}

TEST(RespList, RandomCommandsMatchADequeOverTheMapStore) {
  Db db;
  RunModel(db, 20261128, 3000);
}

#ifdef PMINDEX_SERVER_TEST_KV
TEST(RespList, RandomCommandsMatchADequeOverKvStore) {
  auto kv = KvStore::CreateInMemory("lbtree");
  PMINDEX_ASSERT_OK(kv);
  {
    KvBackedStore store(*kv.value());
    Db db(&store);
    RunModel(db, 7, 1500);
  }
  PMINDEX_ASSERT_OK(kv.value()->Verify());
  PMINDEX_ASSERT_OK(kv.value()->Close());
}
#endif

TEST(RespList, RepliesAndErrorsAsRedis) {
  Db db;
  Db::Conn c(db);
  EXPECT_EQ(c.Run({"RPUSH", "l", "a", "b", "c"}), Int(3));
  EXPECT_EQ(c.Run({"LPOP", "l", "0"}), "*0\r\n");
  EXPECT_EQ(c.Run({"LPOP", "l", "-1"}), "-ERR value is out of range, must be positive\r\n");
  EXPECT_EQ(c.Run({"LPOP", "l", "x"}), "-ERR value is out of range, must be positive\r\n");
  EXPECT_EQ(c.Run({"LPOP", "l", "1", "2"}),
            "-ERR wrong number of arguments for 'lpop' command\r\n");
  EXPECT_EQ(c.Run({"LPOP", "nosuch", "2"}), kNullArray);
  EXPECT_EQ(c.Run({"LINDEX", "l", "x"}), "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(c.Run({"LINSERT", "l", "middle", "a", "x"}), "-ERR syntax error\r\n");
  EXPECT_EQ(c.Run({"LPOS", "l", "a", "RANK", "0"}).substr(0, 26), "-ERR RANK can't be zero: u");
  EXPECT_EQ(c.Run({"LPOS", "l", "a", "COUNT", "-1"}), "-ERR COUNT can't be negative\r\n");
  EXPECT_EQ(c.Run({"LPOS", "l", "a", "MAXLEN", "-1"}), "-ERR MAXLEN can't be negative\r\n");
  EXPECT_EQ(c.Run({"LPOS", "l", "a", "BOGUS"}), "-ERR syntax error\r\n");
  EXPECT_EQ(c.Run({"LPOS", "nosuch", "a"}), kNullBulk);
  EXPECT_EQ(c.Run({"LPOS", "nosuch", "a", "COUNT", "0"}), "*0\r\n");
  EXPECT_EQ(c.Run({"LMOVE", "l", "m", "UP", "LEFT"}), "-ERR syntax error\r\n");
  EXPECT_EQ(c.Run({"LSET", "nosuch", "0", "x"}), "-ERR no such key\r\n");
  EXPECT_EQ(c.Run({"LRANGE", "nosuch", "0", "-1"}), "*0\r\n");
  EXPECT_EQ(c.Run({"LTRIM", "nosuch", "0", "-1"}), kOk);
  // LMPOP: the first non-empty list, [key, [elements]].
  EXPECT_EQ(c.Run({"LMPOP", "2", "nosuch", "l", "RIGHT", "COUNT", "5"}),
            Cat("*2\r\n", Bulk("l"), Arr(std::vector<std::string>{"c", "b", "a"})));
  EXPECT_EQ(c.Run({"LMPOP", "1", "l", "LEFT"}), kNullArray);
  EXPECT_EQ(c.Run({"LMPOP", "0", "l", "LEFT"}), "-ERR numkeys should be greater than 0\r\n");
  EXPECT_EQ(c.Run({"LMPOP", "1", "l", "LEFT", "COUNT", "0"}),
            "-ERR count should be greater than 0\r\n");
  EXPECT_EQ(c.Run({"LMPOP", "3", "l", "LEFT"}), "-ERR syntax error\r\n");
  EXPECT_EQ(c.Run({"LMPOP", "1", "l", "MIDDLE"}), "-ERR syntax error\r\n");
  // RPOPLPUSH rotates a list onto itself.
  EXPECT_EQ(c.Run({"RPUSH", "r", "1", "2", "3"}), Int(3));
  EXPECT_EQ(c.Run({"RPOPLPUSH", "r", "r"}), Bulk("3"));
  EXPECT_EQ(c.Run({"LRANGE", "r", "0", "-1"}), Arr(std::vector<std::string>{"3", "1", "2"}));
  EXPECT_EQ(c.Run({"RPOPLPUSH", "nosuch", "r"}), kNullBulk);
  // The blocking forms answer at once when a list has an element, and
  // check their timeout.
  EXPECT_EQ(c.Run({"BLPOP", "nosuch", "r", "0"}), Cat("*2\r\n", Bulk("r"), Bulk("3")));
  EXPECT_EQ(c.Run({"BRPOP", "r", "0.5"}), Cat("*2\r\n", Bulk("r"), Bulk("2")));
  EXPECT_EQ(c.Run({"BLMOVE", "r", "s", "LEFT", "RIGHT", "0"}), Bulk("1"));
  EXPECT_EQ(c.Run({"BLMPOP", "0", "1", "s", "LEFT", "COUNT", "9"}),
            Cat("*2\r\n", Bulk("s"), Arr(std::vector<std::string>{"1"})));
  EXPECT_EQ(c.Run({"BLPOP", "r", "-1"}), "-ERR timeout is negative\r\n");
  EXPECT_EQ(c.Run({"BLPOP", "r", "abc"}), "-ERR timeout is not a float or out of range\r\n");
  EXPECT_EQ(c.Run({"EXISTS", "r", "s", "l"}), Int(0));
}

TEST(RespList, WrongTypeAndEmptiedKeys) {
  Db db;
  Db::Conn c(db);
  EXPECT_EQ(c.Run({"SET", "s", "x"}), kOk);
  for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
           {"LPUSH", "s", "a"},        {"RPUSHX", "s", "a"},      {"LPOP", "s"},
           {"RPOP", "s", "2"},         {"LLEN", "s"},             {"LINDEX", "s", "0"},
           {"LRANGE", "s", "0", "-1"}, {"LSET", "s", "0", "a"},   {"LREM", "s", "0", "a"},
           {"LTRIM", "s", "0", "1"},   {"LINSERT", "s", "BEFORE", "a", "b"},
           {"LPOS", "s", "a"},         {"LMOVE", "s", "t", "LEFT", "LEFT"},
           {"LMPOP", "1", "s", "LEFT"}, {"BLPOP", "s", "0"}}) {
    EXPECT_EQ(c.Run(cmd), kWrongType) << cmd[0];
  }
  // LMOVE to a key of another type moves nothing.
  EXPECT_EQ(c.Run({"RPUSH", "l", "a"}), Int(1));
  EXPECT_EQ(c.Run({"LMOVE", "l", "s", "LEFT", "LEFT"}), kWrongType);
  EXPECT_EQ(c.Run({"LRANGE", "l", "0", "-1"}), Arr(std::vector<std::string>{"a"}));
  EXPECT_EQ(c.Run({"GET", "s"}), Bulk("x"));
  // Every way of emptying a list removes its key.
  EXPECT_EQ(c.Run({"LPOP", "l"}), Bulk("a"));
  EXPECT_EQ(c.Run({"EXISTS", "l"}), Int(0));
  EXPECT_EQ(c.Run({"RPUSH", "l", "a", "b"}), Int(2));
  EXPECT_EQ(c.Run({"LREM", "l", "0", "a"}), Int(1));
  EXPECT_EQ(c.Run({"RPOP", "l", "5"}), Arr(std::vector<std::string>{"b"}));
  EXPECT_EQ(c.Run({"EXISTS", "l"}), Int(0));
  EXPECT_EQ(c.Run({"RPUSH", "l", "a", "b"}), Int(2));
  EXPECT_EQ(c.Run({"LTRIM", "l", "5", "9"}), kOk);
  EXPECT_EQ(c.Run({"EXISTS", "l"}), Int(0));
  EXPECT_EQ(c.Run({"RPUSH", "l", "a"}), Int(1));
  EXPECT_EQ(c.Run({"LMOVE", "l", "m", "LEFT", "LEFT"}), Bulk("a"));
  EXPECT_EQ(c.Run({"EXISTS", "l", "m"}), Int(1));
  EXPECT_EQ(c.Run({"TYPE", "m"}), "+list\r\n");
  // A deleted list starts again empty.
  EXPECT_EQ(c.Run({"DEL", "m"}), Int(1));
  EXPECT_EQ(c.Run({"RPUSH", "m", "z"}), Int(1));
  EXPECT_EQ(c.Run({"LRANGE", "m", "0", "-1"}), Arr(std::vector<std::string>{"z"}));
}

TEST(RespList, MultiExecRunsListCommandsInOneTransaction) {
  Db db;
  Db::Conn c(db);
  EXPECT_EQ(c.Run({"MULTI"}), kOk);
  EXPECT_EQ(c.Run({"RPUSH", "q", "a", "b", "c"}), "+QUEUED\r\n");
  EXPECT_EQ(c.Run({"LPOP", "q"}), "+QUEUED\r\n");
  EXPECT_EQ(c.Run({"LMOVE", "q", "p", "RIGHT", "LEFT"}), "+QUEUED\r\n");
  EXPECT_EQ(c.Run({"LRANGE", "q", "0", "-1"}), "+QUEUED\r\n");
  // A blocking command inside MULTI does not block: a null (LMOVE's
  // form: a null bulk) at once.
  EXPECT_EQ(c.Run({"BLPOP", "empty", "0"}), "+QUEUED\r\n");
  EXPECT_EQ(c.Run({"BLMOVE", "empty", "p", "LEFT", "LEFT", "0"}), "+QUEUED\r\n");
  EXPECT_EQ(c.Run({"EXEC"}), Cat("*6\r\n", Int(3), Bulk("a"), Bulk("c"),
                                 Arr(std::vector<std::string>{"b"}), kNullArray, kNullBulk));
  // WATCH sees a list change.
  EXPECT_EQ(c.Run({"WATCH", "q"}), kOk);
  Db::Conn other(db);
  EXPECT_EQ(other.Run({"RPUSH", "q", "x"}), Int(2));
  EXPECT_EQ(c.Run({"MULTI"}), kOk);
  EXPECT_EQ(c.Run({"LPOP", "q"}), "+QUEUED\r\n");
  EXPECT_EQ(c.Run({"EXEC"}), kNullArray);
  EXPECT_EQ(c.Run({"LRANGE", "q", "0", "-1"}), Arr(std::vector<std::string>{"b", "x"}));
}

#ifdef PMINDEX_SERVER_TEST_KV
TEST(RespList, ConcurrentLmovesKeepEveryElementOnceOverKvStore) {
  // Threads move elements back and forth between two lists (and pop and
  // push them back): each LMOVE is atomic, so at the end every element is
  // in exactly one of the lists, once.
  auto kv = KvStore::CreateInMemory("lbtree");
  PMINDEX_ASSERT_OK(kv);
  {
    KvBackedStore store(*kv.value());
    Db db(&store);
    constexpr int kElements = 40, kThreads = 4, kMoves = 150;
    {
      Db::Conn c(db);
      std::vector<std::string> push = {"RPUSH", "x"};
      for (int i = 0; i < kElements; ++i) push.push_back(Cat("e", std::to_string(i)));
      ASSERT_EQ(c.Run(push), Int(kElements));
    }
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&db, t] {
        Db::Conn c(db);
        std::mt19937 rng(static_cast<uint32_t>(t));
        for (int i = 0; i < kMoves; ++i) {
          const bool forth = rng() % 2 == 0;
          const std::string r = c.Run({"LMOVE", forth ? "x" : "y", forth ? "y" : "x",
                                       rng() % 2 ? "LEFT" : "RIGHT", rng() % 2 ? "LEFT" : "RIGHT"});
          ASSERT_TRUE(r[0] == '$') << r;
        }
      });
    }
    for (auto& th : threads) th.join();
    Db::Conn c(db);
    std::multiset<std::string> all;
    for (const char* k : {"x", "y"}) {
      const std::string len = c.Run({"LLEN", k});
      const int64_t n = std::stoll(len.substr(1));
      for (int64_t i = 0; i < n; ++i) {
        const std::string r = c.Run({"LINDEX", k, std::to_string(i)});
        ASSERT_EQ(r[0], '$') << r;
        all.insert(r.substr(r.find("\r\n") + 2, r.size() - r.find("\r\n") - 4));
      }
    }
    ASSERT_EQ(all.size(), static_cast<size_t>(kElements));
    for (int i = 0; i < kElements; ++i) EXPECT_EQ(all.count(Cat("e", std::to_string(i))), 1u) << i;
  }
  PMINDEX_ASSERT_OK(kv.value()->Verify());
  PMINDEX_ASSERT_OK(kv.value()->Close());
}
#endif

}  // namespace
}  // namespace pmindex::server::testing
