"""Comm.reduce_scatter and Comm.all_gather on the host backend, ranks as threads (init_all): every
dtype and op against a float64 NumPy reference, torch tensors, in place, out=, op avg, and the
checks that refuse a call before it reaches the library."""
import numpy as np
import pytest

import symmar
from rank_threads import run_threads

TIMEOUT_MS = 20000
DTYPES = ["float32", "float16", "bfloat16", "int32", "float64"]


def _inputs(dtype, shape, rank, seed):
    """(array to pass, its float64 values): small integers, exact in every dtype and in sums."""
    rng = np.random.default_rng(seed * 131 + rank)
    values = rng.integers(-8, 9, size=shape).astype(np.float64)
    if dtype == "bfloat16":  # NumPy has no bf16: its bit patterns, read with dtype="bfloat16"
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16), values
    return values.astype(dtype), values


def _as_f64(arr, dtype):
    if dtype == "bfloat16":
        return (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return arr.astype(np.float64)


@pytest.fixture(params=[2, 4], ids=["world2", "world4"])
def comms(request):
    cs = symmar.Comm.init_all(request.param, devices=["cpu"] * request.param, timeout_ms=TIMEOUT_MS)
    yield cs
    for c in cs:
        c.close()


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_and_op_against_float64(comms, dtype):
    n = len(comms)
    block = (1001, 3)  # odd sizes: chunk tails

    def rank(comm):
        kw = {"dtype": "bfloat16"} if dtype == "bfloat16" else {}
        got = {}
        for k, op in enumerate(["sum", "max", "min"]):
            x, _ = _inputs(dtype, (n * block[0],) + block[1:], comm.rank, k)
            got[op] = comm.reduce_scatter(x, op=op, **kw)
        x, _ = _inputs(dtype, block, comm.rank, 9)
        got["gather"] = comm.all_gather(x, **kw)
        return got

    results = run_threads(comms, rank)
    for r, got in enumerate(results):
        for k, op in enumerate(["sum", "max", "min"]):
            stack = np.stack([_inputs(dtype, (n * block[0],) + block[1:], q, k)[1] for q in range(n)])
            want = {"sum": stack.sum(0), "max": stack.max(0), "min": stack.min(0)}[op][r * block[0]:(r + 1) * block[0]]
            assert got[op].shape == block, (op, got[op].shape)
            assert np.array_equal(_as_f64(got[op], dtype), want), "rank %d %s" % (r, op)
        want = np.concatenate([_inputs(dtype, block, q, 9)[1] for q in range(n)])
        assert got["gather"].shape == (n * block[0],) + block[1:]
        assert np.array_equal(_as_f64(got["gather"], dtype), want), "rank %d all_gather" % r


def test_in_place_out_and_avg(comms):
    n = len(comms)
    m = 5

    def rank(comm):
        r = comm.rank
        whole = np.arange(n * m, dtype=np.float32) + r
        block = whole[r * m:(r + 1) * m]
        assert comm.reduce_scatter(whole, out=block) is block  # in place: this rank's own block
        gathered = np.zeros(n * m, dtype=np.float64)
        gathered[r * m:(r + 1) * m] = r
        comm.all_gather(gathered[r * m:(r + 1) * m], out=gathered)  # in place
        out = np.empty(m, dtype=np.float64)
        avg = comm.reduce_scatter(np.full(n * m, float(r)), out=out, op="avg")
        return block.copy(), gathered, avg is out, out.copy()

    for r, (block, gathered, same, avg) in enumerate(run_threads(comms, rank)):
        want = sum(np.arange(n * m, dtype=np.float64) + q for q in range(n))[r * m:(r + 1) * m]
        assert np.array_equal(block, want)
        assert np.array_equal(gathered, np.repeat(np.arange(n, dtype=np.float64), m))
        assert same and np.allclose(avg, (n - 1) / 2)


def test_torch_tensors(comms):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs it in its cached venv)")
    n = len(comms)

    def rank(comm):
        x = torch.arange(n * 4, dtype=torch.bfloat16).reshape(n * 2, 2) + comm.rank
        y = comm.reduce_scatter(x)
        z = comm.all_gather(torch.full((3,), float(comm.rank)))
        s = comm.all_gather(torch.tensor(float(comm.rank)))  # a scalar: shape (nranks,)
        return y, z, s

    for r, (y, z, s) in enumerate(run_threads(comms, rank)):
        whole = sum(torch.arange(n * 4, dtype=torch.float64).reshape(n * 2, 2) + q for q in range(n))
        assert y.dtype == torch.bfloat16 and y.shape == (2, 2)
        assert torch.equal(y.double(), whole[r * 2:(r + 1) * 2])
        assert torch.equal(z, torch.arange(n, dtype=torch.float32).repeat_interleave(3))
        assert torch.equal(s, torch.arange(n, dtype=torch.float32))


def test_refused_before_the_call():
    (comm,) = symmar.Comm.init_all(1, devices=["cpu"])
    try:
        # One rank: the identity.
        assert np.array_equal(comm.reduce_scatter(np.arange(4.0)), np.arange(4.0))
        assert np.array_equal(comm.all_gather(np.arange(3, dtype=np.int32)), np.arange(3))
        with pytest.raises(ValueError):
            comm.reduce_scatter(np.float32(1))  # a scalar has no blocks
        with pytest.raises(ValueError):
            comm.reduce_scatter(np.zeros(4, np.float32), out=np.zeros(3, np.float32))
        with pytest.raises(ValueError):
            comm.all_gather(np.zeros(4, np.float32), out=np.zeros(4, np.float64))
        with pytest.raises(ValueError):
            comm.reduce_scatter(np.zeros(4, np.float32), op="product")
        with pytest.raises(symmar.SymmarError) as e:
            comm.all_gather(np.zeros(4, np.float32), algo="twoshot")
        assert e.value.name == "symmarUnsupported"
    finally:
        comm.close()
    with pytest.raises(symmar.SymmarError):
        comm.all_gather(np.zeros(4, np.float32))  # closed


def test_first_dimension_must_split_into_blocks():
    comms = symmar.Comm.init_all(2, devices=["cpu", "cpu"], timeout_ms=TIMEOUT_MS)
    try:
        with pytest.raises(ValueError, match="divide"):
            comms[0].reduce_scatter(np.zeros(3, np.float32))  # refused before any peer is waited for
    finally:
        for c in comms:
            c.close()
