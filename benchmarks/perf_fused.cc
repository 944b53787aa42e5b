#include "perf_fused.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "core/names.h"
#include "core/numeric.h"
#include "core/schedule.h"
#include "perf_schedule.h"

#include "perf_cuda.h"

namespace perf {
namespace {

// Small integers and quarters: every rank's input, the residual, their sum and gamma are exact in
// every dtype, so residual_out is checked exactly and the norm against float64 within rounding.
double inputAt(int rank, size_t i) { return static_cast<double>(static_cast<int>((rank * 3 + i) % 11) - 5); }
double residualAt(size_t i) { return static_cast<double>(static_cast<int>((i * 5) % 7) - 3); }
double gammaAt(size_t j) { return 1.0 + static_cast<double>(j % 4) / 4; }
constexpr float kEps = 1e-6f;

enum Buf { kInput, kResidualIn, kResidualOut, kNormOut, kGamma, kNumBufs };

/// One rank's five buffers (host memory or the comm's GPU) and a call's timing there.
class FusedBuffers {
 public:
  virtual ~FusedBuffers() = default;
  virtual void* at(Buf b) = 0;
  virtual void upload(Buf b, const std::vector<char>& host) = 0;
  virtual void download(Buf b, std::vector<char>* host, size_t bytes) = 0;
  /// Runs one call (algo: a fused form, or auto for the unfused path) and returns its microseconds.
  virtual double timedCall(symmarComm_t comm, const symmarAddRmsNormArgs_t& a, symmarAlgo_t algo,
                           symmarResult_t* res) = 0;
};

symmarResult_t issue(symmarComm_t comm, const symmarAddRmsNormArgs_t& a, symmarAlgo_t algo, void* stream) {
  return algo == symmarAlgoAuto ? symmarAllReduceAddRmsNorm(&a, comm, stream)
                                : symmarAllReduceAddRmsNormAlgo(&a, algo, comm, stream);
}

class HostFusedBuffers : public FusedBuffers {
 public:
  HostFusedBuffers(size_t bytes, size_t gamma_bytes) {
    for (int b = 0; b < kNumBufs; ++b) bufs_[b].resize(b == kGamma ? gamma_bytes : bytes);
  }
  void* at(Buf b) override { return bufs_[b].data(); }
  void upload(Buf b, const std::vector<char>& host) override { std::copy(host.begin(), host.end(), bufs_[b].begin()); }
  void download(Buf b, std::vector<char>* host, size_t bytes) override {
    host->assign(bufs_[b].begin(), bufs_[b].begin() + static_cast<std::ptrdiff_t>(bytes));
  }
  double timedCall(symmarComm_t comm, const symmarAddRmsNormArgs_t& a, symmarAlgo_t algo,
                   symmarResult_t* res) override {
    const auto t0 = std::chrono::steady_clock::now();
    *res = issue(comm, a, algo, nullptr);
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  std::vector<char> bufs_[kNumBufs];
};

#ifdef SYMMAR_PERF_WITH_CUDA
class GpuFusedBuffers : public FusedBuffers {
 public:
  GpuFusedBuffers(size_t bytes, size_t gamma_bytes, int device) {
    cudaSetDevice(device);
    cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    cudaEventCreate(&start_);
    cudaEventCreate(&stop_);
    for (int b = 0; b < kNumBufs; ++b) {
      if (cudaMalloc(&bufs_[b], b == kGamma ? gamma_bytes : bytes) != cudaSuccess) bufs_[b] = nullptr;
    }
  }
  ~GpuFusedBuffers() override {
    for (void* p : bufs_) {
      if (p) cudaFree(p);
    }
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }
  void* at(Buf b) override { return bufs_[b]; }
  void upload(Buf b, const std::vector<char>& host) override {
    cudaMemcpyAsync(bufs_[b], host.data(), host.size(), cudaMemcpyHostToDevice, stream_);
    cudaStreamSynchronize(stream_);  // settled before the ranks meet (perf_runner.cc's settle())
  }
  void download(Buf b, std::vector<char>* host, size_t bytes) override {
    host->resize(bytes);
    cudaMemcpyAsync(host->data(), bufs_[b], bytes, cudaMemcpyDeviceToHost, stream_);
    cudaStreamSynchronize(stream_);
  }
  double timedCall(symmarComm_t comm, const symmarAddRmsNormArgs_t& a, symmarAlgo_t algo,
                   symmarResult_t* res) override {
    return timeOnStream(stream_, start_, stop_, comm, res, [&] { return issue(comm, a, algo, stream_); });
  }

 private:
  void* bufs_[kNumBufs] = {};
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};
#endif

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Elements of this call's outputs that differ from the float64 reference: residual_out exactly,
/// the norm within the dtype's rounding (twice its unit roundoff, relative, plus a small floor).
/// plant: corrupt one output first (Options::plant_wrong, which proves that a wrong output fails).
long wrongOutputs(FusedBuffers* bufs, const symmarAddRmsNormArgs_t& a, int world, bool plant) {
  const size_t n = a.tokens * a.hidden, bytes = n * symmarTypeSize(a.dtype);
  std::vector<char> res, norm;
  bufs->download(kResidualOut, &res, bytes);
  bufs->download(kNormOut, &norm, bytes);
  if (plant) symmar::storeElement(norm.data(), a.dtype, n - 1, 12345);
  const double tol = a.dtype == symmarFloat32 ? 1e-5 : a.dtype == symmarFloat16 ? 2e-3 : 1.6e-2;
  long wrong = 0;
  for (size_t t = 0; t < a.tokens; ++t) {
    double ss = 0;
    std::vector<double> row(a.hidden);
    for (size_t j = 0; j < a.hidden; ++j) {
      const size_t i = t * a.hidden + j;
      row[j] = residualAt(i);
      for (int r = 0; r < world; ++r) row[j] += inputAt(r, i);
      ss += row[j] * row[j];
      wrong += symmar::loadElement(res.data(), a.dtype, i) != row[j];
    }
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(a.hidden) + kEps);
    for (size_t j = 0; j < a.hidden; ++j) {
      const double want = row[j] * inv * gammaAt(j);
      wrong += std::fabs(symmar::loadElement(norm.data(), a.dtype, t * a.hidden + j) - want) > tol * std::fabs(want) + 1e-3;
    }
  }
  return wrong;
}

}  // namespace

bool runFusedSweep(symmarComm_t comm, Group& group, const Options& opt, const FusedSweep& sweep, int gpu_device,
                   std::vector<tune::FusedMeasurement>* out, std::string* error) {
  const int world = group.size();
  const size_t elem = symmarTypeSize(opt.dtype), h = sweep.hidden;
  const size_t max_tokens = *std::max_element(sweep.tokens.begin(), sweep.tokens.end());
  const size_t bytes = max_tokens * h * elem;
  std::unique_ptr<FusedBuffers> bufs;
  (void)gpu_device;
#ifdef SYMMAR_PERF_WITH_CUDA
  if (gpu_device >= 0) bufs = std::make_unique<GpuFusedBuffers>(bytes, h * elem, gpu_device);
#endif
  if (!bufs) bufs = std::make_unique<HostFusedBuffers>(bytes, h * elem);
  bool allocated = true;
  for (int b = 0; b < kNumBufs; ++b) allocated = allocated && bufs->at(static_cast<Buf>(b));
  if (group.sumOf(allocated ? 0 : 1) != 0) {
    *error = "could not allocate the fused call's buffers (" + std::to_string(bytes) + " bytes each) on every rank";
    return false;
  }
  std::vector<char> host(bytes), gamma(h * elem);
  for (size_t i = 0; i < max_tokens * h; ++i) symmar::storeElement(host.data(), opt.dtype, i, inputAt(group.rank(), i));
  bufs->upload(kInput, host);
  for (size_t i = 0; i < max_tokens * h; ++i) symmar::storeElement(host.data(), opt.dtype, i, residualAt(i));
  bufs->upload(kResidualIn, host);
  for (size_t j = 0; j < h; ++j) symmar::storeElement(gamma.data(), opt.dtype, j, gammaAt(j));
  bufs->upload(kGamma, gamma);

  const bool gpu = gpu_device >= 0;
  // Variant 0: the unfused path (the comm's auto call); then the fused forms.
  const std::vector<symmarAlgo_t> variants = {symmarAlgoAuto, symmarAlgoOneShot, symmarAlgoTwoShot, symmarAlgoLamport};
  for (size_t tokens : sweep.tokens) {
    symmarAddRmsNormArgs_t a{};
    a.input = bufs->at(kInput);
    a.residual_in = bufs->at(kResidualIn);
    a.residual_out = bufs->at(kResidualOut);
    a.norm_out = bufs->at(kNormOut);
    a.gamma = bufs->at(kGamma);
    a.eps = kEps;
    a.tokens = tokens;
    a.hidden = h;
    a.dtype = opt.dtype;
    // The forms this size runs: a form the comm refuses for this shape (on every rank: the checks
    // read only the call's shape and the comm) is left out, as is lamport off a GPU or past its size.
    std::vector<size_t> serving;
    for (size_t k = 0; k < variants.size(); ++k) {
      const symmarAlgo_t v = variants[k];
      if (v == symmarAlgoLamport && (!gpu || !symmar::sched::lamportFusedFits(tokens, h, elem))) continue;
      symmarResult_t res = symmarSuccess;
      group.barrier();
      bufs->timedCall(comm, a, v, &res);
      const bool refused = res == symmarUnsupported || res == symmarInvalidArgument;
      // Both sums on every rank (they are collective), then the same decision everywhere.
      const long failed = group.sumOf(res == symmarSuccess ? 0 : 1);
      const long not_refused = group.sumOf(res == symmarSuccess || refused ? 0 : 1);
      if (failed == 0) {
        serving.push_back(k);
      } else if (k == 0 || not_refused != 0) {
        *error = std::string("the fused call (") + (k == 0 ? "unfused path" : symmarAlgoName(v)) + ", " +
                 std::to_string(tokens) + " tokens) failed: " + symmarGetErrorString(res) + " (" +
                 symmarGetLastError(comm) + ")";
        return false;
      }
    }
    std::vector<std::vector<double>> times(variants.size());
    symmarResult_t res = symmarSuccess;
    group.barrier();
    for (const ScheduledCall& call : interleavedSchedule(serving.size(), opt.warmup, opt.iters, opt.block)) {
      const size_t k = serving[call.variant];
      const double us = bufs->timedCall(comm, a, variants[k], &res);
      if (res != symmarSuccess) break;
      if (call.timed) times[k].push_back(us);
    }
    tune::FusedMeasurement m{tokens * h * elem, 0, 0, 0};
    for (size_t k : serving) {
      long wrong = 0;
      if (res == symmarSuccess && opt.check) {  // one more call per form, checked
        group.barrier();
        bufs->timedCall(comm, a, variants[k], &res);
        if (res == symmarSuccess) wrong = wrongOutputs(bufs.get(), a, world, opt.plant_wrong && group.rank() == 0);
      }
      if (group.sumOf(res == symmarSuccess ? 0 : 1) != 0 || group.sumOf(wrong) != 0) {
        *error = std::string("the fused call (") + (k == 0 ? "unfused path" : symmarAlgoName(variants[k])) + ", " +
                 std::to_string(tokens) + " tokens) " +
                 (res == symmarSuccess ? "gave wrong outputs"
                                       : std::string("failed: ") + symmarGetErrorString(res) + " (" +
                                             symmarGetLastError(comm) + ")");
        return false;
      }
      const double t = group.maxOf(median(times[k]));
      switch (variants[k]) {
        case symmarAlgoOneShot: m.oneshot_us = t; break;
        case symmarAlgoTwoShot: m.twoshot_us = t; break;
        case symmarAlgoLamport: m.lamport_us = t; break;
        default: m.unfused_us = t; break;
      }
    }
    out->push_back(m);
  }
  return true;
}

}  // namespace perf
