#!/usr/bin/env bash
# Runs one rank of an MPI job as if the job's ranks sat on hosts of N ranks each: sets
# SYMMAR_HOST_ID from the rank (Open MPI, MPICH/PMI or PMIx variables), then runs the command.
# Lets one machine exercise and measure the hierarchical path, e.g.
#   mpirun -np 4 scripts/sim-hosts.sh 2 build/benchmarks/symmar_perf --device cpu -A oneshot,twoshot,mpi
set -eu
if [ $# -lt 2 ] || ! [ "$1" -ge 1 ] 2>/dev/null; then
  echo "usage: $0 RANKS_PER_HOST COMMAND [ARGS...]" >&2
  exit 2
fi
per_host=$1
shift
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-}}}
if [ -z "$rank" ]; then
  echo "$0: no MPI rank in the environment (run under mpirun)" >&2
  exit 2
fi
export SYMMAR_HOST_ID="simulated-host-$((rank / per_host))"
exec "$@"
