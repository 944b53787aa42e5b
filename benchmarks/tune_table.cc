#include "tune_table.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include "core/names.h"
#include "plan/table.h"

namespace tune {
namespace {

bool isFallback(symmarAlgo_t a) { return a == symmarAlgoNccl || a == symmarAlgoMpi; }

}  // namespace

std::vector<Entry> tuneRow(const std::vector<Measurement>& measurements, double margin) {
  std::map<size_t, std::map<symmarAlgo_t, double>> by_size;
  for (const Measurement& m : measurements) {
    if (m.algo == symmarAlgoAuto || m.time_us <= 0) continue;
    by_size[m.bytes][m.algo] = m.time_us;
  }
  std::vector<size_t> sizes;
  std::vector<const std::map<symmarAlgo_t, double>*> times;
  for (const auto& [bytes, t] : by_size) {
    sizes.push_back(bytes);
    times.push_back(&t);
  }
  // Runs of sizes with one winner; the current winner keeps a size unless beaten by more than the margin.
  struct Run {
    symmarAlgo_t algo;
    size_t first, last;  // indices into sizes
  };
  std::vector<Run> runs;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const auto& t = *times[k];
    auto best = std::min_element(t.begin(), t.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    symmarAlgo_t pick = best->first;
    if (!runs.empty()) {
      auto cur = t.find(runs.back().algo);
      if (cur != t.end() && cur->second <= best->second * (1.0 + margin)) pick = runs.back().algo;
    }
    if (!runs.empty() && runs.back().algo == pick) {
      runs.back().last = k;
    } else {
      runs.push_back({pick, k, k});
    }
  }
  // Too many runs for a row: hand the run that costs least to a neighbour's algorithm (cost = the
  // summed relative slowdown over its sizes), then join equal neighbours, until the row fits.
  auto cost = [&](const Run& r, symmarAlgo_t algo) {
    double c = 0;
    for (size_t k = r.first; k <= r.last; ++k) {
      auto it = times[k]->find(algo);
      if (it == times[k]->end()) return 1e300;
      c += it->second / times[k]->at(r.algo) - 1.0;
    }
    return c;
  };
  while (runs.size() > static_cast<size_t>(symmar::kMaxTableEntries)) {
    double best_cost = 1e301;
    size_t victim = 0, heir = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      for (size_t j : {i - 1, i + 1}) {
        if (j >= runs.size()) continue;  // i - 1 wraps for i == 0
        double c = cost(runs[i], runs[j].algo);
        if (c < best_cost) {
          best_cost = c;
          victim = i;
          heir = j;
        }
      }
    }
    runs[victim].algo = runs[heir].algo;
    std::vector<Run> joined;
    for (const Run& r : runs) {
      if (!joined.empty() && joined.back().algo == r.algo) joined.back().last = r.last;
      else joined.push_back(r);
    }
    runs.swap(joined);
  }
  std::vector<Entry> entries;
  for (const Run& r : runs) entries.push_back({r.algo, sizes[r.last]});
  if (!entries.empty() && isFallback(entries.back().algo)) {
    entries.pop_back();  // the fallback serves above the last threshold anyway
  } else if (!entries.empty()) {
    entries.back().max_bytes = UINT64_MAX;
  }
  return entries;
}

std::vector<Entry> tuneFusedRow(std::vector<FusedMeasurement> measurements, double margin) {
  std::sort(measurements.begin(), measurements.end(),
            [](const FusedMeasurement& a, const FusedMeasurement& b) { return a.bytes < b.bytes; });
  std::vector<Measurement> held;  // the forms' times at the sizes the fused call holds
  uint64_t last = 0;
  for (const FusedMeasurement& m : measurements) {
    double best = 0;
    for (double t : {m.oneshot_us, m.twoshot_us, m.lamport_us}) {
      if (t > 0 && (best == 0 || t < best)) best = t;
    }
    if (best == 0 || (m.unfused_us > 0 && best > m.unfused_us * (1.0 + margin))) break;
    if (m.oneshot_us > 0) held.push_back({symmarAlgoOneShot, m.bytes, m.oneshot_us});
    if (m.twoshot_us > 0) held.push_back({symmarAlgoTwoShot, m.bytes, m.twoshot_us});
    if (m.lamport_us > 0) held.push_back({symmarAlgoLamport, m.bytes, m.lamport_us});
    last = m.bytes;
  }
  if (held.empty()) return {{symmarAlgoOneShot, 1}};
  std::vector<Entry> entries = tuneRow(held, margin);
  entries.back().max_bytes = last;  // the unfused path past the last size the fused call held
  return entries;
}

std::string tableFileJson(const std::string& arch, const std::string& link, int world, const std::vector<Entry>& entries,
                          const std::string& source, int hosts, const std::string& collective) {
  std::string out = "{\"rows\": [\n  {\"arch\": \"" + arch + "\", \"link\": \"" + link + "\", \"world\": " +
                    std::to_string(world) + (hosts > 1 ? ", \"hosts\": " + std::to_string(hosts) : std::string()) +
                    (collective != "allreduce" ? ", \"collective\": \"" + collective + "\"" : std::string()) +
                    ", \"source\": \"" + source + "\",\n   \"algos\": [";
  for (size_t i = 0; i < entries.size(); ++i) {
    std::string max = entries[i].max_bytes == UINT64_MAX ? "\"unbounded\"" : std::to_string(entries[i].max_bytes);
    out += std::string(i ? ", " : "") + "{\"algo\": \"" + symmarAlgoName(entries[i].algo) + "\", \"max_bytes\": " + max + "}";
  }
  out += "]}\n]}\n";
  return out;
}

std::string unfusedTableJson() {
  std::string rows;
  for (int l = 1; l < symmarNumLinks; ++l) {
    const symmarLink_t link = static_cast<symmarLink_t>(l);
    rows += std::string(rows.empty() ? "" : ",\n") + "  {\"arch\": \"" +
            (link == symmarLinkHostMemory ? "host" : "default") + "\", \"link\": \"" + symmar::linkName(link) +
            "\", \"world\": [2, 3, 4, 5, 6, 7, 8], \"collective\": \"addrmsnorm\", "
            "\"source\": \"symmar_tune: the unfused path, timed beside the fused forms\", "
            "\"algos\": [{\"algo\": \"oneshot\", \"max_bytes\": 1}]}";
  }
  return "{\"rows\": [\n" + rows + "\n]}\n";
}

}  // namespace tune
