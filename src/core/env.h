// The registry of every SYMMAR_* environment variable. Code reads variables only through it, so the
// documentation (the table in docs/integration.md) and the behaviour cannot drift apart.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace symmar {

/// How a variable's value is read.
enum class EnvKind {
  kText,     ///< read by its user (names, paths, lists)
  kInteger,  ///< a non-negative integer within [min, max]
  kSize,     ///< bytes, with K/M/G suffixes, within [min, max]
};

struct EnvVarInfo {
  const char* name;
  const char* values;         // accepted values, human readable
  const char* default_value;  // what applies when unset, as documented
  const char* description;
  EnvKind kind;
  int64_t def;  // numeric default (kInteger, kSize); see envNumber for per-backend defaults
  int64_t min;
  int64_t max;
};

/// Every registered variable, in documentation order.
const EnvVarInfo* envRegistry(size_t* count);
/// Raw value of a registered variable, or nullptr when unset or empty. Unregistered names return nullptr.
const char* envRaw(const char* name);
/// Reports a bad value once per (name, value) at WARN; the caller then uses the default.
void envReportBad(const char* name, const char* value, const char* why);
/// Integer with K/M/G suffixes; bad or out-of-range values are reported once and give def. The
/// primitive under envNumber; library code reads numbers through envNumber.
int64_t envInt(const char* name, int64_t def, int64_t min_value, int64_t max_value);
/// The registry row of a variable, or nullptr.
const EnvVarInfo* envInfo(const char* name);
/// A numeric variable with the default and range of its registry row.
int64_t envNumber(const char* name);
/// Same with the caller's default, for the variables whose documented default depends on the
/// backend or the machine (SYMMAR_STAGING_BYTES, SYMMAR_HOST_SPIN); the range is the registry's.
int64_t envNumber(const char* name, int64_t def);
/// Logs every registered variable that is set, once per process, at INFO.
void envLogSet();
/// Parses "123", "64K", "8M", "1G" (binary multiples). Returns false on anything else.
bool parseSize(const char* text, int64_t* value);

}  // namespace symmar
