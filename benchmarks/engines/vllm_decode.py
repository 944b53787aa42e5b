"""vLLM's tensor-parallel allreduce against symmar's, inside one engine: vLLM on CPU at
tensor-parallel size 2 with the symmar plugin loaded (SYMMAR_VLLM=1), a random Llama-style model
whose hidden size makes the allreduce matter (hidden 4096, 2 layers, made here), and the plugin's
switch_path sending every worker's allreduce to symmar or to vLLM's own shared-memory path between
runs, interleaved round by round, so that both paths meet the same machine.

It gives, for each path:
- the per-call cost of the tensor-parallel allreduce inside the workers, the primary figure: each
  worker's own communicator (vLLM's CpuCommunicator, with the plugin's patch choosing the path)
  called back to back after a barrier of its group and one untimed call, at the message sizes a
  decode step of each batch makes (hidden x batch x dtype) and more, 1 KiB to 1 MiB; the slower
  worker's median of 5 blocks;
- the same per-call cost with the calls traced into a graph, as vLLM's default (compiled) mode
  runs them: the op alone, without the Python of the communicators around it;
- the per-call cost of the all_gather along the last dim that gathers the logits (vocabulary-
  parallel), a [1, n] tensor per rank of 1 KiB to 256 KiB, measured the same way;
- decode tokens/s per batch: batch x (N - 1) tokens over the time of a run of N tokens less a run
  of 1; besides each path's median, the median of symmar's rate over vLLM's within each round (the
  two paths run one after the other, which goes first alternating by round);
- time in allreduce per decode step: each call of the communicator's all_reduce timed while the
  engine runs, which includes the wait for the slower worker (on 2 cores, most of it).
Medians over rounds with [min-max], eager mode (the switch takes effect at once; compiled mode
would recompile on it).

    python benchmarks/engines/vllm_decode.py [--batches 1,4,16,64] [--dtype bfloat16]
        [--rounds 3] [--tokens 33] [--model DIR] [--decode-only]

Needs vLLM (scripts/install-vllm.sh) and symmar's entry point registered (a pip install of the
wheel, or run through benchmarks/engines/run_vllm_decode.sh, which registers the checkout's and
runs bfloat16 and float32). On 2 cores the engine's four processes contend: the per-call costs are
the primary figure.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from machine_state import handoff_us  # noqa: E402


def make_model(path):
    """Hidden 4096, 2 layers, 32 heads (8 KV), MLP 8192, vocabulary 2048, random (seeded)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=2048, hidden_size=4096, intermediate_size=8192, num_hidden_layers=2,
                         num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=1024,
                         tie_word_embeddings=False)
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(path)


# -- run in the workers through collective_rpc (this module's functions, run locally) --

def worker_start_timing(_self=None):
    """Wraps the (patched) CPU communicator's all_reduce with a timer: seconds per call by bytes."""
    from vllm.distributed.device_communicators.cpu_communicator import CpuCommunicator
    if getattr(CpuCommunicator, "_bench_timed", False):
        return True
    inner = CpuCommunicator.all_reduce
    times = CpuCommunicator._bench_times = {}

    def timed(self, input_):
        t0 = time.perf_counter()
        out = inner(self, input_)
        times.setdefault(input_.numel() * input_.element_size(), []).append(time.perf_counter() - t0)
        return out
    CpuCommunicator.all_reduce = timed
    CpuCommunicator._bench_inner = inner
    CpuCommunicator._bench_timed = True
    return True


def worker_call_cost(_self=None, sizes=(), dtype_name="bfloat16", iters=200, op="all_reduce", compiled=False):
    """us per call of this worker's tensor-parallel allreduce, or (op "all_gather") its all_gather
    along the last dim of a [1, n] tensor, as the logits are gathered (the path switch_path chose),
    calls back to back on zeros after a barrier of the group and one untimed call: the median of 5
    blocks, by size (of this rank's tensor). compiled: the allreduce as a graph of vLLM's
    default (compiled) mode runs it, the Python around the op traced away: 64 calls a graph
    (torch.compile, fullgraph, the eager backend, which runs the traced ops as they are), per call."""
    import torch
    import torch.distributed as dist
    from vllm.distributed.parallel_state import get_tp_group
    group = get_tp_group()
    comm = group.device_communicator
    from symmar.integrations import vllm as plugin
    saved_min = plugin.gather_min_bytes
    if op == "all_gather":
        plugin.gather_min_bytes = 0  # every size measured on the path switch_path chose

        def call(c, t):
            return type(c).all_gather(c, t, -1)
    else:
        call = type(comm)._bench_inner  # the plugin's patched all_reduce, without the timer above
    dtype = getattr(torch, dtype_name)
    elem = torch.tensor([], dtype=dtype).element_size()
    per_step = 1
    if compiled:
        # What the traced model keeps of each path: symmar's taker (its check on the traced shape,
        # then the op), or vLLM's own call into its shared-memory op; not the patch's call counters,
        # which a graph would guard on and recompile for.
        import torch._dynamo
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)  # a graph a size
        if plugin._taking[0]:
            def one(c, t):
                c._symmar_take(t)
        else:
            def one(c, t):
                c.dist_module.all_reduce(t, group=c.device_group)
        per_step = 64  # a graph call also checks its guards (on the communicator object): spread over many

        def many(c, t):
            for _ in range(64):
                one(c, t)
        call = torch.compile(many, backend="eager", fullgraph=True, dynamic=False)
    cost = {}
    for size in sizes:
        t = torch.zeros((1, max(1, size // elem)), dtype=dtype)
        for _ in range(10):
            call(comm, t)
        blocks = []
        for _ in range(5):
            dist.barrier(group=group.cpu_group)
            # One call untimed: a traced graph's first call after other Python costs about 100 us
            # more than the next (torch's, for any op: docs/performance/engines-vllm.md), which an
            # engine pays once a step, not once an allreduce.
            call(comm, t)
            t0 = time.perf_counter()
            for _ in range(iters // per_step or 1):
                call(comm, t)
            blocks.append((time.perf_counter() - t0) / ((iters // per_step or 1) * per_step) * 1e6)
        cost[str(size)] = statistics.median(blocks)
    plugin.gather_min_bytes = saved_min
    return cost


def worker_take(_self=None, take_symmar=True, reset=True):
    from symmar.integrations import vllm as plugin
    from vllm.distributed.device_communicators.cpu_communicator import CpuCommunicator
    plugin.switch_path(take_symmar)
    if reset:
        CpuCommunicator._bench_times.clear()
    return dict(plugin.calls)


def worker_times(_self=None):
    from vllm.distributed.device_communicators.cpu_communicator import CpuCommunicator
    return {str(k): list(v) for k, v in CpuCommunicator._bench_times.items()}


def run_batch(llm, batch, tokens):
    """Seconds for `tokens` tokens of `batch` prompts (greedy)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    prompts = [TokensPrompt(prompt_token_ids=[(7 * i + 3 * j) % 2000 + 1 for j in range(16)]) for i in range(batch)]
    params = SamplingParams(temperature=0.0, max_tokens=tokens, min_tokens=tokens, detokenize=False)
    t0 = time.perf_counter()
    llm.generate(prompts, params, use_tqdm=False)
    return time.perf_counter() - t0


def spread(values, digits=1):
    """median [min-max] of values, each with `digits` decimals."""
    if not values:
        return "n/a"
    return "{0:.{3}f} [{1:.{3}f}-{2:.{3}f}]".format(statistics.median(values), min(values), max(values), digits)


def bench_dtype(args, dtype):
    from vllm import LLM
    llm = LLM(model=args.model, tensor_parallel_size=2, dtype=dtype, enforce_eager=True, skip_tokenizer_init=True,
              max_model_len=512, max_num_seqs=max(args.batches), seed=0)
    llm.collective_rpc(worker_start_timing)
    rows = []
    for batch in args.batches:
        per = {path: {"rate": [], "round_rate": [], "call_us": {}, "ar_ms_per_step": []} for path in ("vllm", "symmar")}
        for rnd in range(args.warmup + args.rounds):
            # Which path goes first alternates by round: neither always follows the other.
            for path in ("vllm", "symmar") if rnd % 2 == 0 else ("symmar", "vllm"):
                llm.collective_rpc(worker_take, kwargs={"take_symmar": path == "symmar"})
                t1 = run_batch(llm, batch, 1)
                tn = run_batch(llm, batch, args.tokens)
                times = llm.collective_rpc(worker_times)
                if rnd < args.warmup:
                    continue
                # No rate from a round whose short run took longer (the machine hiccupped in it).
                rate = batch * (args.tokens - 1) / (tn - t1) if tn > t1 else None
                per[path]["round_rate"].append(rate)
                if rate is not None:
                    per[path]["rate"].append(rate)
                total = max(sum(sum(v) for v in w.values()) for w in times)  # the slower worker
                per[path]["ar_ms_per_step"].append(total * 1e3 / args.tokens)
                for size in times[0]:
                    med = max(statistics.median(w[size]) for w in times if size in w)
                    per[path]["call_us"].setdefault(int(size), []).append(med * 1e6)
        rows.append((batch, per))
        v, s = per["vllm"], per["symmar"]
        # Each round runs the two paths one after the other: their ratio within a round meets one machine state.
        paired = [b / a for a, b in zip(v["round_rate"], s["round_rate"]) if a and b]
        print("# %s batch %d: tokens/s vllm %s, symmar %s (x%.2f; symmar/vllm within a round %s); "
              "allreduce ms/step vllm %s, symmar %s"
              % (dtype, batch, spread(v["rate"]), spread(s["rate"]),
                 statistics.median(s["rate"]) / statistics.median(v["rate"]) if s["rate"] and v["rate"] else 0.0,
                 spread(paired, 2), spread(v["ar_ms_per_step"]), spread(s["ar_ms_per_step"])), flush=True)
        for size in sorted(set(v["call_us"]) & set(s["call_us"])):
            print("#   %s batch %d, %7d bytes a call: us vllm %s, symmar %s (x%.2f)"
                  % (dtype, batch, size, spread(v["call_us"][size]), spread(s["call_us"][size]),
                     statistics.median(v["call_us"][size]) / statistics.median(s["call_us"][size])), flush=True)
    if args.decode_only:
        return rows, llm.collective_rpc(worker_take, kwargs={"take_symmar": True, "reset": False})
    sizes = sorted({1 << k for k in range(10, 21)} | {args.hidden * b * (2 if dtype == "bfloat16" else 4)
                                                       for b in args.batches})
    # Which state the machine's CPUs were in around the per-call runs (machine_state.py): where
    # plain stores to shared lines are slow, symmar streams its staging writes as vLLM always does.
    before = handoff_us()
    costs = {}
    for rnd in range(args.rounds):
        for path in ("vllm", "symmar"):
            llm.collective_rpc(worker_take, kwargs={"take_symmar": path == "symmar"})
            got = llm.collective_rpc(worker_call_cost, kwargs={"sizes": sizes, "dtype_name": dtype})
            for size in sizes:
                costs.setdefault((path, size), []).append(max(w[str(size)] for w in got))
    print("# %s machine state: a 256 KiB handoff between the two CPUs took %s us before the per-call runs, %s after "
          "(about 28 us fast, 115 slow on the VM of docs/performance/)" % (dtype, before, handoff_us()), flush=True)
    for size in sizes:
        v, s = costs[("vllm", size)], costs[("symmar", size)]
        print("# %s per call inside the workers, %7d bytes: us vllm %s, symmar %s (vllm/symmar x%.2f)"
              % (dtype, size, spread(v), spread(s), statistics.median(v) / statistics.median(s)), flush=True)
    # The same calls as vLLM's default mode runs them: traced into a graph (eager above is
    # --enforce-eager's path, where the Python around each op is paid on every call).
    graphed = {}
    for rnd in range(args.rounds):
        for path in ("vllm", "symmar"):
            llm.collective_rpc(worker_take, kwargs={"take_symmar": path == "symmar"})
            got = llm.collective_rpc(worker_call_cost, kwargs={"sizes": sizes, "dtype_name": dtype,
                                                               "compiled": True})
            for size in sizes:
                graphed.setdefault((path, size), []).append(max(w[str(size)] for w in got))
    for size in sizes:
        v, s = graphed[("vllm", size)], graphed[("symmar", size)]
        print("# %s per call in a compiled graph, %7d bytes: us vllm %s, symmar %s (vllm/symmar x%.2f)"
              % (dtype, size, spread(v), spread(s), statistics.median(v) / statistics.median(s)), flush=True)
    # The logits' all_gather along the last dim: a [1, vocab / 2] tensor per rank at batch 1.
    gather_sizes = [1 << k for k in range(10, 19, 2)]
    gathers = {}
    for rnd in range(args.rounds):
        for path in ("vllm", "symmar"):
            llm.collective_rpc(worker_take, kwargs={"take_symmar": path == "symmar"})
            got = llm.collective_rpc(worker_call_cost, kwargs={"sizes": gather_sizes, "dtype_name": dtype,
                                                               "op": "all_gather"})
            for size in gather_sizes:
                gathers.setdefault((path, size), []).append(max(w[str(size)] for w in got))
    for size in gather_sizes:
        v, s = gathers[("vllm", size)], gathers[("symmar", size)]
        print("# %s all_gather (last dim) per call inside the workers, %7d bytes a rank: us vllm %s, symmar %s "
              "(vllm/symmar x%.2f)" % (dtype, size, spread(v), spread(s), statistics.median(v) / statistics.median(s)),
              flush=True)
    calls = llm.collective_rpc(worker_take, kwargs={"take_symmar": True, "reset": False})
    return rows, calls


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batches", default="1,4,16,64")
    p.add_argument("--dtype", default="bfloat16", help="one engine (and process) per dtype")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--tokens", type=int, default=33)
    p.add_argument("--model", default="/tmp/symmar-vllm-decode-model")
    p.add_argument("--hidden", type=int, default=4096, help="the model's hidden size (make_model's)")
    p.add_argument("--decode-only", action="store_true", help="decode tokens/s and allreduce time per step only")
    args = p.parse_args()
    args.batches = [int(b) for b in args.batches.split(",")]
    if os.environ.get("SYMMAR_VLLM") != "1":
        sys.exit("set SYMMAR_VLLM=1: the plugin must be loaded for its switch to choose the path")
    if not os.path.exists(os.path.join(args.model, "config.json")):
        make_model(args.model)
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # collective_rpc of this module's functions
    rows, calls = bench_dtype(args, args.dtype)
    print(json.dumps({"dtype": args.dtype, "rows": rows, "plugin_calls": calls}))
    sys.stdout.flush()
    os._exit(0)  # vLLM's worker processes are torn down with this one


if __name__ == "__main__":
    main()
