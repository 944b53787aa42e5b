"""Allreduce across local processes with the Python package (pip install .), on CPU ranks.

    python examples/python/allreduce.py [nranks]

Each process holds rank+1 in every element; every rank must get 1+2+...+nranks. The unique id is
made in the parent and handed to the ranks, as a launcher would.
"""
import multiprocessing as mp
import sys

import numpy as np

import symmar


def rank_main(nranks, rank, uid, results):
    with symmar.Comm(nranks, rank, uid, device="cpu") as comm:
        x = np.full(1 << 16, rank + 1, dtype=np.float32)
        y = comm.all_reduce(x)                               # sum over the ranks, a new array
        comm.all_reduce_(x, op="max")                        # in place
        results.put((rank, float(y[0]), float(y[-1]), float(x[0]), comm.plan(y.size, "float32")))


def main():
    nranks = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    uid = symmar.get_unique_id()
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(nranks, r, uid, results)) for r in range(nranks)]
    for p in procs:
        p.start()
    got = sorted(results.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(60)
    want = nranks * (nranks + 1) / 2
    for rank, first, last, peak, algo in got:
        print("rank %d: sum %g (expected %g), max %g (expected %d), algorithm %s" % (rank, first, want, peak, nranks, algo))
        if first != want or last != want or peak != nranks:
            sys.exit("rank %d: wrong result" % rank)
    if any(p.exitcode != 0 for p in procs):
        sys.exit("a rank failed")
    print("symmar %s from %s: allreduce across %d processes ok" % (symmar.__version__, symmar.library_path(), nranks))


if __name__ == "__main__":
    main()
