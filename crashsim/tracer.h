// The crash simulator's model of persistent memory (docs/crash-testing.md).
//
// CrashTracer observes every PM store, flush and fence of the traced
// library (pm::Tracer) inside one address range (a pool) and keeps, per
// 64-byte line:
//   - the persisted image: what PM holds for sure (persisted()),
//   - the stores to the line since then, in program order (pending),
//   - a flush mark: how many of those stores the latest flush covered.
// A fence makes every marked prefix durable (it moves into the persisted
// image); stores after the flush stay pending. At a crash, a line shows
// its persisted content plus some prefix of its pending stores (stores to
// one line persist in program order, lines are independent); Images()
// turns that into a finite, replayable set of crash images.
//
// Crash points: the tracer calls its Listener just before every fence takes
// effect; the driver adds one at the end of every operation (EndOpImages).
// In eADR mode flushes and fences do nothing; the crash images of an
// operation are the prefixes of its global store order (EadrImages).
//
// Mutation: a Mutation names one flush or fence call site; the tracer then
// models the program without it (drop), with its flush one line short, or
// with the flush moved after the first store that follows the next fence.
// The real instructions still run: only the model changes, which is all a
// crash image depends on.
//
// Bypass detection: the tracer mirrors what the logged stores say the live
// range holds (expected); FindBypassedLines() compares that with the live
// bytes, so a store that did not go through pm::store/copy/fill/naw shows
// up as a line nobody explained.
//
// Thread safety: all hooks take one mutex, so a multi-threaded recovery
// may run under the tracer (the model then follows the order in which
// stores reached the hooks).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pm/persist.h"

namespace pmindex::crash {

inline constexpr size_t kLine = pm::kCacheLine;
using LineBytes = std::array<uint8_t, kLine>;

enum class Mode : uint8_t { kPrefix, kLine, kEadr, kTear };
const char* ModeName(Mode m);
bool ParseMode(std::string_view s, Mode* out);

enum class MutKind : uint8_t { kNone, kDropFlush, kDropFence, kFlushShort, kFlushLate };
const char* MutKindName(MutKind k);

// One flush or fence call site, and what the run saw it do.
struct SiteInfo {
  bool fence = false;
  std::string file;      // relative to the source tree when possible
  uint32_t line = 0;
  uint32_t column = 0;
  std::string function;  // short name
  uint64_t calls = 0;
  uint64_t multi_line_calls = 0;  // flushes that covered two or more lines
  // Flushes whose mark was the one a fence made durable (a later flush of
  // the same line before the fence takes the credit instead); for fences,
  // fences that made at least one line durable.
  uint64_t effective = 0;
  uint64_t effective_last_line = 0;  // ... counting only the last line of a multi-line flush
  // "file:line:column", the identity mutation uses.
  std::string key() const;
  std::string Pretty() const;  // "file:line (function)"
};

struct Mutation {
  MutKind kind = MutKind::kNone;
  std::string site;  // SiteInfo::key()
  // "drop-flush@src/x.cc:10:3"; empty for kNone.
  std::string ToString() const;
  static bool Parse(std::string_view s, Mutation* out);
};

// One logged store, cut to one line.
struct Piece {
  uint64_t seq = 0;  // global program order
  uint8_t off = 0, len = 0;
  bool bypass = false;  // synthesized for a line changed outside the helpers
  LineBytes data{};     // data[0..len) are the stored bytes
};

// A finite set of crash images for one crash point, each buildable by
// number (the replay handle).
class ImageSet {
 public:
  size_t size() const { return choices_.size() + eadr_prefixes_.size(); }
  // The whole range as it would be found after the crash. If *out holds
  // an image this set built before, only the lines in play are rewritten.
  void Build(size_t i, std::vector<std::byte>* out) const;
  // The same into `out`, which must be image_size() bytes (memory the
  // caller keeps, e.g. shared with forked children).
  void Build(size_t i, std::span<std::byte> out) const;
  size_t image_size() const { return base_->size(); }
  // For verbose replay: which lines take which variant.
  std::string Describe(size_t i) const;
  size_t lines_in_play() const { return lines_.size(); }
  bool exhaustive() const { return exhaustive_; }
  // Keeps a private copy of the persisted image, so the set stays valid
  // after the tracer moves on (checks deferred to the end of the operation).
  // Only for a tracer no other thread fences on meanwhile; otherwise ask
  // Images/EadrImages for an owned base (taken under the tracer's lock).
  void OwnBase() {
    owned_base_ = std::make_shared<const std::vector<uint8_t>>(*base_);
    base_ = owned_base_.get();
  }
  uint64_t combinations() const { return combinations_; }  // saturating

 private:
  friend class CrashTracer;
  struct LineVariants {
    uint64_t line = 0;
    std::vector<LineBytes> contents;  // [0] = persisted content
  };
  const std::vector<uint8_t>* base_ = nullptr;  // persisted image
  std::shared_ptr<const std::vector<uint8_t>> owned_base_;
  std::vector<LineVariants> lines_;
  std::vector<std::vector<uint16_t>> choices_;
  // eADR: the first k pieces of ops_pieces_ applied on top of base_.
  std::vector<std::pair<uint64_t, Piece>> eadr_pieces_;  // (line, piece)
  std::vector<size_t> eadr_prefixes_;
  bool exhaustive_ = true;
  uint64_t combinations_ = 0;
  uint64_t id_ = NextId();  // which set last built an output buffer
  static uint64_t NextId();
  struct LastBuilt {
    const std::byte* out = nullptr;
    uint64_t set_id = 0;
  };
  static thread_local LastBuilt last_built_;
};

class CrashTracer final : public pm::Tracer {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // Just before a fence takes effect (not in eADR mode).
    virtual void OnCrashPoint(CrashTracer& t, const pm::Site& fence_site) = 0;
  };

  // Observes [base, base + size). `poison` is the byte fresh memory holds.
  CrashTracer(void* base, size_t size, Mode mode, Mutation mutation = {});

  void set_listener(Listener* l) { listener_ = l; }
  Mode mode() const { return mode_; }
  const Mutation& mutation() const { return mutation_; }
  // True once the mutated site has been called (its mutation changed the
  // model). Before that the model is the unmutated one, so a mutant run's
  // crash points up to there show exactly the baseline's images.
  bool mutation_reached() const {
    std::lock_guard<std::mutex> g(mu_);
    return mutation_reached_;
  }

  // pm::Tracer
  void OnStore(const void* addr, size_t n) override;
  void OnFlush(const void* addr, size_t n, const pm::Site& site) override;
  void OnFence(const pm::Site& site) override;

  // Crash images of the current state (prefix, line and tear modes):
  // exhaustive over the lines in play when their product is <= budget,
  // else a structured set plus seeded random samples, <= budget images.
  // own_base: the set keeps a copy of the persisted image taken under the
  // tracer's lock (as OwnBase), consistent with the lines in play even
  // while another thread's fence changes the model.
  ImageSet Images(uint64_t budget, uint64_t seed, bool own_base = false) const;
  // eADR: marks the start of an operation (everything before is durable).
  void BeginOp();
  // eADR: images after each proper prefix of the operation's stores
  // (`mid`), or the image after all of them (!mid). Sampled to budget.
  ImageSet EadrImages(bool mid, uint64_t budget, uint64_t seed, bool own_base = false) const;
  // eADR: the operation is over; its stores are durable.
  void EndOpEadr();

  // Lines whose live content the logged stores do not explain. Each is
  // then adopted as a pending (bypass) store so it is reported once.
  std::vector<uint64_t> FindBypassedLines();
  // Where the line was last flushed from ("" if never).
  std::string LastFlushSite(uint64_t line) const;

  // Changes whenever a store is logged or a fence makes something durable.
  uint64_t version() const { return version_; }
  uint64_t pending_lines() const { return dirty_.size(); }
  const std::vector<uint8_t>& persisted() const { return persisted_; }
  size_t size() const { return persisted_.size(); }
  const char* base() const { return base_; }

  // Every flush/fence site seen, by key.
  std::map<std::string, SiteInfo> Sites() const;

 private:
  struct LineState {
    std::vector<Piece> pending;
    size_t marked = 0;  // pending[0..marked) covered by the latest flush
    SiteInfo* mark_site = nullptr;
    bool mark_last_line = false;
    SiteInfo* last_flush_site = nullptr;
  };
  struct SiteKeyHash {
    size_t operator()(const std::tuple<const char*, uint32_t, uint32_t, bool>& k) const;
  };

  SiteInfo* Site(const pm::Site& s, bool fence);
  void StoreLocked(const char* p, size_t n, bool bypass);
  void FlushLocked(const char* p, size_t n, SiteInfo* site);
  void ApplyDeferredLocked();
  std::vector<LineBytes> VariantsOf(uint64_t line, const LineState& st) const;

  mutable std::mutex mu_;
  char* base_;
  Mode mode_;
  Mutation mutation_;
  bool mutation_reached_ = false;
  Listener* listener_ = nullptr;
  std::vector<uint8_t> persisted_;
  std::vector<uint8_t> expected_;
  std::unordered_map<uint64_t, LineState> dirty_;
  std::vector<uint64_t> marked_lines_;  // lines with a mark since the last fence
  std::unordered_map<uint64_t, SiteInfo*> last_flush_;  // line -> site
  uint64_t seq_ = 0;
  uint64_t version_ = 0;
  std::unordered_map<std::tuple<const char*, uint32_t, uint32_t, bool>, std::unique_ptr<SiteInfo>,
                     SiteKeyHash>
      sites_;
  // kFlushLate: flushes held back until the first store after the next fence.
  struct Deferred {
    const char* p;
    size_t n;
    SiteInfo* site;
  };
  std::vector<Deferred> deferred_;
  bool deferred_fenced_ = false;
  // eADR: the operation's stores, in order.
  std::vector<std::pair<uint64_t, Piece>> op_log_;
};

// Applies piece to a line's content.
void ApplyPiece(LineBytes& line, const Piece& p);
// Strips the source-tree prefix from a compiler file name.
std::string RelativeSourcePath(std::string_view file);

}  // namespace pmindex::crash
