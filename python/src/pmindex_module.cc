// pmindex._pmindex: the Python binding of the user API (pmindex/db.h,
// pmindex/kv.h), documented for users in docs/python.md and typed in
// python/pmindex/__init__.pyi.
//
// Handles. A Python Db or KvStore holds a shared_ptr to a handle that owns
// the C++ object; its iterators and transactions hold the same shared_ptr,
// so the C++ object lives while any of them does. Each call releases the
// GIL around the library call (the call may block on a lock, a page fault
// or a file). Because other Python threads then run, the handle enforces
// the C++ contracts itself:
//   - close() must not run concurrently with anything on the Db or store:
//     data calls hold `mu` shared, close holds it exclusive, and a call
//     that finds the handle closed raises InvalidArgument;
//   - every Transaction must be gone before KvStore::Close, and an
//     iterator must not outlive its Db: close() refuses (InvalidArgument)
//     while `open_cursors` (iterators and transactions) is not zero. The
//     count is raised before a cursor is created and checked under the
//     exclusive lock, so a cursor made while close() runs is either
//     refused by it or sees the handle closed;
//   - one C++ Transaction or Iterator is used by one thread at a time: each
//     Python cursor serializes its calls with its own mutex.
// Errors are Status codes raised as the exception classes made in
// MakeExceptions (pmindex.Error and one subclass per code).

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pmindex/db.h"
#include "pmindex/kv.h"
#include "pmindex/status.h"
#include "pmindex/version.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using pmindex::Key;
using pmindex::Status;
using pmindex::Value;

// ------------------------------------------------------------- exceptions

constexpr int kCodes = static_cast<int>(Status::Code::kAborted) + 1;
// Owned references for the life of the process (never released: the
// module cannot be unloaded).
PyObject* g_error = nullptr;
PyObject* g_code_error[kCodes] = {};

void MakeExceptions(nb::module_& m) {
  g_error = PyErr_NewExceptionWithDoc("pmindex.Error",
                                      "Base class of every error pmindex raises.", nullptr,
                                      nullptr);
  if (g_error == nullptr) throw nb::python_error();
  m.attr("Error") = nb::handle(g_error);
  struct Spec {
    Status::Code code;
    const char* name;
    PyObject* also;  // a builtin base Python code expects, or null
    const char* doc;
  };
  const Spec specs[] = {
      {Status::Code::kNotFound, "NotFound", PyExc_KeyError,
       "A key is absent (remove, update, store[k]) or a pool file is missing. A KeyError too."},
      {Status::Code::kAlreadyExists, "AlreadyExists", nullptr,
       "Db.insert of a present key, or create() of an existing path."},
      {Status::Code::kInvalidArgument, "InvalidArgument", PyExc_ValueError,
       "Bad kind, option, key or value size, or a call on a closed handle or a finished "
       "transaction. A ValueError too."},
      {Status::Code::kCorruption, "Corruption", nullptr,
       "The pool fails a check; it was not changed."},
      {Status::Code::kNotSupported, "NotSupported", nullptr,
       "A pool of a newer format, or an operation the kind lacks."},
      {Status::Code::kIOError, "IOError", PyExc_OSError, "A system call failed. An OSError too."},
      {Status::Code::kOutOfSpace, "OutOfSpace", nullptr,
       "The pool reached its maximum size or the disk is full; nothing changed."},
      {Status::Code::kBusy, "Busy", nullptr, "The pool is open elsewhere (another handle)."},
      {Status::Code::kWrongKind, "WrongKind", nullptr,
       "The pool holds another index kind, or a store where an index was expected (or the "
       "reverse)."},
      {Status::Code::kAborted, "Aborted", nullptr,
       "A transaction conflicted with another one and changed nothing: retry it."},
  };
  for (const Spec& s : specs) {
    PyObject* bases = s.also != nullptr ? PyTuple_Pack(2, g_error, s.also)
                                        : PyTuple_Pack(1, g_error);
    if (bases == nullptr) throw nb::python_error();
    const std::string qualified = std::string("pmindex.") + s.name;
    PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), s.doc, bases, nullptr);
    Py_DECREF(bases);
    if (cls == nullptr) throw nb::python_error();
    g_code_error[static_cast<int>(s.code)] = cls;
    m.attr(s.name) = nb::handle(cls);
  }
}

PyObject* ErrorClass(Status::Code c) {
  const int i = static_cast<int>(c);
  return i > 0 && i < kCodes && g_code_error[i] != nullptr ? g_code_error[i] : g_error;
}

// Raises `s` (not OK) as its exception class. Needs the GIL.
[[noreturn]] void Raise(const Status& s) {
  std::string msg(s.message());
  if (msg.empty()) msg = Status::CodeName(s.code());
  PyErr_SetString(ErrorClass(s.code()), msg.c_str());
  throw nb::python_error();
}

// NotFound with the key as its argument, as KeyError(key) would have it.
[[noreturn]] void RaiseMissingKey(nb::handle key) {
  PyErr_SetObject(ErrorClass(Status::Code::kNotFound), key.ptr());
  throw nb::python_error();
}

void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

[[noreturn]] void RaiseInvalid(const std::string& msg) { Raise(Status::InvalidArgument(msg)); }

// ------------------------------------------------------------- arguments

// Options as "key=value,..." from a str or a dict {key: value}.
std::string OptionsString(nb::handle o) {
  if (o.is_none()) return {};
  if (nb::isinstance<nb::str>(o)) return nb::cast<std::string>(o);
  if (nb::isinstance<nb::dict>(o)) {
    std::string out;
    for (auto [k, v] : nb::borrow<nb::dict>(o)) {
      if (!out.empty()) out += ',';
      out += nb::cast<std::string>(nb::str(k));
      out += '=';
      out += nb::cast<std::string>(nb::str(v));
    }
    return out;
  }
  throw nb::type_error("options must be a str \"key=value,...\" or a dict");
}

pmindex::DbOptions MakeDbOptions(uint64_t size, uint64_t max_size, uint64_t segment_size) {
  pmindex::DbOptions o;
  o.size = size;
  o.max_size = max_size;
  o.segment_size = segment_size;
  return o;
}

// A KvStore key or value: bytes, or a str (its UTF-8). The view stays valid
// while the caller holds the object, GIL released or not (both types are
// immutable and a str keeps its UTF-8 form).
std::string_view BytesView(nb::handle o, const char* what) {
  if (PyBytes_Check(o.ptr())) {
    char* data = nullptr;
    Py_ssize_t size = 0;
    if (PyBytes_AsStringAndSize(o.ptr(), &data, &size) != 0) throw nb::python_error();
    return {data, static_cast<size_t>(size)};
  }
  if (PyUnicode_Check(o.ptr())) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(o.ptr(), &size);
    if (data == nullptr) throw nb::python_error();
    return {data, static_cast<size_t>(size)};
  }
  throw nb::type_error((std::string(what) + " must be bytes or str").c_str());
}

nb::bytes ToBytes(const std::string& s) { return nb::bytes(s.data(), s.size()); }

size_t LimitOf(std::optional<size_t> limit) {
  return limit ? *limit : std::numeric_limits<size_t>::max();
}

// ------------------------------------------------------------- handles

template <class T>
struct Handle {
  explicit Handle(std::unique_ptr<T> t, const char* closed_msg)
      : object(std::move(t)), closed_message(closed_msg) {}
  std::unique_ptr<T> object;
  const char* closed_message;
  std::shared_mutex mu;  // shared: a call; exclusive: close
  bool closed = false;   // written under mu exclusive
  std::atomic<int> open_cursors{0};

  // Runs f(object) with the GIL released and mu shared; raises
  // InvalidArgument if the handle is closed.
  template <class F>
  void Run(F&& f) {
    bool was_closed;
    {
      nb::gil_scoped_release release;
      std::shared_lock<std::shared_mutex> lock(mu);
      was_closed = closed;
      if (!was_closed) f(*object);
    }
    if (was_closed) RaiseInvalid(closed_message);
  }

  void Close(const char* what) {
    Status s;
    int cursors = 0;
    {
      nb::gil_scoped_release release;
      std::unique_lock<std::shared_mutex> lock(mu);
      cursors = open_cursors.load();
      if (cursors == 0 && !closed) {
        s = object->Close();
        closed = true;
      }
    }
    if (cursors != 0) {
      RaiseInvalid(std::string(what) + ".close(): " + std::to_string(cursors) +
                   " iterator(s) or transaction(s) still open; finish or close them first");
    }
    Check(s);
  }

  bool is_closed() {
    std::shared_lock<std::shared_mutex> lock(mu);
    return closed;
  }

  // Counts a cursor before it is created (see the file comment); raises if
  // the handle is closed.
  void AddCursor() {
    open_cursors.fetch_add(1);
    if (is_closed()) {
      open_cursors.fetch_sub(1);
      RaiseInvalid(closed_message);
    }
  }
};

using DbHandle = Handle<pmindex::Db>;
using KvHandle = Handle<pmindex::KvStore>;

constexpr const char* kDbClosed = "the Db is closed";
constexpr const char* kKvClosed = "the store is closed";

template <class T>
T Unwrap(pmindex::Result<T>&& r) {
  if (!r.ok()) Raise(r.status());
  return std::move(r).value();
}

nb::dict StatsDict(const pmindex::IndexStats& s) {
  nb::dict d;
  d["height"] = s.height;
  d["entries"] = s.entries;
  d["inner_nodes"] = s.inner_nodes;
  d["leaves"] = s.leaves;
  d["pm_bytes"] = s.pm_bytes;
  d["dram_bytes"] = s.dram_bytes;
  for (const auto& [name, value] : s.extra) d[name.c_str()] = value;
  return d;
}

// ------------------------------------------------------------- Db

class PyDb;

// `for k, v in db.items(lo, hi)`: a C++ Iterator, positioned at lo.
class DbItems {
 public:
  DbItems(std::shared_ptr<DbHandle> h, Key lo, std::optional<Key> hi) : h_(std::move(h)), hi_(hi) {
    h_->AddCursor();
    counted_ = true;
    bool was_closed = false;
    {
      nb::gil_scoped_release release;
      std::shared_lock<std::shared_mutex> lock(h_->mu);
      was_closed = h_->closed;
      if (!was_closed) {
        it_ = h_->object->NewIterator();
        it_->Seek(lo);
      }
    }
    if (was_closed) {
      Release();
      RaiseInvalid(kDbClosed);
    }
  }
  ~DbItems() { Release(); }
  DbItems(const DbItems&) = delete;
  DbItems& operator=(const DbItems&) = delete;

  std::pair<Key, Value> Next() {
    if (it_ == nullptr) throw nb::stop_iteration();
    bool valid = false;
    Key k = 0;
    Value v = 0;
    Status s;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      valid = it_->Valid() && (!hi_ || it_->key() < *hi_);
      if (valid) {
        k = it_->key();
        v = it_->value();
        it_->Next();
      } else {
        s = it_->status();
      }
    }
    if (!valid) {
      Release();
      Check(s);
      throw nb::stop_iteration();
    }
    return {k, v};
  }

  // Frees the C++ iterator and lets the Db close; idempotent.
  void Release() {
    if (it_ != nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      it_.reset();
    }
    if (counted_) {
      counted_ = false;
      h_->open_cursors.fetch_sub(1);
    }
  }

 private:
  std::shared_ptr<DbHandle> h_;
  std::optional<Key> hi_;
  std::unique_ptr<pmindex::Iterator> it_;
  std::mutex mu_;  // one thread at a time in the C++ iterator
  bool counted_ = false;
};

class PyDb {
 public:
  explicit PyDb(std::unique_ptr<pmindex::Db> db)
      : h_(std::make_shared<DbHandle>(std::move(db), kDbClosed)) {}

  static PyDb Create(const std::filesystem::path& path, const std::string& kind,
                     nb::handle options, uint64_t size, uint64_t max_size,
                     uint64_t segment_size) {
    const std::string opts = OptionsString(options);
    const pmindex::DbOptions dbo = MakeDbOptions(size, max_size, segment_size);
    const std::string p = path.string();
    pmindex::Result<std::unique_ptr<pmindex::Db>> r = Status::IOError("not run");
    {
      nb::gil_scoped_release release;
      r = pmindex::Db::Create(p, kind, opts, dbo);
    }
    return PyDb(Unwrap(std::move(r)));
  }

  static PyDb Open(const std::filesystem::path& path, std::optional<std::string> kind) {
    const std::string p = path.string();
    const std::string k = kind.value_or("");
    pmindex::Result<std::unique_ptr<pmindex::Db>> r = Status::IOError("not run");
    {
      nb::gil_scoped_release release;
      r = pmindex::Db::Open(p, k);
    }
    return PyDb(Unwrap(std::move(r)));
  }

  static PyDb InMemory(const std::string& kind, nb::handle options, uint64_t size,
                       uint64_t max_size) {
    const std::string opts = OptionsString(options);
    const pmindex::DbOptions dbo = MakeDbOptions(size, max_size, 0);
    pmindex::Result<std::unique_ptr<pmindex::Db>> r = Status::IOError("not run");
    {
      nb::gil_scoped_release release;
      r = pmindex::Db::CreateInMemory(kind, opts, dbo);
    }
    return PyDb(Unwrap(std::move(r)));
  }

  void Insert(Key k, Value v) { Check(Call([&](pmindex::Db& db) { return db.Insert(k, v); })); }
  void Upsert(Key k, Value v) { Check(Call([&](pmindex::Db& db) { return db.Upsert(k, v); })); }
  void Update(Key k, Value v) { Check(Call([&](pmindex::Db& db) { return db.Update(k, v); })); }
  void Remove(Key k) { Check(Call([&](pmindex::Db& db) { return db.Remove(k); })); }

  // The value, or `def` if k is absent.
  nb::object Get(Key k, nb::handle def) {
    pmindex::Result<Value> r = Status::NotFound();
    h_->Run([&](pmindex::Db& db) { r = db.Get(k); });
    if (r.ok()) return nb::int_(r.value());
    if (r.status().is_not_found()) return nb::borrow(def);
    Raise(r.status());
  }

  Value GetItem(nb::handle key_obj) {
    const Key k = nb::cast<Key>(key_obj);
    pmindex::Result<Value> r = Status::NotFound();
    h_->Run([&](pmindex::Db& db) { r = db.Get(k); });
    if (r.ok()) return r.value();
    if (r.status().is_not_found()) RaiseMissingKey(key_obj);
    Raise(r.status());
  }

  void DelItem(nb::handle key_obj) {
    const Key k = nb::cast<Key>(key_obj);
    Status s = Call([&](pmindex::Db& db) { return db.Remove(k); });
    if (s.is_not_found()) RaiseMissingKey(key_obj);
    Check(s);
  }

  bool Contains(Key k) {
    bool found = false;
    h_->Run([&](pmindex::Db& db) { found = db.Exists(k); });
    return found;
  }

  uint64_t Count() {
    uint64_t n = 0;
    h_->Run([&](pmindex::Db& db) { n = db.Count(); });
    return n;
  }

  std::vector<std::pair<Key, Value>> Range(Key lo, std::optional<Key> hi,
                                           std::optional<size_t> limit) {
    std::vector<pmindex::KV> out;
    h_->Run([&](pmindex::Db& db) { db.Range(lo, hi, LimitOf(limit), &out); });
    std::vector<std::pair<Key, Value>> pairs;
    pairs.reserve(out.size());
    for (const pmindex::KV& kv : out) pairs.emplace_back(kv.key, kv.value);
    return pairs;
  }

  DbItems* Items(Key lo, std::optional<Key> hi) { return new DbItems(h_, lo, hi); }

  // Zero copy: an (n, 2) C-contiguous uint64 array is a span of KV.
  void BulkLoadPairs(nb::ndarray<const uint64_t, nb::shape<-1, 2>, nb::c_contig, nb::device::cpu> a,
                     double fill) {
    static_assert(sizeof(pmindex::KV) == 2 * sizeof(uint64_t));
    const auto* kv = reinterpret_cast<const pmindex::KV*>(a.data());
    const std::span<const pmindex::KV> pairs(kv, a.shape(0));
    Check(Call([&](pmindex::Db& db) { return db.BulkLoad(pairs, fill); }));
  }

  // Two arrays of equal length, interleaved into one temporary buffer.
  void BulkLoadColumns(nb::ndarray<const uint64_t, nb::ndim<1>, nb::device::cpu> keys,
                       nb::ndarray<const uint64_t, nb::ndim<1>, nb::device::cpu> values,
                       double fill) {
    if (keys.shape(0) != values.shape(0)) {
      RaiseInvalid("bulk_load: keys and values differ in length (" +
                   std::to_string(keys.shape(0)) + " and " + std::to_string(values.shape(0)) +
                   ")");
    }
    auto kview = keys.view();
    auto vview = values.view();
    const size_t n = keys.shape(0);
    Status s;
    h_->Run([&](pmindex::Db& db) {
      std::vector<pmindex::KV> pairs(n);
      for (size_t i = 0; i < n; ++i) pairs[i] = {kview(i), vview(i)};
      s = db.BulkLoad(pairs, fill);
    });
    Check(s);
  }

  // Looks up every key of a uint64 array in one call: (values, found).
  std::pair<nb::ndarray<nb::numpy, uint64_t, nb::ndim<1>>,
            nb::ndarray<nb::numpy, bool, nb::ndim<1>>>
  GetMany(nb::ndarray<const uint64_t, nb::ndim<1>, nb::device::cpu> keys) {
    const size_t n = keys.shape(0);
    auto* values = new uint64_t[n];
    nb::capsule values_owner(values, [](void* p) noexcept { delete[] static_cast<uint64_t*>(p); });
    auto* found = new bool[n];
    nb::capsule found_owner(found, [](void* p) noexcept { delete[] static_cast<bool*>(p); });
    auto kview = keys.view();
    Status error;
    h_->Run([&](pmindex::Db& db) {
      for (size_t i = 0; i < n; ++i) {
        pmindex::Result<Value> r = db.Get(kview(i));
        found[i] = r.ok();
        values[i] = r.ok() ? r.value() : 0;
        if (!r.ok() && !r.status().is_not_found() && error.ok()) error = r.status();
      }
    });
    Check(error);
    return {nb::ndarray<nb::numpy, uint64_t, nb::ndim<1>>(values, {n}, values_owner),
            nb::ndarray<nb::numpy, bool, nb::ndim<1>>(found, {n}, found_owner)};
  }

  void Verify() { Check(Call([&](pmindex::Db& db) { return db.Verify(); })); }
  void Sync() { Check(Call([&](pmindex::Db& db) { return db.Sync(); })); }
  nb::dict Stats() {
    pmindex::IndexStats s;
    h_->Run([&](pmindex::Db& db) { s = db.Stats(); });
    return StatsDict(s);
  }

  void Close() { h_->Close("Db"); }
  bool closed() { return h_->is_closed(); }
  // The accessors keep their values after Close (pmindex/db.h).
  std::string kind() const { return std::string(h_->object->kind()); }
  std::string options() const { return h_->object->options(); }
  bool persistent() const { return h_->object->persistent(); }
  std::string path() const { return h_->object->path(); }
  std::string durability() const { return std::string(h_->object->durability()); }

 private:
  template <class F>
  Status Call(F&& f) {
    Status s;
    h_->Run([&](pmindex::Db& db) { s = f(db); });
    return s;
  }

  std::shared_ptr<DbHandle> h_;
};

// ------------------------------------------------------------- KvStore

using Pairs = std::vector<std::pair<std::string, std::string>>;

nb::list PairsList(const Pairs& pairs) {
  nb::list out;
  for (const auto& [k, v] : pairs) out.append(nb::make_tuple(ToBytes(k), ToBytes(v)));
  return out;
}

// `for k, v in store.items(lo, hi)`: Range in batches, each read at its own
// snapshot.
class KvItems {
 public:
  static constexpr size_t kBatch = 256;

  KvItems(std::shared_ptr<KvHandle> h, std::string lo, std::optional<std::string> hi,
          bool keys_only)
      : h_(std::move(h)), next_(std::move(lo)), hi_(std::move(hi)), keys_only_(keys_only) {
    h_->AddCursor();
    counted_ = true;
  }
  ~KvItems() { Release(); }
  KvItems(const KvItems&) = delete;
  KvItems& operator=(const KvItems&) = delete;

  nb::object Next() {
    if (pos_ == batch_.size()) {
      if (done_) {
        Release();
        throw nb::stop_iteration();
      }
      batch_.clear();
      pos_ = 0;
      bool was_closed = false;
      {
        nb::gil_scoped_release release;
        std::lock_guard<std::mutex> cursor_lock(mu_);
        std::shared_lock<std::shared_mutex> lock(h_->mu);
        was_closed = h_->closed;
        if (!was_closed) {
          std::optional<std::string_view> hi;
          if (hi_) hi = *hi_;
          h_->object->Range(next_, hi, kBatch, &batch_);
        }
      }
      if (was_closed) {
        Release();
        RaiseInvalid(kKvClosed);
      }
      if (batch_.size() < kBatch) {
        done_ = true;
      } else {
        // The least key after the batch's last: the last with a 0 byte.
        next_ = batch_.back().first;
        next_.push_back('\0');
      }
      if (batch_.empty()) {
        Release();
        throw nb::stop_iteration();
      }
    }
    const auto& [k, v] = batch_[pos_++];
    if (keys_only_) return ToBytes(k);
    return nb::make_tuple(ToBytes(k), ToBytes(v));
  }

  void Release() {
    if (counted_) {
      counted_ = false;
      done_ = true;
      batch_.clear();
      pos_ = 0;
      h_->open_cursors.fetch_sub(1);
    }
  }

 private:
  std::shared_ptr<KvHandle> h_;
  std::string next_;
  std::optional<std::string> hi_;
  bool keys_only_;
  Pairs batch_;
  size_t pos_ = 0;
  bool done_ = false;
  bool counted_ = false;
  std::mutex mu_;
};

class PyTransaction {
 public:
  explicit PyTransaction(std::shared_ptr<KvHandle> h) : h_(std::move(h)) {
    h_->AddCursor();
    counted_ = true;
    bool was_closed = false;
    {
      nb::gil_scoped_release release;
      std::shared_lock<std::shared_mutex> lock(h_->mu);
      was_closed = h_->closed;
      if (!was_closed) tx_ = h_->object->Begin();
    }
    if (was_closed) {
      Finish();
      RaiseInvalid(kKvClosed);
    }
  }
  ~PyTransaction() { Finish(); }
  PyTransaction(const PyTransaction&) = delete;
  PyTransaction& operator=(const PyTransaction&) = delete;

  nb::object Get(nb::handle key, nb::handle def) {
    const std::string_view k = BytesView(key, "key");
    pmindex::Result<std::string> r = Status::NotFound();
    Run([&](pmindex::Transaction& tx) { r = tx.Get(k); });
    if (r.ok()) return ToBytes(r.value());
    if (r.status().is_not_found()) return nb::borrow(def);
    Raise(r.status());
  }
  nb::bytes GetItem(nb::handle key) {
    const std::string_view k = BytesView(key, "key");
    pmindex::Result<std::string> r = Status::NotFound();
    Run([&](pmindex::Transaction& tx) { r = tx.Get(k); });
    if (r.ok()) return ToBytes(r.value());
    if (r.status().is_not_found()) RaiseMissingKey(key);
    Raise(r.status());
  }
  void Put(nb::handle key, nb::handle value) {
    const std::string_view k = BytesView(key, "key"), v = BytesView(value, "value");
    Status s;
    Run([&](pmindex::Transaction& tx) { s = tx.Put(k, v); });
    Check(s);
  }
  void Remove(nb::handle key, bool missing_is_key_error) {
    const std::string_view k = BytesView(key, "key");
    Status s;
    Run([&](pmindex::Transaction& tx) { s = tx.Remove(k); });
    if (missing_is_key_error && s.is_not_found()) RaiseMissingKey(key);
    Check(s);
  }
  nb::list Range(nb::handle lo, nb::handle hi, std::optional<size_t> limit) {
    const std::string_view l = BytesView(lo, "lo");
    std::optional<std::string_view> h;
    if (!hi.is_none()) h = BytesView(hi, "hi");
    Pairs out;
    Run([&](pmindex::Transaction& tx) { tx.Range(l, h, LimitOf(limit), &out); });
    return PairsList(out);
  }
  void Validate(nb::handle key) {
    const std::string_view k = BytesView(key, "key");
    Status s;
    Run([&](pmindex::Transaction& tx) { s = tx.Validate(k); });
    Check(s);
  }
  void Commit() {
    Status s;
    Run([&](pmindex::Transaction& tx) { s = tx.Commit(); });
    Finish();
    Check(s);
  }
  void Abort() {
    if (tx_ == nullptr) return;  // finished: nothing to abort
    Run([&](pmindex::Transaction& tx) { tx.Abort(); });
    Finish();
  }
  uint64_t snapshot() {
    uint64_t ts = 0;
    Run([&](pmindex::Transaction& tx) { ts = tx.snapshot(); });
    return ts;
  }
  bool finished() const { return tx_ == nullptr; }

  // The context manager's exit: commit if the block raised nothing, else
  // abort. Returns false (an exception of the block propagates).
  bool Exit(nb::handle exc_type) {
    if (tx_ == nullptr) return false;
    if (exc_type.is_none()) {
      Commit();
    } else {
      Abort();
    }
    return false;
  }

 private:
  template <class F>
  void Run(F&& f) {
    if (tx_ == nullptr) RaiseInvalid("the transaction is finished (committed or aborted)");
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu_);
    f(*tx_);
  }

  // Destroys the C++ transaction (aborting it if still open) and lets the
  // store close; idempotent.
  void Finish() {
    if (tx_ != nullptr) {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      tx_.reset();
    }
    if (counted_) {
      counted_ = false;
      h_->open_cursors.fetch_sub(1);
    }
  }

  std::shared_ptr<KvHandle> h_;
  std::unique_ptr<pmindex::Transaction> tx_;  // null once finished
  std::mutex mu_;
  bool counted_ = false;
};

class PyKvStore {
 public:
  explicit PyKvStore(std::unique_ptr<pmindex::KvStore> kv)
      : h_(std::make_shared<KvHandle>(std::move(kv), kKvClosed)) {}

  static PyKvStore Create(const std::filesystem::path& path, const std::string& kind,
                          nb::handle options, uint64_t size, uint64_t max_size,
                          uint64_t segment_size) {
    const std::string opts = OptionsString(options);
    const pmindex::DbOptions dbo = MakeDbOptions(size, max_size, segment_size);
    const std::string p = path.string();
    pmindex::Result<std::unique_ptr<pmindex::KvStore>> r = Status::IOError("not run");
    {
      nb::gil_scoped_release release;
      r = pmindex::KvStore::Create(p, kind, opts, dbo);
    }
    return PyKvStore(Unwrap(std::move(r)));
  }

  static PyKvStore Open(const std::filesystem::path& path) {
    const std::string p = path.string();
    pmindex::Result<std::unique_ptr<pmindex::KvStore>> r = Status::IOError("not run");
    {
      nb::gil_scoped_release release;
      r = pmindex::KvStore::Open(p);
    }
    return PyKvStore(Unwrap(std::move(r)));
  }

  static PyKvStore InMemory(const std::string& kind, nb::handle options, uint64_t size,
                            uint64_t max_size) {
    const std::string opts = OptionsString(options);
    const pmindex::DbOptions dbo = MakeDbOptions(size, max_size, 0);
    pmindex::Result<std::unique_ptr<pmindex::KvStore>> r = Status::IOError("not run");
    {
      nb::gil_scoped_release release;
      r = pmindex::KvStore::CreateInMemory(kind, opts, dbo);
    }
    return PyKvStore(Unwrap(std::move(r)));
  }

  nb::object Get(nb::handle key, nb::handle def) {
    const std::string_view k = BytesView(key, "key");
    pmindex::Result<std::string> r = Status::NotFound();
    h_->Run([&](pmindex::KvStore& kv) { r = kv.Get(k); });
    if (r.ok()) return ToBytes(r.value());
    if (r.status().is_not_found()) return nb::borrow(def);
    Raise(r.status());
  }

  nb::bytes GetItem(nb::handle key) {
    const std::string_view k = BytesView(key, "key");
    pmindex::Result<std::string> r = Status::NotFound();
    h_->Run([&](pmindex::KvStore& kv) { r = kv.Get(k); });
    if (r.ok()) return ToBytes(r.value());
    if (r.status().is_not_found()) RaiseMissingKey(key);
    Raise(r.status());
  }

  nb::object GetVersioned(nb::handle key) {
    const std::string_view k = BytesView(key, "key");
    pmindex::Result<pmindex::VersionedValue> r = Status::NotFound();
    h_->Run([&](pmindex::KvStore& kv) { r = kv.GetVersioned(k); });
    if (r.ok()) return nb::make_tuple(ToBytes(r.value().value), r.value().version);
    if (r.status().is_not_found()) return nb::none();
    Raise(r.status());
  }

  bool Contains(nb::handle key) {
    const std::string_view k = BytesView(key, "key");
    bool found = false;
    h_->Run([&](pmindex::KvStore& kv) { found = kv.Exists(k); });
    return found;
  }

  void Put(nb::handle key, nb::handle value) {
    const std::string_view k = BytesView(key, "key"), v = BytesView(value, "value");
    Check(Call([&](pmindex::KvStore& kv) { return kv.Put(k, v); }));
  }

  // True if stored; false if the condition failed (the key was present /
  // absent / at another version).
  bool PutIfAbsent(nb::handle key, nb::handle value) {
    const std::string_view k = BytesView(key, "key"), v = BytesView(value, "value");
    Status s = Call([&](pmindex::KvStore& kv) { return kv.PutIfAbsent(k, v); });
    if (s.is_already_exists()) return false;
    Check(s);
    return true;
  }
  bool PutIfPresent(nb::handle key, nb::handle value) {
    const std::string_view k = BytesView(key, "key"), v = BytesView(value, "value");
    Status s = Call([&](pmindex::KvStore& kv) { return kv.PutIfPresent(k, v); });
    if (s.is_not_found()) return false;
    Check(s);
    return true;
  }
  bool PutIfVersion(nb::handle key, nb::handle value, uint64_t version) {
    const std::string_view k = BytesView(key, "key"), v = BytesView(value, "value");
    Status s = Call([&](pmindex::KvStore& kv) { return kv.PutIfVersion(k, v, version); });
    if (s.is_aborted()) return false;
    Check(s);  // NotFound: the key is absent
    return true;
  }

  void Remove(nb::handle key, bool missing_is_key_error) {
    const std::string_view k = BytesView(key, "key");
    Status s = Call([&](pmindex::KvStore& kv) { return kv.Remove(k); });
    if (missing_is_key_error && s.is_not_found()) RaiseMissingKey(key);
    Check(s);
  }

  uint64_t Count() {
    uint64_t n = 0;
    h_->Run([&](pmindex::KvStore& kv) { n = kv.Count(); });
    return n;
  }

  nb::list Range(nb::handle lo, nb::handle hi, std::optional<size_t> limit) {
    const std::string_view l = BytesView(lo, "lo");
    std::optional<std::string_view> h;
    if (!hi.is_none()) h = BytesView(hi, "hi");
    Pairs out;
    h_->Run([&](pmindex::KvStore& kv) { kv.Range(l, h, LimitOf(limit), &out); });
    return PairsList(out);
  }

  KvItems* Items(nb::handle lo, nb::handle hi, bool keys_only) {
    std::string l(BytesView(lo, "lo"));
    std::optional<std::string> h;
    if (!hi.is_none()) h = std::string(BytesView(hi, "hi"));
    return new KvItems(h_, std::move(l), std::move(h), keys_only);
  }

  PyTransaction* Begin() { return new PyTransaction(h_); }

  void Verify() { Check(Call([&](pmindex::KvStore& kv) { return kv.Verify(); })); }
  void Sync() { Check(Call([&](pmindex::KvStore& kv) { return kv.Sync(); })); }
  nb::dict Stats() {
    pmindex::KvStats s;
    h_->Run([&](pmindex::KvStore& kv) { s = kv.Stats(); });
    nb::dict d;
    d["keys"] = s.keys;
    d["versions"] = s.versions;
    d["commits"] = s.commits;
    d["aborts"] = s.aborts;
    d["reclaimed_versions"] = s.reclaimed_versions;
    d["pm_bytes"] = s.pm_bytes;
    d["index"] = StatsDict(s.index);
    return d;
  }

  void Close() { h_->Close("KvStore"); }
  bool closed() { return h_->is_closed(); }
  std::string kind() const { return std::string(h_->object->index_kind()); }
  std::string options() const { return std::string(h_->object->index_options()); }

 private:
  template <class F>
  Status Call(F&& f) {
    Status s;
    h_->Run([&](pmindex::KvStore& kv) { s = f(kv); });
    return s;
  }

  std::shared_ptr<KvHandle> h_;
};

// Binds __enter__ (returns self) and __exit__ (close, propagating the
// block's exception) on a handle class.
template <class C>
void BindContextManager(nb::class_<C>& c) {
  c.def("__enter__", [](nb::handle self) { return nb::borrow(self); });
  c.def(
      "__exit__",
      [](C& self, nb::handle, nb::handle, nb::handle) {
        self.Close();
        return false;
      },
      "exc_type"_a.none(), "exc"_a.none(), "tb"_a.none());
}

}  // namespace

NB_MODULE(_pmindex, m) {
  m.doc() = "pmindex: persistent-memory B+-trees and a transactional key-value store";
  m.attr("__version__") = pmindex::version();
  MakeExceptions(m);

  nb::class_<pmindex::KindInfo>(m, "KindInfo", "One registered index kind.")
      .def_ro("name", &pmindex::KindInfo::name)
      .def_ro("persistent", &pmindex::KindInfo::persistent)
      .def_ro("options_help", &pmindex::KindInfo::options_help)
      .def("__repr__", [](const pmindex::KindInfo& k) {
        return "KindInfo(name='" + k.name + "', persistent=" + (k.persistent ? "True" : "False") +
               ", options_help='" + k.options_help + "')";
      });
  m.def("list_kinds", &pmindex::Db::Kinds, "Every index kind this build knows, sorted by name.");

  const pmindex::DbOptions defaults;

  nb::class_<DbItems>(m, "DbIterator")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", &DbItems::Next)
      .def("close", &DbItems::Release, "Frees the iterator early (the Db can then close).");

  nb::class_<PyDb> db(m, "Db",
                      "An index of uint64 keys and values in a pool file (or in memory).");
  db.def_static("create", &PyDb::Create, "path"_a, "kind"_a, "options"_a.none() = "",
                nb::kw_only(), "size"_a = defaults.size, "max_size"_a = defaults.max_size,
                "segment_size"_a = defaults.segment_size,
                "Creates PATH (which must not exist) holding an empty index of `kind`.")
      .def_static("open", &PyDb::Open, "path"_a, "kind"_a.none() = nb::none(),
                  "Opens an existing pool and recovers after a crash.")
      .def_static("in_memory", &PyDb::InMemory, "kind"_a, "options"_a.none() = "",
                  nb::kw_only(), "size"_a = defaults.size, "max_size"_a = defaults.max_size,
                  "An index that lives and dies with the process.")
      .def("insert", &PyDb::Insert, "key"_a, "value"_a, "AlreadyExists if key is present.")
      .def("upsert", &PyDb::Upsert, "key"_a, "value"_a, "Inserts or replaces.")
      .def("update", &PyDb::Update, "key"_a, "value"_a, "Replaces; NotFound if key is absent.")
      .def("remove", &PyDb::Remove, "key"_a, "NotFound if key is absent.")
      .def("get", &PyDb::Get, "key"_a, "default"_a.none() = nb::none(),
           "The value of key, or `default` if it is absent.")
      .def("get_many", &PyDb::GetMany, "keys"_a,
           "Looks up a uint64 array of keys in one call: (values, found) numpy arrays.")
      .def("__getitem__", &PyDb::GetItem)
      .def("__setitem__", &PyDb::Upsert)
      .def("__delitem__", &PyDb::DelItem)
      .def("__contains__", &PyDb::Contains)
      .def("__len__", &PyDb::Count)
      .def("count", &PyDb::Count, "Entries in the index (walks it: O(n)).")
      .def("range", &PyDb::Range, "lo"_a = 0, "hi"_a.none() = nb::none(),
           "limit"_a.none() = nb::none(),
           "[(key, value)] with lo <= key < hi (hi None: no bound), at most `limit`.")
      .def("items", &PyDb::Items, "lo"_a = 0, "hi"_a.none() = nb::none(),
           nb::rv_policy::take_ownership, "An iterator of (key, value) with lo <= key < hi.")
      .def("bulk_load", &PyDb::BulkLoadColumns, "keys"_a, "values"_a, "fill"_a = 1.0,
           "Loads strictly ascending keys with their values into an empty index.")
      .def("bulk_load", &PyDb::BulkLoadPairs, "pairs"_a, "fill"_a = 1.0,
           "Loads an (n, 2) uint64 array of strictly ascending (key, value) rows, without a "
           "copy, into an empty index.")
      .def("verify", &PyDb::Verify,
           "Checks every invariant: Corruption names the first one broken.")
      .def("stats", &PyDb::Stats, "Shape and size of the index (walks it).")
      .def("sync", &PyDb::Sync, "On a non-DAX pool, makes every completed write durable (msync).")
      .def("close", &PyDb::Close,
           "Closes cleanly; idempotent. InvalidArgument while an iterator is open.")
      .def_prop_ro("closed", &PyDb::closed)
      .def_prop_ro("kind", &PyDb::kind)
      .def_prop_ro("options", &PyDb::options)
      .def_prop_ro("persistent", &PyDb::persistent)
      .def_prop_ro("path", &PyDb::path)
      .def_prop_ro("durability", &PyDb::durability);
  BindContextManager(db);

  nb::class_<KvItems>(m, "KvIterator")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", &KvItems::Next)
      .def("close", &KvItems::Release, "Ends the iterator early (the store can then close).");

  nb::class_<PyTransaction>(m, "Transaction",
                            "A snapshot-isolation transaction (KvStore.transaction()).")
      .def("get", &PyTransaction::Get, "key"_a, "default"_a.none() = nb::none())
      .def("__getitem__", &PyTransaction::GetItem)
      .def("put", &PyTransaction::Put, "key"_a, "value"_a)
      .def("__setitem__", &PyTransaction::Put)
      .def(
          "remove", [](PyTransaction& t, nb::handle k) { t.Remove(k, false); }, "key"_a)
      .def("__delitem__", [](PyTransaction& t, nb::handle k) { t.Remove(k, true); })
      .def("range", &PyTransaction::Range, "lo"_a = nb::bytes("", 0), "hi"_a.none() = nb::none(),
           "limit"_a.none() = nb::none())
      .def("validate", &PyTransaction::Validate, "key"_a,
           "Makes commit() also fail with Aborted if another transaction committed key since "
           "the snapshot.")
      .def("commit", &PyTransaction::Commit,
           "Commits every write atomically, or raises Aborted and changes nothing.")
      .def("abort", &PyTransaction::Abort)
      .def_prop_ro("snapshot", &PyTransaction::snapshot)
      .def_prop_ro("finished", &PyTransaction::finished)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__",
           [](PyTransaction& t, nb::handle exc_type, nb::handle, nb::handle) {
             return t.Exit(exc_type);
           },
           "exc_type"_a.none(), "exc"_a.none(), "tb"_a.none());

  nb::class_<PyKvStore> kv(m, "KvStore",
                           "A transactional store of bytes keys and values in a pool file.");
  kv.def_static("create", &PyKvStore::Create, "path"_a, "kind"_a = "lbtree",
                "options"_a.none() = "", nb::kw_only(), "size"_a = defaults.size,
                "max_size"_a = defaults.max_size, "segment_size"_a = defaults.segment_size,
                "Creates PATH (which must not exist) holding an empty store over `kind`.")
      .def_static("open", &PyKvStore::Open, "path"_a,
                  "Opens an existing store and recovers after a crash.")
      .def_static("in_memory", &PyKvStore::InMemory, "kind"_a = "lbtree", "options"_a.none() = "",
                  nb::kw_only(), "size"_a = defaults.size, "max_size"_a = defaults.max_size,
                  "A store that lives and dies with the process.")
      .def("get", &PyKvStore::Get, "key"_a, "default"_a.none() = nb::none(),
           "The newest value of key, or `default` if it is absent.")
      .def("get_versioned", &PyKvStore::GetVersioned, "key"_a,
           "(value, version) of key, or None if it is absent.")
      .def("put", &PyKvStore::Put, "key"_a, "value"_a, "Inserts or replaces; durable on return.")
      .def("put_if_absent", &PyKvStore::PutIfAbsent, "key"_a, "value"_a,
           "Inserts only: False (nothing changed) if key is present.")
      .def("put_if_present", &PyKvStore::PutIfPresent, "key"_a, "value"_a,
           "Replaces only: False (nothing changed) if key is absent.")
      .def("put_if_version", &PyKvStore::PutIfVersion, "key"_a, "value"_a, "version"_a,
           "Replaces iff key's newest version is `version`: False if it changed since, "
           "NotFound if key is absent.")
      .def(
          "remove", [](PyKvStore& s, nb::handle k) { s.Remove(k, false); }, "key"_a,
          "NotFound if key is absent.")
      .def("__getitem__", &PyKvStore::GetItem)
      .def("__setitem__", &PyKvStore::Put)
      .def("__delitem__", [](PyKvStore& s, nb::handle k) { s.Remove(k, true); })
      .def("__contains__", &PyKvStore::Contains)
      .def("__len__", &PyKvStore::Count)
      .def("count", &PyKvStore::Count, "Live keys (walks the store: O(n)).")
      .def("__iter__",
           [](PyKvStore& s) { return s.Items(nb::bytes("", 0), nb::none(), true); },
           nb::rv_policy::take_ownership)
      .def("keys",
           [](PyKvStore& s, nb::handle lo, nb::handle hi) { return s.Items(lo, hi, true); },
           "lo"_a = nb::bytes("", 0), "hi"_a.none() = nb::none(), nb::rv_policy::take_ownership)
      .def("items",
           [](PyKvStore& s, nb::handle lo, nb::handle hi) { return s.Items(lo, hi, false); },
           "lo"_a = nb::bytes("", 0), "hi"_a.none() = nb::none(), nb::rv_policy::take_ownership,
           "An iterator of (key, value) with lo <= key < hi, read in batches.")
      .def("range", &PyKvStore::Range, "lo"_a = nb::bytes("", 0), "hi"_a.none() = nb::none(),
           "limit"_a.none() = nb::none(),
           "[(key, value)] with lo <= key < hi in bytewise order, at most `limit`, at one "
           "snapshot.")
      .def("transaction", &PyKvStore::Begin, nb::rv_policy::take_ownership,
           "A transaction reading at a snapshot taken now; a context manager.")
      .def("verify", &PyKvStore::Verify)
      .def("stats", &PyKvStore::Stats)
      .def("sync", &PyKvStore::Sync)
      .def("close", &PyKvStore::Close,
           "Closes cleanly; idempotent. InvalidArgument while a transaction or iterator is open.")
      .def_prop_ro("closed", &PyKvStore::closed)
      .def_prop_ro("kind", &PyKvStore::kind)
      .def_prop_ro("options", &PyKvStore::options);
  BindContextManager(kv);
}
