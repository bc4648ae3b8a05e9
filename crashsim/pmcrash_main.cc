// pmcrash: the crash simulator's command line (docs/crash-testing.md).
//
//   pmcrash --index NAME|all [--ops N] [--seed S|--seeds S,S...] [--mode prefix|line|eadr|tear]
//           [--budget K] [--mutate] [--json FILE]
//           [--workload W[,W...]] [--opt k=v,...] [--replay POINT:IMAGE]
//           [--mutant KIND@SITE] [--mutate-alloc] [--pool-mb N]
//           [--further-ops N] [--timeout S] [--no-fork] [--list]
//
// Exit status: 0 when every run is clean, 1 on any failure, 2 on bad usage.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "alloc/allocator.h"
#include "crash_workload.h"
#include "index/registry.h"
#include "simulator.h"
#include "support/kinds.h"

namespace pmindex::crash {
void LinkFixtures();
void LinkFastFairBugs();
}

namespace {

using pmindex::crash::Config;

const char kUsage[] =
    "usage: pmcrash --index NAME|all [--ops N] [--seed S|--seeds S,S...]\n"
    "               [--mode prefix|line|eadr|tear]\n"
    "               [--budget K] [--mutate] [--json FILE] [--workload W[,W...]]\n"
    "               [--opt k=v,...] [--replay POINT:IMAGE] [--mutant KIND@SITE]\n"
    "               [--mutate-alloc] [--pool-mb N] [--further-ops N] [--timeout S]\n"
    "               [--no-fork] [--max-failures N] [--configs first|all] [--list]\n"
    "               [--numa-nodes N] [--reads on|off|strict]\n"
    "  --index      a persistent index (test-only fixtures included), or 'all'\n"
    "               (every registered persistent index, each of its test configs,\n"
    "               or only the first with --configs first)\n"
    "  --ops        operations per workload (default 100)\n"
    "  --seed       workload and sampling seed (default 1); --seeds a,b,c runs\n"
    "               each seed (with --mutate: one kill matrix, a mutant is\n"
    "               killed if any seed's run kills it)\n"
    "  --mode       prefix (default): each line shows a prefix of its stores;\n"
    "               line: each line old or new; eadr: prefix of the global store\n"
    "               order; tear: stores wider than 8 bytes split into 8-byte pieces\n"
    "  --budget     crash images per crash point at most (default 64)\n"
    "  --mutate     remove each flush/fence call site of index code (src/trees/,\n"
    "               src/common/, src/kv/; with kv workloads only src/kv/) in turn\n"
    "               and print the kill matrix; a survivor declared\n"
    "               '// pmcrash-redundant: why' above its call is redundant\n"
    "               (--mutate-alloc: src/alloc/ sites too)\n"
    "  --workload   mixed (default), insert, seq, delete, dense, churn, update, bulk,\n"
    "               bulk-small, recovery, kv, kv-tx (the key-value store over\n"
    "               the index), or 'all'; a comma list runs each\n"
    "  --replay     check exactly one crash image (printed with each failure)\n"
    "  --numa-nodes simulated NUMA nodes of the pools (1: the machine's); default:\n"
    "               each index's own test setting (nobtree: 4, the others: 1)\n"
    "  --reads      on (default): at every crash point inside an operation a\n"
    "               concurrent reader reads what the operation changes; an\n"
    "               image that loses a value it returned fails where the kind\n"
    "               (or the store) promises reads of durable data only, and is\n"
    "               counted elsewhere; off: no reads; strict: every kind is held\n"
    "               to that promise\n";

[[noreturn]] void Usage(const std::string& msg) {
  std::fprintf(stderr, "pmcrash: %s\n%s", msg.c_str(), kUsage);
  std::exit(2);
}

uint64_t ParseU64(const std::string& flag, const std::string& v, uint64_t lo, uint64_t hi) {
  char* end = nullptr;
  errno = 0;
  unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || v[0] == '-' || x < lo || x > hi) {
    Usage(flag + " expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
          "], got '" + v + "'");
  }
  return x;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += c;
        }
    }
  }
  return o;
}

struct Job {
  Config cfg;
  pmindex::crash::RunStats stats;
  bool mutated = false;
  std::vector<uint64_t> seeds;  // --mutate over several seeds: all of them
  pmindex::crash::MutationReport mut;
};

void PrintStats(const Job& j) {
  const auto& s = j.stats;
  std::printf("  crash points %llu (%llu checked, %llu sampled), images %llu, %.0f images/s, "
              "%.2f s, ops %llu, max lines in play %llu\n",
              (unsigned long long)s.crash_points, (unsigned long long)s.checked_points,
              (unsigned long long)s.sampled_points, (unsigned long long)s.images,
              s.images_per_s(), s.seconds, (unsigned long long)s.ops,
              (unsigned long long)s.max_lines_in_play);
  std::printf("  reads during operations %llu (%llu waited for the writer, %llu returned its "
              "effect), images that lost a value a read returned (allowed) %llu\n",
              (unsigned long long)s.reads, (unsigned long long)s.reads_blocked,
              (unsigned long long)s.reads_saw, (unsigned long long)s.visible_lost);
  if (!s.setup_error.empty()) std::printf("  ERROR: %s\n", s.setup_error.c_str());
  std::printf("  failures: %llu failing image(s)\n", (unsigned long long)s.failing_images);
  for (const auto& f : s.failures) {
    std::printf("  FAIL point %llu image %llu: %s\n    %s\n",
                (unsigned long long)f.point, (unsigned long long)f.image, f.where.c_str(),
                f.message.c_str());
    if (!f.replay.empty()) std::printf("    replay: %s\n", f.replay.c_str());
  }
  if (s.failing_images > s.failures.size()) {
    std::printf("  ... %llu more failing image(s) not shown\n",
                (unsigned long long)(s.failing_images - s.failures.size()));
  }
  for (const auto& b : s.bypasses) std::printf("  BYPASS %s\n", b.c_str());
}

void WriteJson(const std::string& path, const std::vector<Job>& jobs, bool all_ok) {
  std::ofstream out(path);
  if (!out) {
    std::fprintf(stderr, "pmcrash: cannot write %s\n", path.c_str());
    return;
  }
  out << "{\"ok\": " << (all_ok ? "true" : "false") << ", \"runs\": [";
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto& j = jobs[i];
    const auto& s = j.stats;
    out << (i ? ",\n" : "\n") << "{\"index\": \"" << JsonEscape(j.cfg.index) << "\", \"options\": \""
        << JsonEscape(j.cfg.options) << "\", \"workload\": \"" << j.cfg.workload
        << "\", \"ops\": " << j.cfg.ops << ", \"seed\": " << j.cfg.seed << ", \"mode\": \""
        << pmindex::crash::ModeName(j.cfg.mode) << "\", \"budget\": " << j.cfg.budget
        << ", \"crash_points\": " << s.crash_points << ", \"checked_points\": "
        << s.checked_points << ", \"sampled_points\": " << s.sampled_points
        << ", \"images\": " << s.images << ", \"images_per_s\": " << s.images_per_s()
        << ", \"seconds\": " << s.seconds << ", \"reads\": " << s.reads
        << ", \"reads_blocked\": " << s.reads_blocked << ", \"reads_saw\": " << s.reads_saw
        << ", \"visible_lost\": " << s.visible_lost << ", \"failing_images\": " << s.failing_images
        << ", \"error\": \"" << JsonEscape(s.setup_error) << "\", \"failures\": [";
    for (size_t k = 0; k < s.failures.size(); ++k) {
      const auto& f = s.failures[k];
      out << (k ? ", " : "") << "{\"point\": " << f.point << ", \"image\": " << f.image
          << ", \"where\": \"" << JsonEscape(f.where) << "\", \"message\": \""
          << JsonEscape(f.message) << "\", \"replay\": \"" << JsonEscape(f.replay) << "\"}";
    }
    out << "], \"bypasses\": [";
    for (size_t k = 0; k < s.bypasses.size(); ++k) {
      out << (k ? ", " : "") << "\"" << JsonEscape(s.bypasses[k]) << "\"";
    }
    out << "]";
    if (j.mutated) {
      out << ", \"seeds\": [";
      for (size_t k = 0; k < j.seeds.size(); ++k) out << (k ? ", " : "") << j.seeds[k];
      out << "]";
      out << ", \"mutation\": {\"killed\": " << j.mut.killed << ", \"redundant\": "
          << j.mut.redundant << ", \"unexplained\": " << j.mut.unexplained
          << ", \"stale\": " << j.mut.stale << ", \"mutants\": [";
      for (size_t k = 0; k < j.mut.mutants.size(); ++k) {
        const auto& m = j.mut.mutants[k];
        out << (k ? ",\n  " : "\n  ") << "{\"mutant\": \"" << JsonEscape(m.mutation.ToString())
            << "\", \"site\": \"" << JsonEscape(m.site) << "\", \"verdict\": \""
            << (m.stale ? "stale" : m.killed ? "killed" : m.declared ? "declared" : m.redundant ? "redundant" : "unexplained")
            << "\", \"reason\": \"" << JsonEscape(m.reason) << "\"}";
      }
      out << "]}";
    }
    out << "}";
  }
  out << "\n]}\n";
}

void PrintMutants(const pmindex::crash::MutationReport& m) {
  uint64_t declared = 0;
  for (const auto& r : m.mutants) declared += r.declared ? 1 : 0;
  std::printf("  mutants: %zu, killed %llu, redundant %llu (%llu declared), unexplained %llu, "
              "stale declarations %llu\n",
              m.mutants.size(), (unsigned long long)m.killed, (unsigned long long)m.redundant,
              (unsigned long long)declared, (unsigned long long)m.unexplained,
              (unsigned long long)m.stale);
}

}  // namespace

int main(int argc, char** argv) {
  pmindex::crash::LinkFixtures();
  pmindex::crash::LinkFastFairBugs();
  Config base;
  std::string index, json, workloads = "mixed";
  bool mutate = false, mutate_alloc = false, list = false, opt_given = false, first_config = false;
  int numa_nodes = 0;  // 0: each kind's test entry (support/kinds.h)
  std::vector<uint64_t> seeds = {base.seed};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) Usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--index") index = val();
    else if (a == "--ops") base.ops = ParseU64(a, val(), 1, 1000000);
    else if (a == "--seed") seeds = {ParseU64(a, val(), 0, UINT64_MAX)};
    else if (a == "--seeds") {
      seeds.clear();
      for (const auto& s : Split(val(), ',')) seeds.push_back(ParseU64(a, s, 0, UINT64_MAX));
      if (seeds.empty()) Usage("--seeds expects a comma list of integers");
    }
    else if (a == "--mode") {
      std::string m = val();
      if (!pmindex::crash::ParseMode(m, &base.mode)) Usage("unknown --mode '" + m + "'");
    } else if (a == "--budget") base.budget = ParseU64(a, val(), 1, 1u << 24);
    else if (a == "--mutate") mutate = true;
    else if (a == "--mutate-alloc") mutate = mutate_alloc = true;
    else if (a == "--json") json = val();
    else if (a == "--workload") workloads = val();
    else if (a == "--opt") {
      base.options = val();
      opt_given = true;
    } else if (a == "--replay") {
      std::string r = val();
      size_t c = r.find(':');
      if (c == std::string::npos) Usage("--replay expects POINT:IMAGE");
      base.replay = {ParseU64("--replay", r.substr(0, c), 1, UINT64_MAX),
                     ParseU64("--replay", r.substr(c + 1), 0, UINT64_MAX)};
    } else if (a == "--mutant") {
      std::string m = val();
      if (!pmindex::crash::Mutation::Parse(m, &base.mutation)) {
        Usage("--mutant expects KIND@FILE:LINE:COLUMN (drop-flush, drop-fence, flush-short, "
              "flush-late), got '" + m + "'");
      }
    } else if (a == "--pool-mb") base.pool_mb = ParseU64(a, val(), 4, 4096);
    else if (a == "--further-ops") base.further_ops = static_cast<int>(ParseU64(a, val(), 0, 100000));
    else if (a == "--timeout") base.timeout_s = static_cast<int>(ParseU64(a, val(), 1, 3600));
    else if (a == "--max-failures") base.stop_after = ParseU64(a, val(), 0, UINT64_MAX);
    else if (a == "--no-fork") base.fork = false;
    else if (a == "--reads") {
      const std::string r = val();
      if (r == "on") base.reads = Config::Reads::kOn;
      else if (r == "off") base.reads = Config::Reads::kOff;
      else if (r == "strict") base.reads = Config::Reads::kStrict;
      else Usage("--reads expects on, off or strict, got '" + r + "'");
    }
    else if (a == "--configs") {
      std::string c = val();
      if (c != "first" && c != "all") Usage("--configs expects first or all");
      first_config = c == "first";
    }
    else if (a == "--list") list = true;
    else if (a == "--numa-nodes") numa_nodes = static_cast<int>(ParseU64(a, val(), 1, 64));
    else if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else {
      Usage("unknown argument '" + a + "'");
    }
  }
  auto& reg = pmindex::Registry::Get();
  const auto& test_kinds = pmindex::testing::TestKinds::Get();
  if (list) {
    for (const auto* info : reg.All()) {
      if (info->persistent) {
        std::printf("%s%s\n", info->name.c_str(),
                    test_kinds.IsFixture(info->name) ? " (test-only fixture)" : "");
      }
    }
    return 0;
  }
  if (index.empty()) Usage("--index is required");
  std::vector<std::string> wl = workloads == "all" ? std::vector<std::string>{} : Split(workloads, ',');
  if (workloads == "all") {
    for (const auto& [n, d] : pmindex::crash::WorkloadNames()) wl.push_back(n);
  }
  for (const auto& w : wl) {
    bool ok = false;
    for (const auto& [n, d] : pmindex::crash::WorkloadNames()) ok |= (n == w);
    if (!ok) Usage("unknown workload '" + w + "'");
  }
  if (wl.empty()) Usage("--workload is empty");
  if (mutate && base.mode == pmindex::crash::Mode::kEadr) {
    Usage("--mutate needs a mode with flushes (prefix, line or tear), not eadr");
  }
  if (base.replay && (index == "all" || wl.size() != 1 || seeds.size() != 1)) {
    Usage("--replay needs one --index, one --workload and one --seed");
  }
  base.seed = seeds[0];
  std::string seed_flag = "--seed " + std::to_string(seeds[0]);
  if (seeds.size() > 1) {
    seed_flag = "--seeds ";
    for (size_t i = 0; i < seeds.size(); ++i) seed_flag += (i ? "," : "") + std::to_string(seeds[i]);
  }

  // (index, options) pairs.
  std::vector<std::pair<std::string, std::string>> targets;
  if (index == "all") {
    for (const auto* info : test_kinds.NonFixtures()) {
      if (!info->persistent) continue;
      if (opt_given) {
        targets.emplace_back(info->name, base.options);
      } else {
        for (const auto& c : test_kinds.Configs(info->name)) {
          targets.emplace_back(info->name, c);
          if (first_config) break;
        }
      }
    }
    if (targets.empty()) {
      std::printf("pmcrash: no persistent index is registered\n");
      return 0;
    }
  } else {
    const auto* info = reg.Find(index);
    if (info == nullptr) {
      std::string names;
      for (const auto* i : reg.All()) {
        if (i->persistent) names += (names.empty() ? "" : ", ") + i->name;
      }
      Usage("unknown index '" + index + "' (persistent: " + names + ")");
    }
    if (!info->persistent) Usage("index '" + index + "' is not persistent");
    targets.emplace_back(index, base.options);
  }

  std::vector<Job> jobs;
  bool all_ok = true;
  for (const auto& [name, opt] : targets) {
    // The topology every pool of this index attaches with (forked checks
    // inherit it; the main thread is node 0).
    const int nodes = numa_nodes > 0 ? numa_nodes : test_kinds.NumaNodes(name);
    pmindex::alloc::Topology::SetDefault(nodes > 1 ? pmindex::alloc::Topology::Simulated(nodes) : nullptr);
    const std::string numa_flag = numa_nodes > 0 ? " --numa-nodes " + std::to_string(numa_nodes) : "";
    if (mutate) {
      // One kill matrix per index config, over all the chosen workloads.
      Job j;
      j.cfg = base;
      j.cfg.index = name;
      j.cfg.options = opt;
      j.cfg.workload = wl.size() == 1 ? wl[0] : workloads;
      std::printf("pmcrash --index %s%s%s --workload %s --ops %llu %s --mode %s --budget %llu%s --mutate\n",
                  name.c_str(), opt.empty() ? "" : " --opt ", opt.c_str(), j.cfg.workload.c_str(),
                  (unsigned long long)j.cfg.ops, seed_flag.c_str(),
                  pmindex::crash::ModeName(j.cfg.mode), (unsigned long long)j.cfg.budget, numa_flag.c_str());
      std::fflush(stdout);
      j.mutated = true;
      j.seeds = seeds;
      Config c = j.cfg;
      c.workload = wl[0];
      j.mut = pmindex::crash::RunMutation(c, mutate_alloc, &std::cout, wl, seeds);
      j.stats = j.mut.baseline;
      PrintStats(j);
      PrintMutants(j.mut);
      if (!j.mut.ok()) all_ok = false;
      std::fflush(stdout);
      jobs.push_back(std::move(j));
      continue;
    }
    // Without --mutate: one run per (seed, workload).
    std::vector<std::pair<uint64_t, std::string>> runs;
    for (uint64_t seed : seeds) {
      for (const auto& w : wl) runs.emplace_back(seed, w);
    }
    for (const auto& [seed, w] : runs) {
      Job j;
      j.cfg = base;
      j.cfg.index = name;
      j.cfg.options = opt;
      j.cfg.workload = w;
      j.cfg.seed = seed;
      std::printf("pmcrash --index %s%s%s --workload %s --ops %llu --seed %llu --mode %s --budget %llu%s%s%s\n",
                  name.c_str(), opt.empty() ? "" : " --opt ", opt.c_str(), w.c_str(),
                  (unsigned long long)j.cfg.ops, (unsigned long long)j.cfg.seed,
                  pmindex::crash::ModeName(j.cfg.mode), (unsigned long long)j.cfg.budget, numa_flag.c_str(),
                  j.cfg.mutation.kind == pmindex::crash::MutKind::kNone ? "" : " --mutant ",
                  j.cfg.mutation.ToString().c_str());
      std::fflush(stdout);
      j.stats = pmindex::crash::Run(j.cfg);
      PrintStats(j);
      if (!j.stats.ok()) all_ok = false;
      std::fflush(stdout);
      jobs.push_back(std::move(j));
    }
  }
  if (!json.empty()) WriteJson(json, jobs, all_ok);
  std::printf("pmcrash: %s\n", all_ok ? "all runs clean" : "FAILURES (see above)");
  return all_ok ? 0 : 1;
}
