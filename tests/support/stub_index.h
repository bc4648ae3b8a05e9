// StubIndex: an Index that stores nothing, for test-only kinds that probe
// the plug-in machinery (create_index / open_index, the pool's attach and
// clean flag). Every operation succeeds without effect, lookups find
// nothing, and update/remove answer NotFound. A probe derives from it,
// names its kind and overrides what it probes (close(), usually).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "index/index.h"

namespace pmindex::testing {

class StubIndex : public Index {
 public:
  bool persistent() const override { return true; }
  Status insert(Key, Value) override { return Status::OK(); }
  Status update(Key, Value) override { return Status::NotFound(); }
  Status upsert(Key, Value) override { return Status::OK(); }
  std::optional<Value> lookup(Key) override { return std::nullopt; }
  Status remove(Key) override { return Status::NotFound(); }
  size_t scan(Key, size_t, KV*) override { return 0; }
  Status bulk_load(std::span<const KV>, double) override { return Status::OK(); }
  Status verify() override { return Status::OK(); }
  IndexStats stats() override { return {}; }
};

}  // namespace pmindex::testing
