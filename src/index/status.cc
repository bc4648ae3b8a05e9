#include "pmindex/status.h"

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
  }
  return "unknown";
}

std::string Status::ToString() const {
  std::string s = CodeName(code_);
  if (msg_) {
    s += ": ";
    s += *msg_;
  }
  return s;
}

}  // namespace pmindex
