"""torch.ops.symmar (symmar.ops): the custom ops that let torch.compile(fullgraph=True) trace through
symmar. Ranks are launched by torch.multiprocessing.spawn over a gloo group, as in test_torch.py;
the one-process checks use a one-rank host comm.

Inputs are small integers, so every sum, product and max below is exact in float32 and bfloat16
whatever the summation order: compiled, eager and gloo results must agree bit for bit. Inductor
compiles C++ on this CPU (tens of seconds cold on two cores), so it runs in one multi-rank case;
the other runs aot_eager, which traces the same graph (dynamo + functionalization) without codegen.
"""
import json
import os

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs it in its cached venv)")
dist = pytest.importorskip("torch.distributed", reason="this PyTorch has no torch.distributed")
if not dist.is_available():
    pytest.skip("this PyTorch was built without torch.distributed", allow_module_level=True)

import torch.multiprocessing as tmp  # noqa: E402

import symmar  # noqa: E402
import symmar.torch  # noqa: E402,F401  registers torch.ops.symmar
from symmar import ops  # noqa: E402

TIMEOUT_MS = 20000
DTYPES = ["float32", "bfloat16"]


def _ints(rank, shape, dtype, seed):
    g = torch.Generator().manual_seed(seed * 131 + rank)
    return torch.randint(-8, 9, shape, generator=g).to(getattr(torch, dtype))


def _model(reduce_, reduce):
    """Tensor math around an in-place and an out-of-place allreduce; reduce_/reduce are either the
    symmar ops or torch.distributed's, so the same function gives the reference."""
    def f(x):
        y = x * 2 + 1
        reduce_(y)                    # an intermediate, reduced in place
        z = reduce(y * 3, "max")
        return y.relu() + z, y - 1
    return f


def _graph_input_model(reduce_):
    def g(x):
        reduce_(x)                    # a graph input mutated in place: the caller must see it
        return x * 2
    return g


def _dist_reduce(t, op="sum"):
    dist.all_reduce(t, op={"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}[op])


def _dist_out(t, op="sum"):
    t = t.clone()
    _dist_reduce(t, op)
    return t


def _compile_rank(rank, nranks, store, out_dir, backend):
    """Every check on one rank; failures are collected (a rank must not stop early: its peers would
    wait for its collectives) and written to out_dir/rank.json."""
    failures, checked = [], 0
    try:
        dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=nranks)
        comm = symmar.Comm.from_process_group(None, "cpu", timeout_ms=TIMEOUT_MS)
        h = ops.handle(comm)
        sym = _model(lambda t: torch.ops.symmar.all_reduce_(t, h), lambda t, op: torch.ops.symmar.all_reduce(t, h, op))
        compiled = torch.compile(sym, fullgraph=True, backend=backend)
        ref = _model(_dist_reduce, _dist_out)
        g_sym = _graph_input_model(lambda t: torch.ops.symmar.all_reduce_(t, h))
        g_compiled = torch.compile(g_sym, fullgraph=True, backend=backend)
        s_sym = _graph_input_model(lambda t: torch.ops.symmar.all_reduce_sum_(t, h))
        s_compiled = torch.compile(s_sym, fullgraph=True, backend=backend)
        o_sym = lambda t: torch.ops.symmar.all_reduce_sum(t * 1, h)  # noqa: E731  out of place
        o_compiled = torch.compile(o_sym, fullgraph=True, backend=backend)
        for seed, dtype in enumerate(DTYPES):
            case = "%s world=%d %s" % (dtype, nranks, backend)
            x = _ints(rank, (4, 33), dtype, seed)
            got, eager, want = compiled(x), sym(x), ref(x)
            checked += 1
            for name, a in (("compiled", got), ("eager", eager)):
                for i, (u, v) in enumerate(zip(a, want)):
                    if u.dtype != v.dtype or not torch.equal(u, v):
                        failures.append("%s: %s output %d differs from gloo" % (case, name, i))
            xs = [x.clone() for _ in range(5)]
            outs = [g_compiled(xs[0]), g_sym(xs[1]), s_compiled(xs[2]), s_sym(xs[3]),
                    _graph_input_model(_dist_reduce)(xs[4])]
            if not all(torch.equal(t, xs[4]) for t in xs[:4]) or not all(torch.equal(o, outs[4]) for o in outs[:4]):
                failures.append(case + ": a mutated graph input differs from gloo's in-place result")
            for name, a in (("compiled", o_compiled(x)), ("eager", o_sym(x))):
                if a.dtype != x.dtype or not torch.equal(a, xs[4]):
                    failures.append("%s: %s all_reduce_sum differs from gloo" % (case, name))
        # the fused op against the binding's own call, eager and compiled (aot_eager: no codegen)
        fused = torch.compile(lambda *a: torch.ops.symmar.all_reduce_add_rms_norm(*a), fullgraph=True,
                              backend="aot_eager")
        for seed, dtype in enumerate(DTYPES, 10):
            x, res = _ints(rank, (3, 64), dtype, seed), _ints(rank, (3, 64), dtype, seed + 50)
            gamma = _ints(0, (64,), dtype, seed + 99)  # the same weights on every rank
            want = comm.all_reduce_add_rms_norm(x, gamma, eps=1e-5, residual=res)
            for name, fn in (("op", torch.ops.symmar.all_reduce_add_rms_norm), ("compiled op", fused)):
                got = fn(x, gamma, res, h, 1e-5)
                if not all(torch.equal(u, v) for u, v in zip(got, want)):
                    failures.append("fused %s %s world=%d differs from the binding" % (name, dtype, nranks))
        # reduce-scatter and all-gather, compiled (aot_eager) and eager, against gloo's allreduce and
        # all_gather of the same inputs
        rs = torch.compile(lambda t, op: torch.ops.symmar.reduce_scatter(t * 2, h, op), fullgraph=True,
                           backend="aot_eager")
        ag = torch.compile(lambda t: torch.ops.symmar.all_gather(t + 1, h), fullgraph=True, backend="aot_eager")
        for seed, dtype in enumerate(DTYPES, 20):
            x = _ints(rank, (2 * nranks, 5), dtype, seed)
            for op in ("sum", "max"):
                want = _dist_out(x * 2, op)[2 * rank:2 * rank + 2]
                for name, got in (("compiled", rs(x, op)), ("eager", torch.ops.symmar.reduce_scatter(x * 2, h, op))):
                    if got.shape != want.shape or not torch.equal(got, want):
                        failures.append("reduce_scatter %s %s %s world=%d differs from gloo" % (name, op, dtype, nranks))
            parts = [torch.empty_like(x) for _ in range(nranks)]
            dist.all_gather(parts, x + 1)
            want = torch.cat(parts)
            for name, got in (("compiled", ag(x)), ("eager", torch.ops.symmar.all_gather(x + 1, h))):
                if got.shape != want.shape or not torch.equal(got, want):
                    failures.append("all_gather %s %s world=%d differs from gloo" % (name, dtype, nranks))
        comm.close()
        dist.destroy_process_group()
    except BaseException as e:  # reported, then the process exits with an error
        failures.append("exception: %r" % e)
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump({"failures": failures, "checked": checked}, f)


@pytest.mark.parametrize("nranks,backend", [(2, "inductor"), (4, "aot_eager")])
def test_compiled_ops_match_eager_and_gloo(nranks, backend, tmp_path):
    tmp.spawn(_compile_rank, args=(nranks, str(tmp_path / "store"), str(tmp_path), backend), nprocs=nranks,
              join=True)
    for r in range(nranks):
        with open(tmp_path / ("%d.json" % r)) as f:
            res = json.load(f)
        assert not res["failures"], "rank %d:\n%s" % (r, "\n".join(res["failures"][:20]))
        assert res["checked"] == len(DTYPES)


# ---- one process, one rank ----

@pytest.fixture
def comm():
    (c,) = symmar.Comm.init_all(1, devices=["cpu"])
    yield c
    c.close()


def test_schemas_declare_the_mutation():
    assert str(torch.ops.symmar.all_reduce_.default._schema) == \
        'symmar::all_reduce_(Tensor(a!) x, int comm, str op="sum") -> ()'
    assert str(torch.ops.symmar.all_reduce.default._schema) == \
        'symmar::all_reduce(Tensor x, int comm, str op="sum") -> Tensor'
    assert str(torch.ops.symmar.all_reduce_sum_.default._schema) == 'symmar::all_reduce_sum_(Tensor(a!) x, int comm) -> ()'
    assert str(torch.ops.symmar.all_reduce_sum.default._schema) == 'symmar::all_reduce_sum(Tensor x, int comm) -> Tensor'
    assert str(torch.ops.symmar.reduce_scatter_sum.default._schema) == \
        'symmar::reduce_scatter_sum(Tensor x, int comm) -> Tensor'
    fused = torch.ops.symmar.all_reduce_add_rms_norm.default._schema
    assert not any(a.alias_info is not None and a.alias_info.is_write for a in fused.arguments)
    assert len(fused.returns) == 2
    in_place = torch.ops.symmar.all_reduce_add_rms_norm_.default._schema
    assert [a.name for a in in_place.arguments if a.alias_info is not None and a.alias_info.is_write] == \
        ["x", "residual"]
    assert not in_place.returns


def test_opcheck(comm):
    h = ops.handle(comm)
    x = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for op, args in ((torch.ops.symmar.all_reduce_.default, (x.clone(), h)),
                     (torch.ops.symmar.all_reduce_.default, (x.clone().bfloat16(), h, "max")),
                     (torch.ops.symmar.all_reduce_sum_.default, (x.clone(), h)),
                     (torch.ops.symmar.all_reduce.default, (x, h)),
                     (torch.ops.symmar.all_reduce_sum.default, (x, h)),
                     (torch.ops.symmar.all_reduce_sum.default, (x.t(), h)),  # strided: made dense
                     (torch.ops.symmar.all_reduce.default, (x.t(), h, "avg")),  # strided: made dense
                     (torch.ops.symmar.all_reduce_add_rms_norm.default, (x, torch.ones(6), x + 1, h, 1e-5)),
                     (torch.ops.symmar.all_reduce_add_rms_norm.default, (x.bfloat16(), torch.ones(6).bfloat16(),
                                                                         None, h)),
                     (torch.ops.symmar.all_reduce_add_rms_norm_.default, (x.clone(), x + 1, torch.ones(6), h, 1e-5)),
                     (torch.ops.symmar.all_reduce_add_rms_norm_.default, (x.t().contiguous().t(), x + 1,
                                                                          torch.ones(6), h)),  # strided: copied back
                     (torch.ops.symmar.reduce_scatter.default, (x, h, "min")),
                     (torch.ops.symmar.reduce_scatter_sum.default, (x, h)),
                     (torch.ops.symmar.reduce_scatter_sum.default, (x.t(), h)),  # strided: made dense
                     (torch.ops.symmar.all_gather.default, (x.t(), h))):
        torch.library.opcheck(op, args)  # schema, fake vs real, autograd registration, aot dispatch


def test_no_graph_break_and_ops_in_the_graph(comm):
    h = ops.handle(comm)
    f = _model(lambda t: torch.ops.symmar.all_reduce_(t, h), lambda t, op: torch.ops.symmar.all_reduce(t, h, op))
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    explain = torch._dynamo.explain(f)(x)
    assert explain.graph_break_count == 0 and explain.graph_count == 1, explain.break_reasons
    targets = {n.target for n in explain.graphs[0].graph.nodes if n.op == "call_function"}
    assert torch.ops.symmar.all_reduce_.default in targets or torch.ops.symmar.all_reduce_ in targets
    assert torch.ops.symmar.all_reduce.default in targets or torch.ops.symmar.all_reduce in targets
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(x)
    assert all(torch.equal(u, v) for u, v in zip(got, f(x)))  # one rank: the identity reduce


def test_the_sum_op_reaches_inductors_code_without_a_keyword(comm):
    # Inductor's generated code spells every argument that has a default as a keyword
    # (all_reduce_(buf, h, op='sum')), which costs about 0.36 us a call in torch's argument parsing;
    # all_reduce_sum_, which the plugins trace, has no such argument.
    import torch._inductor.config as inductor_config
    from torch._inductor.utils import run_and_get_code
    h = ops.handle(comm)

    def f(x):
        y = x * 2
        torch.ops.symmar.all_reduce_sum_(y, h)
        z = torch.ops.symmar.all_reduce_sum(y + 1, h) * 3  # and the out-of-place sum
        return torch.ops.symmar.reduce_scatter_sum(z - 1, h)  # and the reduce-scatter's

    x = torch.arange(6, dtype=torch.float32)
    with inductor_config.patch(force_disable_caches=True):
        got, (code,) = run_and_get_code(torch.compile(f, fullgraph=True), x)
    assert torch.equal(got, (x * 2 + 1) * 3 - 1)  # one rank: the sum is the identity
    for name in ("all_reduce_sum_", "all_reduce_sum", "reduce_scatter_sum"):
        calls = [line for line in code.splitlines() if "symmar.%s.default(" % name in line]
        assert len(calls) == 1, code
        assert "=" not in calls[0].split("%s.default(" % name, 1)[1], calls[0]


def test_fused_op_matches_the_binding(comm):
    h = ops.handle(comm)
    g = torch.Generator().manual_seed(7)
    x, res, gamma = torch.randn(5, 32, generator=g), torch.randn(5, 32, generator=g), torch.randn(32, generator=g)
    want = comm.all_reduce_add_rms_norm(x, gamma, eps=1e-5, residual=res)
    got = torch.ops.symmar.all_reduce_add_rms_norm(x, gamma, res, h, 1e-5)
    assert all(torch.equal(u, v) for u, v in zip(got, want))
    got = torch.ops.symmar.all_reduce_add_rms_norm(x, gamma, None, h)  # no residual, default eps
    want = comm.all_reduce_add_rms_norm(x, gamma)
    assert all(torch.equal(u, v) for u, v in zip(got, want))


def test_handles(comm):
    h = ops.handle(comm)
    assert isinstance(h, int) and h > 0 and ops.handle(comm) == h and ops.comm_of(h) is comm
    (other,) = symmar.Comm.init_all(1, devices=["cpu"])
    h2 = ops.handle(other)
    assert h2 != h
    other.close()
    with pytest.raises(symmar.SymmarError, match="closed"):
        torch.ops.symmar.all_reduce_(torch.ones(3), h2)  # the binding's own error for a closed comm
    del other
    import gc
    gc.collect()
    with pytest.raises(ValueError, match="no comm has handle"):
        torch.ops.symmar.all_reduce_(torch.ones(3), h2)  # the registry holds comms weakly
    for bad in (0, 123456789):
        with pytest.raises(ValueError, match="no comm has handle"):
            torch.ops.symmar.all_reduce(torch.ones(3), bad)
    with pytest.raises(TypeError):
        ops.handle(h)


def test_binding_checks_still_apply(comm):
    h = ops.handle(comm)
    with pytest.raises(ValueError):
        torch.ops.symmar.all_reduce_(torch.zeros(8)[::2], h)  # in place on a strided tensor: refused
    with pytest.raises(ValueError):
        torch.ops.symmar.all_reduce_(torch.zeros(4), h, "product")
    with pytest.raises(ValueError):
        torch.ops.symmar.all_reduce_add_rms_norm(torch.zeros(2, 4), torch.ones(3), None, h)


def test_in_place_op_bumps_the_version(comm):
    h = ops.handle(comm)
    a = torch.ones(4, requires_grad=True)
    b = a * 1
    y = b * b  # saves b for its backward
    torch.ops.symmar.all_reduce_(b, h)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


# ---- the compiled kernels (libsymmar_torch) ----

def test_compiled_kernels_load_where_built():
    beside = os.path.join(os.path.dirname(symmar._lib.library_path()), "libsymmar_torch.so")
    if os.environ.get("SYMMAR_TORCH_OPS") == "python":
        pytest.skip("SYMMAR_TORCH_OPS=python keeps the Python kernels")
    if not os.path.exists(beside):
        pytest.skip("no libsymmar_torch.so beside %s (built only where CMake found a Python with torch)"
                    % symmar._lib.library_path())
    assert ops.compiled, "libsymmar_torch.so is beside libsymmar but symmar.ops did not load it"


def test_try_op_takes_only_the_spans_set_for_it():
    if ops.TRY_ALL_REDUCE_ is None:
        pytest.skip("try_all_reduce_ is a compiled kernel only: no libsymmar_torch loaded here")
    (c,) = symmar.Comm.init_all(1, devices=["cpu"])  # one rank: the sum is the input itself
    h = ops.handle(c)
    try_op = torch.ops.symmar.try_all_reduce_
    x = torch.arange(8, dtype=torch.float32)
    assert not try_op(x, h), "no span set yet: nothing is taken"
    ops.set_taken_spans(h, {"float32": (4, 16)})
    version = x._version
    assert try_op(x, h) and torch.equal(x, torch.arange(8, dtype=torch.float32))
    assert x._version > version, "taken in place: the version counter moves as for all_reduce_"
    for what, t in (("3 elements", torch.ones(3)), ("17 elements", torch.ones(17)),
                    ("float64", torch.ones(8, dtype=torch.float64)), ("bfloat16", torch.ones(8, dtype=torch.bfloat16)),
                    ("strided", torch.ones(16)[::2]), ("empty", torch.ones(0))):
        before = t._version
        assert not try_op(t, h), what
        assert t._version == before, "%s: declined, yet written" % what
    ops.set_taken_spans(h, {})
    assert not try_op(x, h), "spans cleared: nothing is taken"
    ops.set_taken_spans(h, {"float32": (4, 16)})
    c.close()
    assert not try_op(x, h), "a closed comm takes nothing (and does not raise)"


def test_compiled_kernels_built_against_another_torch_are_not_loaded(tmp_path, caplog):
    # An empty file stands for the library: loading it would fail with another message, so the
    # refusal below is made before any load (a library built for another torch may load, then
    # corrupt memory).
    (tmp_path / "libsymmar_torch.so").write_bytes(b"")
    with caplog.at_level("WARNING", logger="symmar"):
        assert ops._load_compiled(str(tmp_path)) is None
    assert "no libsymmar_torch.torch-version" in caplog.text, caplog.text
    caplog.clear()
    (tmp_path / "libsymmar_torch.torch-version").write_text("0.0.1-another\n")
    with caplog.at_level("WARNING", logger="symmar"):
        assert ops._load_compiled(str(tmp_path)) is None
    assert "built against torch 0.0.1-another, this process runs torch " + torch.__version__ in caplog.text


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "float64"])
def test_every_dtype_and_op_at_two_ranks_against_float64(dtype):
    # Ranks as threads of this process: each call below blocks until its peer's, so a kernel that
    # held the GIL through the collective would hang here.
    from rank_threads import run_threads
    comms = symmar.Comm.init_all(2, devices=["cpu", "cpu"], timeout_ms=TIMEOUT_MS)
    try:
        handles = [ops.handle(c) for c in comms]
        inputs = [torch.tensor([3, -7, 12, 5, -1, 8, 0, 2], dtype=torch.float64) * (r + 1) + r for r in range(2)]
        want = {"sum": inputs[0] + inputs[1], "max": torch.maximum(*inputs), "min": torch.minimum(*inputs)}
        want["avg"] = want["sum"] / 2 if dtype != "int32" else None

        def rank(comm):
            r = comm.rank
            got = {}
            for op in ("sum", "max", "min", "avg"):
                if want[op] is None:
                    continue
                x = inputs[r].to(getattr(torch, dtype), copy=True)
                got[op, "out"] = torch.ops.symmar.all_reduce(x, handles[r], op)
                torch.ops.symmar.all_reduce_(x, handles[r], op)
                got[op, "in"] = x
            return got

        for r, got in enumerate(run_threads(comms, rank)):
            for (op, form), t in got.items():
                assert t.dtype == getattr(torch, dtype) and t.is_contiguous()
                assert torch.equal(t.double(), want[op]), "rank %d %s %s: %s != %s" % (r, op, form, t, want[op])
    finally:
        for c in comms:
            c.close()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "float64"])
def test_gathers_of_every_dtype_at_two_ranks_against_float64(dtype):
    # all_gather and reduce_scatter: dense tensors take the compiled kernels where they are loaded;
    # a 0-dim tensor, a strided one and op "avg" go on to the Python kernels. Every result against
    # float64 values worked out here.
    from rank_threads import run_threads
    comms = symmar.Comm.init_all(2, devices=["cpu", "cpu"], timeout_ms=TIMEOUT_MS)
    try:
        handles = [ops.handle(c) for c in comms]
        inputs = [torch.tensor([[3, -7, 12], [5, -1, 8], [0, 2, 4], [-6, 9, 1]], dtype=torch.float64) * (r + 1) + r
                  for r in range(2)]
        want_rs = {"sum": inputs[0] + inputs[1], "max": torch.maximum(*inputs), "min": torch.minimum(*inputs)}
        if dtype != "int32":
            want_rs["avg"] = want_rs["sum"] / 2
        t = getattr(torch, dtype)

        def rank(comm):
            r = comm.rank
            x = inputs[r].to(t)
            got = {"gather": torch.ops.symmar.all_gather(x, handles[r]),
                   "gather strided": torch.ops.symmar.all_gather(x.t(), handles[r]),
                   "gather 0-dim": torch.ops.symmar.all_gather(x[1, 2].clone(), handles[r])}
            for op in want_rs:
                got["scatter " + op] = torch.ops.symmar.reduce_scatter(x, handles[r], op)
            return got

        for r, got in enumerate(run_threads(comms, rank)):
            want = {"gather": torch.cat(inputs), "gather strided": torch.cat([i.t() for i in inputs]),
                    "gather 0-dim": torch.stack([i[1, 2] for i in inputs])}
            for op, w in want_rs.items():
                want["scatter " + op] = w[2 * r:2 * r + 2]
            for name, g in got.items():
                assert g.dtype == t and g.is_contiguous(), name
                assert torch.equal(g.double(), want[name]), "rank %d %s: %s != %s" % (r, name, g, want[name])
    finally:
        for c in comms:
            c.close()


def test_a_failed_collective_raises_the_binding_error():
    comms = symmar.Comm.init_all(2, devices=["cpu", "cpu"], timeout_ms=300)
    try:
        h = ops.handle(comms[0])
        for call in (lambda: torch.ops.symmar.all_reduce_(torch.ones(4), h),
                     lambda: torch.ops.symmar.all_reduce(torch.ones(4), h),
                     lambda: torch.ops.symmar.all_gather(torch.ones(4), h),
                     lambda: torch.ops.symmar.reduce_scatter(torch.ones(4), h),
                     lambda: torch.ops.symmar.all_reduce_add_rms_norm(torch.ones(2, 4), torch.ones(4), None, h)):
            with pytest.raises(symmar.SymmarError):  # rank 1 never calls: rank 0 gives up
                call()
    finally:
        for c in comms:
            c.close()
    # The in-place fused op as the call that times out (not only on a comm already failed).
    comms = symmar.Comm.init_all(2, devices=["cpu", "cpu"], timeout_ms=300)
    try:
        with pytest.raises(symmar.SymmarError):
            torch.ops.symmar.all_reduce_add_rms_norm_(torch.ones(2, 4), torch.ones(2, 4), torch.ones(4),
                                                      ops.handle(comms[0]))
    finally:
        for c in comms:
            c.close()
