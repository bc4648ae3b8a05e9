#include "pm/file_system.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

namespace pmindex::pm {

namespace {

// The value of errno after a failed call, never 0 (a failure must not read
// as success to a caller that tests the result).
int Err() { return errno != 0 ? errno : EIO; }

class Posix final : public FileSystem {
 public:
  int Stat(const std::string& path, struct stat* st) override {
    return stat(path.c_str(), st) == 0 ? 0 : Err();
  }
  int Lstat(const std::string& path, struct stat* st) override {
    return lstat(path.c_str(), st) == 0 ? 0 : Err();
  }
  int Open(const std::string& path, int flags, mode_t mode, int* fd) override {
    int f;
    do {
      f = open(path.c_str(), flags, mode);
    } while (f < 0 && errno == EINTR);
    if (f < 0) return Err();
    *fd = f;
    return 0;
  }
  int Close(int fd) override { return close(fd) == 0 ? 0 : Err(); }
  int Fstat(int fd, struct stat* st) override { return fstat(fd, st) == 0 ? 0 : Err(); }
  int SetBlocking(int fd) override {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) return Err();
    return 0;
  }
  int Lock(int fd, int operation) override {
    int rc;
    do {
      rc = flock(fd, operation);
    } while (rc != 0 && errno == EINTR);
    return rc == 0 ? 0 : Err();
  }
  int Pread(int fd, void* buf, size_t n, uint64_t offset, size_t* done) override {
    ssize_t r;
    do {
      r = pread(fd, buf, n, static_cast<off_t>(offset));
    } while (r < 0 && errno == EINTR);
    if (r < 0) return Err();
    *done = static_cast<size_t>(r);
    return 0;
  }
  int Pwrite(int fd, const void* buf, size_t n, uint64_t offset, size_t* done) override {
    ssize_t r;
    do {
      r = pwrite(fd, buf, n, static_cast<off_t>(offset));
    } while (r < 0 && errno == EINTR);
    if (r < 0) return Err();
    *done = static_cast<size_t>(r);
    return 0;
  }
  int Allocate(int fd, uint64_t len) override {
    int rc;
    do {
      rc = posix_fallocate(fd, 0, static_cast<off_t>(len));  // returns the error
    } while (rc == EINTR);
    return rc;
  }
  int Fsync(int fd) override {
    int rc;
    do {
      rc = fsync(fd);
    } while (rc != 0 && errno == EINTR);
    return rc == 0 ? 0 : Err();
  }
  int RenameNoReplace(const std::string& from, const std::string& to) override {
    return renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0
               ? 0
               : Err();
  }
  int Link(const std::string& from, const std::string& to) override {
    return link(from.c_str(), to.c_str()) == 0 ? 0 : Err();
  }
  int Unlink(const std::string& path) override {
    return unlink(path.c_str()) == 0 ? 0 : Err();
  }
  int Map(void* addr, size_t len, int prot, int flags, int fd, void** out) override {
    void* p = mmap(addr, len, prot, flags, fd, 0);
    if (p == MAP_FAILED) return Err();
    *out = p;
    return 0;
  }
  int Msync(void* addr, size_t len) override {
    return msync(addr, len, MS_SYNC) == 0 ? 0 : Err();
  }
};

std::atomic<FileSystem*> default_fs{nullptr};

}  // namespace

FileSystem* PosixFileSystem() {
  static Posix* const posix = new Posix();  // never destroyed: pools may outlive statics
  return posix;
}

FileSystem* DefaultFileSystem() {
  FileSystem* fs = default_fs.load(std::memory_order_acquire);
  return fs != nullptr ? fs : PosixFileSystem();
}

FileSystem* SetDefaultFileSystem(FileSystem* fs) {
  FileSystem* old = default_fs.exchange(fs, std::memory_order_acq_rel);
  return old != nullptr ? old : PosixFileSystem();
}

}  // namespace pmindex::pm
