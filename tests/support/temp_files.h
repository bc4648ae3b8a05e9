// Test helpers for tests that touch files: a temporary directory removed
// afterwards, and a snapshot of a file's bytes and mtime to assert that a
// refused operation changed nothing.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace pmindex::testing {

// A fresh temporary directory, removed with everything in it.
class TempDir {
 public:
  // `parent`: where to make it; empty = the system's temporary directory.
  explicit TempDir(const char* prefix = "pmindex-test", const std::string& parent = "") {
    const std::filesystem::path base =
        parent.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(parent);
    std::string tmpl = (base / (std::string(prefix) + "-XXXXXX")).string();
    char* d = mkdtemp(tmpl.data());
    if (d == nullptr) std::abort();
    dir_ = d;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path(const std::string& name) const {
    return (std::filesystem::path(dir_) / name).string();
  }

 private:
  std::string dir_;
};

// Whether a file exists, its mtime and (regular files only) its bytes.
struct Snapshot {
  std::string bytes;
  bool exists = false;
  struct timespec mtime {};
  static Snapshot Of(const std::string& path) {
    Snapshot s;
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return s;
    s.exists = true;
    s.mtime = st.st_mtim;
    if (!S_ISREG(st.st_mode)) return s;
    std::ifstream in(path, std::ios::binary);
    s.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return s;
  }
  bool operator==(const Snapshot& o) const {
    return exists == o.exists && bytes == o.bytes && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec;
  }
};

}  // namespace pmindex::testing
