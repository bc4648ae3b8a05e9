#include "index/salvage.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <span>

#include "index/index.h"
#include "pm/pool.h"
#include "pm/pool_format.h"

namespace pmindex {
namespace {

// SRC's segment files mapped read-only (PROT_READ, MAP_PRIVATE: nothing
// can reach the files) one after the other, as the contiguous image
// Pool::OpenImage takes. A shared flock on SRC keeps a writer (Pool::Open
// takes it exclusively) out while the image is read; flock writes nothing.
class ReadOnlyImage {
 public:
  ReadOnlyImage() = default;
  ReadOnlyImage(const ReadOnlyImage&) = delete;
  ReadOnlyImage& operator=(const ReadOnlyImage&) = delete;
  ~ReadOnlyImage() {
    if (base_ != nullptr) munmap(base_, len_);
    if (lock_fd_ >= 0) close(lock_fd_);  // releases the flock
  }
  std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(base_), len_};
  }

  Status Map(const std::string& path, const pm::PoolHeader& h) {
    lock_fd_ = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (lock_fd_ < 0) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
    if (flock(lock_fd_, LOCK_SH | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) return Status::Busy(path + " is open in another process");
      return Status::IOError("cannot lock " + path + ": " + std::strerror(errno));
    }
    len_ = pm::SegmentEnd(h, h.segments);
    void* r = mmap(nullptr, len_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) {
      len_ = 0;
      return Status::IOError(std::string("cannot reserve address space: ") + std::strerror(errno));
    }
    base_ = r;
    for (uint64_t i = 0; i < h.segments; ++i) {
      const uint64_t from = i == 0 ? 0 : pm::SegmentEnd(h, i);
      const uint64_t to = pm::SegmentEnd(h, i + 1);
      const std::string sp = i == 0 ? path : path + "." + std::to_string(i);
      int fd = open(sp.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      if (fd < 0) return Status::IOError("cannot open " + sp + ": " + std::strerror(errno));
      struct stat st;
      bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
      if (!regular || static_cast<uint64_t>(st.st_size) != to - from) {
        close(fd);
        return Status::Corruption(sp + (regular ? " changed size" : " is not a regular file"));
      }
      void* m = mmap(static_cast<char*>(base_) + from, to - from, PROT_READ,
                     MAP_PRIVATE | MAP_FIXED, fd, 0);
      int err = errno;
      close(fd);
      if (m == MAP_FAILED) return Status::IOError("cannot map " + sp + ": " + std::strerror(err));
    }
    return Status::OK();
  }

 private:
  int lock_fd_ = -1;
  void* base_ = nullptr;
  size_t len_ = 0;
};

}  // namespace

bool SalvageRead::ReportsLoss() const {
  return recorded > entries.size() || content_differs || leaf_floor > leaves ||
         cut_subtrees != 0 || !scan_cut.empty() || !verify.ok() || report.units() != 0 ||
         repeated != 0;
}

namespace {

// An in-memory copy of the pool at path (validated like Pool::Open); the
// files are only read, and unmapped and unlocked before it returns.
Result<std::unique_ptr<Pool>> CopyOfPool(const std::string& path) {
  pm::PoolHeader h;
  {
    int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
    ssize_t n = pread(fd, &h, sizeof(h), 0);
    close(fd);
    if (n != static_cast<ssize_t>(sizeof(h))) {
      return Status::IOError("cannot read the header of " + path);
    }
  }
  std::unique_ptr<Pool> copy;
  {
    ReadOnlyImage src;  // unmapped and unlocked at the end of this block
    PMINDEX_RETURN_IF_ERROR(src.Map(path, h));
    auto img = Pool::OpenImage(src.bytes());  // copies and validates it like Open
    if (!img.ok()) return img.status();
    copy = std::move(img).value();
  }
  return copy;
}

// Every entry the index reaches, by scans in batches, into out->entries.
// A pool of S bytes holds fewer than S / 16 pairs (`most`), and each round
// either moves `from` strictly up or stops, so the walk ends whatever the
// damage; out->scan_cut says why it stopped early.
void ScanEverything(Index& index, uint64_t most, SalvageRead* out) {
  std::vector<KV> batch(4096);
  Key from = 0;
  for (;;) {
    const size_t n = index.scan(from, batch.size(), batch.data());
    out->entries.insert(out->entries.end(), batch.begin(),
                        batch.begin() + static_cast<ptrdiff_t>(n));
    if (out->entries.size() > most) {
      out->scan_cut = "the scans returned more entries than the pool can hold";
      break;
    }
    if (n < batch.size() || out->entries.back().key == UINT64_MAX) break;
    if (out->entries.back().key < from) {
      out->scan_cut = "a scan went backwards";
      break;
    }
    from = out->entries.back().key + 1;
  }
}

// A damaged index may scan out of order or repeat a key: the entries are
// sorted and the first of each key kept, and the drops counted.
void SortAndDropRepeats(SalvageRead* out) {
  auto by_key = [](const KV& x, const KV& y) { return x.key < y.key; };
  if (!std::is_sorted(out->entries.begin(), out->entries.end(), by_key)) {
    std::stable_sort(out->entries.begin(), out->entries.end(), by_key);
  }
  auto last = std::unique(out->entries.begin(), out->entries.end(),
                          [](const KV& x, const KV& y) { return x.key == y.key; });
  out->repeated = static_cast<uint64_t>(out->entries.end() - last);
  out->entries.erase(last, out->entries.end());
}

}  // namespace

Result<SalvageRead> ReadForSalvage(const std::string& path, bool* image_opened) {
  if (image_opened != nullptr) *image_opened = false;
  auto info = Pool::Inspect(path);  // header, checksum, segment files; no lock, no write
  if (!info.ok()) return info.status();
  auto copied = CopyOfPool(path);
  if (!copied.ok()) return copied.status();
  std::unique_ptr<Pool> copy = std::move(copied).value();
  SalvageRead out;
  out.kind = info->kind;
  out.index_options = info->index_options;
  out.clean = info->clean;
  // What a clean close recorded (root slot 7), read before the open.
  const uint64_t close_rec = info->clean ? copy->root(pm::kCleanCloseSlot) : 0;
  if (close_rec != 0) out.recorded = pm::CleanCloseEntries(close_rec);
  const uint64_t content_rec = info->clean ? copy->root(pm::kContentSlot) : 0;
  // The leaf floor of the kinds that keep one after a crash (the PM-leaf
  // trees, trees/pm_leaf/pm_leaf_tree.h CheckLeafFloor).
  const bool floor_kind = out.kind == "lbtree" || out.kind == "fptree" || out.kind == "wbtree";
  const uint64_t floor_rec = !info->clean && floor_kind ? copy->root(pm::kCleanCloseSlot) : 0;
  if (floor_rec != 0) out.leaf_floor = pm::CleanCloseNodes(floor_rec);
  if (image_opened != nullptr) *image_opened = true;
  auto idx = open_index(copy.get(), {.bound = ReclaimBound::kNone});
  if (!idx.ok()) return idx.status();
  std::unique_ptr<Index> index = std::move(idx).value();
  out.report = index->allocator()->recovery_report();
  out.verify = index->verify();
  ScanEverything(*index, copy->size() / sizeof(KV), &out);
  const IndexStats st = index->stats();
  out.index_entries = st.entries;
  out.leaves = st.leaves;
  for (const auto& [name, value] : st.extra) {
    if (name == "salvage_cut_subtrees") out.cut_subtrees = static_cast<uint64_t>(value);
  }
  IgnoreError(index->close(), "the in-memory copy is dropped: its close has nothing to keep");
  index.reset();
  SortAndDropRepeats(&out);
  if (content_rec != 0) {
    uint64_t sum = 0;
    for (const KV& kv : out.entries) sum += pm::ContentTerm(kv.key, kv.value);
    out.content_differs = pm::ContentRecord(sum) != content_rec;
  }
  return out;
}

}  // namespace pmindex
