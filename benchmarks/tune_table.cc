#include "tune_table.h"

#include <algorithm>
#include <map>

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
  // Winner per size, sticking with the previous winner unless beaten by more than the margin.
  std::vector<std::pair<size_t, symmarAlgo_t>> winners;
  symmarAlgo_t current = symmarAlgoAuto;
  for (const auto& [bytes, times] : by_size) {
    auto best = std::min_element(times.begin(), times.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    symmarAlgo_t pick = best->first;
    auto cur = times.find(current);
    if (cur != times.end() && cur->second <= best->second * (1.0 + margin)) pick = current;
    winners.push_back({bytes, pick});
    current = pick;
  }
  // Runs of equal winners become entries.
  std::vector<Entry> entries;
  for (const auto& [bytes, algo] : winners) {
    if (!entries.empty() && entries.back().algo == algo) {
      entries.back().max_bytes = bytes;
    } else {
      entries.push_back({algo, bytes});
    }
  }
  // Too many runs: drop the shortest inner run into its larger neighbour until the row fits.
  const size_t kMax = 4;
  while (entries.size() > kMax) {
    size_t shortest = 1;
    uint64_t shortest_span = UINT64_MAX;
    for (size_t i = 1; i < entries.size(); ++i) {
      uint64_t span = entries[i].max_bytes - entries[i - 1].max_bytes;
      if (span < shortest_span) {
        shortest_span = span;
        shortest = i;
      }
    }
    entries[shortest - 1].max_bytes = entries[shortest].max_bytes;
    entries.erase(entries.begin() + static_cast<long>(shortest));
    for (size_t i = 1; i < entries.size(); ++i) {  // re-merge neighbours that became equal
      if (entries[i].algo == entries[i - 1].algo) {
        entries[i - 1].max_bytes = entries[i].max_bytes;
        entries.erase(entries.begin() + static_cast<long>(i));
        --i;
      }
    }
  }
  if (!entries.empty() && isFallback(entries.back().algo)) {
    entries.pop_back();  // the fallback serves above the last threshold anyway
  } else if (!entries.empty()) {
    entries.back().max_bytes = UINT64_MAX;
  }
  return entries;
}

std::string tableFileJson(const std::string& arch, const std::string& link, int world, const std::vector<Entry>& entries,
                          const std::string& source) {
  std::string out = "{\"rows\": [\n  {\"arch\": \"" + arch + "\", \"link\": \"" + link + "\", \"world\": " +
                    std::to_string(world) + ", \"source\": \"" + source + "\",\n   \"algos\": [";
  for (size_t i = 0; i < entries.size(); ++i) {
    std::string max = entries[i].max_bytes == UINT64_MAX ? "\"unbounded\"" : std::to_string(entries[i].max_bytes);
    out += std::string(i ? ", " : "") + "{\"algo\": \"" + symmarAlgoName(entries[i].algo) + "\", \"max_bytes\": " + max + "}";
  }
  out += "]}\n]}\n";
  return out;
}

}  // namespace tune
