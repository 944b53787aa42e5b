// Fuzzes the JSON table-file parser, Tables::loadJson (src/plan/table_file.cc): the input is the file's text, loaded
// into a copy of the built-in tables as SYMMAR_TABLE_FILE or config.table_file would be. Checks:
//  - a refused file leaves the tables exactly as they were and the thread's last error names the origin;
//  - an accepted file leaves only rows the planner can use: world 2..8, hosts 1..8, at most kMaxTableEntries entries with
//    positive, strictly increasing thresholds and a concrete algorithm, arch "host" exactly with link "host";
//  - every "world" number in an accepted file is itself in 2..8, and every "hosts" number in 1..8 (read independently
//    of the parser, as int64), so no out-of-range number is narrowed into range;
//  - resolve() never returns nullptr and answers with a row of the collective asked for: for fixed lookups, including
//    worlds and capabilities no row names, and for every row's own key (collective included), where the exact row
//    must be served (the first step of the documented lookup chain).
// A broken check aborts, which libFuzzer reports as a crash and saves the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "plan/table.h"
#include "fuzz/fuzz_check.h"

namespace {

constexpr const char* kOrigin = "fuzz-input.json";

bool sameRow(const symmar::TableRow& a, const symmar::TableRow& b) {
  if (a.coll != b.coll || a.arch != b.arch || a.link != b.link || a.world != b.world || a.hosts != b.hosts ||
      a.num_entries != b.num_entries) {
    return false;
  }
  for (int i = 0; i < a.num_entries; ++i) {
    if (a.entries[i].algo != b.entries[i].algo || a.entries[i].max_bytes != b.entries[i].max_bytes ||
        a.entries[i].min_elem_bytes != b.entries[i].min_elem_bytes) {
      return false;
    }
  }
  return a.source == b.source;
}

void checkRow(const symmar::TableRow& row) {
  FUZZ_CHECK(static_cast<int>(row.coll) >= 0 && static_cast<int>(row.coll) < symmar::kNumCollectives);
  FUZZ_CHECK(row.world >= symmar::kMinTableWorld && row.world <= symmar::kMaxTableWorld);
  FUZZ_CHECK(row.hosts >= 1 && row.hosts <= symmar::kMaxTableHosts);
  FUZZ_CHECK(row.num_entries >= 0 && row.num_entries <= symmar::kMaxTableEntries);
  FUZZ_CHECK((row.arch == symmar::kArchHost) == (row.link == symmarLinkHostMemory));
  FUZZ_CHECK(row.arch == symmar::kArchDefault || row.arch == symmar::kArchHost ||
             (row.arch >= 10 && row.arch <= 9999));
  for (int i = 0; i < row.num_entries; ++i) {
    FUZZ_CHECK(row.entries[i].algo > symmarAlgoAuto && row.entries[i].algo < symmarNumAlgos);
    FUZZ_CHECK(row.entries[i].max_bytes > 0);
    FUZZ_CHECK(i == 0 || row.entries[i].max_bytes > row.entries[i - 1].max_bytes);
    const int m = row.entries[i].min_elem_bytes;
    FUZZ_CHECK(m == 0 || m == 2 || m == 4 || m == 8);
  }
}

// Lookups a comm can make, including the ones no row names: worlds outside 2..8 (clamped), capabilities without
// rows (family, then default) and the unknown link (the empty row).
void checkFixedLookups(const symmar::Tables& t) {
  static const int kCaps[][2] = {{0, 0}, {7, 5}, {9, 0}, {10, 3}, {12, 1}};
  static const symmarLink_t kLinks[] = {symmarLinkUnknown, symmarLinkNvSwitch, symmarLinkNvLink, symmarLinkPcie,
                                        symmarLinkHostMemory};
  static const int kWorlds[] = {-1, 1, 2, 5, 9, 1 << 30};
  static const int kHosts[] = {-1, 1, 2, 3, 9, 1 << 30};
  for (const auto& cc : kCaps) {
    for (symmarLink_t link : kLinks) {
      for (int world : kWorlds) {
        for (int hosts : kHosts) {
          for (int c = 0; c < symmar::kNumCollectives; ++c) {
            const symmar::TableRow* row = t.resolve(cc[0], cc[1], link, world, hosts, static_cast<symmar::Collective>(c));
            FUZZ_CHECK(row != nullptr && static_cast<int>(row->coll) == c);
          }
        }
      }
    }
  }
}

// Every concrete row is reachable: its own capability and link resolve to it, not to a family or default row.
void checkOwnKeys(const symmar::Tables& t) {
  for (const symmar::TableRow& row : t.rows()) {
    const symmar::TableRow* got = nullptr;
    if (row.arch == symmar::kArchHost) {
      got = t.resolve(0, 0, symmarLinkHostMemory, row.world, row.hosts, row.coll);
    } else if (row.arch != symmar::kArchDefault) {
      got = t.resolve(row.arch / 10, row.arch % 10, row.link, row.world, row.hosts, row.coll);
    } else {
      continue;  // default rows serve capabilities without rows; checkFixedLookups covers them
    }
    FUZZ_CHECK(got == &row);
  }
}

// The parser reads worlds as int; an accepted file must not name a world outside 2..8 in any wider integer type.
void checkWorldsInFile(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(doc.is_object() && doc.contains("rows"));
  for (const nlohmann::json& row : doc["rows"]) {
    const nlohmann::json& w = row["world"];
    const std::vector<nlohmann::json> worlds = w.is_array() ? w.get<std::vector<nlohmann::json>>()
                                                            : std::vector<nlohmann::json>{w};
    for (const nlohmann::json& x : worlds) {
      FUZZ_CHECK(x.is_number_integer());
      // An unsigned value past INT64_MAX is out of range too: compare it as unsigned first.
      FUZZ_CHECK(!x.is_number_unsigned() || x.get<uint64_t>() <= static_cast<uint64_t>(symmar::kMaxTableWorld));
      const int64_t v = x.get<int64_t>();
      FUZZ_CHECK(v >= symmar::kMinTableWorld && v <= symmar::kMaxTableWorld);
    }
    if (row.contains("hosts")) {
      const nlohmann::json& h = row["hosts"];
      FUZZ_CHECK(h.is_number_integer());
      FUZZ_CHECK(!h.is_number_unsigned() || h.get<uint64_t>() <= static_cast<uint64_t>(symmar::kMaxTableHosts));
      FUZZ_CHECK(h.get<int64_t>() >= 1 && h.get<int64_t>() <= symmar::kMaxTableHosts);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Bytes as they would come from a file, NULs included.
  const std::string text(reinterpret_cast<const char*>(data), size);
  const symmar::Tables& builtin = symmar::Tables::builtin();
  symmar::Tables t = builtin;
  symmar::clearThreadLastError();
  symmarResult_t res = t.loadJson(text, kOrigin);
  if (res != symmarSuccess) {
    FUZZ_CHECK(res == symmarInvalidArgument);
    FUZZ_CHECK(symmar::threadLastError().find(kOrigin) != std::string::npos);
    FUZZ_CHECK(t.rows().size() == builtin.rows().size());
    for (size_t i = 0; i < t.rows().size(); ++i) FUZZ_CHECK(sameRow(t.rows()[i], builtin.rows()[i]));
    return 0;
  }
  checkWorldsInFile(text);
  for (const symmar::TableRow& row : t.rows()) checkRow(row);
  FUZZ_CHECK(t.rows().size() >= builtin.rows().size());  // a file adds or replaces rows, never removes one
  checkFixedLookups(t);
  checkOwnKeys(t);
  return 0;
}
