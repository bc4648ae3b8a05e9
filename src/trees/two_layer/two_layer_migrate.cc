// NOBtree's leaf migration (paper 003, section III.D; docs/layout/nobtree.md):
// the access statistics feed, the coordinator, the move itself and its log.
#include <algorithm>

#include "alloc/numa_meter.h"
#include "common/sorted_node.h"
#include "pm/persist.h"
#include "pm/pptr_decode.h"
#include "trees/two_layer/two_layer.h"

namespace pmindex::tlbtree {

namespace {

using sorted_node::Ld;

constexpr size_t kQueueCap = 4096;  // judgments beyond it are dropped (the coordinator is behind)

uint32_t Count(uint64_t s) { return std::min(st::Count(s), kSlots); }
uint32_t SlotOf(uint64_t s, uint32_t i) { return std::min(st::Slot(s, i), kSlots - 1); }

// An 8-byte pointer word repointed from `from` to `to` (flushed, not fenced).
void Repoint(uint64_t* word, uint64_t to) {
  pm::store(word, to, std::memory_order_release);
  pm::flush(word, sizeof(uint64_t));
}

}  // namespace

void TwoLayerTree::NotePath(const uint64_t* path, Key k) {
  Tally& t = Mine();
  if (++t.ops % cfg_.sample != 0) return;
  alloc::Allocator& a = *env_.alloc;
  const int from = a.topology().node_of_this_thread();
  // Every node of the path but the first root (root slot 0 names it).
  for (uint32_t level = 0; level < cfg_.height; ++level) {
    const uint64_t raw = path[level];
    if (level + 1 == cfg_.height && raw == env_.pool->root(0)) continue;
    const int to = access_->Record(raw, from, a.NodeOfAddress(N(raw)), cfg_.hot);
    if (to < 0) continue;
    if (cfg_.migration == Migration::kInline) {
      MigrateNode(raw, level, k, to);
      continue;
    }
    {
      sync::MutexLock g(queue_mu_);
      if (stop_ || queue_.size() >= kQueueCap) return;
      queue_.push_back(Task{raw, k, level, to});
    }
    migrations_queued_.fetch_add(1, std::memory_order_relaxed);
    queue_cv_.notify_all();
  }
}

bool TwoLayerTree::MigrateNodeOf(Key k, uint32_t level, int node) {
  if (node < 0 || node >= env_.alloc->topology().nodes() || level >= cfg_.height) return false;
  uint64_t path[kMaxHeight] = {};
  {
    alloc::EpochDomain::Guard g(top_epochs_);
    uint32_t hops = 0;
    Descend(k, path, &hops);
  }
  return MigrateNode(path[level], level, k, node);
}

// Where the node a move takes is linked, and the latches the move holds.
struct TwoLayerTree::MoveSite {
  uint64_t raw = 0;
  uint32_t level = 0;
  bool root = false;
  uint64_t path[kMaxHeight] = {};  // the descent for k: path[level + 1] is the parent
  Low lows[kMaxHeight];
  uint64_t prev = 0;                // the left neighbour on the level (0: the first node)
  Node* x = nullptr;                // the node
  Node* p = nullptr;                // its parent (none for a root)
  Node* w = nullptr;                // its left neighbour (none for a level's first node)
  uint64_t xs = 0, ps = 0, ws = 0;  // their latched states
  uint64_t slot = 0;                // the parent's word that names x (MigrationLog::slot)
};

bool TwoLayerTree::MigrateNode(uint64_t raw, uint32_t level, Key k, int node) {
  if (level >= cfg_.height) return false;
  MoveSite m;
  m.raw = raw;
  m.level = level;
  m.root = level + 1 == cfg_.height;
  // A root is named by the top layers too: its move excludes their
  // rebuilds and inserts (lock order: top layers, then moves).
  if (m.root) {
    sync::MutexLock top(top_mu_);
    return MoveLocked(&m, k, node);
  }
  return MoveLocked(&m, k, node);
}

bool TwoLayerTree::MoveLocked(MoveSite* site, Key k, int node) {
  MoveSite& m = *site;
  const uint64_t raw = m.raw;
  const uint32_t level = m.level;
  sync::MutexLock one(migrate_mu_);
  if (log_ == 0 && !MakeLog().ok()) {  // a crash in create came before the log
    migration_aborts_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  alloc::Allocator::EpochGuard ag(*env_.alloc);
  alloc::EpochDomain::Guard g(top_epochs_);
  auto give_up = [&] {
    migration_aborts_.fetch_add(1, std::memory_order_relaxed);
    return false;
  };
  if (!LocateMove(&m, k) || !LatchMove(&m)) return give_up();
  if (!CheckMove(&m)) {
    ReleaseMove(m, false);
    return give_up();
  }
  Result<PPtr> a = AllocNode(level, node);
  if (!a.ok()) {
    ReleaseMove(m, false);
    return give_up();
  }
  const uint64_t yraw = a.value().raw();
  CommitMove(m, yraw);
  // 5. The old node: readers may still be in it (its records are the
  //    ones the copy has); a writer that latches it starts over.
  pm::store(&m.x->tag, kMovedTag);
  if (m.root) {  // the top layers' entry for the subindex (DRAM)
    for (uint32_t i = 0; i < ntops_; ++i)
      tops_[i].load(std::memory_order_relaxed)->Replace(m.lows[level].key, raw, yraw);
  }
  ReleaseMove(m, true);
  env_.alloc->Retire(PPtr(raw));
  migrations_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool TwoLayerTree::LocateMove(MoveSite* m, Key k) const {
  // Where the node is linked: its parent (path[level + 1]; a root has
  // none) and, unless it is the first of its level, the node of its level
  // holding the key just below its low key.
  const uint32_t level = m->level;
  uint32_t hops = 0;
  Descend(k, m->path, &hops, m->lows);
  if (m->path[level] != m->raw || (m->root && m->raw == env_.pool->root(0))) return false;
  if (m->lows[level].has) {
    if (m->lows[level].key == 0) return false;
    uint64_t left[kMaxHeight] = {};
    Descend(m->lows[level].key - 1, left, &hops);
    m->prev = left[level];
    if (m->prev == m->raw) return false;
  }
  m->x = N(m->raw);
  m->p = m->root ? nullptr : N(m->path[level + 1]);
  m->w = m->prev != 0 ? N(m->prev) : nullptr;
  return true;
}

bool TwoLayerTree::LatchMove(MoveSite* m) const {
  // Three latches, each taken only if free: a writer holds one latch at a
  // time and never waits while holding it, and this never waits at all.
  if (m->p != nullptr && !TryLatch(m->p, &m->ps)) return false;
  if (m->w != nullptr && !TryLatch(m->w, &m->ws)) {
    if (m->p != nullptr) Unlatch(m->p, m->ps);
    return false;
  }
  if (!TryLatch(m->x, &m->xs)) {
    if (m->w != nullptr) Unlatch(m->w, m->ws);
    if (m->p != nullptr) Unlatch(m->p, m->ps);
    return false;
  }
  return true;
}

void TwoLayerTree::ReleaseMove(const MoveSite& m, bool moved) const {
  // A move bumps every version, so a reader that read a pointer while it
  // changed reads the node again.
  const auto unlatch = [&](Node* n, uint64_t s) {
    pm::store(&n->state, (moved ? st::Bump(s) : s) & ~st::kLatch, std::memory_order_release);
  };
  unlatch(m.x, m.xs);
  if (m.w != nullptr) unlatch(m.w, m.ws);
  if (m.p != nullptr) unlatch(m.p, m.ps);
}

bool TwoLayerTree::CheckMove(MoveSite* m) const {
  // Under the latches nothing below changes: check what the descents saw.
  const Node* x = m->x;
  const Node* p = m->p;
  const Node* w = m->w;
  uint64_t slot = ~uint64_t{0};
  if (p == nullptr) {
    slot = kNoParentSlot;
  } else if (Ld(p->leftmost) == m->raw) {
    slot = kLeftmostSlot;
  } else {
    for (uint32_t i = 0, n = Count(m->ps); i < n; ++i)
      if (Ld(p->rec[SlotOf(m->ps, i)].val) == m->raw) slot = SlotOf(m->ps, i);
  }
  m->slot = slot;
  const uint32_t n = Count(m->xs);
  const bool linked = slot != ~uint64_t{0} &&
                      (w == nullptr || Ld(w->sib[st::Sib(m->ws)].ptr) == m->raw) &&
                      (!m->root || w != nullptr);
  return linked && !(m->level == 0 && n == 0) && Ld(x->tag) == kNodeTag &&
         sorted_node::Ld32(x->level) == m->level && (p == nullptr || Ld(p->tag) == kNodeTag) &&
         (w == nullptr || Ld(w->tag) == kNodeTag);
}

void TwoLayerTree::CommitMove(const MoveSite& m, uint64_t yraw) {
  const Node* x = m.x;
  // 1. The copy, complete and durable (unreachable until step 3).
  const uint32_t n = Count(m.xs);
  Rec recs[kSlots];
  for (uint32_t i = 0; i < n; ++i) {
    const Rec& r = x->rec[SlotOf(m.xs, i)];
    recs[i] = Rec{Ld(r.key), Ld(r.val)};
  }
  const SibRec& live = x->sib[st::Sib(m.xs)];
  Node* y = N(yraw);
  InitNode(y, m.level, Ld(x->leftmost), SibRec{Ld(live.key), Ld(live.ptr)},
           std::span<const Rec>(recs, n));
  pm::flush(y, offsetof(Node, rec) + n * sizeof(Rec));
  pm::fence();  // the copy durable before the log can name it
  // 2. The log: what to redo, then armed. All of it is one line, whose
  //    stores reach PM in order: one flush, and `armed` never persists
  //    without the fields stored before it.
  auto* lg = env_.pool->to_ptr<MigrationLog>(PPtr(log_));
  pm::store(&lg->from, m.raw);
  pm::store(&lg->to, yraw);
  pm::store(&lg->parent, m.root ? uint64_t{0} : m.path[m.level + 1]);
  pm::store(&lg->slot, m.slot);
  pm::store(&lg->prev, m.prev);
  pm::store(&lg->armed, kLogArmed);
  pm::flush(lg, sizeof(MigrationLog));
  pm::fence();
  // 3. The two pointers (a crash between them: open redoes both).
  if (m.p != nullptr)
    Repoint(m.slot == kLeftmostSlot ? &m.p->leftmost : &m.p->rec[m.slot].val, yraw);
  if (m.w != nullptr) Repoint(&m.w->sib[st::Sib(m.ws)].ptr, yraw);
  pm::fence();
  // 4. Disarmed, without a flush of its own: the log is one line, whose
  //    stores reach PM in order, so the next move's log stores cannot
  //    persist before this one; until the line is flushed again a crash
  //    redoes this finished move, which changes nothing (the mutation run
  //    found the flush and fence that were here redundant).
  pm::store(&lg->armed, uint64_t{0});
}

// ------------------------------------------------------------------ coordinator

void TwoLayerTree::StartCoordinator() {
  if (cfg_.migration != Migration::kBackground || coordinator_.joinable()) return;
  {
    sync::MutexLock g(queue_mu_);
    stop_ = false;
  }
  coordinator_ = std::thread([this] { CoordinatorLoop(); });
}

void TwoLayerTree::CoordinatorLoop() {
  // Simulated nodes: the coordinator takes node 0 itself rather than the
  // next node in turn, which belongs to the next operation thread.
  alloc::Topology& topo = env_.alloc->topology();
  if (topo.simulated()) IgnoreError(topo.place_this_thread(0), "node 0 always exists");
  sync::MutexLock l(queue_mu_);
  for (;;) {
    // A loop, not a predicate: the analysis sees the lock held here.
    while (!stop_ && queue_.empty()) queue_cv_.wait(l.Native());
    if (stop_) return;
    const Task t = queue_.front();
    queue_.pop_front();
    busy_ = true;
    l.Unlock();
    MigrateNode(t.raw, t.level, t.key, t.node);
    l.Lock();
    busy_ = false;
    queue_cv_.notify_all();
  }
}

void TwoLayerTree::StopCoordinator() {
  {
    sync::MutexLock g(queue_mu_);
    stop_ = true;
    queue_.clear();
  }
  queue_cv_.notify_all();
  if (coordinator_.joinable()) coordinator_.join();
}

void TwoLayerTree::DrainMigrations() {
  sync::MutexLock l(queue_mu_);
  if (!coordinator_.joinable()) return;
  while (!stop_ && (!queue_.empty() || busy_)) queue_cv_.wait(l.Native());
}

void TwoLayerTree::quiesce() {
  if (!relocates_) return;
  DrainMigrations();
  sync::MutexLock m(migrate_mu_);
  env_.alloc->Reclaim();  // no operation runs: every moved or merged node goes back
}

// ------------------------------------------------------------------ the log at open

Status TwoLayerTree::MakeLog() {
  Result<PPtr> a = env_.alloc->Alloc(sizeof(MigrationLog));
  if (!a.ok()) return a.status();
  auto* lg = env_.pool->to_ptr<MigrationLog>(a.value());
  for (uint64_t* w : {&lg->armed, &lg->from, &lg->to, &lg->parent, &lg->slot, &lg->prev, &lg->pad})
    pm::store(w, uint64_t{0});
  pm::store(&lg->tag, kLogTag);
  pm::flush(lg, sizeof(MigrationLog));
  pm::fence();  // the idle log durable before the root slot names it
  env_.pool->WriteRoot(1, a.value().raw());
  log_ = a.value().raw();
  return Status::OK();
}

Status TwoLayerTree::ReadLog() {
  if (cfg_.migration == Migration::kOff) return Status::OK();
  const uint64_t raw = env_.pool->root(1);
  if (raw == 0) return Status::OK();  // a crash in create before the log: the first move writes it
  auto d = pm::Decode<MigrationLog>(*env_.pool, raw, sizeof(MigrationLog), 64, name_ + ": migration log (root slot 1)");
  if (!d.ok()) return d.status();
  const MigrationLog* lg = d.value();
  if (Ld(lg->tag) != kLogTag) return Status::Corruption(name_ + ": the migration log (root slot 1) has no log tag");
  log_ = raw;
  const uint64_t armed = Ld(lg->armed);
  if (armed == 0) return Status::OK();
  if (armed != kLogArmed) return Status::Corruption(name_ + ": the migration log's armed word is neither idle nor armed");
  const uint64_t slot = Ld(lg->slot);
  const bool root = slot == kNoParentSlot;
  if (slot != kLeftmostSlot && !root && slot >= kSlots)
    return Status::Corruption(name_ + ": the migration log names no parent slot");
  if (root != (Ld(lg->parent) == 0) || (root && Ld(lg->prev) == 0))
    return Status::Corruption(name_ + ": the migration log's parent and slot disagree");
  for (uint64_t node : {Ld(lg->from), Ld(lg->to), Ld(lg->parent), Ld(lg->prev)}) {
    if (node == 0) continue;
    auto n = pm::Decode<Node>(*env_.pool, node, kNodeBytes, 64, name_ + ": a node of the migration log");
    if (!n.ok()) return n.status();
  }
  // Walk reads the pointers as the redo will leave them.
  remap_from_ = Ld(lg->from);
  remap_to_ = Ld(lg->to);
  return Status::OK();
}

void TwoLayerTree::FinishLog() {
  if (remap_from_ == 0) return;
  auto* lg = env_.pool->to_ptr<MigrationLog>(PPtr(log_));
  const uint64_t slot = Ld(lg->slot);
  if (slot != kNoParentSlot) {
    Node* p = N(Ld(lg->parent));
    uint64_t* pp = slot == kLeftmostSlot ? &p->leftmost : &p->rec[slot].val;
    if (Ld(*pp) == remap_from_) Repoint(pp, remap_to_);
  }
  if (Ld(lg->prev) != 0) {
    Node* w = N(Ld(lg->prev));
    uint64_t* wp = &w->sib[st::Sib(Ld(w->state))].ptr;
    if (Ld(*wp) == remap_from_) Repoint(wp, remap_to_);
  }
  pm::fence();
  pm::store(&lg->armed, uint64_t{0});
  pm::flush(&lg->armed, sizeof(uint64_t));
  pm::fence();
  remap_from_ = remap_to_ = 0;
}

}  // namespace pmindex::tlbtree
