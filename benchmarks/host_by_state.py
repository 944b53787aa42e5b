"""symmar_perf on the host, run after run, each run between two readings of the machine's handoff
state (machine_state.py), so that results can be grouped by the state they ran in. On a VM whose
two vCPUs the host moves between a fast and a slow handoff from minute to minute, a comparison of
two forms means something only within one state; this prints one line per pass:

    probe 28.9/29.1 | stream=1 39.2 139.9 36.0 131.2 | default 16.2 58.0 14.1 47.1

(the probe's us before and after the pass, then each variant's median us per size and algorithm, in
symmar_perf's order: every size of the first algorithm, then the next).

    python3 benchmarks/host_by_state.py [--seconds 120] [--variants default,stream=1,stream=0]
        [--sizes 256K,1M] [--algos oneshot,twoshot] [--dtype float32] [--iters 100] [--in-place]

A variant is `default` or NAME=VALUE for the SYMMAR_HOST_<NAME> environment variable (stream,
staging_ring, spin, ...). Runs 2 ranks under mpirun (build with MPI; run from the checkout).
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine_state import handoff_us  # noqa: E402

PERF = os.path.join(os.path.dirname(HERE), "build", "benchmarks", "symmar_perf")


def run_perf(args, variant):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    forward = []
    if variant != "default":
        name, value = variant.split("=", 1)
        key = "SYMMAR_HOST_" + name.upper()
        env[key] = value
        forward = ["-x", key]
    lo, hi = args.sizes.split(",")[0], args.sizes.split(",")[-1]
    cmd = ["mpirun"] + forward + ["-np", "2", args.perf, "-b", lo, "-e", hi, "-f", str(args.factor), "-n",
                                  str(args.iters), "-w", "10", "-A", args.algos, "-d", args.dtype]
    cmd.append("--in-place" if args.in_place else "--hot")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        return "failed (%d): %s" % (out.returncode, out.stderr.strip().splitlines()[-1:] or "")
    times = [line.split()[4] for line in out.stdout.splitlines() if line.split() and line.split()[0].isdigit()]
    return " ".join(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--variants", default="default,stream=1")
    p.add_argument("--sizes", default="256K,1M", help="smallest,largest (symmar_perf -b, -e)")
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--algos", default="oneshot,twoshot")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--in-place", action="store_true", help="symmar_perf --in-place (else --hot)")
    p.add_argument("--perf", default=PERF)
    args = p.parse_args()
    variants = args.variants.split(",")
    print("# %s, %s, %s, %s; us per call (median of %d) by variant" %
          (args.algos, args.dtype, args.sizes, "in place" if args.in_place else "--hot", args.iters), flush=True)
    end = time.time() + args.seconds
    while time.time() < end:
        before = handoff_us()
        cells = ["%s %s" % (v, run_perf(args, v)) for v in variants]
        print("probe %s/%s | %s" % (before, handoff_us(), " | ".join(cells)), flush=True)


if __name__ == "__main__":
    main()
