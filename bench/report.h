// Report helpers shared by pmbench and pmclient: medians, latency
// percentiles, number formatting for the tables, and the machine facts of
// the JSON "machine" object.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "pmindex/status.h"

namespace pmindex::bench {

struct LatencyNs {
  double p50 = 0, p90 = 0, p99 = 0, p999 = 0;
};

template <class T>
T Median(std::vector<T> v) {
  if (v.empty()) return T{};
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  if (n % 2 == 1) return v[n / 2];
  return static_cast<T>((v[n / 2 - 1] + v[n / 2]) / 2);
}

// p50/p90/p99/p999 of `samples` (sorted here), each divided by
// units_per_ns (TSC ticks per ns, or 1 for samples in ns). Nearest rank.
inline LatencyNs Percentiles(std::vector<uint64_t> samples, double units_per_ns) {
  if (samples.empty()) return {};
  std::sort(samples.begin(), samples.end());
  auto pct = [&](double p) {
    size_t k = static_cast<size_t>(p * static_cast<double>(samples.size() - 1) + 0.5);
    return static_cast<double>(samples[std::min(k, samples.size() - 1)]) / units_per_ns;
  };
  return LatencyNs{pct(0.50), pct(0.90), pct(0.99), pct(0.999)};
}

// Medians of each percentile over runs.
inline LatencyNs MedianLatency(const std::vector<LatencyNs>& runs) {
  std::vector<double> p50, p90, p99, p999;
  for (const LatencyNs& l : runs) {
    p50.push_back(l.p50);
    p90.push_back(l.p90);
    p99.push_back(l.p99);
    p999.push_back(l.p999);
  }
  return LatencyNs{Median(p50), Median(p90), Median(p99), Median(p999)};
}

// 1.23G, 4.56M, 7.8K, 12.
inline std::string Human(double v) {
  char buf[32];
  if (v >= 1e9) std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
  else if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.1fK", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

inline std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto c = line.find(':');
      if (c != std::string::npos) {
        std::string m = line.substr(c + 1);
        m.erase(0, m.find_first_not_of(' '));
        return m;
      }
    }
  }
  return "unknown";
}

inline std::string UtcNow() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// CPU seconds the calling thread has used.
inline double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Writes `text` to `path` through a temporary file renamed over it, so a
// reader never sees half a file. `what` names the file in errors ("--json").
inline Status WriteFileAtomically(const std::string& path, const std::string& text,
                                  const std::string& what) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) return Status::IOError("cannot write " + what + " " + path);
    out << text;
    if (!out) return Status::IOError("cannot write " + what + " " + path);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::IOError("cannot write " + what + " " + path + ": " + ec.message());
  return Status::OK();
}

}  // namespace pmindex::bench
