#include "workload.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <utility>

namespace pmindex::workload {

namespace {

// x = y ^ (y >> s) solved for y.
uint64_t UnXorShift(uint64_t x, int s) {
  uint64_t y = x;
  for (int i = 0; i < 64 / s + 1; ++i) y = x ^ (y >> s);
  return y;
}

constexpr uint64_t InverseOdd(uint64_t a) {
  uint64_t inv = a;  // correct to 3 bits; each step doubles the bits
  for (int i = 0; i < 6; ++i) inv *= 2 - a * inv;
  return inv;
}
static_assert(InverseOdd(0xbf58476d1ce4e5b9ull) * 0xbf58476d1ce4e5b9ull == 1);
static_assert(InverseOdd(0x94d049bb133111ebull) * 0x94d049bb133111ebull == 1);

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool ParseDouble(std::string_view s, double* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(*out);
}

std::string Quote(std::string_view s) {
  std::string q;
  q.reserve(s.size() + 2);
  q += '\'';
  q += s;
  q += '\'';
  return q;
}

}  // namespace

uint64_t UnMix64(uint64_t x) {
  x = UnXorShift(x, 31);
  x *= InverseOdd(0x94d049bb133111ebull);
  x = UnXorShift(x, 27);
  x *= InverseOdd(0xbf58476d1ce4e5b9ull);
  x = UnXorShift(x, 30);
  return x;
}

uint64_t Fnv1a64(uint64_t v) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < 8; ++i) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t DeriveSeed(uint64_t seed, uint64_t a, uint64_t b) {
  return Mix64(Mix64(seed ^ 0x243f6a8885a308d3ull) + Mix64(a + 0x13198a2e03707344ull) * 3 +
               Mix64(b + 0xa4093822299f31d0ull) * 5);
}

// ---------------------------------------------------------------- Zipf
double Zipf::Zeta(uint64_t n, double theta) {
  static std::mutex mu;
  static std::map<std::pair<uint64_t, double>, double> cache;
  {
    std::lock_guard<std::mutex> g(mu);
    auto it = cache.find({n, theta});
    if (it != cache.end()) return it->second;
  }
  constexpr uint64_t kExact = 1000000;
  uint64_t m = std::min(n, kExact);
  double sum = 0;
  // Smallest terms first for accuracy.
  for (uint64_t i = m; i >= 1; --i) sum += std::pow(static_cast<double>(i), -theta);
  if (n > m) {
    // Euler-Maclaurin: sum_{i=m+1}^{n} f(i) with f(x) = x^-theta
    //   = int_m^n f + (f(n) - f(m))/2 + (f'(n) - f'(m))/12 + O(f''' ).
    double dn = static_cast<double>(n), dm = static_cast<double>(m);
    auto f = [&](double x) { return std::pow(x, -theta); };
    auto df = [&](double x) { return -theta * std::pow(x, -theta - 1); };
    double integral = (std::pow(dn, 1 - theta) - std::pow(dm, 1 - theta)) / (1 - theta);
    sum += integral + (f(dn) - f(dm)) / 2 + (df(dn) - df(dm)) / 12;
  }
  std::lock_guard<std::mutex> g(mu);
  if (cache.size() > 64) cache.clear();
  cache[{n, theta}] = sum;
  return sum;
}

Zipf::Zipf(uint64_t n, double theta) : n_(n), theta_(theta) {
  zetan_ = Zeta(n, theta);
  Derive();
}

void Zipf::Derive() {
  zeta2_ = 1 + std::pow(0.5, theta_);
  half_pow_theta_ = std::pow(0.5, theta_);
  alpha_ = 1 / (1 - theta_);
  eta_ = n_ <= 2 ? 0 : (1 - std::pow(2.0 / static_cast<double>(n_), 1 - theta_)) / (1 - zeta2_ / zetan_);
}

void Zipf::Grow(uint64_t n2) {
  if (n2 <= n_) return;
  if (n2 - n_ > 4096) {
    zetan_ = Zeta(n2, theta_);
  } else {
    for (uint64_t i = n_ + 1; i <= n2; ++i) zetan_ += std::pow(static_cast<double>(i), -theta_);
  }
  n_ = n2;
  Derive();
}

uint64_t Zipf::Next(Rng& rng) const {
  double u = rng.Unit();
  double uz = u * zetan_;
  if (uz < 1.0 || n_ == 1) return 0;
  if (uz < 1.0 + half_pow_theta_ || n_ == 2) return 1;
  double v = static_cast<double>(n_) * std::pow(eta_ * u - eta_ + 1, alpha_);
  uint64_t r = v >= static_cast<double>(n_) ? n_ - 1 : static_cast<uint64_t>(v);
  return r;
}

// ----------------------------------------------------------------- specs
const char* OpTypeName(OpType t) {
  switch (t) {
    case OpType::kInsert: return "insert";
    case OpType::kLookup: return "lookup";
    case OpType::kUpdate: return "update";
    case OpType::kDelete: return "delete";
    case OpType::kScan: return "scan";
    case OpType::kReadModifyWrite: return "rmw";
  }
  return "?";
}

std::string Distribution::ToString() const {
  char buf[64];
  switch (kind) {
    case Kind::kUniform: return "uniform";
    case Kind::kZipf: std::snprintf(buf, sizeof buf, "zipf:%g", theta); return buf;
    case Kind::kLatest: return "latest";
    case Kind::kSequential: return "sequential";
    case Kind::kHotspot:
      std::snprintf(buf, sizeof buf, "hotspot:%g:%g", hot_fraction, hot_ops);
      return buf;
    case Kind::kHotRange:
      std::snprintf(buf, sizeof buf, "hotrange:%g:%g:%g", hot_fraction, hot_ops, hot_start);
      return buf;
    case Kind::kThreadRange:
      std::snprintf(buf, sizeof buf, "threadrange:%g:%u", hot_ops, shift);
      return buf;
  }
  return "?";
}

Result<Distribution> ParseDistribution(std::string_view text) {
  Distribution d;
  auto colon = text.find(':');
  std::string_view name = text.substr(0, colon);
  std::string_view arg = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("bad --dist " + Quote(text) + ": " + std::string(why) +
                                   " (expected uniform, zipf[:THETA], latest, sequential, "
                                   "hotspot:F[:P], hotrange:F[:P[:S]] or threadrange[:P[:K]])");
  };
  if (name == "uniform" || name == "sequential" || name == "latest") {
    if (colon != std::string_view::npos && name != "latest") return bad("takes no parameter");
    d.kind = name == "uniform"      ? Distribution::Kind::kUniform
             : name == "sequential" ? Distribution::Kind::kSequential
                                    : Distribution::Kind::kLatest;
    if (name == "latest" && colon != std::string_view::npos) {
      if (!ParseDouble(arg, &d.theta) || d.theta <= 0 || d.theta >= 1)
        return bad("theta must be a number in (0, 1)");
    }
    return d;
  }
  if (name == "zipf" || name == "zipfian") {
    d.kind = Distribution::Kind::kZipf;
    if (colon != std::string_view::npos &&
        (!ParseDouble(arg, &d.theta) || d.theta <= 0 || d.theta >= 1))
      return bad("theta must be a number in (0, 1)");
    return d;
  }
  if (name == "hotspot" || name == "hotrange") {
    const bool range = name == "hotrange";
    d.kind = range ? Distribution::Kind::kHotRange : Distribution::Kind::kHotspot;
    if (colon == std::string_view::npos) return bad(std::string(name) + " needs the hot fraction F");
    auto c2 = arg.find(':');
    std::string_view f = arg.substr(0, c2);
    if (!ParseDouble(f, &d.hot_fraction) || d.hot_fraction <= 0 || d.hot_fraction > 1)
      return bad("hot fraction F must be a number in (0, 1]");
    if (c2 == std::string_view::npos) return d;
    std::string_view rest = arg.substr(c2 + 1);
    auto c3 = rest.find(':');
    if (c3 != std::string_view::npos && !range) return bad("hotspot takes at most F and P");
    if (!ParseDouble(rest.substr(0, c3), &d.hot_ops) || d.hot_ops < 0 || d.hot_ops > 1)
      return bad("hot operation share P must be a number in [0, 1]");
    if (c3 != std::string_view::npos &&
        (!ParseDouble(rest.substr(c3 + 1), &d.hot_start) || d.hot_start < 0 || d.hot_start > 1))
      return bad("hot range start S must be a number in [0, 1]");
    return d;
  }
  if (name == "threadrange") {
    d.kind = Distribution::Kind::kThreadRange;
    if (colon == std::string_view::npos) return d;
    auto c2 = arg.find(':');
    if (!ParseDouble(arg.substr(0, c2), &d.hot_ops) || d.hot_ops < 0 || d.hot_ops > 1)
      return bad("hot operation share P must be a number in [0, 1]");
    if (c2 == std::string_view::npos) return d;
    uint64_t k = 0;
    if (!ParseU64(arg.substr(c2 + 1), &k) || k > 1000000) return bad("shift K must be an integer in [0, 1000000]");
    d.shift = static_cast<uint32_t>(k);
    return d;
  }
  return bad("unknown distribution");
}

uint32_t Mix::total() const { return std::accumulate(weight.begin(), weight.end(), 0u); }

bool Mix::reads() const {
  return has(OpType::kLookup) || has(OpType::kUpdate) || has(OpType::kScan) ||
         has(OpType::kReadModifyWrite);
}

namespace {

bool OpTypeFromName(std::string_view s, OpType* t) {
  for (size_t i = 0; i < kOpTypes; ++i) {
    if (s == OpTypeName(static_cast<OpType>(i))) {
      *t = static_cast<OpType>(i);
      return true;
    }
  }
  if (s == "read") {
    *t = OpType::kLookup;
    return true;
  }
  return false;
}

void Reduce(Mix* m) {
  uint32_t g = 0;
  for (uint32_t w : m->weight) g = std::gcd(g, w);
  if (g > 1)
    for (uint32_t& w : m->weight) w /= g;
}

}  // namespace

Result<Mix> ParseMix(std::string_view text) {
  Mix m;
  m.name = std::string(text);
  auto set = [&m](OpType t, uint32_t w) { m.weight[static_cast<size_t>(t)] = w; };
  OpType single;
  if (text == "dense-insert") {
    set(OpType::kInsert, 1);
    m.dense_insert = true;
    return m;
  }
  if (OpTypeFromName(text, &single) && text != "read") {
    set(single, 1);
    return m;
  }
  if (text == "ycsb-a") { set(OpType::kLookup, 1); set(OpType::kUpdate, 1); return m; }
  if (text == "ycsb-b") { set(OpType::kLookup, 19); set(OpType::kUpdate, 1); return m; }
  if (text == "ycsb-c") { set(OpType::kLookup, 1); return m; }
  if (text == "ycsb-d") {
    set(OpType::kLookup, 19);
    set(OpType::kInsert, 1);
    m.force_latest = true;
    return m;
  }
  if (text == "ycsb-e") { set(OpType::kScan, 19); set(OpType::kInsert, 1); return m; }
  if (text == "ycsb-f") { set(OpType::kLookup, 1); set(OpType::kReadModifyWrite, 1); return m; }
  if (text.starts_with("mix:")) {
    std::string_view rest = text.substr(4);
    auto bad = [&](std::string_view why) {
      return Status::InvalidArgument("bad workload " + Quote(text) + ": " + std::string(why) +
                                     " (expected mix:TYPE=W,TYPE=W,... with TYPE one of insert, "
                                     "lookup, update, delete, scan, rmw)");
    };
    if (rest.empty()) return bad("no weights");
    uint64_t sum = 0;
    while (!rest.empty()) {
      auto comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      auto eq = item.find('=');
      if (eq == std::string_view::npos) return bad("item " + Quote(item) + " is not TYPE=W");
      OpType t;
      uint64_t w;
      if (!OpTypeFromName(item.substr(0, eq), &t))
        return bad("unknown operation " + Quote(item.substr(0, eq)));
      if (!ParseU64(item.substr(eq + 1), &w) || w > 1000000)
        return bad("weight " + Quote(item.substr(eq + 1)) + " is not an integer in [0, 1000000]");
      if (m.weight[static_cast<size_t>(t)] != 0) return bad("operation listed twice");
      set(t, static_cast<uint32_t>(w));
      sum += w;
      if (comma != std::string_view::npos && rest.empty()) return bad("trailing comma");
    }
    if (sum == 0) return bad("all weights are zero");
    Reduce(&m);
    return m;
  }
  return Status::InvalidArgument(
      "unknown workload " + Quote(text) +
      " (expected insert, lookup, update, delete, scan, rmw, dense-insert, ycsb-a..ycsb-f or "
      "mix:TYPE=W,...)");
}

Result<std::vector<PhaseSpec>> ParseWorkload(std::string_view text) {
  std::vector<PhaseSpec> phases;
  if (text.empty()) return Status::InvalidArgument("empty --workload");
  std::vector<std::string_view> items;
  for (std::string_view rest = text;;) {
    auto comma = rest.find(',');
    items.push_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    // A mix phase absorbs the following TYPE=W items (no other phase
    // contains '='): "mix:insert=50,lookup=50:1000,scan".
    size_t first = i;
    if (items[i].starts_with("mix:")) {
      while (i + 1 < items.size() && items[i + 1].find('=') != std::string_view::npos) ++i;
    }
    const char* b = items[first].data();
    std::string_view item(b, items[i].data() + items[i].size() - b);
    PhaseSpec p;
    // MIX[:OPS]@DIST: a distribution for this phase only (no distribution
    // contains '@' or ',').
    if (auto at = item.find('@'); at != std::string_view::npos) {
      auto d = ParseDistribution(item.substr(at + 1));
      if (!d.ok())
        return Status::InvalidArgument("bad workload " + Quote(text) + ": phase distribution: " +
                                       std::string(d.status().message()));
      p.dist = d.value();
      item = item.substr(0, at);
    }
    auto colon = item.rfind(':');
    if (colon != std::string_view::npos && item.find('=', colon) == std::string_view::npos &&
        !(item.starts_with("mix:") && colon == 3)) {
      std::string_view n = item.substr(colon + 1);
      if (!ParseU64(n, &p.ops) || p.ops == 0)
        return Status::InvalidArgument("bad workload " + Quote(text) + ": op count " + Quote(n) +
                                       " is not a positive integer");
      item = item.substr(0, colon);
    }
    if (item.empty()) return Status::InvalidArgument("bad workload " + Quote(text) + ": empty phase");
    auto m = ParseMix(item);
    if (!m.ok()) return m.status();
    p.mix = std::move(m.value());
    phases.push_back(std::move(p));
  }
  return phases;
}

// ------------------------------------------------------------- key space
namespace {

uint64_t MulMod(uint64_t a, uint64_t b, uint64_t n) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(a) * b % n);
}

// a^-1 mod n (gcd(a, n) = 1), by the extended Euclidean algorithm.
uint64_t InverseMod(uint64_t a, uint64_t n) {
  __int128 t = 0, nt = 1, r = n, nr = a % n;
  while (nr != 0) {
    __int128 q = r / nr;
    __int128 tmp = t - q * nt;
    t = nt;
    nt = tmp;
    tmp = r - q * nr;
    r = nr;
    nr = tmp;
  }
  if (t < 0) t += n;
  return static_cast<uint64_t>(t);
}

}  // namespace

KeySpace::KeySpace(KeyKind kind, uint64_t seed, std::shared_ptr<const std::vector<Key>> table)
    : kind_(kind), mask_(DeriveSeed(seed, 0x6b6579)), mask2_(DeriveSeed(seed, 0x6b6579, 2)) {
  if (table == nullptr || table->empty()) return;
  sorted_ = *table;
  std::sort(sorted_.begin(), sorted_.end());
  table_n_ = sorted_.size();
  const uint64_t n = table_n_;
  // Rank r is the sorted key at position (a*r + b) mod n: a fixed,
  // seeded scramble (a near n/phi and coprime to n, so consecutive ranks
  // land far apart in key order, as random keys do).
  a_ = std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(n) * 0.6180339887498949));
  while (std::gcd(a_, n) != 1) ++a_;
  a_ %= n;
  if (n == 1) a_ = 0;
  a_inv_ = n == 1 ? 0 : InverseMod(a_, n);
  b_ = DeriveSeed(seed, 0x7461626c65) % n;
  by_rank_.resize(n);
  uint64_t pos = b_;
  for (uint64_t r = 0; r < n; ++r) {
    by_rank_[r] = sorted_[pos];
    pos += a_;
    if (pos >= n) pos -= n;
  }
}

bool KeySpace::in_table(Key k) const {
  return table_n_ != 0 && std::binary_search(sorted_.begin(), sorted_.end(), k);
}

uint64_t KeySpace::rank(Key k) const {
  if (table_n_ != 0) {
    auto it = std::lower_bound(sorted_.begin(), sorted_.end(), k);
    if (it != sorted_.end() && *it == k) {
      const uint64_t pos = static_cast<uint64_t>(it - sorted_.begin());
      return MulMod(a_inv_, (pos + table_n_ - b_) % table_n_, table_n_);
    }
  }
  return kind_ == KeyKind::kDense ? k - 1 : UnMix64(k ^ mask2_) ^ mask_;
}

uint64_t RankList::at(uint64_t pos) const {
  if (ranges_.size() == 1) return ranges_[0].at(pos);
  size_t i = std::upper_bound(ends_.begin(), ends_.end(), pos) - ends_.begin();
  uint64_t begin = i == 0 ? 0 : ends_[i - 1];
  return ranges_[i].at(pos - begin);
}

void RankList::Append(RankRange r) {
  if (r.count == 0) return;
  if (!ranges_.empty()) {
    RankRange& last = ranges_.back();
    if (last.stride == r.stride && last.start + last.count * last.stride == r.start) {
      last.count += r.count;
      size_ += r.count;
      ends_.back() = size_;
      return;
    }
  }
  ranges_.push_back(r);
  size_ += r.count;
  ends_.push_back(size_);
}

void RankList::Append(const RankList& other) {
  for (const RankRange& r : other.ranges_) Append(r);
}

RankList RemoveRanks(const RankList& list, const std::vector<uint64_t>& sorted_ranks) {
  if (sorted_ranks.empty()) return list;
  RankList out;
  for (const RankRange& r : list.ranges()) {
    const uint64_t last = r.at(r.count - 1);
    auto it = std::lower_bound(sorted_ranks.begin(), sorted_ranks.end(), r.start);
    uint64_t i = 0;  // next position of r not yet copied
    for (; it != sorted_ranks.end() && *it <= last; ++it) {
      if ((*it - r.start) % r.stride != 0) continue;
      const uint64_t p = (*it - r.start) / r.stride;
      out.Append(RankRange{r.at(i), p - i, r.stride});
      i = p + 1;
    }
    if (i < r.count) out.Append(RankRange{r.at(i), r.count - i, r.stride});
  }
  return out;
}

RankList RankList::Slice(uint64_t pos, uint64_t count) const {
  RankList out;
  uint64_t begin = 0;
  for (const RankRange& r : ranges_) {
    uint64_t end = begin + r.count;
    if (count == 0) break;
    if (pos < end) {
      uint64_t off = pos - begin;
      uint64_t take = std::min(count, r.count - off);
      out.Append(RankRange{r.at(off), take, r.stride});
      pos += take;
      count -= take;
    }
    begin = end;
  }
  return out;
}

// --------------------------------------------------------------- Workload
namespace {

// LSD radix sort on the key, 16 bits per pass: the keys are distinct and
// uniformly spread, and 10^7 pairs sort several times faster than with
// std::sort.
void SortByKey(std::vector<KV>& v) {
  if (v.size() < (1u << 16)) {
    std::sort(v.begin(), v.end(), [](const KV& a, const KV& b) { return a.key < b.key; });
    return;
  }
  std::vector<KV> tmp(v.size());
  std::vector<size_t> count(1u << 16);
  for (int shift = 0; shift < 64; shift += 16) {
    std::fill(count.begin(), count.end(), 0);
    for (const KV& kv : v) ++count[(kv.key >> shift) & 0xffff];
    size_t sum = 0;
    for (size_t& c : count) {
      size_t n = c;
      c = sum;
      sum += n;
    }
    for (const KV& kv : v) tmp[count[(kv.key >> shift) & 0xffff]++] = kv;
    v.swap(tmp);
  }
}

}  // namespace

Workload::Workload(WorkloadConfig cfg)
    : cfg_(std::move(cfg)), ks_(cfg_.key_kind, cfg_.seed, cfg_.key_file) {}

std::optional<OpType> PhaseSpec::single_type() const {
  if (mix.dense_insert) return std::nullopt;
  std::optional<OpType> t;
  for (size_t i = 0; i < kOpTypes; ++i) {
    if (mix.weight[i] == 0) continue;
    if (t) return std::nullopt;
    t = static_cast<OpType>(i);
  }
  return t;
}

Result<std::shared_ptr<const Workload>> Workload::Make(WorkloadConfig cfg) {
  if (cfg.phases.empty()) return Status::InvalidArgument("the workload has no phase");
  if (cfg.scan_len == 0) return Status::InvalidArgument("scan length must be >= 1");
  if (cfg.key_kind == KeyKind::kDense && cfg.keys > (uint64_t{1} << 62))
    return Status::InvalidArgument("too many keys");
  for (const PhaseSpec& p : cfg.phases) {
    if (p.mix.dense_insert) cfg.key_kind = KeyKind::kDense;
    if (p.ops == 0 && cfg.default_ops == 0)
      return Status::InvalidArgument("phase " + p.mix.name + " has no op count");
    if (p.op_keys != nullptr) {
      if (!p.single_type())
        return Status::InvalidArgument("phase " + p.mix.name +
                                       ": op keys from a file need a single-type phase");
      const uint64_t ops = p.ops != 0 ? p.ops : cfg.default_ops;
      if (p.op_keys_begin > p.op_keys->size() || p.op_keys->size() - p.op_keys_begin < ops)
        return Status::InvalidArgument(
            "phase " + p.mix.name + " needs keys " + std::to_string(p.op_keys_begin) + ".." +
            std::to_string(p.op_keys_begin + ops - 1) + " of its op-key file, which has " +
            std::to_string(p.op_keys->size()));
    }
  }
  if (cfg.key_file != nullptr) {
    if (cfg.key_kind != KeyKind::kRandom)
      return Status::InvalidArgument("keys from a file need the random key space (not dense or dense-insert)");
    if (cfg.keys != cfg.key_file->size())
      return Status::InvalidArgument("the key count differs from the key file's");
    std::vector<Key> s = *cfg.key_file;
    std::sort(s.begin(), s.end());
    if (std::adjacent_find(s.begin(), s.end()) != s.end())
      return Status::InvalidArgument("the key file has duplicate keys");
  }
  return std::shared_ptr<const Workload>(new Workload(std::move(cfg)));
}

std::vector<KV> Workload::LoadPairs() const {
  std::vector<KV> v(cfg_.keys);
  for (uint64_t r = 0; r < cfg_.keys; ++r) {
    Key k = ks_.key(r);
    v[r] = KV{k, ValueFor(k)};
  }
  if (ks_.kind() != KeyKind::kDense) SortByKey(v);
  return v;
}

State Workload::InitialState() const {
  State s;
  s.present.Append(RankRange{0, cfg_.keys, 1});
  s.next_rank = cfg_.keys;
  return s;
}

Result<PhasePlan> Workload::Plan(const State& state, size_t phase_no, unsigned threads,
                                 bool time_mode) const {
  if (phase_no < 1 || phase_no > cfg_.phases.size())
    return Status::InvalidArgument("no such phase");
  if (threads == 0) return Status::InvalidArgument("threads must be >= 1");
  const PhaseSpec& spec = cfg_.phases[phase_no - 1];
  PhasePlan plan;
  plan.phase_no = phase_no;
  plan.threads = threads;
  plan.time_mode = time_mode;
  plan.mix = spec.mix;
  const Distribution& base = spec.dist ? *spec.dist : cfg_.dist;
  plan.dist = base;
  if (spec.mix.force_latest) {
    plan.dist = Distribution{};
    plan.dist.kind = Distribution::Kind::kLatest;
    if (base.kind == Distribution::Kind::kZipf || base.kind == Distribution::Kind::kLatest)
      plan.dist.theta = base.theta;
  }
  plan.seed = DeriveSeed(cfg_.seed, 0x70686173, phase_no);
  const uint64_t ops = spec.ops != 0 ? spec.ops : cfg_.default_ops;
  if (spec.op_keys != nullptr) {
    // Keys in file order: thread t takes the t-th contiguous slice.
    if (time_mode)
      return Status::InvalidArgument("phase " + std::to_string(phase_no) + " (" + spec.mix.name +
                                     "): op keys from a file need an op count, not --duration");
    plan.file_keys = spec.op_keys;
    plan.file_type = *spec.single_type();
    plan.thread_ops.resize(threads);
    plan.file_begin.resize(threads);
    plan.deletes.resize(threads);
    plan.inserts.resize(threads);
    uint64_t begin = spec.op_keys_begin;
    for (unsigned t = 0; t < threads; ++t) {
      plan.thread_ops[t] = ops / threads + (t < ops % threads);
      plan.file_begin[t] = begin;
      begin += plan.thread_ops[t];
    }
    plan.readable = state.present;
    plan.next_rank_after = state.next_rank;
    return plan;
  }
  const uint32_t W = spec.mix.total();
  const std::string what = "phase " + std::to_string(phase_no) + " (" + spec.mix.name + ")";

  plan.thread_ops.resize(threads);
  std::vector<uint64_t> blocks(threads);
  for (unsigned t = 0; t < threads; ++t) {
    plan.thread_ops[t] =
        time_mode ? std::numeric_limits<uint64_t>::max() : ops / threads + (t < ops % threads);
    blocks[t] = time_mode ? 0 : (plan.thread_ops[t] + W - 1) / W;
  }

  const uint64_t present = state.present.size();
  uint64_t reserved = 0;
  const uint32_t wd = spec.mix.weight[static_cast<size_t>(OpType::kDelete)];
  plan.deletes.resize(threads);
  if (wd != 0) {
    std::vector<uint64_t> per(threads);
    if (time_mode) {
      uint64_t total = spec.mix.reads() ? present / W * wd : present;
      for (auto& p : per) p = total / threads;
    } else {
      for (unsigned t = 0; t < threads; ++t)
        per[t] = std::min(plan.thread_ops[t], blocks[t] * wd);
    }
    uint64_t need = std::accumulate(per.begin(), per.end(), uint64_t{0});
    if (need > present || (spec.mix.reads() && need == present && !time_mode))
      return Status::InvalidArgument(
          what + " needs " + std::to_string(need) + " present keys to delete" +
          (spec.mix.reads() ? " (plus at least one to read)" : "") + " but only " +
          std::to_string(present) + " are present; lower --ops or raise --keys");
    for (unsigned t = 0; t < threads; ++t) {
      plan.deletes[t] = state.present.Slice(reserved, per[t]);
      reserved += per[t];
    }
  }
  plan.readable = state.present.Slice(reserved, present - reserved);
  if (spec.mix.reads() && plan.readable.empty())
    return Status::InvalidArgument(what + " reads present keys but none is present; raise --keys");

  const uint32_t wi = spec.mix.weight[static_cast<size_t>(OpType::kInsert)];
  plan.inserts.resize(threads);
  plan.next_rank_after = state.next_rank;
  if (wi != 0) {
    constexpr uint64_t kTimeModeQuota = uint64_t{1} << 36;
    uint64_t max_per = 0, sum = 0;
    std::vector<uint64_t> per(threads);
    for (unsigned t = 0; t < threads; ++t) {
      per[t] = time_mode ? kTimeModeQuota : std::min(plan.thread_ops[t], blocks[t] * wi);
      max_per = std::max(max_per, per[t]);
      sum += per[t];
    }
    if (state.next_rank > (uint64_t{1} << 63) - uint64_t{threads} * (max_per + 1))
      return Status::InvalidArgument(what + ": the insert key space is exhausted");
    uint64_t off = state.next_rank;
    for (unsigned t = 0; t < threads; ++t) {
      if (spec.mix.dense_insert) {
        plan.inserts[t] = RankRange{state.next_rank + t, per[t], threads};
      } else {
        plan.inserts[t] = RankRange{off, per[t], 1};
        off += per[t];
      }
    }
    plan.next_rank_after = state.next_rank + (spec.mix.dense_insert ? threads * max_per : sum);
  }

  const bool hot_inserts = wi != 0 && plan.dist.kind == Distribution::Kind::kHotRange &&
                          !spec.mix.dense_insert;
  if (spec.mix.reads() || hot_inserts) {
    const uint64_t n = plan.readable.size();
    if (plan.dist.kind == Distribution::Kind::kZipf) {
      plan.zipf = std::make_shared<const Zipf>(n, plan.dist.theta);
    } else if (plan.dist.kind == Distribution::Kind::kLatest) {
      Zipf::Zeta(n, plan.dist.theta);  // warm the cache the streams use
    } else if (plan.dist.kind == Distribution::Kind::kSequential ||
               plan.dist.kind == Distribution::Kind::kHotRange ||
               plan.dist.kind == Distribution::Kind::kThreadRange) {
      auto keys = std::make_shared<std::vector<Key>>(n);
      for (uint64_t i = 0; i < n; ++i) (*keys)[i] = ks_.key(plan.readable.at(i));
      if (ks_.kind() != KeyKind::kDense || plan.readable.ranges().size() > 1)
        std::sort(keys->begin(), keys->end());
      plan.sorted_readable = std::move(keys);
      if (plan.dist.kind == Distribution::Kind::kHotRange && n != 0) {
        const double nd = static_cast<double>(n);
        plan.hot_count = std::clamp<uint64_t>(static_cast<uint64_t>(plan.dist.hot_fraction * nd), 1, n);
        plan.hot_first = std::min(static_cast<uint64_t>(plan.dist.hot_start * nd), n - plan.hot_count);
      }
    }
  }
  if (hot_inserts) {
    Status s = PlanHotInserts(state, &plan);
    if (!s.ok()) return Status::InvalidArgument(what + ": " + std::string(s.message()));
  }
  return plan;
}

// hotrange inserts: each thread's fresh keys are chosen in advance (not in
// the timed loop) by walking unused ranks in order and taking, for an
// insert that is hot (probability P), the next rank whose key lies in the
// hot key interval, else the next rank whose key lies outside it. Ranks
// passed over are never used. The hot interval is the key range the hot
// present keys span, widened to the next present key on each side (so it
// is the key range of the tree's leaves that hold the hot keys); with no
// present key, the share [S, S+F) of the 64-bit key space.
Status Workload::PlanHotInserts(const State& state, PhasePlan* plan) const {
  if (plan->time_mode) return Status::InvalidArgument("hotrange inserts need an op count, not --duration");
  if (ks_.kind() == KeyKind::kDense)
    return Status::InvalidArgument("hotrange inserts need the random key space (dense keys are all above the present ones)");
  const Distribution& d = plan->dist;
  Key lo = 0, hi = std::numeric_limits<Key>::max();
  const std::vector<Key>* sorted = plan->sorted_readable.get();
  if (sorted != nullptr && !sorted->empty()) {
    const uint64_t end = plan->hot_first + plan->hot_count;
    lo = plan->hot_first == 0 ? 0 : (*sorted)[plan->hot_first];
    hi = end < sorted->size() ? (*sorted)[end] - 1 : std::numeric_limits<Key>::max();
  } else {
    const long double span = 18446744073709551616.0L;  // 2^64
    const long double a = std::min<long double>(d.hot_start, 1.0L - d.hot_fraction) * span;
    const long double b = a + static_cast<long double>(d.hot_fraction) * span;
    lo = a >= span ? std::numeric_limits<Key>::max() : static_cast<Key>(a);
    hi = b >= span ? std::numeric_limits<Key>::max() : static_cast<Key>(b) - (b > a ? 1 : 0);
  }
  const bool everything = lo == 0 && hi == std::numeric_limits<Key>::max();
  Rng rng(DeriveSeed(plan->seed, 0x686f74696e73ull));
  uint64_t cursor = state.next_rank;
  // About 1/width tries per hot insert; give up on absurdly narrow ranges.
  const uint64_t limit = cursor + (uint64_t{1} << 40);
  plan->insert_ranks.assign(plan->threads, {});
  for (unsigned t = 0; t < plan->threads; ++t) {
    std::vector<uint64_t>& out = plan->insert_ranks[t];
    out.reserve(plan->inserts[t].count);
    for (uint64_t i = 0; i < plan->inserts[t].count; ++i) {
      const bool hot = everything || rng.Unit() < d.hot_ops;
      while (true) {
        if (cursor >= limit) return Status::InvalidArgument("the hot key range is too narrow for inserts");
        const Key k = ks_.key(cursor++);
        if ((k >= lo && k <= hi) == hot) break;
      }
      out.push_back(cursor - 1);
    }
  }
  plan->next_rank_after = cursor;
  return Status::OK();
}

void Workload::Commit(State* state, const PhasePlan& plan,
                      const std::vector<const OpStream*>& streams) const {
  if (plan.file_keys != nullptr) {
    // Deleted table keys leave the present set; inserted file keys are not
    // tracked (generated phases never read them).
    uint64_t done_total = 0;
    std::vector<uint64_t> gone;
    for (unsigned t = 0; t < plan.threads; ++t) {
      const uint64_t done = t < streams.size() ? streams[t]->done() : 0;
      done_total += done;
      if (plan.file_type != OpType::kDelete) continue;
      for (uint64_t i = 0; i < done; ++i) {
        const Key k = (*plan.file_keys)[plan.file_begin[t] + i];
        const uint64_t r = ks_.rank(k);
        // Present generated keys too (ranks >= the table), if the file names one.
        if (ks_.key(r) == k && r < state->next_rank) gone.push_back(r);
      }
    }
    if (plan.file_type == OpType::kDelete) {
      std::sort(gone.begin(), gone.end());
      gone.erase(std::unique(gone.begin(), gone.end()), gone.end());
      const uint64_t before = state->present.size();
      state->present = RemoveRanks(state->present, gone);
      state->deleted += before - state->present.size();
    } else if (plan.file_type == OpType::kInsert) {
      state->inserted += done_total;
    }
    return;
  }
  State next;
  for (unsigned t = 0; t < plan.threads; ++t) {
    uint64_t done = t < streams.size() ? streams[t]->deletes_done() : 0;
    const RankList& d = plan.deletes[t];
    next.present.Append(d.Slice(done, d.size() - done));
    next.deleted += done;
  }
  next.present.Append(plan.readable);
  for (unsigned t = 0; t < plan.threads; ++t) {
    uint64_t done = t < streams.size() ? streams[t]->inserts_done() : 0;
    if (!plan.insert_ranks.empty()) {
      for (uint64_t i = 0; i < done; ++i) next.present.Append(RankRange{plan.insert_ranks[t][i], 1, 1});
    } else {
      RankRange r = plan.inserts[t];
      r.count = done;
      next.present.Append(r);
    }
    next.inserted += done;
  }
  next.next_rank = plan.next_rank_after;
  next.inserted += state->inserted;
  next.deleted += state->deleted;
  *state = std::move(next);
}

// --------------------------------------------------------------- OpStream
OpStream::OpStream(std::shared_ptr<const Workload> w, const PhasePlan& plan, unsigned thread)
    : w_(std::move(w)),
      plan_(&plan),
      thread_(thread),
      rng_(DeriveSeed(plan.seed, thread, 0x7468)),
      budget_(plan.thread_ops.at(thread)) {
  if (plan.file_keys == nullptr && plan.mix.reads() &&
      plan.dist.kind == Distribution::Kind::kLatest) {
    latest_base_ = plan.readable.size();
    latest_ = std::make_unique<Zipf>(latest_base_, plan.dist.theta);
  }
  if (plan.dist.kind == Distribution::Kind::kSequential && plan.sorted_readable &&
      !plan.sorted_readable->empty())
    seq_pos_ = plan.sorted_readable->size() / plan.threads * thread;
}

void OpStream::RefillBlock() {
  if (block_.empty()) {
    for (size_t i = 0; i < kOpTypes; ++i)
      block_.insert(block_.end(), plan_->mix.weight[i], static_cast<OpType>(i));
  }
  // Any permutation of the block holds the same counts; shuffle in place.
  for (size_t i = block_.size(); i > 1; --i) std::swap(block_[i - 1], block_[rng_.Below(i)]);
  block_pos_ = 0;
}

uint64_t OpStream::PickReadRank() {
  const RankList& rd = plan_->readable;
  const uint64_t n = rd.size();
  const Distribution& d = plan_->dist;
  switch (d.kind) {
    case Distribution::Kind::kUniform:
      return rd.at(rng_.Below(n));
    case Distribution::Kind::kZipf:
      return rd.at(Fnv1a64(plan_->zipf->Next(rng_)) % n);
    case Distribution::Kind::kHotspot: {
      uint64_t hot = std::max<uint64_t>(1, static_cast<uint64_t>(d.hot_fraction * static_cast<double>(n)));
      if (hot >= n) return rd.at(rng_.Below(n));
      if (rng_.Unit() < d.hot_ops) return rd.at(rng_.Below(hot));
      return rd.at(hot + rng_.Below(n - hot));
    }
    case Distribution::Kind::kLatest: {
      uint64_t own = inserts_done_;
      uint64_t z = latest_->Next(rng_);
      if (z < own) return plan_->inserts[thread_].at(own - 1 - z);
      return rd.at(n - 1 - (z - own));
    }
    case Distribution::Kind::kSequential:
    case Distribution::Kind::kHotRange:
    case Distribution::Kind::kThreadRange:
      break;  // handled by the caller (key order, not rank order)
  }
  return rd.at(0);
}

uint64_t OpStream::PickThreadRangePos() {
  const uint64_t n = plan_->sorted_readable->size();
  const uint64_t T = std::max(1u, plan_->threads);
  const uint64_t slice = (thread_ + plan_->dist.shift) % T;
  const uint64_t first = n * slice / T, end = n * (slice + 1) / T;
  if (end > first && rng_.Unit() < plan_->dist.hot_ops) return first + rng_.Below(end - first);
  return rng_.Below(n);
}

uint64_t OpStream::PickHotRangePos() {
  const uint64_t n = plan_->sorted_readable->size();
  const uint64_t first = plan_->hot_first, hot = plan_->hot_count;
  if (hot >= n || rng_.Unit() < plan_->dist.hot_ops) return first + rng_.Below(hot);
  // A cold key: uniform over the positions outside [first, first + hot).
  const uint64_t c = rng_.Below(n - hot);
  return c < first ? c : c + hot;
}

bool OpStream::Next(Op* op) {
  if (done_ >= budget_) return false;
  if (plan_->file_keys != nullptr) {
    const OpType type = plan_->file_type;
    op->type = type;
    op->key = (*plan_->file_keys)[plan_->file_begin[thread_] + done_];
    op->value = 0;
    op->scan_len = 0;
    op->expect_present = type != OpType::kInsert;
    if (type == OpType::kInsert) {
      op->value = ValueFor(op->key);
      ++inserts_done_;
    } else if (type == OpType::kDelete) {
      ++deletes_done_;
    } else if (type == OpType::kUpdate || type == OpType::kReadModifyWrite) {
      op->value = ValueFor(op->key) + (++updates_);
    } else if (type == OpType::kScan) {
      op->scan_len = w_->config().scan_len;
    }
    ++done_;
    return true;
  }
  if (block_pos_ >= block_.size()) RefillBlock();
  const OpType type = block_[block_pos_];
  const KeySpace& ks = w_->keyspace();
  op->type = type;
  op->value = 0;
  op->scan_len = 0;
  switch (type) {
    case OpType::kInsert: {
      const RankRange& r = plan_->inserts[thread_];
      if (inserts_done_ >= r.count) return false;
      op->key = plan_->insert_ranks.empty() ? ks.key(r.at(inserts_done_++))
                                            : ks.key(plan_->insert_ranks[thread_][inserts_done_++]);
      op->value = ValueFor(op->key);
      op->expect_present = false;
      if (latest_) latest_->Grow(latest_base_ + inserts_done_);
      break;
    }
    case OpType::kDelete: {
      const RankList& d = plan_->deletes[thread_];
      if (deletes_done_ >= d.size()) return false;
      op->key = ks.key(d.at(deletes_done_++));
      op->expect_present = true;
      break;
    }
    default: {
      if (plan_->dist.kind == Distribution::Kind::kSequential) {
        const std::vector<Key>& keys = *plan_->sorted_readable;
        op->key = keys[seq_pos_];
        if (++seq_pos_ == keys.size()) seq_pos_ = 0;
      } else if (plan_->dist.kind == Distribution::Kind::kHotRange) {
        op->key = (*plan_->sorted_readable)[PickHotRangePos()];
      } else if (plan_->dist.kind == Distribution::Kind::kThreadRange) {
        op->key = (*plan_->sorted_readable)[PickThreadRangePos()];
      } else {
        op->key = ks.key(PickReadRank());
      }
      op->expect_present = true;
      if (type == OpType::kUpdate || type == OpType::kReadModifyWrite)
        op->value = ValueFor(op->key) + (++updates_);
      if (type == OpType::kScan) op->scan_len = w_->config().scan_len;
      break;
    }
  }
  ++block_pos_;
  ++done_;
  return true;
}

Result<std::vector<Op>> GenerateOps(const WorkloadConfig& cfg) {
  auto w = Workload::Make(cfg);
  if (!w.ok()) return w.status();
  std::shared_ptr<const Workload> wl = w.value();
  State s = wl->InitialState();
  std::vector<Op> ops;
  for (size_t p = 1; p <= wl->config().phases.size(); ++p) {
    auto plan = wl->Plan(s, p, 1, false);
    if (!plan.ok()) return plan.status();
    OpStream st(wl, plan.value(), 0);
    Op op;
    while (st.Next(&op)) ops.push_back(op);
    wl->Commit(&s, plan.value(), {&st});
  }
  return ops;
}

}  // namespace pmindex::workload
