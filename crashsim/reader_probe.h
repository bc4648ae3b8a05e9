// A concurrent reader for the crash simulator's read-visibility check
// (docs/crash-testing.md "Read visibility").
//
// At a crash point the writer (the simulator's only thread) is stopped
// inside an operation. Run() hands a read to a second thread and waits
// until that read either returns or starts to wait for the writer. Waiting
// is detected, not timed: the probe's thread marks itself, and the waits a
// reader of this library can make go through calls that reader_probe.cc
// interposes in the pmcrash binaries (sched_yield, which every spin loop of
// the trees and the store reaches after a few spins, and the blocking
// acquisition of a pthread reader-writer lock, which std::shared_mutex
// uses). A read that returned while the writer stood still returned what a
// concurrent reader could see at that instant; a read that had to wait
// would return only after the writer moved on, so its result is discarded.
// A read that neither returns nor reaches one of those calls within
// kSafetySeconds (a wait the probe does not know) counts as blocked too:
// timing can only hide an observation, never invent one.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

namespace pmindex::crash {

class ReaderProbe {
 public:
  enum class Outcome {
    kReturned,  // the read returned while the writer was stopped: *saw is its result
    kBlocked,   // it waited for the writer (its late result is dropped)
    kBusy,      // an earlier read still waits for the writer: no read now
  };
  static constexpr double kSafetySeconds = 5.0;

  ReaderProbe();
  ~ReaderProbe();
  ReaderProbe(const ReaderProbe&) = delete;
  ReaderProbe& operator=(const ReaderProbe&) = delete;

  Outcome Run(std::function<bool()> read, bool* saw);
  // Waits until the probe's thread holds no read (call once the writer's
  // operation has returned: a read that waited for it then finishes).
  void Drain();
  uint64_t safety_timeouts() const { return safety_timeouts_; }

 private:
  void Loop();

  // 0 idle, 1 reading (window open), 2 returned in the window, 3 waiting
  // for the writer (seen by the interposed call), 4 reading late.
  std::atomic<int> phase_{0};
  std::atomic<uint64_t> job_{0};
  std::atomic<bool> stop_{false};
  std::function<bool()> read_;
  bool saw_ = false;
  uint64_t safety_timeouts_ = 0;
  std::thread thread_;
};

}  // namespace pmindex::crash
