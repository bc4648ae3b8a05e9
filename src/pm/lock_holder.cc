#include "pm/lock_holder.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <string_view>

namespace pmindex::pm {

bool FlockHeldByThisProcess(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  std::FILE* f = std::fopen("/proc/locks", "re");
  if (f == nullptr) return false;
  // Lines such as "1: FLOCK  ADVISORY  WRITE 4242 fe:00:9994250 0 EOF": the
  // lock's class, the holder's pid, and device major:minor (hex) and inode.
  const long self = static_cast<long>(getpid());
  bool held = false;
  char line[256];
  while (!held && std::fgets(line, sizeof line, f) != nullptr) {
    char cls[16];
    long pid = 0;
    unsigned maj = 0, min = 0;
    uintmax_t ino = 0;
    if (std::sscanf(line, "%*[^:]: %15s %*s %*s %ld %x:%x:%ju", cls, &pid, &maj, &min, &ino) != 5) {
      continue;
    }
    held = std::string_view(cls) == "FLOCK" && pid == self && maj == major(st.st_dev) &&
           min == minor(st.st_dev) && ino == static_cast<uintmax_t>(st.st_ino);
  }
  std::fclose(f);
  return held;
}

}  // namespace pmindex::pm
