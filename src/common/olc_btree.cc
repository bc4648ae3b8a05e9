#include "common/olc_btree.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>

namespace pmindex::olc_detail {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;

// Maps `size` bytes; sizes that are multiples of 2 MiB come back 2 MiB
// aligned (over-map, then trim) and advised as transparent huge pages.
char* MapChunk(size_t size) {
  bool huge = size % kHugePage == 0;
  size_t span = huge ? size + kHugePage : size;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  PMINDEX_CHECK(p != MAP_FAILED, "OlcBTree: out of memory for tree nodes (%zu bytes)", span);
  char* base = static_cast<char*>(p);
  if (huge) {
    uintptr_t addr = reinterpret_cast<uintptr_t>(base);
    uintptr_t aligned = (addr + kHugePage - 1) & ~(kHugePage - 1);
    size_t head = aligned - addr;
    if (head > 0) munmap(base, head);
    size_t tail = span - head - size;
    if (tail > 0) munmap(reinterpret_cast<char*>(aligned) + size, tail);
    base = reinterpret_cast<char*>(aligned);
#ifdef MADV_HUGEPAGE
    madvise(base, size, MADV_HUGEPAGE);  // a hint; failure only costs speed
#endif
  }
  return base;
}
}  // namespace

void* NodeArena::Allocate(size_t bytes) {
  bytes = (bytes + 63) & ~size_t{63};
  sync::MutexLock g(mu_);
  if (left_ < bytes) NewChunk(bytes);
  void* p = cur_;
  cur_ += bytes;
  left_ -= bytes;
  return p;
}

void NodeArena::NewChunk(size_t min_bytes) {
  size_t size = next_size_;
  while (size < min_bytes) size *= 2;
  if (size >= kHugePage) size = (size + kHugePage - 1) & ~(kHugePage - 1);
  if (next_size_ < kHugePage) next_size_ *= 2;
  cur_ = MapChunk(size);
  left_ = size;
  chunks_.push_back({cur_, size});
  mapped_.fetch_add(size, std::memory_order_relaxed);
}

void NodeArena::Release() {
  sync::MutexLock g(mu_);
  for (const Chunk& c : chunks_) munmap(c.base, c.size);
  chunks_.clear();
  cur_ = nullptr;
  left_ = 0;
  next_size_ = 64 << 10;
  mapped_.store(0, std::memory_order_relaxed);
}

}  // namespace pmindex::olc_detail
