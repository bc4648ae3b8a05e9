#include "simulator.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <thread>

#include "alloc/allocator.h"
#include "crash_workload.h"
#include "index/index.h"
#include "index/registry.h"
#include "pm/file_system.h"
#include "pm/pool_format.h"
#include "reader_probe.h"
#include "subject.h"
#include "util/check.h"

namespace pmindex::crash {

void LinkFixtures();  // fixtures/parray.cc: keeps the fixture registrations linked

namespace {

constexpr int kPoison = 0xA5;

// True iff either copy of root slot 0 in a pool image is a valid record
// with a non-zero value: create_index has published the index.
template <class Bytes>
bool Slot0Published(const Bytes& image) {
  if (image.size() < sizeof(pm::PoolHeader)) return false;
  pm::PoolHeader h;
  std::memcpy(&h, image.data(), sizeof h);
  return (pm::RootRecordValid(0, h.root_a[0]) && h.root_a[0].value != 0) ||
         (pm::RootRecordValid(0, h.root_b[0]) && h.root_b[0].value != 0);
}

// The memory crash images are checked in, made once per run and reused by
// every image: checking an image in fresh memory (a copy-on-write image
// buffer in each forked child, then the pool's own populated anonymous
// mapping, unmapped again at close) cost three quarters of a run's time in
// page faults, page clearing and unmapping, most of it system time.
//   - buffer(): the image as ImageSet::Build writes it, shared memory the
//     parent maps before forking, so a child writes it without copying;
//   - as the FileSystem of Pool::OpenImage, after Arm(): the one mapping
//     OpenImage asks for its pool's memory (anonymous, at a fixed address
//     in its fresh reservation) maps a memfd instead, whose pages exist
//     already. OpenImage then copies the whole image over it, so nothing
//     of an earlier image survives; the pool still opens at an address of
//     its own, and closing it only drops the mapping. Every other call,
//     and any mapping while not armed (a Grow), goes to the POSIX one.
// Children run one at a time (the parent waits), so no two pools share
// the memfd's pages.
class ImageMemory final : public pm::FileSystem {
 public:
  ImageMemory() = default;
  ImageMemory(const ImageMemory&) = delete;
  ImageMemory& operator=(const ImageMemory&) = delete;
  ~ImageMemory() override { Release(); }

  // Sizes both for images of `size` bytes (in the parent, before forking).
  void Prepare(size_t size) {
    if (size == size_) return;
    Release();
    void* b = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    PMINDEX_CHECK(b != MAP_FAILED, "pmcrash: mmap of the image buffer: %s", std::strerror(errno));
    fd_ = memfd_create("pmcrash-image-pool", MFD_CLOEXEC);
    PMINDEX_CHECK(fd_ >= 0, "pmcrash: memfd_create: %s", std::strerror(errno));
    PMINDEX_CHECK(ftruncate(fd_, static_cast<off_t>(size)) == 0, "pmcrash: ftruncate: %s",
                  std::strerror(errno));
    buffer_ = static_cast<std::byte*>(b);
    size_ = size;
  }
  std::span<std::byte> buffer() const { return {buffer_, size_}; }
  // In a forked child: fills in its page-table entries for the buffer in
  // one call instead of a fault per page (a hint; without it pages fault in).
  void Populate() const {
#ifdef MADV_POPULATE_WRITE
    (void)madvise(buffer_, size_, MADV_POPULATE_WRITE);
#endif
  }
  // The next pool mapping (and only it) goes to the memfd.
  void Arm() { armed_ = true; }
  void Disarm() { armed_ = false; }

  int Map(void* addr, size_t len, int prot, int flags, int fd, void** out) override {
    const bool pool_memory = armed_ && fd < 0 && (flags & MAP_FIXED) != 0 &&
                             (flags & MAP_ANONYMOUS) != 0 && (prot & PROT_WRITE) != 0 &&
                             len <= size_;
    if (!pool_memory) return posix_->Map(addr, len, prot, flags, fd, out);
    armed_ = false;
    void* p = mmap(addr, len, prot, MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd_, 0);
    if (p == MAP_FAILED) return errno;
    *out = p;
    return 0;
  }

  int Stat(const std::string& path, struct stat* st) override { return posix_->Stat(path, st); }
  int Lstat(const std::string& path, struct stat* st) override { return posix_->Lstat(path, st); }
  int Open(const std::string& path, int flags, mode_t mode, int* fd) override {
    return posix_->Open(path, flags, mode, fd);
  }
  int Close(int fd) override { return posix_->Close(fd); }
  int Fstat(int fd, struct stat* st) override { return posix_->Fstat(fd, st); }
  int SetBlocking(int fd) override { return posix_->SetBlocking(fd); }
  int Lock(int fd, int operation) override { return posix_->Lock(fd, operation); }
  int Pread(int fd, void* buf, size_t n, uint64_t offset, size_t* done) override {
    return posix_->Pread(fd, buf, n, offset, done);
  }
  int Pwrite(int fd, const void* buf, size_t n, uint64_t offset, size_t* done) override {
    return posix_->Pwrite(fd, buf, n, offset, done);
  }
  int Allocate(int fd, uint64_t len) override { return posix_->Allocate(fd, len); }
  int Fsync(int fd) override { return posix_->Fsync(fd); }
  int RenameNoReplace(const std::string& from, const std::string& to) override {
    return posix_->RenameNoReplace(from, to);
  }
  int Link(const std::string& from, const std::string& to) override {
    return posix_->Link(from, to);
  }
  int Unlink(const std::string& path) override { return posix_->Unlink(path); }
  int Msync(void* addr, size_t len) override { return posix_->Msync(addr, len); }

 private:
  void Release() {
    if (buffer_ != nullptr) munmap(buffer_, size_);
    if (fd_ >= 0) close(fd_);
    buffer_ = nullptr;
    fd_ = -1;
    size_ = 0;
  }

  pm::FileSystem* posix_ = pm::PosixFileSystem();
  std::byte* buffer_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
  bool armed_ = false;
};

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s;
}

class Session : public CrashTracer::Listener {
 public:
  explicit Session(const Config& cfg) : cfg_(cfg), owner_(std::this_thread::get_id()) {}

  RunStats Go();
  void OnCrashPoint(CrashTracer& t, const pm::Site& site) override;

 private:
  void CrashPoint(const std::string& where, bool op_end);
  void CheckSet(const ImageSet& set, uint64_t point, const Expect& e, const std::string& where);
  std::string CheckOne(const ImageSet& set, size_t i, uint64_t point, const Expect& e);
  std::string CheckImage(const ImageSet& set, size_t i, uint64_t point, const Expect& e);
  void Fail(uint64_t point, uint64_t image, const std::string& where, const std::string& msg);
  void MergeSites();
  void InstallNewTracer();
  std::string OwnerOf(uint64_t offset);
  bool Stopped() const { return stopped_; }
  void RunDeferred();
  void ReadAtCrashPoint();
  // A failure line of CheckImage, or an allowed visible-then-lost image.
  void Report(uint64_t point, uint64_t image, const std::string& where, const std::string& msg);

  struct Deferred {
    ImageSet set;
    uint64_t point;
    Expect e;
    std::string where;
  };
  std::vector<Deferred> deferred_;

  const Config& cfg_;
  RunStats stats_;
  // The workload and what it runs on: the index, or the store over it.
  std::unique_ptr<Subject> subject_ =
      IsKvWorkload(cfg_.workload) ? MakeKvSubject() : MakeIndexSubject();
  size_t cur_ = 0;
  uint64_t oracle_gen_ = 0;  // counts the operations that changed the oracle
  std::unique_ptr<Pool> pool_;
  bool live_ = false;  // the subject holds a live index or store
  std::unique_ptr<CrashTracer> tracer_;
  uint64_t tracer_gen_ = 0;
  ImageMemory images_;
  std::atomic<uint64_t>* progress_ = nullptr;  // shared with children
  bool stopped_ = false;
  // A mutant run: whether the mutated site has been called yet, by this
  // tracer or one before a restart (until then the images are the
  // baseline's, which passed, so they are not checked again).
  bool mutant_live_ = false;
  bool MutantLive() {
    if (!mutant_live_ && tracer_) mutant_live_ = tracer_->mutation_reached();
    return mutant_live_;
  }
  // The concurrent reader (read visibility) and whether a read made during
  // the operation in flight returned its effect.
  ReaderProbe probe_;
  bool seen_ = false;
  // The last crash point whose images were checked (to skip repeats).
  std::tuple<uint64_t, uint64_t, bool, uint64_t> last_checked_{~0ull, 0, false, 0};
  // The thread that runs the workload. Crash points are its fences only.
  std::thread::id owner_;
  std::atomic<bool> foreign_fences_{false};  // another thread has fenced
};

void Session::Fail(uint64_t point, uint64_t image, const std::string& where,
                   const std::string& msg) {
  ++stats_.failing_images;
  if (stats_.failures.size() < cfg_.keep_failures) {
    Failure f;
    f.point = point;
    f.image = image;
    f.where = where;
    f.message = OneLine(msg);
    f.replay = point == 0 ? "" : ReplayCommand(cfg_, point, image);
    stats_.failures.push_back(std::move(f));
  }
  if (cfg_.stop_after != 0 && stats_.failing_images >= cfg_.stop_after) stopped_ = true;
}

std::string Session::OwnerOf(uint64_t offset) {
  if (!pool_) return "";
  if (offset < 4096) return "pool header";
  if (offset < pool_->heap_begin()) {
    return "allocator page table (entry " + std::to_string((offset - 4096) / 8) + ")";
  }
  std::string owner = "heap page " + std::to_string((offset - pool_->heap_begin()) /
                                                    PoolOptions::kPageSize);
  if (live_ && subject_->allocator() != nullptr) {
    alloc::Allocator* a = subject_->allocator();
    std::string block;
    a->ForEachLiveBlock([&](PPtr p, size_t n) {
      if (p.offset() <= offset && offset < p.offset() + n) {
        block = "allocator block " + Hex(p.raw()) + " (" + std::to_string(n) + " bytes)";
      }
    });
    if (!block.empty()) {
      bool reachable = false;
      Status st = subject_->ForEachBlock([&](PPtr p) {
        size_t n = a->BlockSize(p);
        if (p.offset() <= offset && offset < p.offset() + n) reachable = true;
      });
      if (st.ok()) block += reachable ? ", reachable from the index" : ", not reachable";
      return block;
    }
  }
  return owner + ", no live block";
}

void Session::Report(uint64_t point, uint64_t image, const std::string& where,
                     const std::string& msg) {
  if (msg.empty()) return;
  if (msg.compare(0, kVisibleLostAllowed.size(), kVisibleLostAllowed) == 0) {
    ++stats_.visible_lost;
    return;
  }
  Fail(point, image, where, msg);
}

// A concurrent reader's read of what the operation in flight changes,
// while the writer stands at this crash point (docs/crash-testing.md "Read
// visibility"). Not in eADR mode, whose crash points come after the
// operation, nor inside a create or a recovery (nothing to read yet).
void Session::ReadAtCrashPoint() {
  if (cfg_.reads == Config::Reads::kOff || cfg_.mode == Mode::kEadr || !live_) return;
  if (!subject_->MakesReads()) return;
  if (subject_->ClassOf(cur_) != Subject::OpClass::kOther) return;
  bool saw = false;
  Subject* s = subject_.get();
  const size_t i = cur_;
  ++stats_.reads;
  switch (probe_.Run([s, i] { return s->ReadInFlight(i); }, &saw)) {
    case ReaderProbe::Outcome::kReturned:
      if (saw) {
        ++stats_.reads_saw;
        seen_ = true;
      }
      break;
    case ReaderProbe::Outcome::kBlocked:
    case ReaderProbe::Outcome::kBusy:
      ++stats_.reads_blocked;
      break;
  }
}

void Session::OnCrashPoint(CrashTracer& t, const pm::Site& site) {
  (void)t;
  // A fence of another thread of the index (nobtree's migration
  // coordinator) is no crash point: the workload thread goes on while it
  // would be checked, so the operation, the oracle and the image would
  // belong to different moments, and this bookkeeping is one thread's.
  // The fence still takes effect in the model, and the workload thread's
  // own crash points see that thread's stores in flight (the same moves
  // run at chosen points on the workload thread with migrate=inline).
  if (std::this_thread::get_id() != owner_) {
    foreign_fences_.store(true, std::memory_order_relaxed);
    return;
  }
  ReadAtCrashPoint();
  std::string where = "op #" + std::to_string(cur_) + " " + subject_->Describe(cur_) +
                      ", before fence " + RelativeSourcePath(site.file_name()) + ":" +
                      std::to_string(site.line());
  CrashPoint(where, false);
}

void Session::RunDeferred() {
  // The operation has returned: no lock of the index or the allocator is
  // held, so forked children can recover without inheriting one.
  std::vector<Deferred> q;
  q.swap(deferred_);
  for (auto& d : q) {
    if (stopped_ && !cfg_.replay) break;
    CheckSet(d.set, d.point, d.e, d.where);
  }
}

void Session::CrashPoint(const std::string& where, bool op_end) {
  if (op_end) {
    probe_.Drain();  // no read in flight while children are forked
    RunDeferred();   // the operation's own crash points first
  }
  const uint64_t point = ++stats_.crash_points;
  if (stopped_) return;
  if (cfg_.replay && cfg_.replay->first != point) return;
  // A mutant's model equals the unmutated one until its site is first
  // called, and the baseline run (same workload, seed and point numbers)
  // checked those images already. Replays check what they are asked.
  if (cfg_.mutation.kind != MutKind::kNone && !cfg_.replay && !MutantLive()) {
    ++stats_.unmutated_points;
    return;
  }
  Expect e;
  e.op = cur_;
  e.after_only = op_end;
  e.create_mid = subject_->ClassOf(cur_) == Subject::OpClass::kCreate && !op_end;
  // At the end of the operation every image must hold its effect anyway.
  e.seen = seen_ && !op_end;
  const uint64_t sig = op_end ? oracle_gen_ + 1 : cur_;
  auto key = std::make_tuple(tracer_->version(), tracer_gen_, op_end,
                             sig + (e.seen ? 1ull << 63 : 0));
  if (!cfg_.replay && key == last_checked_) return;
  last_checked_ = key;
  const uint64_t seed = Mix64(cfg_.seed ^ (point << 1));
  // The persisted image is copied under the tracer's lock when it must
  // outlive this call (deferred) or when another thread has fenced: that
  // thread's next fence would change the model under the check, mixing
  // a later persisted image with this moment's lines in play.
  const bool own = !op_end || foreign_fences_.load(std::memory_order_relaxed);
  ImageSet set = cfg_.mode == Mode::kEadr ? tracer_->EadrImages(!op_end, cfg_.budget, seed, own)
                                          : tracer_->Images(cfg_.budget, seed, own);
  stats_.max_lines_in_play = std::max<uint64_t>(stats_.max_lines_in_play, set.lines_in_play());
  if (set.size() == 0) return;
  if (!op_end) {
    // Inside an operation the index may hold locks (its own, the
    // allocator's, process-wide ones): a child forked now could deadlock
    // on them. The images are kept and checked when the operation returns.
    deferred_.push_back(Deferred{std::move(set), point, e, where});
    return;
  }
  CheckSet(set, point, e, where);
}

void Session::CheckSet(const ImageSet& set, uint64_t point, const Expect& e,
                       const std::string& where) {
  if (set.size() == 0) return;
  ++stats_.checked_points;
  if (!set.exhaustive()) ++stats_.sampled_points;
  if (cfg_.replay) {
    const uint64_t i = cfg_.replay->second;
    stopped_ = true;  // nothing after the replayed image
    if (i >= set.size()) {
      Fail(0, 0, where, "replay: crash point " + std::to_string(point) + " has only " +
                            std::to_string(set.size()) + " images");
      return;
    }
    std::cout << "replay crash point " << point << " image " << i << " of " << set.size()
              << ": " << where << "\n  image: " << set.Describe(i) << "\n";
    ++stats_.images;
    std::string msg = CheckOne(set, i, point, e);
    std::cout << "  result: " << (msg.empty() ? "ok" : msg) << "\n";
    Report(point, i, where, msg);
    return;
  }
  stats_.images += set.size();
  if (!cfg_.fork) {
    for (size_t i = 0; i < set.size() && !stopped_; ++i) {
      Report(point, i, where, CheckOne(set, i, point, e));
    }
    return;
  }
  size_t start = 0;
  images_.Prepare(set.image_size());
  while (start < set.size() && !stopped_) {
    int fds[2];
    PMINDEX_CHECK(pipe(fds) == 0, "pmcrash: pipe: %s", std::strerror(errno));
    progress_->store(start);
    std::cout.flush();
    std::fflush(nullptr);
    pid_t pid = fork();
    PMINDEX_CHECK(pid >= 0, "pmcrash: fork: %s", std::strerror(errno));
    if (pid == 0) {
      close(fds[0]);
      pm::InstallTracer(nullptr);
      images_.Populate();
      for (size_t i = start; i < set.size(); ++i) {
        progress_->store(i);
        alarm(static_cast<unsigned>(cfg_.timeout_s));
        std::string msg = CheckOne(set, i, point, e);
        alarm(0);
        if (!msg.empty()) {
          std::string line = std::to_string(i) + "\t" + OneLine(msg) + "\n";
          const char* p = line.data();
          size_t left = line.size();
          while (left > 0) {
            ssize_t w = write(fds[1], p, left);
            if (w <= 0) break;
            p += w;
            left -= static_cast<size_t>(w);
          }
        }
      }
      _exit(0);
    }
    close(fds[1]);
    std::string out;
    char buf[4096];
    for (;;) {
      ssize_t r = read(fds[0], buf, sizeof buf);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      out.append(buf, static_cast<size_t>(r));
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
      size_t tab = line.find('\t');
      if (tab == std::string::npos) continue;
      Report(point, std::stoull(line.substr(0, tab)), where, line.substr(tab + 1));
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) break;
    const uint64_t at = progress_->load();
    std::string why;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
      why = "recovery/check hung: no result after " + std::to_string(cfg_.timeout_s) + " s";
    } else if (WIFSIGNALED(status)) {
      why = std::string("recovery/check crashed: signal ") + strsignal(WTERMSIG(status));
    } else {
      why = "recovery/check exited with status " + std::to_string(WEXITSTATUS(status));
    }
    Fail(point, at, where, why);
    start = at + 1;
  }
}

std::string Session::CheckOne(const ImageSet& set, size_t i, uint64_t point, const Expect& e) {
  // Recovery and the checks run untraced (in process: the tracer comes back after).
  pm::Tracer* saved = pm::InstalledTracer();
  pm::InstallTracer(nullptr);
  std::string msg = CheckImage(set, i, point, e);
  pm::InstallTracer(saved);
  return msg;
}

std::string Session::CheckImage(const ImageSet& set, size_t i, uint64_t point, const Expect& e) {
  images_.Prepare(set.image_size());  // no-op after CheckSet's (in a child)
  const std::span<std::byte> img = images_.buffer();
  set.Build(i, img);
  OpenOptions oo;
  oo.expected_kind = cfg_.index;
  oo.file_system = &images_;
  images_.Arm();
  auto pool = Pool::OpenImage(img, oo);
  images_.Disarm();
  if (!pool.ok()) {
    // Inside create_index the pool need not open until root slot 0 is
    // published (below); a valid non-zero copy of slot 0 in the image
    // means it was (pm/pool_format.h, "Root slots").
    if (e.create_mid && !Slot0Published(img)) return "";
    return "crash image does not open as a pool: " + pool.status().ToString();
  }
  return subject_->CheckImage(**pool, e, Mix64(cfg_.seed ^ (point << 20) ^ i));
}

void Session::MergeSites() {
  if (!tracer_) return;
  MutantLive();  // remembered across the restart that replaces the tracer
  for (auto& [k, s] : tracer_->Sites()) {
    auto it = stats_.sites.find(k);
    if (it == stats_.sites.end()) {
      stats_.sites.emplace(k, s);
    } else {
      it->second.calls += s.calls;
      it->second.multi_line_calls += s.multi_line_calls;
      it->second.effective += s.effective;
      it->second.effective_last_line += s.effective_last_line;
    }
  }
}

void Session::InstallNewTracer() {
  tracer_ = std::make_unique<CrashTracer>(pool_->base(), pool_->size(), cfg_.mode, cfg_.mutation);
  tracer_->set_listener(this);
  ++tracer_gen_;
  pm::InstallTracer(tracer_.get());
}

RunStats Session::Go() {
  LinkFixtures();
  auto t0 = std::chrono::steady_clock::now();
  const IndexInfo* info = Registry::Get().Find(cfg_.index);
  if (info == nullptr) {
    stats_.setup_error = "unknown index '" + cfg_.index + "'";
    return stats_;
  }
  if (!info->persistent) {
    stats_.setup_error = "index '" + cfg_.index + "' is not persistent";
    return stats_;
  }
  Status ps = subject_->Prepare(cfg_);
  if (!ps.ok()) {
    stats_.setup_error = ps.ToString();
    return stats_;
  }
  void* shared = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  PMINDEX_CHECK(shared != MAP_FAILED, "pmcrash: mmap of the progress page: %s", std::strerror(errno));
  progress_ = new (shared) std::atomic<uint64_t>(0);

  PoolOptions po;
  po.size = cfg_.pool_mb << 20;
  po.max_size = po.size;
  po.kind = cfg_.index;
  po.index_options = cfg_.options;
  po.poison = kPoison;
  subject_->AdjustPool(&po);
  auto pool = Pool::CreateInMemory(po);
  if (!pool.ok()) {
    stats_.setup_error = "cannot create the pool: " + pool.status().ToString();
    munmap(shared, 4096);
    return stats_;
  }
  pool_ = std::move(pool.value());
  const bool eadr_was = pm::Eadr();
  pm::SetEadr(cfg_.mode == Mode::kEadr);
  InstallNewTracer();

  subject_->before_reclaim = [this] { probe_.Drain(); };
  subject_->strict_reads = cfg_.reads == Config::Reads::kStrict;
  for (cur_ = 0; cur_ < subject_->ops() && stats_.setup_error.empty(); ++cur_) {
    subject_->BeginOp(cur_);
    seen_ = false;
    if (cfg_.mode == Mode::kEadr) tracer_->BeginOp();
    const Subject::OpClass cls = subject_->ClassOf(cur_);
    if (cls == Subject::OpClass::kCreate) {
      Status cs = subject_->Create(pool_.get());
      if (!cs.ok()) {
        stats_.setup_error = "create: " + cs.ToString();
        break;
      }
      live_ = true;
    } else if (cls == Subject::OpClass::kReopen) {
      // The machine restarts from what PM surely holds; recovery runs
      // under a fresh tracer, so crashes during recovery are explored too.
      pm::InstallTracer(nullptr);
      MergeSites();
      std::vector<std::byte> image(tracer_->persisted().size());
      std::memcpy(image.data(), tracer_->persisted().data(), image.size());
      subject_->Drop();
      live_ = false;
      tracer_.reset();
      pool_.reset();
      OpenOptions oo;
      oo.expected_kind = cfg_.index;
      auto p = Pool::OpenImage(image, oo);
      if (!p.ok()) {
        stats_.setup_error = "reopen: the persisted image does not open: " + p.status().ToString();
        break;
      }
      pool_ = std::move(p.value());
      InstallNewTracer();
      if (cfg_.mode == Mode::kEadr) tracer_->BeginOp();
      Status rs = subject_->Reopen(pool_.get());
      if (!rs.ok()) {
        stats_.setup_error = "reopen: recovery failed: " + rs.ToString();
        break;
      }
      live_ = true;
    } else {
      std::string bad = subject_->Run(cur_);
      if (!bad.empty()) {
        stats_.setup_error = "live run (no crash): op #" + std::to_string(cur_) + " " + subject_->Describe(cur_) +
                             " " + bad;
        break;
      }
    }
    ++stats_.ops;
    const std::string where = "op #" + std::to_string(cur_) + " " + subject_->Describe(cur_);
    if (cfg_.mode == Mode::kEadr) {
      CrashPoint(where + ", during the operation", false);
      CrashPoint(where + ", end of operation", true);
      tracer_->EndOpEadr();
    } else {
      CrashPoint(where + ", end of operation", true);
    }
    for (uint64_t line : tracer_->FindBypassedLines()) {
      std::string flushed = tracer_->LastFlushSite(line);
      stats_.bypasses.push_back("op #" + std::to_string(cur_) + " " + subject_->Describe(cur_) +
                                ": line at pool offset " + Hex(line * kLine) + " (" +
                                OwnerOf(line * kLine) +
                                ") changed without pm::store/copy/fill/naw" +
                                (flushed.empty() ? "" : "; last flushed by " + flushed));
    }
    if (subject_->EndOp()) ++oracle_gen_;
    if (stopped_ && !cfg_.replay) break;
    if (stopped_ && cfg_.replay) break;
  }
  if (stats_.setup_error.empty() && live_ && !stopped_) {
    Status st = subject_->Verify();
    if (!st.ok()) stats_.setup_error = "live run: verify() at the end: " + st.ToString();
  }
  probe_.Drain();
  pm::InstallTracer(nullptr);
  pm::SetEadr(eadr_was);
  MergeSites();
  subject_->Drop();
  live_ = false;
  tracer_.reset();
  pool_.reset();
  munmap(shared, 4096);
  stats_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats_;
}

}  // namespace

RunStats Run(const Config& cfg) {
  Session s(cfg);
  return s.Go();
}

std::string ReplayCommand(const Config& cfg, uint64_t point, uint64_t image) {
  std::ostringstream os;
  os << "pmcrash --index " << cfg.index;
  if (!cfg.options.empty()) os << " --opt " << cfg.options;
  os << " --workload " << cfg.workload << " --ops " << cfg.ops << " --seed " << cfg.seed
     << " --mode " << ModeName(cfg.mode) << " --budget " << cfg.budget;
  if (cfg.pool_mb != Config().pool_mb) os << " --pool-mb " << cfg.pool_mb;
  if (cfg.further_ops != Config().further_ops) os << " --further-ops " << cfg.further_ops;
  if (cfg.mutation.kind != MutKind::kNone) os << " --mutant " << cfg.mutation.ToString();
  if (cfg.reads != Config::Reads::kOn) {
    os << " --reads " << (cfg.reads == Config::Reads::kOff ? "off" : "strict");
  }
  os << " --replay " << point << ":" << image;
  return os.str();
}

bool MutableSite(const SiteInfo& s, bool with_alloc, bool kv_only) {
  auto has = [&](const char* p) { return s.file.find(p) != std::string::npos; };
  if (with_alloc && has("src/alloc/")) return true;
  if (kv_only) return has("src/kv/");
  return has("src/trees/") || has("src/common/") || has("src/kv/") || has("crashsim/fixtures/") ||
         has("tests/crash/");
}

namespace {
std::string Trim(std::string_view v) {
  size_t b = v.find_first_not_of(" \t");
  if (b == std::string_view::npos) return "";
  size_t e = v.find_last_not_of(" \t\r");
  return std::string(v.substr(b, e - b + 1));
}
}  // namespace

std::optional<RedundantDecl> FindRedundantDecl(const SiteInfo& s) {
  if (s.line < 2) return std::nullopt;
  std::string path = s.file;
#ifdef PMCRASH_SOURCE_DIR
  if (!path.empty() && path[0] != '/') path = std::string(PMCRASH_SOURCE_DIR) + path;
#endif
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::vector<std::string> lines;
  for (std::string l; lines.size() + 1 < s.line && std::getline(in, l);) lines.push_back(std::move(l));
  if (lines.size() + 1 < s.line) return std::nullopt;
  // The comment block directly above the call line.
  size_t first = lines.size();
  while (first > 0 && Trim(lines[first - 1]).rfind("//", 0) == 0) --first;
  const std::string_view kTag = "pmcrash-redundant";
  for (size_t i = first; i < lines.size(); ++i) {
    std::string t = Trim(lines[i]);
    std::string body = Trim(std::string_view(t).substr(2));
    if (body.rfind(kTag, 0) != 0) continue;
    RedundantDecl d;
    d.line = static_cast<uint32_t>(i + 1);
    std::string rest = body.substr(kTag.size());
    if (!rest.empty() && rest[0] == '(') {
      size_t close = rest.find(')');
      if (close == std::string::npos) return std::nullopt;
      std::string kinds = rest.substr(1, close - 1);
      for (size_t a = 0; a <= kinds.size();) {
        size_t c = kinds.find(',', a);
        if (c == std::string::npos) c = kinds.size();
        std::string k = Trim(std::string_view(kinds).substr(a, c - a));
        for (MutKind m : {MutKind::kDropFlush, MutKind::kDropFence, MutKind::kFlushShort,
                          MutKind::kFlushLate}) {
          if (k == MutKindName(m)) d.kinds.push_back(m);
        }
        a = c + 1;
      }
      rest = rest.substr(close + 1);
    }
    if (rest.empty() || rest[0] != ':') continue;
    d.reason = Trim(std::string_view(rest).substr(1));
    // The reason may go on over the following comment lines.
    for (size_t j = i + 1; j < lines.size(); ++j) {
      std::string more = Trim(std::string_view(Trim(lines[j])).substr(2));
      if (more.rfind(kTag, 0) == 0) break;
      if (!more.empty()) d.reason += " " + more;
    }
    return d;
  }
  return std::nullopt;
}

MutationReport RunMutation(const Config& cfg, bool with_alloc, std::ostream* progress,
                           const std::vector<std::string>& workloads,
                           const std::vector<uint64_t>& seeds) {
  MutationReport rep;
  std::vector<std::string> wls = workloads;
  if (wls.empty()) wls.push_back(cfg.workload);
  std::vector<uint64_t> sds = seeds;
  if (sds.empty()) sds.push_back(cfg.seed);
  // Every (seed, workload) pair, seed-major: the first seed's workloads
  // come first, as a single-seed run would order them.
  std::vector<std::pair<uint64_t, std::string>> wl;
  for (uint64_t s : sds) {
    for (const auto& w : wls) wl.emplace_back(s, w);
  }
  auto label = [&](const std::pair<uint64_t, std::string>& sw) {
    return sds.size() > 1 ? sw.second + " (seed " + std::to_string(sw.first) + ")" : sw.second;
  };
  // Baseline: every pair clean; sites summed over them.
  for (const auto& sw : wl) {
    Config base = cfg;
    base.mutation = {};
    base.seed = sw.first;
    base.workload = sw.second;
    RunStats st = Run(base);
    rep.baseline.ops += st.ops;
    rep.baseline.crash_points += st.crash_points;
    rep.baseline.checked_points += st.checked_points;
    rep.baseline.sampled_points += st.sampled_points;
    rep.baseline.images += st.images;
    rep.baseline.failing_images += st.failing_images;
    rep.baseline.seconds += st.seconds;
    rep.baseline.max_lines_in_play = std::max(rep.baseline.max_lines_in_play, st.max_lines_in_play);
    if (rep.baseline.setup_error.empty() && !st.setup_error.empty()) {
      rep.baseline.setup_error = label(sw) + ": " + st.setup_error;
    }
    for (auto& f : st.failures) rep.baseline.failures.push_back(std::move(f));
    for (auto& b : st.bypasses) rep.baseline.bypasses.push_back(std::move(b));
    for (const auto& [k, s] : st.sites) {
      auto it = rep.baseline.sites.find(k);
      if (it == rep.baseline.sites.end()) {
        rep.baseline.sites.emplace(k, s);
      } else {
        it->second.calls += s.calls;
        it->second.multi_line_calls += s.multi_line_calls;
        it->second.effective += s.effective;
        it->second.effective_last_line += s.effective_last_line;
      }
    }
  }
  if (!rep.baseline.ok()) return rep;
  // Key-value store workloads judge the store's own persist points (the
  // trees' are their own workloads' to judge).
  const bool kv_only = std::all_of(wl.begin(), wl.end(), [](const auto& sw) { return IsKvWorkload(sw.second); });
  for (const auto& [k, s] : rep.baseline.sites) {
    if (!MutableSite(s, with_alloc, kv_only)) continue;
    std::vector<MutKind> kinds;
    if (s.fence) {
      kinds = {MutKind::kDropFence};
    } else {
      kinds = {MutKind::kDropFlush, MutKind::kFlushLate};
      if (s.multi_line_calls > 0) kinds.push_back(MutKind::kFlushShort);
    }
    const std::optional<RedundantDecl> decl = FindRedundantDecl(s);
    for (MutKind kind : kinds) {
      const bool declared =
          decl && (decl->kinds.empty() ||
                   std::find(decl->kinds.begin(), decl->kinds.end(), kind) != decl->kinds.end());
      MutantResult r;
      r.mutation.kind = kind;
      r.mutation.site = s.key();
      r.site = s.Pretty();
      uint64_t sampled = 0, points = 0, images = 0;
      for (const auto& sw : wl) {
        Config mc = cfg;
        mc.seed = sw.first;
        mc.workload = sw.second;
        mc.mutation = r.mutation;
        mc.stop_after = 1;
        mc.keep_failures = 1;
        RunStats st = Run(mc);
        sampled += st.sampled_points;
        points += st.checked_points;
        images += st.images;
        if (!st.failures.empty() || !st.setup_error.empty()) {
          r.killed = true;
          r.reason = !st.failures.empty()
                         ? st.failures[0].message + " | " + st.failures[0].replay
                         : label(sw) + ": " + st.setup_error;
          break;
        }
      }
      if (r.killed) {
        ++rep.killed;
        if (declared) {
          // The declaration says no crash state detects this mutant, yet
          // one did: the declaration is wrong or out of date.
          r.stale = true;
          r.reason = "STALE declaration (" + s.file + ":" + std::to_string(decl->line) +
                     " says pmcrash-redundant, but the mutant is killed): " + r.reason;
          ++rep.stale;
        }
      } else {
        // Survivors the baseline explains: the model says the site never
        // made anything durable that no other site did.
        if (kind == MutKind::kDropFence && s.effective == 0) {
          r.redundant = true;
          r.reason = "fence never had a flushed line to make durable (no flush since the previous fence)";
        } else if (kind != MutKind::kDropFence && s.effective == 0) {
          r.redundant = true;
          r.reason = "every line it flushed was clean or flushed again before the next fence";
        } else if (kind == MutKind::kFlushShort && s.effective_last_line == 0) {
          r.redundant = true;
          r.reason = "the last line of its multi-line flushes was never dirty or was flushed again";
        } else if (declared) {
          // The simulator cannot decide it (e.g. a write whose content
          // recovery validates, so no crash state of it changes the outcome);
          // the source says why it is there.
          r.redundant = true;
          r.declared = true;
          r.reason = "declared at " + s.file + ":" + std::to_string(decl->line) + ": " + decl->reason;
        } else if (sampled == 0) {
          // Every crash point of the mutant run was explored exhaustively:
          // no crash state distinguishes the program with and without it.
          r.redundant = true;
          r.reason = "no crash state detects its removal: all " + std::to_string(images) +
                     " images of " + std::to_string(points) +
                     " crash points were checked exhaustively and pass (an unnecessary " +
                     (s.fence ? "fence" : "flush") +
                     " on these workloads: a performance bug, or it guards a path they miss)";
        } else {
          r.reason = "UNEXPLAINED survivor: it made lines durable " + std::to_string(s.effective) +
                     " times and no checked image failed without it; " +
                     std::to_string(sampled) + " of " + std::to_string(points) +
                     " crash points were only sampled (raise --budget), or the workloads " +
                     "miss the path it protects (try more --seeds or --workload)";
          ++rep.unexplained;
        }
        if (r.redundant) ++rep.redundant;
      }
      if (progress != nullptr) {
        *progress << (r.stale ? "STALE     " : r.killed ? "KILLED    " : r.declared ? "DECLARED  "
                      : r.redundant ? "REDUNDANT " : "SURVIVED  ")
                  << r.mutation.ToString() << "  " << r.site << "\n    " << r.reason << "\n";
        progress->flush();
      }
      rep.mutants.push_back(std::move(r));
    }
  }
  return rep;
}

}  // namespace pmindex::crash
