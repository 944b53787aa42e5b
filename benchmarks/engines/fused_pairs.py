"""The fused allreduce + residual add + RMSNorm and the plain allreduce through symmar's torch ops,
eager, in one fresh pair of rank processes after another (2 ranks, rank r bound to CPU r, one
thread each, float32 rows of 4096). On the 2-core VM of docs/performance/ a pair of processes keeps
the speed it starts with: most pairs run every call at the usual cost, some run them all slower,
and the fused two-shot (2 and 8 rows) suffered most there. One line per pair, us per call (median
of 5 rounds of 200 calls, rank 0):

    fused2 5.8 p2one 14.1 p2two 13.8 p8one 24.4 p8two 25.5 fused1 4.8 fused8 14.5 ar32K 4.2 ...

fusedN: the in-place op (torch.ops.symmar.all_reduce_add_rms_norm_, planned form) on N rows;
pNone / pNtwo: the binding's call with the one-shot or two-shot form forced (about 9 us of Python
more); arNK: the in-place allreduce of N KiB of zeros (ar16Kbf: bfloat16).

    python benchmarks/engines/fused_pairs.py [--pairs 8]

Run it with the vLLM venv's torch (SYMMAR_LIBRARY naming a build made against it, as the engine
benchmarks do) so the ops run their compiled kernels.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
sys.path.insert(0, HERE)


def rank_main(rank, store):
    import torch
    import torch.distributed as dist

    from allreduce_pairs import bound_pair_comm

    comm, h = bound_pair_comm(rank, store)
    g = torch.Generator().manual_seed(rank)
    rows = {n: (torch.randn(n, 4096, generator=g), torch.randn(n, 4096, generator=g)) for n in (1, 2, 8)}
    w = torch.rand(4096, generator=g) + 0.5
    zeros = {"ar32K": torch.zeros(2, 4096), "ar64K": torch.zeros(4, 4096),
             "ar16Kbf": torch.zeros(2, 4096, dtype=torch.bfloat16)}

    def fused(n):
        x, res = rows[n]
        return lambda: torch.ops.symmar.all_reduce_add_rms_norm_(x, res, w, h, 1e-6)

    def forced(n, algo):
        x, res = rows[n]
        return lambda: comm.all_reduce_add_rms_norm(x, w, 1e-6, residual=res, residual_out=res, norm_out=x, algo=algo)

    cases = {"fused2": fused(2), "p2one": forced(2, "oneshot"), "p2two": forced(2, "twoshot"),
             "p8one": forced(8, "oneshot"), "p8two": forced(8, "twoshot"), "fused1": fused(1), "fused8": fused(8)}
    for name, z in zeros.items():
        cases[name] = lambda z=z: torch.ops.symmar.all_reduce_(z, h)
    times = {name: [] for name in cases}
    for _ in range(5):
        for name, call in cases.items():
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(200):
                call()
            times[name].append((time.perf_counter() - t0) / 200 * 1e6)
    if rank == 0:
        print(" ".join("%s %.1f" % (name, statistics.median(t)) for name, t in times.items()), flush=True)
    comm.close()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pairs", type=int, default=8)
    args = p.parse_args()
    import torch.multiprocessing as tmp
    with tempfile.TemporaryDirectory() as d:
        for i in range(args.pairs):
            tmp.spawn(rank_main, args=(os.path.join(d, "store%d" % i),), nprocs=2, join=True)


if __name__ == "__main__":
    main()
