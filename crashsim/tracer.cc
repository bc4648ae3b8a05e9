#include "tracer.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <set>
#include <sstream>

#include "util/check.h"

namespace pmindex::crash {

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kPrefix: return "prefix";
    case Mode::kLine: return "line";
    case Mode::kEadr: return "eadr";
    case Mode::kTear: return "tear";
  }
  return "?";
}

bool ParseMode(std::string_view s, Mode* out) {
  for (Mode m : {Mode::kPrefix, Mode::kLine, Mode::kEadr, Mode::kTear}) {
    if (s == ModeName(m)) {
      *out = m;
      return true;
    }
  }
  return false;
}

const char* MutKindName(MutKind k) {
  switch (k) {
    case MutKind::kNone: return "none";
    case MutKind::kDropFlush: return "drop-flush";
    case MutKind::kDropFence: return "drop-fence";
    case MutKind::kFlushShort: return "flush-short";
    case MutKind::kFlushLate: return "flush-late";
  }
  return "?";
}

std::string Mutation::ToString() const {
  if (kind == MutKind::kNone) return "";
  return std::string(MutKindName(kind)) + "@" + site;
}

bool Mutation::Parse(std::string_view s, Mutation* out) {
  size_t at = s.find('@');
  if (at == std::string_view::npos || at + 1 == s.size()) return false;
  std::string_view k = s.substr(0, at);
  for (MutKind m : {MutKind::kDropFlush, MutKind::kDropFence, MutKind::kFlushShort,
                    MutKind::kFlushLate}) {
    if (k == MutKindName(m)) {
      out->kind = m;
      out->site = std::string(s.substr(at + 1));
      return true;
    }
  }
  return false;
}

std::string RelativeSourcePath(std::string_view file) {
#ifdef PMCRASH_SOURCE_DIR
  std::string_view root = PMCRASH_SOURCE_DIR;
  if (file.substr(0, root.size()) == root) return std::string(file.substr(root.size()));
#endif
  // Fall back to the last well-known top-level folder.
  for (std::string_view top : {"/src/", "/crashsim/", "/tests/"}) {
    size_t p = file.rfind(top);
    if (p != std::string_view::npos) return std::string(file.substr(p + 1));
  }
  return std::string(file);
}

namespace {
std::string ShortFunction(std::string_view f) {
  size_t paren = f.find('(');
  std::string_view head = f.substr(0, paren);
  size_t sp = head.rfind(' ');
  if (sp != std::string_view::npos) head = head.substr(sp + 1);
  return std::string(head);
}
}  // namespace

std::string SiteInfo::key() const {
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::string SiteInfo::Pretty() const {
  return std::string(fence ? "fence " : "flush ") + file + ":" + std::to_string(line) + " (" +
         function + ")";
}

void ApplyPiece(LineBytes& line, const Piece& p) {
  std::memcpy(line.data() + p.off, p.data.data() + p.off, p.len);
}

// ------------------------------------------------------------- ImageSet

uint64_t ImageSet::NextId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}
thread_local ImageSet::LastBuilt ImageSet::last_built_;

void ImageSet::Build(size_t i, std::vector<std::byte>* out) const {
  if (out->size() != base_->size()) {
    out->resize(base_->size());
    last_built_ = {};  // a resize may keep the address, never the image
  }
  Build(i, std::span<std::byte>(*out));
}

void ImageSet::Build(size_t i, std::span<std::byte> image) const {
  PMINDEX_CHECK(i < size(), "pmcrash: image %zu of %zu", i, size());
  PMINDEX_CHECK(image.size() == base_->size(), "pmcrash: image buffer of %zu bytes for %zu",
                image.size(), base_->size());
  std::byte* out = image.data();
  const bool patch = last_built_.out == out && last_built_.set_id == id_;
  if (!patch) {
    std::memcpy(out, base_->data(), base_->size());
    last_built_ = {out, id_};
  }
  if (!eadr_prefixes_.empty()) {
    if (patch) {
      // Undo the previous prefix: the lines the operation touched go back
      // to the base.
      for (const auto& [line, piece] : eadr_pieces_) {
        std::memcpy(out + line * kLine, base_->data() + line * kLine, kLine);
      }
    }
    size_t k = eadr_prefixes_[i];
    for (size_t j = 0; j < k; ++j) {
      const auto& [line, piece] = eadr_pieces_[j];
      std::memcpy(out + line * kLine + piece.off, piece.data.data() + piece.off, piece.len);
    }
    return;
  }
  const auto& choice = choices_[i];
  for (size_t l = 0; l < lines_.size(); ++l) {
    std::memcpy(out + lines_[l].line * kLine, lines_[l].contents[choice[l]].data(), kLine);
  }
}

std::string ImageSet::Describe(size_t i) const {
  std::ostringstream os;
  if (!eadr_prefixes_.empty()) {
    os << "first " << eadr_prefixes_[i] << " of " << eadr_pieces_.size()
       << " stores of the operation";
    return os.str();
  }
  os << lines_.size() << " line(s) in play";
  for (size_t l = 0; l < lines_.size(); ++l) {
    os << (l == 0 ? ": " : ", ") << "+0x" << std::hex << lines_[l].line * kLine << std::dec
       << " variant " << choices_[i][l] << "/" << lines_[l].contents.size() - 1;
  }
  return os.str();
}

// ---------------------------------------------------------- CrashTracer

size_t CrashTracer::SiteKeyHash::operator()(
    const std::tuple<const char*, uint32_t, uint32_t, bool>& k) const {
  return std::hash<const void*>()(std::get<0>(k)) ^ (size_t{std::get<1>(k)} << 20) ^
         (size_t{std::get<2>(k)} << 4) ^ size_t{std::get<3>(k)};
}

CrashTracer::CrashTracer(void* base, size_t size, Mode mode, Mutation mutation)
    : base_(static_cast<char*>(base)), mode_(mode), mutation_(std::move(mutation)) {
  PMINDEX_CHECK(reinterpret_cast<uintptr_t>(base) % kLine == 0, "pmcrash: traced range not line-aligned");
  PMINDEX_CHECK(size % kLine == 0, "pmcrash: traced size %zu not a multiple of a line", size);
  persisted_.assign(base_, base_ + size);
  expected_ = persisted_;
}

SiteInfo* CrashTracer::Site(const pm::Site& s, bool fence) {
  auto key = std::make_tuple(s.file_name(), s.line(), s.column(), fence);
  auto it = sites_.find(key);
  if (it != sites_.end()) return it->second.get();
  auto info = std::make_unique<SiteInfo>();
  info->fence = fence;
  info->file = RelativeSourcePath(s.file_name());
  info->line = s.line();
  info->column = s.column();
  info->function = ShortFunction(s.function_name());
  SiteInfo* raw = info.get();
  sites_.emplace(key, std::move(info));
  return raw;
}

void CrashTracer::OnStore(const void* addr, size_t n) {
  std::lock_guard<std::mutex> g(mu_);
  StoreLocked(static_cast<const char*>(addr), n, false);
  if (!deferred_.empty() && deferred_fenced_) ApplyDeferredLocked();
}

void CrashTracer::StoreLocked(const char* p, size_t n, bool bypass) {
  if (n == 0 || p < base_ || p >= base_ + persisted_.size()) return;
  size_t begin = p - base_;
  size_t end = std::min(begin + n, persisted_.size());
  ++version_;
  for (size_t a = begin; a < end;) {
    uint64_t line = a / kLine;
    size_t line_end = std::min(end, (line + 1) * kLine);
    Piece piece;
    piece.seq = seq_++;
    piece.off = static_cast<uint8_t>(a - line * kLine);
    piece.len = static_cast<uint8_t>(line_end - a);
    piece.bypass = bypass;
    std::memcpy(piece.data.data() + piece.off, base_ + a, piece.len);
    std::memcpy(expected_.data() + a, base_ + a, piece.len);
    if (mode_ == Mode::kEadr) {
      op_log_.emplace_back(line, piece);
    } else {
      dirty_[line].pending.push_back(piece);
    }
    a = line_end;
  }
}

void CrashTracer::OnFlush(const void* addr, size_t n, const pm::Site& site) {
  std::lock_guard<std::mutex> g(mu_);
  SiteInfo* s = Site(site, false);
  ++s->calls;
  const char* p = static_cast<const char*>(addr);
  if (n == 0) return;
  uintptr_t first = reinterpret_cast<uintptr_t>(p) / kLine;
  uintptr_t last = (reinterpret_cast<uintptr_t>(p) + n - 1) / kLine;
  if (last > first) ++s->multi_line_calls;
  if (mode_ == Mode::kEadr) return;
  if (mutation_.kind != MutKind::kNone && mutation_.kind != MutKind::kDropFence &&
      mutation_.site == s->key()) {
    mutation_reached_ = true;
    switch (mutation_.kind) {
      case MutKind::kDropFlush:
        return;
      case MutKind::kFlushShort: {
        // Leave out the last line the flush covers.
        if (last == first) return;
        n = (last * kLine) - reinterpret_cast<uintptr_t>(p);
        break;
      }
      case MutKind::kFlushLate:
        deferred_.push_back({p, n, s});
        deferred_fenced_ = false;
        return;
      default:
        break;
    }
  }
  FlushLocked(p, n, s);
}

void CrashTracer::FlushLocked(const char* p, size_t n, SiteInfo* site) {
  const char* end = p + n;
  const char* lo = std::max<const char*>(p, base_);
  const char* hi = std::min<const char*>(end, base_ + persisted_.size());
  if (lo >= hi) return;
  uint64_t first = (lo - base_) / kLine;
  uint64_t last = (hi - base_ - 1) / kLine;
  uint64_t flush_last = (reinterpret_cast<uintptr_t>(end - 1) - reinterpret_cast<uintptr_t>(base_)) / kLine;
  bool multi = (reinterpret_cast<uintptr_t>(end - 1) / kLine) != (reinterpret_cast<uintptr_t>(p) / kLine);
  for (uint64_t line = first; line <= last; ++line) {
    last_flush_[line] = site;
    auto it = dirty_.find(line);
    if (it == dirty_.end()) continue;
    LineState& st = it->second;
    if (st.pending.size() == st.marked) continue;  // nothing new to cover
    if (st.marked == 0 && st.mark_site == nullptr) marked_lines_.push_back(line);
    st.marked = st.pending.size();
    st.mark_site = site;
    st.mark_last_line = multi && line == flush_last;
  }
}

void CrashTracer::ApplyDeferredLocked() {
  std::vector<Deferred> d;
  d.swap(deferred_);
  for (const Deferred& f : d) FlushLocked(f.p, f.n, f.site);
}

void CrashTracer::OnFence(const pm::Site& site) {
  Listener* listener = nullptr;
  {
    std::lock_guard<std::mutex> g(mu_);
    SiteInfo* s = Site(site, true);
    ++s->calls;
    if (mode_ == Mode::kEadr) return;
    if (mutation_.kind == MutKind::kDropFence && mutation_.site == s->key()) {
      mutation_reached_ = true;
      return;
    }
    listener = listener_;
  }
  // The crash point sees the state before the fence takes effect.
  if (listener != nullptr) listener->OnCrashPoint(*this, site);
  std::lock_guard<std::mutex> g(mu_);
  SiteInfo* s = Site(site, true);
  bool any = false;
  for (uint64_t line : marked_lines_) {
    auto it = dirty_.find(line);
    if (it == dirty_.end()) continue;
    LineState& st = it->second;
    if (st.marked == 0) continue;
    LineBytes content;
    std::memcpy(content.data(), persisted_.data() + line * kLine, kLine);
    for (size_t i = 0; i < st.marked; ++i) ApplyPiece(content, st.pending[i]);
    std::memcpy(persisted_.data() + line * kLine, content.data(), kLine);
    st.pending.erase(st.pending.begin(), st.pending.begin() + st.marked);
    if (st.mark_site != nullptr) {
      ++st.mark_site->effective;
      if (st.mark_last_line) ++st.mark_site->effective_last_line;
    }
    st.marked = 0;
    st.mark_site = nullptr;
    st.mark_last_line = false;
    any = true;
    if (st.pending.empty()) dirty_.erase(it);
  }
  marked_lines_.clear();
  if (any) {
    ++s->effective;
    ++version_;
  }
  if (!deferred_.empty()) deferred_fenced_ = true;
}

std::vector<LineBytes> CrashTracer::VariantsOf(uint64_t line, const LineState& st) const {
  std::vector<LineBytes> out;
  LineBytes cur;
  std::memcpy(cur.data(), persisted_.data() + line * kLine, kLine);
  out.push_back(cur);
  auto add = [&out](const LineBytes& b) {
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  };
  if (mode_ == Mode::kLine) {
    for (const Piece& p : st.pending) ApplyPiece(cur, p);
    add(cur);
    return out;
  }
  for (const Piece& p : st.pending) {
    if (mode_ == Mode::kTear) {
      // The 8-byte aligned chunks of a wider store persist independently.
      std::vector<std::pair<uint8_t, uint8_t>> chunks;
      for (unsigned a = p.off; a < unsigned{p.off} + p.len;) {
        unsigned e = std::min<unsigned>((a / 8 + 1) * 8, p.off + p.len);
        chunks.emplace_back(static_cast<uint8_t>(a), static_cast<uint8_t>(e - a));
        a = e;
      }
      if (chunks.size() >= 2) {
        std::vector<uint32_t> subsets;
        const uint32_t all = (1u << chunks.size()) - 1;
        if (chunks.size() <= 4) {
          for (uint32_t m = 1; m < all; ++m) subsets.push_back(m);
        } else {
          for (size_t c = 0; c < chunks.size(); ++c) {
            subsets.push_back(1u << c);
            subsets.push_back(all & ~(1u << c));
          }
          subsets.push_back((1u << (chunks.size() / 2)) - 1);
        }
        for (uint32_t m : subsets) {
          LineBytes t = cur;
          for (size_t c = 0; c < chunks.size(); ++c) {
            if (m & (1u << c)) {
              std::memcpy(t.data() + chunks[c].first, p.data.data() + chunks[c].first,
                          chunks[c].second);
            }
          }
          add(t);
        }
      }
    }
    ApplyPiece(cur, p);
    add(cur);
  }
  return out;
}

ImageSet CrashTracer::Images(uint64_t budget, uint64_t seed, bool own_base) const {
  std::lock_guard<std::mutex> g(mu_);
  ImageSet set;
  set.base_ = &persisted_;
  if (own_base) set.OwnBase();
  // Lines in ascending address order, so image numbers are stable.
  std::vector<uint64_t> lines;
  lines.reserve(dirty_.size());
  for (const auto& [line, st] : dirty_) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  for (uint64_t line : lines) {
    auto v = VariantsOf(line, dirty_.at(line));
    if (v.size() < 2) continue;
    set.lines_.push_back({line, std::move(v)});
  }
  const size_t L = set.lines_.size();
  uint64_t product = 1;
  for (const auto& lv : set.lines_) {
    if (product > budget) break;
    product *= lv.contents.size();
  }
  set.combinations_ = product;
  if (budget == 0) budget = 1;
  if (product <= budget) {
    std::vector<uint16_t> c(L, 0);
    for (;;) {
      set.choices_.push_back(c);
      size_t i = 0;
      for (; i < L; ++i) {
        if (++c[i] < set.lines_[i].contents.size()) break;
        c[i] = 0;
      }
      if (i == L) break;
    }
    return set;
  }
  set.exhaustive_ = false;
  std::set<std::vector<uint16_t>> seen;
  auto add = [&](std::vector<uint16_t> c) {
    if (set.choices_.size() >= budget) return;
    if (seen.insert(c).second) set.choices_.push_back(std::move(c));
  };
  std::vector<uint16_t> none(L, 0), all(L);
  for (size_t l = 0; l < L; ++l) all[l] = static_cast<uint16_t>(set.lines_[l].contents.size() - 1);
  add(none);
  add(all);
  for (size_t l = 0; l < L; ++l) {
    auto alone = none;
    alone[l] = all[l];
    add(alone);
    auto left_out = all;
    left_out[l] = 0;
    add(left_out);
  }
  // Prefix boundaries: each intermediate variant of a line, the others
  // complete, then the others untouched.
  for (size_t l = 0; l < L; ++l) {
    for (size_t v = 1; v + 1 < set.lines_[l].contents.size(); ++v) {
      auto c = all;
      c[l] = static_cast<uint16_t>(v);
      add(c);
      auto d = none;
      d[l] = static_cast<uint16_t>(v);
      add(d);
    }
  }
  std::mt19937_64 rng(seed);
  for (uint64_t attempts = 0; set.choices_.size() < budget && attempts < 8 * budget;
       ++attempts) {
    std::vector<uint16_t> c(L);
    for (size_t l = 0; l < L; ++l) c[l] = static_cast<uint16_t>(rng() % set.lines_[l].contents.size());
    add(std::move(c));
  }
  return set;
}

void CrashTracer::BeginOp() {
  std::lock_guard<std::mutex> g(mu_);
  op_log_.clear();
}

ImageSet CrashTracer::EadrImages(bool mid, uint64_t budget, uint64_t seed, bool own_base) const {
  std::lock_guard<std::mutex> g(mu_);
  ImageSet set;
  set.base_ = &persisted_;
  if (own_base) set.OwnBase();
  set.eadr_pieces_ = op_log_;
  const size_t n = op_log_.size();
  set.combinations_ = mid ? n : 1;
  if (!mid) {
    set.eadr_prefixes_.push_back(n);
    return set;
  }
  if (n == 0) return set;
  if (budget == 0) budget = 1;
  if (n <= budget) {
    for (size_t k = 0; k < n; ++k) set.eadr_prefixes_.push_back(k);
    return set;
  }
  set.exhaustive_ = false;
  std::set<size_t> ks = {0, n - 1};
  std::mt19937_64 rng(seed);
  for (uint64_t i = 0; ks.size() < budget && i < budget; ++i) ks.insert(i * n / budget);
  while (ks.size() < budget) ks.insert(rng() % n);
  set.eadr_prefixes_.assign(ks.begin(), ks.end());
  return set;
}

void CrashTracer::EndOpEadr() {
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& [line, piece] : op_log_) {
    std::memcpy(persisted_.data() + line * kLine + piece.off, piece.data.data() + piece.off,
                piece.len);
  }
  op_log_.clear();
  ++version_;
}

std::vector<uint64_t> CrashTracer::FindBypassedLines() {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<uint64_t> out;
  const size_t n = expected_.size();
  for (size_t off = 0; off < n; off += 4096) {
    size_t len = std::min<size_t>(4096, n - off);
    if (std::memcmp(expected_.data() + off, base_ + off, len) == 0) continue;
    for (size_t a = off; a < off + len; a += kLine) {
      if (std::memcmp(expected_.data() + a, base_ + a, kLine) != 0) out.push_back(a / kLine);
    }
  }
  for (uint64_t line : out) StoreLocked(base_ + line * kLine, kLine, true);
  if (mode_ == Mode::kEadr && !out.empty()) {
    // eADR has no pending state: the adopted content is simply live.
  }
  return out;
}

std::string CrashTracer::LastFlushSite(uint64_t line) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = last_flush_.find(line);
  return it == last_flush_.end() ? std::string() : it->second->Pretty();
}

std::map<std::string, SiteInfo> CrashTracer::Sites() const {
  std::lock_guard<std::mutex> g(mu_);
  std::map<std::string, SiteInfo> out;
  for (const auto& [k, s] : sites_) out[std::string(s->fence ? "fence@" : "flush@") + s->key()] = *s;
  return out;
}

}  // namespace pmindex::crash
