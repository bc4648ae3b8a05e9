// pmclient's records: how a workload key (a 64-bit integer, workloads/)
// becomes a server key, and how a value is made so that a read can be
// checked (docs/benchmarking.md "Servers: pmclient").
//
// Keys: "user" followed by the key's decimal, zero-padded to 20 digits
// ("user00000000000000000042"), 24 bytes. YCSB writes "user" + the decimal
// of a hashed record number without padding; the padding makes bytewise
// order (a server's range scan, Redis's ZRANGEBYLEX) the order of the
// 64-bit keys, so a scan visits the keys pmbench's scan visits.
//
// Values: `size` bytes (size >= kValueHeaderBytes), a function of the key
// and a version:
//   bytes  0..15  the key, 16 lowercase hex digits
//   bytes 16..31  the version, 16 lowercase hex digits
//   bytes 32..    filler: a window, at an offset derived from (key,
//                 version), of one fixed 64 KiB pseudo-random pattern in
//                 the alphabet [A-Za-z0-9+/], repeated as needed
// The load and inserts write version 0; an update or read-modify-write
// writes the version its workload op carries (op.value - ValueFor(key),
// a per-thread update count, >= 1). A read checks that the value is one
// of its key's values: right size, its own key in the header, and the
// filler of the version the header names; before any update ran, also
// that the version is 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "workload.h"

namespace pmindex::client {

inline constexpr std::string_view kKeyPrefix = "user";
inline constexpr size_t kKeyDigits = 20;  // UINT64_MAX has 20 decimal digits
inline constexpr size_t kKeyBytes = kKeyPrefix.size() + kKeyDigits;
inline constexpr size_t kValueHeaderBytes = 32;

// Writes the kKeyBytes bytes of k's name to out.
void FormatKey(Key k, char* out);
std::string KeyName(Key k);
// The inverse of FormatKey: false if `name` is not a key name.
bool ParseKeyName(std::string_view name, Key* k);

// *out = the value of k at `version`, `size` bytes.
// REQUIRES: size >= kValueHeaderBytes.
void FormatValue(Key k, uint64_t version, size_t size, std::string* out);

// Returns nullptr if `value` is a value FormatValue(k, v, size) for some
// v (v == 0 if version_zero), else why not (a static string).
const char* CheckValue(std::string_view value, Key k, size_t size, bool version_zero);

// The version an op writes: 0 for an insert, the workload's update count
// for an update or read-modify-write (workload.h: their value is
// ValueFor(key) + n, n >= 1).
inline uint64_t VersionOf(const workload::Op& op) { return op.value - workload::ValueFor(op.key); }

}  // namespace pmindex::client
