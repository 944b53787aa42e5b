#!/usr/bin/env python3
"""What the torch custom op (torch.ops.symmar.all_reduce_) adds to an eager in-place allreduce.

One rank (symmar.Comm.init_all(1, devices=["cpu"])), a small float32 CPU tensor: the collective
itself is as cheap as it gets, so the difference between the op and the binding's own
comm.all_reduce_(t) is the dispatcher's cost (op lookup, schema parsing of the arguments, the
kernel call and the comm lookup by handle). For comparison, the same kernel is also
registered here through torch.library.custom_op, the route symmar.ops does not take.

    SYMMAR_LIBRARY=build/src/libsymmar.so python3 python/benchmarks/op_overhead.py [--calls N] [--count K]

Prints, in microseconds per call, the median of 7 runs of N calls for each form and the difference.
torch.ops.symmar.all_reduce_ runs libsymmar_torch's compiled kernel where the build made it;
SYMMAR_TORCH_OPS=python runs the Python kernel instead, for a side-by-side comparison.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402

import symmar  # noqa: E402
import symmar.torch  # noqa: E402,F401  registers torch.ops.symmar
from symmar import ops  # noqa: E402


def time_call(fn, calls, runs=7):
    for _ in range(calls // 10):  # warm: first-call dispatch caches, the comm's plan
        fn()
    per_call = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(per_call)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--count", type=int, default=16, help="float32 elements per call")
    args = ap.parse_args()

    (comm,) = symmar.Comm.init_all(1, devices=["cpu"])
    h = ops.handle(comm)
    t = torch.ones(args.count)
    op = torch.ops.symmar.all_reduce_
    op_default = torch.ops.symmar.all_reduce_.default
    out_default, out_sum = torch.ops.symmar.all_reduce.default, torch.ops.symmar.all_reduce_sum.default
    # The same kernel as symmar.ops' all_reduce_, through custom_op (Python autograd wrapping included).
    bench_op = torch.library.custom_op("symmar_bench::all_reduce_", mutates_args=("x",),
                                       schema='(Tensor(a!) x, int comm, str op="sum") -> ()')(ops._all_reduce_)
    forms = [
        ("comm.all_reduce_(t)", lambda: comm.all_reduce_(t)),
        ("torch.ops.symmar.all_reduce_(t, h)", lambda: op(t, h)),
        ("torch.ops.symmar.all_reduce_.default(t, h)", lambda: op_default(t, h)),
        ("same kernel via torch.library.custom_op", lambda: bench_op(t, h)),
        # Out of place, as inductor's generated code spells each: a keyword for the op argument.
        ("torch.ops.symmar.all_reduce.default(t, h, op='sum')", lambda: out_default(t, h, op="sum")),
        ("torch.ops.symmar.all_reduce_sum.default(t, h)", lambda: out_sum(t, h)),
    ]
    results = [(name, time_call(fn, args.calls)) for name, fn in forms]
    base = results[0][1]
    print("one rank, %d float32 elements, %d calls per run, median of 7 runs (torch %s), %s kernels"
          % (args.count, args.calls, torch.__version__, "compiled" if ops.compiled else "Python"))
    for name, us in results:
        print("%-52s %7.2f us/call  %+7.2f us" % (name, us, us - base))
    comm.close()


if __name__ == "__main__":
    main()
