// The registry of every SYMMAR_* environment variable. Code reads variables only through it, so the
// documentation (the table in docs/integration.md) and the behaviour cannot drift apart.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace symmar {

struct EnvVarInfo {
  const char* name;
  const char* values;         // accepted values, human readable
  const char* default_value;  // what applies when unset
  const char* description;
};

/// Every registered variable, in documentation order.
const EnvVarInfo* envRegistry(size_t* count);
/// Raw value of a registered variable, or nullptr when unset or empty. Unregistered names return nullptr.
const char* envRaw(const char* name);
/// Reports a bad value once per (name, value) at WARN; the caller then uses the default.
void envReportBad(const char* name, const char* value, const char* why);
/// Integer with K/M/G suffixes; bad or out-of-range values are reported once and give def.
int64_t envInt(const char* name, int64_t def, int64_t min_value, int64_t max_value);
/// Parses "123", "64K", "8M", "1G" (binary multiples). Returns false on anything else.
bool parseSize(const char* text, int64_t* value);

}  // namespace symmar
