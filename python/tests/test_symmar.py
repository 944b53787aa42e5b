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


@pytest.fixture
def comm1():
    comms = symmar.Comm.init_all(1, devices=["cpu"])
    yield comms[0]
    comms[0].close()


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


# ---- the pure planner ----

def test_plan_pcie_blackwell_not_nccl():
    algo = symmar.plan(cc=(12, 0), link="pcie", world=4, multicast=False, count=7168, dtype="bfloat16", op="sum")
    assert algo in symmar.ALGOS and algo not in ("nccl", "auto")
    assert symmar.plan() == algo  # those are the defaults


def test_plan_pcie_without_p2p_stages_through_host_memory():
    """GPUs without peer access (link pcie-nop2p): one token at world 4 is one-shot, 1 MiB two-shot."""
    assert symmar.plan(cc=(12, 0), link="pcie-nop2p", world=4, count=7168, dtype="bfloat16") == "oneshot"
    assert symmar.plan(cc=(12, 0), link="pcie-nop2p", world=4, count=1 << 19, dtype="bfloat16") == "twoshot"


def test_plan_unknown_capability_is_served():
    """A capability without rows of its own plans from its family's rows, else from the default rows:
    12.7 exactly as 12.0, and capabilities of families without rows all alike. (Any answer at all is
    what plan() returning guarantees; these say which rows served it.)"""
    for count in (1, 7168, 1 << 20, 1 << 26):
        assert symmar.plan(cc=(12, 7), link="pcie", world=4, count=count) == \
            symmar.plan(cc=(12, 0), link="pcie", world=4, count=count), count
        unknown = {symmar.plan(cc=cc, link="pcie", world=4, count=count) for cc in [(13, 0), (42, 3), (99, 9)]}
        assert len(unknown) == 1, (count, unknown)


@pytest.mark.parametrize("link,world,multicast", [("nvswitch", 8, True), ("nvlink", 2, False), ("pcie", 3, False),
                                                  ("unknown", 5, False)])
def test_plan_names(link, world, multicast):
    """Whatever the rows say, the availability rules bound the answer (planner.h): int32 has no GPU
    kernel and an unknown link no peer access, so both go to NCCL; multimem needs an NVSwitch with
    multicast; a GPU topology's fallback is NCCL, never MPI."""
    kernels = ("oneshot", "twoshot", "lamport") + (("multimem",) if link == "nvswitch" and multicast else ())
    for count in (1, 4096, 1 << 20, 1 << 28):
        for dtype in ("float32", "bfloat16", "int32"):
            algo = symmar.plan(cc=(9, 0), link=link, world=world, multicast=multicast, count=count, dtype=dtype)
            if dtype == "int32" or link == "unknown":
                assert algo == "nccl", (count, dtype, algo)
            else:
                assert algo in kernels + ("nccl",), (count, dtype, algo)


def test_plan_host():
    assert symmar.plan(cc=(0, 0), link="host", world=2, count=10, dtype="float32") == "lamport"  # 40 B
    assert symmar.plan(cc=(0, 0), link="host", world=2, count=1000, dtype="float32") in ("oneshot", "twoshot")


def test_plan_bad_arguments():
    with pytest.raises(TypeError):
        symmar.plan(cc=12)
    with pytest.raises(TypeError):
        symmar.plan(link=3)
    with pytest.raises(ValueError):
        symmar.plan(link="infiniband")
    with pytest.raises(ValueError):
        symmar.plan(count=-1)
    with pytest.raises(ValueError):
        symmar.plan(world=0)
    with pytest.raises(ValueError):
        symmar.plan(dtype="complex64")
    with pytest.raises(ValueError):
        symmar.plan(op="prod")
    with pytest.raises(symmar.SymmarError) as e:
        symmar.plan(cc=(9, 12))  # minor > 9: rejected by the library
    assert e.value.name == "symmarInvalidArgument" and e.value.code == 1 and "capability" in str(e.value)


# ---- bad inputs ----

def test_wrong_types(comm1):
    with pytest.raises(TypeError):
        comm1.all_reduce([1.0, 2.0])
    with pytest.raises(TypeError):
        comm1.all_reduce(np.zeros(4, np.float32), out=[0.0] * 4)
    with pytest.raises(TypeError):
        comm1.all_reduce(np.zeros(4, np.float32), op=0)
    with pytest.raises(TypeError):
        comm1.all_reduce(np.zeros(4, np.float32), dtype=3.5)
    with pytest.raises(TypeError):
        comm1.plan("100")
    with pytest.raises(TypeError):
        symmar.Comm(2, 0, "not bytes")
    with pytest.raises(TypeError):
        symmar.Comm(2.0, 0, bytes(128))
    with pytest.raises(TypeError):
        symmar.Comm(1, 0, symmar.get_unique_id(), device=1.5)
    with pytest.raises(TypeError):
        symmar.Comm(1, 0, symmar.get_unique_id(), timeout_ms="10")
    with pytest.raises(TypeError):
        symmar.Comm.from_allgather(1, 0, "not callable")
    with pytest.raises(TypeError):
        symmar.Comm.init_all(2, devices="cpu")


def test_bad_values(comm1):
    x = np.zeros(8, np.float32)
    with pytest.raises(ValueError):
        comm1.all_reduce(np.zeros((4, 4), np.float32)[:, 1])  # non-contiguous
    with pytest.raises(ValueError):
        comm1.all_reduce(np.zeros(8, np.float32)[::2])
    with pytest.raises(ValueError):
        comm1.all_reduce(np.zeros(8, np.complex64))
    with pytest.raises(ValueError):
        comm1.all_reduce(np.zeros(8, np.int64))
    with pytest.raises(ValueError):
        comm1.all_reduce(np.zeros(8, np.uint16))  # bf16 bits need dtype="bfloat16"
    with pytest.raises(ValueError):
        comm1.all_reduce(np.zeros(8, np.dtype(">f4")))
    with pytest.raises(ValueError):
        comm1.all_reduce(x, op="prod")
    with pytest.raises(ValueError):
        comm1.all_reduce(x, algo="ring")
    with pytest.raises(ValueError):
        comm1.all_reduce(x, dtype="bfloat16")  # float32 array is not bf16 bits
    with pytest.raises(ValueError):
        comm1.all_reduce(x, dtype="complex64")
    with pytest.raises(ValueError):
        comm1.all_reduce(x, out=np.zeros(8, np.float64))
    with pytest.raises(ValueError):
        comm1.all_reduce(x, out=np.zeros(9, np.float32))
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        comm1.all_reduce(x, out=ro)
    with pytest.raises(ValueError):
        comm1.all_reduce(x, out=np.zeros(16, np.float32)[::2])
    with pytest.raises(ValueError):
        comm1.plan(-1)
    with pytest.raises(ValueError):
        symmar.Comm(2, 0, bytes(127))
    with pytest.raises(ValueError):
        symmar.Comm(1, 0, symmar.get_unique_id(), device="gpu")
    with pytest.raises(ValueError):
        symmar.Comm(1, 0, symmar.get_unique_id(), timeout_ms=-5)
    with pytest.raises(ValueError):
        symmar.Comm.init_all(2, devices=["cpu"])


def test_forced_algorithms_skip_the_general_path(comm1, monkeypatch):
    """A forced algorithm named exactly goes straight to symmarAllReduceAlgo, as "auto" goes to
    symmarAllReduce (the general path's checks cost a few us a call); the library's refusal
    still raises, and other spellings still take the general path."""
    from symmar import _general
    general = []
    real = _general.all_reduce
    monkeypatch.setattr(_general, "all_reduce", lambda *a: general.append(a[4]) or real(*a))
    x = np.arange(1, 9, dtype=np.float32)
    for algo in ("oneshot", "twoshot"):
        assert np.array_equal(comm1.all_reduce(x, algo=algo), np.arange(1, 9))
        y = np.zeros(8, np.float32)
        assert comm1.all_reduce(x, out=y, algo=algo) is y and np.array_equal(y, np.arange(1, 9))
        z = x.copy()
        assert comm1.all_reduce_(z, algo=algo) is z and np.array_equal(z, np.arange(1, 9))
    with pytest.raises(symmar.SymmarError) as e:
        comm1.all_reduce(x, algo="multimem")
    assert e.value.name == "symmarUnsupported" and "multimem" in str(e.value)
    assert general == []
    assert np.array_equal(comm1.all_reduce(x, algo="OneShot"), np.arange(1, 9))
    assert general == ["OneShot"]


def test_library_errors(comm1):
    x = np.ones(64, np.float32)
    with pytest.raises(symmar.SymmarError) as e:
        comm1.all_reduce(x, algo="multimem")
    assert e.value.name == "symmarUnsupported" and e.value.code == 3
    assert "multimem" in str(e.value)
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(symmar.SymmarError) as e:
        comm1.all_reduce(x, algo="nccl")
    assert e.value.name == "symmarUnsupported"
    # overlapping, unequal buffers are rejected by the library
    big = np.zeros(128, np.float32)
    with pytest.raises(symmar.SymmarError) as e:
        comm1.all_reduce(big[:64], out=big[32:96])
    assert e.value.name == "symmarInvalidArgument"
    # the comm still works after argument errors
    assert np.array_equal(comm1.all_reduce(x), x)
    with pytest.raises(symmar.SymmarError) as e:
        symmar.Comm(2, 5, symmar.get_unique_id(), device="cpu")
    assert e.value.name == "symmarInvalidArgument" and "rank" in str(e.value)
    with pytest.raises(symmar.SymmarError) as e:
        symmar.Comm.init_all(1, devices=["cpu"], staging_bytes=100)
    assert e.value.name == "symmarInvalidArgument"


def test_timeout_when_peer_never_arrives():
    with pytest.raises(symmar.SymmarError) as e:
        symmar.Comm(2, 0, symmar.get_unique_id(), device="cpu", timeout_ms=300)
    assert e.value.name == "symmarTimeout" and e.value.code == 7


def test_allgather_callback_failure_is_reported():
    def broken(data):
        raise ZeroDivisionError("engine allgather broke")

    with pytest.raises(symmar.SymmarError) as e:
        symmar.Comm.from_allgather(1, 0, broken, device="cpu")
    assert isinstance(e.value.__cause__, ZeroDivisionError)

    with pytest.raises(symmar.SymmarError):
        symmar.Comm.from_allgather(2, 0, lambda data: [data], device="cpu")  # one part for two ranks


def test_library_lookup(monkeypatch):
    symmar.version()  # loaded before $SYMMAR_LIBRARY is pointed elsewhere
    monkeypatch.setenv("SYMMAR_LIBRARY", "/some/where/libsymmar.so")
    assert symmar.find_library() == "/some/where/libsymmar.so"
    assert os.path.basename(symmar.library_path()).startswith("libsymmar.so")
    assert symmar.version()[0] == 0


def test_library_lookup_order(monkeypatch, tmp_path):
    """Without $SYMMAR_LIBRARY: the package's folders (an editable install's site-packages copy
    among them) first, then a checkout's build/src before the other build*/src (a sanitizer build
    found first fails to load into python)."""
    from symmar import _lib

    package_dirs = [str(tmp_path / "site-packages" / "symmar"), str(tmp_path / "source" / "symmar")]
    for d in package_dirs[:1] + [str(tmp_path / "repo" / b / "src") for b in ("build-asan", "build", "build-tsan")]:
        os.makedirs(d)
        open(os.path.join(d, "libsymmar.so.0"), "w").close()
    monkeypatch.setattr(symmar, "__path__", package_dirs)
    monkeypatch.delenv("SYMMAR_LIBRARY", raising=False)
    assert symmar.find_library() == os.path.join(package_dirs[0], "libsymmar.so.0")

    os.remove(os.path.join(package_dirs[0], "libsymmar.so.0"))
    monkeypatch.setattr(symmar, "__path__", [str(tmp_path / "repo" / "python" / "symmar")])
    monkeypatch.setattr(_lib, "__file__", str(tmp_path / "repo" / "python" / "symmar" / "_lib.py"))
    assert symmar.find_library() == str(tmp_path / "repo" / "build" / "src" / "libsymmar.so.0")
