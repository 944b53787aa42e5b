// Launched by mpirun: symmarCommInitMpi, then every dtype x op x algorithm (mpi included) on a
// set of counts, checked against the reference and compared bitwise across ranks; then
// reduce-scatter and all-gather the same way, by the direct form and by the mpi fallback.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "mp/mp_util.h"
#include "symmar/symmar_mpi.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  symmarConfig_t cfg = SYMMAR_CONFIG_INIT;
  cfg.device = SYMMAR_DEVICE_CPU;
  cfg.staging_bytes = 128 << 10;
  cfg.timeout_ms = 60000;
  symmarComm_t comm = nullptr;
  int failed = 0, passed = 0;
  if (symmarCommInitMpi(&comm, MPI_COMM_WORLD, &cfg) != symmarSuccess) {
    fprintf(stderr, "rank %d: symmarCommInitMpi: %s\n", rank, symmarGetLastError(nullptr));
    failed = 1;
  } else {
    // A case passes when it passed on every rank.
    auto tally = [&](int errors, const std::string& what) {
      int any = 0;
      MPI_Allreduce(&errors, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      if (any && rank == 0) fprintf(stderr, "FAILED: %s\n", what.c_str());
      (any ? failed : passed) += 1;
    };
    const symmarAlgo_t algos[] = {symmarAlgoAuto, symmarAlgoOneShot, symmarAlgoTwoShot, symmarAlgoMpi};
    for (int dt = 0; dt < symmarNumTypes; ++dt) {
      for (int op = 0; op < symmarNumOps; ++op) {
        for (symmarAlgo_t algo : algos) {
          for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000), size_t(65537), size_t(300001)}) {
            for (bool in_place : {false, true}) {
              mp::Case c{static_cast<symmarDataType_t>(dt), static_cast<symmarRedOp_t>(op), count, in_place, algo, false};
              uint64_t digest = 0;
              int errors = mp::runCase(comm, rank, world, c, &digest);
              std::vector<uint64_t> all(world);
              MPI_Allgather(&digest, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
              for (uint64_t d : all) errors += d != all[0];
              tally(errors, mp::describe(c));
            }
          }
        }
      }
    }
    // Reduce-scatter and all-gather: the direct form, the mpi fallback's, and auto.
    int call = 0;
    for (bool scatter : {true, false}) {
      for (int dt = 0; dt < symmarNumTypes; ++dt) {
        for (int op = 0; op < (scatter ? symmarNumOps : 1); ++op) {
          for (symmarAlgo_t algo : {symmarAlgoAuto, symmarAlgoOneShot, symmarAlgoMpi}) {
            for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(65537)}) {
              for (bool in_place : {false, true}) {
                const mp::GatherCase c{scatter, static_cast<symmarDataType_t>(dt), static_cast<symmarRedOp_t>(op),
                                       count, in_place, algo};
                tally(mp::runGatherCase(comm, rank, world, c, ++call), mp::describe(c));
              }
            }
          }
        }
      }
    }
    symmarAlgo_t planned;
    symmarCommPlan(comm, 1 << 20, symmarFloat32, symmarSum, &planned);
    if (rank == 0) printf("world %d: auto plans %s for 4 MiB\n", world, symmarAlgoName(planned));
    symmarCommDestroy(comm);
  }
  int total_failed = 0;
  MPI_Allreduce(&failed, &total_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) printf("mpi world %d: %d passed, %d failed\n", world, passed, total_failed);
  MPI_Finalize();
  return total_failed ? 1 : 0;
}
