// Every database's item layer: one Items over each database's view
// (databases.h), all sharing the server's Stats and clock. A protocol
// holds database 0's Items and reaches the others through
// Items::keyspace() (RESP SELECT; memcached serves database 0 only).
#pragma once

#include <memory>
#include <vector>

#include "server/databases.h"
#include "server/items.h"

namespace pmindex::server {

class Keyspace {
 public:
  // `dbs` and `stats` must outlive this object.
  Keyspace(Databases& dbs, Stats& stats, Items::Clock now_ms = WallClockMs);

  int count() const { return static_cast<int>(items_.size()); }
  // REQUIRES: 0 <= i < count().
  Items& db(int i) { return *items_[static_cast<size_t>(i)]; }
  Databases& databases() { return dbs_; }

 private:
  Databases& dbs_;
  std::vector<std::unique_ptr<Items>> items_;
};

}  // namespace pmindex::server
