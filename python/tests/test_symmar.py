"""Tests of the ctypes binding on the host backend: ranks are forked processes (unique id made in
the parent) or threads (init_all, from_allgather). Needs SYMMAR_LIBRARY (see conftest.py)."""
import hashlib
import multiprocessing as mp
import os
import threading
import traceback

import numpy as np
import pytest

import symmar
from rank_threads import run_threads

TIMEOUT_MS = 20000  # bound on every wait inside the library: a broken rank fails the test, not hangs it
JOIN_S = 60

DTYPES = ["float32", "float16", "bfloat16", "int32", "float64"]
OPS = ["sum", "max", "min"]
ALGOS = ["oneshot", "twoshot", "auto"]
COUNTS = [1, 1031, 70001]  # odd counts: uneven two-shot slices and chunk tails
RTOL = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2, "int32": 0, "float64": 1e-12}


# ---- helpers ----

def _bf16_bits(values):
    """float64 values exactly representable in bf16 -> their uint16 bit patterns."""
    return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _rank_input(dtype, count, rank, seed):
    """Rank's input as (array to pass, its values in float64). Quarter-integers in [-8, 8]: exact in
    every dtype and every partial sum exact too, so any summation order gives the same result."""
    rng = np.random.default_rng(seed * 97 + rank)
    q = rng.integers(-32, 33, size=count)
    if dtype == "int32":
        values = q.astype(np.float64)
        return values.astype(np.int32), values
    values = q.astype(np.float64) / 4
    if dtype == "bfloat16":
        return _bf16_bits(values), values
    return values.astype(dtype), values


def _reference(dtype, count, nranks, op, seed):
    stack = np.stack([_rank_input(dtype, count, r, seed)[1] for r in range(nranks)])
    return {"sum": stack.sum(0), "max": stack.max(0), "min": stack.min(0)}[op]


def _as_f64(arr, dtype):
    return _bf16_values(arr) if dtype == "bfloat16" else arr.astype(np.float64)


def _matrix(comm, counts=COUNTS, dtypes=DTYPES, ops=OPS, algos=ALGOS):
    """Runs the case matrix on one rank. Never raises on a wrong result (that would desynchronise the
    collectives): returns ([failure texts], {case: digest}) for the parent to check."""
    failures, digests = [], {}
    seed = 0
    for count in counts:
        for dtype in dtypes:
            for op in ops:
                for algo in algos:
                    for inplace in (False, True):
                        seed += 1
                        case = "%s %s count=%d algo=%s %s" % (dtype, op, count, algo,
                                                             "in-place" if inplace else "out-of-place")
                        x, _ = _rank_input(dtype, count, comm.rank, seed)
                        x_before = x.copy()
                        kw = {"dtype": "bfloat16"} if dtype == "bfloat16" else {}
                        if inplace:
                            out = comm.all_reduce(x, out=x, op=op, algo=algo, **kw)
                            if out is not x:
                                failures.append(case + ": in place did not return x")
                        else:
                            out = comm.all_reduce(x, op=op, algo=algo, **kw)
                            if not np.array_equal(x, x_before):
                                failures.append(case + ": out of place modified x")
                        if out.dtype != x_before.dtype or out.shape != x_before.shape:
                            failures.append(case + ": result has dtype %s shape %s" % (out.dtype, out.shape))
                            continue
                        ref = _reference(dtype, count, comm.nranks, op, seed)
                        got = _as_f64(out, dtype)
                        if not np.allclose(got, ref, rtol=RTOL[dtype], atol=0):
                            bad = int(np.argmax(~np.isclose(got, ref, rtol=RTOL[dtype], atol=0)))
                            failures.append("%s: rank %d element %d is %r, expected %r"
                                            % (case, comm.rank, bad, got[bad], ref[bad]))
                        digests[case] = hashlib.sha1(out.tobytes()).hexdigest()
    return failures, digests


def _run_ranks(nranks, target, *args):
    """Forks nranks processes running target(comm-less args..., rank, conn); returns their results."""
    ctx = mp.get_context("fork")
    pipes = [ctx.Pipe(duplex=False) for _ in range(nranks)]
    procs = [ctx.Process(target=_child, args=(target, r, pipes[r][1]) + args, daemon=True) for r in range(nranks)]
    for p in procs:
        p.start()
    for _, w in pipes:
        w.close()
    results = []
    try:
        for r, (rd, _) in enumerate(pipes):
            assert rd.poll(JOIN_S), "rank %d sent nothing within %d s" % (r, JOIN_S)
            results.append(rd.recv())
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
    errors = [res for status, res in results if status != "ok"]
    assert not errors, "\n".join(errors)
    return [res for _, res in results]


def _child(target, rank, conn, *args):
    try:
        conn.send(("ok", target(rank, *args)))
    except BaseException:
        conn.send(("err", "rank %d:\n%s" % (rank, traceback.format_exc())))
    finally:
        conn.close()
        os._exit(0)


def _check_all(results):
    """results: one (failures, digests) per rank; every check passed and ranks agree bit for bit."""
    failures = [f for fails, _ in results for f in fails]
    assert not failures, "\n".join(failures[:20])
    first = results[0][1]
    assert first
    for r, (_, digests) in enumerate(results):
        assert digests.keys() == first.keys()
        differ = [c for c in first if digests[c] != first[c]]
        assert not differ, "rank %d differs from rank 0 in: %s" % (r, differ[:5])



# ---- collectives across processes ----

def _matrix_rank(rank, nranks, uid):
    with symmar.Comm(nranks, rank, uid, device="cpu", timeout_ms=TIMEOUT_MS) as comm:
        assert comm.rank == rank and comm.nranks == nranks
        topo = comm.topology
        assert topo["link"] == "host" and topo["world_size"] == nranks, topo
        return _matrix(comm)


@pytest.mark.parametrize("nranks", [2, 3])
def test_allreduce_matrix_processes(nranks):
    uid = symmar.get_unique_id()
    assert isinstance(uid, bytes) and len(uid) == 128
    _check_all(_run_ranks(nranks, _matrix_rank, nranks, uid))


def _hub_allgather_rank(rank, nranks, conn):
    def allgather(data):
        conn.send(("gather", data))
        return conn.recv()

    with symmar.Comm.from_allgather(nranks, rank, allgather, device="cpu", timeout_ms=TIMEOUT_MS) as comm:
        result = _matrix(comm, counts=[1031], dtypes=["float32", "bfloat16"], ops=["sum"])
    conn.send(("done", None))
    return result


def test_from_allgather_processes():
    """The engine's allgather is a pipe to a hub in the parent (as a process group would be)."""
    nranks = 3
    ctx = mp.get_context("fork")
    links = [ctx.Pipe() for _ in range(nranks)]
    outs = [ctx.Pipe(duplex=False) for _ in range(nranks)]
    procs = [ctx.Process(target=_child, args=(_hub_allgather_rank, r, outs[r][1], nranks, links[r][1]), daemon=True)
             for r in range(nranks)]
    for p in procs:
        p.start()
    try:
        hub = [a for a, _ in links]
        rounds = 0
        while True:
            for r, c in enumerate(hub):
                assert c.poll(JOIN_S), "rank %d went silent" % r
            msgs = [c.recv() for c in hub]
            kinds = {k for k, _ in msgs}
            if kinds == {"done"}:
                break
            assert kinds == {"gather"}, kinds
            assert len({len(d) for _, d in msgs}) == 1
            gathered = [d for _, d in msgs]
            for c in hub:
                c.send(gathered)
            rounds += 1
        assert rounds >= 1
        results = []
        for r, (rd, _) in enumerate(outs):
            assert rd.poll(JOIN_S)
            status, res = rd.recv()
            assert status == "ok", res
            results.append(res)
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
    _check_all(results)


# ---- ranks as threads ----

class _ThreadAllGather:
    def __init__(self, nranks):
        self.slots = [None] * nranks
        self.barrier = threading.Barrier(nranks, timeout=JOIN_S)

    def for_rank(self, rank):
        def allgather(data):
            assert isinstance(data, bytes)
            self.slots[rank] = data
            self.barrier.wait()
            out = list(self.slots)
            self.barrier.wait()
            return out
        return allgather


def test_from_allgather_threads():
    nranks = 2
    ag = _ThreadAllGather(nranks)
    comms = [None] * nranks

    def make(rank):
        comms[rank] = symmar.Comm.from_allgather(nranks, rank, ag.for_rank(rank), device="cpu", timeout_ms=TIMEOUT_MS)
        return comms[rank]

    run_threads(list(range(nranks)), make)
    try:
        assert [c.rank for c in comms] == [0, 1]
        _check_all(run_threads(comms, lambda c: _matrix(c, counts=[5000], dtypes=["float32", "int32"], ops=["sum", "max"])))
    finally:
        for c in comms:
            c.close()


@pytest.mark.parametrize("devices", [None, ["cpu"] * 3])
def test_init_all_threads(devices):
    comms = symmar.Comm.init_all(3, devices=devices, timeout_ms=TIMEOUT_MS)
    try:
        assert [c.rank for c in comms] == [0, 1, 2]
        assert all(c.nranks == 3 for c in comms)
        if devices is None and comms[0].topology["link"] != "host":
            pytest.skip("devices=None chose a GPU")
        _check_all(run_threads(comms, lambda c: _matrix(c, counts=[1031], ops=["sum", "min"])))
    finally:
        for c in comms:
            c.close()


def test_init_all_context_manager_and_close():
    (comm,) = symmar.Comm.init_all(1, devices=["cpu"])
    with comm as c:
        assert c is comm and not comm.closed
        assert comm.async_error() is None
        assert "host" in comm.describe()
    assert comm.closed and comm.handle == 0
    comm.close()  # idempotent
    with pytest.raises(symmar.SymmarError) as e:
        comm.all_reduce(np.zeros(4, np.float32))
    assert e.value.name == "symmarInvalidUsage"


# ---- single-rank behaviour ----

def test_single_rank_identity_and_empty(comm1):
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    y = comm1.all_reduce(x)
    assert y.shape == (3, 4) and np.array_equal(x, y) and y is not x
    empty = np.zeros(0, np.float32)
    assert comm1.all_reduce(empty).size == 0
    scalar = np.array(2.5, dtype=np.float32)
    assert comm1.all_reduce(scalar, out=scalar) is scalar


def test_comm_plan_and_topology(comm1):
    topo = comm1.topology
    assert topo == {"cc_major": 0, "cc_minor": 0, "link": "host", "world_size": 1, "multicast": False}
    assert comm1.plan(100, "float32") in ("oneshot", "twoshot")
    assert comm1.plan(1 << 24, dtype="bfloat16", op="max") in ("oneshot", "twoshot", "mpi")
