// libsymmar_torch: the compiled kernels of torch.ops.symmar.all_reduce_ and all_reduce.
//
// The ops' schemas, their fake implementations and their Python kernels live in symmar/ops.py.
// When this library loads, it takes the CPU and CUDA kernels of the two allreduce ops: a dense
// tensor of a symmar dtype on the comm's own device, reduced with sum/max/min, goes straight to
// symmarAllReduce on torch's current stream, without entering Python. That is the path of every
// call an engine makes in its decode loop, and the dispatcher into a Python kernel cost more than
// the allreduce of a small tensor. Every other call (another dtype or device, a strided tensor,
// op "avg", a handle of a closed or unknown comm) goes to the Python kernel, which checks and
// explains exactly as the binding does. A failed collective raises the binding's SymmarError too.
//
// ops.py tells this library which comm each handle names (symmarTorchBindComm) and forgets it
// before the comm is destroyed (symmarTorchUnbindComm, from Comm.close()).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "symmar/symmar.h"

namespace {

struct BoundComm {
  symmarComm_t comm;
  int64_t device;  // the comm's CUDA device, or -1 for a host comm
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

/// send -> recv with symmarAllReduce when the call is on the compiled path; false otherwise (the
/// caller hands it to the Python kernel, which either takes it or explains why not).
bool allReduceCompiled(const at::Tensor& send, const at::Tensor& recv, int64_t handle, c10::string_view op) {
  BoundComm bound;
  const int type = symmarType(send.scalar_type());
  const int red = symmarOp(op);
  if (type < 0 || red < 0 || !dense(send) || !lookUp(handle, &bound)) return false;
  const int64_t device = deviceOf(send);
  if (device != bound.device) return false;
  void* stream = nullptr;
  if (device >= 0) {
    stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(send.device()).native_handle();
  }
  const symmarResult_t res =
      symmarAllReduce(send.data_ptr(), recv.data_ptr(), static_cast<size_t>(send.numel()),
                      static_cast<symmarDataType_t>(type), static_cast<symmarRedOp_t>(red), bound.comm, stream);
  if (res != symmarSuccess) raiseFailure(send, handle, res);
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

}  // namespace

extern "C" {

/// Names comm (a symmarComm_t) by handle for the compiled kernels; device: its CUDA device or -1.
void symmarTorchBindComm(int64_t handle, void* comm, int64_t device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_comms[handle] = BoundComm{static_cast<symmarComm_t>(comm), device};
}

/// Forgets handle: later calls with it go to the Python kernel, which raises the reason.
void symmarTorchUnbindComm(int64_t handle) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_comms.erase(handle);
}

}  // extern "C"

TORCH_LIBRARY_IMPL(symmar, CPU, m) {
  m.impl("all_reduce_", &allReduceInPlace);
  m.impl("all_reduce", &allReduceOutOfPlace);
}

TORCH_LIBRARY_IMPL(symmar, CUDA, m) {
  m.impl("all_reduce_", &allReduceInPlace);
  m.impl("all_reduce", &allReduceOutOfPlace);
}
