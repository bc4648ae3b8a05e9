#include "server/keyspace.h"

namespace pmindex::server {

Keyspace::Keyspace(Databases& dbs, Stats& stats, Items::Clock now_ms) : dbs_(dbs) {
  for (int i = 0; i < dbs.count(); ++i) {
    items_.push_back(std::make_unique<Items>(dbs.db(i), stats, now_ms));
    items_.back()->AttachKeyspace(this, i);
  }
}

}  // namespace pmindex::server
