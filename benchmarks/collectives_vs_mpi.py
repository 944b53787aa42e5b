#!/usr/bin/env python3
"""symmar's reduce-scatter and all-gather (or allreduce) against Open MPI's, side by side.

Runs `mpirun -np N symmar_perf -C <collective> -A oneshot,mpi` several times (the algorithms
interleaved within each run, so all see the same moments of a drifting machine), with caller
buffers and with --symmetric send buffers (symmarMemAlloc: peers read them in place), and prints
per size the median time of each and the ratio mpi / symmar, with every run's ratio: this kind of
machine runs some processes 2-3x slower than others, and one median hides which runs were which.
--algos names symmar's algorithms to compare (each gets its columns; mpi is always the baseline).

    python3 benchmarks/collectives_vs_mpi.py [--build build] [--np 2] [--runs 5] [--min 8] [--max 64M]
        [--collectives reducescatter,allgather] [--dtype float32] [--algos oneshot,lamport]
        [--caller-only] [--iters 20] [--hot] [--huge-pages]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run_once(args, collective, symmetric, path):
    cmd = ["mpirun", "-np", str(args.np), "-x", "SYMMAR_HEAP_BYTES",
           os.path.join(args.build, "benchmarks", "symmar_perf"), "-C", collective, "-A", args.algos + ",mpi",
           "-b", args.min, "-e", args.max, "-f", "4", "-n", str(args.iters), "-w", "5", "-d", args.dtype, "-J", path]
    if symmetric:
        cmd.append("--symmetric")
    if args.hot:
        cmd.append("--hot")
    if args.huge_pages:
        cmd.append("--huge-pages")
    env = dict(os.environ, SYMMAR_HEAP_BYTES="512M", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(path) as f:
        return json.load(f)["results"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--min", default="8")
    ap.add_argument("--max", default="64M")
    ap.add_argument("--algos", default="oneshot")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--caller-only", action="store_true", help="skip the runs with symmetric send buffers")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--collectives", default="reducescatter,allgather")
    ap.add_argument("--hot", action="store_true",
                    help="every rank rewrites its send buffer before each call (symmar_perf --hot)")
    ap.add_argument("--huge-pages", action="store_true",
                    help="buffers in transparent huge pages (symmar_perf --huge-pages)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for collective in args.collectives.split(","):
            for symmetric in (False,) if args.caller_only else (False, True):
                runs = [run_once(args, collective, symmetric, os.path.join(tmp, "%d.json" % i))
                        for i in range(args.runs)]
                algos = args.algos.split(",")
                print("\n%s, %d ranks, %s, %s send buffers%s%s, %d runs" % (
                    collective, args.np, args.dtype, "symmetric" if symmetric else "caller",
                    " rewritten before each call" if args.hot else "",
                    " in huge pages" if args.huge_pages else "", args.runs))
                print("%10s %12s" % ("bytes", "mpi us") +
                      "".join(" %12s %8s   %-*s" % (a + " us", "mpi/" + a[:4], 5 * args.runs, "per run")
                              for a in algos))
                for size in sorted({r["bytes"] for r in runs[0]}):
                    def times(algo):  # None where an algorithm does not serve this size (lamport's cap)
                        found = [[r["time_us"] for r in run if r["bytes"] == size and r["algo"] == algo]
                                 for run in runs]
                        return [t[0] for t in found] if all(found) else None
                    mpi = times("mpi")
                    line = "%10d %12.2f" % (size, statistics.median(mpi))
                    for algo in algos:
                        sym = times(algo)
                        if sym is None:
                            line += " %12s %8s   %-*s" % ("-", "-", 5 * args.runs, "not served")
                            continue
                        per_run = " ".join("%.2f" % (m / s) for s, m in zip(sym, mpi))
                        line += " %12.2f %8.2f   %s" % (statistics.median(sym),
                                                         statistics.median(mpi) / statistics.median(sym), per_run)
                    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
