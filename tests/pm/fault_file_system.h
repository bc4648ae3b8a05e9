// A pm::FileSystem for tests that fails the calls it is told to fail
// (src/pm/file_system.h, docs/crash-testing.md "File-system faults").
//
// Every call is passed to the POSIX file system unless a fault matches it:
//   FailNth(n, err)        the n-th call counted from the last Reset() fails
//                          with err (whatever its kind);
//   FailNthOf(op, n, err)  the n-th call of kind op from the last Reset();
//   FailEvery(op, err)     every call of kind op fails with err;
//   ShortTransfers(max)    every pread/pwrite moves at most `max` bytes
//                          (a short transfer, not an error; 0: none at all).
// A failed call does nothing (the system call is not made). The file
// system records every call (kind and the path it concerns) and counts the
// descriptors opened through it and not yet closed, so that a test can
// enumerate an operation's call sites (run it once, then fail call 1..N)
// and check that no failure leaks a descriptor.
//
// Not thread-safe: the tests using it drive one thread.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pm/file_system.h"

namespace pmindex::testing {

enum class FsOp {
  kStat,
  kLstat,
  kOpen,
  kClose,
  kFstat,
  kSetBlocking,
  kLock,
  kPread,
  kPwrite,
  kAllocate,
  kFsync,
  kRename,
  kLink,
  kUnlink,
  kMap,
  kMsync,
};

inline const char* FsOpName(FsOp op) {
  switch (op) {
    case FsOp::kStat: return "stat";
    case FsOp::kLstat: return "lstat";
    case FsOp::kOpen: return "open";
    case FsOp::kClose: return "close";
    case FsOp::kFstat: return "fstat";
    case FsOp::kSetBlocking: return "fcntl";
    case FsOp::kLock: return "flock";
    case FsOp::kPread: return "pread";
    case FsOp::kPwrite: return "pwrite";
    case FsOp::kAllocate: return "posix_fallocate";
    case FsOp::kFsync: return "fsync";
    case FsOp::kRename: return "renameat2";
    case FsOp::kLink: return "link";
    case FsOp::kUnlink: return "unlink";
    case FsOp::kMap: return "mmap";
    case FsOp::kMsync: return "msync";
  }
  return "?";
}

class FaultFileSystem final : public pm::FileSystem {
 public:
  struct Call {
    FsOp op;
    std::string what;  // the path, the descriptor's path, or "memory"
    int injected;      // the error injected into this call, 0 if none
  };

  // Forgets the calls recorded (FailNth counts from here) and disarms
  // FailNth; FailEvery and ShortTransfers stay armed.
  void Reset() {
    calls_.clear();
    fail_nth_ = 0;
    nth_of_.clear();
  }
  // Disarms every fault.
  void Clear() {
    fail_nth_ = 0;
    nth_of_.clear();
    every_.clear();
    short_max_ = SIZE_MAX;
  }
  void FailNth(uint64_t n, int err) {
    fail_nth_ = n;
    nth_err_ = err;
  }
  void FailNthOf(FsOp op, uint64_t n, int err) { nth_of_[op] = {n, err}; }
  void FailEvery(FsOp op, int err) { every_[op] = err; }
  void ShortTransfers(size_t max_bytes) { short_max_ = max_bytes; }

  const std::vector<Call>& calls() const { return calls_; }
  // Calls since Reset() that had an error injected.
  size_t injected() const {
    size_t n = 0;
    for (const Call& c : calls_) n += c.injected != 0;
    return n;
  }
  // Descriptors opened through this file system and not closed.
  size_t open_fds() const { return fds_.size(); }

  int Stat(const std::string& path, struct stat* st) override {
    if (int e = Enter(FsOp::kStat, path)) return e;
    return base_->Stat(path, st);
  }
  int Lstat(const std::string& path, struct stat* st) override {
    if (int e = Enter(FsOp::kLstat, path)) return e;
    return base_->Lstat(path, st);
  }
  int Open(const std::string& path, int flags, mode_t mode, int* fd) override {
    if (int e = Enter(FsOp::kOpen, path)) return e;
    int rc = base_->Open(path, flags, mode, fd);
    if (rc == 0) fds_[*fd] = path;
    return rc;
  }
  int Close(int fd) override {
    // The descriptor is released whatever the result (as close(2) does).
    int e = Enter(FsOp::kClose, PathOf(fd));
    fds_.erase(fd);
    int rc = base_->Close(fd);
    return e != 0 ? e : rc;
  }
  int Fstat(int fd, struct stat* st) override {
    if (int e = Enter(FsOp::kFstat, PathOf(fd))) return e;
    return base_->Fstat(fd, st);
  }
  int SetBlocking(int fd) override {
    if (int e = Enter(FsOp::kSetBlocking, PathOf(fd))) return e;
    return base_->SetBlocking(fd);
  }
  int Lock(int fd, int operation) override {
    if (int e = Enter(FsOp::kLock, PathOf(fd))) return e;
    return base_->Lock(fd, operation);
  }
  int Pread(int fd, void* buf, size_t n, uint64_t offset, size_t* done) override {
    if (int e = Enter(FsOp::kPread, PathOf(fd))) return e;
    return base_->Pread(fd, buf, Shorten(n), offset, done);
  }
  int Pwrite(int fd, const void* buf, size_t n, uint64_t offset, size_t* done) override {
    if (int e = Enter(FsOp::kPwrite, PathOf(fd))) return e;
    return base_->Pwrite(fd, buf, Shorten(n), offset, done);
  }
  int Allocate(int fd, uint64_t len) override {
    if (int e = Enter(FsOp::kAllocate, PathOf(fd))) return e;
    return base_->Allocate(fd, len);
  }
  int Fsync(int fd) override {
    if (int e = Enter(FsOp::kFsync, PathOf(fd))) return e;
    return base_->Fsync(fd);
  }
  int RenameNoReplace(const std::string& from, const std::string& to) override {
    if (int e = Enter(FsOp::kRename, to)) return e;
    return base_->RenameNoReplace(from, to);
  }
  int Link(const std::string& from, const std::string& to) override {
    if (int e = Enter(FsOp::kLink, to)) return e;
    return base_->Link(from, to);
  }
  int Unlink(const std::string& path) override {
    if (int e = Enter(FsOp::kUnlink, path)) return e;
    return base_->Unlink(path);
  }
  int Map(void* addr, size_t len, int prot, int flags, int fd, void** out) override {
    if (int e = Enter(FsOp::kMap, fd < 0 ? "memory" : PathOf(fd))) return e;
    return base_->Map(addr, len, prot, flags, fd, out);
  }
  int Msync(void* addr, size_t len) override {
    if (int e = Enter(FsOp::kMsync, "mapping")) return e;
    return base_->Msync(addr, len);
  }

 private:
  // Records the call; returns the error to inject, 0 for none.
  int Enter(FsOp op, const std::string& what) {
    int err = 0;
    auto it = every_.find(op);
    if (it != every_.end()) err = it->second;
    if (fail_nth_ != 0 && calls_.size() + 1 == fail_nth_) err = nth_err_;
    auto of = nth_of_.find(op);
    if (of != nth_of_.end()) {
      uint64_t seen = 1;  // this call
      for (const Call& c : calls_) seen += c.op == op;
      if (seen == of->second.first) err = of->second.second;
    }
    calls_.push_back({op, what, err});
    return err;
  }
  size_t Shorten(size_t n) const { return n > short_max_ ? short_max_ : n; }
  std::string PathOf(int fd) const {
    auto it = fds_.find(fd);
    return it != fds_.end() ? it->second : "fd " + std::to_string(fd);
  }

  pm::FileSystem* base_ = pm::PosixFileSystem();
  std::vector<Call> calls_;
  uint64_t fail_nth_ = 0;
  int nth_err_ = EIO;
  std::map<FsOp, int> every_;
  std::map<FsOp, std::pair<uint64_t, int>> nth_of_;  // op -> (n, error)
  size_t short_max_ = SIZE_MAX;
  std::map<int, std::string> fds_;
};

// Makes `fs` the default file system (pm::SetDefaultFileSystem) for the
// scope: the pools Db and KvStore create or open meanwhile use it.
class ScopedDefaultFileSystem {
 public:
  explicit ScopedDefaultFileSystem(pm::FileSystem* fs) : old_(pm::SetDefaultFileSystem(fs)) {}
  ~ScopedDefaultFileSystem() { pm::SetDefaultFileSystem(old_); }
  ScopedDefaultFileSystem(const ScopedDefaultFileSystem&) = delete;
  ScopedDefaultFileSystem& operator=(const ScopedDefaultFileSystem&) = delete;

 private:
  pm::FileSystem* old_;
};

}  // namespace pmindex::testing
