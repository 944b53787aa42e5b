"""symmar's host allreduce against the CPU allreduce engines use, side by side in one run:
torch.distributed over gloo, and DeepSpeed's shared-memory op (deepspeed.comm.inference_all_reduce)
where DeepSpeed is installed. Each size runs every implementation in turn, round after round (a
round: a barrier, then `--iters` calls back to back), so the machine's drift hits all of them
alike; the table gives the median over rounds of the time per call, of the slowest rank.

    python benchmarks/compare_cpu_allreduce.py [--ranks 2] [--dtypes float32,bfloat16,float16]
        [--min 4K] [--max 64M] [--factor 4] [--iters 20] [--rounds 5] [--threads N]

Each rank gets --threads OpenMP/torch threads (default: the CPUs divided among the ranks), as an
engine runs one rank per set of cores. DeepSpeed's op reduces in OpenMP loops: with more threads
than cores, spinning OpenMP workers of both ranks starve each other and its calls take milliseconds.

DeepSpeed takes its shared-memory path only where its op was built (torch.ops.deepspeed has
inference_all_reduce_: AVX-512 machines for bf16/fp16 in the releases measured); otherwise its
inference_all_reduce is gloo's allreduce, and the table says which one ran. Without DeepSpeed the
column says that it is not installed. Needs torch; run from the checkout (or with symmar installed).
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def deepspeed_engine(torch):
    """(callable or None, label): DeepSpeed's inference allreduce and which path it takes."""
    try:
        import deepspeed
        import deepspeed.comm as ds_comm
    except Exception as e:  # noqa: BLE001  any import failure means: not usable here
        return None, "not installed (%s)" % type(e).__name__
    try:
        deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
    except Exception as e:  # noqa: BLE001
        return None, "init failed: %s" % e
    shm = hasattr(torch.ops, "deepspeed") and hasattr(torch.ops.deepspeed, "inference_all_reduce_")
    return (lambda t: ds_comm.inference_all_reduce(t)), ("shm op" if shm else "gloo fallback (no shm op built)")


def rank_main(rank, args, store, out):
    import torch
    import torch.distributed as dist

    import symmar
    import symmar.torch  # noqa: F401

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(args.ranks), LOCAL_RANK=str(rank), LOCAL_SIZE=str(args.ranks),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=args.ranks)
    comm = symmar.Comm.from_process_group(None, device="cpu")
    ds, ds_label = deepspeed_engine(torch)
    engines = {"symmar": comm.all_reduce_, "gloo": lambda t: dist.all_reduce(t)}
    if ds is not None:
        engines["deepspeed"] = ds
    rows = []
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        size = args.min
        while size <= args.max:
            count = max(1, size // torch.tensor([], dtype=dtype).element_size())
            x = torch.randint(-4, 5, (count,), generator=torch.Generator().manual_seed(rank)).to(dtype)
            want = x.clone()
            dist.all_reduce(want)
            for name, run in engines.items():  # each must agree with gloo before it is timed
                t = x.clone()
                run(t)
                if not torch.equal(t, want):
                    raise SystemExit("%s gave a wrong result (%s, %d bytes)" % (name, dtype_name, size))
            # Timed on zeros, which stay zeros (no overflow, no NaN path), `iters` calls back to back
            # after a barrier, as nccl-tests does: a barrier per call would time the barrier's skew.
            z = torch.zeros(count, dtype=dtype)
            times = {name: [] for name in engines}
            for rnd in range(args.warmup + args.rounds):
                for name, run in engines.items():
                    dist.barrier()
                    t0 = time.perf_counter()
                    for _ in range(args.iters):
                        run(z)
                    if rnd >= args.warmup:
                        times[name].append((time.perf_counter() - t0) * 1e6 / args.iters)
            rows.append((dtype_name, size, {n: statistics.median(v) for n, v in times.items()}))
            size *= args.factor
    torch.save({"rows": rows, "deepspeed": ds_label}, os.path.join(out, "%d.pt" % rank))
    comm.close()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--dtypes", default="float32,bfloat16,float16")
    p.add_argument("--min", type=parse_size, default=4 << 10)
    p.add_argument("--max", type=parse_size, default=64 << 20)
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--port", type=int, default=29517)
    p.add_argument("--threads", type=int, default=0, help="threads per rank (0: the CPUs / ranks)")
    args = p.parse_args()
    if args.threads <= 0:
        args.threads = max(1, (os.cpu_count() or 1) // args.ranks)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # read when each rank's OpenMP runtime starts
    import torch
    import torch.multiprocessing as tmp

    with tempfile.TemporaryDirectory() as out:
        tmp.spawn(rank_main, args=(args, os.path.join(out, "store"), out), nprocs=args.ranks, join=True)
        results = [torch.load(os.path.join(out, "%d.pt" % r)) for r in range(args.ranks)]
    print("# %d ranks, %d threads each; us per call (median of %d rounds of %d calls), slowest rank; DeepSpeed: %s"
          % (args.ranks, args.threads, args.rounds, args.iters, results[0]["deepspeed"]))
    names = list(results[0]["rows"][0][2].keys())
    print("# %-9s %10s " % ("dtype", "bytes") + "".join("%12s" % n for n in names) +
          "".join("%14s" % ("%s/symmar" % n) for n in names if n != "symmar"))
    for i, (dtype_name, size, _) in enumerate(results[0]["rows"]):
        slowest = {n: max(r["rows"][i][2][n] for r in results) for n in names}
        print("  %-9s %10d " % (dtype_name, size) + "".join("%12.1f" % slowest[n] for n in names) +
              "".join("%13.2fx" % (slowest[n] / slowest["symmar"]) for n in names if n != "symmar"))


if __name__ == "__main__":
    main()
