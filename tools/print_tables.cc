// symmar_tables: prints the built-in size tables (plus an optional table file) as Markdown.
// docs/tables.md is this program's output (the ctest tables_doc_is_current keeps it so).
// The sections are the tables' own arch keys (knownArchs), so a table file's new architecture gets
// its section with no edit here.
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/names.h"
#include "plan/arch.h"
#include "plan/table.h"

using namespace symmar;

namespace {

std::string bytesText(uint64_t b) {
  if (b == kUnbounded) return "any";
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

std::string entriesText(const TableRow& row) {
  std::string text;
  for (int i = 0; i < row.num_entries; ++i) {
    text += (i ? ", " : "") + std::string(symmarAlgoName(row.entries[i].algo)) + " ≤ " + bytesText(row.entries[i].max_bytes);
    if (row.entries[i].min_elem_bytes) text += " (" + std::to_string(row.entries[i].min_elem_bytes) + "+ B dtypes)";
  }
  return text.empty() ? "(fallback only)" : text;
}

// What serves a key that has no row of its own: the arch of the row the lookup chain picks, or
// the fallback alone. Only GPU arches have a chain below them; default and host end it.
std::string servedBy(const Tables& tables, int arch, symmarLink_t link, int world, Collective coll) {
  if (arch == kArchDefault || arch == kArchHost) return "fallback only";
  const TableRow* row = tables.resolve(arch / 10, arch % 10, link, world, 1, coll);
  if (row->link != link) return "fallback only";  // the chain's empty row
  return archKeyName(row->arch) + " rows";
}

/// One collective's rows of one arch: the Markdown table, the keys the chain serves instead, and
/// the sources per link.
struct Section {
  std::string table, served;
  std::map<std::string, std::string> sources;  // link -> sources
};

Section sectionOf(const Tables& tables, int arch, Collective coll) {
  const std::vector<symmarLink_t> links =
      arch == kArchHost ? std::vector<symmarLink_t>{symmarLinkHostMemory}
                        : std::vector<symmarLink_t>{symmarLinkNvSwitch, symmarLinkNvLink, symmarLinkPcie,
                                                    symmarLinkPcieNoP2P};
  Section out;
  auto note = [&](const std::string& key, const TableRow& row) {
    std::string& s = out.sources[key];
    if (s.find(row.source) == std::string::npos) s += (s.empty() ? "" : "; ") + row.source;
  };
  for (symmarLink_t link : links) {
    std::string run_by;  // keys without a row, as runs of worlds served alike: "nvlink 2-8: sm100 rows"
    int run_first = 0, run_last = 0;
    auto flush = [&] {
      if (run_by.empty()) return;
      std::string worlds = std::to_string(run_first) + (run_last > run_first ? "-" + std::to_string(run_last) : "");
      out.served += "- " + std::string(linkName(link)) + " " + worlds + ": " + run_by + "\n";
      run_by.clear();
    };
    for (int w = kMinTableWorld; w <= kMaxTableWorld; ++w) {
      const TableRow* row = tables.find(arch, link, w, 1, coll);
      if (!row) {
        std::string by = servedBy(tables, arch, link, w, coll);
        if (by != run_by || run_last != w - 1) {
          flush();
          run_by = by;
          run_first = w;
        }
        run_last = w;
        continue;
      }
      flush();
      out.table += "| " + std::string(linkName(link)) + " | " + std::to_string(w) + " | " + entriesText(*row) + " |\n";
      note(linkName(link), *row);
    }
    flush();
    // Rows for comms spanning hosts: world is the ranks per host (no chain listing: a host count
    // without rows takes the 2-host rows, and no rows at all means flat, the fallback serving).
    for (int h = 2; h <= kMaxTableHosts; ++h) {
      for (int w = kMinTableWorld; w <= kMaxTableWorld; ++w) {
        const TableRow* row = tables.find(arch, link, w, h, coll);
        if (!row) continue;
        out.table += "| " + std::string(linkName(link)) + " | " + std::to_string(w) + " per host, " +
                     std::to_string(h) + " hosts | " + entriesText(*row) + " |\n";
        note(std::string(linkName(link)) + ", " + std::to_string(h) + " hosts", *row);
      }
    }
  }
  return out;
}

void printSection(const Section& section, bool chain) {
  if (section.table.empty()) {
    printf("No rows of its own.\n");
  } else {
    printf("| link | world | algorithms |\n|---|---|---|\n%s", section.table.c_str());
  }
  if (chain && !section.served.empty()) printf("\nServed by the lookup chain (no row here):\n%s", section.served.c_str());
  if (!section.sources.empty()) {
    printf("\nSources:\n");
    for (const auto& [link, src] : section.sources) printf("- %s: %s\n", link.c_str(), src.c_str());
  }
  printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  Tables tables = Tables::builtin();
  if (argc > 1 && tables.loadFile(argv[1]) != symmarSuccess) {
    fprintf(stderr, "%s\n", threadLastError().c_str());
    return 1;
  }
  printf("# symmar size tables\n\n");
  printf(
      "Generated by `symmar_tables` from `src/plan/tables_builtin.cc`. Each cell lists the algorithms\n"
      "in order with the largest message (bytes per rank) each serves; above the last one the fallback\n"
      "serves (NCCL on GPUs, MPI on the host backend; without a fallback the last symmetric algorithm,\n"
      "chunked). An entry marked \"(4+ B dtypes)\" serves only dtypes of at least that many bytes an\n"
      "element (float32, int32, float64); the others skip it. An unavailable multimem (no multicast)\n"
      "is served by twoshot (by oneshot for reduce-scatter and all-gather). Lookup: exact capability\n"
      "-> family (major) -> default. Comms\n"
      "spanning hosts use the rows keyed by their ranks per host and number of hosts (the 2-host rows\n"
      "for host counts without rows of their own): oneshot and twoshot there name the hierarchical\n"
      "forms, whose inter-host stage is the comm's inter-host engine.\n\n"
      "Reduce-scatter and all-gather have rows of their own, keyed the same way through the same chain;\n"
      "their sizes are the whole buffer (nranks blocks, as nccl-tests counts them). They are listed\n"
      "under an architecture only where it has such rows; elsewhere the chain's rows (default) serve.\n\n"
      "The fused allreduce + residual add + RMSNorm (addrmsnorm) has rows of its own where its form\n"
      "choice differs from the allreduce's: lamport, oneshot and twoshot over the message (tokens x\n"
      "hidden elements), the unfused allreduce and norm above the last. Lamport serves only on GPUs\n"
      "with peer access, rows of whole 16-byte vectors and calls of at most 256 KiB (the next entry\n"
      "otherwise); no built-in row names it until it has been measured on a GPU. Where a comm has no\n"
      "fused rows, it runs one-shot where the allreduce's row gives oneshot or lamport for the same\n"
      "bytes, two-shot otherwise. With fewer tokens than ranks (too few rows for the two-shot) a\n"
      "two-shot gives way to the one-shot where the allreduce's row gives oneshot or lamport for the\n"
      "bytes and to the unfused allreduce and norm otherwise; past a row's last threshold the call is\n"
      "unfused however few its tokens. On\n"
      "GPUs no fused form runs for more tokens than the fused kernel's grid (at least a block a row;\n"
      "past it rows queue in a block), whatever the row says.\n\n");
  for (int arch : knownArchs(tables)) {
    printf("## %s\n\n", archKeyName(arch).c_str());
    printSection(sectionOf(tables, arch, Collective::kAllReduce), true);
    for (Collective coll : {Collective::kReduceScatter, Collective::kAllGather, Collective::kAddRmsNorm}) {
      const Section section = sectionOf(tables, arch, coll);
      if (section.table.empty()) continue;
      printf("### %s %s (bytes: %s)\n\n", archKeyName(arch).c_str(), collectiveName(coll),
             coll == Collective::kAddRmsNorm ? "the message" : "the whole buffer");
      printSection(section, false);
    }
  }
  return 0;
}
