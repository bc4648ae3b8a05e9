#include "server/cluster.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace pmindex::server {

namespace {

std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> w;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) w.push_back(line.substr(start, i - start));
  }
  return w;
}

template <class T>
bool ParseUnsigned(std::string_view s, T* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

bool IsNodeId(std::string_view id) {
  if (id.size() != 40) return false;
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// "0-5460" or "17" (several may also be joined by commas).
bool ParseRanges(std::string_view word, std::vector<std::pair<uint16_t, uint16_t>>* out) {
  while (!word.empty()) {
    const size_t comma = word.find(',');
    const std::string_view part = word.substr(0, comma);
    word = comma == std::string_view::npos ? std::string_view() : word.substr(comma + 1);
    const size_t dash = part.find('-');
    uint32_t lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      if (!ParseUnsigned(part, &lo)) return false;
      hi = lo;
    } else if (!ParseUnsigned(part.substr(0, dash), &lo) ||
               !ParseUnsigned(part.substr(dash + 1), &hi)) {
      return false;
    }
    if (lo > hi || hi >= kHashSlots) return false;
    out->emplace_back(static_cast<uint16_t>(lo), static_cast<uint16_t>(hi));
    if (comma == std::string_view::npos) break;
  }
  return true;
}

// Writes `text` to `path` durably: a temporary file beside it, synced,
// renamed over it, and the directory synced.
Status WriteFileDurably(const std::string& path, std::string_view text) {
  const std::string tmp = path + ".tmp";
  auto fail = [&](const char* what) {
    return Status::IOError("cluster map " + path + ": " + what + ": " + std::strerror(errno));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail("create");
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      ::unlink(tmp.c_str());
      return fail("write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return fail("fsync");
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return fail("rename");
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    const int rc = ::fsync(dfd);
    ::close(dfd);
    if (rc != 0) return fail("fsync of its directory");
  }
  return Status::OK();
}

// A migrating or importing line, applied once every node is known.
struct MapMove {
  int line;
  bool migrating;
  std::vector<std::pair<uint16_t, uint16_t>> ranges;
  std::string peer;
};

// Parse's node line `w` ("node ID HOST:PORT [SLOTS...]"): the node added
// to *m, its slots owned. What is wrong with the line, or "".
std::string AddNodeLine(const std::vector<std::string_view>& w, ClusterMap* m,
                        std::set<std::string>* ids, std::set<std::string>* addresses) {
  if (w.size() < 3) return "expected 'node ID HOST:PORT [SLOTS...]'";
  if (m->nodes.size() >= static_cast<size_t>(INT16_MAX)) return "too many nodes";
  ClusterNode n;
  n.id = std::string(w[1]);
  if (!IsNodeId(n.id)) return "a node id is 40 lower-case hex digits, not '" + n.id + "'";
  if (!ids->insert(n.id).second) return "node id " + n.id + " appears twice";
  const size_t colon = w[2].rfind(':');
  uint32_t port = 0;
  if (colon == std::string_view::npos || colon == 0 ||
      !ParseUnsigned(w[2].substr(colon + 1), &port) || port == 0 || port > 65535)
    return "expected HOST:PORT, not '" + std::string(w[2]) + "'";
  n.host = std::string(w[2].substr(0, colon));
  n.port = static_cast<int>(port);
  if (!addresses->insert(n.address()).second) return n.address() + " appears twice";
  for (size_t i = 3; i < w.size(); ++i) {
    if (!ParseRanges(w[i], &n.ranges))
      return "bad slots '" + std::string(w[i]) + "' (0 to 16383, as N or N-M)";
  }
  const auto index = static_cast<int16_t>(m->nodes.size());
  for (const auto& [lo, hi] : n.ranges) {
    for (uint32_t s = lo; s <= hi; ++s) {
      if (m->owner[s] != ClusterMap::kNoOwner)
        return "slot " + std::to_string(s) + " is given to two nodes";
      m->owner[s] = index;
    }
  }
  m->nodes.push_back(std::move(n));
  return "";
}

// A move line into m's migrating or importing table. What is wrong, or "".
std::string ApplyMove(const MapMove& mv, ClusterMap* m) {
  const int peer = m->Find(mv.peer);
  if (peer < 0) return "no node " + mv.peer + " in the map";
  auto& table = mv.migrating ? m->migrating : m->importing;
  for (const auto& [lo, hi] : mv.ranges) {
    for (uint32_t s = lo; s <= hi; ++s) {
      if (m->migrating[s] != ClusterMap::kNoOwner || m->importing[s] != ClusterMap::kNoOwner)
        return "slot " + std::to_string(s) + " is moved twice";
      table[s] = static_cast<int16_t>(peer);
    }
  }
  return "";
}

}  // namespace

Result<ClusterMap> ClusterMap::Parse(std::string_view text) {
  ClusterMap m;
  m.owner.fill(kNoOwner);
  m.migrating.fill(kNoOwner);
  m.importing.fill(kNoOwner);
  std::set<std::string> ids, addresses;
  // Move lines name nodes that may come later in the file.
  std::vector<MapMove> moves;
  int line_no = 0;
  auto bad = [&line_no](const std::string& what) {
    return Status::InvalidArgument("cluster map, line " + std::to_string(line_no) + ": " + what);
  };
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t hash = line.find('#');
    if (hash != std::string_view::npos) line = line.substr(0, hash);
    const std::vector<std::string_view> w = Words(line);
    if (w.empty()) continue;
    if (w[0] == "epoch") {
      if (m.epoch != 0) return bad("a second epoch line");
      if (w.size() != 2 || !ParseUnsigned(w[1], &m.epoch) || m.epoch == 0)
        return bad("expected 'epoch N' with N > 0");
      continue;
    }
    if (w[0] == "migrating" || w[0] == "importing") {
      MapMove mv{line_no, w[0] == "migrating", {}, w.size() == 3 ? std::string(w[2]) : ""};
      if (w.size() != 3 || !ParseRanges(w[1], &mv.ranges))
        return bad("expected '" + std::string(w[0]) + " SLOTS NODE-ID'");
      moves.push_back(std::move(mv));
      continue;
    }
    if (w[0] != "node") return bad("unknown line '" + std::string(w[0]) + "'");
    const std::string wrong = AddNodeLine(w, &m, &ids, &addresses);
    if (!wrong.empty()) return bad(wrong);
  }
  for (const MapMove& mv : moves) {
    line_no = mv.line;
    const std::string wrong = ApplyMove(mv, &m);
    if (!wrong.empty()) return bad(wrong);
  }
  line_no = 0;
  if (m.epoch == 0) return bad("no 'epoch N' line");
  if (m.nodes.empty()) return bad("no node");
  for (uint32_t s = 0; s < kHashSlots; ++s) {
    if (m.owner[s] == kNoOwner) return bad("slot " + std::to_string(s) + " is served by no node");
  }
  // Each node's ranges, merged and ascending, from the owner table.
  for (auto& n : m.nodes) n.ranges.clear();
  for (uint32_t s = 0; s < kHashSlots;) {
    uint32_t e = s;
    while (e + 1 < kHashSlots && m.owner[e + 1] == m.owner[s]) ++e;
    m.nodes[static_cast<size_t>(m.owner[s])].ranges.emplace_back(static_cast<uint16_t>(s),
                                                                  static_cast<uint16_t>(e));
    s = e + 1;
  }
  return m;
}

std::string ClusterMap::Format() const {
  std::ostringstream o;
  o << "epoch " << epoch << "\n";
  for (const ClusterNode& n : nodes) {
    o << "node " << n.id << " " << n.address();
    for (const auto& [lo, hi] : n.ranges) {
      o << " " << lo;
      if (hi != lo) o << "-" << hi;
    }
    o << "\n";
  }
  // The moves, one line per run of slots with the same peer.
  for (const auto* table : {&migrating, &importing}) {
    for (uint32_t s = 0; s < kHashSlots;) {
      const int16_t peer = (*table)[s];
      uint32_t e = s;
      while (e + 1 < kHashSlots && (*table)[e + 1] == peer) ++e;
      if (peer != kNoOwner) {
        o << (table == &migrating ? "migrating " : "importing ") << s;
        if (e != s) o << "-" << e;
        o << " " << nodes[static_cast<size_t>(peer)].id << "\n";
      }
      s = e + 1;
    }
  }
  return o.str();
}

int ClusterMap::Find(std::string_view id) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].id == id) return static_cast<int>(i);
  return -1;
}

Result<std::unique_ptr<Cluster>> Cluster::Load(const std::string& path, std::string my_id) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::IOError("cluster map " + path + ": cannot be read");
  std::stringstream text;
  text << f.rdbuf();
  if (f.bad()) return Status::IOError("cluster map " + path + ": read error");
  Result<ClusterMap> m = ClusterMap::Parse(text.str());
  if (!m.ok()) return Status::InvalidArgument(path + ": " + std::string(m.status().message()));
  if (m->Find(my_id) < 0)
    return Status::InvalidArgument(path + ": the map has no node " + my_id +
                                   " (this node's --cluster-node-id)");
  auto cluster = std::make_unique<Cluster>(
      std::make_shared<const ClusterMap>(std::move(m).value()), std::move(my_id), path);
  const Status moves = cluster->CheckMoves(*cluster->map());
  if (!moves.ok()) return Status::InvalidArgument(path + ": " + std::string(moves.message()));
  return cluster;
}

Status Cluster::CheckMoves(const ClusterMap& m) const {
  const int me = m.Find(my_id_);
  for (uint32_t s = 0; s < kHashSlots; ++s) {
    const bool mine = m.owner[s] == me;
    if (m.migrating[s] != ClusterMap::kNoOwner && (!mine || m.migrating[s] == me))
      return Status::InvalidArgument("slot " + std::to_string(s) +
                                     " is migrating but this node does not serve it");
    if (m.importing[s] != ClusterMap::kNoOwner && (mine || m.importing[s] == me))
      return Status::InvalidArgument("slot " + std::to_string(s) +
                                     " is importing but this node serves it");
  }
  return Status::OK();
}

Status Cluster::Publish(std::shared_ptr<const ClusterMap> next) {
  if (!path_.empty()) PMINDEX_RETURN_IF_ERROR(WriteFileDurably(path_, next->Format()));
  map_.store(std::move(next));
  return Status::OK();
}

Status Cluster::SetSlot(uint16_t slot, SlotState state, std::string_view peer) {
  sync::MutexLock lock(install_mu_);
  auto next = std::make_shared<ClusterMap>(*map_.load());
  const int me = next->Find(my_id_);
  int p = ClusterMap::kNoOwner;
  if (state != SlotState::kStable) {
    p = next->Find(peer);
    if (p < 0) return Status::InvalidArgument("I don't know about node " + std::string(peer));
    if (p == me) return Status::InvalidArgument("I can't migrate or import a slot to myself");
  }
  const bool mine = next->owner[slot] == me;
  if (state == SlotState::kMigrating && !mine)
    return Status::InvalidArgument("I'm not the owner of hash slot " + std::to_string(slot));
  if (state == SlotState::kImporting && mine)
    return Status::InvalidArgument("I'm already the owner of hash slot " + std::to_string(slot));
  next->migrating[slot] = state == SlotState::kMigrating ? static_cast<int16_t>(p)
                                                         : ClusterMap::kNoOwner;
  next->importing[slot] = state == SlotState::kImporting ? static_cast<int16_t>(p)
                                                         : ClusterMap::kNoOwner;
  return Publish(std::move(next));
}

Cluster::Cluster(std::shared_ptr<const ClusterMap> map, std::string my_id, std::string path)
    : my_id_(std::move(my_id)), path_(std::move(path)), map_(std::move(map)) {}

std::shared_ptr<const ClusterMap> Cluster::map() const { return map_.load(); }

Status Cluster::Install(std::string_view text) {
  Result<ClusterMap> m = ClusterMap::Parse(text);
  if (!m.ok()) return m.status();
  const int me = m->Find(my_id_);
  if (me < 0) return Status::InvalidArgument("the map has no node " + my_id_ + " (this node)");
  for (uint32_t s = 0; s < kHashSlots; ++s) {
    if (m->migrating[s] != ClusterMap::kNoOwner || m->importing[s] != ClusterMap::kNoOwner)
      return Status::InvalidArgument("a map to install has no migrating or importing lines");
  }
  sync::MutexLock lock(install_mu_);
  const std::shared_ptr<const ClusterMap> now = map_.load();
  if (m->epoch <= now->epoch)
    return Status::InvalidArgument("the map's epoch " + std::to_string(m->epoch) +
                                   " is not above this node's " + std::to_string(now->epoch));
  // Carry this node's moves over, by peer id, unless the map completes them
  // (or no longer names the peer).
  for (uint32_t s = 0; s < kHashSlots; ++s) {
    if (now->migrating[s] != ClusterMap::kNoOwner) {
      const int peer = m->Find(now->nodes[static_cast<size_t>(now->migrating[s])].id);
      if (peer >= 0 && m->owner[s] == me) m->migrating[s] = static_cast<int16_t>(peer);
    }
    if (now->importing[s] != ClusterMap::kNoOwner) {
      const int peer = m->Find(now->nodes[static_cast<size_t>(now->importing[s])].id);
      if (peer >= 0 && m->owner[s] != me) m->importing[s] = static_cast<int16_t>(peer);
    }
  }
  return Publish(std::make_shared<const ClusterMap>(std::move(m).value()));
}

}  // namespace pmindex::server
