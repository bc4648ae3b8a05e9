// Cluster mode over RESP (cluster.h, docs/cluster.md): routing a command
// to the node serving its keys' slot, and the commands cluster-aware
// clients ask: CLUSTER (SLOTS, SHARDS, NODES, INFO, MYID, KEYSLOT,
// COUNTKEYSINSLOT, GETKEYSINSLOT, HELP), READONLY, READWRITE, ASKING, and
// PMCLUSTER, pmserver's own command that installs a new map (the nodes do
// not gossip: a tool pushes the map to each).
//
// Outside cluster mode every one of them answers Redis's "ERR This
// instance has cluster support disabled", as a Redis started without
// cluster-enabled does, which is how clients tell the two apart.
#include <algorithm>
#include <string>
#include <vector>

#include "server/cluster.h"
#include "server/key_slot.h"
#include "server/keyspace.h"
#include "server/numbers.h"
#include "server/resp_command.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

constexpr std::string_view kDisabled = "ERR This instance has cluster support disabled";
// The cluster bus port Redis would use (CLUSTER NODES shows it): pmserver
// has no bus, the number is only what clients expect to parse (0 where
// it would pass 65535).
constexpr int kBusPortOffset = 10000;

// The map, or nullptr after replying that cluster mode is off.
std::shared_ptr<const ClusterMap> MapOrReply(CommandCall& c) {
  if (c.shared.cluster() == nullptr) {
    c.reply.Error(kDisabled);
    return nullptr;
  }
  return c.shared.cluster()->map();
}

// A slot number argument: 0..16383, else replies Redis's error.
bool ParseSlot(CommandCall& c, std::string_view arg, uint16_t* slot) {
  int64_t n = 0;
  if (!ParseNumber(arg, &n) || n < 0 || n >= static_cast<int64_t>(kHashSlots)) {
    c.reply.Error("ERR Invalid slot");
    return false;
  }
  *slot = static_cast<uint16_t>(n);
  return true;
}

// Database 0's slot index, or nullptr after replying (a store without
// databases, in tests only).
Databases* SlotIndexOrReply(CommandCall& c) {
  if (c.items.keyspace() == nullptr) {
    c.reply.Error("ERR this store keeps no keys by slot");
    return nullptr;
  }
  return &c.items.keyspace()->databases();
}

void ClusterInfo(CommandCall& c) {
  const auto map = MapOrReply(c);
  if (map == nullptr) return;
  size_t serving = 0;
  for (const ClusterNode& n : map->nodes) serving += !n.ranges.empty();
  const std::string epoch = std::to_string(map->epoch);
  std::string text;
  auto field = [&text](std::string_view name, const std::string& value) {
    text.append(name).append(":").append(value).append("\r\n");
  };
  // The map covers every slot (Parse refuses any other), so the state is
  // ok whenever the node runs; a node that is down is not asked.
  field("cluster_state", "ok");
  field("cluster_slots_assigned", std::to_string(kHashSlots));
  field("cluster_slots_ok", std::to_string(kHashSlots));
  field("cluster_slots_pfail", "0");
  field("cluster_slots_fail", "0");
  field("cluster_known_nodes", std::to_string(map->nodes.size()));
  field("cluster_size", std::to_string(serving));
  field("cluster_current_epoch", epoch);
  field("cluster_my_epoch", epoch);
  field("cluster_stats_messages_sent", "0");
  field("cluster_stats_messages_received", "0");
  field("total_cluster_links_buffer_limit_exceeded", "0");
  c.reply.Verbatim(text);
}

void ClusterMyId(CommandCall& c) {
  if (MapOrReply(c) == nullptr) return;
  c.reply.Bulk(c.shared.cluster()->my_id());
}

// One node as CLUSTER SLOTS lists it: ip, port, id, and a map of extra
// networking metadata (none).
void SlotsNode(RespReply& r, const ClusterNode& n) {
  r.Array(4);
  r.Bulk(n.host);
  r.Integer(n.port);
  r.Bulk(n.id);
  r.Map(0);
}

void ClusterSlots(CommandCall& c) {
  const auto map = MapOrReply(c);
  if (map == nullptr) return;
  size_t ranges = 0;
  for (const ClusterNode& n : map->nodes) ranges += n.ranges.size();
  c.reply.Array(ranges);
  for (const ClusterNode& n : map->nodes) {
    for (const auto& [lo, hi] : n.ranges) {
      c.reply.Array(3);
      c.reply.Integer(lo);
      c.reply.Integer(hi);
      SlotsNode(c.reply, n);
    }
  }
}

void ClusterShards(CommandCall& c) {
  const auto map = MapOrReply(c);
  if (map == nullptr) return;
  c.reply.Array(map->nodes.size());
  for (const ClusterNode& n : map->nodes) {
    c.reply.Map(2);
    c.reply.Bulk("slots");
    c.reply.Array(2 * n.ranges.size());
    for (const auto& [lo, hi] : n.ranges) {
      c.reply.Integer(lo);
      c.reply.Integer(hi);
    }
    c.reply.Bulk("nodes");
    c.reply.Array(1);
    c.reply.Map(7);
    c.reply.Bulk("id");
    c.reply.Bulk(n.id);
    c.reply.Bulk("port");
    c.reply.Integer(n.port);
    c.reply.Bulk("ip");
    c.reply.Bulk(n.host);
    c.reply.Bulk("endpoint");
    c.reply.Bulk(n.host);
    c.reply.Bulk("role");
    c.reply.Bulk("master");
    c.reply.Bulk("replication-offset");
    c.reply.Integer(0);
    c.reply.Bulk("health");
    c.reply.Bulk("online");
  }
}

void ClusterNodes(CommandCall& c) {
  const auto map = MapOrReply(c);
  if (map == nullptr) return;
  const std::string& me = c.shared.cluster()->my_id();
  std::string text;
  for (const ClusterNode& n : map->nodes) {
    text.append(n.id).append(" ").append(n.address());
    const int bus = n.port + kBusPortOffset <= 65535 ? n.port + kBusPortOffset : 0;
    text.append("@").append(std::to_string(bus));
    text.append(n.id == me ? " myself,master" : " master");
    text.append(" - 0 0 ").append(std::to_string(map->epoch)).append(" connected");
    for (const auto& [lo, hi] : n.ranges) {
      text.append(" ").append(std::to_string(lo));
      if (hi != lo) text.append("-").append(std::to_string(hi));
    }
    text.append("\n");
  }
  c.reply.Verbatim(text);
}

void ClusterKeySlot(CommandCall& c) {
  if (MapOrReply(c) == nullptr) return;
  c.reply.Integer(KeySlot(c.args[2]));
}

void ClusterCountKeysInSlot(CommandCall& c) {
  uint16_t slot = 0;
  if (MapOrReply(c) == nullptr || !ParseSlot(c, c.args[2], &slot)) return;
  Databases* dbs = SlotIndexOrReply(c);
  if (dbs == nullptr) return;
  // Walks the slot's keys in batches: O(keys in the slot).
  constexpr size_t kBatch = 1024;
  int64_t count = 0;
  std::vector<std::string> keys;
  std::string after;
  for (;;) {
    keys.clear();
    const size_t n = dbs->SlotKeys(c.client.db.load(std::memory_order_relaxed), slot, after,
                                   kBatch, &keys);
    count += static_cast<int64_t>(n);
    if (n < kBatch) break;
    after = keys.back();
  }
  c.reply.Integer(count);
}

void ClusterGetKeysInSlot(CommandCall& c) {
  uint16_t slot = 0;
  if (MapOrReply(c) == nullptr || !ParseSlot(c, c.args[2], &slot)) return;
  int64_t count = 0;
  if (!ParseNumber(c.args[3], &count) || count < 0)
    return c.reply.Error("ERR Invalid number of keys");
  Databases* dbs = SlotIndexOrReply(c);
  if (dbs == nullptr) return;
  std::vector<std::string> keys;
  dbs->SlotKeys(c.client.db.load(std::memory_order_relaxed), slot, "",
                static_cast<size_t>(std::min<int64_t>(count, 1 << 20)), &keys);
  c.reply.BulkArray(keys);
}

// CLUSTER SETSLOT slot IMPORTING node | MIGRATING node | STABLE | NODE node
void ClusterSetSlot(CommandCall& c) {
  uint16_t slot = 0;
  if (MapOrReply(c) == nullptr || !ParseSlot(c, c.args[2], &slot)) return;
  const std::string_view what = c.args[3];
  Cluster::SlotState state;
  if (EqualsIgnoreCase(what, "migrating") && c.argc() == 5) {
    state = Cluster::SlotState::kMigrating;
  } else if (EqualsIgnoreCase(what, "importing") && c.argc() == 5) {
    state = Cluster::SlotState::kImporting;
  } else if (EqualsIgnoreCase(what, "stable") && c.argc() == 4) {
    state = Cluster::SlotState::kStable;
  } else if (EqualsIgnoreCase(what, "node") && c.argc() == 5) {
    // Owners change only with a new map, so that every node agrees on
    // which map (epoch) says what.
    return c.reply.Error(
        "ERR pmserver moves a slot to its new owner with a new map (PMCLUSTER SETMAP), "
        "not CLUSTER SETSLOT NODE");
  } else {
    return c.reply.Error("ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER "
                         "HELP");
  }
  const Status s = c.shared.cluster()->SetSlot(slot, state, c.argc() == 5 ? c.args[4] : "");
  if (!s.ok()) return c.reply.Error("ERR " + std::string(s.message()));
  c.reply.Simple("OK");
}

void ClusterHelp(CommandCall& c) {
  const std::initializer_list<std::string_view> lines = {
      "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
      "INFO",
      "    The cluster's state and epoch.",
      "MYID",
      "    This node's id.",
      "SLOTS",
      "    The slot ranges and the node serving each.",
      "SHARDS",
      "    Each node with its slots.",
      "NODES",
      "    The map in Redis's CLUSTER NODES text format.",
      "KEYSLOT <key>",
      "    The hash slot of a key.",
      "COUNTKEYSINSLOT <slot>",
      "    The number of keys this node holds in a slot.",
      "GETKEYSINSLOT <slot> <count>",
      "    Up to <count> keys this node holds in a slot.",
      "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE)",
      "    Starts or ends moving a slot here or away.",
      "HELP",
      "    This text."};
  c.reply.Array(lines.size());
  for (std::string_view line : lines) c.reply.Simple(line);
}

// READONLY and READWRITE: a client of a replica asks for reads there;
// pmserver has no replicas, so they only check that cluster mode is on.
void ReadOnly(CommandCall& c) {
  if (MapOrReply(c) == nullptr) return;
  c.client.readonly = true;
  c.reply.Simple("OK");
}
void ReadWrite(CommandCall& c) {
  if (MapOrReply(c) == nullptr) return;
  c.client.readonly = false;
  c.reply.Simple("OK");
}
// ASKING: the next command may touch a slot this node is importing.
void Asking(CommandCall& c) {
  if (MapOrReply(c) == nullptr) return;
  c.client.asking = true;
  c.reply.Simple("OK");
}

// PMCLUSTER SETMAP <map text>: installs a newer map (its epoch above this
// node's), durable in the node's map file before the reply.
void PmClusterSetMap(CommandCall& c) {
  if (MapOrReply(c) == nullptr) return;
  const Status s = c.shared.cluster()->Install(c.args[2]);
  if (!s.ok()) return c.reply.Error("ERR " + std::string(s.message()));
  c.reply.Simple("OK");
}
// PMCLUSTER MAP: the map this node serves by, in the map file's format.
void PmClusterMap(CommandCall& c) {
  const auto map = MapOrReply(c);
  if (map == nullptr) return;
  c.reply.Bulk(map->Format());
}

Command Sub(std::string_view name, int arity, uint64_t flags, std::string_view summary,
            CommandHandler h) {
  return Command{.name = name,
                 .arity = arity,
                 .flags = flags,
                 .group = "cluster",
                 .summary = summary,
                 .handler = h};
}

}  // namespace

bool RouteInCluster(CommandCall& call, const std::vector<std::string_view>& keys,
                    std::shared_lock<std::shared_mutex>* hold) {
  Cluster* cluster = call.shared.cluster();
  if (cluster == nullptr || keys.empty()) return true;
  const uint16_t slot = KeySlot(keys[0]);
  for (size_t i = 1; i < keys.size(); ++i) {
    if (KeySlot(keys[i]) != slot) {
      call.reply.Error("CROSSSLOT Keys in request don't hash to the same slot");
      return false;
    }
  }
  std::shared_ptr<const ClusterMap> map = cluster->map();
  auto redirect = [&](std::string_view kind, int16_t node) {
    call.reply.Error(std::string(kind) + " " + std::to_string(slot) + " " +
                     map->nodes[static_cast<size_t>(node)].address());
    return false;
  };
  const int16_t owner = map->owner[slot];
  if (map->nodes[static_cast<size_t>(owner)].id != cluster->my_id()) {
    // A slot coming here: served to a client that asked (ASKING, or a
    // command that implies it such as RESTORE-ASKING).
    const bool asked = call.client.asking || (call.command.flags & cmd_flag::kAsking);
    if (map->importing[slot] != ClusterMap::kNoOwner && asked) return true;
    return redirect("MOVED", owner);
  }
  if (map->migrating[slot] == ClusterMap::kNoOwner) return true;
  // A slot going away: MIGRATE may be moving these keys right now. Under
  // the slot's lock (MIGRATE takes it exclusively), the keys still here
  // stay here until the reply; a key gone is asked of the importing node.
  *hold = std::shared_lock<std::shared_mutex>(cluster->SlotLock(slot));
  map = cluster->map();  // the move may have ended meanwhile
  if (map->nodes[static_cast<size_t>(map->owner[slot])].id != cluster->my_id())
    return redirect("MOVED", map->owner[slot]);
  if (map->migrating[slot] == ClusterMap::kNoOwner) return true;
  size_t here = 0;
  for (std::string_view key : keys) here += call.items.store().Get(key).ok();
  if (here == keys.size()) return true;
  hold->unlock();
  if (here == 0) return redirect("ASK", map->migrating[slot]);
  call.reply.Error("TRYAGAIN Multiple keys request during rehashing of slot");
  return false;
}

void RegisterClusterCommands(CommandTable& t) {
  const uint64_t info = kLoading | kStale;
  t.Add({.name = "cluster",
         .arity = -2,
         .group = "cluster",
         .summary = "A container for the cluster commands.",
         .subcommands = {
             Sub("info", 2, info, "The cluster's state and epoch.", ClusterInfo),
             Sub("myid", 2, info, "This node's id.", ClusterMyId),
             Sub("slots", 2, info, "The slot ranges and the node serving each.", ClusterSlots),
             Sub("shards", 2, info, "Each node with its slots.", ClusterShards),
             Sub("nodes", 2, info, "The map in CLUSTER NODES text.", ClusterNodes),
             Sub("keyslot", 3, info, "The hash slot of a key.", ClusterKeySlot),
             Sub("countkeysinslot", 3, info | kReadonly,
                 "The number of keys this node holds in a slot.", ClusterCountKeysInSlot),
             Sub("getkeysinslot", 4, info | kReadonly,
                 "Up to COUNT keys this node holds in a slot.", ClusterGetKeysInSlot),
             Sub("setslot", -4, kAdmin | kStale | kNoScript,
                 "Starts or ends moving a slot here or away.", ClusterSetSlot),
             Sub("help", 2, info, "Describes the subcommands.", ClusterHelp),
         }});
  t.Add({.name = "readonly",
         .arity = 1,
         .flags = kFast | kLoading | kStale,
         .group = "cluster",
         .summary = "Allows reads from a replica (pmserver has none).",
         .handler = ReadOnly});
  t.Add({.name = "readwrite",
         .arity = 1,
         .flags = kFast | kLoading | kStale,
         .group = "cluster",
         .summary = "Ends READONLY.",
         .handler = ReadWrite});
  t.Add({.name = "asking",
         .arity = 1,
         .flags = kFast,
         .group = "cluster",
         .summary = "Lets the next command touch a slot being imported.",
         .handler = Asking});
  t.Add({.name = "pmcluster",
         .arity = -2,
         .group = "cluster",
         .summary = "pmserver's cluster map: install a newer one, or read it.",
         .subcommands = {
             Sub("setmap", 3, kAdmin | kNoScript, "Installs a map with a higher epoch.",
                 PmClusterSetMap),
             Sub("map", 2, kAdmin | info, "The map this node serves by.", PmClusterMap),
         }});
}

}  // namespace pmindex::server
