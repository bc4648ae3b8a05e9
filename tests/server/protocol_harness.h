// Drives one Protocol as a connection would (a buffer of unconsumed
// input), over a MapStore and a clock the test sets; and checks that a
// byte stream gives the same replies however it is cut into reads.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "server/items.h"
#include "server/protocol.h"
#include "tests/server/map_store.h"

namespace pmindex::server::testing {

inline constexpr int64_t kStartMs = 1'700'000'000'000;  // a unix time in ms

template <class P>
class Harness {
 public:
  // `extra` is passed to P's constructor after the items.
  template <class... Extra>
  explicit Harness(size_t max_value_bytes = size_t{1} << 20, Extra&&... extra)
      : store(max_value_bytes),
        items(store, stats, [this] { return now_ms; }),
        protocol(items, std::forward<Extra>(extra)...) {}

  // Appends `bytes` to the connection's input and returns the replies
  // they complete. As the server's session: after replies, Consume runs
  // again (requests left by the reply budget), until it has none.
  std::string Feed(std::string_view bytes) {
    buffer_.append(bytes);
    std::string all;
    for (;;) {
      std::string out;
      const size_t used = protocol.Consume(buffer_, &out);
      EXPECT_LE(used, buffer_.size());
      buffer_.erase(0, used);
      if (out.empty()) return all;
      EXPECT_LT(out.size(), kReplyBudgetBytes + kMaxMultiReplyBytes + kMaxLineBytes);
      all += out;
    }
  }
  size_t pending() const { return buffer_.size(); }

  int64_t now_ms = kStartMs;
  MapStore store;
  Stats stats;
  Items items;
  P protocol;

 private:
  std::string buffer_;
};

// Feeds `script` whole, then cut in two at every position, then one byte
// at a time, each into a fresh harness; every run must reply `expected`
// and end with close_requested() == `closes`.
template <class P>
void ExpectSameForEverySplit(std::string_view script, std::string_view expected,
                             bool closes = false, size_t max_value_bytes = size_t{1} << 20) {
  {
    Harness<P> h(max_value_bytes);
    EXPECT_EQ(h.Feed(script), expected);
    EXPECT_EQ(h.protocol.close_requested(), closes);
  }
  for (size_t cut = 0; cut <= script.size(); ++cut) {
    Harness<P> h(max_value_bytes);
    std::string out = h.Feed(script.substr(0, cut));
    out += h.Feed(script.substr(cut));
    ASSERT_EQ(out, expected) << "cut at byte " << cut;
    ASSERT_EQ(h.protocol.close_requested(), closes) << "cut at byte " << cut;
  }
  Harness<P> h(max_value_bytes);
  std::string out;
  for (char c : script) out += h.Feed(std::string_view(&c, 1));
  EXPECT_EQ(out, expected) << "one byte at a time";
}

}  // namespace pmindex::server::testing
