// Every registered persistent kind that stores data (no fixture), with its
// first test config (support/kinds.h): the parameters of the tests that run
// once per kind (key-value store, pair visitor).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "index/registry.h"
#include "support/kinds.h"

namespace pmindex::testing {

// (kind, first test config).
inline std::vector<std::pair<std::string, std::string>> PersistentKinds() {
  std::vector<std::pair<std::string, std::string>> out;
  const TestKinds& kinds = TestKinds::Get();
  for (const IndexInfo* info : kinds.NonFixtures())
    if (info->persistent && info->stores_data)
      out.emplace_back(info->name, kinds.Configs(info->name)[0]);
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
