"""symmar's host allreduce against vLLM's CPU shared-memory allreduce, in place, in one fresh pair of
rank processes after another (2 ranks, rank r bound to CPU r, one thread each, float32 zeros). On
the 2-core VM of docs/performance/ a pair keeps the state it starts in: in most pairs plain stores
hand data between the CPUs fast and symmar leads; in the others (about a third of them) symmar's
staging writes stream, as vLLM's always do. One line per pair, us per call (median of 5 rounds of
100 calls, rank 0), per size:

    {} 256K op 16.2 one 19.4 two 18.3 auto 14.0 vll 29.3 | 1024K op 47.0 ...

op: torch.ops.symmar.all_reduce_; one / two / auto: the binding's Comm.all_reduce_ with that form;
vll: vLLM's op (torch.ops._C.shm_allreduce). --variants takes ;-separated sets of NAME=VALUE
settings, pairs taking them in turn (SYMMAR_LIBRARY=... compares two builds):

    python benchmarks/engines/allreduce_pairs.py [--pairs 8] [--variants "A=1;A=2"] [--sizes 64K,256K,1M]

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

SIZES = (256 << 10, 1 << 20)


def bound_pair_comm(rank, store):
    """This rank of a pair bound to CPU `rank`, one torch thread, a gloo group from the file store and
    a symmar comm on it: (comm, its torch.ops handle)."""
    import torch
    import torch.distributed as dist

    import symmar
    from symmar import ops

    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
    comm = symmar.Comm.from_process_group(None, device="cpu")
    return comm, ops.handle(comm)


def rank_main(rank, store, tag, env, sizes=SIZES):
    os.environ.update(env)  # before symmar loads: SYMMAR_LIBRARY and settings read at creation
    import torch
    import torch.distributed as dist

    from compare_cpu_allreduce import vllm_engine

    comm, h = bound_pair_comm(rank, store)
    vl, _ = vllm_engine(torch, rank, 2, 1, tag)
    variants = {"op": lambda x: torch.ops.symmar.all_reduce_(x, h),
                "one": lambda x: comm.all_reduce_(x, algo="oneshot"),
                "two": lambda x: comm.all_reduce_(x, algo="twoshot"),
                "auto": lambda x: comm.all_reduce_(x)}
    if vl is not None:
        variants["vll"] = vl
    times = {(n, s): [] for s in sizes for n in variants}
    bufs = {s: torch.zeros(s // 4) for s in sizes}
    for _ in range(5):
        for s in sizes:
            for n, call in variants.items():
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(100):
                    call(bufs[s])
                times[(n, s)].append((time.perf_counter() - t0) / 100 * 1e6)
    if rank == 0:
        print(env, " | ".join("%dK " % (s >> 10) + " ".join("%s %.1f" % (n, statistics.median(times[(n, s)]))
                                                           for n in variants) for s in sizes), flush=True)
    comm.close()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pairs", type=int, default=8)
    p.add_argument("--variants", default="", help="';'-separated NAME=VALUE[,NAME=VALUE] sets, taken in turn")
    p.add_argument("--sizes", default="256K,1M", help="bytes a call, e.g. 64K,256K,1M")
    args = p.parse_args()
    from compare_cpu_allreduce import parse_size
    sizes = tuple(parse_size(t) for t in args.sizes.split(","))
    if any(s <= 0 or s % 4 for s in sizes):
        raise SystemExit("--sizes: positive multiples of 4 bytes (float32 tensors)")
    envs = [dict(e.split("=", 1) for e in v.split(",")) if v else {} for v in args.variants.split(";")]
    import torch.multiprocessing as tmp
    with tempfile.TemporaryDirectory() as d:
        for i in range(args.pairs):
            tag = "%d-%d" % (os.getpid(), i)
            tmp.spawn(rank_main, args=(os.path.join(d, "store%d" % i), tag, envs[i % len(envs)], sizes), nprocs=2,
                      join=True)


if __name__ == "__main__":
    main()
