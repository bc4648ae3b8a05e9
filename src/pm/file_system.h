// The file-system seam of the pool layer (docs/architecture.md section 3.3).
//
// Every system call src/pm/pool.cc makes on a pool's files, directories
// and address space goes through a FileSystem, so that a test can fail any
// one of them with the error of its choice (tests/pm/fault_file_system.h:
// ENOSPC, EIO, EROFS, short writes, a failing fsync) and check what the
// pool reports and what it leaves behind.
//
// Only a pool's create, open, inspect, grow, sync, MarkInUse and close
// paths make these calls. No index operation (lookup, insert, delete,
// scan) does: they read and write the mapped memory and reach src/pm only
// through the inline persist helpers, and the one way an operation gets
// here is a Grow when the allocator runs out of pages (a file create and
// an mmap, whose cost dwarfs a virtual call). The seam therefore costs
// nothing on the operation paths by construction.
//
// Left outside the seam: getrandom (a create falls back to other bits),
// fstatfs and madvise (hints that decide whether to prefault; their
// failure changes nothing a caller sees) and munmap (the only errors are
// bad arguments).
//
// Convention: each call returns 0 on success or an errno value (never -1
// with errno), so an injected error reaches the caller unchanged and no
// caller depends on errno surviving intervening calls. EINTR is retried
// inside the POSIX implementation.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace pmindex::pm {

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  virtual int Stat(const std::string& path, struct stat* st) = 0;   // stat(2)
  virtual int Lstat(const std::string& path, struct stat* st) = 0;  // lstat(2)
  // open(2); *fd is the descriptor on success.
  virtual int Open(const std::string& path, int flags, mode_t mode, int* fd) = 0;
  // close(2). Callers ignore its result: a pool's data reaches its files
  // through msync and fsync, whose errors are reported.
  virtual int Close(int fd) = 0;
  virtual int Fstat(int fd, struct stat* st) = 0;  // fstat(2)
  // Clears O_NONBLOCK (fcntl F_GETFL, then F_SETFL).
  virtual int SetBlocking(int fd) = 0;
  virtual int Lock(int fd, int operation) = 0;  // flock(2)
  // One pread(2)/pwrite(2) at `offset`; *done is the bytes moved, which may
  // be fewer than n (a short transfer is not an error here: the caller
  // loops).
  virtual int Pread(int fd, void* buf, size_t n, uint64_t offset, size_t* done) = 0;
  virtual int Pwrite(int fd, const void* buf, size_t n, uint64_t offset, size_t* done) = 0;
  // posix_fallocate(3) of [0, len): allocates blocks, never changes content.
  virtual int Allocate(int fd, uint64_t len) = 0;
  virtual int Fsync(int fd) = 0;  // fsync(2), of a file or a directory
  // renameat2(RENAME_NOREPLACE): EEXIST if `to` exists; EINVAL or ENOSYS
  // where the file system or kernel lacks the flag.
  virtual int RenameNoReplace(const std::string& from, const std::string& to) = 0;
  virtual int Link(const std::string& from, const std::string& to) = 0;  // link(2)
  virtual int Unlink(const std::string& path) = 0;                       // unlink(2)
  // mmap(2) of `len` bytes of file `fd` from offset 0 (`fd` < 0: anonymous
  // memory), at `addr` if flags has MAP_FIXED; *out is the mapping.
  virtual int Map(void* addr, size_t len, int prot, int flags, int fd, void** out) = 0;
  virtual int Msync(void* addr, size_t len) = 0;  // msync(2), MS_SYNC
};

// The implementation over the system calls; what every pool uses unless it
// is given another. Always valid, never destroyed.
FileSystem* PosixFileSystem();

// What a pool created or opened without a FileSystem of its own uses:
// PosixFileSystem() unless SetDefaultFileSystem replaced it. A pool reads
// it once, at create or open, and keeps it until it is closed.
FileSystem* DefaultFileSystem();

// For tests that reach pools through Db or KvStore, whose API does not take
// a FileSystem: replaces the default (null restores PosixFileSystem()) and
// returns the previous one. `fs` must outlive every pool created or opened
// while it is the default. Not for production: it is process-wide.
FileSystem* SetDefaultFileSystem(FileSystem* fs);

}  // namespace pmindex::pm
