#include "server/resp_reply.h"

#include <cmath>
#include <cstdio>

namespace pmindex::server {

namespace {
void Header(char type, int64_t n, std::string* out) {
  out->push_back(type);
  out->append(std::to_string(n)).append("\r\n");
}
}  // namespace

std::string DoubleText(double d) {
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const int n = std::snprintf(buf, sizeof(buf), "%.17g", d);
  return std::string(buf, static_cast<size_t>(n));
}

void RespReply::Simple(std::string_view s) { out_->append("+").append(s).append("\r\n"); }

void RespReply::Error(std::string_view s) {
  out_->push_back('-');
  for (char c : s) out_->push_back(c == '\r' || c == '\n' ? ' ' : c);
  out_->append("\r\n");
}

void RespReply::Integer(int64_t n) { Header(':', n, out_); }

void RespReply::Bulk(std::string_view s) {
  Header('$', static_cast<int64_t>(s.size()), out_);
  out_->append(s).append("\r\n");
}

void RespReply::NullBulk() { out_->append(protocol_ == 3 ? "_\r\n" : "$-1\r\n"); }

void RespReply::NullArray() { out_->append(protocol_ == 3 ? "_\r\n" : "*-1\r\n"); }

void RespReply::Array(size_t n) { Header('*', static_cast<int64_t>(n), out_); }

void RespReply::Map(size_t n) {
  if (protocol_ == 3) {
    Header('%', static_cast<int64_t>(n), out_);
  } else {
    Header('*', static_cast<int64_t>(2 * n), out_);
  }
}

void RespReply::Set(size_t n) { Header(protocol_ == 3 ? '~' : '*', static_cast<int64_t>(n), out_); }

void RespReply::Double(double d) {
  if (protocol_ == 3) {
    out_->push_back(',');
    out_->append(DoubleText(d)).append("\r\n");
  } else {
    Bulk(DoubleText(d));
  }
}

void RespReply::Bool(bool b) {
  if (protocol_ == 3) {
    out_->append(b ? "#t\r\n" : "#f\r\n");
  } else {
    Integer(b ? 1 : 0);
  }
}

void RespReply::Verbatim(std::string_view s, std::string_view format) {
  if (protocol_ != 3) return Bulk(s);
  Header('=', static_cast<int64_t>(s.size() + 4), out_);
  std::string f(format.substr(0, 3));
  f.resize(3, ' ');
  out_->append(f).append(":").append(s).append("\r\n");
}

void RespReply::BigNumber(std::string_view digits) {
  if (protocol_ != 3) return Bulk(digits);
  out_->append("(").append(digits).append("\r\n");
}

}  // namespace pmindex::server
