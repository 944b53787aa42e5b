"""The fused allreduce + residual add + RMSNorm under torch: torch.ops.symmar.all_reduce_add_rms_norm's
compiled kernel, and symmar.integrations.fusion's graph pass, which rewrites a decoder block's end
(allreduce, add, native RMSNorm) into that op under torch.compile's inductor. Every result against
float64 values worked out here: inputs are small integers, so each sum is exact and residual_out
must be equal; the norm within the dtype's rounding.
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
from symmar.integrations import fusion  # noqa: E402

TIMEOUT_MS = 20000
# The norm's tolerance, relative to the largest value of the row: the fp32 result rounded once to
# the dtype, plus fp32's own error.
RTOL = {torch.float32: 1e-5, torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}
# Inductor as an engine compiles: the first form of functionalised in-place ops (vLLM sets it). The
# pass tests compile without inductor's caches (no_compile_cache), so that the pass runs: a graph
# cached by an earlier run skips it.
OPTIONS = {"enable_auto_functionalized_v2": False}


def no_compile_cache():
    import torch._inductor.config as inductor_config
    return inductor_config.patch(force_disable_caches=True)


def _ints(rank, shape, dtype, seed):
    g = torch.Generator().manual_seed(seed * 131 + rank)
    return torch.randint(-8, 9, shape, generator=g).to(dtype)


def _reference(xs, residual, gamma, eps, dtype):
    """(residual_out, norm_out) in float64 from every rank's input, as symmarAllReduceAddRmsNorm
    defines them: the sum rounded to dtype, the row statistics over that."""
    r = sum(x.double() for x in xs) + (residual.double() if residual is not None else 0)
    r = r.to(dtype).double()
    return r, r / torch.sqrt((r * r).mean(-1, keepdim=True) + eps) * gamma.double()


def _check(name, got, want, dtype, failures):
    res, norm = got
    if res.dtype != dtype or not torch.equal(res.double(), want[0]):
        failures.append("%s: residual_out differs from float64" % name)
    scale = want[1].abs().amax(-1, keepdim=True).clamp_min(1e-30)
    err = ((norm.double() - want[1]).abs() / scale).max().item()
    if norm.dtype != dtype or err > RTOL[dtype]:
        failures.append("%s: norm_out off by %.3g of its row's largest value" % (name, err))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fused_op_at_two_ranks_against_float64(dtype):
    # Ranks as threads: dense operands take the compiled kernel where libsymmar_torch is loaded; a
    # strided input and a forced algo go on to the Python kernel; the results (of the in-place op:
    # residual and x after the call) must agree with float64 either way.
    from rank_threads import run_threads
    comms = symmar.Comm.init_all(2, devices=["cpu", "cpu"], timeout_ms=TIMEOUT_MS)
    try:
        handles = [ops.handle(c) for c in comms]
        xs = [_ints(r, (6, 40), dtype, 1) for r in range(2)]
        res, gamma = _ints(5, (6, 40), dtype, 2), _ints(6, (40,), dtype, 3)

        def rank(comm):
            h, x = handles[comm.rank], xs[comm.rank]

            def in_place(xi, ri):  # residual becomes residual_out, x norm_out
                torch.ops.symmar.all_reduce_add_rms_norm_(xi, ri, gamma, h, 1e-5)
                return ri, xi

            return {"dense": torch.ops.symmar.all_reduce_add_rms_norm(x, gamma, res, h, 1e-5),
                    "in place": in_place(x.clone(), res.clone()),
                    "in place, 3-d": in_place(x.clone().view(2, 3, 40), res.clone().view(2, 3, 40)),
                    "in place, strided": in_place(x.t().contiguous().t(), res.clone()),
                    "no residual": torch.ops.symmar.all_reduce_add_rms_norm(x, gamma, None, h, 1e-5),
                    "3-d": torch.ops.symmar.all_reduce_add_rms_norm(x.view(2, 3, 40), gamma, res.view(2, 3, 40),
                                                                    h, 1e-5),
                    "strided": torch.ops.symmar.all_reduce_add_rms_norm(x.t().contiguous().t(), gamma, res, h, 1e-5),
                    "two-shot": torch.ops.symmar.all_reduce_add_rms_norm(x, gamma, res, h, 1e-5, "twoshot")}

        failures = []
        for r, got in enumerate(run_threads(comms, rank)):
            for name, pair in got.items():
                want = _reference(xs, None if name == "no residual" else res, gamma, 1e-5, dtype)
                pair = tuple(t.reshape(6, 40) for t in pair)
                _check("rank %d %s %s" % (r, dtype, name), pair, want, dtype, failures)
        assert not failures, "\n".join(failures)
    finally:
        for c in comms:
            c.close()


# ---- the graph pass ----

def _rms_norm(x, weight, eps, residual=None):
    """A decoder block's RMSNorm as engines write it in eager code (vLLM's native one)."""
    orig = x.dtype
    x = x.to(torch.float32)
    if residual is not None:
        x = x + residual.to(torch.float32)
        residual = x.to(orig)
    variance = x.pow(2).mean(dim=-1, keepdim=True)
    x = x * torch.rsqrt(variance + eps)
    x = x.to(weight.dtype) * weight
    return x.to(orig), residual


def _blocks(h):
    """Three block ends the pass must fuse (float32 and bfloat16 with a residual, bfloat16 without)
    and two it must leave alone (the float32 sum used elsewhere; a max allreduce)."""
    def f(x1, r1, w1, x2, r2, w2, x3, w3, x4, r4, w4, x5, w5):
        outs = []
        y = x1 * 2
        torch.ops.symmar.all_reduce_(y, h)
        outs += _rms_norm(y, w1, 1e-6, r1)
        y = x2 * 2
        torch.ops.symmar.all_reduce_sum_(y, h)              # the sum op the plugins trace
        outs += _rms_norm(y, w2, 1e-5, r2)
        y = x3 * 2
        torch.ops.symmar.all_reduce_(y, h)
        outs += [_rms_norm(y, w3, 1e-6)[0], y + 1]        # the allreduce's sum is the next residual
        y = x4 * 2
        torch.ops.symmar.all_reduce_(y, h)
        outs += _rms_norm(y, w4, 1e-6, r4)
        outs.append((y.float() + r4.float()) * 3)           # the float32 sum used elsewhere: not fused
        y = x5 * 2
        torch.ops.symmar.all_reduce_(y, h, "max")           # not a sum: not fused
        outs.append(_rms_norm(y, w5, 1e-6)[0])
        return outs
    return f


def _block_inputs(rank):
    f32, bf16, shape = torch.float32, torch.bfloat16, (5, 64)
    return [_ints(rank, shape, f32, 1), _ints(9, shape, f32, 2), _ints(9, (64,), f32, 3),
            _ints(rank, shape, bf16, 4), _ints(9, shape, bf16, 5), _ints(9, (64,), bf16, 6),
            _ints(rank, shape, bf16, 7), _ints(9, (64,), bf16, 8),
            _ints(rank, shape, bf16, 9), _ints(9, shape, bf16, 10), _ints(9, (64,), bf16, 11),
            _ints(rank, shape, f32, 12), _ints(9, (64,), f32, 13)]


def _block_failures(outs, nranks, rank):
    """Every output of _blocks against float64 from every rank's inputs."""
    a = [_block_inputs(r) for r in range(nranks)]
    x = lambda i: [2 * ai[i] for ai in a]  # noqa: E731  each rank's y before the allreduce
    mine, failures = a[rank], []
    for i, (xi, ri, wi, eps) in enumerate(((0, 1, 2, 1e-6), (3, 4, 5, 1e-5))):
        dtype = mine[xi].dtype
        want = _reference(x(xi), mine[ri], mine[wi], eps, dtype)
        _check("block %d (%s, residual)" % (i, dtype), (outs[2 * i + 1], outs[2 * i]), want, dtype, failures)
    want = _reference(x(6), None, mine[7], 1e-6, torch.bfloat16)
    _check("block 2 (bfloat16, no residual)", (outs[5] - 1, outs[4]), want, torch.bfloat16, failures)
    want = _reference(x(8), mine[9], mine[10], 1e-6, torch.bfloat16)
    _check("block 3 (float32 sum used elsewhere)", (outs[7], outs[6]), want, torch.bfloat16, failures)
    exact = (sum(v.double() for v in x(8)) + mine[9].double()) * 3
    if not torch.equal(outs[8].double(), exact):
        failures.append("block 3: the float32 sum's other use differs from float64")
    top = torch.stack([v.double() for v in x(11)]).amax(0)
    want_max = top / torch.sqrt((top * top).mean(-1, keepdim=True) + 1e-6) * mine[12].double()
    _check("block 4 (max)", (top.float(), outs[9]), (top, want_max), torch.float32, failures)
    return failures


def test_pass_fuses_the_block_ends_it_should_and_only_those(comm):
    h = ops.handle(comm)
    before = fusion.fused_calls[0]
    f = _blocks(h)
    options = dict(OPTIONS, post_grad_custom_post_pass=fusion.AddRmsNormFusion())
    with no_compile_cache():
        outs = torch.compile(f, fullgraph=True, options=options)(*_block_inputs(0))
    assert fusion.fused_calls[0] - before == 3
    failures = _block_failures(outs, 1, 0)
    assert not failures, "\n".join(failures)


def test_in_place_op_refuses_x_and_residual_in_one_buffer(comm):
    x, gamma = torch.ones(2, 8), torch.ones(8)
    with pytest.raises((ValueError, symmar.SymmarError)):
        torch.ops.symmar.all_reduce_add_rms_norm_(x, x, gamma, ops.handle(comm), 1e-6)
    with pytest.raises((ValueError, symmar.SymmarError)):
        flat = x.view(-1)  # two rows of 8 that share 4 elements
        torch.ops.symmar.all_reduce_add_rms_norm_(flat[:8].view(1, 8), flat[4:12].view(1, 8), gamma, ops.handle(comm), 1e-6)
    assert torch.equal(x, torch.ones(2, 8)), "a refused call wrote its operands"


def _four_layers(reduce_even, reduce_odd):
    """Four block ends as a decoder stack has them (each block's residual_out is the next one's
    residual), the allreduce reduce_even(y) or reduce_odd(y) by layer, each returning the sum,
    compiled with the pass: every chain fused, the result equal to eager code's (float32, one rank:
    the allreduce is the identity). Returns inductor's generated code."""
    from torch._inductor.utils import run_and_get_code

    def f(x, w, r0):
        res, hs = r0 * 1, x
        for i in range(4):
            y = hs * 2  # the row-parallel layer's partial output
            y = reduce_odd(y) if i % 2 else reduce_even(y)
            hs, res = _rms_norm(y, w, 1e-6, res)
        return hs, res

    x, w, r = _ints(0, (3, 64), torch.float32, 1), _ints(1, (64,), torch.float32, 2), _ints(2, (3, 64), torch.float32, 3)
    options = dict(OPTIONS, post_grad_custom_post_pass=fusion.AddRmsNormFusion())
    before = fusion.fused_calls[0]
    with no_compile_cache():
        got, (code,) = run_and_get_code(torch.compile(f, fullgraph=True, options=options), x, w, r)
    assert fusion.fused_calls[0] - before == 4
    want = f(x, w, r)
    for name, a, b in (("norm", got[0], want[0]), ("residual", got[1], want[1])):
        err = ((a - b).abs() / b.abs().amax().clamp_min(1e-30)).max().item()
        assert err < 1e-5, "%s off by %.3g of the largest value" % (name, err)
    return code


def test_pass_threads_the_residual_through_layers_in_place(comm):
    # The in-place sums (all_reduce_sum_ is what the plugins trace): every chain takes the in-place
    # fused op, which inductor runs on the graph's own buffers.
    h = ops.handle(comm)

    def in_place(op):
        def reduce(y):
            op(y, h)
            return y
        return reduce

    code = _four_layers(in_place(torch.ops.symmar.all_reduce_), in_place(torch.ops.symmar.all_reduce_sum_))
    assert code.count("symmar.all_reduce_add_rms_norm_.default(") == 4, code
    assert "symmar.all_reduce_add_rms_norm.default(" not in code and "symmar.all_reduce_.default(" not in code
    assert "symmar.all_reduce_sum_.default(" not in code


def test_pass_fuses_out_of_place_sums(comm):
    # The plugins' out-of-place path (CUDA tensors) traces all_reduce_sum; all_reduce with its op
    # argument is matched too.
    h = ops.handle(comm)
    code = _four_layers(lambda y: torch.ops.symmar.all_reduce(y, h), lambda y: torch.ops.symmar.all_reduce_sum(y, h))
    assert "symmar.all_reduce_sum.default(" not in code and "symmar.all_reduce.default(" not in code, code


def test_pass_uuid_names_its_source():
    a, b = fusion.AddRmsNormFusion().uuid(), fusion.AddRmsNormFusion().uuid()
    assert a == b and a.startswith("symmar-add-rms-norm-")


def _pass_rank(rank, nranks, store, out_dir):
    failures, fused = [], -1
    try:
        dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=nranks)
        comm = symmar.Comm.from_process_group(None, "cpu", timeout_ms=TIMEOUT_MS)
        options = dict(OPTIONS, post_grad_custom_post_pass=fusion.AddRmsNormFusion())
        with no_compile_cache():
            outs = torch.compile(_blocks(ops.handle(comm)), fullgraph=True, options=options)(*_block_inputs(rank))
        fused = fusion.fused_calls[0]
        failures = _block_failures(outs, nranks, rank)
        comm.close()
        dist.destroy_process_group()
    except BaseException as e:  # reported, then the process exits with an error
        failures.append("exception: %r" % e)
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump({"failures": failures, "fused": fused}, f)


def test_pass_at_two_ranks_against_float64(tmp_path):
    tmp.spawn(_pass_rank, args=(2, str(tmp_path / "store"), str(tmp_path)), nprocs=2, join=True)
    for r in range(2):
        with open(tmp_path / ("%d.json" % r)) as f:
            res = json.load(f)
        assert not res["failures"], "rank %d:\n%s" % (r, "\n".join(res["failures"][:20]))
        assert res["fused"] == 3, "rank %d fused %d block ends" % (r, res["fused"])


@pytest.fixture
def comm():
    (c,) = symmar.Comm.init_all(1, devices=["cpu"])
    yield c
    c.close()
