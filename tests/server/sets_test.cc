// RESP sets and sorted sets (resp_set_commands.cc, resp_zset_commands.cc)
// over databases on the map store and on KvStore: random command
// sequences (fixed seeds) checked against std::set / std::map models,
// WRONGTYPE, removal of emptied keys, score order and formatting edge
// cases, RESP3 reply types, and MULTI/EXEC with both types.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "server/collections.h"
#include "server/databases.h"
#include "server/keyspace.h"
#include "server/resp_protocol.h"
#include "server/resp_reply.h"
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

// "prefix" + decimal n (appended, as GCC 12 warns of a false overlap in
// operator+ of a literal and a temporary).
std::string Join(std::string_view prefix, uint64_t n) {
  std::string s(prefix);
  s.append(std::to_string(n));
  return s;
}

// One parsed RESP reply.
struct Reply {
  char type = 0;  // the RESP type byte; '_' also for RESP2 nulls
  std::string str;
  int64_t num = 0;
  std::vector<Reply> elems;

  std::vector<std::string> Strings() const {
    std::vector<std::string> v;
    for (const Reply& e : elems) v.push_back(e.str);
    return v;
  }
};

// Parses one reply from the front of `s` (consumed).
Reply Parse(std::string_view& s) {
  Reply r;
  const size_t eol = s.find("\r\n");
  EXPECT_NE(eol, std::string_view::npos) << s;
  r.type = s[0];
  const std::string line(s.substr(1, eol - 1));
  s.remove_prefix(eol + 2);
  switch (r.type) {
    case '+':
    case '-':
    case ',':
      r.str = line;
      break;
    case ':':
      r.num = std::stoll(line);
      break;
    case '$':
      r.num = std::stoll(line);
      if (r.num < 0) {
        r.type = '_';
      } else {
        r.str = std::string(s.substr(0, static_cast<size_t>(r.num)));
        s.remove_prefix(static_cast<size_t>(r.num) + 2);
      }
      break;
    case '*':
    case '~':
    case '%': {
      int64_t n = std::stoll(line);
      if (n < 0) {
        r.type = '_';
        break;
      }
      if (r.type == '%') n *= 2;
      for (int64_t i = 0; i < n; ++i) r.elems.push_back(Parse(s));
      break;
    }
    default:
      break;
  }
  return r;
}

// 16 databases over one store (the map store, or the one given).
class Server {
  // Declared first: destroyed after the protocol that uses them.
  MapStore map_;
  RespShared shared_;

 public:
  explicit Server(Store* base = nullptr) : base_(base != nullptr ? *base : map_) {
    auto d = Databases::Open(base_, 16);
    PMINDEX_EXPECT_OK(d);
    dbs = std::move(d.value());
    keyspace = std::make_unique<Keyspace>(*dbs, stats, [this] { return now_ms; });
    protocol = std::make_unique<RespProtocol>(keyspace->db(0), shared_);
  }

  std::string Raw(const std::vector<std::string>& args) {
    std::string in = Cmd(args), all;
    for (;;) {
      std::string out;
      const size_t used = protocol->Consume(in, &out);
      in.erase(0, used);
      if (out.empty()) return all;
      all += out;
    }
  }
  Reply Run(const std::vector<std::string>& args) {
    const std::string raw = Raw(args);
    std::string_view v = raw;
    Reply r = Parse(v);
    EXPECT_TRUE(v.empty()) << "trailing bytes after the reply to " << args[0] << ": " << raw;
    return r;
  }
  int64_t Int(const std::vector<std::string>& args) {
    Reply r = Run(args);
    EXPECT_EQ(r.type, ':') << args[0] << " replied " << r.type << r.str;
    return r.num;
  }

  // Another connection to the same databases (one thread uses it).
  std::unique_ptr<RespProtocol> Connect() {
    return std::make_unique<RespProtocol>(keyspace->db(0), shared_);
  }

  int64_t now_ms = kStartMs;
  Stats stats;
  std::unique_ptr<Databases> dbs;
  std::unique_ptr<Keyspace> keyspace;
  std::unique_ptr<RespProtocol> protocol;

 private:
  Store& base_;
};

std::string Text(double d) { return DoubleText(d == 0 ? 0.0 : d); }

// ---------------------------------------------------------------- models

using ZModel = std::map<std::string, double>;

// The model's members in Redis's order: by score, then member bytes.
std::vector<std::pair<double, std::string>> Ordered(const ZModel& z) {
  std::vector<std::pair<double, std::string>> v;
  for (const auto& [m, s] : z) v.emplace_back(s == 0 ? 0.0 : s, m);
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<std::string> FlatWithScores(const std::vector<std::pair<double, std::string>>& v) {
  std::vector<std::string> out;
  for (const auto& [s, m] : v) {
    out.push_back(m);
    out.push_back(Text(s));
  }
  return out;
}

// A random sequence of sorted set commands against the model.
void ZsetAgainstModel(Server& s, uint64_t seed, int steps) {
  std::mt19937_64 rng(seed);
  const std::vector<double> scores = {-0.0, 0.0, 1, -1, 1.5, -2.25, 3, 1e300, -INFINITY, INFINITY};
  auto member = [&] { return Join("m", rng() % 24); };
  auto score = [&] { return scores[rng() % scores.size()]; };
  auto arg = [](double d) { return Text(d); };
  std::map<std::string, ZModel> model;
  const std::vector<std::string> keys = {"z1", "z2"};
  for (int step = 0; step < steps; ++step) {
    const std::string key = keys[rng() % keys.size()];
    ZModel& z = model[key];
    const int op = static_cast<int>(rng() % 12);
    SCOPED_TRACE(Join("step ", static_cast<uint64_t>(step))
                     .append(Join(" op ", static_cast<uint64_t>(op))));
    switch (op) {
      case 0:
      case 1: {  // ZADD with options
        const int flags = static_cast<int>(rng() % 6);
        std::vector<std::string> args = {"ZADD", key};
        bool nx = flags == 1, xx = flags == 2, gt = flags == 3, lt = flags == 4, ch = rng() % 2;
        if (nx) args.push_back("NX");
        if (xx) args.push_back("XX");
        if (gt) args.push_back("GT");
        if (lt) args.push_back("LT");
        if (ch) args.push_back("CH");
        int64_t added = 0, changed = 0;
        ZModel next = z;
        const int pairs = 1 + static_cast<int>(rng() % 3);
        for (int i = 0; i < pairs; ++i) {
          const std::string m = member();
          const double sc = score();
          args.push_back(arg(sc));
          args.push_back(m);
          auto it = next.find(m);
          if (it == next.end()) {
            if (xx) continue;
            next[m] = sc;
            ++added;
          } else {
            if (nx || (gt && !(sc > it->second)) || (lt && !(sc < it->second))) continue;
            if (sc != it->second) {
              it->second = sc;
              ++changed;
            }
          }
        }
        EXPECT_EQ(s.Int(args), ch ? added + changed : added);
        z = next;
        break;
      }
      case 2: {  // ZINCRBY
        const std::string m = member();
        const double by = rng() % 2 ? 1.0 : -0.5;
        const double now = (z.count(m) ? z[m] : 0.0) + by;
        Reply r = s.Run({"ZINCRBY", key, arg(by), m});
        if (std::isnan(now)) {
          EXPECT_EQ(r.type, '-');
        } else {
          EXPECT_EQ(r.str, Text(now));
          z[m] = now;
        }
        break;
      }
      case 3: {  // ZREM
        const std::string a = member(), b = member();
        int64_t n = static_cast<int64_t>(z.erase(a));
        n += static_cast<int64_t>(z.erase(b));
        EXPECT_EQ(s.Int({"ZREM", key, a, b}), n);
        break;
      }
      case 4: {  // ZSCORE, ZCARD, ZRANK, ZREVRANK
        const std::string m = member();
        Reply r = s.Run({"ZSCORE", key, m});
        const auto ord = Ordered(z);
        if (z.count(m)) {
          EXPECT_EQ(r.str, Text(z[m]));
          const auto pos =
              std::find(ord.begin(), ord.end(), std::make_pair(z[m] == 0 ? 0.0 : z[m], m));
          EXPECT_EQ(s.Int({"ZRANK", key, m}), pos - ord.begin());
          EXPECT_EQ(s.Int({"ZREVRANK", key, m}), ord.end() - pos - 1);
        } else {
          EXPECT_EQ(r.type, '_');
        }
        EXPECT_EQ(s.Int({"ZCARD", key}), static_cast<int64_t>(z.size()));
        break;
      }
      case 5: {  // ZRANGEBYSCORE / ZREVRANGEBYSCORE with bounds and LIMIT
        double lo = score(), hi = score();
        if (lo > hi) std::swap(lo, hi);
        const bool lo_ex = rng() % 2, hi_ex = rng() % 2;
        std::string a = lo_ex ? "(" : "", b = hi_ex ? "(" : "";
        a.append(arg(lo));
        b.append(arg(hi));
        std::vector<std::pair<double, std::string>> in;
        for (const auto& e : Ordered(z)) {
          if ((lo_ex ? e.first > lo : e.first >= lo) && (hi_ex ? e.first < hi : e.first <= hi))
            in.push_back(e);
        }
        const bool rev = rng() % 2;
        if (rev) std::reverse(in.begin(), in.end());
        std::vector<std::string> args = {rev ? "ZREVRANGEBYSCORE" : "ZRANGEBYSCORE", key,
                                         rev ? b : a, rev ? a : b, "WITHSCORES"};
        if (rng() % 2) {
          const size_t off = rng() % 4, cnt = rng() % 4;
          args.insert(args.end(), {"LIMIT", std::to_string(off), std::to_string(cnt)});
          in.erase(in.begin(), in.begin() + static_cast<long>(std::min(off, in.size())));
          if (in.size() > cnt) in.resize(cnt);
        }
        EXPECT_EQ(s.Run(args).Strings(), FlatWithScores(in));
        int64_t count = 0;
        for (const auto& e : Ordered(z))
          count += (lo_ex ? e.first > lo : e.first >= lo) && (hi_ex ? e.first < hi : e.first <= hi);
        EXPECT_EQ(s.Int({"ZCOUNT", key, a, b}), count);
        break;
      }
      case 6: {  // ZRANGE by rank, forward and REV
        const int64_t n = static_cast<int64_t>(z.size());
        const int64_t start = static_cast<int64_t>(rng() % 8) - 4;
        const int64_t stop = static_cast<int64_t>(rng() % 12) - 4;
        auto ord = Ordered(z);
        const bool rev = rng() % 2;
        if (rev) std::reverse(ord.begin(), ord.end());
        int64_t a = start < 0 ? start + n : start, b = stop < 0 ? stop + n : stop;
        a = std::max<int64_t>(a, 0);
        b = std::min<int64_t>(b, n - 1);
        std::vector<std::pair<double, std::string>> want;
        for (int64_t i = a; i <= b; ++i) want.push_back(ord[static_cast<size_t>(i)]);
        std::vector<std::string> args = {"ZRANGE", key, std::to_string(start),
                                         std::to_string(stop)};
        if (rev) args.push_back("REV");
        args.push_back("WITHSCORES");
        EXPECT_EQ(s.Run(args).Strings(), FlatWithScores(want));
        break;
      }
      case 7: {  // ZPOPMIN / ZPOPMAX with a count
        const bool max = rng() % 2;
        const size_t count = rng() % 3;
        auto ord = Ordered(z);
        if (max) std::reverse(ord.begin(), ord.end());
        if (ord.size() > count) ord.resize(count);
        EXPECT_EQ(s.Run({max ? "ZPOPMAX" : "ZPOPMIN", key, std::to_string(count)}).Strings(),
                  FlatWithScores(ord));
        for (const auto& e : ord) z.erase(e.second);
        break;
      }
      case 8: {  // ZREMRANGEBYSCORE
        double lo = score(), hi = score();
        if (lo > hi) std::swap(lo, hi);
        int64_t n = 0;
        for (auto it = z.begin(); it != z.end();) {
          if (it->second >= lo && it->second <= hi) {
            it = z.erase(it);
            ++n;
          } else {
            ++it;
          }
        }
        EXPECT_EQ(s.Int({"ZREMRANGEBYSCORE", key, arg(lo), arg(hi)}), n);
        break;
      }
      case 9: {  // ZMSCORE
        const std::string a = member(), b = member();
        Reply r = s.Run({"ZMSCORE", key, a, b});
        ASSERT_EQ(r.elems.size(), 2u);
        EXPECT_EQ(r.elems[0].type == '_', !z.count(a));
        EXPECT_EQ(r.elems[1].type == '_', !z.count(b));
        break;
      }
      case 10: {  // ZUNIONSTORE / ZINTERSTORE of both keys into z3
        const bool inter = rng() % 2;
        const ZModel& x = model["z1"];
        const ZModel& y = model["z2"];
        ZModel out;
        for (const auto& [m, sc] : x) {
          if (y.count(m)) {
            const double v = sc + y.at(m);
            out[m] = std::isnan(v) ? 0.0 : v;
          } else if (!inter) {
            out[m] = sc;
          }
        }
        if (!inter) {
          for (const auto& [m, sc] : y)
            if (!x.count(m)) out[m] = sc;
        }
        EXPECT_EQ(s.Int({inter ? "ZINTERSTORE" : "ZUNIONSTORE", "z3", "2", "z1", "z2"}),
                  static_cast<int64_t>(out.size()));
        EXPECT_EQ(s.Run({"ZRANGE", "z3", "0", "-1", "WITHSCORES"}).Strings(),
                  FlatWithScores(Ordered(out)));
        break;
      }
      case 11: {  // every member, and whether the key exists
        EXPECT_EQ(s.Run({"ZRANGE", key, "0", "-1", "WITHSCORES"}).Strings(),
                  FlatWithScores(Ordered(z)));
        EXPECT_EQ(s.Int({"EXISTS", key}), z.empty() ? 0 : 1);
        break;
      }
    }
    if (::testing::Test::HasFailure()) return;
  }
}

using SModel = std::set<std::string>;

void SetAgainstModel(Server& s, uint64_t seed, int steps) {
  std::mt19937_64 rng(seed);
  auto member = [&] { return Join("e", rng() % 20); };
  std::map<std::string, SModel> model;
  const std::vector<std::string> keys = {"s1", "s2", "s3"};
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  for (int step = 0; step < steps; ++step) {
    const std::string key = keys[rng() % keys.size()];
    SModel& m = model[key];
    const int op = static_cast<int>(rng() % 8);
    SCOPED_TRACE(Join("step ", static_cast<uint64_t>(step))
                     .append(Join(" op ", static_cast<uint64_t>(op))));
    switch (op) {
      case 0:
      case 1: {  // SADD
        const std::string a = member(), b = member();
        int64_t n = m.insert(a).second;
        n += m.insert(b).second;
        EXPECT_EQ(s.Int({"SADD", key, a, b}), n);
        break;
      }
      case 2: {  // SREM
        const std::string a = member();
        EXPECT_EQ(s.Int({"SREM", key, a}), static_cast<int64_t>(m.erase(a)));
        break;
      }
      case 3: {  // SISMEMBER, SMISMEMBER, SCARD
        const std::string a = member(), b = member();
        EXPECT_EQ(s.Int({"SISMEMBER", key, a}), static_cast<int64_t>(m.count(a)));
        Reply r = s.Run({"SMISMEMBER", key, a, b});
        ASSERT_EQ(r.elems.size(), 2u);
        EXPECT_EQ(r.elems[1].num, static_cast<int64_t>(m.count(b)));
        EXPECT_EQ(s.Int({"SCARD", key}), static_cast<int64_t>(m.size()));
        break;
      }
      case 4: {  // SPOP with a count: distinct members of the set
        const size_t count = rng() % 3;
        std::vector<std::string> got = s.Run({"SPOP", key, std::to_string(count)}).Strings();
        EXPECT_EQ(got.size(), std::min(count, m.size()));
        EXPECT_EQ(std::set<std::string>(got.begin(), got.end()).size(), got.size());
        for (const std::string& g : got) EXPECT_EQ(m.erase(g), 1u) << g;
        break;
      }
      case 5: {  // SMOVE
        const std::string dst = keys[rng() % keys.size()], a = member();
        const int64_t moved = m.count(a) ? 1 : 0;
        EXPECT_EQ(s.Int({"SMOVE", key, dst, a}), moved);
        if (moved && dst != key) {
          m.erase(a);
          model[dst].insert(a);
        }
        break;
      }
      case 6: {  // SINTER/SUNION/SDIFF and STORE forms
        const SModel& x = model["s1"];
        const SModel& y = model["s2"];
        SModel i, u, d;
        std::set_intersection(x.begin(), x.end(), y.begin(), y.end(), std::inserter(i, i.end()));
        std::set_union(x.begin(), x.end(), y.begin(), y.end(), std::inserter(u, u.end()));
        std::set_difference(x.begin(), x.end(), y.begin(), y.end(), std::inserter(d, d.end()));
        EXPECT_EQ(sorted(s.Run({"SINTER", "s1", "s2"}).Strings()),
                  std::vector<std::string>(i.begin(), i.end()));
        EXPECT_EQ(sorted(s.Run({"SUNION", "s1", "s2"}).Strings()),
                  std::vector<std::string>(u.begin(), u.end()));
        EXPECT_EQ(sorted(s.Run({"SDIFF", "s1", "s2"}).Strings()),
                  std::vector<std::string>(d.begin(), d.end()));
        EXPECT_EQ(s.Int({"SINTERCARD", "2", "s1", "s2"}), static_cast<int64_t>(i.size()));
        const int which = static_cast<int>(rng() % 3);
        const SModel& r = which == 0 ? i : which == 1 ? u : d;
        const char* cmd = which == 0 ? "SINTERSTORE" : which == 1 ? "SUNIONSTORE" : "SDIFFSTORE";
        EXPECT_EQ(s.Int({cmd, "s3", "s1", "s2"}), static_cast<int64_t>(r.size()));
        model["s3"] = SModel(r);
        break;
      }
      case 7: {  // SMEMBERS and EXISTS
        EXPECT_EQ(sorted(s.Run({"SMEMBERS", key}).Strings()),
                  std::vector<std::string>(m.begin(), m.end()));
        EXPECT_EQ(s.Int({"EXISTS", key}), m.empty() ? 0 : 1);
        break;
      }
    }
    if (::testing::Test::HasFailure()) return;
  }
}

// ---------------------------------------------------------------- tests

TEST(SortedSets, RandomCommandsMatchAModelOverTheMapStore) {
  Server s;
  ZsetAgainstModel(s, 34, 1500);
}

TEST(Sets, RandomCommandsMatchAModelOverTheMapStore) {
  Server s;
  SetAgainstModel(s, 34, 1500);
}

#ifdef PMINDEX_SERVER_TEST_KV
TEST(SortedSets, RandomCommandsMatchAModelOverKvStore) {
  auto kv = KvStore::CreateInMemory("lbtree");
  PMINDEX_ASSERT_OK(kv);
  KvBackedStore store(*kv.value());
  Server s(&store);
  ZsetAgainstModel(s, 35, 800);
}

TEST(Sets, RandomCommandsMatchAModelOverKvStore) {
  auto kv = KvStore::CreateInMemory("lbtree");
  PMINDEX_ASSERT_OK(kv);
  KvBackedStore store(*kv.value());
  Server s(&store);
  SetAgainstModel(s, 35, 800);
}

TEST(SortedSets, ConcurrentClientsOnOneSortedSetOverKvStore) {
  // Clients add distinct members to one sorted set and one set at once
  // (each command one transaction, retried on a conflict, as YCSB's
  // inserts into its one `_indices` sorted set): nothing is lost, and the
  // metadata counts agree with the elements.
  auto kv = KvStore::CreateInMemory("lbtree");
  PMINDEX_ASSERT_OK(kv);
  KvBackedStore store(*kv.value());
  Server s(&store);
  constexpr int kThreads = 4, kEach = 60;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&s, t] {
      std::unique_ptr<RespProtocol> p = s.Connect();
      for (int i = 0; i < kEach; ++i) {
        const std::string m = Join(Join("t", static_cast<uint64_t>(t)).append(":"),
                                   static_cast<uint64_t>(i));
        std::string in = Cmd({"ZADD", "z", std::to_string(i), m}) + Cmd({"SADD", "s", m}), out;
        while (!in.empty()) {
          std::string part;
          in.erase(0, p->Consume(in, &part));
          out += part;
        }
        ASSERT_EQ(out, ":1\r\n:1\r\n");
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(s.Int({"ZCARD", "z"}), kThreads * kEach);
  EXPECT_EQ(s.Int({"SCARD", "s"}), kThreads * kEach);
  EXPECT_EQ(s.Run({"ZRANGEBYSCORE", "z", "-inf", "+inf"}).elems.size(),
            static_cast<size_t>(kThreads * kEach));
  const CollectionReport r = VerifyCollections(*s.dbs);
  EXPECT_TRUE(r.problems.empty()) << r.problems.front();
  EXPECT_EQ(r.collections, 2u);
}
#endif

TEST(SortedSets, ScoreOrderEdgeCases) {
  Server s;
  // Equal scores order by member bytes; -0.0 and 0.0 are one score;
  // the infinities sort at the ends.
  EXPECT_EQ(s.Int({"ZADD", "z", "0", "b", "-0", "a", "0.0", "c", "inf", "z", "-inf", "y", "-1",
                   "x", "-1e-300", "w"}),
            7);
  EXPECT_EQ(s.Run({"ZRANGE", "z", "0", "-1"}).Strings(),
            (std::vector<std::string>{"y", "x", "w", "a", "b", "c", "z"}));
  EXPECT_EQ(s.Run({"ZSCORE", "z", "a"}).str, "0");
  // Changing -0 to 0 is no change (Redis compares the doubles).
  EXPECT_EQ(s.Int({"ZADD", "z", "CH", "0", "a"}), 0);
  EXPECT_EQ(s.Run({"ZRANGEBYSCORE", "z", "-0", "0"}).Strings(),
            (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(s.Run({"ZRANGEBYSCORE", "z", "(-inf", "(inf"}).Strings(),
            (std::vector<std::string>{"x", "w", "a", "b", "c"}));
  EXPECT_EQ(s.Run({"ZREVRANGEBYSCORE", "z", "+inf", "-inf", "LIMIT", "1", "3"}).Strings(),
            (std::vector<std::string>{"c", "b", "a"}));
  EXPECT_EQ(s.Run({"ZRANGEBYLEX", "z", "[a", "(c"}).Strings(),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.Int({"ZLEXCOUNT", "z", "-", "+"}), 7);
  EXPECT_EQ(s.Run({"ZSCORE", "z", "z"}).str, "inf");
  EXPECT_EQ(s.Run({"ZSCORE", "z", "y"}).str, "-inf");
  // NaN is refused as a score and as a result.
  EXPECT_EQ(s.Run({"ZADD", "z", "nan", "n"}).str, "ERR value is not a valid float");
  EXPECT_EQ(s.Run({"ZINCRBY", "z", "-inf", "z"}).str, "ERR resulting score is not a number (NaN)");
  EXPECT_EQ(s.Run({"ZADD", "z", "", "n"}).str, "ERR value is not a valid float");
  EXPECT_EQ(s.Run({"ZRANGEBYSCORE", "z", "nan", "1"}).str, "ERR min or max is not a float");
  EXPECT_EQ(s.Run({"ZRANGEBYLEX", "z", "a", "b"}).str,
            "ERR min or max not valid string range item");
  // Score text: %.17g, as Redis 7.0 (RESP2 bulk strings, RESP3 doubles).
  EXPECT_EQ(s.Raw({"ZADD", "f", "1.1", "m"}), ":1\r\n");
  EXPECT_EQ(s.Raw({"ZSCORE", "f", "m"}), "$18\r\n1.1000000000000001\r\n");
  EXPECT_EQ(s.Raw({"ZINCRBY", "f", "1e20", "m"}), "$5\r\n1e+20\r\n");
  s.Raw({"HELLO", "3"});
  EXPECT_EQ(s.Raw({"ZSCORE", "f", "m"}), ",1e+20\r\n");
  EXPECT_EQ(s.Raw({"ZRANGE", "f", "0", "-1", "WITHSCORES"}),
            "*1\r\n*2\r\n$1\r\nm\r\n,1e+20\r\n");
  EXPECT_EQ(s.Raw({"ZPOPMIN", "f"}), "*2\r\n$1\r\nm\r\n,1e+20\r\n");
}

TEST(SortedSets, ZaddOptionsAndErrors) {
  Server s;
  EXPECT_EQ(s.Run({"ZADD", "z", "NX", "XX", "1", "a"}).str,
            "ERR XX and NX options at the same time are not compatible");
  EXPECT_EQ(s.Run({"ZADD", "z", "GT", "LT", "1", "a"}).str,
            "ERR GT, LT, and/or NX options at the same time are not compatible");
  EXPECT_EQ(s.Run({"ZADD", "z", "INCR", "1", "a", "2", "b"}).str,
            "ERR INCR option supports a single increment-element pair");
  EXPECT_EQ(s.Run({"ZADD", "z", "1", "a", "2"}).str, "ERR syntax error");
  // A bad score anywhere adds nothing.
  EXPECT_EQ(s.Run({"ZADD", "z", "1", "a", "x", "b"}).str, "ERR value is not a valid float");
  EXPECT_EQ(s.Int({"EXISTS", "z"}), 0);
  EXPECT_EQ(s.Int({"ZADD", "z", "XX", "1", "a"}), 0);
  EXPECT_EQ(s.Int({"EXISTS", "z"}), 0);
  EXPECT_EQ(s.Int({"ZADD", "z", "5", "a"}), 1);
  EXPECT_EQ(s.Run({"ZADD", "z", "GT", "INCR", "-1", "a"}).type, '_');
  EXPECT_EQ(s.Run({"ZADD", "z", "LT", "INCR", "-1", "a"}).str, "4");
  EXPECT_EQ(s.Int({"ZADD", "z", "GT", "CH", "3", "a", "1", "b"}), 1);
  EXPECT_EQ(s.Run({"ZRANGE", "z", "0", "-1", "WITHSCORES"}).Strings(),
            (std::vector<std::string>{"b", "1", "a", "4"}));
  EXPECT_EQ(
      s.Run({"ZRANGE", "z", "0", "1", "LIMIT", "0", "1"}).str,
      "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
  EXPECT_EQ(s.Run({"ZPOPMIN", "z", "-1"}).str, "ERR value is out of range, must be positive");
}

TEST(Collections, WrongTypeAndEmptiedKeysAreRemoved) {
  Server s;
  const std::string wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
  ASSERT_EQ(s.Raw({"SET", "str", "v"}), "+OK\r\n");
  EXPECT_EQ(s.Run({"ZADD", "str", "1", "a"}).str, wrongtype);
  EXPECT_EQ(s.Run({"SADD", "str", "a"}).str, wrongtype);
  EXPECT_EQ(s.Run({"ZRANGE", "str", "0", "-1"}).str, wrongtype);
  EXPECT_EQ(s.Run({"SMEMBERS", "str"}).str, wrongtype);
  EXPECT_EQ(s.Int({"ZADD", "z", "1", "a"}), 1);
  EXPECT_EQ(s.Int({"SADD", "s", "a"}), 1);
  EXPECT_EQ(s.Run({"SADD", "z", "a"}).str, wrongtype);
  EXPECT_EQ(s.Run({"ZSCORE", "s", "a"}).str, wrongtype);
  EXPECT_EQ(s.Run({"GET", "z"}).str, wrongtype);
  EXPECT_EQ(s.Run({"ZUNIONSTORE", "out", "2", "z", "str"}).str, wrongtype);
  EXPECT_EQ(s.Run({"SINTER", "s", "str"}).str, wrongtype);
  EXPECT_EQ(s.Run({"SMOVE", "s", "z", "a"}).str, wrongtype);
  EXPECT_EQ(s.Int({"EXISTS", "out"}), 0);
  // A set is a source of ZUNIONSTORE (score 1).
  EXPECT_EQ(s.Int({"ZUNIONSTORE", "out", "2", "z", "s", "WEIGHTS", "2", "3"}), 1);
  EXPECT_EQ(s.Run({"ZSCORE", "out", "a"}).str, "5");
  EXPECT_EQ(s.Run({"TYPE", "out"}).str, "zset");
  EXPECT_EQ(s.Run({"TYPE", "s"}).str, "set");
  // Removing the last member removes the key.
  EXPECT_EQ(s.Int({"ZREM", "z", "a"}), 1);
  EXPECT_EQ(s.Int({"EXISTS", "z"}), 0);
  EXPECT_EQ(s.Run({"SPOP", "s"}).str, "a");
  EXPECT_EQ(s.Int({"EXISTS", "s"}), 0);
  EXPECT_EQ(s.Run({"ZPOPMAX", "out"}).Strings(), (std::vector<std::string>{"a", "5"}));
  EXPECT_EQ(s.Int({"EXISTS", "out"}), 0);
  EXPECT_EQ(s.Int({"SADD", "s", "a", "b"}), 2);
  EXPECT_EQ(s.Int({"SMOVE", "s", "t", "a"}), 1);
  EXPECT_EQ(s.Int({"SMOVE", "s", "t", "b"}), 1);
  EXPECT_EQ(s.Int({"EXISTS", "s"}), 0);
  EXPECT_EQ(s.Int({"SCARD", "t"}), 2);
  // An empty result of a STORE form deletes the destination.
  EXPECT_EQ(s.Int({"SINTERSTORE", "t", "t", "missing"}), 0);
  EXPECT_EQ(s.Int({"EXISTS", "t"}), 0);
  // A new collection at a deleted key starts empty.
  EXPECT_EQ(s.Int({"ZADD", "z", "1", "a", "2", "b"}), 2);
  EXPECT_EQ(s.Int({"DEL", "z"}), 1);
  EXPECT_EQ(s.Int({"ZADD", "z", "3", "c"}), 1);
  EXPECT_EQ(s.Run({"ZRANGE", "z", "0", "-1"}).Strings(), (std::vector<std::string>{"c"}));
}

TEST(Collections, Resp3RepliesAndScans) {
  Server s;
  EXPECT_EQ(s.Int({"SADD", "s", "a", "b", "c"}), 3);
  EXPECT_EQ(s.Int({"ZADD", "z", "1", "a", "2", "b", "3", "c"}), 3);
  EXPECT_EQ(s.Run({"SMEMBERS", "s"}).type, '*');
  s.Raw({"HELLO", "3"});
  EXPECT_EQ(s.Run({"SMEMBERS", "s"}).type, '~');
  EXPECT_EQ(s.Run({"SUNION", "s", "s"}).type, '~');
  EXPECT_EQ(s.Raw({"ZPOPMIN", "z", "1"}), "*1\r\n*2\r\n$1\r\na\r\n,1\r\n");
  // SSCAN/ZSCAN: the cursor resumes after the last member returned.
  std::set<std::string> seen;
  std::string cursor = "0";
  int calls = 0;
  do {
    Reply r = s.Run({"SSCAN", "s", cursor, "COUNT", "1"});
    ASSERT_EQ(r.elems.size(), 2u);
    cursor = r.elems[0].str;
    for (const std::string& m : r.elems[1].Strings()) EXPECT_TRUE(seen.insert(m).second) << m;
    ASSERT_LT(++calls, 10);
  } while (cursor != "0");
  EXPECT_EQ(seen, (std::set<std::string>{"a", "b", "c"}));
  Reply z = s.Run({"ZSCAN", "z", "0", "MATCH", "c"});
  EXPECT_EQ(z.elems[1].Strings(), (std::vector<std::string>{"c", "3"}));
}

TEST(Collections, MultiExecRunsSetAndZsetCommandsAtomically) {
  Server s;
  EXPECT_EQ(s.Raw({"MULTI"}), "+OK\r\n");
  EXPECT_EQ(s.Raw({"ZADD", "z", "1", "a", "2", "b"}), "+QUEUED\r\n");
  EXPECT_EQ(s.Raw({"SADD", "s", "x"}), "+QUEUED\r\n");
  EXPECT_EQ(s.Raw({"ZRANGEBYSCORE", "z", "-inf", "+inf"}), "+QUEUED\r\n");
  EXPECT_EQ(s.Raw({"SADD", "z", "x"}), "+QUEUED\r\n");
  EXPECT_EQ(s.Raw({"ZPOPMIN", "z"}), "+QUEUED\r\n");
  EXPECT_EQ(s.Raw({"SCARD", "s"}), "+QUEUED\r\n");
  EXPECT_EQ(s.Raw({"EXEC"}),
            "*6\r\n:2\r\n:1\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
            "*2\r\n$1\r\na\r\n$1\r\n1\r\n:1\r\n");
  // WATCH sees a change of a sorted set.
  EXPECT_EQ(s.Raw({"WATCH", "z"}), "+OK\r\n");
  EXPECT_EQ(s.Int({"ZADD", "z", "5", "c"}), 1);
  s.Raw({"MULTI"});
  s.Raw({"ZCARD", "z"});
  EXPECT_EQ(s.Raw({"EXEC"}), "*-1\r\n");
}

}  // namespace
}  // namespace pmindex::server::testing
