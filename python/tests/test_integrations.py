"""symmar.integrations.SymmarCommunicator, the engine-shaped communicator, against torch process
groups on CPU tensors (gloo). Ranks are launched by torch.multiprocessing.spawn, as in
test_torch.py; each rank collects its failures instead of stopping (its peers would wait for its
collectives) and writes them to a file the test reads.

References: every rank regenerates every rank's input from its seed and sums them in float64 (an
independent reference), and gloo's own allreduce of the same tensors. Inputs are small integers, so
the sums are exact in every dtype and all three must agree bit for bit.
"""
import json
import logging
import os

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs it in its cached venv)")
dist = pytest.importorskip("torch.distributed", reason="this PyTorch has no torch.distributed")
if not dist.is_available():
    pytest.skip("this PyTorch was built without torch.distributed", allow_module_level=True)

import torch.multiprocessing as tmp  # noqa: E402

from symmar.integrations import SymmarCommunicator  # noqa: E402
from symmar import integrations  # noqa: E402

TIMEOUT_MS = 20000
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Element counts across the 2-rank host row's switch points (lamport <= 64 B, oneshot <= 32 KiB, then
# twoshot), odd counts among them: 8193 and 16385 are just past 32 KiB in float32 and in 16-bit dtypes.
COUNTS = [1, 16, 17, 255, 256, 257, 4099, 8193, 16385, 65536, 300001]


def _input(rank, count, dtype, seed):
    g = torch.Generator().manual_seed(seed * 1009 + rank)
    return torch.randint(-8, 9, (count,), generator=g, dtype=torch.int64).to(dtype)


def _expected(nranks, count, dtype, seed):
    total = sum(_input(r, count, dtype, seed).double() for r in range(nranks))
    return total.to(dtype)


def _check(failures, case, got, want):
    if got is None:
        failures.append("%s: declined" % case)
    elif got.dtype != want.dtype or not torch.equal(got, want):
        bad = (got.double() != want.double()).nonzero()
        failures.append("%s: wrong at %s" % (case, bad[:3].flatten().tolist()))


def _rank_serves(comm, rank, nranks, failures):
    """Every dtype and count: taken, and equal to the float64 reference and to gloo."""
    for seed, (dtype, count) in enumerate((d, c) for d in DTYPES for c in COUNTS):
        case = "world=%d %s count=%d" % (nranks, dtype, count)
        x = _input(rank, count, dtype, seed)
        if not comm.should_all_reduce(x):
            failures.append("%s: should_all_reduce is False (plan %s)" % (case, comm.comm.plan(count, dtype)))
            continue
        want = _expected(nranks, count, dtype, seed)
        _check(failures, case, comm.all_reduce(x), want)
        out = torch.empty_like(x)
        if comm.all_reduce(x, out=out) is not out:
            failures.append("%s: all_reduce(out=) did not return out" % case)
        _check(failures, case + " out=", out, want)
        gloo = x.clone()
        dist.all_reduce(gloo)
        _check(failures, case + " vs gloo", comm.custom_all_reduce(x), gloo)
        _check(failures, case + " try_all_reduce", comm.try_all_reduce(x), want)
        if not torch.equal(x, _input(rank, count, dtype, seed)):
            failures.append("%s: the input was written" % case)
        y = x.clone()
        got = comm.try_all_reduce_(y)
        if got is not y:
            failures.append("%s: try_all_reduce_ did not return its input" % case)
        _check(failures, case + " try_all_reduce_", y, want)


def _rank_declines(comm, rank, failures):
    """Tensors symmar does not take: the engine's own path must get them (None, False)."""
    x = torch.ones(64, dtype=torch.float32)
    for what, t in (("int64", torch.ones(64, dtype=torch.int64)), ("float64", torch.ones(64, dtype=torch.float64)),
                    ("non-contiguous", torch.ones(8, 16)[:, ::2]), ("empty", torch.ones(0)),
                    ("not a tensor", [1.0, 2.0])):
        if comm.should_all_reduce(t) or comm.all_reduce(t) is not None:
            failures.append("rank %d: %s taken" % (rank, what))
        if isinstance(t, torch.Tensor):
            before = t.clone()
            if comm.try_all_reduce_(t) is not None or comm.try_all_reduce(t) is not None:
                failures.append("rank %d: %s taken by a taker" % (rank, what))
            if not torch.equal(t, before):
                failures.append("rank %d: %s written by a taker that declined it" % (rank, what))
    capped = comm.max_bytes
    comm.max_bytes = 128
    if comm.should_all_reduce(x) or not comm.should_all_reduce(x[:32]):
        failures.append("max_bytes=128 not applied to 256 and 128 bytes")
    # The takers made at creation follow the cap too (both ranks take x[:32], a collective).
    if comm.try_all_reduce_(x.clone()) is not None or comm.try_all_reduce(x[:32].clone()) is None:
        failures.append("max_bytes=128 not applied to the takers")
    comm.max_bytes = capped
    # The plan decides, as read at creation: counts it gives the fallback are declined.
    spans = dict(comm._spans)
    comm._spans[torch.float32] = (1, 32)
    comm.max_bytes = capped  # the ranges are made again from the spans
    if comm.should_all_reduce(x) or not comm.should_all_reduce(x[:32]):
        failures.append("a count past the plan's own span was taken, or one within it declined")
    if comm.try_all_reduce_(x.clone()) is not None:
        failures.append("a count past the plan's own span was taken by the taker")
    comm._spans[torch.float32] = (2, 32)
    comm.max_bytes = capped
    if comm.should_all_reduce(x[:1]):
        failures.append("a count before the plan's own span was taken")
    comm._spans = spans
    comm.max_bytes = capped


def _rank_fused(comm, rank, nranks, failures):
    """all_reduce_add_rms_norm against a float64 reference of allreduce + add + RMSNorm."""
    for seed, dtype in enumerate(DTYPES):
        tokens, hidden = 3, 512
        x = _input(rank, tokens * hidden, dtype, 100 + seed).view(tokens, hidden)
        residual = _input(0, tokens * hidden, dtype, 200 + seed).view(tokens, hidden)
        weight = (_input(0, hidden, dtype, 300 + seed) / 4).to(dtype)
        got = comm.all_reduce_add_rms_norm(x, residual, weight, eps=1e-6)
        case = "fused world=%d %s" % (nranks, dtype)
        if got is None:
            failures.append(case + ": declined")
            continue
        r = _expected(nranks, tokens * hidden, dtype, 100 + seed).view(tokens, hidden).double() + residual.double()
        norm = r * torch.rsqrt((r * r).mean(-1, keepdim=True) + 1e-6) * weight.double()
        tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
        normed, residual_out = got
        if not torch.equal(residual_out, r.to(dtype)):
            failures.append(case + ": residual_out wrong")
        err = ((normed.double() - norm).abs() / (norm.abs() + 1)).max().item()
        if err > tol:
            failures.append("%s: norm off by %g (tolerance %g)" % (case, err, tol))
    wrong = comm.all_reduce_add_rms_norm(torch.ones(2, 8), torch.ones(2, 8), torch.ones(4))
    if wrong is not None:
        failures.append("a weight of the wrong length was taken")


def _rank_scatter_gather(comm, rank, nranks, failures):
    """reduce_scatter and all_gather at dim 0 against the float64 reference and gloo."""
    for seed, dtype in enumerate(DTYPES, 100):
        for rows in (1, 7, 2049):
            case = "world=%d %s rows=%d" % (nranks, dtype, rows)
            x = _input(rank, nranks * rows * 3, dtype, seed).reshape(nranks * rows, 3)
            want = _expected(nranks, nranks * rows * 3, dtype, seed).reshape(nranks * rows, 3)
            _check(failures, case + " reduce_scatter", comm.reduce_scatter(x), want[rank * rows:(rank + 1) * rows])
            block = _input(rank, rows * 3, dtype, seed + 50).reshape(rows, 3)
            parts = [torch.empty_like(block) for _ in range(nranks)]
            dist.all_gather(parts, block)
            _check(failures, case + " all_gather vs gloo", comm.all_gather(block), torch.cat(parts))
            want = torch.cat([_input(r, rows * 3, dtype, seed + 50).reshape(rows, 3) for r in range(nranks)])
            out = torch.empty_like(want)
            if comm.all_gather(block, out=out) is not out:
                failures.append("%s: all_gather(out=) did not return out" % case)
            _check(failures, case + " all_gather", out, want)
    for what, t in (("rows not splitting", torch.ones(nranks * 2 + 1, 3)), ("int64", torch.ones(nranks, 2).long()),
                    ("strided", torch.ones(nranks * 2, 4)[:, ::2])):
        if comm.reduce_scatter(t) is not None:
            failures.append("reduce_scatter of %s was taken" % what)


def _rank_compiled(comm, rank, nranks, failures):
    """The engine's use inside torch.compile(fullgraph=True): the decision and the in-place and
    out-of-place collectives trace (no graph break: fullgraph raises on one), with sizes that vary
    (dynamic), and give the float64 reference's sums."""
    def layer_end(x):
        y = x * 2
        if comm.should_all_reduce(y):
            comm.all_reduce_(y)
        return y + 1

    def functional(x):
        return comm.all_reduce(x) if comm.should_all_reduce(x) else x

    def hook(x):  # an engine's hook as symmar's plugins write it: one call, the engine's path on None
        y = x * 2
        got = comm.try_all_reduce_(y)
        return (y if got is None else got) + 1

    try:
        in_place = torch.compile(layer_end, fullgraph=True, dynamic=True, backend="aot_eager")
        out_of_place = torch.compile(functional, fullgraph=True, dynamic=True, backend="aot_eager")
        taker = torch.compile(hook, fullgraph=True, dynamic=True, backend="aot_eager")
        for seed, (dtype, count) in enumerate((d, c) for d in DTYPES for c in (16, 4099, 65536)):
            case = "compiled world=%d %s count=%d" % (nranks, dtype, count)
            x = _input(rank, count, dtype, 500 + seed)
            want = _expected(nranks, count, dtype, 500 + seed)
            _check(failures, case + " in place", in_place(x), (want.double() * 2 + 1).to(dtype))
            _check(failures, case + " out of place", out_of_place(x), want)
            _check(failures, case + " taker", taker(x), (want.double() * 2 + 1).to(dtype))
    except Exception as e:  # noqa: BLE001  a trace failure is this test's finding
        failures.append("rank %d: compiled: %s: %s" % (rank, type(e).__name__, str(e).splitlines()[0][:300]))


def _rank(rank, nranks, store, out_dir, scenario):
    failures = []
    try:
        dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=nranks)
        if scenario == "serve":
            comm = SymmarCommunicator(None, "cpu", timeout_ms=TIMEOUT_MS)
            if comm.disabled:
                failures.append("disabled: %s" % comm.disabled_reason)
            else:
                _rank_serves(comm, rank, nranks, failures)
                _rank_declines(comm, rank, failures)
                _rank_fused(comm, rank, nranks, failures)
                _rank_scatter_gather(comm, rank, nranks, failures)
                _rank_compiled(comm, rank, nranks, failures)
            comm.close()
            if (not comm.disabled or comm.all_reduce(torch.ones(4)) is not None
                    or comm.try_all_reduce_(torch.ones(4)) is not None):
                failures.append("still serving after close()")
            comm.close()  # idempotent
        elif scenario == "decline":
            # No CUDA here; a device that only one rank cannot serve; a group of one rank; an
            # unknown device type. None of them may raise, and all ranks must agree.
            cases = [("cuda", "cuda:0"), ("one rank on cuda", "cuda:0" if rank == 1 else "cpu"),
                     ("meta", "meta")]
            for what, device in cases:
                comm = SymmarCommunicator(None, device, timeout_ms=TIMEOUT_MS)
                if not comm.disabled or not comm.disabled_reason:
                    failures.append("%s: not disabled (%r)" % (what, comm))
                if comm.all_reduce(torch.ones(4)) is not None or comm.try_all_reduce_(torch.ones(4)) is not None:
                    failures.append("%s: a disabled communicator took a tensor" % what)
                comm.close()
            solo = dist.new_group([0])
            if rank == 0:
                comm = SymmarCommunicator(solo, "cpu")
                if not comm.disabled or "world of 1" not in comm.disabled_reason:
                    failures.append("group of one: %r" % comm)
            # Still usable afterwards: the group and symmar agree after the declines.
            comm = SymmarCommunicator(None, "cpu", timeout_ms=TIMEOUT_MS)
            _check(failures, "after the declines", comm.all_reduce(torch.full((5,), rank + 1.0)),
                   torch.full((5,), nranks * (nranks + 1) / 2))
            comm.close()
        elif scenario == "any":
            comm = SymmarCommunicator(None, "cpu", timeout_ms=TIMEOUT_MS)
            taken = 0
            for seed, count in enumerate(COUNTS[:6]):
                x = _input(rank, count, torch.float32, seed)
                got = comm.all_reduce(x)
                if comm.should_all_reduce(x):
                    taken += 1
                    _check(failures, "world=%d count=%d" % (nranks, count), got,
                           _expected(nranks, count, torch.float32, seed))
                elif got is not None:
                    failures.append("count=%d: declined but served" % count)
            if taken == 0 and not comm.disabled:
                failures.append("enabled but took nothing")
            comm.close()
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001  reported through the file
        failures.append("rank %d raised %s: %s" % (rank, type(e).__name__, e))
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump(failures, f)


def _spawn(nranks, tmp_path, scenario):
    store = str(tmp_path / "store")
    tmp.spawn(_rank, args=(nranks, store, str(tmp_path), scenario), nprocs=nranks, join=True)
    failures = []
    for r in range(nranks):
        with open(tmp_path / ("%d.json" % r)) as f:
            failures += json.load(f)
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("nranks", [2, 3, 4])
def test_communicator_serves_every_dtype_and_size(nranks, tmp_path):
    """World 3 has no measured row of its own (it reuses world 2's)."""
    _spawn(nranks, tmp_path, "serve")


def test_communicator_declines_without_raising(tmp_path):
    _spawn(2, tmp_path, "decline")


def test_communicator_world_no_table_has(tmp_path):
    """World 9: no row of any table; served from the default row, or declined, never an error."""
    _spawn(9, tmp_path, "any")


def test_decline_is_logged_once(caplog, tmp_path):
    """A communicator that cannot be built says why once, at construction, not per tensor."""
    dist.init_process_group("gloo", init_method="file://" + str(tmp_path / "store"), rank=0, world_size=1)
    try:
        with caplog.at_level(logging.INFO, logger="symmar"):
            comm = SymmarCommunicator(None, "cpu")
            for _ in range(3):
                assert comm.all_reduce(torch.ones(4)) is None
                assert not comm.should_custom_ar(torch.ones(4))
        records = [r for r in caplog.records if r.name == "symmar"]
        assert len(records) == 1 and "world of 1" in records[0].getMessage(), records
    finally:
        dist.destroy_process_group()


def test_group_collectives_return_after_the_worker_lets_go(monkeypatch, tmp_path):
    """gloo's worker thread lets go of a collective's tensors a moment after the wait returns, and
    letting go takes the interpreter's lock: if that falls in the interpreter's shutdown (the
    worker starved of CPU while the process exits), torch aborts the process ("terminate called
    without an active exception"). So the communicator's agreement and the bootstrap's allgather
    return only once nothing but Python holds their tensors. Here a late worker is played by views
    (a view holds its base) dropped 50 ms after the collective."""
    import ctypes
    import threading
    from symmar import torch as symmar_torch
    seen = []

    def late(tensors):
        views = [t.view(-1) for t in tensors]
        threading.Timer(0.05, views.clear).start()
        seen.extend(tensors)

    real_gather, real_reduce = dist.all_gather, dist.all_reduce

    def gather(parts, tensor, *args, **kwargs):
        work = real_gather(parts, tensor, *args, **kwargs)
        late(list(parts) + [tensor])
        return work

    def reduce(tensor, *args, **kwargs):
        work = real_reduce(tensor, *args, **kwargs)
        late([tensor])
        return work

    monkeypatch.setattr(dist, "all_gather", gather)
    monkeypatch.setattr(dist, "all_reduce", reduce)
    monkeypatch.setattr(symmar_torch, "_RELEASE_WAIT_S", 60.0)  # a loaded machine may start the timer late
    dist.init_process_group("gloo", init_method="file://" + str(tmp_path / "store"), rank=0, world_size=1)
    try:
        SymmarCommunicator(None, "cpu")
        assert seen, "the communicator took no agreement"
        assert [t._use_count() for t in seen] == [1] * len(seen), "an agreement returned while its tensor was held"
        seen.clear()
        send, recv = ctypes.create_string_buffer(b"symmar!!", 8), ctypes.create_string_buffer(8)
        symmar_torch._GroupAllGather(dist.group.WORLD, 1, torch.device("cpu"), 5000)._gather(
            ctypes.addressof(send), ctypes.addressof(recv), 8)
        assert recv.raw == b"symmar!!"
        assert len(seen) == 2 and [t._use_count() for t in seen] == [1, 1], "an allgather returned while held"
    finally:
        dist.destroy_process_group()


def test_a_closed_comm_lets_go_of_its_group_without_the_garbage_collector(tmp_path):
    """A comm's allgather callback holds the process group. Had it been in a reference cycle (a
    bound method as the C callback), only the garbage collector would free it, so the group and its
    worker threads would outlive close() and destroy_process_group(), up to the interpreter's
    shutdown, where a worker still letting go of a collective's tensors aborts the process (seen
    with gloo on a loaded 2-core machine: "terminate called without an active exception")."""
    import gc
    import weakref
    from symmar import torch as symmar_torch
    dist.init_process_group("gloo", init_method="file://" + str(tmp_path / "store"), rank=0, world_size=1)
    gc.disable()
    try:
        comm = symmar_torch.from_process_group(device="cpu")
        gather = weakref.ref(comm._owner.keepalive)
        assert isinstance(gather(), symmar_torch._GroupAllGather)
        comm.close()
        del comm
        assert gather() is None, "the closed comm's allgather (and its group) waits for the garbage collector"
    finally:
        gc.enable()
        dist.destroy_process_group()
