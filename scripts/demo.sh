#!/usr/bin/env bash
# The first thing to run: builds symmar if needed, then an allreduce sweep across local processes
# (host backend when there is no GPU), auto against MPI_Allreduce, printed as a table.
#   bash scripts/demo.sh [ranks] [extra symmar_perf flags]
set -euo pipefail
cd "$(dirname "$0")/.."
ranks="${1:-2}"
shift || true
[ -x build/benchmarks/symmar_perf ] || bash scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
exec mpirun --timeout 300 -np "$ranks" build/benchmarks/symmar_perf -b 4 -e 64M -f 4 -n 20 -w 5 -c 1 -A auto,mpi "$@"
