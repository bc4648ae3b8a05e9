#include "client/wire.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace pmindex::client {

const char* ProtocolName(Protocol p) { return p == Protocol::kResp ? "resp" : "memcached"; }

std::string Reply::Describe() const {
  // Appends, not "literal" + std::string: GCC 12 warns (-Wrestrict) on
  // the latter in this function.
  std::string s;
  switch (kind) {
    case Kind::kStatus:
    case Kind::kError:
      s = text;
      break;
    case Kind::kInteger:
      s.append(":").append(std::to_string(integer));
      break;
    case Kind::kBulk:
      s.append("bulk of ").append(std::to_string(text.size())).append(" bytes");
      break;
    case Kind::kNil:
      s = "nil";
      break;
    case Kind::kArray:
      s.append("array of ").append(std::to_string(size));
      break;
  }
  return s;
}

// ------------------------------------------------------------- encoders
namespace {

void AppendNumber(std::string* out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

void AppendBulk(std::string* out, std::string_view arg) {
  out->push_back('$');
  AppendNumber(out, static_cast<int64_t>(arg.size()));
  out->append("\r\n");
  out->append(arg);
  out->append("\r\n");
}

}  // namespace

void AppendResp(std::string* out, std::span<const std::string_view> args) {
  out->push_back('*');
  AppendNumber(out, static_cast<int64_t>(args.size()));
  out->append("\r\n");
  for (std::string_view a : args) AppendBulk(out, a);
}

void AppendResp(std::string* out, std::initializer_list<std::string_view> args) {
  AppendResp(out, std::span<const std::string_view>(args.begin(), args.size()));
}

void AppendMcRetrieve(std::string* out, std::string_view cmd, std::string_view key) {
  out->append(cmd).append(" ").append(key).append("\r\n");
}

void AppendMcStore(std::string* out, std::string_view cmd, std::string_view key, uint32_t flags,
                   int64_t exptime, std::string_view data) {
  out->append(cmd).append(" ").append(key).append(" ");
  AppendNumber(out, flags);
  out->push_back(' ');
  AppendNumber(out, exptime);
  out->push_back(' ');
  AppendNumber(out, static_cast<int64_t>(data.size()));
  out->append("\r\n").append(data).append("\r\n");
}

void AppendMcDelete(std::string* out, std::string_view key) {
  out->append("delete ").append(key).append("\r\n");
}

// -------------------------------------------------------------- parsers
namespace {

// The line at in[*pos...] without its CRLF; advances *pos past the CRLF.
ParseStatus TakeLine(std::string_view in, size_t* pos, std::string_view* line, std::string* error) {
  const size_t eol = in.find("\r\n", *pos);
  if (eol == std::string_view::npos) {
    if (in.size() - *pos > kMaxLine) {
      *error = "a line of more than " + std::to_string(kMaxLine) + " bytes";
      return ParseStatus::kMalformed;
    }
    return ParseStatus::kIncomplete;
  }
  *line = in.substr(*pos, eol - *pos);
  *pos = eol + 2;
  return ParseStatus::kComplete;
}

// A whole decimal int64 ("-1", "42"); false on anything else.
bool ToInt(std::string_view s, int64_t* v) {
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// `n` bytes of data followed by CRLF at in[*pos...] into *out.
ParseStatus TakeData(std::string_view in, size_t* pos, int64_t n, std::string* out,
                     std::string* error) {
  const size_t len = static_cast<size_t>(n);
  if (in.size() - *pos < len + 2) return ParseStatus::kIncomplete;
  if (in.substr(*pos + len, 2) != "\r\n") {
    *error = "data of " + std::to_string(n) + " bytes not followed by CRLF";
    return ParseStatus::kMalformed;
  }
  out->assign(in.data() + *pos, len);
  *pos += len + 2;
  return ParseStatus::kComplete;
}

// The element i of *out's array, reusing an element left from an earlier reply.
Reply& Element(Reply* out, size_t i) {
  if (out->elems.size() <= i) out->elems.resize(i + 1);
  return out->elems[i];
}

ParseStatus ParseRespAt(std::string_view in, size_t* pos, Reply* out, int depth,
                        std::string* error) {
  std::string_view line;
  if (ParseStatus s = TakeLine(in, pos, &line, error); s != ParseStatus::kComplete) return s;
  if (line.empty()) {
    *error = "an empty line where a RESP reply was expected";
    return ParseStatus::kMalformed;
  }
  const char type = line[0];
  line.remove_prefix(1);
  switch (type) {
    case '+':
    case '-':
      out->kind = type == '+' ? Reply::Kind::kStatus : Reply::Kind::kError;
      out->text.assign(line);
      return ParseStatus::kComplete;
    case ':':
      if (!ToInt(line, &out->integer)) break;
      out->kind = Reply::Kind::kInteger;
      return ParseStatus::kComplete;
    case '$': {
      int64_t n;
      if (!ToInt(line, &n) || n < -1 || n > kMaxBulk) break;
      if (n == -1) {
        out->kind = Reply::Kind::kNil;
        return ParseStatus::kComplete;
      }
      out->kind = Reply::Kind::kBulk;
      return TakeData(in, pos, n, &out->text, error);
    }
    case '*': {
      int64_t n;
      if (!ToInt(line, &n) || n < -1 || n > kMaxElems) break;
      if (n == -1) {
        out->kind = Reply::Kind::kNil;
        return ParseStatus::kComplete;
      }
      if (depth >= kMaxDepth) {
        *error = "arrays nested more than " + std::to_string(kMaxDepth) + " deep";
        return ParseStatus::kMalformed;
      }
      out->kind = Reply::Kind::kArray;
      out->size = static_cast<size_t>(n);
      for (size_t i = 0; i < out->size; ++i) {
        ParseStatus s = ParseRespAt(in, pos, &Element(out, i), depth + 1, error);
        if (s != ParseStatus::kComplete) return s;
      }
      return ParseStatus::kComplete;
    }
    default:
      break;
  }
  *error = "not a RESP2 reply: '" + std::string(1, type) + std::string(line.substr(0, 60)) + "'";
  return ParseStatus::kMalformed;
}

// memcached's error lines: "ERROR", "CLIENT_ERROR msg", "SERVER_ERROR msg".
bool IsMcError(std::string_view line) {
  return line == "ERROR" || line.starts_with("ERROR ") || line.starts_with("CLIENT_ERROR") ||
         line.starts_with("SERVER_ERROR");
}

// "VALUE <key> <flags> <bytes> [<cas unique>]": the key, byte count and cas.
bool ParseValueLine(std::string_view line, std::string_view* key, int64_t* bytes, int64_t* cas) {
  std::string_view f[5];
  size_t n = 0;
  while (!line.empty()) {
    const size_t sp = line.find(' ');
    if (n == 5) return false;
    f[n++] = line.substr(0, sp);
    line = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
  }
  int64_t flags;
  if ((n != 4 && n != 5) || f[0] != "VALUE" || f[1].empty() || !ToInt(f[2], &flags) ||
      !ToInt(f[3], bytes) || *bytes < 0 || *bytes > kMaxBulk)
    return false;
  *key = f[1];
  *cas = 0;
  return n == 4 || ToInt(f[4], cas);
}

}  // namespace

ParseStatus ParseResp(std::string_view in, Reply* out, size_t* consumed, std::string* error) {
  size_t pos = 0;
  ParseStatus s = ParseRespAt(in, &pos, out, 0, error);
  if (s == ParseStatus::kComplete) *consumed = pos;
  return s;
}

ParseStatus ParseMemcached(std::string_view in, McShape shape, Reply* out, size_t* consumed,
                           std::string* error) {
  size_t pos = 0;
  std::string_view line;
  if (ParseStatus s = TakeLine(in, &pos, &line, error); s != ParseStatus::kComplete) return s;
  if (IsMcError(line) || shape == McShape::kLine) {
    out->kind = IsMcError(line) ? Reply::Kind::kError : Reply::Kind::kStatus;
    out->text.assign(line);
    *consumed = pos;
    return ParseStatus::kComplete;
  }
  out->kind = Reply::Kind::kArray;
  out->size = 0;
  while (line != "END") {
    std::string_view key;
    int64_t bytes, cas;
    if (!ParseValueLine(line, &key, &bytes, &cas)) {
      *error = "not a memcached retrieval reply line: '" + std::string(line.substr(0, 80)) + "'";
      return ParseStatus::kMalformed;
    }
    Reply& item = Element(out, out->size++);
    item.kind = Reply::Kind::kBulk;
    item.key.assign(key);
    item.integer = cas;
    if (ParseStatus s = TakeData(in, &pos, bytes, &item.text, error); s != ParseStatus::kComplete)
      return s;
    if (ParseStatus s = TakeLine(in, &pos, &line, error); s != ParseStatus::kComplete) return s;
  }
  *consumed = pos;
  return ParseStatus::kComplete;
}

// Long division of the big-endian number 0x01 KEY by 10 until it is 0.
std::string PmserverScanCursor(std::string_view key) {
  std::vector<uint8_t> num;
  num.push_back(1);
  num.insert(num.end(), key.begin(), key.end());
  std::string digits;
  // Long division by 10 until the number is 0; remainders are the digits,
  // least significant first.
  size_t first = 0;
  while (first < num.size()) {
    unsigned rem = 0;
    for (size_t i = first; i < num.size(); ++i) {
      const unsigned cur = rem * 256 + num[i];
      num[i] = static_cast<uint8_t>(cur / 10);
      rem = cur % 10;
    }
    digits.push_back(static_cast<char>('0' + rem));
    while (first < num.size() && num[first] == 0) ++first;
  }
  return std::string(digits.rbegin(), digits.rend());
}

// --------------------------------------------------------------- reader
ReplyReader::ReplyReader(Source source) : source_(std::move(source)) {}

Status ReplyReader::Read(Protocol p, McShape shape, Reply* out) {
  std::string error;
  while (true) {
    if (end_ > begin_) {
      const std::string_view in(buf_.get() + begin_, end_ - begin_);
      size_t used = 0;
      const ParseStatus s = p == Protocol::kResp ? ParseResp(in, out, &used, &error)
                                                 : ParseMemcached(in, shape, out, &used, &error);
      if (s == ParseStatus::kComplete) {
        begin_ += used;
        if (begin_ == end_) begin_ = end_ = 0;
        return Status::OK();
      }
      if (s == ParseStatus::kMalformed)
        return Status::Corruption(std::string("bad ") + ProtocolName(p) + " reply: " + error);
    }
    if (Status s = Fill(); !s.ok()) return s;
  }
}

void ReplyReader::Reserve() {
  // Move the unparsed bytes to the front, and grow the buffer if they fill it.
  if (begin_ != 0) {
    std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (cap_ - end_ < 4096) {
    const size_t cap = cap_ == 0 ? size_t{64} << 10 : cap_ * 2;
    auto grown = std::make_unique<char[]>(cap);
    if (end_ != 0) std::memcpy(grown.get(), buf_.get(), end_);
    buf_ = std::move(grown);
    cap_ = cap;
  }
}

Status ReplyReader::Fill() {
  Reserve();
  Result<size_t> n = source_(buf_.get() + end_, cap_ - end_);
  if (!n.ok()) return n.status();
  if (n.value() == 0)
    return Status::IOError(end_ == begin_ ? "the server closed the connection"
                                          : "the server closed the connection in the middle of a reply");
  end_ += n.value();
  return Status::OK();
}

// ----------------------------------------------------------- connection
Status SplitHostPort(std::string_view text, std::string* host, std::string* port) {
  const auto bad = [&](const char* why) {
    return Status::InvalidArgument("bad server address '" + std::string(text) + "': " + why +
                                   " (expected HOST:PORT or [IPV6]:PORT)");
  };
  size_t colon;
  if (text.starts_with("[")) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return bad("no ']:' after an IPv6 address");
    *host = text.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    *host = text.substr(0, colon);
  }
  *port = text.substr(colon + 1);
  int64_t n;
  if (host->empty()) return bad("no host");
  if (!ToInt(*port, &n) || n < 1 || n > 65535) return bad("the port is not a number in 1..65535");
  return Status::OK();
}

namespace {

Status Errno(const std::string& what) { return Status::IOError(what + ": " + std::strerror(errno)); }

}  // namespace

Result<std::unique_ptr<Connection>> Connection::Open(const std::string& host,
                                                     const std::string& port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return Status::IOError("cannot resolve " + host + ": " + gai_strerror(rc));
  Status last = Status::IOError("no address for " + host);
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = Errno("socket");
      continue;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      last = Errno("cannot connect to " + host + ":" + port);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) return last;
  // Requests are small and each waits for its reply: send at once.
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return Adopt(fd, timeout_ms);
}

std::unique_ptr<Connection> Connection::Adopt(int fd, int timeout_ms) {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return std::unique_ptr<Connection>(new Connection(fd, timeout_ms));
}

Connection::Connection(int fd, int timeout_ms)
    : fd_(fd), timeout_ms_(timeout_ms), reader_([this](char* buf, size_t n) -> Result<size_t> {
        while (true) {
          const ssize_t got = recv(fd_, buf, n, 0);
          if (got >= 0) return static_cast<size_t>(got);
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK)
            return Status::IOError("no reply from the server within " +
                                   std::to_string(timeout_ms_) + " ms");
          return Errno("receive");
        }
      }) {}

Connection::~Connection() { close(fd_); }

Status Connection::Send(std::string_view bytes) {
  while (!bytes.empty()) {
    // Without waiting first: the usual request fits the socket's buffer.
    const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Errno("send");
    // The buffer is full: wait until the server takes more, and buffer its
    // replies meanwhile.
    pollfd p{fd_, POLLIN | POLLOUT, 0};
    const int ready = poll(&p, 1, timeout_ms_);
    if (ready < 0 && errno != EINTR) return Errno("poll");
    if (ready == 0)
      return Status::IOError("the server took no data for " + std::to_string(timeout_ms_) + " ms");
    if (ready > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0)
      if (Status s = reader_.Fill(); !s.ok()) return s;
  }
  return Status::OK();
}

}  // namespace pmindex::client
