#include "server/resp_blocking.h"

#include <algorithm>

namespace pmindex::server {

bool BlockingRegistry::Park(const std::shared_ptr<Waiter>& w) {
  std::vector<std::shared_ptr<Waiter>> woken;
  bool served;
  {
    sync::MutexLock lock(mu_);
    for (const std::string& k : w->keys) {
      auto& q = by_key_[Key(w->db, k)];
      // A key named twice (BLPOP k k 0) queues the client once.
      if (q.empty() || q.back() != w) q.push_back(w);
    }
    w->parked = true;
    parked_.fetch_add(1, std::memory_order_seq_cst);
    ServeLocked(w->db, w->keys, &woken);
    // Read under the mutex: once it is dropped, CLIENT UNBLOCK may set it.
    served = w->done;
  }
  for (const auto& x : woken)
    if (x != w && x->wake) x->wake();
  return served;
}

void BlockingRegistry::ServeReady(int db, const std::vector<std::string>& keys) {
  if (!any()) return;
  std::vector<std::shared_ptr<Waiter>> woken;
  {
    sync::MutexLock lock(mu_);
    ServeLocked(db, keys, &woken);
  }
  for (const auto& x : woken)
    if (x->wake) x->wake();
}

void BlockingRegistry::ServeLocked(int db, std::vector<std::string> keys,
                                   std::vector<std::shared_ptr<Waiter>>* woken) {
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  // Each pass either serves (and removes) a waiter or ends a key, so this
  // ends: a served BLMOVE adds its destination, at most once per waiter.
  std::deque<std::string> work(keys.begin(), keys.end());
  while (!work.empty()) {
    const Key key(db, std::move(work.front()));
    work.pop_front();
    for (;;) {
      auto it = by_key_.find(key);
      if (it == by_key_.end()) break;
      const std::shared_ptr<Waiter> w = it->second.front();
      std::string reply;
      std::vector<std::string> pushed;
      if (!w->serve(&reply, &pushed)) break;  // the key is empty again
      w->done = true;
      w->reply = std::move(reply);
      RemoveLocked(*w);
      woken->push_back(w);
      for (std::string& p : pushed) work.push_back(std::move(p));
    }
  }
}

void BlockingRegistry::RemoveLocked(Waiter& w) {
  if (!w.parked) return;
  for (const std::string& k : w.keys) {
    auto it = by_key_.find(Key(w.db, k));
    if (it == by_key_.end()) continue;
    auto& q = it->second;
    q.erase(std::remove_if(q.begin(), q.end(), [&w](const auto& p) { return p.get() == &w; }),
            q.end());
    if (q.empty()) by_key_.erase(it);
  }
  w.parked = false;
  parked_.fetch_sub(1, std::memory_order_seq_cst);
}

bool BlockingRegistry::Cancel(Waiter& w) {
  sync::MutexLock lock(mu_);
  if (w.done) return false;
  RemoveLocked(w);
  return true;
}

bool BlockingRegistry::Unblock(uint64_t client_id, bool error) {
  std::shared_ptr<Waiter> found;
  {
    sync::MutexLock lock(mu_);
    for (const auto& [key, q] : by_key_) {
      for (const auto& w : q) {
        if (w->client_id == client_id) found = w;
      }
      if (found != nullptr) break;
    }
    if (found == nullptr) return false;
    found->done = true;
    found->reply = error ? "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
                         : found->timeout_reply;
    RemoveLocked(*found);
  }
  if (found->wake) found->wake();
  return true;
}

bool BlockingRegistry::TakeReply(Waiter& w, std::string* out) {
  sync::MutexLock lock(mu_);
  if (!w.done) return false;
  out->append(w.reply);
  return true;
}

bool BlockingRegistry::HasWaiters(int db, std::string_view key) const {
  if (!any()) return false;
  sync::MutexLock lock(mu_);
  return by_key_.count(Key(db, std::string(key))) > 0;
}

}  // namespace pmindex::server
