// Insertion sort for the few dozen entries of one leaf (faster than
// std::sort at this size, and free of GCC 12's -Warray-bounds false
// positives on small fixed arrays).
#pragma once

#include <cstddef>

namespace pmindex::common {

// Sorts a[0..n) ascending by key(a[i]).
template <class T, class KeyFn>
inline void SmallSort(T* a, int n, KeyFn key) {
  for (int i = 1; i < n; ++i) {
    T x = a[i];
    int j = i - 1;
    while (j >= 0 && key(a[j]) > key(x)) {
      a[j + 1] = a[j];
      --j;
    }
    a[j + 1] = x;
  }
}

}  // namespace pmindex::common
