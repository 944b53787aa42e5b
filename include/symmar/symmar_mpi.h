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
 * over MPI, with MPI_Allreduce (on a duplicate of mpi_comm) as the symmarAlgoMpi fallback. Ranks
 * on different hosts share no memory: the planner then picks `mpi` for every request.
 */
symmarResult_t symmarCommInitMpi(symmarComm_t* comm, MPI_Comm mpi_comm, const symmarConfig_t* config);

#ifdef __cplusplus
}
#endif
#endif  // SYMMAR_SYMMAR_MPI_H_
