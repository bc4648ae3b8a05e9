#include "server/maintenance.h"

#include <chrono>

#include "server/collections.h"

namespace pmindex::server {

Maintenance::Maintenance(Databases& dbs, Stats& stats, Items::Clock now_ms, Options options)
    : dbs_(dbs), stats_(stats), now_ms_(std::move(now_ms)), options_(options) {}

Maintenance::~Maintenance() { Stop(); }

void Maintenance::Start() {
  sync::MutexLock lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void Maintenance::Stop() {
  {
    sync::MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Maintenance::Run() {
  sync::MutexLock lock(mu_);
  while (!stop_) {
    lock.Unlock();
    Cycle();
    lock.Lock();
    // Sleeps one interval or until Stop (a spurious wake-up sleeps on).
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.interval_ms);
    while (!stop_ && cv_.wait_until(lock.Native(), until) == std::cv_status::no_timeout) {
    }
  }
}

Maintenance::Work Maintenance::Cycle() {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(options_.busy_ms);
  Work work;
  while (dbs_.reclaim_pending() && Clock::now() < deadline) {
    work.reclaimed += dbs_.ReclaimStep(options_.batch);
  }
  while (Clock::now() < deadline) {
    const size_t n = dbs_.ReclaimGarbageStep(options_.batch);
    work.garbage += n;
    if (n == 0) break;
  }
  if (dbs_.AnyExpiry()) work.expired = ExpireSweep(deadline);
  Stats::Add(stats_.expired_keys, work.expired);
  Stats::Add(stats_.reclaimed_keys, work.reclaimed + work.garbage);
  return work;
}

size_t Maintenance::ExpireSweep(std::chrono::steady_clock::time_point deadline) {
  const int64_t now = now_ms_();
  auto expired = [now](std::string_view v) {
    return item_codec::ExpiredAt(v, now) || collection_codec::ExpiredAt(v, now);
  };
  size_t examined = 0, total = 0;
  for (;;) {
    const size_t removed = dbs_.ExpireStep(options_.batch, expired);
    total += removed;
    examined += options_.batch;
    const bool piling_up = removed * 4 > options_.batch;
    if ((examined >= options_.expire_keys_per_cycle && !piling_up) ||
        std::chrono::steady_clock::now() >= deadline)
      break;
  }
  return total;
}

}  // namespace pmindex::server
