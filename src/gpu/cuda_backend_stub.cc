// Used when the library is built without the CUDA backend.
#include "core/error.h"
#include "gpu/gpu_entry.h"

namespace symmar {

bool cudaUsable(int* device) {
  *device = -1;
  return false;
}

symmarResult_t createCudaBackend(const BackendContext&, BackendFacts*, std::unique_ptr<Backend>*) {
  return fail(symmarCudaError, "this libsymmar was built without the CUDA backend (SYMMAR_WITH_CUDA=OFF)");
}

symmarResult_t ncclGroupCall(bool, bool* called) {
  *called = false;
  return symmarSuccess;
}

}  // namespace symmar
