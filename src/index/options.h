// Index options: "key=value,key=value" strings (docs/architecture.md section 5).
//
// Parsing keeps the order and rejects empty keys and duplicates. Getters
// validate and return InvalidArgument with a one-line message naming the
// option; CheckKnown() rejects keys an index does not accept.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pmindex/status.h"

namespace pmindex {

class Options {
 public:
  Options() = default;
  static Result<Options> Parse(std::string_view text);

  bool has(std::string_view key) const;
  // The raw value, or `def` when absent.
  std::string get(std::string_view key, std::string_view def = {}) const;
  // Typed getters: `def` when absent; InvalidArgument on a malformed value
  // or one outside [lo, hi].
  Result<uint64_t> get_uint(std::string_view key, uint64_t def, uint64_t lo = 0,
                            uint64_t hi = UINT64_MAX) const;
  Result<double> get_double(std::string_view key, double def, double lo, double hi) const;
  Result<bool> get_bool(std::string_view key, bool def) const;
  // One of `allowed`.
  Result<std::string> get_enum(std::string_view key, std::string_view def,
                               std::initializer_list<std::string_view> allowed) const;
  // InvalidArgument naming the first key not in `known`.
  Status CheckKnown(std::initializer_list<std::string_view> known) const;

  void set(std::string key, std::string value);
  // Canonical text: "k=v,k=v" in insertion order.
  std::string ToString() const;
  const std::vector<std::pair<std::string, std::string>>& items() const { return kv_; }

 private:
  std::vector<std::pair<std::string, std::string>> kv_;
};

}  // namespace pmindex
