// The seed of a randomized test, read from the environment in one place.
//
//   PMINDEX_SEED=<n>   replay one seed (decimal, or 0x... hex); a value
//                      that is not a whole number is reported on stderr
//                      and ignored
//
// A randomized test takes TestSeed() (a fresh seed unless PMINDEX_SEED is
// set), or TestSeed(fixed) where the test runs one known seed by default,
// and names it in every failure message: either `SeedScope seed;`, which
// picks the seed and adds the trace, or PMINDEX_SEED_TRACE(seed) for a
// seed picked otherwise.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>

namespace pmindex::testing {

// PMINDEX_SEED, when it is set to a whole number.
inline std::optional<uint64_t> EnvSeed() {
  const char* s = std::getenv("PMINDEX_SEED");
  if (s == nullptr || *s == '\0') return std::nullopt;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s, &end, 0);
  if (end == s || *end != '\0') {
    std::fprintf(stderr, "PMINDEX_SEED='%s' is not a number; ignoring it\n", s);
    return std::nullopt;
  }
  return v;
}

// A fresh seed below 2^53 (exact as a double, so any tool prints it whole).
inline uint64_t FreshSeed() {
  std::random_device rd;
  const uint64_t t =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return ((uint64_t{rd()} << 32) ^ rd() ^ t) & ((uint64_t{1} << 53) - 1);
}

// PMINDEX_SEED when set, else a fresh seed.
inline uint64_t TestSeed() {
  if (auto s = EnvSeed()) return *s;
  return FreshSeed();
}

// PMINDEX_SEED when set, else `fallback` (tests that run one fixed seed).
inline uint64_t TestSeed(uint64_t fallback) { return EnvSeed().value_or(fallback); }

// "seed=<n> (replay: PMINDEX_SEED=<n>)".
inline std::string SeedNote(uint64_t seed) {
  return "seed=" + std::to_string(seed) + " (replay: PMINDEX_SEED=" + std::to_string(seed) + ")";
}

// Adds SeedNote(seed) to every failure message of the enclosing scope.
#define PMINDEX_SEED_TRACE(seed) SCOPED_TRACE(::pmindex::testing::SeedNote(seed))

// The seed of the current test (TestSeed()), named in every failure
// message while the scope lasts.
class SeedScope {
 public:
  SeedScope() : seed_(TestSeed()), trace_(__FILE__, __LINE__, SeedNote(seed_)) {}
  uint64_t value() const { return seed_; }
  operator uint64_t() const { return seed_; }  // NOLINT(implicit)

 private:
  uint64_t seed_;
  ::testing::ScopedTrace trace_;
};

}  // namespace pmindex::testing
