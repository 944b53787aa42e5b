// moe_decode: a tensor-parallel MoE decode loop that shows what each allreduce algorithm buys end
// to end. Every algorithm runs the same steps on the same weights, side by side in one run:
// tokens/s, step time, the share of the step spent in allreduce, and agreement of the final
// hidden states across algorithms and ranks and, on the host, with the same model computed
// unsharded in fp64 (moe_reference.h). Host ranks by default (fp32 OpenBLAS); with
// --device gpu|auto and a GPU comm, the GPU variant (bf16 cuBLAS, each step one CUDA graph).
//   mpirun -np 2 moe_decode --preset tiny
//   moe_decode --local-world 2 --preset qwen3-30b-a3b --layers 2 --experts 16
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "moe_model.h"
#include "moe_reference.h"
#include "moe_run.h"
#include "perf_cli.h"

extern "C" void openblas_set_num_threads(int);

namespace moe {

std::vector<float> initialHidden(const Args& args) {
  std::vector<float> initial(static_cast<size_t>(args.tokens()) * args.preset.hidden);
  std::mt19937 rng(99);  // the same tokens on every rank
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& x : initial) x = d(rng);
  return initial;
}

double relDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return den > 0 ? num / den : num;
}

long ranksDisagreeing(perf::Group& group, const std::vector<float>& hidden) {
  double checksum = 0;
  for (size_t i = 0; i < hidden.size(); ++i) checksum += hidden[i] * static_cast<double>((i % 97) + 1);
  auto sums = group.gather(checksum);
  long disagree = 0;
  for (double c : sums) disagree += c != sums[0];
  return disagree;
}

int report(const Args& args, perf::Group& group, symmarComm_t comm, const RunSummary& s) {
  const int tokens = args.tokens(), h = args.preset.hidden;
  bool agree = s.disagree == 0;
  for (const AlgoResult& r : s.results) agree = agree && r.max_rel_diff <= s.tolerance;
  const bool reference_ok = !s.reference_checked || s.reference_mismatches == 0;
  if (group.rank() == 0) {
    char desc[1024] = "";
    symmarCommDescribe(comm, desc, sizeof(desc));
    printf("# moe_decode: preset %s (hidden %d, %d experts, top-%d, expert intermediate %d, %d layers), %d ranks\n",
           args.preset.name.c_str(), h, args.preset.experts, args.preset.top_k, args.preset.expert_inter,
           args.preset.layers, group.size());
    printf("# %d tokens per step (batch %d x %d), weights %.1f MiB per rank, allreduce %zu bytes x %d per step\n", tokens,
           args.batch, args.spec_tokens + 1, s.weight_bytes / 1048576.0,
           static_cast<size_t>(tokens) * h * s.allreduce_elem_bytes, 2 * args.preset.layers);
    printf("# %s\n", desc);
    if (!s.fused_note.empty()) printf("# %s\n", s.fused_note.c_str());
    printf("# %-10s %-8s %12s %10s %10s %13s %11s\n", "algo", "mode", "tokens/s", "step(ms)", "ar share",
           "max_rel_diff", "vs unfused");
    for (const AlgoResult& r : s.results) {
      char ratio[32] = "";
      if (r.fused && r.unfused_tokens_per_s > 0) snprintf(ratio, sizeof(ratio), "%.3fx", r.tokens_per_s / r.unfused_tokens_per_s);
      printf("  %-10s %-8s %12.1f %10.3f %9.1f%% %13.2e %11s\n", symmarAlgoName(r.algo), r.fused ? "fused" : "unfused",
             r.tokens_per_s, r.step_ms, 100 * r.allreduce_share, r.max_rel_diff, ratio);
    }
    printf("# ranks agree: %s; algorithms agree within %.0e: %s\n", s.disagree == 0 ? "yes" : "NO", s.tolerance,
           agree ? "yes" : "NO");
    if (s.reference_checked) {
      printf("# unsharded fp64 reference: every rank, run and step within %.1e (largest %.1e): %s",
             s.reference_tolerance, s.reference_max_rel_diff, reference_ok ? "yes" : "NO");
      if (s.reference_mismatches) printf(", %ld element(s) beyond it", s.reference_mismatches);
      if (s.reference_near_tie_tokens) {
        printf("; %d of %d token(s) with a router near-tie, %ld element(s) there beyond it (not failed)",
               s.reference_near_tie_tokens, tokens, s.reference_excused);
      }
      printf("\n");
    } else {
      printf("# unsharded fp64 reference: not checked (%s)\n",
             s.reference_skipped.empty() ? "the GPU variant's weights are generated on the device; the reference "
                                           "reproduces the host variant's"
                                         : s.reference_skipped.c_str());
    }
    if (!args.json.empty()) {
      std::ofstream out(args.json);
      out << "{\"preset\": \"" << args.preset.name << "\", \"world\": " << group.size() << ", \"backend\": \""
          << s.backend << "\", \"tokens_per_step\": " << tokens << ", \"layers\": " << args.preset.layers
          << ", \"experts\": " << args.preset.experts << ", \"fused\": \"" << (args.fused ? "on" : "off")
          << "\", \"results\": [";
      for (size_t i = 0; i < s.results.size(); ++i) {
        const AlgoResult& r = s.results[i];
        out << (i ? ", " : "") << "{\"algo\": \"" << symmarAlgoName(r.algo) << "\", \"fused\": "
            << (r.fused ? "true" : "false") << ", \"tokens_per_s\": " << r.tokens_per_s
            << ", \"step_ms\": " << r.step_ms << ", \"allreduce_share\": " << r.allreduce_share
            << ", \"max_rel_diff\": " << r.max_rel_diff;
        if (r.fused && r.unfused_tokens_per_s > 0) {
          out << ", \"unfused_tokens_per_s\": " << r.unfused_tokens_per_s
              << ", \"speedup_vs_unfused\": " << r.tokens_per_s / r.unfused_tokens_per_s;
        }
        out << "}";
      }
      out << "], \"reference\": \"" << (!s.reference_checked ? "skipped" : reference_ok ? "passed" : "failed") << "\"";
      if (s.reference_checked) {
        out << ", \"reference_tolerance\": " << s.reference_tolerance << ", \"reference_max_rel_diff\": "
            << s.reference_max_rel_diff << ", \"reference_mismatches\": " << s.reference_mismatches
            << ", \"reference_near_tie_tokens\": " << s.reference_near_tie_tokens
            << ", \"reference_excused\": " << s.reference_excused;
      }
      if (!s.fused_note.empty()) {
        std::string note;
        for (char c : s.fused_note) note += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
        out << ", \"fused_note\": \"" << note << "\"";
      }
      out << "}\n";
    }
    fflush(stdout);
  }
  return agree && reference_ok ? 0 : 1;
}

#ifndef MOE_DECODE_WITH_CUDA
int runGpu(const Args&, perf::Group& group, symmarComm_t, int) {
  if (group.rank() == 0) fprintf(stderr, "moe_decode was built without CUDA: the GPU variant is not available\n");
  return 1;
}
bool gpuPresent(std::string* why) {
  *why = "moe_decode was built without CUDA";
  return false;
}
#endif

namespace {

bool parse(int argc, char** argv, Args* a, perf::Options* launch) {
  std::string preset = "tiny";
  int layers = 0, experts = 0;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "--test-plant-wrong") {  // test switch: proves that the reference check can fail the run
      a->plant_wrong = true;
      continue;
    }
    if (i + 1 >= argc) return false;  // a flag without its value
    const char* v = argv[++i];
    if (f == "--preset") preset = v;
    else if (f == "--layers") layers = atoi(v);
    else if (f == "--experts") experts = atoi(v);
    else if (f == "--batch") a->batch = atoi(v);
    else if (f == "--spec-tokens") a->spec_tokens = atoi(v);
    else if (f == "--steps") a->steps = atoi(v);
    else if (f == "--warmup") a->warmup = atoi(v);
    else if (f == "--json") a->json = v;
    else if (f == "--tolerance") a->tolerance = atof(v);
    else if (f == "--fused") {
      if (std::string(v) != "on" && std::string(v) != "off") return false;
      a->fused = std::string(v) == "on";
    }
    else if (f == "--reference") {
      a->reference = v;
      if (a->reference != "on" && a->reference != "off" && a->reference != "auto") return false;
    }
    else if (f == "--device") launch->device = v;
    else if (f == "--local-world") a->ranks_per_process = launch->local_world = atoi(v);
    else if (f == "--algos") {
      std::string list = v;
      for (size_t pos = 0; pos <= list.size();) {
        size_t comma = list.find(',', pos);
        std::string name = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        int found = -1;
        for (int t = 0; t < symmarNumAlgos; ++t) found = name == symmarAlgoName(static_cast<symmarAlgo_t>(t)) ? t : found;
        if (found < 0) return false;
        a->algos.push_back(static_cast<symmarAlgo_t>(found));
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else {
      return false;
    }
  }
  if (launch->device != "cpu" && launch->device != "gpu" && launch->device != "auto") return false;
  if (!findPreset(preset, &a->preset)) return false;
  if (layers > 0) a->preset.layers = layers;
  if (experts > 0) a->preset.experts = experts;
  a->preset.top_k = std::min(a->preset.top_k, a->preset.experts);
  a->ranks_per_process = std::max(1, a->ranks_per_process);
  return a->batch > 0 && a->spec_tokens >= 0 && a->steps > 0 && a->warmup >= 0;
}

// The fused call with algo (auto, oneshot or twoshot) on a [tokens x hidden] fp32 state, gamma 1.
symmarResult_t fusedCall(float* partial, float* residual, size_t tokens, size_t hidden, const float* gamma,
                         symmarAlgo_t algo, symmarComm_t comm) {
  symmarAddRmsNormArgs_t a{};
  a.input = partial;
  a.residual_in = residual;
  a.residual_out = residual;  // the residual stream in place
  a.norm_out = partial;       // the next block's input over the partial sums
  a.gamma = gamma;
  a.eps = 1e-6f;
  a.tokens = tokens;
  a.hidden = hidden;
  a.dtype = symmarFloat32;
  return algo == symmarAlgoAuto ? symmarAllReduceAddRmsNorm(&a, comm, nullptr)
                                : symmarAllReduceAddRmsNormAlgo(&a, algo, comm, nullptr);
}

// Whether every rank can run the fused call with algo (a one-token call; collective). *why: the
// first failing rank's text, on that rank.
bool fusedAvailable(perf::Group& group, symmarComm_t comm, symmarAlgo_t algo, size_t hidden, std::string* why) {
  std::vector<float> partial(hidden, 1.0f), residual(hidden, 0.0f), gamma(hidden, 1.0f);
  const symmarResult_t r = fusedCall(partial.data(), residual.data(), 1, hidden, gamma.data(), algo, comm);
  if (r != symmarSuccess) *why = std::string(symmarGetErrorString(r)) + ": " + symmarGetLastError(comm);
  return group.sumOf(r == symmarSuccess ? 0 : 1) == 0;
}

// The host variant: fp32 OpenBLAS on CPU ranks, allreduce on host buffers.
int runHost(const Args& args, perf::Group& group, symmarComm_t comm) {
  const int tokens = args.tokens();
  const size_t hidden = static_cast<size_t>(args.preset.hidden);
  const unsigned seed = 1234u;
  std::string skipped = "--reference off";
  const bool check_reference =
      args.reference == "on" ||
      (args.reference == "auto" && referenceAffordable(args.preset, group.size(), tokens, &skipped));
  // The reference is held once per process, so each rank of it carries its share.
  const size_t per_rank = Model::estimateBytes(args.preset, group.size(), tokens) +
                          (check_reference ? referenceBytes(args.preset, group.size()) / args.ranks_per_process : 0);
  const std::string refusal = hostMemoryRefusal(args, group.size(), args.ranks_per_process, per_rank);
  if (!refusal.empty()) {
    if (group.rank() == 0) {
      fprintf(stderr, "%s%s\n", refusal.c_str(), check_reference ? " (or --reference off)" : "");
    }
    return 1;
  }
  Model model(args.preset, group.rank(), group.size(), seed);
  const Reference* unsharded = check_reference ? &unshardedReference(args, group.size(), seed) : nullptr;
  ReferenceCheck reference_check;
  const std::vector<float> initial = initialHidden(args);
  const std::vector<float> gamma(hidden, 1.0f);

  std::vector<symmarAlgo_t> algos = args.algos;
  if (algos.empty()) {  // every algorithm this comm can serve (the probe is collective)
    algos.push_back(symmarAlgoAuto);
    for (int a = symmarAlgoOneShot; a < symmarNumAlgos; ++a) {
      float probe = 1.0f;
      symmarResult_t r = symmarAllReduceAlgo(&probe, &probe, 1, symmarFloat32, symmarSum, static_cast<symmarAlgo_t>(a),
                                             comm, nullptr);
      if (group.sumOf(r == symmarSuccess ? 0 : 1) == 0) algos.push_back(static_cast<symmarAlgo_t>(a));
    }
  }
  RunSummary summary{"host", model.weightBytes(), sizeof(float), args.tolerance >= 0 ? args.tolerance : 1e-3, {}, 0, ""};
  summary.reference_checked = check_reference;
  summary.reference_skipped = skipped;
  std::vector<float> reference;
  bool ok = true;
  for (symmarAlgo_t algo : algos) {
    // The fused call has the one-shot and two-shot forms (auto plans between them); other
    // algorithms run unfused only.
    bool fused_here = args.fused && (algo == symmarAlgoAuto || algo == symmarAlgoOneShot || algo == symmarAlgoTwoShot);
    std::string why;
    if (fused_here && !fusedAvailable(group, comm, algo, hidden, &why)) {
      fused_here = false;
      if (summary.fused_note.empty()) {
        summary.fused_note = std::string("fused call unavailable (") + symmarAlgoName(algo) + "), unfused only" +
                             (why.empty() ? "" : ": " + why);
        if (group.rank() == 0) fprintf(stderr, "moe_decode: %s\n", summary.fused_note.c_str());
      }
    }
    double unfused_tps = 0;
    for (int fused = 0; fused <= (fused_here ? 1 : 0); ++fused) {
      double ar_seconds = 0;
      auto allreduce = [&](float* data, size_t count) {
        auto t0 = std::chrono::steady_clock::now();
        symmarResult_t r = symmarAllReduceAlgo(data, data, count, symmarFloat32, symmarSum, algo, comm, nullptr);
        ar_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r != symmarSuccess) fprintf(stderr, "rank %d: %s: %s\n", group.rank(), symmarGetErrorString(r), symmarGetLastError(comm));
        return r == symmarSuccess;
      };
      FusedFn fused_fn = [&](float* partial, float* residual, size_t rows) {
        auto t0 = std::chrono::steady_clock::now();
        symmarResult_t r = fusedCall(partial, residual, rows, hidden, gamma.data(), algo, comm);
        ar_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r != symmarSuccess) fprintf(stderr, "rank %d: %s: %s\n", group.rank(), symmarGetErrorString(r), symmarGetLastError(comm));
        return r == symmarSuccess;
      };
      std::vector<float> hidden_state;
      double step_seconds = 0;
      for (int s = 0; s < args.warmup + args.steps && ok; ++s) {
        hidden_state = initial;  // every step decodes the same tokens, so the outputs are comparable
        group.barrier();
        if (s == args.warmup) ar_seconds = 0;
        auto t0 = std::chrono::steady_clock::now();
        ok = model.forward(&hidden_state, tokens, allreduce, fused ? &fused_fn : nullptr);
        if (s >= args.warmup) step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        // The same wrong element on every rank, in every run: ranks and algorithms still agree with
        // one another, so only the reference can catch it.
        if (args.plant_wrong && ok) hidden_state[(tokens / 2) * hidden + hidden / 3] += 1.0f;
        if (unsharded && ok) {
          checkAgainstReference(*unsharded, hidden_state, args.preset.hidden, group.rank(),
                                std::string(symmarAlgoName(algo)) + (fused ? " fused" : " unfused"), s,
                                args.warmup + args.steps, &reference_check);
        }
      }
      if (group.sumOf(ok ? 0 : 1) != 0) return 1;
      // Agreement across ranks: every rank's final state against rank 0's, through a checksum gather.
      summary.disagree += ranksDisagreeing(group, hidden_state);
      if (reference.empty()) reference = hidden_state;
      const double step = group.maxOf(step_seconds / args.steps);
      const double share = group.maxOf(ar_seconds / args.steps) / step;
      summary.results.push_back({algo, tokens / step, step * 1e3, share, group.maxOf(relDiff(hidden_state, reference)),
                                 fused == 1, fused ? unfused_tps : 0.0});
      if (!fused) unfused_tps = tokens / step;
    }
  }
  if (unsharded) {
    summary.reference_tolerance = unsharded->tolerance;
    summary.reference_mismatches = group.sumOf(reference_check.mismatches);
    summary.reference_max_rel_diff = group.maxOf(reference_check.max_rel);
    summary.reference_excused = group.sumOf(reference_check.excused);
    for (int t : unsharded->near_tie) summary.reference_near_tie_tokens += t >= 0;
  }
  return report(args, group, comm, summary);
}

}  // namespace
}  // namespace moe

int main(int argc, char** argv) {
  // Ranks that share a GPU (or a process driving several) need their kernels resident at once: more
  // hardware queues than the default 8 keep their streams from serialising. Read at context
  // creation, so set before the first CUDA call; a user's own value wins.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  perf::startLauncher(&argc, &argv);
  openblas_set_num_threads(1);  // one core per rank: ranks share the machine
  moe::Args args;
  perf::Options launch;
  launch.device = "cpu";
  if (!moe::parse(argc, argv, &args, &launch)) {
    fprintf(stderr,
            "usage: moe_decode [--preset %s] [--layers N] [--experts N] [--batch N] [--spec-tokens K]\n"
            "                  [--steps N] [--warmup N] [--algos LIST] [--json FILE] [--tolerance X] [--fused on|off]\n"
            "                  [--reference on|off|auto] [--device cpu|gpu|auto] [--local-world N]\n"
            "                  (or under mpirun: one rank per process)\n"
            "  --device cpu (default): host ranks, fp32 OpenBLAS; gpu|auto: bf16 cuBLAS in CUDA graphs on a GPU comm\n"
            "  --fused on (default): each algorithm also runs with the fused allreduce + residual add + RMSNorm\n"
            "  --reference auto (default): every rank's state after every step must match the same model computed\n"
            "    unsharded in fp64 (host variant; auto skips it where it would not fit in 1 GiB or take minutes)\n",
            moe::presetNames());
    return 2;
  }
  std::string why;  // (under mpirun the comm's creation reports a missing GPU instead)
  const bool under_mpi = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
  if (launch.device == "gpu" && !under_mpi && !moe::gpuPresent(&why)) {
    fprintf(stderr, "moe_decode: --device gpu: no usable GPU: %s\n", why.c_str());
    return 77;  // ctest's skip code for the GPU test
  }
  return perf::launch(launch, [&](perf::Group& group, symmarComm_t comm, int gpu_device, const char*) {
    if (gpu_device >= 0) return moe::runGpu(args, group, comm, gpu_device);
    return moe::runHost(args, group, comm);
  });
}
