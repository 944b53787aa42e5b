// libsymmar_torch: the compiled kernels of torch.ops.symmar.all_reduce_, all_reduce, all_gather,
// reduce_scatter and all_reduce_add_rms_norm (and their _sum twins), and try_all_reduce_, an op only this library has
// (ops.py defines it where the library loads): SymmarCommunicator's check and the in-place sum in
// one call, which spares an eager engine's hook the check's Python.
//
// The ops' schemas, their fake implementations and their Python kernels live in symmar/ops.py.
// When this library loads, it takes the CPU and CUDA kernels of these ops: a dense tensor of a
// symmar dtype on the comm's own device (reduced with sum/max/min) goes straight to
// symmarAllReduce, symmarAllGather, symmarReduceScatter or symmarAllReduceAddRmsNorm on torch's
// current stream, without
// entering Python. That is the path of every call an engine makes in its decode loop (the
// allreduces, the logits' gather), and the dispatcher into a Python kernel cost more than the
// collective of a small tensor. Every other call (another dtype or device, a strided tensor,
// op "avg", a handle of a closed or unknown comm) goes to the Python kernel, which checks and
// explains exactly as the binding does. A failed collective raises the binding's SymmarError too.
//
// torch_threads.cc, beside it, lends torch's intra-op threads to a comm's host steps
// (symmarTorchParallelFor, Comm.set_host_threads(n, pool="torch")).
//
// ops.py tells this library which comm each handle names (symmarTorchBindComm) and forgets it
// before the comm is destroyed (symmarTorchUnbindComm, from Comm.close()).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <tuple>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "symmar/symmar.h"

namespace {

struct BoundComm {
  symmarComm_t comm;
  int64_t device;  // the comm's CUDA device, or -1 for a host comm
  int64_t nranks;
  // Per symmar dtype, the element counts try_all_reduce_ takes (symmarTorchSetSpan); none at first.
  int64_t span_lo[symmarNumTypes];
  int64_t span_hi[symmarNumTypes];
};

std::mutex g_mutex;
std::unordered_map<int64_t, BoundComm> g_comms;

bool lookUp(int64_t handle, BoundComm* out) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_comms.find(handle);
  if (it == g_comms.end()) return false;
  *out = it->second;
  return true;
}

int symmarType(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return symmarFloat32;
    case at::kHalf: return symmarFloat16;
    case at::kBFloat16: return symmarBfloat16;
    case at::kInt: return symmarInt32;
    case at::kDouble: return symmarFloat64;
    default: return -1;
  }
}

int symmarOp(c10::string_view op) {
  if (op == "sum") return symmarSum;
  if (op == "max") return symmarMax;
  if (op == "min") return symmarMin;
  return -1;  // "avg" and unknown names: the Python kernel
}

bool dense(const at::Tensor& t) { return t.is_contiguous() && !t.is_neg() && !t.is_conj(); }

int64_t deviceOf(const at::Tensor& t) {
  if (t.is_cpu()) return -1;
  if (t.is_cuda()) return t.get_device();
  return -2;  // no symmar backend: never a comm's device
}

/// Raises the binding's error for a failed collective (SymmarError with the library's message).
[[noreturn]] void raiseFailure(const at::Tensor& x, int64_t handle, int code) {
  static auto raise = c10::Dispatcher::singleton()
                          .findSchemaOrThrow("symmar::_raise_failure", "")
                          .typed<void(const at::Tensor&, int64_t, int64_t)>();
  raise.call(x, handle, code);
  TORCH_CHECK(false, "symmar: allreduce failed with code ", code);  // the Python kernel always raises
}

/// What a call on the compiled path runs with: the comm, the dtype and the stream.
struct CompiledCall {
  BoundComm bound;
  symmarDataType_t type;
  void* stream;  // torch's current stream on the comm's device; nullptr on a host comm
};

/// Whether x can take the compiled path with comm `handle`: a dense tensor of a symmar dtype on the
/// comm's own device. False sends the call to the Python kernel, which takes it or explains why not.
bool compiledCall(const at::Tensor& x, int64_t handle, CompiledCall* call) {
  const int type = symmarType(x.scalar_type());
  if (type < 0 || !dense(x) || !lookUp(handle, &call->bound)) return false;
  const int64_t device = deviceOf(x);
  if (device != call->bound.device) return false;
  call->type = static_cast<symmarDataType_t>(type);
  call->stream = nullptr;
  if (device >= 0) {
    call->stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(x.device()).native_handle();
  }
  return true;
}

/// send -> recv with symmarAllReduce when the call is on the compiled path; false otherwise (the
/// caller hands it to the Python kernel, which either takes it or explains why not).
bool allReduceCompiled(const at::Tensor& send, const at::Tensor& recv, int64_t handle, c10::string_view op) {
  CompiledCall c;
  const int red = symmarOp(op);
  if (red < 0 || !compiledCall(send, handle, &c)) return false;
  const symmarResult_t res = symmarAllReduce(send.data_ptr(), recv.data_ptr(), static_cast<size_t>(send.numel()),
                                             c.type, static_cast<symmarRedOp_t>(red), c.bound.comm, c.stream);
  if (res != symmarSuccess) raiseFailure(send, handle, res);
  return true;
}

void allReduceInPlace(at::Tensor& x, int64_t comm, c10::string_view op);

/// The communicator's one-call check and in-place sum (SymmarCommunicator.try_all_reduce_): false,
/// touching nothing, unless x is a contiguous tensor of a dtype whose span (symmarTorchSetSpan)
/// holds its element count, on the comm's device, with the comm bound; then all_reduce_ (the
/// compiled kernel, or the Python one for what it does not take) and true. The same decision as the
/// Python check, so ranks agree whichever of the two each runs.
bool tryAllReduceInPlace(at::Tensor& x, int64_t comm) {
  BoundComm bound;
  const int type = symmarType(x.scalar_type());
  if (type < 0 || !lookUp(comm, &bound)) return false;
  const int64_t n = x.numel();
  if (n < 1 || n < bound.span_lo[type] || n > bound.span_hi[type] || deviceOf(x) != bound.device ||
      !x.is_contiguous()) {
    return false;
  }
  allReduceInPlace(x, comm, "sum");
  return true;
}

void allReduceInPlace(at::Tensor& x, int64_t comm, c10::string_view op) {
  if (allReduceCompiled(x, x, comm, op)) {
    // What torch's own in-place ops do: autograd then refuses a backward that saved x's old value.
    x.unsafeGetTensorImpl()->bump_version();
    return;
  }
  static auto python = c10::Dispatcher::singleton()
                           .findSchemaOrThrow("symmar::_py_all_reduce_", "")
                           .typed<void(at::Tensor&, int64_t, c10::string_view)>();
  python.call(x, comm, op);
}

/// all_reduce_ with op "sum" (torch.ops.symmar.all_reduce_sum_: no op argument for a caller to
/// spell as a keyword).
void allReduceSumInPlace(at::Tensor& x, int64_t comm) { allReduceInPlace(x, comm, "sum"); }

at::Tensor allReduceOutOfPlace(const at::Tensor& x, int64_t comm, c10::string_view op) {
  if (dense(x)) {
    at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
    if (allReduceCompiled(x, out, comm, op)) return out;
  }
  static auto python = c10::Dispatcher::singleton()
                           .findSchemaOrThrow("symmar::_py_all_reduce", "")
                           .typed<at::Tensor(const at::Tensor&, int64_t, c10::string_view)>();
  return python.call(x, comm, op);
}

/// all_reduce with op "sum" (torch.ops.symmar.all_reduce_sum: no op argument, as all_reduce_sum_).
at::Tensor allReduceSumOutOfPlace(const at::Tensor& x, int64_t comm) { return allReduceOutOfPlace(x, comm, "sum"); }

/// Every rank's x as blocks along dim 0 of a new tensor (a 0-dim x gives shape (nranks,)).
at::Tensor allGather(const at::Tensor& x, int64_t comm) {
  CompiledCall c;
  if (x.numel() > 0 && compiledCall(x, comm, &c)) {
    std::vector<int64_t> shape = x.sizes().vec();
    if (shape.empty()) shape.push_back(1);
    shape[0] *= c.bound.nranks;
    at::Tensor out = at::empty(shape, x.options().memory_format(at::MemoryFormat::Contiguous));
    const symmarResult_t res =
        symmarAllGather(x.data_ptr(), out.data_ptr(), static_cast<size_t>(x.numel()), c.type, c.bound.comm, c.stream);
    if (res != symmarSuccess) raiseFailure(x, comm, res);
    return out;
  }
  static auto python = c10::Dispatcher::singleton()
                           .findSchemaOrThrow("symmar::_py_all_gather", "")
                           .typed<at::Tensor(const at::Tensor&, int64_t)>();
  return python.call(x, comm);
}

/// This rank's block of the reduction of x, whose dim 0 holds nranks blocks.
at::Tensor reduceScatter(const at::Tensor& x, int64_t comm, c10::string_view op) {
  CompiledCall c;
  const int red = symmarOp(op);
  if (red >= 0 && x.dim() > 0 && x.numel() > 0 && compiledCall(x, comm, &c) && x.size(0) % c.bound.nranks == 0) {
    std::vector<int64_t> shape = x.sizes().vec();
    shape[0] /= c.bound.nranks;
    at::Tensor out = at::empty(shape, x.options().memory_format(at::MemoryFormat::Contiguous));
    const symmarResult_t res =
        symmarReduceScatter(x.data_ptr(), out.data_ptr(), static_cast<size_t>(out.numel()), c.type,
                            static_cast<symmarRedOp_t>(red), c.bound.comm, c.stream);
    if (res != symmarSuccess) raiseFailure(x, comm, res);
    return out;
  }
  static auto python = c10::Dispatcher::singleton()
                           .findSchemaOrThrow("symmar::_py_reduce_scatter", "")
                           .typed<at::Tensor(const at::Tensor&, int64_t, c10::string_view)>();
  return python.call(x, comm, op);
}

/// reduce_scatter with op "sum" (torch.ops.symmar.reduce_scatter_sum: no op argument).
at::Tensor reduceScatterSum(const at::Tensor& x, int64_t comm) { return reduceScatter(x, comm, "sum"); }

/// Whether t is a dense tensor like x (dtype and device), for the fused call's other operands.
bool denseLike(const at::Tensor& t, const at::Tensor& x) {
  return dense(t) && t.scalar_type() == x.scalar_type() && t.device() == x.device();
}

/// Whether the fused call's operands take the compiled path: algo "auto" on dense float32/float16/
/// bfloat16 operands of one dtype on the comm's device, gamma of x's last dim, a residual (where
/// given) of x's shape and a finite eps >= 0: what a compiled decoder block passes.
bool fusedOperands(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor* residual, double eps,
                   c10::string_view algo) {
  const bool fusedType = x.scalar_type() == at::kFloat || x.scalar_type() == at::kHalf ||
                         x.scalar_type() == at::kBFloat16;
  return algo == "auto" && fusedType && x.dim() >= 1 && x.numel() > 0 && eps >= 0 && std::isfinite(eps) &&
         denseLike(gamma, x) && gamma.numel() == x.size(-1) &&
         (residual == nullptr || (denseLike(*residual, x) && residual->sizes() == x.sizes()));
}

/// Runs symmarAllReduceAddRmsNorm over x's rows; raises the binding's error where it fails.
void runFused(const at::Tensor& x, const at::Tensor& gamma, const void* residualIn, void* residualOut,
              void* normOut, int64_t comm, double eps, const CompiledCall& c) {
  symmarAddRmsNormArgs_t args{};
  args.input = x.data_ptr();
  args.residual_in = residualIn;
  args.residual_out = residualOut;
  args.norm_out = normOut;
  args.gamma = gamma.data_ptr();
  args.eps = static_cast<float>(eps);
  args.hidden = static_cast<size_t>(x.size(-1));
  args.tokens = static_cast<size_t>(x.numel() / x.size(-1));
  args.dtype = c.type;
  const symmarResult_t res = symmarAllReduceAddRmsNorm(&args, c.bound.comm, c.stream);
  if (res != symmarSuccess) raiseFailure(x, comm, res);
}

/// (residual_out, norm_out) of the fused allreduce + residual add + RMSNorm over x's last dim, new
/// tensors. Calls fusedOperands refuses (and a call of no elements) go to the Python kernel, which
/// checks and explains as the binding does.
std::tuple<at::Tensor, at::Tensor> allReduceAddRmsNorm(const at::Tensor& x, const at::Tensor& gamma,
                                                       const c10::optional<at::Tensor>& residual, int64_t comm,
                                                       double eps, c10::string_view algo) {
  CompiledCall c;
  if (fusedOperands(x, gamma, residual.has_value() ? &*residual : nullptr, eps, algo) && compiledCall(x, comm, &c)) {
    at::Tensor residualOut = at::empty_like(x, at::MemoryFormat::Contiguous);
    at::Tensor normOut = at::empty_like(x, at::MemoryFormat::Contiguous);
    runFused(x, gamma, residual.has_value() ? residual->data_ptr() : nullptr, residualOut.data_ptr(),
             normOut.data_ptr(), comm, eps, c);
    return {residualOut, normOut};
  }
  static auto python =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("symmar::_py_all_reduce_add_rms_norm", "")
          .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                    const c10::optional<at::Tensor>&, int64_t, double,
                                                    c10::string_view)>();
  return python.call(x, gamma, residual, comm, eps, algo);
}

/// In place, as the engines' fused_add_rms_norm: residual = allreduce_sum(x) + residual, then x =
/// its RMSNorm times gamma. No outputs to allocate: at a few tokens the two new tensors of the
/// functional form cost more than the norm. Tensors that share memory go to the Python kernel.
void allReduceAddRmsNormInPlace(at::Tensor& x, at::Tensor& residual, const at::Tensor& gamma, int64_t comm,
                                double eps) {
  CompiledCall c;
  if (fusedOperands(x, gamma, &residual, eps, "auto") && !x.is_alias_of(residual) && compiledCall(x, comm, &c)) {
    runFused(x, gamma, residual.data_ptr(), residual.data_ptr(), x.data_ptr(), comm, eps, c);
    x.unsafeGetTensorImpl()->bump_version();
    residual.unsafeGetTensorImpl()->bump_version();
    return;
  }
  static auto python = c10::Dispatcher::singleton()
                           .findSchemaOrThrow("symmar::_py_all_reduce_add_rms_norm_", "")
                           .typed<void(at::Tensor&, at::Tensor&, const at::Tensor&, int64_t, double)>();
  python.call(x, residual, gamma, comm, eps);
}

}  // namespace

extern "C" {

/// Names comm (a symmarComm_t) by handle for the compiled kernels; device: its CUDA device or -1.
void symmarTorchBindComm(int64_t handle, void* comm, int64_t device) {
  int nranks = 0;
  if (symmarCommCount(static_cast<symmarComm_t>(comm), &nranks) != symmarSuccess || nranks < 1) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  BoundComm bound{static_cast<symmarComm_t>(comm), device, nranks, {}, {}};
  for (int t = 0; t < symmarNumTypes; ++t) bound.span_lo[t] = 1, bound.span_hi[t] = 0;  // takes nothing yet
  g_comms[handle] = bound;
}

/// The element counts [lo, hi] of dtype (a symmarDataType_t) that try_all_reduce_ takes on the comm
/// named handle (lo > hi: none). Ignored for a handle not bound or a dtype out of range.
void symmarTorchSetSpan(int64_t handle, int64_t dtype, int64_t lo, int64_t hi) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_comms.find(handle);
  if (it == g_comms.end() || dtype < 0 || dtype >= symmarNumTypes) return;
  it->second.span_lo[dtype] = lo;
  it->second.span_hi[dtype] = hi;
}

/// Forgets handle: later calls with it go to the Python kernel, which raises the reason.
void symmarTorchUnbindComm(int64_t handle) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_comms.erase(handle);
}

}  // extern "C"

TORCH_LIBRARY_IMPL(symmar, CPU, m) {
  m.impl("all_reduce_", &allReduceInPlace);
  m.impl("all_reduce_sum_", &allReduceSumInPlace);
  m.impl("try_all_reduce_", &tryAllReduceInPlace);
  m.impl("all_reduce", &allReduceOutOfPlace);
  m.impl("all_reduce_sum", &allReduceSumOutOfPlace);
  m.impl("all_gather", &allGather);
  m.impl("reduce_scatter", &reduceScatter);
  m.impl("reduce_scatter_sum", &reduceScatterSum);
  m.impl("all_reduce_add_rms_norm", &allReduceAddRmsNorm);
  m.impl("all_reduce_add_rms_norm_", &allReduceAddRmsNormInPlace);
}

TORCH_LIBRARY_IMPL(symmar, CUDA, m) {
  m.impl("all_reduce_", &allReduceInPlace);
  m.impl("all_reduce_sum_", &allReduceSumInPlace);
  m.impl("try_all_reduce_", &tryAllReduceInPlace);
  m.impl("all_reduce", &allReduceOutOfPlace);
  m.impl("all_reduce_sum", &allReduceSumOutOfPlace);
  m.impl("all_gather", &allGather);
  m.impl("reduce_scatter", &reduceScatter);
  m.impl("reduce_scatter_sum", &reduceScatterSum);
  m.impl("all_reduce_add_rms_norm", &allReduceAddRmsNorm);
  m.impl("all_reduce_add_rms_norm_", &allReduceAddRmsNormInPlace);
}
