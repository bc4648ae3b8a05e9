// Cluster mode (docs/cluster.md): which node serves which of Redis
// Cluster's 16384 hash slots (key_slot.h), as a static map that every node
// is given; the nodes do not gossip.
//
// The map is a text file (ClusterMap::Parse):
//
//   # comments and blank lines are ignored
//   epoch 1
//   node 3f2a...(40 hex digits) 127.0.0.1:30001 0-5460
//   node 9b11... 127.0.0.1:30002 5461-10922
//   node 07cc... 127.0.0.1:30003 10923-16383 17
//
// One `epoch` line (a positive number: a node only ever installs a map
// with a larger epoch than the one it has), then one `node` line per
// node: its id (40 lower-case hex digits, as Redis's node ids), the RESP
// address clients reach it at, and the slots it serves, as ranges or
// single slots. Every slot is served by exactly one node; a node may serve
// none. A map that leaves a slot uncovered or names one twice, repeats a
// node id or an address, or has anything else it does not understand is
// refused with InvalidArgument naming the line.
//
// A node's own file also records the slots it is moving (Redis's
// CLUSTER SETSLOT states), so that a node restarted in the middle of a
// move keeps redirecting as it did:
//
//   migrating 100-199 <id of the node they go to>    (slots it serves)
//   importing 5000 <id of the node they come from>   (slots it does not)
//
// A slot being moved is served by its owner for the keys it still holds;
// a key it no longer holds is answered with -ASK to the importing node,
// which serves it to a client that sent ASKING (docs/cluster.md).
//
// Cluster holds the map a node serves by (installed as one immutable
// snapshot: readers never see half of a new map) and the node's own id.
// Installing a new map writes the file first (a new file renamed over the
// old one, synced), so a node restarts with the last map it accepted.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pmindex/status.h"
#include "server/key_slot.h"
#include "sync/mutex.h"

namespace pmindex::server {

struct ClusterNode {
  std::string id;    // 40 lower-case hex digits
  std::string host;  // as clients reach it
  int port = 0;      // RESP
  // The slots it serves, as inclusive ranges, ascending.
  std::vector<std::pair<uint16_t, uint16_t>> ranges;

  std::string address() const { return host + ":" + std::to_string(port); }
};

struct ClusterMap {
  static constexpr int16_t kNoOwner = -1;

  uint64_t epoch = 0;
  std::vector<ClusterNode> nodes;
  // owner[slot]: the index in `nodes` of the node serving it.
  std::array<int16_t, kHashSlots> owner{};
  // This node's moves (kNoOwner: none): the node a slot goes to, the node
  // a slot comes from.
  std::array<int16_t, kHashSlots> migrating{};
  std::array<int16_t, kHashSlots> importing{};

  // Parses and checks a map (the format above).
  [[nodiscard]] static Result<ClusterMap> Parse(std::string_view text);
  // The map in the format Parse reads.
  std::string Format() const;
  // The index of the node with this id, or -1.
  int Find(std::string_view id) const;
};

class Cluster {
 public:
  // Reads the map from `path`; `my_id` must be one of its nodes.
  // InvalidArgument: a bad map or an id it does not name; IOError: the
  // file cannot be read.
  [[nodiscard]] static Result<std::unique_ptr<Cluster>> Load(const std::string& path,
                                                             std::string my_id);
  // A cluster over a map given in memory (tests); Install does not write
  // a file when `path` is empty.
  Cluster(std::shared_ptr<const ClusterMap> map, std::string my_id, std::string path);

  const std::string& my_id() const { return my_id_; }
  // The map now (a snapshot: it stays valid while held).
  std::shared_ptr<const ClusterMap> map() const;
  // Installs `text` as the new map: InvalidArgument if it does not parse,
  // does not name this node, or its epoch is not above the current one
  // (the text says which epoch the node has); IOError if the file cannot
  // be written (the old map stays). The moves of this node carry over,
  // except those the new map completes: a slot it gives to the node it
  // was migrating to, or to this node when it was importing it. (Move
  // lines in `text` itself are refused: they are each node's own.)
  [[nodiscard]] Status Install(std::string_view text);

  enum class SlotState : uint8_t { kStable, kMigrating, kImporting };
  // CLUSTER SETSLOT: marks `slot` migrating to, or importing from, node
  // `peer`, or stable (no move); durable in the file before it returns.
  // InvalidArgument (the text is Redis's where it has one): a migrating
  // slot this node does not serve, an importing slot it does serve, an
  // unknown peer or this node as the peer.
  [[nodiscard]] Status SetSlot(uint16_t slot, SlotState state, std::string_view peer);

  // The lock that orders commands on a slot being moved against MIGRATE:
  // a command on a migrating slot holds it shared from its routing (which
  // checks that its keys are still here) to its reply; MIGRATE holds it
  // exclusively while it copies keys out and removes them. Striped: slots
  // may share one. A plain std::shared_mutex, not an annotated one: the
  // dispatcher hands the held lock along (a std::shared_lock pointer) from
  // the routing to the reply, a path Clang's analysis cannot follow.
  static constexpr size_t kSlotLockStripes = 256;
  static size_t SlotLockStripe(uint16_t slot) { return slot % kSlotLockStripes; }
  std::shared_mutex& SlotLock(uint16_t slot) { return slot_locks_[SlotLockStripe(slot)].mu; }
  std::shared_mutex& StripeLock(size_t stripe) { return slot_locks_[stripe].mu; }

 private:
  // Checks a map's moves against this node; InvalidArgument naming the
  // first one that does not fit.
  Status CheckMoves(const ClusterMap& m) const;
  // Writes `next` (to the file, if any) and publishes it.
  Status Publish(std::shared_ptr<const ClusterMap> next) PMINDEX_REQUIRES(install_mu_);

  const std::string my_id_;
  const std::string path_;
  sync::Mutex install_mu_;  // serializes Install (the file and the epoch check)
  std::atomic<std::shared_ptr<const ClusterMap>> map_;
  struct alignas(64) LockStripe {
    std::shared_mutex mu;
  };
  std::array<LockStripe, kSlotLockStripes> slot_locks_;
};

}  // namespace pmindex::server
