"""Comm.all_reduce_add_rms_norm on the host backend: ranks are threads of this process
(Comm.init_all), worlds 2 and 4. Outputs are checked against a float64 NumPy reference (tolerance
per dtype), bitwise across ranks, with and without residual, in place, NumPy and torch; the FP8
output against an independent NumPy E4M3 quantizer (nearest value, ties to the even code,
saturation at 448); bad arguments refused before anything is written."""

import numpy as np
import pytest

import symmar
from rank_threads import run_threads

# Relative tolerances (of max |value| of the row) for residual_out (an fp32 sum rounded once) and
# norm_out (the norm of the stored residual in fp32, rounded once): a few units of the dtype's
# rounding, with headroom for fp32 sums.
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}
DTYPES = list(TOL)
EPS = 1e-6


@pytest.fixture(scope="module", params=[2, 4])
def comms(request):
    comms = symmar.Comm.init_all(request.param, devices=["cpu"] * request.param, timeout_ms=20000)
    yield comms
    for c in comms:
        c.close()


# ---- dtype helpers: bf16 is NumPy uint16 bit patterns ----

def _bf16_bits(values):
    """float64 -> bf16 bits, rounded to nearest even (values here are finite)."""
    u = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _store(values, dtype):
    return _bf16_bits(values) if dtype == "bfloat16" else np.asarray(values, dtype=dtype)


def _load(arr, dtype):
    if dtype == "bfloat16":
        return (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return arr.astype(np.float64)


def _kw(dtype):
    return {"dtype": "bfloat16"} if dtype == "bfloat16" else {}


def _inputs(rank, tokens, hidden, dtype, seed=0):
    rng = np.random.default_rng(1000 * seed + rank)
    x = _store(rng.uniform(-2, 2, (tokens, hidden)), dtype)
    shared = np.random.default_rng(7 + seed)  # residual and gamma: the same on every rank
    res = _store(shared.uniform(-3, 3, (tokens, hidden)), dtype)
    gamma = _store(shared.uniform(0.5, 1.5, hidden), dtype)
    return x, res, gamma


def _reference(nranks, tokens, hidden, dtype, with_residual, seed=0):
    """float64: the sum of the ranks' inputs as stored, plus the residual; the norm of that."""
    total = sum(_load(_inputs(r, tokens, hidden, dtype, seed)[0], dtype) for r in range(nranks))
    _, res, gamma = _inputs(0, tokens, hidden, dtype, seed)
    if with_residual:
        total = total + _load(res, dtype)
    inv = 1.0 / np.sqrt(np.mean(total * total, axis=1, keepdims=True) + EPS)
    return total, total * inv * _load(gamma, dtype)


def _close(got, want, dtype, what):
    scale = np.maximum(np.abs(want).max(axis=-1, keepdims=True), 1e-30)
    err = (np.abs(got - want) / scale).max()
    assert err <= TOL[dtype], "%s: relative error %.3g above %.3g (%s)" % (what, err, TOL[dtype], dtype)


# ---- independent E4M3 reference ----

def _e4m3_table():
    """The value of every non-negative finite code 0x00..0x7e (bias 7, 3 mantissa bits)."""
    codes = np.arange(0x7F)
    e, m = codes >> 3, codes & 7
    return np.where(e == 0, np.ldexp(m / 8.0, -6), np.ldexp(1.0 + m / 8.0, e - 7))


E4M3 = _e4m3_table()


def _quantize(values):
    """Nearest E4M3 value by search over all codes, ties to the even code, |v| >= 448 -> 448."""
    v = np.asarray(values, dtype=np.float64).ravel()
    a = np.minimum(np.abs(v), 448.0)
    d = np.abs(E4M3[None, :] - a[:, None])
    best = d.min(axis=1, keepdims=True)
    ties = d == best
    even = ties & (np.arange(0x7F)[None, :] % 2 == 0)
    code = np.where(even.any(axis=1), even.argmax(axis=1), ties.argmax(axis=1))
    return (code | np.where(np.signbit(v), 0x80, 0)).astype(np.uint8).reshape(np.shape(values))


def _decode(codes):
    c = np.asarray(codes).astype(np.int64)
    return np.where(c & 0x80, -1.0, 1.0) * E4M3[c & 0x7F]


def test_quantizer_reference_itself():
    assert _quantize([0.0, 448.0, 1000.0, -1e9, 1.0, -1.0]).tolist() == [0, 0x7E, 0x7E, 0xFE, 0x38, 0xB8]
    # 1.0625 lies halfway between 1.0 (0x38, even) and 1.125 (0x39): ties go to the even code
    assert _quantize([1.0625, 1.1875]).tolist() == [0x38, 0x3A]
    assert _quantize([2.0 ** -9, 2.0 ** -10]).tolist() == [1, 0]  # smallest subnormal; its half -> 0


# ---- the checks ----

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_residual", [True, False])
@pytest.mark.parametrize("algo", ["auto", "oneshot", "twoshot"])
@pytest.mark.parametrize("tokens,hidden", [(1, 7168), (7, 128), (64, 4096)])
def test_matches_float64_and_ranks_agree(comms, dtype, with_residual, algo, tokens, hidden):
    n = len(comms)

    def rank(comm):
        x, res, gamma = _inputs(comm.rank, tokens, hidden, dtype)
        x_before = x.copy()
        out = comm.all_reduce_add_rms_norm(x, gamma, eps=EPS, residual=res if with_residual else None, algo=algo,
                                           **_kw(dtype))
        assert np.array_equal(x, x_before), "x was written out of place"
        return out

    outs = run_threads(comms, rank)
    want_res, want_norm = _reference(n, tokens, hidden, dtype, with_residual)
    for r, (res_out, norm_out) in enumerate(outs):
        assert res_out.shape == (tokens, hidden) and res_out.dtype == _store([0.0], dtype).dtype
        assert np.array_equal(res_out, outs[0][0]) and np.array_equal(norm_out, outs[0][1]), "rank %d differs" % r
    _close(_load(outs[0][0], dtype), want_res, dtype, "residual_out")
    _close(_load(outs[0][1], dtype), want_norm, dtype, "norm_out")


@pytest.mark.parametrize("dtype", DTYPES)
def test_in_place_forms(comms, dtype):
    """residual_out over residual with norm_out over x (the engines' form), and the other way round."""
    tokens, hidden = 5, 1000
    want_res, want_norm = _reference(len(comms), tokens, hidden, dtype, True)

    def rank(comm):
        got = []
        for res_into_residual in (True, False):
            x, res, gamma = _inputs(comm.rank, tokens, hidden, dtype)
            if res_into_residual:
                r_out, n_out = comm.all_reduce_add_rms_norm(x, gamma, EPS, residual=res, residual_out=res,
                                                            norm_out=x, **_kw(dtype))
            else:
                r_out, n_out = comm.all_reduce_add_rms_norm(x, gamma, EPS, residual=res, residual_out=x,
                                                            norm_out=res, **_kw(dtype))
            assert r_out is (res if res_into_residual else x) and n_out is (x if res_into_residual else res)
            got.append((r_out.copy(), n_out.copy()))
        return got

    outs = run_threads(comms, rank)
    for per_rank in outs:
        for r_out, n_out in per_rank:
            assert np.array_equal(r_out, outs[0][0][0]) and np.array_equal(n_out, outs[0][0][1])
    _close(_load(outs[0][0][0], dtype), want_res, dtype, "residual_out")
    _close(_load(outs[0][0][1], dtype), want_norm, dtype, "norm_out")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", [0.05, 1.0 / 128])
def test_fp8_output_against_reference_quantizer(comms, dtype, scale):
    tokens, hidden = 9, 512

    def rank(comm):
        x, res, gamma = _inputs(comm.rank, tokens, hidden, dtype, seed=3)
        return comm.all_reduce_add_rms_norm(x, gamma, EPS, residual=res, fp8_scale=scale, **_kw(dtype))

    outs = run_threads(comms, rank)
    for o in outs:
        assert o[2].dtype == np.uint8 and o[2].shape == (tokens, hidden)
        assert np.array_equal(o[2], outs[0][2]), "fp8 output differs across ranks"
    _, norm, q = outs[0]
    if dtype == "float32":
        # norm_out holds the fp32 norm itself: the codes must be exactly the reference's
        want = _quantize(norm.astype(np.float32) / np.float32(scale))
        assert np.array_equal(q, want), "%d codes differ" % int((q != want).sum())
    else:
        # the fp32 norm is not visible: the code must be the reference's for the float64 norm, or
        # its neighbour where the norm's rounding error straddles a rounding boundary
        _, want_norm = _reference(len(comms), tokens, hidden, dtype, True, seed=3)
        target = want_norm / scale
        want = _quantize(target)
        step = np.abs(_decode(want) - _decode(np.where(want & 0x7F, want - 1, want + 1)))
        near = np.abs(_decode(q) - np.clip(target, -448, 448)) <= step + TOL[dtype] * np.abs(target) + 1e-12
        assert near.all(), "%d codes off by more than one step" % int((~near).sum())
        assert (q == want).mean() > 0.9
    if scale < 0.01:  # norms above 3.5 saturate at 448 with this scale: the test reaches saturation
        assert (np.abs(_decode(q)) == 448).any()


def test_torch_tensors_and_bf16(comms):
    torch = pytest.importorskip("torch", reason="torch is not installed in this environment")
    tokens, hidden = 3, 256
    want_res, want_norm = _reference(len(comms), tokens, hidden, "bfloat16", True)

    def rank(comm):
        x, res, gamma = _inputs(comm.rank, tokens, hidden, "bfloat16")
        as_t = lambda a: torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)  # noqa: E731
        tx, tres, tg = as_t(x), as_t(res), as_t(gamma)
        r_out, n_out, q = comm.all_reduce_add_rms_norm(tx, tg, residual=tres, residual_out=tres, fp8_scale=0.5)
        assert r_out is tres and n_out.dtype == torch.bfloat16 and q.dtype == torch.uint8
        return (r_out.view(torch.int16).numpy().view(np.uint16).copy(),
                n_out.view(torch.int16).numpy().view(np.uint16).copy(), q.numpy().copy())

    outs = run_threads(comms, rank)
    for o in outs:
        assert all(np.array_equal(a, b) for a, b in zip(o, outs[0]))
    _close(_load(outs[0][0], "bfloat16"), want_res, "bfloat16", "residual_out (torch)")
    _close(_load(outs[0][1], "bfloat16"), want_norm, "bfloat16", "norm_out (torch)")


def test_float32_torch_matches_numpy(comms):
    torch = pytest.importorskip("torch", reason="torch is not installed in this environment")

    def rank(comm):
        x, res, gamma = _inputs(comm.rank, 4, 96, "float32")
        a = comm.all_reduce_add_rms_norm(x, gamma, residual=res)
        b = comm.all_reduce_add_rms_norm(torch.from_numpy(x), torch.from_numpy(gamma), residual=torch.from_numpy(res))
        return [np.array_equal(a[i], b[i].numpy()) for i in range(2)]

    assert all(all(r) for r in run_threads(comms, rank))


def test_zero_tokens(comms):
    def rank(comm):
        x = np.zeros((0, 64), np.float32)
        r_out, n_out = comm.all_reduce_add_rms_norm(x, np.ones(64, np.float32))
        return r_out.shape, n_out.shape

    assert run_threads(comms, rank) == [((0, 64), (0, 64))] * len(comms)


def test_bad_arguments_are_refused_before_the_call():
    """Every refusal here happens in the binding, before the collective: a one-rank comm is enough,
    and the outputs are untouched."""
    (comm,) = symmar.Comm.init_all(1, devices=["cpu"])
    x = np.ones((4, 8), np.float32)
    g = np.ones(8, np.float32)
    out = np.full((4, 8), 7, np.float32)
    cases = [
        (ValueError, dict(x=x, gamma=np.ones(9, np.float32))),                        # gamma length
        (ValueError, dict(x=x, gamma=np.ones(8, np.float16))),                        # gamma dtype
        (ValueError, dict(x=x, gamma=g, residual=np.ones((4, 9), np.float32))),       # residual shape
        (ValueError, dict(x=x, gamma=g, residual_out=np.ones((4, 8), np.float64))),   # out dtype
        (ValueError, dict(x=np.ones((4, 8), np.int32), gamma=np.ones(8, np.int32))),  # unsupported dtype
        (ValueError, dict(x=np.ones((4, 8)), gamma=np.ones(8))),                      # float64
        (ValueError, dict(x=np.ones((4, 8), np.uint16), gamma=np.ones(8, np.uint16))),  # bf16 without dtype=
        (ValueError, dict(x=x, gamma=g, residual_out=out, norm_out=out)),             # same output twice
        (ValueError, dict(x=x, gamma=g, eps=-1.0)),
        (TypeError, dict(x=x, gamma=g, eps="small")),
        (ValueError, dict(x=x, gamma=g, fp8_scale=0.0)),
        (ValueError, dict(x=x, gamma=g, fp8_out=np.zeros((4, 8), np.uint8))),        # fp8_out without scale
        (ValueError, dict(x=x, gamma=g, fp8_scale=1.0, fp8_out=np.zeros((4, 8), np.int8))),
        (ValueError, dict(x=x, gamma=g, fp8_scale=1.0, fp8_out=np.zeros((4, 9), np.uint8))),
        (ValueError, dict(x=x, gamma=g, algo="multimem")),
        (ValueError, dict(x=x[:, ::2], gamma=np.ones(4, np.float32))),               # strided
        (ValueError, dict(x=np.ones((4, 0), np.float32), gamma=np.ones(0, np.float32))),  # hidden 0
        (TypeError, dict(x=x, gamma=[1.0] * 8 + [object()])),
    ]
    try:
        for err, kw in cases:
            with pytest.raises(err):
                comm.all_reduce_add_rms_norm(norm_out=kw.pop("norm_out", None), **kw)
            assert (out == 7).all(), "a refused call wrote its output: %r" % (kw,)
        ro = np.ones((4, 8), np.float32)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            comm.all_reduce_add_rms_norm(x, g, residual_out=ro)
        # An overlap the library refuses (norm_out a part of x): SymmarError, nothing written.
        big = np.zeros((5, 8), np.float32)
        with pytest.raises(symmar.SymmarError) as info:
            comm.all_reduce_add_rms_norm(big[:4], g, norm_out=big[1:])
        assert info.value.name == "symmarInvalidArgument" and not big[4].any()
        # The lamport form is the GPU kernels': a host comm refuses it, naming why.
        with pytest.raises(symmar.SymmarError, match="GPU comms only") as info:
            comm.all_reduce_add_rms_norm(x, g, residual_out=out, algo="lamport")
        assert info.value.name == "symmarUnsupported" and (out == 7).all()
    finally:
        comm.close()
