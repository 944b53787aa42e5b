"""Buffers other than plain NumPy arrays (buffer protocol, __array_interface__, DLPack), the raw
pointer call, op avg, symmetric buffers, and describe/plan telling the truth for the comm at hand.
Ranks are threads of this process (Comm.init_all); values are checked against float64 sums."""
import array
import ctypes
import json

import numpy as np
import pytest

import symmar
from rank_threads import run_threads


@pytest.fixture
def comms2():
    comms = symmar.Comm.init_all(2, devices=["cpu", "cpu"], timeout_ms=20000)
    yield comms
    for c in comms:
        c.close()


class OnlyArrayInterface:
    """Exposes nothing but __array_interface__ (as a foreign array library might)."""

    def __init__(self, arr):
        self._arr = arr
        self.__array_interface__ = arr.__array_interface__


class OnlyDLPack:
    """Exposes nothing but the DLPack protocol of the wrapped array or tensor."""

    def __init__(self, inner):
        self._inner = inner

    def __dlpack__(self, **kwargs):
        return self._inner.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._inner.__dlpack_device__()


def _values(rank, n=1031):
    return np.arange(n, dtype=np.float64) * (rank + 1) - 7.25 * rank


def test_foreign_buffers_reduce_in_place(comms2):
    expected = _values(0) + _values(1)

    def rank(comm):
        got = {}
        a = array.array("f", _values(comm.rank).astype(np.float32))  # buffer protocol
        assert comm.all_reduce(a, out=a) is a
        got["array.array"] = np.frombuffer(a, np.float32).astype(np.float64)
        base = _values(comm.rank).astype(np.float64)
        wrapped = OnlyArrayInterface(base)
        comm.all_reduce(wrapped, out=wrapped)
        got["__array_interface__"] = base.copy()
        base2 = _values(comm.rank).astype(np.float32)
        dl = OnlyDLPack(base2)
        comm.all_reduce(dl, out=dl)
        got["__dlpack__"] = base2.astype(np.float64)
        src = bytes(_values(comm.rank).astype(np.float32).tobytes())  # read-only send, numpy result
        out = comm.all_reduce(memoryview(src).cast("f"))
        assert isinstance(out, np.ndarray) and out.dtype == np.float32
        got["read-only memoryview"] = out.astype(np.float64)
        return got

    for got in run_threads(comms2, rank):
        for kind, value in got.items():
            assert np.array_equal(value, expected), kind


def test_dlpack_of_a_torch_tensor(comms2):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")

    def rank(comm):
        t = torch.tensor(_values(comm.rank), dtype=torch.float64)
        comm.all_reduce(OnlyDLPack(t), out=OnlyDLPack(t))
        return t.numpy().copy()

    for got in run_threads(comms2, rank):
        assert np.array_equal(got, _values(0) + _values(1))


def test_all_reduce_ptr_and_avg(comms2):
    def rank(comm):
        x = _values(comm.rank).astype(np.float32)
        comm.all_reduce_ptr(x.ctypes.data, x.ctypes.data, x.size, "float32", "max")
        z = _values(comm.rank).astype(np.float32)
        s = np.zeros_like(z)
        comm.all_reduce_ptr(z.ctypes.data, s.ctypes.data, z.size, "float32", algo="twoshot")
        y = _values(comm.rank).astype(np.float64)
        avg = comm.all_reduce(y, op="avg")
        return x.astype(np.float64), s.astype(np.float64), avg

    for mx, sm, avg in run_threads(comms2, rank):
        assert np.array_equal(mx, np.maximum(_values(0), _values(1)))
        assert np.array_equal(sm, _values(0) + _values(1))
        assert np.array_equal(avg, (_values(0) + _values(1)) / 2)


def test_symmetric_buffers_as_arrays(comms2):
    def rank(comm):
        buf = comm.mem_alloc(4 * 1031)
        a = buf.numpy("float32", (1031,))
        a[:] = _values(comm.rank)
        comm.all_reduce_(a)
        result = a.astype(np.float64)
        with pytest.raises(ValueError):
            buf.free()  # a is still a view: refused before the collective free, on every rank
        del a
        buf.free()
        return result

    for got in run_threads(comms2, rank):
        assert np.array_equal(got, _values(0) + _values(1))


def test_views_keep_the_heap_mapped_after_close():
    (comm,) = symmar.Comm.init_all(1, devices=["cpu"])
    buf = comm.mem_alloc(64)
    view = buf.numpy("int32")
    view[:] = 7
    comm.close()  # not destroyed yet: view still reads the heap
    assert comm.closed and int(view.sum()) == 7 * 16
    with pytest.raises(symmar.SymmarError):
        buf.numpy("int32")  # no new views of a closed comm
    del view, buf


def test_describe_and_plan_tell_what_this_comm_runs(tmp_path):
    """Regression: with a host row that starts with mpi<=1K, a comm without the MPI fallback
    described it as if it ran, although small requests ran oneshot."""
    table = tmp_path / "mpi_first.json"
    table.write_text(json.dumps({"rows": [{"arch": "host", "link": "host", "world": 4, "source": "test",
                                           "algos": [{"algo": "mpi", "max_bytes": "1K"},
                                                     {"algo": "oneshot", "max_bytes": "unbounded"}]}]}))
    comms = symmar.Comm.init_all(4, devices=["cpu"] * 4, table_file=str(table))
    try:
        text = comms[0].describe()
        assert "mpi<=1K (not on this comm: this comm has no such fallback)" in text, text
        assert comms[0].plan(16, "float32") == "oneshot"
        # Past a GPU row's last threshold the pure planner names the usual fallback.
        assert symmar.plan(cc=(8, 9), link="pcie", world=8, count=1 << 24, dtype="float32") == "nccl"
    finally:
        for c in comms:
            c.close()


def test_bad_buffers_and_pointers():
    (comm,) = symmar.Comm.init_all(1, devices=["cpu"])
    with pytest.raises(ValueError):
        comm.all_reduce(bytearray(8))  # uint8: no such dtype
    with pytest.raises(ValueError):
        comm.all_reduce(array.array("f", [1, 2]), out=bytes(8))  # read-only out... of another dtype
    ro = np.zeros(2, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        comm.all_reduce(array.array("f", [1, 2]), out=OnlyArrayInterface(ro))
    with pytest.raises(ValueError):
        comm.all_reduce(OnlyArrayInterface(np.zeros(8, np.float32)[::2]))
    with pytest.raises(ValueError):
        comm.all_reduce(np.zeros(4, np.int32), op="avg")
    with pytest.raises(ValueError):
        comm.all_reduce(np.zeros(4, np.uint16), op="avg", dtype="bfloat16")
    with pytest.raises(TypeError):
        comm.all_reduce_ptr("0x10", 0, 1, "float32")
    with pytest.raises(ValueError):
        comm.all_reduce_ptr(0, 0, -1, "float32")
    with pytest.raises(ValueError):
        comm.all_reduce_ptr(0, 0, 1, "float32", op="avg")
    with pytest.raises(symmar.SymmarError) as e:
        comm.all_reduce_ptr(0, 0, 4, "float32")  # NULL buffers: the library refuses
    assert e.value.name == "symmarInvalidArgument"
    with pytest.raises(ValueError):
        comm.mem_alloc(64).numpy("float32", (100,))  # larger than the buffer
    x = (ctypes.c_float * 4)(1, 2, 3, 4)  # ctypes arrays have the buffer protocol
    assert list(comm.all_reduce(x)) == [1, 2, 3, 4]
    comm.close()
