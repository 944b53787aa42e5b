// Entry points of the CUDA backend used by comm creation. Built from src/gpu/ and cuda/ when
// SYMMAR_WITH_CUDA is on; otherwise a stub reports that the build has no GPU support.
#pragma once
#include <memory>

#include "core/backend.h"

namespace symmar {

/// True when a CUDA driver and at least one device are usable; *device = the current device.
/// Never fails loudly: a machine without libcuda.so.1 simply returns false.
bool cudaUsable(int* device);

/// Collective: creates the CUDA backend for ctx.settings.device and reports the topology (cc,
/// link, world, multicast) and the agreed staging size in facts. Without a driver:
/// symmarCudaError with a message.
symmarResult_t createCudaBackend(const BackendContext& ctx, BackendFacts* facts, std::unique_ptr<Backend>* out);

/// Opens (start) or closes a group of NCCL calls issued by this thread, when NCCL is loaded in the
/// process; *called says whether an NCCL group call was made (it must be matched).
symmarResult_t ncclGroupCall(bool start, bool* called);

}  // namespace symmar
