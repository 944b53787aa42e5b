// libsymmar_mpi's inter-host engine: the ranks of a comm that share a local index, one per host,
// in a communicator split from the comm's MPI communicator, exchanging records point to point
// with a bounded wait. Built against the public C API only.
#pragma once
#include <mpi.h>

#include "symmar/symmar.h"

namespace symmar_mpi {

/// Fails with code, the text naming what failed and, for an MPI error, MPI's own words for it
/// (symmarReportError: the caller's comm shows it in symmarGetLastError).
symmarResult_t mpiFailure(symmarResult_t code, const char* what, int mpi_error = MPI_SUCCESS);

/// Collective over mpi_comm (the comm's own duplicate): on a comm spanning hosts, splits mpi_comm
/// by local index and installs the exchange with symmarCommSetInterHost. A comm on one host is left
/// as it is; so is one whose hosts have different numbers of ranks (it stays flat, the fallback
/// serving every call). Other failures are returned.
symmarResult_t installInterHost(symmarComm_t comm, MPI_Comm mpi_comm);

}  // namespace symmar_mpi
