// SORT and SORT_RO over the collection layer (collections.h), with Redis
// 7.0's options, order, replies and errors:
//
//   SORT key [BY pattern] [LIMIT offset count] [GET pattern [GET ...]]
//        [ASC|DESC] [ALPHA] [STORE destination]
//
// The elements of a list, set or sorted set are sorted as numbers (each
// read as a C double: an element, or BY's value, that is not one fails
// the whole command with "ERR One or more scores can't be converted into
// double"; equal numbers are ordered by the elements' bytes) or, with
// ALPHA, as byte strings (Redis compares with strcoll(); pmserver compares
// bytes, which is what strcoll() does in the C locale Redis runs in by
// default). BY pattern sorts by the value of the key made by putting the
// element in place of the pattern's first '*' (`key->field`: a field of
// the hash at that key); a missing key or field sorts as 0 (numbers) or
// before everything (ALPHA). A pattern without '*' (BY nosort) sorts
// nothing: a list keeps its order, a sorted set its score order (DESC
// reverses both), a set its member order, except that with STORE a set
// is sorted ALPHA (Redis's rule, so that the stored result is
// deterministic). GET pattern replaces each element in the reply by the
// value its pattern names (a null if none; `#` is the element itself);
// with several GETs each element gives one value per GET. STORE replaces
// the destination by a list of the reply's values (a null stored as the
// empty string), or deletes it when there are none, and replies their
// number. In cluster mode BY with a pattern and GET are refused (Redis
// 7.0's errors), since the keys they name may live on other nodes.
//
// Every command is one store transaction (RunInTransaction): the elements,
// the pattern keys and the destination are read and written in it, so a
// STORE is atomic and durable before its reply, and a WATCH of the
// destination sees it change when it held a value.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/collections.h"
#include "server/numbers.h"
#include "server/resp_command.h"
#include "server/resp_list.h"
#include "server/resp_transaction.h"

namespace pmindex::server {

namespace {

using namespace cmd_flag;

constexpr size_t kBatch = 512;

struct SortOptions {
  bool desc = false;
  bool alpha = false;
  // BY named a pattern without '*': nothing is sorted (Redis keeps the
  // flag even if a later BY has a '*').
  bool dontsort = false;
  int64_t limit_start = 0;
  int64_t limit_count = -1;
  std::optional<std::string_view> by;
  std::vector<std::string_view> gets;
  std::optional<std::string_view> store;
};

// Parses SORT's options (from args[2] on) as Redis does: left to right,
// the first bad one replied. False: an error was replied.
bool ParseOptions(CommandCall& c, bool readonly, SortOptions* o) {
  const bool cluster = c.shared.cluster() != nullptr;
  for (size_t j = 2; j < c.argc(); ++j) {
    const std::string_view a = c.args[j];
    const size_t left = c.argc() - j - 1;
    if (EqualsIgnoreCase(a, "asc")) {
      o->desc = false;
    } else if (EqualsIgnoreCase(a, "desc")) {
      o->desc = true;
    } else if (EqualsIgnoreCase(a, "alpha")) {
      o->alpha = true;
    } else if (EqualsIgnoreCase(a, "limit") && left >= 2) {
      if (!ParseNumber(c.args[j + 1], &o->limit_start) ||
          !ParseNumber(c.args[j + 2], &o->limit_count)) {
        c.reply.Error(kNotInteger);
        return false;
      }
      j += 2;
    } else if (!readonly && EqualsIgnoreCase(a, "store") && left >= 1) {
      o->store = c.args[++j];
    } else if (EqualsIgnoreCase(a, "by") && left >= 1) {
      o->by = c.args[++j];
      if (o->by->find('*') == std::string_view::npos) {
        o->dontsort = true;
      } else if (cluster) {
        c.reply.Error("ERR BY option of SORT denied in Cluster mode.");
        return false;
      }
    } else if (EqualsIgnoreCase(a, "get") && left >= 1) {
      if (cluster) {
        c.reply.Error("ERR GET option of SORT denied in Cluster mode.");
        return false;
      }
      o->gets.push_back(c.args[++j]);
    } else {
      c.reply.Error(kSyntax);
      return false;
    }
  }
  return true;
}

// The value a pattern names for element `element` (Redis's
// lookupKeyByPattern): "#" is the element; otherwise the pattern's first
// '*' is replaced by the element to make a key, and "->field" after the
// '*' (with a non-empty field) reads that field of the hash at the key,
// else the key's string. nullopt: no '*', no such key or field, or a
// key of another type (or one pmserver cannot hold: empty or too long).
Result<std::optional<std::string>> LookupByPattern(TxnScope& scope, int db,
                                                   std::string_view pattern,
                                                   std::string_view element) {
  if (pattern == "#") return std::optional<std::string>(std::string(element));
  const size_t star = pattern.find('*');
  if (star == std::string_view::npos) return std::optional<std::string>();
  size_t key_end = pattern.size();
  std::optional<std::string_view> field;
  const size_t arrow = pattern.find("->", star + 1);
  if (arrow != std::string_view::npos && arrow + 2 < pattern.size()) {
    key_end = arrow;
    field = pattern.substr(arrow + 2);
  }
  std::string key(pattern.substr(0, star));
  key.append(element);
  key.append(pattern.substr(star + 1, key_end - star - 1));
  Items& items = scope.items(db);
  if (key.empty() || key.size() > items.max_key_bytes()) return std::optional<std::string>();
  if (field) {
    Result<Collection> h = Collection::Find(scope, db, key, CollectionType::kHash);
    if (!h.ok()) {
      if (h.status().is_not_found() || IsWrongType(h.status())) return std::optional<std::string>();
      return h.status();
    }
    Result<std::string> v = h->Get(sub_space::kHashField, *field);
    if (!v.ok()) {
      if (v.status().is_not_found()) return std::optional<std::string>();
      return v.status();
    }
    return std::optional<std::string>(std::move(v.value()));
  }
  Result<Item> item = items.Get(key);
  if (!item.ok()) {
    if (item.status().is_not_found() || IsWrongType(item.status()))
      return std::optional<std::string>();
    return item.status();
  }
  return std::optional<std::string>(std::move(item->data));
}

// Every member of sub-space `sub` of `c`, ascending bytewise.
void AllMembers(Collection& c, char sub, std::vector<std::string>* out) {
  std::vector<std::pair<std::string, std::string>> batch;
  std::string from;
  for (;;) {
    batch.clear();
    const size_t n = c.Range(sub, from, std::nullopt, kBatch, &batch);
    for (auto& kv : batch) out->push_back(std::move(kv.first));
    if (n < kBatch) return;
    from = out->back();
    from.push_back('\0');
  }
}

// Redis's reading of a sort weight: strtod over the whole string (leading
// white space, hex and "inf" included, as the C library takes them); a
// string with anything after the number, out of range, or NaN is false.
bool ParseWeight(const std::string& s, double* v) {
  errno = 0;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return *end == '\0' && errno != ERANGE && !std::isnan(*v);
}

struct Entry {
  std::string element;
  double score = 0;
  std::optional<std::string> by;  // ALPHA with BY: the value sorted by
};

// The keys SORT names besides its first: the destination of the last
// STORE (Redis's sortGetKeys, which skips the other options' arguments
// the same way). SORT_RO has none.
void SortStoreKey(std::span<const std::string_view> args, std::vector<std::string_view>* keys) {
  std::optional<std::string_view> dest;
  for (size_t j = 2; j < args.size(); ++j) {
    const size_t left = args.size() - j - 1;
    if (EqualsIgnoreCase(args[j], "limit") && left >= 2) {
      j += 2;
    } else if ((EqualsIgnoreCase(args[j], "get") || EqualsIgnoreCase(args[j], "by")) && left >= 1) {
      ++j;
    } else if (EqualsIgnoreCase(args[j], "store") && left >= 1) {
      dest = args[++j];
    }
  }
  if (dest) keys->push_back(*dest);
}

// What SORT reads before sorting: the source's elements in its own order
// and the options as the source's type adjusts them.
struct SortInput {
  bool dontsort = false;
  bool alpha = false;
  std::optional<std::string_view> by;
  CollectionType type = CollectionType::kList;
  std::vector<std::string> elements;
};

// The elements of the list, set or sorted set at `key` (none if absent;
// WRONGTYPE for a hash or a plain value), into *in.
Status ReadSortInput(TxnScope& scope, int db, std::string_view key, const SortOptions& o,
                     SortInput* in) {
  in->dontsort = o.dontsort;
  in->alpha = o.alpha;
  in->by = o.by;
  std::optional<Collection> source;
  Result<Collection> found = FindAnyCollection(scope, db, key);
  if (found.ok()) {
    in->type = found->type();
    if (in->type == CollectionType::kHash) return WrongTypeError();
    source.emplace(std::move(found.value()));
  } else if (!found.status().is_not_found()) {
    return found.status();
  }
  // A set without an order to sort by is stored sorted (Redis's rule).
  if (in->dontsort && in->type == CollectionType::kSet && o.store) {
    in->dontsort = false;
    in->alpha = true;
    in->by.reset();
  }
  if (!source) return Status::OK();
  if (in->type == CollectionType::kList) {
    List list(std::move(*source));
    return list.Read(0, list.size(), &in->elements);
  }
  if (in->type == CollectionType::kSet) {
    AllMembers(*source, sub_space::kSetMember, &in->elements);
  } else {
    // The score index, 8 bytes of score then the member: score order.
    AllMembers(*source, sub_space::kZsetByScore, &in->elements);
    for (std::string& e : in->elements) e.erase(0, 8);
  }
  return Status::OK();
}

// The entries in SORT's order: the source's own (reversed by DESC) with
// DONTSORT, else by score or bytes, of the element or of BY's value.
// False when a weight is not a number (the caller replies the error).
Result<bool> SortEntries(TxnScope& scope, int db, const SortOptions& o, SortInput& in,
                         std::vector<Entry>* v) {
  v->reserve(in.elements.size());
  if (in.dontsort && in.type != CollectionType::kSet) {
    // A list's or sorted set's own order, reversed by DESC.
    if (o.desc) std::reverse(in.elements.begin(), in.elements.end());
  }
  for (std::string& e : in.elements) v->push_back({std::move(e), 0, std::nullopt});
  if (in.dontsort) return true;
  bool not_a_number = false;
  for (Entry& e : *v) {
    std::optional<std::string> weight;
    if (in.by) {
      Result<std::optional<std::string>> w = LookupByPattern(scope, db, *in.by, e.element);
      if (!w.ok()) return w.status();
      if (!w.value()) continue;
      weight = std::move(w.value());
    }
    if (in.alpha) {
      if (in.by) e.by = std::move(weight);
    } else if (!ParseWeight(in.by ? *weight : e.element, &e.score)) {
      not_a_number = true;
    }
  }
  if (not_a_number) return false;
  const bool desc = o.desc, alpha = in.alpha, by_pattern = in.by.has_value();
  auto compare = [alpha, by_pattern](const Entry& a, const Entry& b) -> int {
    if (!alpha) {
      if (a.score != b.score) return a.score < b.score ? -1 : 1;
      return a.element.compare(b.element);
    }
    if (!by_pattern) return a.element.compare(b.element);
    if (!a.by || !b.by) return (a.by ? 1 : 0) - (b.by ? 1 : 0);  // a missing value first
    return a.by->compare(*b.by);
  };
  std::stable_sort(v->begin(), v->end(), [&](const Entry& a, const Entry& b) {
    const int r = compare(a, b);
    return desc ? r > 0 : r < 0;
  });
  return true;
}

// The output: each entry of LIMIT's range (clamped as Redis clamps it), or
// its GETs' values; without STORE, a reply over kMaxMultiReplyBytes is an
// error.
Status SortOutput(TxnScope& scope, int db, const SortOptions& o, const std::vector<Entry>& v,
                  std::vector<std::optional<std::string>>* out) {
  const auto n = static_cast<int64_t>(v.size());
  int64_t start = std::min(std::max<int64_t>(o.limit_start, 0), n);
  const int64_t count = std::min(std::max<int64_t>(o.limit_count, -1), n);
  int64_t end = count < 0 ? n - 1 : start + count - 1;
  if (start >= n) {
    start = n - 1;
    end = n - 2;
  }
  if (end >= n) end = n - 1;
  size_t bytes = 0;
  for (int64_t j = start; j <= end; ++j) {
    const std::string& e = v[static_cast<size_t>(j)].element;
    if (o.gets.empty()) {
      bytes += e.size() + 16;
      out->emplace_back(e);
    }
    for (std::string_view pattern : o.gets) {
      Result<std::optional<std::string>> g = LookupByPattern(scope, db, pattern, e);
      if (!g.ok()) return g.status();
      bytes += (g.value() ? g.value()->size() : 0) + 16;
      out->push_back(std::move(g.value()));
    }
    if (!o.store && bytes > kMaxMultiReplyBytes)
      return Status::InvalidArgument("ERR reply too large");
  }
  return Status::OK();
}

// STORE: the output as a list at the destination (deleted when the
// output is empty), checked before anything is written (an error must
// leave the destination as it was). *stored: a list was written.
Status StoreSorted(TxnScope& scope, int db, std::string_view dest_key,
                   const std::vector<std::optional<std::string>>& out, bool* stored) {
  if (scope.databases() != nullptr) {
    const size_t max = scope.databases()->databases().base().max_value_bytes();
    for (const auto& s : out) {
      if (s && s->size() > max) {
        return Status::InvalidArgument("ERR value too long (at most " + std::to_string(max) +
                                       " bytes)");
      }
    }
  }
  Result<bool> deleted = DeleteKey(scope, db, dest_key);
  if (!deleted.ok()) return deleted.status();
  if (out.empty()) return Status::OK();
  Result<List> dest = FindOrCreateList(scope, db, dest_key);
  if (!dest.ok()) return dest.status();
  for (const auto& s : out)
    PMINDEX_RETURN_IF_ERROR(
        dest->Push(List::End::kRight, s ? std::string_view(*s) : std::string_view()));
  PMINDEX_RETURN_IF_ERROR(dest->Save());
  *stored = true;
  return Status::OK();
}

void SortCommand(CommandCall& c, bool readonly) {
  SortOptions o;
  if (!ParseOptions(c, readonly, &o)) return;
  const int db = c.client.db;
  bool stored = false;
  RunInTransaction(c, [&](TxnScope& scope, RespReply& reply) -> Status {
    stored = false;
    SortInput in;
    PMINDEX_RETURN_IF_ERROR(ReadSortInput(scope, db, c.args[1], o, &in));
    std::vector<Entry> v;
    Result<bool> sorted = SortEntries(scope, db, o, in, &v);
    if (!sorted.ok()) return sorted.status();
    if (!sorted.value()) {
      reply.Error("ERR One or more scores can't be converted into double");
      return Status::OK();
    }
    std::vector<std::optional<std::string>> out;
    PMINDEX_RETURN_IF_ERROR(SortOutput(scope, db, o, v, &out));
    if (!o.store) {
      reply.Array(out.size());
      for (const auto& s : out) {
        if (s) {
          reply.Bulk(*s);
        } else {
          reply.NullBulk();
        }
      }
      return Status::OK();
    }
    PMINDEX_RETURN_IF_ERROR(StoreSorted(scope, db, *o.store, out, &stored));
    reply.Integer(static_cast<int64_t>(out.size()));
    return Status::OK();
  });
  if (stored) NoteKeyReady(c, db, *o.store);
}

void Sort(CommandCall& c) { SortCommand(c, false); }
void SortRo(CommandCall& c) { SortCommand(c, true); }

}  // namespace

void RegisterSortCommands(CommandTable& t) {
  t.Add({.name = "sort",
         .arity = -2,
         .flags = kWrite | kDenyOom | kMovableKeys,
         .first_key = 1,
         .last_key = 1,
         .key_step = 1,
         .more_keys = SortStoreKey,
         .group = "generic",
         .summary = "Sort the elements in a list, set or sorted set",
         .key_flags = "RO ACCESS",
         .categories = "set sortedset list dangerous",
         .handler = Sort});
  t.Add({.name = "sort_ro",
         .arity = -2,
         .flags = kReadonly | kMovableKeys,
         .first_key = 1,
         .last_key = 1,
         .key_step = 1,
         .group = "generic",
         .summary = "Sort the elements in a list, set or sorted set. Read-only variant of SORT.",
         .key_flags = "RO ACCESS",
         .categories = "set sortedset list dangerous",
         .handler = SortRo});
}

}  // namespace pmindex::server
