// The persisted page word: one uint64_t per 256 KiB page in
// Pool::page_table(), the ONLY persistent state of the allocator.
//
//   bits  0..7   kind tag: 0x00 free, 0xC1 class page, 0xC2 span head,
//                0xC3 span tail (any other tag is corruption)
//   bits  8..15  size class (class pages; 0 otherwise)
//   bits 16..31  NUMA node the page belongs to
//   bits 32..63  span head: length in pages (>= 1);
//                span tail: distance in pages back to its head (>= 1)
//
// A free page's word is exactly 0. Each word is written with one pm::naw.
// Spans: taking writes the tails first, then the head; giving back clears
// the head first, then the tails. The head is therefore the commit point:
// a tail whose head does not cover it is an orphan left by a crash and is
// freed by recovery, while a head always has all of its tails.
#pragma once

#include <cstdint>

namespace pmindex::alloc {

enum class PageKind : uint8_t { kFree = 0, kClass = 1, kSpanHead = 2, kSpanTail = 3 };

struct PageWord {
  PageKind kind = PageKind::kFree;
  uint8_t size_class = 0;
  uint16_t node = 0;
  uint32_t span = 0;  // head: length in pages; tail: distance to the head

  static constexpr uint8_t kTagClass = 0xC1;
  static constexpr uint8_t kTagHead = 0xC2;
  static constexpr uint8_t kTagTail = 0xC3;

  uint64_t Encode() const {
    uint8_t tag = 0;
    switch (kind) {
      case PageKind::kFree:
        return 0;
      case PageKind::kClass:
        tag = kTagClass;
        break;
      case PageKind::kSpanHead:
        tag = kTagHead;
        break;
      case PageKind::kSpanTail:
        tag = kTagTail;
        break;
    }
    return uint64_t{tag} | uint64_t{size_class} << 8 | uint64_t{node} << 16 | uint64_t{span} << 32;
  }

  // Returns false iff w is not a well-formed word (unknown tag, stray bits,
  // class out of range, span of 0).
  static bool Decode(uint64_t w, int num_classes, PageWord* out) {
    PageWord p;
    uint8_t tag = static_cast<uint8_t>(w);
    p.size_class = static_cast<uint8_t>(w >> 8);
    p.node = static_cast<uint16_t>(w >> 16);
    p.span = static_cast<uint32_t>(w >> 32);
    switch (tag) {
      case 0:
        if (w != 0) return false;
        p.kind = PageKind::kFree;
        break;
      case kTagClass:
        if (p.size_class >= num_classes || p.span != 0) return false;
        p.kind = PageKind::kClass;
        break;
      case kTagHead:
      case kTagTail:
        if (p.size_class != 0 || p.span == 0) return false;
        p.kind = tag == kTagHead ? PageKind::kSpanHead : PageKind::kSpanTail;
        break;
      default:
        return false;
    }
    *out = p;
    return true;
  }
};

}  // namespace pmindex::alloc
