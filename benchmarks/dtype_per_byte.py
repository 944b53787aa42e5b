#!/usr/bin/env python3
"""Each dtype's allreduce bus bandwidth per byte against float32's, interleaved in each run.

Runs `mpirun -np N symmar_perf -d float32,<dtypes>` several times (the dtypes' calls interleaved
iteration by iteration within a run, so all see the same moments of the machine), and prints per
size the median bus bandwidth of each dtype and the median over runs of its ratio to float32 in
the same run, with every run's ratio. Separate runs per dtype do not do: on machines whose speed
drifts by 2x over minutes, and whose process launches land in different states, a ratio of runs
taken at different moments mixes that into the dtype's cost.

    python3 benchmarks/dtype_per_byte.py [--build build] [--np 2] [--runs 5] [--min 4K] [--max 64M]
        [--dtypes bfloat16,float16] [--algo auto] [--iters 20]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run_once(args, dtypes, path):
    cmd = ["mpirun", "-np", str(args.np), "-x", "SYMMAR_HEAP_BYTES",
           os.path.join(args.build, "benchmarks", "symmar_perf"), "-A", args.algo, "-d", ",".join(dtypes),
           "-b", args.min, "-e", args.max, "-f", "4", "-n", str(args.iters), "-w", "5", "-J", path]
    env = dict(os.environ, SYMMAR_HEAP_BYTES="512M", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(path) as f:
        results = json.load(f)["results"]
    if any(r["wrong"] for r in results):
        sys.exit("symmar_perf reported wrong results")
    names = {"float32": "float", "float16": "half"}  # symmar_perf writes nccl-tests' names
    return {d: {r["bytes"]: r["busbw_gbs"] for r in results if r["dtype"] == names.get(d, d)} for d in dtypes}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--min", default="4K")
    ap.add_argument("--max", default="64M")
    ap.add_argument("--dtypes", default="bfloat16,float16")
    ap.add_argument("--algo", default="auto")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    dtypes = ["float32"] + args.dtypes.split(",")
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.runs):
            rounds.append(run_once(args, dtypes, os.path.join(tmp, "%d.json" % r)))
    print("%d ranks, algorithm %s, %d runs; busbw GB/s (median), ratio to float32 (median of per-run ratios)"
          % (args.np, args.algo, args.runs))
    print("%10s" % "bytes" + "".join(" %10s" % d for d in dtypes) +
          "".join(" %9s   %-*s" % (d[:5] + "/f32", 5 * args.runs, "per run") for d in dtypes[1:]))
    for size in sorted(rounds[0]["float32"]):
        line = "%10d" % size + "".join(" %10.2f" % statistics.median(rd[d][size] for rd in rounds) for d in dtypes)
        for d in dtypes[1:]:
            ratios = [rd[d][size] / rd["float32"][size] for rd in rounds]
            line += " %9.2f   %s" % (statistics.median(ratios), " ".join("%.2f" % x for x in ratios))
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
