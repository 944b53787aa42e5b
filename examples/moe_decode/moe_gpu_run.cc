// The GPU variant of moe_decode: per algorithm, one decode step (every layer, both allreduces per
// layer through symmarAllReduceAlgo on the capture stream, bf16 sum) is captured in a CUDA graph,
// warmed up and replayed --steps times between two events. A graph of the same step without the
// allreduces gives the allreduce share. The final hidden states are compared across algorithms and
// ranks. Every stage that can fail is agreed on by all ranks before the next collective one, so a
// failure on one rank ends the run on every rank with a message instead of a hang.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cublas_loader.h"
#include "moe_model_gpu.h"
#include "moe_run.h"

namespace moe {
namespace {

bool cudaOk(cudaError_t e, const char* what, std::string* error) {
  if (e == cudaSuccess) return true;
  *error = std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  cudaGetLastError();  // clears a non-sticky error so that later calls report their own
  return false;
}

bool symmarOk(symmarResult_t r, symmarComm_t comm, const char* what, std::string* error) {
  if (r == symmarSuccess) return true;
  *error = std::string(what) + ": " + symmarGetErrorString(r) + ": " + symmarGetLastError(comm);
  return false;
}

// Stream, events and graphs of one rank, released on every path out of runGpu.
struct Resources {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  std::vector<cudaGraphExec_t> graphs;
  ~Resources() {
    for (cudaGraphExec_t g : graphs) cudaGraphExecDestroy(g);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (stream) cudaStreamDestroy(stream);
  }
  bool create(std::string* error) {
    return cudaOk(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate", error) &&
           cudaOk(cudaEventCreate(&start), "cudaEventCreate", error) &&
           cudaOk(cudaEventCreate(&stop), "cudaEventCreate", error);
  }
};

class Runner {
 public:
  Runner(const Args& args, perf::Group& group, symmarComm_t comm)
      : args_(args), group_(group), comm_(comm), model_(args.preset, group.rank(), group.size(), args.tokens(), 1234u) {}

  /// Collective: true on every rank when ok is true on every rank; prints this rank's error.
  bool agreed(bool ok, const std::string& error) {
    if (!ok) fprintf(stderr, "moe_decode rank %d: %s\n", group_.rank(), error.c_str());
    return group_.sumOf(ok ? 0 : 1) == 0;
  }

  bool setUp(int device, void* symmetric_partial) {
    std::string error;
    const cublas::Api* api = nullptr;
    bool ok = cudaOk(cudaSetDevice(device), "cudaSetDevice", &error) && (api = cublas::load(&error)) != nullptr &&
              model_.init(api, symmetric_partial, &error) && model_.setInput(initialHidden(args_), &error) &&
              res_.create(&error) && model_.bindStream(res_.stream, &error);
    return agreed(ok, error);
  }

  /// Every algorithm this comm serves for the step's allreduce (collective probe), or --algos.
  std::vector<symmarAlgo_t> algorithms() {
    if (!args_.algos.empty()) return args_.algos;
    std::vector<symmarAlgo_t> algos = {symmarAlgoAuto};
    for (int a = symmarAlgoOneShot; a < symmarNumAlgos; ++a) {
      symmarResult_t r = symmarAllReduceAlgo(model_.partialBuffer(), model_.reducedBuffer(), model_.allreduceCount(),
                                             symmarBfloat16, symmarSum, static_cast<symmarAlgo_t>(a), comm_, res_.stream);
      symmarResult_t async = symmarSuccess;
      if (cudaStreamSynchronize(res_.stream) != cudaSuccess) r = symmarCudaError;
      if (r == symmarSuccess && symmarCommGetAsyncError(comm_, &async) == symmarSuccess) r = async;
      cudaGetLastError();
      if (group_.sumOf(r == symmarSuccess ? 0 : 1) == 0) algos.push_back(static_cast<symmarAlgo_t>(a));
    }
    return algos;
  }

  /// One eager allreduce with algo outside any capture, so that lazy set-up (an NCCL communicator,
  /// say) happens here and not while capturing. Collective.
  bool prime(symmarAlgo_t algo) {
    std::string error;
    bool ok = symmarOk(symmarAllReduceAlgo(model_.partialBuffer(), model_.reducedBuffer(), model_.allreduceCount(),
                                           symmarBfloat16, symmarSum, algo, comm_, res_.stream),
                       comm_, symmarAlgoName(algo), &error) &&
              cudaOk(cudaStreamSynchronize(res_.stream), "eager allreduce", &error) && asyncOk(&error);
    return agreed(ok, error);
  }

  /// Captures one step (algo null: without allreduces) into a graph. Collective agreement.
  bool capture(const symmarAlgo_t* algo, cudaGraphExec_t* exec) {
    std::string error;
    GpuAllReduceFn allreduce = [&](const void* send, void* recv, size_t count, cudaStream_t s) {
      return symmarOk(symmarAllReduceAlgo(send, recv, count, symmarBfloat16, symmarSum, *algo, comm_, s), comm_,
                      symmarAlgoName(*algo), &error);
    };
    cudaGraph_t graph = nullptr;
    bool ok = cudaOk(cudaStreamBeginCapture(res_.stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture",
                     &error);
    if (ok) {
      std::string step_error;
      ok = model_.enqueueStep(res_.stream, algo ? &allreduce : nullptr, &step_error);
      if (!ok) error = step_error + (error.empty() ? "" : " (" + error + ")");
      const cudaError_t end = cudaStreamEndCapture(res_.stream, &graph);
      ok = ok && cudaOk(end, "cudaStreamEndCapture", &error);
      if (!ok) cudaGetLastError();
    }
    ok = ok && cudaOk(cudaGraphInstantiate(exec, graph, 0), "cudaGraphInstantiate", &error);
    if (graph) cudaGraphDestroy(graph);
    if (ok) res_.graphs.push_back(*exec);
    return agreed(ok, std::string("capturing the step") + (algo ? std::string(" with ") + symmarAlgoName(*algo) : "") +
                          ": " + error);
  }

  /// Warm-up replays, then --steps timed replays; *seconds per step on this rank. Collective.
  bool replay(cudaGraphExec_t exec, double* seconds) {
    std::string error;
    bool ok = true;
    for (int i = 0; i < args_.warmup && ok; ++i) ok = cudaOk(cudaGraphLaunch(exec, res_.stream), "cudaGraphLaunch", &error);
    ok = ok && cudaOk(cudaStreamSynchronize(res_.stream), "warm-up replay", &error) && asyncOk(&error);
    if (!agreed(ok, error)) return false;
    ok = cudaOk(cudaEventRecord(res_.start, res_.stream), "cudaEventRecord", &error);
    for (int i = 0; i < args_.steps && ok; ++i) ok = cudaOk(cudaGraphLaunch(exec, res_.stream), "cudaGraphLaunch", &error);
    ok = ok && cudaOk(cudaEventRecord(res_.stop, res_.stream), "cudaEventRecord", &error) &&
         cudaOk(cudaEventSynchronize(res_.stop), "timed replay", &error) && asyncOk(&error);
    float ms = 0;
    ok = ok && cudaOk(cudaEventElapsedTime(&ms, res_.start, res_.stop), "cudaEventElapsedTime", &error);
    *seconds = ms * 1e-3 / args_.steps;
    return agreed(ok, error);
  }

  bool readHidden(std::vector<float>* out) {
    std::string error;
    return agreed(model_.readHidden(res_.stream, out, &error), error);
  }

  size_t weightBytes() const { return model_.weightBytes(); }

 private:
  bool asyncOk(std::string* error) {
    symmarResult_t async = symmarSuccess;
    symmarResult_t r = symmarCommGetAsyncError(comm_, &async);
    return symmarOk(r == symmarSuccess ? async : r, comm_, "allreduce in the step", error);
  }

  const Args& args_;
  perf::Group& group_;
  symmarComm_t comm_;
  Resources res_;   // declared first, so destroyed last: the model's handle and buffers go before the stream
  GpuModel model_;
};

int runAll(const Args& args, perf::Group& group, symmarComm_t comm, int device, void* symmetric_partial,
           const std::string& fused_note) {
  Runner runner(args, group, comm);
  if (!runner.setUp(device, symmetric_partial)) return 1;
  const std::vector<symmarAlgo_t> algos = runner.algorithms();
  const int tokens = args.tokens();

  // The same step without its allreduces: the compute-only time the allreduce share is taken from.
  cudaGraphExec_t bare = nullptr;
  double bare_seconds = 0;
  if (!runner.capture(nullptr, &bare) || !runner.replay(bare, &bare_seconds)) return 1;
  const double compute = group.maxOf(bare_seconds);

  RunSummary summary{"cuda", runner.weightBytes(), 2, args.tolerance >= 0 ? args.tolerance : 2e-2, {}, 0, fused_note};
  std::vector<float> reference, hidden;
  for (symmarAlgo_t algo : algos) {
    cudaGraphExec_t exec = nullptr;
    double seconds = 0;
    if (!runner.prime(algo) || !runner.capture(&algo, &exec) || !runner.replay(exec, &seconds) || !runner.readHidden(&hidden)) return 1;
    summary.disagree += ranksDisagreeing(group, hidden);
    if (reference.empty()) reference = hidden;
    const double step = group.maxOf(seconds);
    const double share = std::min(1.0, std::max(0.0, 1.0 - compute / step));
    summary.results.push_back({algo, tokens / step, step * 1e3, share, group.maxOf(relDiff(hidden, reference)), false, 0.0});
  }
  return report(args, group, comm, summary);
}

// The GPU variant's step has no fused path yet: one line on why it runs unfused (the fused call
// probed with one bf16 token; collective, printed by rank 0).
std::string fusedNote(perf::Group& group, symmarComm_t comm, int device) {
  void* buf = nullptr;
  symmarResult_t r = symmarInternalError;
  std::string why = "cudaMalloc failed";
  if (cudaMalloc(&buf, 64) == cudaSuccess) {
    symmarAddRmsNormArgs_t a{};
    a.input = buf;
    a.residual_out = static_cast<char*>(buf) + 16;
    a.norm_out = static_cast<char*>(buf) + 32;
    a.gamma = static_cast<char*>(buf) + 48;
    a.eps = 1e-6f;
    a.tokens = 1;
    a.hidden = 1;
    a.dtype = symmarBfloat16;
    r = symmarAllReduceAddRmsNorm(&a, comm, nullptr);
    why = r == symmarSuccess ? "" : std::string(symmarGetErrorString(r)) + ": " + symmarGetLastError(comm);
    cudaDeviceSynchronize();
    cudaFree(buf);
  }
  cudaGetLastError();
  const bool all = group.sumOf(r == symmarSuccess ? 0 : 1) == 0;
  std::string note = all ? "the GPU variant runs unfused (its step does not use the fused call yet)"
                         : "fused call unavailable on this GPU comm, running unfused: " + why;
  if (group.rank() == 0) fprintf(stderr, "moe_decode: %s (device %d)\n", note.c_str(), device);
  return note;
}

}  // namespace

bool gpuPresent(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *why = std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
    cudaGetLastError();
    return false;
  }
  if (count == 0) *why = "no CUDA device";
  return count > 0;
}

int runGpu(const Args& args, perf::Group& group, symmarComm_t comm, int device) {
  if (cudaSetDevice(device) != cudaSuccess) cudaGetLastError();  // reported again (and agreed on) in setUp
  // Memory: every rank on this device needs its bf16 weights (the estimate of the fp32 host model,
  // halved), against what the device has free. Agreed on before anything is allocated.
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    free_bytes = 0;
  }
  int sharing = 0;
  for (double d : group.gather(static_cast<double>(device))) sharing += static_cast<int>(d) == device;
  const std::string refusal = free_bytes ? tooBig(args, Model::estimateBytes(args.preset, group.size(), args.tokens()) / 2,
                                                  std::max(1, sharing), free_bytes, "this GPU (cudaMemGetInfo)")
                                         : std::string();
  if (group.sumOf(refusal.empty() ? 0 : 1) != 0) {
    if (!refusal.empty()) fprintf(stderr, "%s\n", refusal.c_str());
    return 1;
  }
  const std::string fused_note = args.fused ? fusedNote(group, comm, device) : std::string();
  // The allreduce input lives in a symmetric buffer when every rank gets one (zero-copy input);
  // otherwise each rank's model allocates its own and the library copies it in.
  const size_t bytes = static_cast<size_t>(args.tokens()) * args.preset.hidden * 2;
  void* symmetric = nullptr;
  const bool all_symmetric = group.sumOf(symmarMemAlloc(comm, bytes, &symmetric) == symmarSuccess ? 0 : 1) == 0;
  const int status = runAll(args, group, comm, device, all_symmetric ? symmetric : nullptr, fused_note);
  // Collective free once every rank is done with the buffer (a partial failure leaves the buffers
  // to symmarCommDestroy).
  group.barrier();
  if (all_symmetric) symmarMemFree(comm, symmetric);
  return status;
}

}  // namespace moe
