// Command-line helpers shared by pmbench and pmclient (CLI11).
#pragma once

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "pmindex/version.h"

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

// The settings pmclient and pmtxbench share: defaults shown in --help, an
// option given twice takes its last value (scripts append overrides), and
// --version prints "TOOL (pmindex) VERSION".
inline void StandardOptions(CLI::App& app, const char* tool) {
  app.option_defaults()->always_capture_default()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version", std::string(tool) + " (pmindex) " + pmindex::version(),
                       "Print the pmindex version and exit");
}

// Parses the command line into `app`. Returns true if the program should
// go on, false after printing --help or --version (exit 0 then). A bad
// command line prints "TOOL: error: WHAT (see TOOL --help)" and exits 2.
inline bool ParseCommandLine(CLI::App& app, int argc, char** argv, const char* tool) {
  try {
    app.parse(argc, argv);
    return true;
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
  } catch (const CLI::CallForVersion&) {
    std::printf("%s\n", app.version().c_str());
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s (see %s --help)\n", tool, e.what(), tool);
    std::exit(2);
  }
  return false;
}

// True if `path` can be written (checked before a run, so that a long run
// does not end without its output): an existing writable file, or a new
// file in a writable directory.
inline bool CanWriteFile(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p = fs::absolute(path);
  std::error_code ec;
  if (fs::exists(p, ec)) return !fs::is_directory(p, ec) && access(p.c_str(), W_OK) == 0;
  return access(p.parent_path().c_str(), W_OK | X_OK) == 0;
}

// Removes the pool file `path` and its segment files (path.1, path.2, ...).
inline void RemovePoolFiles(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  std::error_code ec;
  if (!fs::exists(p.parent_path(), ec)) return;
  const std::string base = p.filename().string();
  for (const auto& e : fs::directory_iterator(p.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name == base || name.starts_with(base + ".")) fs::remove(e.path(), ec);
  }
}

}  // namespace pmindex::bench
