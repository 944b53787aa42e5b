// Fuzzes the parsers of environment-variable and table-key text: parseSize and envInt (src/core/env.cc) and
// parseArchKey (src/plan/table.cc). The input, cut at its first NUL, is the variable's value. Checks:
//  - parseSize: an accepted value is non-negative, a K/M/G value is a multiple of 1 KiB, and the value printed back
//    in decimal (and with K when it divides) parses to the same number;
//  - parseArchKey: an accepted key is "default", "host" or smNN with NN in 10..9999, and archKeyName gives back
//    exactly the input text (one spelling per key, so rows cannot alias);
//  - envInt("SYMMAR_HEAP_BYTES", 5, 0, 1 << 20) with the value set: the parsed value when it is in [0, 1 << 20],
//    else the default 5; never anything outside the range but the default.
// envInt caches nothing (it reads the variable on each call), but envReportBad remembers every bad (name, value)
// pair it warned about, for the life of the process. So that a long run does not grow that set without bound,
// values envInt would warn about go through it only kMaxBadValues times; parseSize still sees every input.
// A broken check aborts, which libFuzzer reports as a crash and saves the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/env.h"
#include "plan/table.h"
#include "fuzz/fuzz_check.h"

namespace {

constexpr const char* kVar = "SYMMAR_HEAP_BYTES";
constexpr int64_t kDefault = 5;
constexpr int64_t kMax = int64_t{1} << 20;
constexpr int kMaxBadValues = 10000;
constexpr size_t kMaxValueBytes = 4096;

// putenv, not setenv: glibc's setenv keeps every value it was ever given (so old getenv pointers stay valid), which
// would grow by one string per input. putenv stores this buffer itself; it is rewritten in place for each input.
char g_env[64 + kMaxValueBytes + 1];

void checkParseSize(const char* text) {
  int64_t v = -1;
  if (!symmar::parseSize(text, &v)) return;
  FUZZ_CHECK(v >= 0);
  const size_t len = strlen(text);
  const char last = text[len - 1];
  if (strchr("KkMmGg", last) != nullptr) FUZZ_CHECK(v % 1024 == 0);
  int64_t again = -1;
  FUZZ_CHECK(symmar::parseSize(std::to_string(v).c_str(), &again) && again == v);
  if (v % 1024 == 0) {
    again = -1;
    FUZZ_CHECK(symmar::parseSize((std::to_string(v / 1024) + "K").c_str(), &again) && again == v);
  }
}

void checkArchKey(const char* text) {
  int arch = -12345;
  if (!symmar::parseArchKey(text, &arch)) return;
  FUZZ_CHECK(arch == symmar::kArchDefault || arch == symmar::kArchHost || (arch >= 10 && arch <= 9999));
  FUZZ_CHECK(symmar::archKeyName(arch) == text);
}

void checkEnvInt(const char* text) {
  int64_t parsed = -1;
  const bool ok = symmar::parseSize(text, &parsed);
  const bool in_range = ok && parsed >= 0 && parsed <= kMax;
  // An empty value counts as unset (envRaw) and is not reported.
  const bool reported = *text != '\0' && !in_range;
  static int bad_values = 0;
  if (reported && ++bad_values > kMaxBadValues) return;
  snprintf(g_env, sizeof(g_env), "%s=%s", kVar, text);
  putenv(g_env);
  const int64_t got = symmar::envInt(kVar, kDefault, 0, kMax);
  FUZZ_CHECK(got == kDefault || (got >= 0 && got <= kMax));
  FUZZ_CHECK(got == (in_range ? parsed : kDefault));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Bad values are logged at WARN on their first sight: format them as usual but keep them off the fuzzer's output.
  setenv("SYMMAR_DEBUG_FILE", "/dev/null", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxValueBytes) return 0;  // longer values add no new paths, only copying
  const std::string text(reinterpret_cast<const char*>(data), size);  // NUL-terminated; cut at an inner NUL
  checkParseSize(text.c_str());
  checkArchKey(text.c_str());
  checkEnvInt(text.c_str());
  return 0;
}
