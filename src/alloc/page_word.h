// The persisted page word: one uint64_t per 256 KiB page in
// Pool::page_table(), the ONLY persistent state of the allocator.
//
//   bits  0..7   kind tag: 0x00 free, 0xC1 class page, 0xC2 span head,
//                0xC3 span tail (any other tag is corruption)
//   bits  8..15  size class (class pages; 0 otherwise)
//   bits 16..31  NUMA node the page belongs to
//   bits 32..57  span head: length in pages (>= 1);
//                span tail: distance in pages back to its head (>= 1)
//                (a pool has fewer than 2^26 pages)
//   bits 58..63  check: the XOR of bits 0..57 taken 6 at a time, XOR
//                kCheckSalt (pool format version 2), so any one flipped
//                bit makes the word invalid
//
// A free page's word is exactly 0 (no check bits).
//
// Two copies (pool format version 2): the table is kept twice,
// Pool::page_table() (A) and Pool::page_table_mirror() (B), and every word
// is written with a pm::naw to A, then a pm::naw to B. Every change of a
// word goes from free to owned or from owned to free, so a crash between
// the two NAWs leaves one copy 0 and the other a valid owned word.
// Resolve() is the reader's rule: equal copies are the word; a valid copy
// beats an invalid one (damage, or a word that was never written half);
// of a 0 and a valid owned word the owned one wins (an interrupted take or
// give-back keeps the page owned, and recovery's reachability pass frees
// it if nothing uses it; a zeroed copy is repaired from the other); two
// different valid owned words are Corruption. The allocator rewrites both
// copies of every word that differed at the end of a successful recovery.
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
    const uint64_t w = uint64_t{tag} | uint64_t{size_class} << 8 | uint64_t{node} << 16 |
                       (uint64_t{span} & kSpanMask) << 32;
    return w | Check(w) << kCheckShift;
  }

  static constexpr int kCheckShift = 58;
  static constexpr uint64_t kSpanMask = (uint64_t{1} << 26) - 1;
  static constexpr uint64_t kCheckSalt = 0x2D;
  // The check bits of the word's bits 0..57.
  static constexpr uint64_t Check(uint64_t w) {
    uint64_t x = w & ((uint64_t{1} << kCheckShift) - 1), c = kCheckSalt;
    for (; x != 0; x >>= 6) c ^= x & 63;
    return c;
  }

  enum class Copies {
    kAgree,    // both copies hold *out (valid or not: Decode decides)
    kRepair,   // *out is the word; one copy differs and is to be rewritten
    kCorrupt,  // no copy can be trusted
  };
  // The reader's rule for a word's two copies (see the top of this file).
  static Copies Resolve(uint64_t a, uint64_t b, int num_classes, uint64_t* out) {
    if (a == b) {
      *out = a;
      return Copies::kAgree;
    }
    PageWord pw;
    const bool va = Decode(a, num_classes, &pw);
    const bool vb = Decode(b, num_classes, &pw);
    if (va && vb) {
      if (a != 0 && b != 0) return Copies::kCorrupt;
      *out = a != 0 ? a : b;
      return Copies::kRepair;
    }
    if (!va && !vb) return Copies::kCorrupt;
    *out = va ? a : b;
    return Copies::kRepair;
  }

  // Returns false iff w is not a well-formed word (unknown tag, stray bits,
  // class out of range, span of 0).
  static bool Decode(uint64_t w, int num_classes, PageWord* out) {
    PageWord p;
    uint8_t tag = static_cast<uint8_t>(w);
    p.size_class = static_cast<uint8_t>(w >> 8);
    p.node = static_cast<uint16_t>(w >> 16);
    p.span = static_cast<uint32_t>((w >> 32) & kSpanMask);
    if (tag != 0 && w >> kCheckShift != Check(w)) return false;
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
