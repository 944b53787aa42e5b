"""torch.ops.symmar on a GPU comm: eager, torch.compile(fullgraph=True) and CUDA graph replay.

Two ranks share one GPU in one process (Comm.init_all with the same device twice), each on its
own CUDA stream, so that the kernels of both ranks run at once as they would on two GPUs. Plain
Python (no pytest): the GPU check script runs it on a machine that may have no pytest, and
test_gpu_torch.py runs it under pytest where CUDA is available.

    SYMMAR_LIBRARY=build/src/libsymmar.so python3 python/tests/gpu_torch_check.py

Exit 0 when every check passed, 77 when there is nothing to check (no CUDA, no GPU backend),
1 with the failures listed otherwise. Inputs are small integers: every sum is exact, results are
compared bit for bit with a float64 sum made on the CPU.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SKIP = 77


def _inputs(torch, nranks, shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randint(-8, 9, shape, generator=g).to(dtype) for _ in range(nranks)]
    want = sum(x.double() for x in xs).to(dtype)
    return xs, want


def _on_streams(torch, streams, fn):
    """fn(rank) enqueued on each rank's stream, then all streams waited for."""
    for r, s in enumerate(streams):
        with torch.cuda.stream(s):
            fn(r)
    for s in streams:
        s.synchronize()


def main():
    try:
        import torch
    except ImportError:
        print("SKIP: PyTorch is not installed")
        return SKIP
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device visible to torch")
        return SKIP
    import symmar
    import symmar.torch  # noqa: F401  registers torch.ops.symmar
    from symmar import ops

    nranks = 2
    try:
        comms = symmar.Comm.init_all(nranks, devices=[0] * nranks)
    except symmar.SymmarError as e:
        print("SKIP: no GPU comm here (%s)" % e)
        return SKIP
    failures = []
    dev = torch.device("cuda", 0)
    streams = [torch.cuda.Stream(device=dev) for _ in range(nranks)]
    handles = [ops.handle(c) for c in comms]

    def check(case, got, want):
        got = got.cpu()
        if not torch.equal(got, want):
            bad = (got.double() != want.double()).nonzero()[:3].flatten().tolist()
            failures.append("%s: wrong at %s" % (case, bad))
        else:
            print("ok: %s" % case)

    for seed, dtype in enumerate((torch.float32, torch.float16, torch.bfloat16)):
        for count in (1, 1000, 7168, 1 << 20):
            xs, want = _inputs(torch, nranks, (count,), dtype, seed * 100 + count)
            x = [t.to(dev) for t in xs]
            torch.cuda.synchronize()
            _on_streams(torch, streams, lambda r: torch.ops.symmar.all_reduce_(x[r], handles[r]))
            for r in range(nranks):
                check("eager all_reduce_ %s count=%d rank %d" % (dtype, count, r), x[r], want)

    # torch.compile: an intermediate reduced in place, then math on it (aot_eager: the same graph
    # as inductor's, without compiling kernels).
    def block(t, h):
        y = t * 2 + 1
        torch.ops.symmar.all_reduce_(y, h)
        return y - 1

    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    xs, _ = _inputs(torch, nranks, (4, 4096), torch.bfloat16, 7)
    want = (sum((t.double() * 2 + 1) for t in xs) - 1).to(torch.bfloat16)
    x = [t.to(dev) for t in xs]
    out = [None] * nranks
    torch.cuda.synchronize()

    def run_compiled(r):
        out[r] = compiled(x[r], handles[r])

    _on_streams(torch, streams, run_compiled)
    for r in range(nranks):
        check("torch.compile(fullgraph) rank %d" % r, out[r], want)

    # CUDA graphs: each size runs once eagerly, then both ranks capture, then replay three times
    # with new inputs copied into the captured buffers.
    count = 8192
    bufs = [torch.zeros(count, dtype=torch.float16, device=dev) for _ in range(nranks)]
    _on_streams(torch, streams, lambda r: torch.ops.symmar.all_reduce_(bufs[r], handles[r]))
    graphs = [torch.cuda.CUDAGraph() for _ in range(nranks)]
    for r in range(nranks):
        with torch.cuda.graph(graphs[r], stream=streams[r]):
            torch.ops.symmar.all_reduce_(bufs[r], handles[r])
    for replay in range(3):
        xs, want = _inputs(torch, nranks, (count,), torch.float16, 1000 + replay)
        for r in range(nranks):
            bufs[r].copy_(xs[r])
        torch.cuda.synchronize()
        _on_streams(torch, streams, lambda r: graphs[r].replay())
        for r in range(nranks):
            check("graph replay %d rank %d" % (replay, r), bufs[r], want)

    for c in comms:
        c.close()
    for f in failures:
        print("FAILED: " + f)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
