// pm::Site: the call site a flush, fence or root write carries (the
// identity the crash simulator uses for a site; src/pm/persist.h).
//
// It is std::source_location wherever the standard library provides it.
// Clang before 15 over libstdc++ does not: libstdc++'s source_location needs
// a builtin those Clang versions lack, so <source_location> declares nothing
// there (Debian 12's clang 14, which scripts/check-thread-safety.sh uses).
// The fallback offers the same members, filled by the builtins every
// supported compiler has, so the code using it needs no #if.
#pragma once

#include <cstdint>
#include <source_location>

namespace pmindex::pm {

#if defined(__cpp_lib_source_location)
using Site = std::source_location;
#else
class Site {
 public:
  // Default arguments are evaluated at the caller, so a call site that
  // writes Site::current() (or a parameter defaulting to it) gets its own
  // file and line.
  static constexpr Site current(const char* file = __builtin_FILE(),
                                const char* function = __builtin_FUNCTION(),
                                uint_least32_t line = __builtin_LINE(),
                                uint_least32_t column = __builtin_COLUMN()) noexcept {
    Site s;
    s.file_ = file;
    s.function_ = function;
    s.line_ = line;
    s.column_ = column;
    return s;
  }
  constexpr Site() noexcept = default;
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }
  constexpr uint_least32_t line() const noexcept { return line_; }
  constexpr uint_least32_t column() const noexcept { return column_; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  uint_least32_t line_ = 0;
  uint_least32_t column_ = 0;
};
#endif

}  // namespace pmindex::pm
