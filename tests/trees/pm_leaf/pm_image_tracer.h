// Test helper for the PM-leaf tree unit tests (lbtree, fptree, wbtree): a
// pm::Tracer that keeps the image of what flush + fence made durable in one
// memory range (a line is copied when its flush runs and committed at the
// next fence). check_ runs on the image just before every fence, i.e. at
// every crash point where only flushed-and-fenced data survived. Dirty
// lines that were never flushed count as lost; the crash simulator
// (pmcrash) adds early evictions and store prefixes.
#pragma once

#include <cstdint>
#include <functional>
#include <new>
#include <utility>
#include <vector>

#include "pm/persist.h"

namespace pmindex::testing_util {

// Images are read through leaf structs that require 256-byte alignment.
template <class T>
struct Align256 {
  using value_type = T;
  Align256() = default;
  template <class U>
  Align256(const Align256<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{256}));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{256}); }
  friend bool operator==(const Align256&, const Align256&) { return true; }
};
using Image = std::vector<char, Align256<char>>;

class ImageTracer : public pm::Tracer {
 public:
  ImageTracer(const char* base, size_t n) : image_(base, base + n), base_(base), n_(n) {}
  void OnStore(const void*, size_t) override {}
  void OnFlush(const void* addr, size_t n, const pm::Site&) override {
    auto a = reinterpret_cast<uintptr_t>(addr) & ~uintptr_t{63};
    for (; a < reinterpret_cast<uintptr_t>(addr) + n; a += 64) {
      if (a < reinterpret_cast<uintptr_t>(base_)) continue;
      size_t off = a - reinterpret_cast<uintptr_t>(base_);
      if (off >= n_) continue;
      pending_.push_back({off, std::vector<char>(base_ + off, base_ + off + 64)});
    }
  }
  void OnFence(const pm::Site&) override {
    if (check_) check_(image_);
    for (auto& [off, bytes] : pending_) std::copy(bytes.begin(), bytes.end(), image_.begin() + off);
    pending_.clear();
  }
  std::function<void(const Image&)> check_;
  Image image_;

 private:
  const char* base_;
  std::vector<std::pair<size_t, std::vector<char>>> pending_;
  size_t n_;
};

}  // namespace pmindex::testing_util
