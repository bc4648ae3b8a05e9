// Lists over the collection layer (collections.h), and the pieces of the
// blocking commands (resp_blocking.h) that the list and sorted-set
// commands share. The commands are in resp_list_commands.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pmindex/status.h"
#include "server/collections.h"
#include "server/resp_command.h"
#include "server/resp_transaction.h"

namespace pmindex::server {

// One list inside one transaction. The element at index i (0 the head) is
// the record at position meta().head + i; positions run from head to
// tail - 1 with no gap, so size() == tail - head. Call Save() after a
// change (it removes the key when the list is empty).
class List {
 public:
  enum class End { kLeft, kRight };

  explicit List(Collection c);

  int64_t size() const { return static_cast<int64_t>(c_.count()); }
  int64_t head() const { return c_.meta().head; }
  Collection& collection() { return c_; }

  // One element at an end: O(log n).
  [[nodiscard]] Status Push(End end, std::string_view value);
  // NotFound if the list is empty.
  [[nodiscard]] Result<std::string> Pop(End end);
  // Up to n elements from an end, in the order they leave (from the left:
  // head first; from the right: tail first). O(n + log size).
  [[nodiscard]] Status PopMany(End end, int64_t n, std::vector<std::string>* out);
  // Appends the elements of indexes [from, to) (clamped) to *out, in
  // order: one range scan.
  [[nodiscard]] Status Read(int64_t from, int64_t to, std::vector<std::string>* out);
  // REQUIRES: 0 <= index < size().
  [[nodiscard]] Result<std::string> At(int64_t index);
  [[nodiscard]] Status Set(int64_t index, std::string_view value);
  // Inserts `value` before index `index` (0..size()), shifting the shorter
  // side: O(min(index, size - index)) element rewrites.
  [[nodiscard]] Status Insert(int64_t index, std::string_view value);
  // Replaces the elements from index `from` to the end with `values`:
  // O(size - from) rewrites.
  [[nodiscard]] Status Rewrite(int64_t from, const std::vector<std::string>& values);
  // Keeps indexes [start, stop] (clamped; nothing if empty):
  // O(removed) removes.
  [[nodiscard]] Status Trim(int64_t start, int64_t stop);
  [[nodiscard]] Status Save() { return c_.Save(); }

  // The element key's member for position p (OrderedInt64).
  static std::string Position(int64_t p);

 private:
  Collection c_;
};

// The list at `key` (nullopt: no key), WRONGTYPE or a store error.
[[nodiscard]] Result<std::optional<List>> FindList(TxnScope& scope, int db, std::string_view key);
[[nodiscard]] Result<List> FindOrCreateList(TxnScope& scope, int db, std::string_view key);

// ------------------------------------------------------------ blocking

// Records that the running command may have made `key` of database `db`
// non-empty: its parked clients are served after the commit (no-op when
// no client is parked).
void NoteKeyReady(CommandCall& c, int db, std::string_view key);

// Parses a blocking command's timeout (seconds, fractional allowed) into
// a deadline on the steady clock (0: forever); replies Redis's error and
// returns false if it is not a number or negative.
bool ParseTimeout(CommandCall& c, std::string_view arg, int64_t* deadline_ms);

// The pop of a blocking command, run in one transaction: it writes its
// reply and sets *served, or writes nothing and leaves *served false (all
// its keys empty). Keys it pushed to go to *pushed. It owns what it
// captures: a parked client's copy runs later, on any thread.
using ServeBody = std::function<Status(TxnScope& scope, RespReply& reply, bool* served,
                                       std::vector<std::string>* pushed)>;

// Runs a blocking command: `now` at once (as its non-blocking form,
// errors such as WRONGTYPE replied); if it served nothing: inside
// MULTI/EXEC replies a null (`null_bulk_in_multi`: a null bulk, else a
// null array), as Redis; otherwise parks the client on `keys` until
// `later` (run by whoever serves it) serves it or the deadline passes
// (reply: a null array, RESP3 null).
void RunBlocking(CommandCall& c, std::vector<std::string> keys, int64_t deadline_ms,
                 const ServeBody& now, ServeBody later, bool null_bulk_in_multi);

}  // namespace pmindex::server
