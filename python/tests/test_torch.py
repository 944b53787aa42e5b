"""symmar.torch on CPU tensors: ranks launched by torch.multiprocessing.spawn, a gloo process group,
results compared with torch.distributed.all_reduce on the same group and with a float64 reference.

Tolerances: max and min are exact, so symmar and gloo must agree bit for bit. A sum of two
operands is rounded once by both (symmar accumulates f16/bf16 in f32; gloo rounds a+b once too),
so at world 2 sums must agree bit for bit as well. At world 4 the summation orders may differ:
symmar must be within eps(dtype) * sum|x_i| of the float64 sum for f16/bf16 (an f32 accumulation,
rounded once) and (world - 1) * eps * sum|x_i| for f32 (one rounding per addition), and within
4 * world * eps(dtype) * sum|x_i| of gloo. GPU paths need a GPU and are not run here."""
import json
import os
import time

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs it in its cached venv)")
dist = pytest.importorskip("torch.distributed", reason="this PyTorch has no torch.distributed")
if not dist.is_available():
    pytest.skip("this PyTorch was built without torch.distributed", allow_module_level=True)

import torch.multiprocessing as tmp  # noqa: E402

import symmar  # noqa: E402
import symmar.torch  # noqa: E402,F401

TIMEOUT_MS = 20000
DTYPES = ["float32", "bfloat16", "float16"]
COUNTS = [1, 1031, 65537]
EPS = {"float32": 2.0 ** -23, "bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}


def _input(rank, dtype, count, seed):
    g = torch.Generator().manual_seed(seed * 131 + rank)
    return (torch.randn(count, generator=g, dtype=torch.float64) * 4).to(getattr(torch, dtype))


def _init(rank, nranks, store):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=nranks)


def _compare_rank(rank, nranks, store, out_dir, uid):
    """Every check on one rank; failures are collected (a rank must not stop early: its peers would
    wait for its collectives) and written to out_dir/rank.json."""
    failures, checked = [], 0
    try:
        _init(rank, nranks, store)
        comm = symmar.Comm.from_process_group(None, "cpu", timeout_ms=TIMEOUT_MS)
        assert comm.rank == rank and comm.nranks == nranks
        ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
        seed = 0
        for count in COUNTS:
            for dtype in DTYPES:
                for name, rop in ops.items():
                    seed += 1
                    case = "%s %s count=%d world=%d" % (dtype, name, count, nranks)
                    x = _input(rank, dtype, count, seed)
                    ours, theirs = x.clone(), x.clone()
                    back = comm.all_reduce_(ours, op=rop)  # in place, torch's op type
                    dist.all_reduce(theirs, op=rop)
                    out = comm.all_reduce(x, op=name)  # out of place, op by name
                    checked += 1
                    if back is not ours or not torch.equal(out, ours):
                        failures.append(case + ": in place and out of place differ")
                    stack = torch.stack([_input(r, dtype, count, seed).double() for r in range(nranks)])
                    ref = {"sum": stack.sum(0), "max": stack.max(0).values, "min": stack.min(0).values}[name]
                    exact = name != "sum" or nranks == 2
                    if exact and not torch.equal(ours, theirs):
                        bad = int((ours != theirs).nonzero()[0])
                        failures.append("%s: symmar %r != gloo %r at %d" % (case, ours[bad].item(),
                                                                            theirs[bad].item(), bad))
                    scale = stack.abs().sum(0)
                    err = (ours.double() - ref).abs()
                    bound = EPS[dtype] * scale * (nranks - 1 if dtype == "float32" else 1)
                    if not bool((err <= bound).all()):
                        failures.append("%s: max error %g vs float64" % (case, float((err / scale).max())))
                    if not bool(((ours.double() - theirs.double()).abs() <= 4 * nranks * EPS[dtype] * scale).all()):
                        failures.append(case + ": symmar and gloo differ beyond the tolerance")
        # avg (gloo has none): the sum divided by nranks in the tensor's dtype
        x = _input(rank, "float32", 1031, 999)
        avg = comm.all_reduce(x, op=dist.ReduceOp.AVG)
        total = x.clone()
        dist.all_reduce(total)
        if not torch.allclose(avg, total / nranks, rtol=1e-6, atol=1e-6):
            failures.append("avg differs from gloo's sum / nranks")
        # a symmetric buffer as a tensor: written in place, reduced without a copy, read back
        buf = comm.mem_alloc(4096)
        t = buf.torch(torch.bfloat16, (2, 1024))
        t.copy_(torch.full((2, 1024), float(rank + 1)))
        comm.all_reduce_(t)
        if not bool((t == float(sum(range(1, nranks + 1)))).all()):
            failures.append("symmetric tensor holds %r" % t[0, 0].item())
        del t
        buf.free()
        comm.close()
        # An id made in the spawn parent also forms a comm here (the mp.spawn regression).
        with symmar.Comm(nranks, rank, uid, device="cpu", timeout_ms=TIMEOUT_MS) as c2:
            y = c2.all_reduce(torch.full((3,), float(rank)))
            if y.tolist() != [float(sum(range(nranks)))] * 3:
                failures.append("unique-id comm gave %s" % y.tolist())
        dist.destroy_process_group()
    except BaseException as e:  # reported, then the process exits with an error
        failures.append("exception: %r" % e)
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump({"failures": failures, "checked": checked}, f)


@pytest.mark.parametrize("nranks", [2, 4])
def test_cpu_tensors_match_gloo(nranks, tmp_path):
    uid = symmar.get_unique_id()  # made in this process, the spawn parent
    tmp.spawn(_compare_rank, args=(nranks, str(tmp_path / "store"), str(tmp_path), uid), nprocs=nranks, join=True)
    for r in range(nranks):
        with open(tmp_path / ("%d.json" % r)) as f:
            res = json.load(f)
        assert not res["failures"], "rank %d:\n%s" % (r, "\n".join(res["failures"][:20]))
        assert res["checked"] == len(COUNTS) * len(DTYPES) * 3


def _hang_rank(rank, nranks, store, out_dir):
    """Rank 1 never creates the comm: rank 0's from_process_group must give up at its timeout."""
    _init(rank, nranks, store)
    result = {}
    if rank == 0:
        start = time.monotonic()
        try:
            symmar.torch.from_process_group(None, "cpu", timeout_ms=1500)
            result["error"] = None
        except symmar.SymmarError as e:
            result["error"] = e.name
            result["cause"] = type(e.__cause__).__name__
        result["seconds"] = time.monotonic() - start
    else:
        time.sleep(4)
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump(result, f)
    os._exit(0)  # rank 0's abandoned allgather still sits in gloo's worker thread


def test_from_process_group_is_bounded_when_a_rank_never_joins(tmp_path):
    """Regression: the engine allgather through the group waited for gloo's own timeout (30 min by
    default) when a rank never created the comm; it is bounded by the comm's timeout now."""
    tmp.spawn(_hang_rank, args=(2, str(tmp_path / "store"), str(tmp_path)), nprocs=2, join=True)
    with open(tmp_path / "0.json") as f:
        res = json.load(f)
    assert res["error"] == "symmarTimeout", res
    assert res["cause"] == "TimeoutError", res
    assert res["seconds"] < 10, res


# ---- one process ----

def test_tensor_forms_on_one_rank():
    (comm,) = symmar.Comm.init_all(1, devices=["cpu"])
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    y = comm.all_reduce(x)
    assert torch.equal(x, y) and y is not x and y.shape == (3, 4)
    assert comm.all_reduce_(x) is x
    assert comm.all_reduce(x, op=dist.ReduceOp.AVG).tolist() == x.tolist()  # avg over one rank
    bits = torch.tensor([0x3F80, 0x4000], dtype=torch.int16)  # 1.0 and 2.0 as bf16
    assert comm.all_reduce(bits, dtype="bfloat16").tolist() == bits.tolist()
    with pytest.raises(ValueError):
        comm.all_reduce(torch.zeros(8)[::2])  # not contiguous
    with pytest.raises(ValueError):
        comm.all_reduce(torch.zeros(4, dtype=torch.int64))
    with pytest.raises(ValueError):
        comm.all_reduce(torch.zeros(4), op=dist.ReduceOp.PRODUCT)
    with pytest.raises(ValueError):
        comm.all_reduce(torch.zeros(4, dtype=torch.int32), op=dist.ReduceOp.AVG)
    with pytest.raises(ValueError):
        comm.all_reduce(torch.zeros(4), out=torch.zeros(4, dtype=torch.float64))
    with pytest.raises(ValueError):
        comm.all_reduce(torch.zeros(4), out=torch.zeros(5))
    if hasattr(torch, "_neg_view"):  # what .imag of a conjugated tensor is, without its strides
        neg = torch._neg_view(torch.ones(4))
        assert neg.is_neg() and neg.is_contiguous()
        with pytest.raises(ValueError):
            comm.all_reduce(neg)  # its memory holds the opposite of its value
        with pytest.raises(ValueError):
            comm.all_reduce(torch.ones(4), out=torch._neg_view(torch.ones(4)))
    assert symmar.torch.reduce_op(dist.ReduceOp.MAX) == "max"
    comm.close()


def test_from_process_group_needs_an_initialized_group():
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with pytest.raises(RuntimeError):
        symmar.torch.from_process_group()
