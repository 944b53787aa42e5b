// libsymmar_mpi: bootstraps a comm over MPI and installs MPI_Allreduce, MPI_Reduce_scatter_block and
// MPI_Allgather as the `mpi` fallback.
// Built against the public C API, plus the host backend's SIMD reduction for fp16/bf16.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "host/host_reduce.h"
#include "mpi/mpi_inter_host.h"
#include "symmar/symmar_mpi.h"

namespace {

struct MpiState {
  MPI_Comm comm = MPI_COMM_NULL;
};

using symmar_mpi::mpiFailure;

int mpiAllGather(const void* send, void* recv, size_t bytes, void* user) {
  MPI_Comm comm = static_cast<MpiState*>(user)->comm;
  if (bytes > static_cast<size_t>(INT32_MAX)) return -1;
  return MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, comm);
}

// fp16/bf16 have no MPI datatype in MPI 3: user operations on 16-bit words, accumulating in fp32,
// with the host backend's SIMD reduction (inout = in op inout, in that order as MPI defines it).
template <symmarDataType_t kType, symmarRedOp_t kOp>
void reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  const void* srcs[2] = {in, inout};
  symmar::reduceRanks(inout, nullptr, srcs, 2, static_cast<size_t>(*len), kType, kOp);
}

MPI_Op halfOp(symmarDataType_t dtype, symmarRedOp_t op) {
  static MPI_Op ops[2][3] = {};
  static bool made = false;
  if (!made) {
    MPI_Op_create(reduce16<symmarFloat16, symmarSum>, 1, &ops[0][0]);
    MPI_Op_create(reduce16<symmarFloat16, symmarMax>, 1, &ops[0][1]);
    MPI_Op_create(reduce16<symmarFloat16, symmarMin>, 1, &ops[0][2]);
    MPI_Op_create(reduce16<symmarBfloat16, symmarSum>, 1, &ops[1][0]);
    MPI_Op_create(reduce16<symmarBfloat16, symmarMax>, 1, &ops[1][1]);
    MPI_Op_create(reduce16<symmarBfloat16, symmarMin>, 1, &ops[1][2]);
    made = true;
  }
  return ops[dtype == symmarBfloat16 ? 1 : 0][op];
}

/// The MPI datatype and operation of (dtype, op): fp16/bf16 as 16-bit words with symmar's operations.
void mpiTypeOp(symmarDataType_t dtype, symmarRedOp_t op, MPI_Datatype* type, MPI_Op* mop) {
  *mop = op == symmarSum ? MPI_SUM : (op == symmarMax ? MPI_MAX : MPI_MIN);
  switch (dtype) {
    case symmarFloat32: *type = MPI_FLOAT; break;
    case symmarFloat64: *type = MPI_DOUBLE; break;
    case symmarInt32: *type = MPI_INT32_T; break;
    default:
      *type = MPI_UINT16_T;
      *mop = halfOp(dtype, op);
  }
}

/// MPI counts are int: a larger per-rank block is refused (chunking would need strided types).
constexpr size_t kMaxBlockCount = 1u << 30;

symmarResult_t fallbackReduceScatter(const void* send, void* recv, size_t recvcount, symmarDataType_t dtype,
                                symmarRedOp_t op, void* user) {
  MPI_Comm comm = static_cast<MpiState*>(user)->comm;
  if (recvcount > kMaxBlockCount) {
    return mpiFailure(symmarUnsupported, "the mpi fallback's reduce-scatter takes at most 2^30 elements per rank");
  }
  MPI_Datatype type;
  MPI_Op mop;
  mpiTypeOp(dtype, op, &type, &mop);
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const size_t block = recvcount * symmarTypeSize(dtype);
  // In place (recv is this rank's block of send) MPI would leave the result at the start of send:
  // reduce into a scratch block instead, then copy it to its place.
  const bool in_place = static_cast<const char*>(send) + static_cast<size_t>(rank) * block == recv;
  void* out = in_place ? malloc(block ? block : 1) : recv;
  if (!out) return mpiFailure(symmarOutOfMemory, "the mpi fallback's reduce-scatter: out of host memory");
  const int rc = MPI_Reduce_scatter_block(send, out, static_cast<int>(recvcount), type, mop, comm);
  if (in_place) {
    if (rc == MPI_SUCCESS && block > 0) memcpy(recv, out, block);
    free(out);
  }
  if (rc != MPI_SUCCESS) return mpiFailure(symmarSystemError, "MPI_Reduce_scatter_block failed", rc);
  return symmarSuccess;
}

symmarResult_t fallbackAllGather(const void* send, void* recv, size_t sendcount, symmarDataType_t dtype, void* user) {
  MPI_Comm comm = static_cast<MpiState*>(user)->comm;
  const size_t bytes = sendcount * symmarTypeSize(dtype);
  if (bytes > static_cast<size_t>(INT32_MAX)) {
    return mpiFailure(symmarUnsupported, "the mpi fallback's all-gather takes at most 2 GiB per rank");
  }
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  // NCCL's in-place rule (send is this rank's block of recv) is MPI's MPI_IN_PLACE.
  const bool in_place = static_cast<const char*>(recv) + static_cast<size_t>(rank) * bytes == send;
  const int n = static_cast<int>(bytes);
  const int rc = MPI_Allgather(in_place ? MPI_IN_PLACE : send, n, MPI_BYTE, recv, n, MPI_BYTE, comm);
  if (rc != MPI_SUCCESS) return mpiFailure(symmarSystemError, "MPI_Allgather failed", rc);
  return symmarSuccess;
}

symmarResult_t mpiAllReduce(const void* send, void* recv, size_t count, symmarDataType_t dtype, symmarRedOp_t op,
                            void* user) {
  MPI_Comm comm = static_cast<MpiState*>(user)->comm;
  MPI_Datatype type;
  MPI_Op mop;
  mpiTypeOp(dtype, op, &type, &mop);
  const void* in = send == recv ? MPI_IN_PLACE : send;
  const char* r = static_cast<char*>(recv);
  const char* s = static_cast<const char*>(send);
  const size_t elem = symmarTypeSize(dtype);
  const size_t kMaxCount = 1u << 30;  // MPI counts are int
  for (size_t done = 0; done < count; done += kMaxCount) {
    int n = static_cast<int>(count - done < kMaxCount ? count - done : kMaxCount);
    const void* src = in == MPI_IN_PLACE ? MPI_IN_PLACE : s + done * elem;
    const int rc = MPI_Allreduce(src, const_cast<char*>(r) + done * elem, n, type, mop, comm);
    if (rc != MPI_SUCCESS) return mpiFailure(symmarSystemError, "MPI_Allreduce failed", rc);
  }
  return symmarSuccess;
}

void releaseState(void* user) {
  MpiState* state = static_cast<MpiState*>(user);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&state->comm);
  delete state;
}

}  // namespace

extern "C" symmarResult_t symmarCommInitMpi(symmarComm_t* comm, MPI_Comm mpi_comm, const symmarConfig_t* config) {
  if (!comm) return mpiFailure(symmarInvalidArgument, "symmarCommInitMpi: comm is NULL");
  *comm = nullptr;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return mpiFailure(symmarInvalidUsage, "symmarCommInitMpi: MPI is not initialized (MPI_Init first)");
  if (mpi_comm == MPI_COMM_NULL) return mpiFailure(symmarInvalidUsage, "symmarCommInitMpi: mpi_comm is MPI_COMM_NULL");
  MpiState* state = new (std::nothrow) MpiState;
  if (!state) return mpiFailure(symmarOutOfMemory, "symmarCommInitMpi: out of host memory");
  int rank = 0, size = 0;
  int rc = MPI_Comm_dup(mpi_comm, &state->comm);
  // MPI's default handler aborts the process on an error: the calls' codes come back instead.
  if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(state->comm, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(state->comm, &rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(state->comm, &size);
  if (rc != MPI_SUCCESS) {
    delete state;
    return mpiFailure(symmarSystemError, "symmarCommInitMpi: duplicating the MPI communicator failed", rc);
  }
  symmarResult_t res = symmarCommInitExternal(comm, size, rank, mpiAllGather, state, config);
  if (res == symmarSuccess) res = symmarCommSetFallback(*comm, mpiAllReduce, releaseState, state);
  const bool fallback_set = res == symmarSuccess;
  if (res == symmarSuccess) res = symmarCommSetFallbackCollectives(*comm, fallbackReduceScatter, fallbackAllGather);
  // Across hosts: the ranks sharing a local index get a communicator of their own for the
  // inter-host stage (split from the duplicate, which the fallback keeps).
  if (res == symmarSuccess) res = symmar_mpi::installInterHost(*comm, state->comm);
  if (res != symmarSuccess && fallback_set) {
    symmarCommDestroy(*comm);  // releases the fallback's state with it
    *comm = nullptr;
    return res;
  }
  if (res != symmarSuccess) {
    if (*comm) symmarCommDestroy(*comm);  // the fallback was not installed: state is still ours
    releaseState(state);
    *comm = nullptr;
  }
  return res;
}
