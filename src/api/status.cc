#include "pmindex/status.h"

#include <cstdlib>

#include "util/check.h"

namespace pmindex {

const char* Status::CodeName(Code c) {
  switch (c) {
    case Code::kOk: return "OK";
    case Code::kNotFound: return "not found";
    case Code::kAlreadyExists: return "already exists";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kCorruption: return "corruption";
    case Code::kNotSupported: return "not supported";
    case Code::kIOError: return "I/O error";
    case Code::kOutOfSpace: return "out of space";
    case Code::kBusy: return "busy";
    case Code::kWrongKind: return "wrong index kind";
    case Code::kAborted: return "aborted";
  }
  return "unknown";
}

std::string Status::ToString() const {
  std::string s = CodeName(code());
  if (has_message()) {
    s += ": ";
    s += message();
  }
  return s;
}

// A Rep is at least 8-byte aligned heap memory, so its address is above
// kMaxCode and never mistaken for a code.
uintptr_t Status::NewRep(Code c, std::string_view m) {
  return reinterpret_cast<uintptr_t>(new Rep{c, std::string(m)});
}

uintptr_t Status::CopyRep(uintptr_t r) {
  return reinterpret_cast<uintptr_t>(new Rep(*reinterpret_cast<const Rep*>(r)));
}

void Status::DeleteRep(uintptr_t r) { delete reinterpret_cast<Rep*>(r); }

namespace detail {

void ResultValueOfError(const Status& s) {
  PMINDEX_CHECK(s.ok(), "Result::value() called on an error: %s", s.ToString().c_str());
  std::abort();  // not reached: s is an error
}

void ResultOfOkStatus() {
  PMINDEX_CHECK(false, "Result made from an OK Status (it needs a value or an error)");
  std::abort();  // not reached
}

}  // namespace detail

}  // namespace pmindex
