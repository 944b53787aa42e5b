"""Run under mpirun by test_mpi.py: `mpirun -np N python mpi_ranks.py MODE`. Rank 0 prints one
line "RESULT <json list, one entry per rank>" (gathered, so no two ranks' lines interleave);
test_mpi.py checks it. Modes: compare, timeout."""
import json
import os
import sys
import tempfile
import time

import numpy as np
from mpi4py import MPI

import symmar
import symmar.mpi

TIMEOUT_MS = 20000
# A host row at world 4 that starts with the mpi fallback (the built-in rows no longer do), so the
# comms' descriptions and plans show whether they have it.
MPI_FIRST_ROW = {"rows": [{"arch": "host", "link": "host", "world": 4, "source": "test: mpi first",
                           "algos": [{"algo": "mpi", "max_bytes": "1K"}, {"algo": "oneshot", "max_bytes": "64K"},
                                     {"algo": "twoshot", "max_bytes": "unbounded"}]}]}


def compare(world):
    """symmar (both bootstraps) against MPI.Allreduce: max/min exact; sums exact at world 2 (a+b is
    rounded once either way), within (world-1) * eps * sum|x| of float64 and of MPI otherwise."""
    failures, modes = [], {}
    eps = {"float32": 2.0 ** -23, "float64": 2.0 ** -52, "int32": 0.0}
    mpi_ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
    fd, table = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(MPI_FIRST_ROW, f)
    for fallback in (False, "auto"):
        comm = symmar.mpi.from_mpi(world, fallback=fallback, timeout_ms=TIMEOUT_MS, table_file=table)
        desc = comm.describe()
        modes[str(fallback)] = {"describe": desc, "plan16": comm.plan(16, "float32")}
        seed = 0
        for count in (1, 1031, 65537):
            for dtype in ("float32", "float64", "int32"):
                for op in ("sum", "max", "min"):
                    seed += 1
                    stack = np.stack([np.random.default_rng(seed * 7 + r).standard_normal(count) * 8
                                      for r in range(world.size)])
                    if dtype == "int32":
                        stack = np.round(stack)
                    x = stack[world.rank].astype(dtype)
                    ours = comm.all_reduce(x, op=op)
                    theirs = np.empty_like(x)
                    world.Allreduce(x, theirs, op=mpi_ops[op])
                    case = "%s %s %s count=%d" % (fallback, dtype, op, count)
                    exact = op != "sum" or world.size == 2 or dtype == "int32"
                    if exact and not np.array_equal(ours, theirs):
                        failures.append(case + ": differs from MPI_Allreduce")
                    ref = {"sum": stack.sum(0), "max": stack.max(0), "min": stack.min(0)}[op]
                    scale = np.abs(stack.astype(dtype).astype(np.float64)).sum(0)
                    bound = max(world.size - 1, 1) * eps[dtype] * scale
                    if not (np.abs(ours - ref.astype(dtype).astype(np.float64) if op != "sum" else
                                   ours.astype(np.float64) - stack.astype(dtype).astype(np.float64).sum(0))
                            <= bound).all():
                        failures.append(case + ": beyond the float64 tolerance")
                    if not (np.abs(ours.astype(np.float64) - theirs.astype(np.float64)) <= 2 * bound).all():
                        failures.append(case + ": beyond the tolerance to MPI")
        comm.close()
    return {"failures": failures, "modes": modes}


def timeout(world):
    """Rank 1 never creates the comm: rank 0's from_mpi must give up at its timeout. Afterwards
    rank 1 posts the matching allgather, so the abandoned request completes and MPI ends cleanly."""
    boot = world.Dup()
    result = {}
    if world.rank == 0:
        start = time.monotonic()
        try:
            symmar.mpi.from_mpi(boot, fallback=False, timeout_ms=1500)
            result["error"] = None
        except symmar.SymmarError as e:
            result["error"] = e.name
            result["cause"] = type(e.__cause__).__name__
        result["seconds"] = time.monotonic() - start
        req, mine, _ = symmar.mpi._abandoned[-1]
        world.send(len(mine), dest=1)
        req.Wait()
    else:
        nbytes = world.recv(source=0)
        sink = bytearray(nbytes * boot.size)
        # a nonblocking collective matches only nonblocking ones (MPI 3.0, 5.12)
        boot.Iallgather([bytearray(nbytes), MPI.BYTE], [sink, MPI.BYTE]).Wait()
    boot.Free()
    return result


if __name__ == "__main__":
    world = MPI.COMM_WORLD
    out = {"compare": compare, "timeout": timeout}[sys.argv[1]](world)
    everyone = world.gather(out, root=0)
    if world.rank == 0:
        print("RESULT %s" % json.dumps(everyone), flush=True)
