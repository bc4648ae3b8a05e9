// Status and Result<T>: the error vocabulary at every API and pool boundary.
//
// A Status is a code plus, for errors, one human-readable line. It is one
// machine word: 0 for OK, the code itself for an error without a message,
// or a pointer to a heap block holding code and message. So the OK status
// and the codes-without-message used on hot paths (AlreadyExists,
// NotFound) cost no allocation and destroy with one compare, and index
// operations can return a Status per call. Copying a Status with a message
// copies the message.
//
// Result<T> is a Status and, when that is OK, a T next to it (not a
// std::variant): ok() is the Status's one compare, and Result<Value> is two
// words.
#pragma once

#include <cstdint>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace pmindex {

// [[nodiscard]]: a Status or Result returned by any function must be
// looked at; see IgnoreError below for the rare call that may drop one.
class [[nodiscard]] Status {
 public:
  enum class Code : uint8_t {
    kOk = 0,
    kNotFound,         // key absent (update/remove), file missing
    kAlreadyExists,    // key present (insert), file exists (create)
    kInvalidArgument,  // bad option, bad value, bad call sequence
    kCorruption,       // pool content fails a check
    kNotSupported,     // optional operation, unknown feature/format
    kIOError,          // system call failed
    kOutOfSpace,       // pool at its maximum size or disk full
    kBusy,             // pool locked by another process
    kWrongKind,        // pool belongs to another index kind
    kAborted,          // transaction conflict, failed condition (key-value store)
  };

  Status() = default;
  Status(const Status& o) : rep_(o.has_message() ? CopyRep(o.rep_) : o.rep_) {}
  // The moved-from Status keeps its code and loses its message.
  Status(Status&& o) noexcept : rep_(o.rep_) { o.rep_ = CodeOnly(o.rep_); }
  Status& operator=(const Status& o) {
    if (this != &o) {
      uintptr_t r = o.has_message() ? CopyRep(o.rep_) : o.rep_;
      Release();
      rep_ = r;
    }
    return *this;
  }
  Status& operator=(Status&& o) noexcept {
    if (this != &o) {
      Release();
      rep_ = o.rep_;
      o.rep_ = CodeOnly(o.rep_);
    }
    return *this;
  }
  ~Status() { Release(); }

  static Status OK() { return Status(); }
  static Status NotFound(std::string_view m = {}) { return Status(Code::kNotFound, m); }
  static Status AlreadyExists(std::string_view m = {}) { return Status(Code::kAlreadyExists, m); }
  static Status InvalidArgument(std::string_view m) { return Status(Code::kInvalidArgument, m); }
  static Status Corruption(std::string_view m) { return Status(Code::kCorruption, m); }
  static Status NotSupported(std::string_view m = {}) { return Status(Code::kNotSupported, m); }
  static Status IOError(std::string_view m) { return Status(Code::kIOError, m); }
  static Status OutOfSpace(std::string_view m = {}) { return Status(Code::kOutOfSpace, m); }
  static Status Busy(std::string_view m) { return Status(Code::kBusy, m); }
  static Status WrongKind(std::string_view m) { return Status(Code::kWrongKind, m); }
  static Status Aborted(std::string_view m = {}) { return Status(Code::kAborted, m); }

  bool ok() const { return rep_ == 0; }
  Code code() const {
    return has_message() ? reinterpret_cast<const Rep*>(rep_)->code : static_cast<Code>(rep_);
  }
  bool is_not_found() const { return code() == Code::kNotFound; }
  bool is_already_exists() const { return code() == Code::kAlreadyExists; }
  bool is_out_of_space() const { return code() == Code::kOutOfSpace; }
  bool is_invalid_argument() const { return code() == Code::kInvalidArgument; }
  bool is_corruption() const { return code() == Code::kCorruption; }
  bool is_not_supported() const { return code() == Code::kNotSupported; }
  bool is_aborted() const { return code() == Code::kAborted; }
  // The same as is_aborted(), under a second name callers already use.
  bool IsAborted() const { return is_aborted(); }

  // The message alone (may be empty).
  std::string_view message() const {
    return has_message() ? std::string_view(reinterpret_cast<const Rep*>(rep_)->message)
                         : std::string_view();
  }
  // "<code name>: <message>", one line.
  std::string ToString() const;
  static const char* CodeName(Code c);

 private:
  // The heap block of a Status with a message.
  struct Rep {
    Code code;
    std::string message;
  };
  // rep_ values up to kMaxCode are codes; anything above is a Rep*.
  static constexpr uintptr_t kMaxCode = 0xff;

  Status(Code c, std::string_view m)
      : rep_(m.empty() ? static_cast<uintptr_t>(c) : NewRep(c, m)) {}
  bool has_message() const { return rep_ > kMaxCode; }
  // What a moved-from Status keeps: its code, without the message.
  static uintptr_t CodeOnly(uintptr_t r) {
    if (r <= kMaxCode) return r;
    const auto c = static_cast<uintptr_t>(reinterpret_cast<const Rep*>(r)->code);
    // A Rep always holds an error code; saying so lets the compiler see
    // that a moved-from error Result is still an error.
    if (c == 0) __builtin_unreachable();
    return c;
  }
  void Release() {
    if (has_message()) DeleteRep(rep_);
  }
  // Out of line (src/api/status.cc): only errors with a message get here.
  static uintptr_t NewRep(Code c, std::string_view m);
  static uintptr_t CopyRep(uintptr_t r);
  static void DeleteRep(uintptr_t r);

  uintptr_t rep_ = 0;
};

namespace detail {
// Stop the process with a message (src/api/status.cc): a Result used against its
// contract, a bug in the calling program.
[[noreturn]] void ResultValueOfError(const Status& s);
[[noreturn]] void ResultOfOkStatus();
}  // namespace detail

// Either a value (ok()) or a non-OK Status. Check ok() before value():
// value() (and * and ->) on an error is a bug in the caller and aborts the
// process, in every build type, after printing one line on stderr that
// ends "Result::value() called on an error: <status().ToString()>". Making
// a Result from an OK Status aborts the same way (a Result holds a value or
// an error, never neither). tests/api/status_test.cc checks both.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(implicit)
  Result(Status s) : status_(std::move(s)) {     // NOLINT(implicit)
    if (status_.ok()) detail::ResultOfOkStatus();
  }
  Result(const Result& o)
    requires std::is_copy_constructible_v<T>
      : status_(o.status_) {
    if (ok()) new (&value_) T(o.value_);
  }
  // The moved-from Result keeps its ok() (a moved-from T, or the code).
  Result(Result&& o) noexcept(std::is_nothrow_move_constructible_v<T>)
      : status_(std::move(o.status_)) {
    if (ok()) new (&value_) T(std::move(o.value_));
  }
  Result& operator=(const Result& o)
    requires std::is_copy_constructible_v<T>
  {
    if (this != &o) {
      Result copy(o);
      *this = std::move(copy);
    }
    return *this;
  }
  Result& operator=(Result&& o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &o) {
      Destroy();
      status_ = std::move(o.status_);
      if (ok()) new (&value_) T(std::move(o.value_));
    }
    return *this;
  }
  ~Result() { Destroy(); }

  bool ok() const { return status_.ok(); }
  // OK if ok().
  const Status& status() const { return status_; }
  T& value() & {
    Check();
    return value_;
  }
  const T& value() const& {
    Check();
    return value_;
  }
  T&& value() && {
    Check();
    return std::move(value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void Check() const {
    if (!ok()) [[unlikely]] detail::ResultValueOfError(status_);
  }
  void Destroy() {
    if (ok()) value_.~T();
  }

  Status status_;  // OK: value_ holds a T
  union {
    T value_;
  };
};

// Drops a Status or Result on purpose. Use it only where no caller could
// act on the error (a destructor, cleanup after a first error that is the
// one reported); `why` says so at the call and is not used at run time.
inline void IgnoreError(const Status& /*s*/, const char* /*why*/) {}
template <class T>
inline void IgnoreError(const Result<T>& /*r*/, const char* /*why*/) {}

}  // namespace pmindex

// Return early from a function returning Status (or Result) on error.
#define PMINDEX_RETURN_IF_ERROR(expr)         \
  do {                                        \
    ::pmindex::Status _st = (expr);           \
    if (!_st.ok()) return _st;                \
  } while (0)
