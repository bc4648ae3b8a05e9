// Status and Result<T>: the error vocabulary at every API and pool boundary.
//
// A Status is a code plus, for errors, one human-readable line. The OK
// status and the codes-without-message used on hot paths (AlreadyExists,
// NotFound) carry no heap allocation, so index operations can return a
// Status per call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

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
  };

  Status() = default;
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

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  bool is_not_found() const { return code_ == Code::kNotFound; }
  bool is_already_exists() const { return code_ == Code::kAlreadyExists; }
  bool is_out_of_space() const { return code_ == Code::kOutOfSpace; }
  bool is_invalid_argument() const { return code_ == Code::kInvalidArgument; }
  bool is_corruption() const { return code_ == Code::kCorruption; }
  bool is_not_supported() const { return code_ == Code::kNotSupported; }

  // The message alone (may be empty).
  std::string_view message() const {
    return msg_ ? std::string_view(*msg_) : std::string_view();
  }
  // "<code name>: <message>", one line.
  std::string ToString() const;
  static const char* CodeName(Code c);

 private:
  Status(Code c, std::string_view m)
      : code_(c), msg_(m.empty() ? nullptr : std::make_shared<const std::string>(m)) {}

  Code code_ = Code::kOk;
  std::shared_ptr<const std::string> msg_;
};

// Either a value or a non-OK Status.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                   // NOLINT(implicit)
  Result(Status s) : v_(std::move(s)) {}                      // NOLINT(implicit)
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
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
