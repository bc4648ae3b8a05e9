#include "trees/cddstree/cddstree.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

#include "pm/pool_format.h"
#include "pm/pptr_decode.h"
#include "util/check.h"

namespace pmindex::cddstree {

namespace {
std::string Hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}
bool Same(const Entry& a, const Entry& b) {
  return a.key == b.key && a.val == b.val && a.start == b.start && a.end == b.end;
}

// The repairs recovery makes in one node, through set(word, value): PM
// stores at repair time, plain stores into a DRAM copy when validation
// computes what the repaired node will hold.
template <class Set>
void RepairEntries(Node* x, uint64_t v, Set set) {
  if (x->torn != 0 && x->e[x->torn - 1].end != 0) {
    // The slot a shift was overwriting: any prefix of its new words may
    // have persisted; its old and new contents both survive in the
    // neighbours. Done before the duplicate rule, which would otherwise
    // drop the intact left neighbour when the copy happened to complete.
    set(&x->e[x->torn - 1].end, uint64_t{0});
  }
  for (uint32_t i = 0; i < x->n; ++i) {
    Entry& e = x->e[i];
    if (e.start > v && e.end != 0) {
      set(&e.end, uint64_t{0});  // uncommitted insert: never live
    } else if (e.end != Entry::kInf && e.end > v && e.end != 0) {
      set(&e.end, Entry::kInf);  // uncommitted delete: live again
    }
    if (i > 0 && Same(x->e[i - 1], e) && e.live(v)) {
      set(&x->e[i - 1].end, uint64_t{0});  // copy left by an interrupted shift
    }
  }
}

// verify()'s checks of one node's entries (x: the node as recovery leaves
// it, v: the global version), shared by verify() and by Open's validation
// of the repaired DRAM copies (recovery refuses what verify
// would reject, such as a zeroed node, which reads as an inner node
// without entries). *lv receives the live slots in key order.
Status CheckEntries(const Node* x, uint64_t raw, uint64_t v, Key lo, bool has_hi, Key hi,
                    std::vector<uint32_t>* lv) {
  if (x->torn != 0 && x->e[x->torn - 1].end != 0)
    return Status::Corruption("cddstree: shift marker names a slot that is not neutralized in " + Hex(raw));
  lv->clear();
  for (uint32_t i = 0; i < x->n; ++i) {
    const Entry& e = x->e[i];
    if (i > 0 && x->e[i - 1].key > e.key) return Status::Corruption("cddstree: entries not sorted in " + Hex(raw));
    if (e.start > v && e.end != 0) return Status::Corruption("cddstree: uncommitted entry in " + Hex(raw));
    if (e.end != Entry::kInf && e.end > v) return Status::Corruption("cddstree: uncommitted end in " + Hex(raw));
    if (!e.live(v)) continue;
    if (e.key < lo || (has_hi && e.key >= hi))
      return Status::Corruption("cddstree: key " + std::to_string(e.key) + " outside bounds in " + Hex(raw));
    if (!lv->empty() && x->e[lv->back()].key == e.key)
      return Status::Corruption("cddstree: duplicate live key in " + Hex(raw));
    lv->push_back(i);
  }
  if (!x->leaf && lv->empty()) return Status::Corruption("cddstree: inner node without live entries " + Hex(raw));
  return Status::OK();
}
}  // namespace

CddsTree::CddsTree(const IndexEnv& env, uint32_t node_bytes)
    : env_(env), bytes_(node_bytes), cap_(Node::CapacityFor(node_bytes)) {}

Result<std::unique_ptr<Index>> CddsTree::Create(const IndexEnv& env, uint32_t node_bytes) {
  std::unique_ptr<CddsTree> t(new CddsTree(env, node_bytes));
  Result<PPtr> m = env.alloc->Alloc(sizeof(Meta));
  if (!m.ok()) return m.status();
  Result<PPtr> root = env.alloc->Alloc(node_bytes);
  if (!root.ok()) return root.status();
  Node* r = t->N(root.value().raw());
  pm::store(&r->n, 0u);
  pm::store(&r->leaf, 1u);
  pm::store(&r->torn, uint64_t{0});
  pm::flush(r, 16);
  t->meta_ = env.pool->to_ptr<Meta>(m.value());
  pm::store(t->meta_, Meta{kTag, root.value().raw(), 1, node_bytes});
  pm::flush(t->meta_, sizeof(Meta));
  pm::fence();  // meta and root durable before slot 0 points to them
  env.pool->WriteRoot(0, m.value().raw());
  t->closed_ = false;
  return std::unique_ptr<Index>(std::move(t));
}

Status CddsTree::CheckNode(uint64_t raw) const {
  auto d = pm::Decode<Node>(*env_.pool, raw, bytes_, 64, "cddstree: node");
  if (!d.ok()) return d.status();
  Node* x = d.value();
  if (x->leaf > 1 || x->n > cap_ || x->torn > x->n)
    return Status::Corruption("cddstree: node " + Hex(raw) + " has a bad header");
  return Status::OK();
}

Status CddsTree::Validate(uint64_t raw, uint32_t depth, Key lo, bool has_hi, Key hi, uint32_t* leaf_depth,
                          uint64_t* entries, common::ContentSum* content, std::vector<uint64_t>* nodes) const {
  if (depth >= kMaxHeight) return Status::Corruption("cddstree: tree deeper than the limit");
  PMINDEX_RETURN_IF_ERROR(CheckNode(raw));
  nodes->push_back(raw);
  // A DRAM copy of the node with the repairs applied: the children that
  // will be live after recovery are the ones validated.
  std::vector<uint64_t> copy(bytes_ / 8);
  std::memcpy(copy.data(), N(raw), bytes_);
  Node* x = reinterpret_cast<Node*>(copy.data());
  const uint64_t v = gv();
  RepairEntries(x, v, [](uint64_t* w, uint64_t val) { *w = val; });
  // The repaired copy must pass verify()'s checks: the repairs leave a
  // tree verify accepts after any crash (pmcrash checks it), so what fails
  // here is damage. A salvage copy (IndexEnv::salvage) keeps what it can
  // reach: SalvageCut has already cut every live entry to a node that
  // fails its checks, so only the collection runs there.
  if (env_.salvage) {
    if (!x->leaf) {
      for (uint32_t i = 0; i < x->n; ++i)
        if (x->e[i].live(v))
          PMINDEX_RETURN_IF_ERROR(Validate(x->e[i].val, depth + 1, 0, false, 0, leaf_depth, entries, content, nodes));
    }
    return Status::OK();
  }
  std::vector<uint32_t> lv;
  PMINDEX_RETURN_IF_ERROR(CheckEntries(x, raw, v, lo, has_hi, hi, &lv));
  if (x->leaf) {
    if (*leaf_depth == UINT32_MAX) *leaf_depth = depth;
    if (*leaf_depth != depth) return Status::Corruption("cddstree: leaves at different depths");
    *entries += lv.size();
    for (uint32_t i : lv) content->Add(x->e[i].key, x->e[i].val);
    return Status::OK();
  }
  for (size_t j = 0; j < lv.size(); ++j) {
    const Key clo = j == 0 ? lo : x->e[lv[j]].key;
    const bool chh = j + 1 < lv.size() || has_hi;
    const Key chi = j + 1 < lv.size() ? x->e[lv[j + 1]].key : hi;
    PMINDEX_RETURN_IF_ERROR(Validate(x->e[lv[j]].val, depth + 1, clo, chh, chi, leaf_depth, entries, content, nodes));
  }
  return Status::OK();
}

bool CddsTree::SalvageCut(uint64_t raw, uint32_t depth, std::unordered_set<uint64_t>* seen,
                          uint64_t* cut) {
  if (depth >= kMaxHeight || !CheckNode(raw).ok() || !seen->insert(raw).second) return false;
  Node* x = N(raw);
  const uint64_t v = gv();
  // The copy is written from here on: the repairs first, so that the cuts
  // below see the entries that stay live (Recover repeats them, a no-op).
  RepairEntries(x, v, [](uint64_t* w, uint64_t val) { pm::store(w, val); });
  if (x->leaf) return true;
  bool any = false;
  for (uint32_t i = 0; i < x->n; ++i) {
    if (!x->e[i].live(v)) continue;
    if (SalvageCut(x->e[i].val, depth + 1, seen, cut)) {
      any = true;
    } else {
      pm::store(&x->e[i].end, uint64_t{0});  // dead, as recovery's neutralized entries
      ++*cut;
    }
  }
  // An inner node without a live entry (a zeroed node reads as one) routes
  // nowhere: lookup, stats and scan descend through a live entry.
  return any;
}

Status CddsTree::Recover(uint64_t raw, uint32_t depth) {
  if (depth >= kMaxHeight) return Status::Corruption("cddstree: tree deeper than the limit");
  PMINDEX_RETURN_IF_ERROR(CheckNode(raw));
  Node* x = N(raw);
  const uint64_t v = gv();
  RepairEntries(x, v, [](uint64_t* w, uint64_t val) {
    pm::store(w, val);
    pm::flush(w, 8);
  });
  if (!x->leaf) {
    for (uint32_t i = 0; i < x->n; ++i)
      if (x->e[i].live(v)) PMINDEX_RETURN_IF_ERROR(Recover(x->e[i].val, depth + 1));
  }
  return Status::OK();
}

Result<std::unique_ptr<Index>> CddsTree::Open(const IndexEnv& env, uint32_t node_bytes) {
  std::unique_ptr<CddsTree> t(new CddsTree(env, node_bytes));
  Pool* pool = env.pool;
  uint64_t m = pool->root(0);
  PPtr mp(m);
  auto md = pm::Decode<Meta>(*pool, m, sizeof(Meta), alignof(Meta), "cddstree: meta block (root slot 0)");
  if (!md.ok()) return md.status();
  t->meta_ = md.value();
  if (t->meta_->tag != kTag || t->meta_->node_bytes != node_bytes)
    return Status::Corruption("cddstree: bad meta block");
  if (env.salvage) {
    // A salvage copy (in memory, IndexEnv::salvage) keeps every subtree
    // that passes the node checks and cuts the live entries to the others
    // (a bad pointer or header, a zeroed node, a node reached twice, a
    // path deeper than the limit), writing the cuts into the copy, so that
    // every walk of the copy (lookup, scan, stats, for_each_block) reaches
    // only nodes that passed them.
    std::unordered_set<uint64_t> seen;
    uint64_t cut = 0;
    if (!t->SalvageCut(t->meta_->root, 0, &seen, &cut))
      return Status::Corruption("cddstree: the root node " + Hex(t->meta_->root) +
                                " fails its checks; nothing is reachable");
    t->salvage_cuts_ = cut;
  }
  // Validation, reads only (a refused open writes nothing): every node reachable through the
  // entries that will be live after the repairs, and the allocator's
  // acceptance of every block; then the repairs.
  std::vector<uint64_t> nodes{mp.raw()};
  uint32_t leaf_depth = UINT32_MAX;
  uint64_t entries = 0;
  common::ContentSum content(env);  // visits the pairs too (IndexEnv::pairs)
  PMINDEX_RETURN_IF_ERROR(
      t->Validate(t->meta_->root, 0, 0, false, 0, &leaf_depth, &entries, &content, &nodes));
  // A cleanly closed pool holds what its close recorded (a zeroed leaf
  // reads as a valid empty node only if its parent's entry for it is lost
  // too; this catches the rest). Salvage copies skip it.
  if (pool->was_clean() && !env.salvage && pool->root(pm::kCleanCloseSlot) != 0) {
    uint64_t leaves = 0;
    for (size_t i = 1; i < nodes.size(); ++i) leaves += t->N(nodes[i])->leaf;
    const uint64_t rec = pool->root(pm::kCleanCloseSlot);
    if (pm::CleanCloseRecord(entries, leaves) != rec)
      return Status::Corruption("cddstree: the pool was closed cleanly with " +
                                std::to_string(pm::CleanCloseEntries(rec)) + " entries in " +
                                std::to_string(pm::CleanCloseNodes(rec)) + " leaves, but the tree holds " +
                                std::to_string(entries) + " in " + std::to_string(leaves) +
                                " (damaged nodes); nothing was changed");
  }
  // Then the pairs themselves (after the counts: a more precise message).
  PMINDEX_RETURN_IF_ERROR(common::CheckContentRecord(*pool, env.salvage, content, "cddstree"));
  for (uint64_t n : nodes) env.alloc->MarkReachable(PPtr(n));
  for (uint64_t n : nodes)
    if (!env.alloc->IsLive(PPtr(n)))
      return Status::Corruption("cddstree: block " + Hex(n) + " is not an allocated block");
  PMINDEX_RETURN_IF_ERROR(env.alloc->CheckRecoveryBound());  // before any write
  PMINDEX_RETURN_IF_ERROR(env.pool->MarkInUse());
  PMINDEX_RETURN_IF_ERROR(t->Recover(t->meta_->root, 0));
  pm::fence();  // repairs durable before new versions are written
  t->closed_ = false;
  return std::unique_ptr<Index>(std::move(t));
}

int CddsTree::Route(Node* x, Key k) const {
  const uint64_t v = gv();
  int best = -1, first = -1;
  for (uint32_t i = 0; i < x->n; ++i) {
    const Entry& e = x->e[i];
    if (!e.live(v)) continue;
    if (first < 0) first = static_cast<int>(i);
    if (e.key <= k) best = static_cast<int>(i); else break;
  }
  return best >= 0 ? best : first;
}

int CddsTree::FindLive(Node* x, Key k) const {
  const uint64_t v = gv();
  uint32_t lo = 0, hi = x->n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (x->e[mid].key < k) lo = mid + 1; else hi = mid;
  }
  for (uint32_t i = lo; i < x->n && x->e[i].key == k; ++i)
    if (x->e[i].live(v)) return static_cast<int>(i);
  return -1;
}

std::optional<Value> CddsTree::lookup(Key k) {
  sync::ReaderLock g(mu_);
  Node* x = N(meta_->root);
  pm::ModelRead(x, Node::kHeader + sizeof(Entry) * x->n);
  while (!x->leaf) {
    x = N(x->e[Route(x, k)].val);
    pm::ModelRead(x, Node::kHeader + sizeof(Entry) * x->n);
  }
  int i = FindLive(x, k);
  if (i < 0) return std::nullopt;
  return x->e[i].val;
}

void CddsTree::ShiftInsert(Node* x, const Entry& e) {
  uint32_t n = x->n;
  uint32_t p = n;
  while (p > 0 && x->e[p - 1].key > e.key) --p;
  if (p < n) {
    // Copy the last entry into the free slot and cover it with n first, so
    // no entry is ever outside n while the others shift. A torn copy here
    // is harmless: the slot is outside n until the fence.
    pm::store(&x->e[n], x->e[n - 1]);
    pm::flush(&x->e[n], sizeof(Entry));
    pm::fence();
    // n covers the copy before slot n-1 (inside n) changes: n shares line 0
    // with the marker, and stores to one line persist in program order, so
    // the marker's flush and fence below make n+1 durable no later than
    // torn = n (a separate flush and fence here are redundant; pmcrash
    // --mutate found no crash state needing them).
    pm::store(&x->n, n + 1);
    // One slot at a time from the end; slot j's old content is a copy of
    // slot j+1 and its new one is still in slot j-1 (or is the uncommitted
    // new entry), so recovery may neutralize slot j whenever the marker
    // names it.
    for (uint32_t j = n - 1;; --j) {
      const Entry src = j > p ? x->e[j - 1] : e;
      pm::store(&x->torn, uint64_t{j} + 1);
      pm::flush(&x->torn, 8);
      pm::fence();  // marker durable before any word of slot j changes
      pm::store(&x->e[j], src);
      pm::flush(&x->e[j], sizeof(Entry));
      // Slot j complete before the marker moves off it (and so before its
      // source, slot j-1, is overwritten).
      pm::fence();
      if (j == p) break;
    }
    // Made durable by Commit's fence; until then a crash leaves the new
    // entry uncommitted, so neutralizing it through the marker is right.
    pm::store(&x->torn, uint64_t{0});
    pm::flush(&x->torn, 8);
  } else {
    pm::store(&x->e[n], e);
    pm::flush(&x->e[n], sizeof(Entry));
    pm::fence();  // the entry is durable before n covers it
    pm::store(&x->n, n + 1);
    pm::flush(&x->n, 4);
  }
}

void CddsTree::Commit(uint64_t nv) {
  // Every entry of version nv durable before gv makes it visible.
  pm::fence();
  pm::naw(&meta_->gv, nv);
}

Result<bool> CddsTree::MakeRoom(Key k) {
  uint64_t root = meta_->root;
  Node* r = N(root);
  if (r->leaf ? r->n >= cap_ : r->n + 2 > cap_) {
    std::vector<Entry> live;
    for (uint32_t i = 0; i < r->n; ++i)
      if (r->e[i].live(gv())) live.push_back({r->e[i].key, r->e[i].val, r->e[i].start, Entry::kInf});
    Result<PPtr> nr = env_.alloc->Alloc(bytes_);
    if (!nr.ok()) return nr.status();
    Node* x = N(nr.value().raw());
    const bool compact = r->leaf ? live.size() * 2 < cap_ : live.size() + 2 <= cap_;
    if (compact) {
      // Enough dead entries: a compacted copy of the root replaces it
      // (garbage collection of versions at the root, which has no parent).
      pm::store(&x->n, static_cast<uint32_t>(live.size()));
      pm::store(&x->leaf, r->leaf);
      pm::store(&x->torn, uint64_t{0});
      if (!live.empty()) pm::copy(x->e, live.data(), live.size() * sizeof(Entry));
      pm::flush(x, Node::kHeader + live.size() * sizeof(Entry));
    } else {
      // Root growth: a new root with one committed entry for the old root.
      pm::store(&x->n, 1u);
      pm::store(&x->leaf, 0u);
      pm::store(&x->torn, uint64_t{0});
      pm::store(&x->e[0], Entry{0, root, 0, Entry::kInf});
      pm::flush(x, Node::kHeader + sizeof(Entry));
    }
    pm::fence();  // the new root is durable before meta points to it
    // The NAW's own fence is kept although pmcrash --mutate (node=256) finds
    // no crash state needing it: after a root growth the old root stays a
    // valid tree, but after a compaction the old root is freed at once and
    // may be handed out again and overwritten before the next fence, so
    // meta.root must be durable first.
    // pmcrash-redundant: needed only when a compaction's freed old root is
    // handed out and overwritten before a later fence (see above), which
    // no crash workload reaches.
    pm::naw(&meta_->root, nr.value().raw());
    if (compact) env_.alloc->Free(PPtr(root));
    return true;
  }
  uint64_t parent = root;
  for (uint32_t depth = 0; depth < kMaxHeight; ++depth) {
    Node* p = N(parent);
    if (p->leaf) return false;
    int idx = Route(p, k);
    uint64_t c_raw = p->e[idx].val;
    Node* c = N(c_raw);
    if (c->leaf ? c->n >= cap_ : c->n + 2 > cap_) {
      PMINDEX_RETURN_IF_ERROR(Restructure(parent, idx, c_raw));
      return true;
    }
    parent = c_raw;
  }
  return Status::OutOfSpace("cddstree: tree too high");
}

Status CddsTree::Restructure(uint64_t parent, int pidx, uint64_t x_raw) {
  Node* p = N(parent);
  Node* x = N(x_raw);
  const uint64_t v = gv();
  const uint64_t nv = v + 1;
  std::vector<Entry> live;
  for (uint32_t i = 0; i < x->n; ++i)
    if (x->e[i].live(v)) live.push_back({x->e[i].key, x->e[i].val, x->e[i].start, Entry::kInf});
  // Leaves split when at least half full of live entries (else a compacted
  // copy has room for many inserts). Inner nodes split only when a
  // compacted copy would still lack the two free slots a child's
  // restructuring needs.
  const bool split = x->leaf ? live.size() * 2 >= cap_ : live.size() + 2 > cap_;
  const size_t h = split ? live.size() / 2 : live.size();
  uint64_t a_raw = 0, b_raw = 0;
  Result<PPtr> a = env_.alloc->Alloc(bytes_);
  if (!a.ok()) return a.status();
  a_raw = a.value().raw();
  if (split) {
    Result<PPtr> b = env_.alloc->Alloc(bytes_);
    if (!b.ok()) {
      env_.alloc->Free(a.value());
      return b.status();
    }
    b_raw = b.value().raw();
  }
  auto fill = [&](uint64_t raw, const Entry* es, size_t n) {
    Node* y = N(raw);
    pm::store(&y->n, static_cast<uint32_t>(n));
    pm::store(&y->leaf, x->leaf);
    pm::store(&y->torn, uint64_t{0});
    if (n > 0) pm::copy(y->e, es, n * sizeof(Entry));
    // pmcrash-redundant(flush-late): the next fence after this flush is a
    // ShiftInsert's, which need not order the new nodes (see below);
    // Commit's fence does, and the late flush still comes before it.
    pm::flush(y, Node::kHeader + n * sizeof(Entry));
  };
  fill(a_raw, live.data(), h);
  if (split) fill(b_raw, live.data() + h, live.size() - h);
  // No fence of its own: the new nodes are reachable only through parent
  // entries that start at nv, live from Commit on (recovery neutralizes
  // them before that); ShiftInsert fences before it writes any slot inside
  // n, and Commit fences before gv moves, so the nodes are durable first.
  // (pmcrash --mutate: a fence here kills no crash state.)
  const Key pkey = p->e[pidx].key;
  ShiftInsert(p, Entry{pkey, a_raw, nv, Entry::kInf});
  if (split) {
    ShiftInsert(p, Entry{live[h].key, b_raw, nv, Entry::kInf});
  }
  // The parent's entry for x ends with the same commit; the shifts may have
  // moved it, and it is the one live at v that points to x.
  uint32_t old = 0;
  while (old < p->n && !(p->e[old].val == x_raw && p->e[old].live(v))) ++old;
  PMINDEX_CHECK(old < p->n, "cddstree: parent lost its entry for a restructured node");
  pm::store(&p->e[old].end, nv);
  pm::flush(&p->e[old].end, 8);  // durable with the commit's fence
  Commit(nv);
  env_.alloc->Free(PPtr(x_raw));
  return Status::OK();
}

Status CddsTree::Write(Op op, Key k, Value v) {
  sync::WriterLock g(mu_);
  for (;;) {
    if (op != Op::kRemove) {
      // Decide from the current state first: an operation that changes
      // nothing must not restructure (or run out of space).
      Node* y = N(meta_->root);
      while (!y->leaf) y = N(y->e[Route(y, k)].val);
      int j = FindLive(y, k);
      if (op == Op::kInsert && j >= 0) return Status::AlreadyExists();
      if (op == Op::kUpdate && j < 0) return Status::NotFound();
      if (j >= 0 && y->e[j].val == v) return Status::OK();
      Result<bool> changed = MakeRoom(k);
      if (!changed.ok()) return changed.status();
      if (changed.value()) continue;
    }
    Node* x = N(meta_->root);
    while (!x->leaf) x = N(x->e[Route(x, k)].val);
    int i = FindLive(x, k);
    const uint64_t nv = gv() + 1;
    if (op == Op::kInsert && i >= 0) return Status::AlreadyExists();
    if ((op == Op::kUpdate || op == Op::kRemove) && i < 0) return Status::NotFound();
    if (i >= 0 && op != Op::kRemove && x->e[i].val == v) return Status::OK();
    // The new version first, then the old one ended: the end needs only to
    // be durable by Commit's fence, so its flush sits right before it. The
    // shift may move the old entry; it is still the one live at gv (the
    // new entry starts at nv).
    if (op != Op::kRemove) ShiftInsert(x, Entry{k, v, nv, Entry::kInf});
    if (i >= 0) {
      i = FindLive(x, k);
      pm::store(&x->e[i].end, nv);
      pm::flush(&x->e[i].end, 8);  // durable with the commit's fence
    }
    Commit(nv);
    return Status::OK();
  }
}

Status CddsTree::insert(Key k, Value v) { return Write(Op::kInsert, k, v); }
Status CddsTree::update(Key k, Value v) { return Write(Op::kUpdate, k, v); }
Status CddsTree::upsert(Key k, Value v) { return Write(Op::kUpsert, k, v); }
Status CddsTree::remove(Key k) { return Write(Op::kRemove, k, 0); }

void CddsTree::Walk(uint64_t raw, const std::function<void(uint64_t, Node*)>& fn) const {
  Node* x = N(raw);
  fn(raw, x);
  if (x->leaf) return;
  const uint64_t v = gv();
  for (uint32_t i = 0; i < x->n; ++i)
    if (x->e[i].live(v)) Walk(x->e[i].val, fn);
}

size_t CddsTree::scan(Key from, size_t n, KV* out) {
  sync::ReaderLock g(mu_);
  size_t got = 0;
  const uint64_t v = gv();
  // In-order descent, skipping children whose next live sibling starts at
  // or below `from`.
  std::function<void(Node*)> rec = [&](Node* x) {
    if (got >= n) return;
    if (x->leaf) {
      for (uint32_t i = 0; i < x->n && got < n; ++i)
        if (x->e[i].live(v) && x->e[i].key >= from) out[got++] = {x->e[i].key, x->e[i].val};
      return;
    }
    std::vector<uint32_t> lv;
    for (uint32_t i = 0; i < x->n; ++i)
      if (x->e[i].live(v)) lv.push_back(i);
    for (size_t j = 0; j < lv.size() && got < n; ++j) {
      if (j + 1 < lv.size() && x->e[lv[j + 1]].key <= from) continue;
      rec(N(x->e[lv[j]].val));
    }
  };
  rec(N(meta_->root));
  return got;
}

Status CddsTree::bulk_load(std::span<const KV> sorted, double fill) {
  if (!(fill > 0 && fill <= 1)) return Status::InvalidArgument("cddstree: fill must be in (0, 1]");
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i - 1].key >= sorted[i].key)
      return Status::InvalidArgument("cddstree: bulk_load keys not strictly ascending");
  sync::WriterLock g(mu_);
  Node* root = N(meta_->root);
  if (!root->leaf) return Status::InvalidArgument("cddstree: bulk_load needs an empty index");
  for (uint32_t i = 0; i < root->n; ++i)
    if (root->e[i].live(gv())) return Status::InvalidArgument("cddstree: bulk_load needs an empty index");
  if (sorted.empty()) return Status::OK();
  const uint32_t per = std::max<uint32_t>(2, static_cast<uint32_t>(cap_ * fill));
  std::vector<PPtr> fresh;
  std::vector<std::pair<Key, uint64_t>> level;
  std::vector<Entry> es;
  auto make = [&](bool leaf, const std::vector<Entry>& e, uint64_t* raw) -> Status {
    Result<PPtr> r = env_.alloc->Alloc(bytes_);
    if (!r.ok()) {
      for (PPtr f : fresh) env_.alloc->Free(f);
      return r.status();
    }
    fresh.push_back(r.value());
    Node* y = N(r.value().raw());
    pm::store(&y->n, static_cast<uint32_t>(e.size()));
    pm::store(&y->leaf, leaf ? 1u : 0u);
    pm::store(&y->torn, uint64_t{0});
    pm::copy(y->e, e.data(), e.size() * sizeof(Entry));
    pm::flush(y, Node::kHeader + e.size() * sizeof(Entry));
    *raw = r.value().raw();
    return Status::OK();
  };
  for (size_t b = 0; b < sorted.size(); b += per) {
    es.clear();
    for (size_t i = b; i < std::min(sorted.size(), b + per); ++i)
      es.push_back({sorted[i].key, sorted[i].value, 0, Entry::kInf});
    uint64_t raw = 0;
    PMINDEX_RETURN_IF_ERROR(make(true, es, &raw));
    level.push_back({b == 0 ? 0 : sorted[b].key, raw});
  }
  while (level.size() > 1) {
    std::vector<std::pair<Key, uint64_t>> up;
    for (size_t b = 0; b < level.size(); b += per) {
      es.clear();
      for (size_t i = b; i < std::min(level.size(), b + per); ++i)
        es.push_back({level[i].first, level[i].second, 0, Entry::kInf});
      uint64_t raw = 0;
      PMINDEX_RETURN_IF_ERROR(make(false, es, &raw));
      up.push_back({level[b].first, raw});
    }
    level.swap(up);
  }
  pm::fence();  // the loaded tree durable before the root moves to it
  uint64_t old = meta_->root;
  pm::naw(&meta_->root, level[0].second);
  env_.alloc->Free(PPtr(old));
  return Status::OK();
}

Status CddsTree::VerifyNode(uint64_t raw, uint32_t depth, Key lo, bool has_hi, Key hi,
                            uint32_t* leaf_depth, uint64_t* entries) {
  if (depth >= kMaxHeight) return Status::Corruption("cddstree: tree deeper than the limit");
  PMINDEX_RETURN_IF_ERROR(CheckNode(raw));
  Node* x = N(raw);
  const uint64_t v = gv();
  std::vector<uint32_t> lv;
  PMINDEX_RETURN_IF_ERROR(CheckEntries(x, raw, v, lo, has_hi, hi, &lv));
  if (x->leaf) {
    if (*leaf_depth == UINT32_MAX) *leaf_depth = depth;
    if (*leaf_depth != depth) return Status::Corruption("cddstree: leaves at different depths");
    *entries += lv.size();
    return Status::OK();
  }
  for (size_t j = 0; j < lv.size(); ++j) {
    Key clo = j == 0 ? lo : x->e[lv[j]].key;
    bool chh = j + 1 < lv.size() || has_hi;
    Key chi = j + 1 < lv.size() ? x->e[lv[j + 1]].key : hi;
    PMINDEX_RETURN_IF_ERROR(VerifyNode(x->e[lv[j]].val, depth + 1, clo, chh, chi, leaf_depth, entries));
  }
  return Status::OK();
}

Status CddsTree::close() {
  if (closed_) return Status::OK();
  closed_ = true;
  if (abandoned() || meta_ == nullptr) return Status::OK();  // a refused open: write nothing
  sync::WriterLock g(mu_);
  const uint64_t v = gv();
  uint64_t entries = 0, leaves = 0;
  common::ContentSum content;
  Walk(meta_->root, [&](uint64_t, Node* x) {
    if (!x->leaf) return;
    ++leaves;
    for (uint32_t i = 0; i < x->n; ++i) {
      if (!x->e[i].live(v)) continue;
      ++entries;
      content.Add(x->e[i].key, x->e[i].val);
    }
  });
  common::WriteContentRecord(*env_.pool, content);
  const uint64_t rec = pm::CleanCloseRecord(entries, leaves);
  if (env_.pool->root(pm::kCleanCloseSlot) != rec) env_.pool->WriteRoot(pm::kCleanCloseSlot, rec);
  return Status::OK();
}

Status CddsTree::verify() {
  sync::ReaderLock g(mu_);
  uint32_t leaf_depth = UINT32_MAX;
  uint64_t entries = 0;
  return VerifyNode(meta_->root, 0, 0, false, 0, &leaf_depth, &entries);
}

IndexStats CddsTree::stats() {
  sync::ReaderLock g(mu_);
  IndexStats s;
  const uint64_t v = gv();
  Walk(meta_->root, [&](uint64_t, Node* x) {
    s.pm_bytes += bytes_;
    if (x->leaf) {
      s.leaves++;
      for (uint32_t i = 0; i < x->n; ++i) s.entries += x->e[i].live(v);
    } else {
      s.inner_nodes++;
    }
  });
  s.height = 1;
  for (Node* x = N(meta_->root); !x->leaf; x = N(x->e[Route(x, 0)].val)) ++s.height;
  if (salvage_cuts_ != 0) {
    s.extra.push_back({"salvage_cut_subtrees", static_cast<double>(salvage_cuts_)});
  }
  return s;
}

Status CddsTree::for_each_block(const std::function<void(PPtr)>& fn) {
  sync::ReaderLock g(mu_);
  fn(env_.pool->to_pptr(meta_));
  Walk(meta_->root, [&](uint64_t raw, Node*) { fn(PPtr(raw)); });
  return Status::OK();
}

namespace {
Result<uint32_t> ParseNode(const Options& o) {
  PMINDEX_RETURN_IF_ERROR(o.CheckKnown({"node"}));
  Result<uint64_t> n = o.get_uint("node", 1024, 256, 65536);
  if (!n.ok()) return n.status();
  if (n.value() % 64 != 0) return Status::InvalidArgument("cddstree: node must be a multiple of 64 from 256 to 65536 bytes");
  return static_cast<uint32_t>(n.value());
}

}  // namespace

PMINDEX_REGISTER_INDEX(
    cddstree,
    {
        .name = "cddstree",
        .persistent = true,
        .options_help = "node=BYTES (node size: a multiple of 64 from 256 to 65536; default 1024; "
                        "the paper used 512|1024|2048|4096)",
        .validate = [](const Options& o) -> Status { return ParseNode(o).status(); },
        .create = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<uint32_t> n = ParseNode(o);
          if (!n.ok()) return n.status();
          return CddsTree::Create(env, n.value());
        },
        .open = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<uint32_t> n = ParseNode(o);
          if (!n.ok()) return n.status();
          return CddsTree::Open(env, n.value());
        },
        .marks_in_use = true,
        // Every write holds the tree's lock, which readers share, until it
        // returns, past its last fence: a reader sees only durable writes.
        .reads_see_only_durable = true,
    });

}  // namespace pmindex::cddstree
