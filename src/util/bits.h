// Iterating over the set bits of a word, lowest first:
//   for (int s : SetBits(bitmap)) ...
// The PM leaves keep one bit per valid slot; every scan of their valid
// slots is this loop.
#pragma once

#include <cstdint>

namespace pmindex {

class SetBits {
 public:
  explicit constexpr SetBits(uint64_t mask) : mask_(mask) {}

  class Iterator {
   public:
    explicit constexpr Iterator(uint64_t rest) : rest_(rest) {}
    constexpr int operator*() const { return __builtin_ctzll(rest_); }
    constexpr Iterator& operator++() {
      rest_ &= rest_ - 1;  // drop the lowest set bit
      return *this;
    }
    constexpr bool operator!=(const Iterator& o) const { return rest_ != o.rest_; }

   private:
    uint64_t rest_;
  };

  constexpr Iterator begin() const { return Iterator(mask_); }
  constexpr Iterator end() const { return Iterator(0); }

 private:
  uint64_t mask_;
};

}  // namespace pmindex
