// Command-line helpers shared by pmbench and pmclient (CLI11).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace pmindex::bench {

// Counts, sizes and seeds are unsigned: CLI11 would wrap "-5" around to
// 2^64 - 5 (and then report "at most 2^34"), so a sign is refused up front.
inline std::string NotNegative(std::string& text) {
  size_t i = text.find_first_not_of(" \t");
  if (i != std::string::npos && text[i] == '-') {
    return "invalid value '" + text + "': must be a non-negative integer";
  }
  return {};
}

// Adds the NotNegative check to each named option of `app`.
inline void RequireNotNegative(CLI::App& app, std::initializer_list<const char*> names) {
  const CLI::Validator not_negative(NotNegative, "", "not-negative");
  for (const char* name : names) app.get_option(name)->check(not_negative);
}

}  // namespace pmindex::bench
