// JSON table files: {"rows": [{"arch": "sm120", "link": "pcie", "world": 4 or [2, 4], "hosts": 2 (optional),
//   "collective": "reducescatter" (optional, allreduce by default; also "allgather", and "addrmsnorm" for
//   the fused allreduce + residual add + RMSNorm, whose rows name only lamport, oneshot and twoshot),
//   "algos": [{"algo": "oneshot", "max_bytes": 65536}, {"algo": "twoshot", "max_bytes": "16M"}],
//   an entry may add "min_elem_bytes": 2, 4 or 8 (only for dtypes of at least that many bytes an element),
//   "source": "who measured this"}]}. Every problem is an error naming file, field and reason.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/env.h"
#include "core/error.h"
#include "core/names.h"
#include "plan/table.h"

namespace symmar {
namespace {

using json = nlohmann::json;

struct Reader {
  const char* origin;
  symmarResult_t bad(const std::string& field, const std::string& why) const {
    return fail(symmarInvalidArgument, "table file %s: %s: %s", origin, field.c_str(), why.c_str());
  }
};

symmarResult_t readBytes(const Reader& r, const json& v, const std::string& field, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
  } else if (v.is_string()) {
    std::string s = v.get<std::string>();
    int64_t parsed = 0;
    if (s == "unbounded") {
      *out = kUnbounded;
    } else if (parseSize(s.c_str(), &parsed)) {
      *out = static_cast<uint64_t>(parsed);
    } else {
      return r.bad(field, "expected a byte count like 65536, \"64K\" or \"unbounded\", got \"" + s + "\"");
    }
  } else {
    return r.bad(field, "expected a non-negative integer or a size string");
  }
  if (*out == 0) return r.bad(field, "must be positive");
  return symmarSuccess;
}

symmarResult_t readRow(const Reader& r, const json& j, const std::string& where, std::vector<TableRow>* out) {
  if (!j.is_object()) return r.bad(where, "a row must be an object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k != "arch" && k != "link" && k != "world" && k != "hosts" && k != "collective" && k != "algos" &&
        k != "source") {
      return r.bad(where + "." + k, "unknown field");
    }
  }
  TableRow row;
  if (!j.contains("arch") || !j["arch"].is_string()) return r.bad(where + ".arch", "missing or not a string");
  std::string arch = j["arch"].get<std::string>();
  if (!parseArchKey(arch.c_str(), &row.arch)) {
    return r.bad(where + ".arch", "unknown arch key \"" + arch + "\" (expected smNN, host or default)");
  }
  if (!j.contains("link") || !j["link"].is_string()) return r.bad(where + ".link", "missing or not a string");
  std::string link = j["link"].get<std::string>();
  if (!parseLinkName(link.c_str(), &row.link)) {
    return r.bad(where + ".link", "unknown link \"" + link + "\" (expected nvswitch, nvlink, pcie or host)");
  }
  if ((row.arch == kArchHost) != (row.link == symmarLinkHostMemory)) {
    return r.bad(where + ".link", "arch \"host\" goes with link \"host\" and only with it");
  }
  if (!j.contains("world")) return r.bad(where + ".world", "missing");
  const json& w = j["world"];
  std::vector<const json*> items;
  if (w.is_array() && !w.empty()) {
    for (const json& x : w) items.push_back(&x);
  } else if (w.is_number_integer()) {
    items.push_back(&w);
  } else {
    return r.bad(where + ".world", "expected an integer or a non-empty list of integers");
  }
  std::vector<int> worlds;
  for (const json* x : items) {
    if (!x->is_number_integer()) return r.bad(where + ".world", "entries must be integers");
    // Compared as 64-bit values: narrowing first would read 4294967298 as 2.
    const uint64_t u = x->get<uint64_t>();
    const int64_t i = x->get<int64_t>();
    const bool in_range = x->is_number_unsigned() ? u >= kMinTableWorld && u <= kMaxTableWorld
                                                  : i >= kMinTableWorld && i <= kMaxTableWorld;
    if (!in_range) {
      return r.bad(where + ".world", "world size " + x->dump() + " outside 2..8");
    }
    worlds.push_back(x->get<int>());
  }
  if (j.contains("hosts")) {  // optional: 1 (a single host) unless the row is for comms spanning hosts
    const json& h = j["hosts"];
    // As a 64-bit value: a huge unsigned reads as negative, so every out-of-range number is refused.
    if (!h.is_number_integer() || h.get<int64_t>() < 1 || h.get<int64_t>() > kMaxTableHosts) {
      return r.bad(where + ".hosts", "expected an integer 1.." + std::to_string(kMaxTableHosts));
    }
    row.hosts = h.get<int>();
  }
  if (j.contains("collective")) {  // optional: allreduce unless the row is for another collective
    const json& c = j["collective"];
    if (!c.is_string() || !parseCollectiveName(c.get<std::string>().c_str(), &row.coll)) {
      return r.bad(where + ".collective",
                   "expected \"allreduce\", \"reducescatter\", \"allgather\" or \"addrmsnorm\"" +
                       (c.is_string() ? ", got \"" + c.get<std::string>() + "\"" : std::string()));
    }
  }
  if (!j.contains("algos") || !j["algos"].is_array()) return r.bad(where + ".algos", "missing or not a list");
  const json& algos = j["algos"];
  if (algos.size() > static_cast<size_t>(kMaxTableEntries)) {
    return r.bad(where + ".algos", "at most " + std::to_string(kMaxTableEntries) + " entries");
  }
  for (size_t i = 0; i < algos.size(); ++i) {
    std::string f = where + ".algos[" + std::to_string(i) + "]";
    const json& e = algos[i];
    const bool has_min_elem = e.is_object() && e.contains("min_elem_bytes");
    if (!e.is_object() || !e.contains("algo") || !e.contains("max_bytes") || e.size() != (has_min_elem ? 3u : 2u)) {
      return r.bad(f, "expected {\"algo\": name, \"max_bytes\": size} (and optionally \"min_elem_bytes\": 2, 4 or 8)");
    }
    if (!e["algo"].is_string()) return r.bad(f + ".algo", "not a string");
    std::string name = e["algo"].get<std::string>();
    symmarAlgo_t algo;
    if (!parseAlgoName(name.c_str(), &algo) || algo == symmarAlgoAuto) {
      return r.bad(f + ".algo", "unknown algorithm \"" + name + "\"");
    }
    if (row.coll == Collective::kAddRmsNorm && algo != symmarAlgoOneShot && algo != symmarAlgoTwoShot &&
        algo != symmarAlgoLamport) {
      return r.bad(f + ".algo", "the fused forms are lamport, oneshot and twoshot, not \"" + name + "\"");
    }
    uint64_t max_bytes = 0;
    SYMMAR_CHECK(readBytes(r, e["max_bytes"], f + ".max_bytes", &max_bytes));
    if (i > 0 && max_bytes <= row.entries[i - 1].max_bytes) {
      return r.bad(f + ".max_bytes", "thresholds must increase (" + std::to_string(max_bytes) + " after " +
                                         std::to_string(row.entries[i - 1].max_bytes) + ")");
    }
    uint8_t min_elem_bytes = 0;
    if (has_min_elem) {
      const json& m = e["min_elem_bytes"];
      const int64_t v = m.is_number_integer() ? m.get<int64_t>() : 0;
      if (v != 2 && v != 4 && v != 8) return r.bad(f + ".min_elem_bytes", "expected 2, 4 or 8");
      min_elem_bytes = static_cast<uint8_t>(v);
    }
    row.entries[row.num_entries++] = {algo, max_bytes, min_elem_bytes};
  }
  if (j.contains("source")) {
    if (!j["source"].is_string()) return r.bad(where + ".source", "not a string");
    row.source = j["source"].get<std::string>();
  } else {
    row.source = std::string("table file ") + r.origin;
  }
  for (int x : worlds) {
    row.world = x;
    out->push_back(row);
  }
  return symmarSuccess;
}

}  // namespace

symmarResult_t Tables::loadJson(const std::string& text, const char* origin) {
  Reader r{origin};
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return r.bad("(document)", "not valid JSON");
  if (!doc.is_object()) return r.bad("(document)", "top level must be an object");
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() != "rows" && it.key() != "comment" && it.key() != "version") return r.bad(it.key(), "unknown field");
  }
  if (!doc.contains("rows") || !doc["rows"].is_array()) return r.bad("rows", "missing or not a list");
  std::vector<TableRow> parsed;
  const json& rows = doc["rows"];
  for (size_t i = 0; i < rows.size(); ++i) {
    SYMMAR_CHECK(readRow(r, rows[i], "rows[" + std::to_string(i) + "]", &parsed));
  }
  for (const TableRow& row : parsed) put(row);
  return symmarSuccess;
}

symmarResult_t Tables::loadFile(const char* path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer. Only a regular file of bounded size is
  // read, so a device (/dev/zero) or a pipe cannot stall or exhaust comm creation.
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fail(symmarInvalidArgument, "table file %s: (file): cannot be opened: %s", path, strerror(errno));
  struct stat st {};
  symmarResult_t res = symmarSuccess;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    res = fail(symmarInvalidArgument, "table file %s: (file): not a regular file", path);
  } else if (st.st_size > static_cast<off_t>(kMaxTableFileBytes)) {
    res = fail(symmarInvalidArgument, "table file %s: (file): %lld bytes, more than the %zu allowed", path,
               static_cast<long long>(st.st_size), kMaxTableFileBytes);
  }
  std::string text;
  while (res == symmarSuccess) {
    char buf[16384];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) res = fail(symmarInvalidArgument, "table file %s: (file): read error: %s", path, strerror(errno));
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxTableFileBytes) {  // it grew while being read
      res = fail(symmarInvalidArgument, "table file %s: (file): more than %zu bytes", path, kMaxTableFileBytes);
    }
  }
  close(fd);
  SYMMAR_CHECK(res);
  return loadJson(text, path);
}

}  // namespace symmar
