#!/usr/bin/env python3
"""Each dtype's allreduce bus bandwidth per byte against float32's, from alternating runs.

Runs `mpirun -np N symmar_perf -d <dtype>` for float32 and each other dtype in turn, several rounds
(a round runs every dtype once, back to back), and prints per size the median bus bandwidth of
each dtype and the median over rounds of its ratio to float32 within the same round. Pairing by
round matters on machines whose speed drifts by 2x over minutes: a ratio of two medians taken at
different moments mixes the drift into the dtype's cost.

    python3 benchmarks/dtype_per_byte.py [--build build] [--np 2] [--rounds 5] [--min 4K] [--max 64M]
        [--dtypes bfloat16,float16] [--algo auto] [--iters 20]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run_once(args, dtype, path):
    cmd = ["mpirun", "-np", str(args.np), "-x", "SYMMAR_HEAP_BYTES",
           os.path.join(args.build, "benchmarks", "symmar_perf"), "-A", args.algo, "-d", dtype,
           "-b", args.min, "-e", args.max, "-f", "4", "-n", str(args.iters), "-w", "5", "-J", path]
    env = dict(os.environ, SYMMAR_HEAP_BYTES="512M", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(path) as f:
        results = json.load(f)["results"]
    if any(r["wrong"] for r in results):
        sys.exit("symmar_perf reported wrong results for %s" % dtype)
    return {r["bytes"]: r["busbw_gbs"] for r in results}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min", default="4K")
    ap.add_argument("--max", default="64M")
    ap.add_argument("--dtypes", default="bfloat16,float16")
    ap.add_argument("--algo", default="auto")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    dtypes = ["float32"] + args.dtypes.split(",")
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            rounds.append({d: run_once(args, d, os.path.join(tmp, "%d-%s.json" % (r, d))) for d in dtypes})
    print("%d ranks, algorithm %s, %d rounds; busbw GB/s (median), ratio to float32 (median of per-round ratios)"
          % (args.np, args.algo, args.rounds))
    print("%10s" % "bytes" + "".join(" %10s" % d for d in dtypes) +
          "".join(" %9s   %-*s" % (d[:5] + "/f32", 5 * args.rounds, "per round") for d in dtypes[1:]))
    for size in sorted(rounds[0]["float32"]):
        line = "%10d" % size + "".join(" %10.2f" % statistics.median(rd[d][size] for rd in rounds) for d in dtypes)
        for d in dtypes[1:]:
            ratios = [rd[d][size] / rd["float32"][size] for rd in rounds]
            line += " %9.2f   %s" % (statistics.median(ratios), " ".join("%.2f" % x for x in ratios))
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
