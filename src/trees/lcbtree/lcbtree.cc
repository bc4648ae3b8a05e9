#include "trees/lcbtree/lcbtree.h"

#include "pm/pptr_decode.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace pmindex::lcbtree {

namespace {
std::string Hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}
}  // namespace

LcbTree::LcbTree(const IndexEnv& env, uint32_t node_bytes)
    : env_(env), bytes_(node_bytes), cap_(Node::CapacityFor(node_bytes)) {}

std::byte* LcbTree::LogRecord(uint32_t i) const {
  return reinterpret_cast<std::byte*>(log_) + sizeof(LogHeader) + uint64_t{i} * LogRecordBytes();
}

Result<std::unique_ptr<Index>> LcbTree::Create(const IndexEnv& env, uint32_t node_bytes) {
  std::unique_ptr<LcbTree> t(new LcbTree(env, node_bytes));
  Result<PPtr> m = env.alloc->Alloc(sizeof(Meta));
  if (!m.ok()) return m.status();
  Result<PPtr> lg = env.alloc->Alloc(sizeof(LogHeader) + (kMaxHeight + 1) * t->LogRecordBytes());
  if (!lg.ok()) return lg.status();
  Result<PPtr> root = env.alloc->Alloc(node_bytes);
  if (!root.ok()) return root.status();
  Node* r = t->N(root.value().raw());
  pm::store(&r->n, 0u);
  pm::store(&r->leaf, 1u);
  pm::store(&r->next, uint64_t{0});
  pm::flush(r, Node::kHeader);
  t->log_ = env.pool->to_ptr<LogHeader>(lg.value());
  pm::store(t->log_, LogHeader{0, 0, 0});
  pm::flush(t->log_, sizeof(LogHeader));
  t->meta_ = env.pool->to_ptr<Meta>(m.value());
  pm::store(t->meta_, Meta{kTag, root.value().raw(), 0, lg.value().raw(), node_bytes});
  pm::flush(t->meta_, sizeof(Meta));
  pm::fence();  // meta, log and root durable before slot 0 points to them
  env.pool->WriteRoot(0, m.value().raw());
  t->closed_ = false;
  return std::unique_ptr<Index>(std::move(t));
}

Status LcbTree::CheckNode(uint64_t raw) const {
  auto d = pm::Decode<Node>(*env_.pool, raw, bytes_, 64, "lcbtree: node");
  if (!d.ok()) return d.status();
  const Node* x = View(raw, d.value());
  if (x->leaf > 1 || x->n > cap_ || (!x->leaf && x->n == 0))
    return Status::Corruption("lcbtree: node " + Hex(raw) + " has a bad header");
  return Status::OK();
}

Result<std::unique_ptr<Index>> LcbTree::Open(const IndexEnv& env, uint32_t node_bytes) {
  std::unique_ptr<LcbTree> t(new LcbTree(env, node_bytes));
  Pool* pool = env.pool;
  uint64_t m = pool->root(0);
  PPtr mp(m);
  auto md = pm::Decode<Meta>(*pool, m, sizeof(Meta), alignof(Meta), "lcbtree: meta block (root slot 0)");
  if (!md.ok()) return md.status();
  t->meta_ = md.value();
  if (t->meta_->tag != kTag || t->meta_->node_bytes != node_bytes)
    return Status::Corruption("lcbtree: bad meta block");
  PPtr lp(t->meta_->log);
  auto ld = pm::Decode<LogHeader>(*pool, lp.raw(),
                                  sizeof(LogHeader) + (kMaxHeight + 1) * uint64_t{t->LogRecordBytes()},
                                  64, "lcbtree: undo log");
  if (!ld.ok()) return ld.status();
  t->log_ = ld.value();
  // Validation, reads only (a refused open writes nothing): the undo records, then the whole
  // tree as the undo will leave it (logged originals in place of their
  // nodes, the logged root), then the allocator's acceptance of every
  // block. Nothing is written before all of it passed. The same walk sums
  // the leaves' pairs, as the undo leaves them: a cleanly closed pool must
  // hold what its close() summed (root slot 6), else a key or a value was
  // damaged while it was closed.
  PMINDEX_RETURN_IF_ERROR(t->CheckUndo());
  const uint64_t root = t->log_->count != 0 ? t->log_->old_root : t->meta_->root;
  std::vector<uint64_t> leaves, nodes;
  uint64_t entries = 0;
  common::ContentSum content(env);  // visits the pairs too (IndexEnv::pairs)
  Status vs = t->VerifyNode(root, 0, false, 0, false, 0, &leaves, &entries, &nodes, &content);
  if (vs.ok()) vs = t->CheckShape(root, leaves);
  t->undo_view_.clear();
  PMINDEX_RETURN_IF_ERROR(vs);
  nodes.push_back(mp.raw());
  nodes.push_back(lp.raw());
  for (uint64_t n : nodes) env.alloc->MarkReachable(PPtr(n));
  for (uint64_t n : nodes)
    if (!env.alloc->IsLive(PPtr(n)))
      return Status::Corruption("lcbtree: block " + Hex(n) + " is not an allocated block");
  // Repair: roll back the interrupted operation.
  PMINDEX_RETURN_IF_ERROR(env.alloc->CheckRecoveryBound());  // before any write
  // Last of the read-only checks (structural faults are named by their own).
  PMINDEX_RETURN_IF_ERROR(common::CheckContentRecord(*pool, env.salvage, content, "lcbtree"));
  PMINDEX_RETURN_IF_ERROR(env.pool->MarkInUse());
  PMINDEX_RETURN_IF_ERROR(t->Undo());
  t->closed_ = false;
  return std::unique_ptr<Index>(std::move(t));
}

Status LcbTree::close() {
  if (closed_) return Status::OK();
  closed_ = true;
  if (abandoned() || meta_ == nullptr) return Status::OK();  // a refused open: write nothing
  sync::WriterLock g(mu_);
  // Every operation committed (no writer runs), so the leaves reached from
  // the root hold what an open's validation will sum.
  common::ContentSum content;
  std::vector<uint64_t> stack{meta_->root};
  while (!stack.empty()) {
    Node* x = N(stack.back());
    stack.pop_back();
    if (x->leaf) {
      for (uint32_t i = 0; i < x->n; ++i) content.Add(keys(x)[i], vals(x)[i]);
    } else {
      for (uint32_t i = 0; i <= x->n; ++i) stack.push_back(vals(x)[i]);
    }
  }
  common::WriteContentRecord(*env_.pool, content);
  return Status::OK();
}

Status LcbTree::CheckUndo() {
  undo_view_.clear();
  const uint64_t c = log_->count;
  if (c == 0) return Status::OK();
  if (c > kMaxHeight + 1) return Status::Corruption("lcbtree: undo log count out of range");
  for (uint32_t i = 0; i < c; ++i) {
    const std::byte* rec = LogRecord(i);
    uint64_t target;
    std::memcpy(&target, rec, 8);
    auto d = pm::Decode<Node>(*env_.pool, target, bytes_, 64, "lcbtree: undo record's node");
    if (!d.ok()) return d.status();
    // Records are 64 + bytes_ long from a 64-aligned log: the copy is
    // 64-aligned like a node.
    undo_view_.emplace_back(target, reinterpret_cast<const Node*>(rec + 64));
  }
  return Status::OK();
}

Status LcbTree::CheckShape(uint64_t root, const std::vector<uint64_t>& leaves) const {
  // verify()'s other checks, on the view: scans follow the leaf chain, so
  // a damaged next pointer would hide or repeat leaves from them.
  for (size_t i = 0; i < leaves.size(); ++i) {
    const uint64_t want = i + 1 < leaves.size() ? leaves[i + 1] : 0;
    if (View(leaves[i], N(leaves[i]))->next != want)
      return Status::Corruption("lcbtree: leaf chain broken at " + Hex(leaves[i]) + "; nothing was changed");
  }
  // Leftmost and rightmost paths of the same length (VerifyNode checked
  // every node on them).
  uint32_t left = 0, right = 0;
  for (uint64_t r = root;;) {
    Node* x = const_cast<Node*>(View(r, N(r)));
    if (x->leaf) break;
    r = vals(x)[0];
    ++left;
  }
  for (uint64_t r = root;;) {
    Node* x = const_cast<Node*>(View(r, N(r)));
    if (x->leaf) break;
    r = vals(x)[x->n];
    ++right;
  }
  if (left != right) return Status::Corruption("lcbtree: leaves at different depths; nothing was changed");
  return Status::OK();
}

const Node* LcbTree::View(uint64_t raw, const Node* pm) const {
  // Undo copies records in order, so the last record of a node wins.
  for (auto it = undo_view_.rbegin(); it != undo_view_.rend(); ++it)
    if (it->first == raw) return it->second;
  return pm;
}

Status LcbTree::Undo() {
  uint64_t c = log_->count;
  if (c == 0) return Status::OK();
  if (c > kMaxHeight + 1) return Status::Corruption("lcbtree: undo log count out of range");
  for (uint32_t i = 0; i < c; ++i) {
    std::byte* rec = LogRecord(i);
    uint64_t target;
    std::memcpy(&target, rec, 8);
    auto d = pm::Decode<Node>(*env_.pool, target, bytes_, 64, "lcbtree: undo record's node");
    if (!d.ok()) return d.status();
    Node* x = d.value();
    pm::copy(x, rec + 64, bytes_);
    pm::flush(x, bytes_);
  }
  pm::store(&meta_->root, log_->old_root);
  pm::flush(&meta_->root, 8);
  // Originals durable before the log that could restore them is dropped.
  pm::fence();
  pm::naw(&log_->count, 0);
  return Status::OK();
}

void LcbTree::LogNodes(const std::vector<uint64_t>& nodes) {
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    std::byte* rec = LogRecord(i);
    pm::store(reinterpret_cast<uint64_t*>(rec), nodes[i]);
    pm::copy(rec + 64, N(nodes[i]), bytes_);
  }
  pm::store(&log_->old_root, meta_->root);
  pm::flush(log_, sizeof(LogHeader) + nodes.size() * LogRecordBytes());
  // The originals must be durable before the log is declared valid.
  pm::fence();
  // The log is valid before any node changes in place.
  pm::naw(&log_->count, nodes.size());
}

void LcbTree::Commit() {
  // Every in-place change durable before the undo log is dropped.
  pm::fence();
  pm::naw(&log_->count, 0);
}

void LcbTree::Descend(Key k, std::vector<uint64_t>* path, std::vector<uint32_t>* pos) const {
  path->clear();
  pos->clear();
  uint64_t raw = meta_->root;
  for (;;) {
    path->push_back(raw);
    Node* x = N(raw);
    pm::ModelRead(x, Node::kHeader + 8 * x->n);  // the header and the keys
    if (x->leaf) return;
    Key* ks = keys(x);
    uint32_t i = static_cast<uint32_t>(std::upper_bound(ks, ks + x->n, k) - ks);
    pos->push_back(i);
    raw = vals(x)[i];
  }
}

uint32_t LcbTree::LeafPos(Node* leaf, Key k) const {
  Key* ks = keys(leaf);
  return static_cast<uint32_t>(std::lower_bound(ks, ks + leaf->n, k) - ks);
}

LcbTree::Found LcbTree::Find(Key k) const {
  Found f;
  Descend(k, &f.path, &f.pos);
  f.leaf = N(f.path.back());
  f.i = LeafPos(f.leaf, k);
  f.hit = f.i < f.leaf->n && keys(f.leaf)[f.i] == k;
  return f;
}

std::optional<Value> LcbTree::lookup(Key k) {
  sync::ReaderLock g(mu_);
  const Found f = Find(k);
  if (f.hit) return vals(f.leaf)[f.i];
  return std::nullopt;
}

Status LcbTree::update(Key k, Value v) {
  sync::WriterLock g(mu_);
  const Found f = Find(k);
  if (!f.hit) return Status::NotFound();
  return UpdateAt(f, v);
}

Status LcbTree::UpdateAt(const Found& f, Value v) {
  Node* l = f.leaf;
  const uint32_t i = f.i;
  LogNodes({f.path.back()});
  pm::store(&vals(l)[i], v);
  // Needed before Commit's NAW returns. (pmcrash --mutate's flush-late
  // variant survives: one 8-byte word, so even a count = 0 that persists
  // first leaves the old or the new value, and the NAW's own fence makes
  // it durable before update returns.)
  // pmcrash-redundant(flush-late): one 8-byte word, see above.
  pm::flush(&vals(l)[i], 8);
  Commit();
  return Status::OK();
}

Status LcbTree::remove(Key k) {
  sync::WriterLock g(mu_);
  const Found f = Find(k);
  if (!f.hit) return Status::NotFound();
  Node* l = f.leaf;
  const uint32_t i = f.i;
  LogNodes({f.path.back()});
  uint32_t n = l->n;
  std::vector<uint64_t> tmp(keys(l) + i + 1, keys(l) + n);
  pm::copy(&keys(l)[i], tmp.data(), tmp.size() * 8);
  tmp.assign(vals(l) + i + 1, vals(l) + n);
  pm::copy(&vals(l)[i], tmp.data(), tmp.size() * 8);
  pm::store(&l->n, n - 1);
  // The shifted entries and the count.
  pm::flush(&keys(l)[i], (n - i) * 8);
  pm::flush(&vals(l)[i], (n - i) * 8);
  // The count's line (line 0) was already flushed with the keys when
  // keys[i] lies in it; a second flush of it would be redundant.
  if (reinterpret_cast<uintptr_t>(&keys(l)[i]) / 64 != reinterpret_cast<uintptr_t>(l) / 64)
    pm::flush(l, Node::kHeader);
  Commit();
  return Status::OK();
}

Status LcbTree::insert(Key k, Value v) {
  sync::WriterLock g(mu_);
  Found f = Find(k);
  if (f.hit) return Status::AlreadyExists();
  return InsertNew(k, v, f.path, f.pos);
}

Status LcbTree::upsert(Key k, Value v) {
  sync::WriterLock g(mu_);
  Found f = Find(k);
  if (!f.hit) return InsertNew(k, v, f.path, f.pos);
  return UpdateAt(f, v);
}

// Inserts (k, v) into node x at entry index i (leaf: entry; inner: key i,
// child i+1). REQUIRES: x has room. Flushes the shifted range.
static void ShiftInsert(Node* x, Key* ks, uint64_t* vs, bool leaf, uint32_t i, Key k, uint64_t v) {
  uint32_t n = x->n;
  uint32_t vi = leaf ? i : i + 1;
  uint32_t vn = leaf ? n : n + 1;
  std::vector<uint64_t> tmp(ks + i, ks + n);
  pm::copy(&ks[i + 1], tmp.data(), tmp.size() * 8);
  tmp.assign(vs + vi, vs + vn);
  pm::copy(&vs[vi + 1], tmp.data(), tmp.size() * 8);
  pm::store(&ks[i], k);
  pm::store(&vs[vi], v);
  pm::store(&x->n, n + 1);
  pm::flush(&ks[i], (n - i + 1) * 8);
  pm::flush(&vs[vi], (vn - vi + 1) * 8);
  pm::flush(x, Node::kHeader);
}

Status LcbTree::InsertNew(Key k, Value v, std::vector<uint64_t>& path, std::vector<uint32_t>& pos) {
  std::vector<uint64_t> logged;
  std::vector<PPtr> fresh;
  PMINDEX_RETURN_IF_ERROR(ReserveForInsert(path, &logged, &fresh));
  LogNodes(logged);
  size_t next_fresh = 0;
  Key up_key = k;
  uint64_t up_val = v;
  for (int lv = static_cast<int>(path.size()) - 1; lv >= 0; --lv) {
    Node* x = N(path[lv]);
    const uint32_t i = x->leaf ? LeafPos(x, up_key) : pos[lv];
    if (x->n < cap_) {
      ShiftInsert(x, keys(x), vals(x), x->leaf != 0, i, up_key, up_val);
      Commit();
      return Status::OK();
    }
    const uint64_t r_raw = fresh[next_fresh++].raw();
    up_key = SplitNode(x, i, up_key, up_val, r_raw);
    up_val = r_raw;
    if (lv == 0) {
      GrowRoot(path[0], up_key, r_raw, fresh[next_fresh++].raw());
      Commit();
      return Status::OK();
    }
  }
  return Status::OK();  // unreachable
}

Status LcbTree::ReserveForInsert(const std::vector<uint64_t>& path, std::vector<uint64_t>* logged,
                                 std::vector<PPtr>* fresh) {
  // Nodes changed in place: the leaf and every full ancestor, plus the
  // first ancestor with room.
  int d = static_cast<int>(path.size()) - 1;
  for (;; --d) {
    logged->push_back(path[d]);
    if (N(path[d])->n < cap_ || d == 0) break;
  }
  const bool root_splits = d == 0 && N(path[0])->n >= cap_;
  if (path.size() + 1 > kMaxHeight) return Status::OutOfSpace("lcbtree: tree too high");
  // Allocate every new node first, so OutOfSpace changes nothing.
  size_t splits = logged->size() - (root_splits ? 0 : 1);
  for (size_t s = 0; s < splits + (root_splits ? 1 : 0); ++s) {
    Result<PPtr> r = env_.alloc->Alloc(bytes_);
    if (!r.ok()) {
      for (PPtr f : *fresh) env_.alloc->Free(f);
      return r.status();
    }
    fresh->push_back(r.value());
  }
  return Status::OK();
}

Key LcbTree::SplitNode(Node* x, uint32_t i, Key up_key, uint64_t up_val, uint64_t r_raw) {
  const bool leaf = x->leaf;
  Key* ks = keys(x);
  uint64_t* vs = vals(x);
  // Merge the new entry into temporaries, then redistribute.
  uint32_t n = x->n;
  std::vector<Key> tk(ks, ks + n);
  std::vector<uint64_t> tv(vs, vs + (leaf ? n : n + 1));
  tk.insert(tk.begin() + i, up_key);
  tv.insert(tv.begin() + (leaf ? i : i + 1), up_val);
  Node* r = N(r_raw);
  Key* rk = keys(r);
  uint64_t* rv = vals(r);
  uint32_t total = n + 1;
  uint32_t left, rn;
  Key sep;
  if (leaf) {
    left = (total + 1) / 2;
    rn = total - left;
    pm::copy(rk, tk.data() + left, rn * 8);
    pm::copy(rv, tv.data() + left, rn * 8);
    sep = tk[left];
    pm::store(&r->next, x->next);
  } else {
    left = total / 2;  // keys kept left; key `left` moves up
    rn = total - left - 1;
    pm::copy(rk, tk.data() + left + 1, rn * 8);
    pm::copy(rv, tv.data() + left + 1, (rn + 1) * 8);
    sep = tk[left];
    pm::store(&r->next, uint64_t{0});
  }
  pm::store(&r->n, rn);
  pm::store(&r->leaf, leaf ? 1u : 0u);
  // Only what was written: header, rn keys, and the values (rn + 1 for
  // inner nodes); the rest of the fresh node is never read (flushing
  // all of it was a mutation survivor, flush one line short).
  // The keys follow the 16-byte header, so one flush covers both (a
  // separate header flush was a drop-flush survivor of pmcrash --mutate
  // at 128 and 512 B: the key flush re-flushed line 0).
  pm::flush(r, Node::kHeader + rn * 8);
  pm::flush(rv, (leaf ? rn : rn + 1) * 8);
  // Left part rewritten from the insert position on.
  uint32_t from = std::min(i, left);
  pm::copy(&ks[from], tk.data() + from, (left - from) * 8);
  uint32_t vleft = leaf ? left : left + 1;
  uint32_t vfrom = leaf ? from : std::min(i + 1, vleft);
  pm::copy(&vs[vfrom], tv.data() + vfrom, (vleft - vfrom) * 8);
  pm::flush(&ks[from], (left - from) * 8);
  pm::flush(&vs[vfrom], (vleft - vfrom) * 8);
  pm::store(&x->n, left);
  if (leaf) pm::store(&x->next, r_raw);
  pm::flush(x, Node::kHeader);
  return sep;
}

void LcbTree::GrowRoot(uint64_t left_raw, Key sep, uint64_t right_raw, uint64_t nr_raw) {
  Node* nr = N(nr_raw);
  pm::store(&nr->n, 1u);
  pm::store(&nr->leaf, 0u);
  pm::store(&nr->next, uint64_t{0});
  pm::store(&keys(nr)[0], sep);
  pm::store(&vals(nr)[0], left_raw);
  pm::store(&vals(nr)[1], right_raw);
  // Header, key 0 and values 0..1 only (the rest is never read).
  pm::flush(nr, Node::kHeader + 8);
  pm::flush(&vals(nr)[0], 16);
  pm::store(&meta_->root, nr_raw);
  pm::flush(&meta_->root, 8);
}

size_t LcbTree::scan(Key from, size_t n, KV* out) {
  sync::ReaderLock g(mu_);
  std::vector<uint64_t> path;
  std::vector<uint32_t> pos;
  Descend(from, &path, &pos);
  size_t got = 0;
  for (uint64_t raw = path.back(); raw != 0 && got < n; raw = N(raw)->next) {
    Node* l = N(raw);
    for (uint32_t i = LeafPos(l, from); i < l->n && got < n; ++i) out[got++] = {keys(l)[i], vals(l)[i]};
  }
  return got;
}

Status LcbTree::bulk_load(std::span<const KV> sorted, double fill) {
  if (!(fill > 0 && fill <= 1)) return Status::InvalidArgument("lcbtree: fill must be in (0, 1]");
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i - 1].key >= sorted[i].key)
      return Status::InvalidArgument("lcbtree: bulk_load keys not strictly ascending");
  sync::WriterLock g(mu_);
  Node* root = N(meta_->root);
  if (!root->leaf || root->n != 0) return Status::InvalidArgument("lcbtree: bulk_load needs an empty index");
  if (sorted.empty()) return Status::OK();
  const uint32_t per = std::max<uint32_t>(1, static_cast<uint32_t>(cap_ * fill));
  std::vector<PPtr> fresh;
  auto alloc = [&](uint64_t* raw) -> Status {
    Result<PPtr> r = env_.alloc->Alloc(bytes_);
    if (!r.ok()) {
      for (PPtr f : fresh) env_.alloc->Free(f);
      return r.status();
    }
    fresh.push_back(r.value());
    *raw = r.value().raw();
    return Status::OK();
  };
  // Level of (low key, node) pairs.
  std::vector<std::pair<Key, uint64_t>> level;
  for (size_t b = 0; b < sorted.size(); b += per) {
    uint64_t raw = 0;
    PMINDEX_RETURN_IF_ERROR(alloc(&raw));
    level.push_back({sorted[b].key, raw});
  }
  for (size_t j = 0; j < level.size(); ++j) {
    Node* x = N(level[j].second);
    size_t b = j * per, e = std::min(sorted.size(), b + per);
    for (size_t i = b; i < e; ++i) {
      pm::store(&keys(x)[i - b], sorted[i].key);
      pm::store(&vals(x)[i - b], sorted[i].value);
    }
    pm::store(&x->n, static_cast<uint32_t>(e - b));
    pm::store(&x->leaf, 1u);
    pm::store(&x->next, j + 1 < level.size() ? level[j + 1].second : uint64_t{0});
    pm::flush(x, bytes_);
  }
  const uint32_t fan = std::max<uint32_t>(2, per);  // children per inner node
  while (level.size() > 1) {
    std::vector<std::pair<Key, uint64_t>> up;
    for (size_t b = 0; b < level.size(); b += fan) {
      size_t e = std::min(level.size(), b + fan);
      if (e - b == 1 && !up.empty()) {  // never leave a single child alone: merge into previous
        Node* prev = N(up.back().second);
        pm::store(&keys(prev)[prev->n], level[b].first);
        pm::store(&vals(prev)[prev->n + 1], level[b].second);
        pm::store(&prev->n, prev->n + 1);
        pm::flush(prev, bytes_);
        continue;
      }
      uint64_t raw = 0;
      PMINDEX_RETURN_IF_ERROR(alloc(&raw));
      Node* x = N(raw);
      for (size_t i = b; i < e; ++i) {
        if (i > b) pm::store(&keys(x)[i - b - 1], level[i].first);
        pm::store(&vals(x)[i - b], level[i].second);
      }
      pm::store(&x->n, static_cast<uint32_t>(e - b - 1));
      pm::store(&x->leaf, 0u);
      pm::store(&x->next, uint64_t{0});
      pm::flush(x, bytes_);
      up.push_back({level[b].first, raw});
    }
    level.swap(up);
  }
  pm::fence();  // the new tree is durable before the root moves to it
  uint64_t old = meta_->root;
  pm::naw(&meta_->root, level[0].second);
  env_.alloc->Free(PPtr(old));
  return Status::OK();
}

Status LcbTree::VerifyNode(uint64_t raw, uint32_t depth, bool has_lo, Key lo, bool has_hi, Key hi,
                           std::vector<uint64_t>* leaves, uint64_t* entries,
                           std::vector<uint64_t>* nodes, common::ContentSum* content) {
  if (depth >= kMaxHeight) return Status::Corruption("lcbtree: tree deeper than the limit");
  PMINDEX_RETURN_IF_ERROR(CheckNode(raw));
  if (nodes != nullptr) nodes->push_back(raw);
  Node* x = const_cast<Node*>(View(raw, N(raw)));
  Key* ks = keys(x);
  for (uint32_t i = 0; i < x->n; ++i) {
    if (i > 0 && ks[i - 1] >= ks[i]) return Status::Corruption("lcbtree: keys not sorted in " + Hex(raw));
    if ((has_lo && ks[i] < lo) || (has_hi && ks[i] >= hi))
      return Status::Corruption("lcbtree: key outside parent bounds in " + Hex(raw));
  }
  if (x->leaf) {
    leaves->push_back(raw);
    *entries += x->n;
    if (content != nullptr)
      for (uint32_t i = 0; i < x->n; ++i) content->Add(ks[i], vals(x)[i]);
    return Status::OK();
  }
  for (uint32_t i = 0; i <= x->n; ++i) {
    PMINDEX_RETURN_IF_ERROR(VerifyNode(vals(x)[i], depth + 1, i > 0 || has_lo, i > 0 ? ks[i - 1] : lo,
                                       i < x->n || has_hi, i < x->n ? ks[i] : hi, leaves, entries,
                                       nodes, content));
  }
  return Status::OK();
}

Status LcbTree::verify() {
  sync::ReaderLock g(mu_);
  if (log_->count != 0) return Status::Corruption("lcbtree: undo log not empty");
  std::vector<uint64_t> leaves;
  uint64_t entries = 0;
  PMINDEX_RETURN_IF_ERROR(VerifyNode(meta_->root, 0, false, 0, false, 0, &leaves, &entries));
  for (size_t i = 0; i < leaves.size(); ++i) {
    uint64_t want = i + 1 < leaves.size() ? leaves[i + 1] : 0;
    if (N(leaves[i])->next != want) return Status::Corruption("lcbtree: leaf chain broken at " + Hex(leaves[i]));
  }
  // All leaves at the same depth.
  std::vector<uint64_t> path;
  std::vector<uint32_t> pos;
  uint32_t depth = 0;
  for (uint64_t r = meta_->root; !N(r)->leaf; r = vals(N(r))[0]) ++depth;
  uint32_t depth2 = 0;
  for (uint64_t r = meta_->root; !N(r)->leaf; r = vals(N(r))[N(r)->n]) ++depth2;
  if (depth != depth2) return Status::Corruption("lcbtree: leaves at different depths");
  return Status::OK();
}

IndexStats LcbTree::stats() {
  sync::ReaderLock g(mu_);
  IndexStats s;
  std::vector<uint64_t> stack{meta_->root};
  while (!stack.empty()) {
    Node* x = N(stack.back());
    stack.pop_back();
    s.pm_bytes += bytes_;
    if (x->leaf) {
      s.leaves++;
      s.entries += x->n;
    } else {
      s.inner_nodes++;
      for (uint32_t i = 0; i <= x->n; ++i) stack.push_back(vals(x)[i]);
    }
  }
  s.height = 1;
  for (uint64_t r = meta_->root; !N(r)->leaf; r = vals(N(r))[0]) ++s.height;
  return s;
}

Status LcbTree::for_each_block(const std::function<void(PPtr)>& fn) {
  sync::ReaderLock g(mu_);
  fn(env_.pool->to_pptr(meta_));
  fn(env_.pool->to_pptr(log_));
  std::vector<uint64_t> stack{meta_->root};
  while (!stack.empty()) {
    uint64_t raw = stack.back();
    stack.pop_back();
    fn(PPtr(raw));
    Node* x = N(raw);
    if (!x->leaf)
      for (uint32_t i = 0; i <= x->n; ++i) stack.push_back(vals(x)[i]);
  }
  return Status::OK();
}

namespace {
Result<uint32_t> ParseNode(const Options& o) {
  PMINDEX_RETURN_IF_ERROR(o.CheckKnown({"node"}));
  Result<uint64_t> n = o.get_uint("node", 1024, 128, 65536);
  if (!n.ok()) return n.status();
  if (n.value() % 64 != 0) return Status::InvalidArgument("lcbtree: node must be a multiple of 64 from 128 to 65536 bytes");
  return static_cast<uint32_t>(n.value());
}

}  // namespace

PMINDEX_REGISTER_INDEX(
    lcbtree,
    {
        .name = "lcbtree",
        .persistent = true,
        .options_help = "node=BYTES (node size: a multiple of 64 from 128 to 65536; default 1024; "
                        "the paper used 512|1024|2048|4096)",
        .validate = [](const Options& o) -> Status { return ParseNode(o).status(); },
        .create = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<uint32_t> n = ParseNode(o);
          if (!n.ok()) return n.status();
          return LcbTree::Create(env, n.value());
        },
        .open = [](const IndexEnv& env, const Options& o) -> Result<std::unique_ptr<Index>> {
          Result<uint32_t> n = ParseNode(o);
          if (!n.ok()) return n.status();
          return LcbTree::Open(env, n.value());
        },
        .marks_in_use = true,
        // Every write holds the tree's lock, which readers share, until it
        // returns, past its last fence: a reader sees only durable writes.
        .reads_see_only_durable = true,
    });

}  // namespace pmindex::lcbtree
