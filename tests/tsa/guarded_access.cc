// Input of the ctest thread_safety_negative (negative_compile.cmake), which
// compiles it with clang++ -fsyntax-only -Wthread-safety
// -Werror=thread-safety once per PMINDEX_TSA_CASE: case 0 uses every lock
// correctly and must compile; each other case breaks one rule and must be
// refused with the analysis' diagnostic for it. So the annotations of
// src/sync/mutex.h reach Clang's analysis, and a broken rule fails the
// build (scripts/check-thread-safety.sh relies on both).
#include "sync/mutex.h"

#ifndef PMINDEX_TSA_CASE
#define PMINDEX_TSA_CASE 0
#endif

namespace {

using pmindex::sync::Mutex;
using pmindex::sync::MutexLock;
using pmindex::sync::ReaderLock;
using pmindex::sync::SharedMutex;
using pmindex::sync::WriterLock;

class Account {
 public:
  void Deposit(int n) {
#if PMINDEX_TSA_CASE != 1
    MutexLock lock(mu_);
#endif
    balance_ += n;  // case 1: written without mu_
  }
  void Withdraw(int n) {
#if PMINDEX_TSA_CASE != 2
    MutexLock lock(mu_);
#endif
    WithdrawLocked(n);  // case 2: called without mu_
  }
  int Balance() {
    MutexLock lock(mu_);
    const int b = balance_;
    lock.Unlock();
#if PMINDEX_TSA_CASE == 4
    return b + balance_;  // case 4: read after the guard's early Unlock
#else
    return b;
#endif
  }
  void Rename(int id) {
#if PMINDEX_TSA_CASE == 3
    ReaderLock lock(names_mu_);  // case 3: shared where a write needs exclusive
#else
    WriterLock lock(names_mu_);
#endif
    id_ = id;
  }
  int Id() {
    ReaderLock lock(names_mu_);
    return id_;
  }

 private:
  void WithdrawLocked(int n) PMINDEX_REQUIRES(mu_) { balance_ -= n; }

  Mutex mu_;
  int balance_ PMINDEX_GUARDED_BY(mu_) = 0;
  SharedMutex names_mu_;
  int id_ PMINDEX_GUARDED_BY(names_mu_) = 0;
};

}  // namespace

int main() {
  Account a;
  a.Deposit(2);
  a.Withdraw(1);
  a.Rename(7);
  return a.Balance() + a.Id() == 8 ? 0 : 1;
}
