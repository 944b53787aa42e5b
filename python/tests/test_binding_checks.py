"""The ctypes binding's checks on one rank: the pure planner through the binding, and bad inputs,
which must raise with the library's reason and never reach a collective with wrong arguments.
Needs SYMMAR_LIBRARY (see conftest.py)."""
import os

import numpy as np
import pytest

import symmar


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
