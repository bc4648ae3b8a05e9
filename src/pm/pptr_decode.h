// The one decoder of persistent pointers read from PM (docs/pool-format.md
// "What open checks, in order").
//
// Every PPtr an index loads from a pool (root slots, hint blocks, split
// logs, child and next pointers walked at recovery) goes through Decode
// before it is turned into an address, so that a damaged word gives a
// Corruption that says what was loaded, the raw value and why it was
// refused, and is never dereferenced. The checks, in order, all on the
// raw value (nothing is read from the pool):
//   - null (0),
//   - pool id (top 16 bits) differs from the pool's,
//   - offset not a multiple of `align`,
//   - offset below the heap (the header and page table are never objects),
//   - [offset, offset + bytes) not inside the mapped pool (overflow-safe).
// DecodeOrNull accepts null (returns nullptr) and checks the rest.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "pm/pool.h"
#include "pmindex/status.h"

namespace pmindex::pm {

// Why a raw pointer was refused; kOk if it is good.
enum class PPtrFault { kOk, kNull, kForeignPool, kMisaligned, kBelowHeap, kPastEnd };

inline const char* PPtrFaultText(PPtrFault f) {
  switch (f) {
    case PPtrFault::kOk: return "ok";
    case PPtrFault::kNull: return "null";
    case PPtrFault::kForeignPool: return "foreign pool id";
    case PPtrFault::kMisaligned: return "misaligned";
    case PPtrFault::kBelowHeap: return "below the heap";
    case PPtrFault::kPastEnd: return "past the pool's end";
  }
  return "?";
}

// The checks alone (no message is built): for hot or speculative callers
// that only need a yes/no. `align` must be a power of two or 1.
inline PPtrFault CheckPPtr(const Pool& pool, uint64_t raw, uint64_t bytes, uint64_t align) {
  if (raw == 0) return PPtrFault::kNull;
  const PPtr p(raw);
  if (p.pool_id() != pool.id()) return PPtrFault::kForeignPool;
  const uint64_t off = p.offset();
  if (align > 1 && off % align != 0) return PPtrFault::kMisaligned;
  if (off < pool.heap_begin()) return PPtrFault::kBelowHeap;
  const uint64_t size = pool.size();
  // off + bytes <= size without overflow.
  if (off > size || bytes > size - off) return PPtrFault::kPastEnd;
  return PPtrFault::kOk;
}

inline std::string PPtrFaultMessage(std::string_view what, uint64_t raw, PPtrFault f,
                                    uint64_t bytes, uint64_t align) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(raw));
  std::string m(what);
  m += ": bad pointer ";
  m += hex;
  m += " (";
  m += PPtrFaultText(f);
  if (f == PPtrFault::kMisaligned) m += ", needs " + std::to_string(align) + "-byte alignment";
  if (f == PPtrFault::kPastEnd) m += ", " + std::to_string(bytes) + " bytes do not fit";
  m += ")";
  return m;
}

// Decodes `raw` into a T* to an object of `bytes` bytes aligned to `align`,
// or Corruption naming `what` (e.g. "lbtree: head leaf").
template <class T = void>
Result<T*> Decode(const Pool& pool, uint64_t raw, uint64_t bytes, uint64_t align,
                  std::string_view what) {
  const PPtrFault f = CheckPPtr(pool, raw, bytes, align);
  if (f != PPtrFault::kOk) return Status::Corruption(PPtrFaultMessage(what, raw, f, bytes, align));
  return reinterpret_cast<T*>(pool.base() + PPtr(raw).offset());
}

// As Decode, but null is allowed (gives nullptr).
template <class T = void>
Result<T*> DecodeOrNull(const Pool& pool, uint64_t raw, uint64_t bytes, uint64_t align,
                        std::string_view what) {
  if (raw == 0) return static_cast<T*>(nullptr);
  return Decode<T>(pool, raw, bytes, align, what);
}

}  // namespace pmindex::pm
