// NV-Tree leaf node (LN): the only persistent, crash-consistent part of the
// tree (docs/layout/nvtree.md).
//
// An LN is an unsorted, append-only array of 16-byte LN_elements. Element
// i is POSITIVE (a key/value pair) or NEGATIVE (it cancels the most recent
// POSITIVE element of the same key) according to bit i of flags[]. An
// element becomes visible only when nElement covers it, and nElement is
// raised by one aligned 8-byte store after the element has been flushed
// and fenced (Algorithm 2 of the paper).
//
// Layout (size bytes, a multiple of 64 in [kMinBytes, kMaxBytes]):
//
//   line 0   [ 0, 8)   nElement   visible elements (the publication word)
//            [ 8,16)   next       PPtr raw of the right sibling, 0 = none
//            [16,24)   low        lower fence key: every key in this LN is
//                                 >= low and < the right sibling's low
//            [24,32)   meta       (kMagic << 32) | size in bytes
//            [32,64)   flags[4]   bit i set = element i is NEGATIVE
//   line 1.. [64, size) elements: {key, value} x capacity
//
// Immutable after the LN is linked: next is the only field of line 0 that
// changes besides nElement/flags (it is rewritten when the right sibling is
// replaced), low and meta never change. Elements below nElement never
// change. The flag bit of slot nElement is written in the same cache line
// as nElement and before it, so it persists no later than nElement (same
// line, program order).
//
// Concurrency: appends happen under the owner's lock; readers load
// nElement (acquire) and read only elements below it, which never change.
// The flag words are written while readers read other bits of the same
// word, so flags are accessed atomically.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "pm/persist.h"
#include "index/index.h"

namespace pmindex::nvtree {

struct LnElement {
  Key key;
  Value value;
};
static_assert(sizeof(LnElement) == 16);

struct alignas(64) Ln {
  static constexpr uint32_t kMagic = 0x4E564C4E;  // "NVLN"
  static constexpr uint32_t kHeaderBytes = 64;
  static constexpr uint32_t kMaxElements = 256;  // bits in flags[]
  static constexpr uint32_t kMinBytes = 128;     // 4 elements (tests)
  static constexpr uint32_t kMaxBytes = kHeaderBytes + kMaxElements * sizeof(LnElement);

  uint64_t n_element;
  uint64_t next;
  Key low;
  uint64_t meta;
  uint64_t flags[4];
  LnElement elems[1];  // really capacity() elements

  static constexpr uint32_t CapacityFor(uint32_t bytes) {
    return (bytes - kHeaderBytes) / static_cast<uint32_t>(sizeof(LnElement));
  }
  static constexpr bool ValidSize(uint32_t bytes) {
    return bytes % 64 == 0 && bytes >= kMinBytes && bytes <= kMaxBytes;
  }
  uint32_t size_bytes() const { return static_cast<uint32_t>(Load(meta)); }
  uint32_t capacity() const { return CapacityFor(size_bytes()); }
  bool meta_ok() const {
    uint64_t m = Load(meta);
    return (m >> 32) == kMagic && ValidSize(static_cast<uint32_t>(m));
  }

  uint64_t count_acquire() const {
    return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(n_element))
        .load(std::memory_order_acquire);
  }
  uint64_t next_raw() const { return Load(next); }
  bool negative(uint64_t i) const { return (Load(flags[i / 64]) >> (i % 64)) & 1; }

  template <class T>
  static T Load(const T& f) {
    return std::atomic_ref<T>(const_cast<T&>(f)).load(std::memory_order_relaxed);
  }
};
static_assert(offsetof(Ln, n_element) == 0);
static_assert(offsetof(Ln, next) == 8);
static_assert(offsetof(Ln, low) == 16);
static_assert(offsetof(Ln, meta) == 24);
static_assert(offsetof(Ln, flags) == 32);
static_assert(offsetof(Ln, elems) == Ln::kHeaderBytes);
static_assert(alignof(Ln) == 64);
static_assert(Ln::kMaxBytes == 4160);

// The newest element of `k` among the first n decides: POSITIVE = present
// with its value, NEGATIVE = absent. Scans backwards so it stops early.
inline std::optional<Value> LnFind(const Ln* ln, uint64_t n, Key k) {
  pm::ModelRead(ln, Ln::kHeaderBytes + n * sizeof(LnElement));
  for (uint64_t i = n; i-- > 0;) {
    if (Ln::Load(ln->elems[i].key) == k) {
      if (ln->negative(i)) return std::nullopt;
      return Ln::Load(ln->elems[i].value);
    }
  }
  return std::nullopt;
}

// The live pairs among the first n elements, sorted by key.
inline void LnLive(const Ln* ln, uint64_t n, std::vector<KV>* out) {
  out->clear();
  // Newest element per key wins: walk backwards, remember the keys seen.
  std::vector<std::pair<Key, uint32_t>> idx;
  idx.reserve(n);
  for (uint64_t i = 0; i < n; ++i) idx.push_back({Ln::Load(ln->elems[i].key), static_cast<uint32_t>(i)});
  std::stable_sort(idx.begin(), idx.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t j = 0; j < idx.size(); ++j) {
    if (j + 1 < idx.size() && idx[j + 1].first == idx[j].first) continue;  // older
    uint32_t i = idx[j].second;
    if (!ln->negative(i)) out->push_back({idx[j].first, Ln::Load(ln->elems[i].value)});
  }
}

// Initializes a fresh (unlinked) LN with sorted live pairs and flushes it
// (REQUIRES: the caller fences before linking it). The LN is published later by
// the caller's single atomic pointer write.
inline void LnInit(Ln* ln, uint32_t bytes, Key low, uint64_t next, const KV* kv, size_t n) {
  pm::store(&ln->n_element, static_cast<uint64_t>(n));
  pm::store(&ln->next, next);
  pm::store(&ln->low, low);
  pm::store(&ln->meta, (uint64_t{Ln::kMagic} << 32) | bytes);
  pm::fill(ln->flags, 0, sizeof(ln->flags));
  for (size_t i = 0; i < n; ++i) pm::store(&ln->elems[i], LnElement{kv[i].key, kv[i].value});
  // The whole used prefix must be durable before the pointer that links
  // this LN is written, or a crash could expose an LN with garbage. The
  // caller fences once for all LNs it initializes.
  pm::flush(ln, Ln::kHeaderBytes + n * sizeof(LnElement));
}

// Appends up to two elements (an update appends NEGATIVE + POSITIVE) and
// makes them visible together. REQUIRES: caller holds the LN's lock and
// n_element + cnt <= capacity().
inline void LnAppend(Ln* ln, const LnElement* e, const bool* neg, int cnt) {
  uint64_t n = Ln::Load(ln->n_element);
  for (int j = 0; j < cnt; ++j) {
    uint64_t i = n + j;
    pm::store(&ln->elems[i], e[j]);
    uint64_t w = Ln::Load(ln->flags[i / 64]);
    uint64_t bit = uint64_t{1} << (i % 64);
    // Always rewrite the bit: a crash may have left a stale bit for a slot
    // that was never made visible.
    pm::store(&ln->flags[i / 64], neg[j] ? (w | bit) : (w & ~bit));
  }
  // Elements first: they must be durable before nElement can cover them.
  // The flag bits share line 0 with nElement and were stored before it, so
  // they need no separate ordering.
  pm::flush(&ln->elems[n], cnt * sizeof(LnElement));
  pm::fence();
  pm::store(&ln->n_element, n + cnt, std::memory_order_release);
  // nElement durable before the operation reports success.
  pm::flush(&ln->n_element, sizeof(uint64_t));
  pm::fence();
}

}  // namespace pmindex::nvtree
