// Every registered persistent kind that stores data (no test-only
// fixture), with its first test config: the parameters of the tests that
// run once per kind (key-value store, pair visitor).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "index/registry.h"

namespace pmindex::testing {

// (kind, first test config or "").
inline std::vector<std::pair<std::string, std::string>> PersistentKinds() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const IndexInfo* info : Registry::Get().All())
    if (info->persistent && !info->test_only && info->stores_data)
      out.emplace_back(info->name, info->test_configs.empty() ? "" : info->test_configs[0]);
  return out;
}

// A gtest parameter name for a (kind, config) pair: the kind, [A-Za-z0-9_].
inline std::string KindName(const std::pair<std::string, std::string>& p) {
  std::string n = p.first;
  for (char& c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) c = '_';
  return n;
}

}  // namespace pmindex::testing
