// symmar_norm_perf: the fused allreduce + residual add + RMSNorm (symmarAllReduceAddRmsNorm)
// against what an engine runs without it, an allreduce followed by its own residual add and
// RMSNorm pass, for decode shapes (tokens x hidden, bf16 by default), host backend, ranks as
// threads of this process. Both are timed in the same loop, interleaved in short runs
// (perf_schedule.h), so the ratio holds even while the machine's speed drifts. The allreduce alone
// (the first half of "separate") is printed too: the fused call's cost over the bare collective.
// -A times several fused forms in the same loop (auto: the one the call plans), a row each.
// --out FILE times both forms and writes the fused call's table row measured here (tuneFusedRow:
// the faster form while it keeps up with the separate pass, the unfused path past it).
//
//   symmar_norm_perf [--local-world N] [--hidden 7168] [--tokens 1,2,4,...] [-n iters] [-d bf16|f16|f32]
//                    [-A auto,oneshot,twoshot] [--block 10] [--out FILE] [--margin 0.05]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/names.h"
#include "host/add_rms_norm.h"  // the row kernels (no library state), from symmar_internal
#include "host/simd_reduce.h"   // the SIMD target they run
#include "perf_schedule.h"
#include "plan/arch.h"
#include "plan/table.h"
#include "symmar/symmar.h"
#include "tune_table.h"

namespace {

struct Options {
  int world = 2;
  size_t hidden = 7168;
  std::vector<size_t> tokens = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  int iters = 200;
  int block = 10;  // calls of one variant in a row (perf_schedule.h)
  symmarDataType_t dtype = symmarBfloat16;
  std::vector<symmarAlgo_t> forms = {symmarAlgoAuto};
  std::string out;  ///< where to write the measured addrmsnorm row ("": none)
  double margin = 0.05;
};

double nowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The engine's own pass after a plain allreduce: residual += sum; norm = rmsnorm(residual) * gamma,
/// with the library's SIMD row kernels (those of its unfused path), so the comparison is with a good
/// separate kernel, not a scalar loop.
void separateAddNorm(const char* sum, char* residual, char* norm, const char* gamma, size_t tokens, size_t hidden,
                     symmarDataType_t dt) {
  const size_t elem = symmarTypeSize(dt);
  symmar::AddRmsNormCall c{};
  c.residual_in = residual;
  c.residual_out = residual;
  c.norm_out = norm;
  c.gamma = gamma;
  c.eps = 1e-6f;
  c.tokens = tokens;
  c.hidden = hidden;
  c.dtype = dt;
  for (size_t t = 0; t < tokens; ++t) {
    const void* row = sum + t * hidden * elem;
    symmar::finishAddRmsNormRow(c, t, &row, 1);
  }
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "--local-world") {
      o->world = std::atoi(v);
    } else if (a == "--hidden") {
      o->hidden = std::strtoull(v, nullptr, 10);
    } else if (a == "-n") {
      o->iters = std::atoi(v);
    } else if (a == "--block") {
      o->block = std::atoi(v);
    } else if (a == "--tokens") {
      o->tokens.clear();
      for (const char* p = v; *p;) {
        o->tokens.push_back(std::strtoull(p, const_cast<char**>(&p), 10));
        if (*p == ',') ++p;
      }
    } else if (a == "-A") {
      o->forms.clear();
      for (const char* p = v; *p;) {
        const char* end = std::strchr(p, ',');
        const std::string name = end ? std::string(p, end) : std::string(p);
        symmarAlgo_t algo;
        if (!symmar::parseAlgoName(name.c_str(), &algo)) return false;
        o->forms.push_back(algo);
        p = end ? end + 1 : p + name.size();
      }
    } else if (a == "--out") {
      o->out = v;
    } else if (a == "--margin") {
      o->margin = std::atof(v);
    } else if (a == "-d") {
      const std::string d = v;
      o->dtype = d == "f32" ? symmarFloat32 : d == "f16" ? symmarFloat16 : symmarBfloat16;
    } else {
      return false;
    }
  }
  if (!o->out.empty()) o->forms = {symmarAlgoOneShot, symmarAlgoTwoShot};  // the row needs both
  return o->world >= 1 && o->hidden > 0 && o->iters > 0 && o->block > 0 && !o->tokens.empty() && o->margin >= 0;
}

/// Writes the fused call's row measured on comm's key to o.out; false when it cannot.
bool writeFusedRow(const Options& o, symmarComm_t comm, const std::vector<tune::FusedMeasurement>& m) {
  symmarTopology_t topo{};
  if (symmarCommTopology(comm, &topo) != symmarSuccess) return false;
  const int arch = topo.link == symmarLinkHostMemory ? symmar::kArchHost : symmar::archOf(topo.cc_major, topo.cc_minor);
  const std::string source = "symmar_norm_perf, hidden " + std::to_string(o.hidden) + ", " +
                             symmar::dtypeName(o.dtype) + ", margin " + std::to_string(o.margin);
  const std::string json = tune::tableFileJson(symmar::archKeyName(arch), symmar::linkName(topo.link), o.world,
                                               tune::tuneFusedRow(m, o.margin), source, 1, "addrmsnorm");
  FILE* f = fopen(o.out.c_str(), "w");
  if (!f) return false;
  const bool ok = fputs(json.c_str(), f) >= 0;
  return fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    fprintf(stderr,
            "usage: %s [--local-world N] [--hidden H] [--tokens 1,2,4] [-n iters] [-d bf16|f16|f32] "
            "[-A auto,oneshot,twoshot] [--block N]\n",
            argv[0]);
    return 2;
  }
  std::vector<symmarComm_t> comms(static_cast<size_t>(o.world));
  std::vector<int> devices(static_cast<size_t>(o.world), SYMMAR_DEVICE_CPU);
  if (symmarCommInitAll(comms.data(), o.world, devices.data(), nullptr) != symmarSuccess) {
    fprintf(stderr, "init failed: %s\n", symmarGetLastError(nullptr));
    return 1;
  }
  const size_t elem = symmarTypeSize(o.dtype);
  const char* dtype = o.dtype == symmarFloat32 ? "f32" : o.dtype == symmarFloat16 ? "f16" : "bf16";
  printf(
      "# symmar_norm_perf: %d ranks (threads), hidden %zu, %s, %d iterations, median us of the slowest rank, simd %s\n",
      o.world, o.hidden, dtype, o.iters, symmar::simdReduceTargetName(symmar::simdReduceCurrentTarget()));
  printf("#%9s %8s %12s %12s %9s %12s %13s\n", "tokens", "form", "fused", "separate", "speed-up", "allreduce",
         "fused/allred");
  int status = 0;
  const size_t forms = o.forms.size();
  std::vector<tune::FusedMeasurement> measured;  // --out: both forms and the separate pass, by size
  for (size_t tokens : o.tokens) {
    const size_t n = tokens * o.hidden;
    // Per rank: the median of each fused form, then of the separate pass and of the allreduce.
    std::vector<std::vector<double>> medians(static_cast<size_t>(o.world), std::vector<double>(forms + 2));
    std::vector<std::thread> threads;
    for (int r = 0; r < o.world; ++r) {
      threads.emplace_back([&, r] {
        std::vector<char> in(n * elem), res(n * elem), norm(n * elem), sum(n * elem), gamma(o.hidden * elem);
        for (size_t i = 0; i < n; ++i) symmar::storeElement(in.data(), o.dtype, i, ((i * 7 + r) % 13) / 8.0 - 0.75);
        for (size_t i = 0; i < o.hidden; ++i) symmar::storeElement(gamma.data(), o.dtype, i, 1.0);
        symmarAddRmsNormArgs_t a{};
        a.input = in.data();
        a.residual_in = res.data();
        a.residual_out = res.data();
        a.norm_out = norm.data();
        a.gamma = gamma.data();
        a.eps = 1e-6f;
        a.tokens = tokens;
        a.hidden = o.hidden;
        a.dtype = o.dtype;
        symmarComm_t comm = comms[static_cast<size_t>(r)];
        std::vector<std::vector<double>> us(forms + 2);  // the fused forms, separate, allreduce
        // The variants: the fused forms, then the allreduce with the separate pass. The schedule is
        // the same on every rank: each call is collective.
        for (const perf::ScheduledCall& call : perf::interleavedSchedule(forms + 1, 10, o.iters, o.block)) {
          const size_t f = call.variant;
          const double t0 = nowUs();
          if (f < forms) {
            if (symmarAllReduceAddRmsNormAlgo(&a, o.forms[f], comm, nullptr) != symmarSuccess) status = 1;
            if (call.timed) us[f].push_back(nowUs() - t0);
            continue;
          }
          if (symmarAllReduce(in.data(), sum.data(), n, o.dtype, symmarSum, comm, nullptr) != symmarSuccess) status = 1;
          const double t1 = nowUs();
          separateAddNorm(sum.data(), res.data(), norm.data(), gamma.data(), tokens, o.hidden, o.dtype);
          if (call.timed) {
            us[forms].push_back(nowUs() - t0);
            us[forms + 1].push_back(t1 - t0);
          }
        }
        for (size_t k = 0; k < us.size(); ++k) {
          std::sort(us[k].begin(), us[k].end());
          medians[static_cast<size_t>(r)][k] = us[k][us[k].size() / 2];
        }
      });
    }
    for (std::thread& t : threads) t.join();
    std::vector<double> slowest(forms + 2, 0.0);  // per column, the slowest rank's median
    for (const std::vector<double>& m : medians) {
      for (size_t k = 0; k < m.size(); ++k) slowest[k] = std::max(slowest[k], m[k]);
    }
    const double se = slowest[forms], ar = slowest[forms + 1];
    if (!o.out.empty()) measured.push_back({n * elem, slowest[0], slowest[1], se});
    for (size_t f = 0; f < forms; ++f) {
      const double fu = slowest[f];
      printf("%10zu %8s %12.2f %12.2f %8.2fx %12.2f %12.2fx\n", tokens, symmarAlgoName(o.forms[f]), fu, se, se / fu,
             ar, fu / ar);
    }
  }
  if (status) fprintf(stderr, "a call failed\n");
  if (!o.out.empty() && status == 0) {
    if (writeFusedRow(o, comms[0], measured)) {
      printf("# wrote the addrmsnorm row measured here to %s\n", o.out.c_str());
    } else {
      fprintf(stderr, "could not write %s\n", o.out.c_str());
      status = 1;
    }
  }
  for (symmarComm_t c : comms) symmarCommDestroy(c);
  return status;
}
