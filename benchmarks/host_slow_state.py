"""The host two-shot's slow state, process by process: each run starts a fresh pair of ranks (two
processes, one core each, a torch gloo group and symmar's communicator over it), calls the in-place
allreduce of one tensor back to back for a while, and prints the slower rank's median call. Runs
take each SYMMAR_HOST_STREAM value in turn (0 plain stores into staging, 1 streaming stores, 2 the
timed choice), so every mode meets the machine's states alike.

On a machine whose cores sometimes take each other's cache lines slowly (a VM whose vCPUs the host
places apart), some runs with plain stores are several times slower than the rest, steadily for
their whole length: the slow state. The summary gives, per mode, the runs' medians and how many
ran at more than 3x the fastest run of any mode.

    python benchmarks/host_slow_state.py --size 256K --runs 6 --seconds 1.5
Needs torch and symmar (python/ on PYTHONPATH, SYMMAR_LIBRARY naming libsymmar.so).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def parse_size(text):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * scale[text[-1].upper()] if text[-1].upper() in scale else int(text)


def rank_main(rank, store, size, seconds, out):
    import torch
    import torch.distributed as dist
    os.sched_setaffinity(0, {rank % os.cpu_count()})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    from symmar.integrations import SymmarCommunicator
    comm = SymmarCommunicator(dist.group.WORLD, "cpu")
    t = torch.zeros(size // 4)
    if comm.try_all_reduce_(t) is None:
        raise SystemExit("symmar does not take %d bytes here" % size)
    dist.barrier()
    blocks = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        for _ in range(20):
            comm.try_all_reduce_(t)
        blocks.append((time.perf_counter() - t0) / 20 * 1e6)
    with open(out, "w") as f:
        f.write("%f\n" % statistics.median(blocks))
    comm.close()
    dist.destroy_process_group()


def one_run(size, seconds, mode):
    """The slower rank's median us a call in a fresh pair of ranks with SYMMAR_HOST_STREAM=mode."""
    with tempfile.TemporaryDirectory() as work:
        env = dict(os.environ, SYMMAR_HOST_STREAM=str(mode))
        procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--store", os.path.join(work, "store"),
                                   "--size", str(size), "--seconds", str(seconds), "--out",
                                   os.path.join(work, "%d.txt" % r)], env=env) for r in range(2)]
        if any(p.wait(timeout=120 + 2 * seconds) != 0 for p in procs):
            raise SystemExit("a rank failed")
        return max(float(open(os.path.join(work, "%d.txt" % r)).read()) for r in range(2))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="256K", help="bytes of float32 a call (K/M/G suffixes)")
    p.add_argument("--runs", type=int, default=6, help="fresh pairs of ranks per mode")
    p.add_argument("--seconds", type=float, default=1.5, help="calls back to back per run")
    p.add_argument("--modes", default="0,2,1", help="SYMMAR_HOST_STREAM values, taken in turn")
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    p.add_argument("--store", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    size = parse_size(args.size)
    if args.rank is not None:
        return rank_main(args.rank, args.store, size, args.seconds, args.out)
    modes = [int(m) for m in args.modes.split(",")]
    names = {0: "plain", 1: "stream", 2: "timed"}
    got = {m: [] for m in modes}
    for run in range(args.runs):
        for m in modes:
            us = one_run(size, args.seconds, m)
            got[m].append(us)
            print("run %d SYMMAR_HOST_STREAM=%d (%s): %.1f us a call" % (run, m, names[m], us), flush=True)
    fastest = min(min(v) for v in got.values())
    print("# %d bytes float32, 2 ranks, %d runs of %.1f s per mode; us a call, the slower rank's median per run"
          % (size, args.runs, args.seconds))
    for m in modes:
        v = got[m]
        print("# %-6s median %.1f [%.1f-%.1f], runs over 3x the fastest run: %d of %d"
              % (names[m], statistics.median(v), min(v), max(v), sum(x > 3 * fastest for x in v), len(v)))


if __name__ == "__main__":
    main()
