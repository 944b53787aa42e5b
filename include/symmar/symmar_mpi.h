/**
 * @file symmar_mpi.h
 * @brief MPI bootstrap and the `mpi` fallback (libsymmar_mpi).
 */
#ifndef SYMMAR_SYMMAR_MPI_H_
#define SYMMAR_SYMMAR_MPI_H_

#include <mpi.h>

#include "symmar/symmar.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Collective over mpi_comm: creates a symmar comm whose ranks are mpi_comm's ranks, bootstrapped
 * over MPI, with MPI_Allreduce (on a duplicate of mpi_comm) as the symmarAlgoMpi fallback. When
 * the ranks span hosts with as many ranks on each, the comm is hierarchical: shared memory within
 * each host, and between hosts an exchange among the ranks of each local index over a communicator
 * split from the duplicate (symmarCommSetInterHost). Hosts with different numbers of ranks get the
 * fallback for every request. Host identity: hostname and boot id, or SYMMAR_HOST_ID.
 */
symmarResult_t symmarCommInitMpi(symmarComm_t* comm, MPI_Comm mpi_comm, const symmarConfig_t* config);

#ifdef __cplusplus
}
#endif
#endif  // SYMMAR_SYMMAR_MPI_H_
