"""Comm.set_host_threads: a host allreduce's large steps split over the comm's own helper threads or
over torch's intra-op threads (libsymmar_torch's at::parallel_for), as engines' CPU allreduces use
their OpenMP threads; and SymmarCommunicator lending torch's threads where they fit the machine.

Ranks are torch.multiprocessing.spawn processes over a gloo group, as in test_torch.py. Inputs are
small integers, so every sum is exact whatever the order: results are compared with the sum in
float64 element for element.
"""
import ctypes
import json
import os
import threading

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs it in its cached venv)")
dist = pytest.importorskip("torch.distributed", reason="this PyTorch has no torch.distributed")
if not dist.is_available():
    pytest.skip("this PyTorch was built without torch.distributed", allow_module_level=True)

import torch.multiprocessing as tmp  # noqa: E402

import symmar  # noqa: E402
import symmar.torch  # noqa: E402,F401
from symmar import ops  # noqa: E402

needs_compiled = pytest.mark.skipif(not ops.compiled, reason="libsymmar_torch is not built against this torch "
                                    "(its thread pool is what pool='torch' lends)")
# 3 MiB + 5 elements of float32: two-shot steps that give each of 2 threads 64 KiB or more.
COUNT = 786437


def _ints(rank, count, dtype):
    g = torch.Generator().manual_seed(7 + rank)
    return torch.randint(-8, 9, (count,), generator=g).to(dtype)


def _threads_rank(rank, nranks, store, out_dir, pools):
    torch.set_num_threads(2)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=nranks)
    comm = symmar.Comm.from_process_group(device="cpu", timeout_ms=20000)
    expect = {d: sum(_ints(r, COUNT, torch.float64) for r in range(nranks)) for d in ("float32", "bfloat16")}
    wrong = []
    for pool in pools:
        threads, which = pool
        comm.set_host_threads(threads, pool=which)
        for dtype in ("float32", "bfloat16"):
            x = _ints(rank, COUNT, getattr(torch, dtype))
            for in_place in (True, False):
                out = comm.all_reduce_(x.clone()) if in_place else comm.all_reduce(x, algo="twoshot")
                bad = int((out.to(torch.float64) != expect[dtype]).sum())
                if bad:
                    wrong.append([threads, which, dtype, in_place, bad])
    comm.close()
    dist.destroy_process_group()
    with open(os.path.join(out_dir, "rank%d.json" % rank), "w") as f:
        json.dump(wrong, f)


@pytest.mark.parametrize("pools", [
    pytest.param([(2, None), (1, None), (3, None)], id="own-helpers"),
    pytest.param([(2, "torch"), (1, None), (2, "torch")], id="torch-threads", marks=needs_compiled),
])
def test_steps_on_several_threads_are_exact_on_every_rank(pools, tmp_path):
    tmp.spawn(_threads_rank, args=(2, str(tmp_path / "store"), str(tmp_path), pools), nprocs=2, join=True)
    for rank in range(2):
        with open(tmp_path / ("rank%d.json" % rank)) as f:
            assert json.load(f) == [], "rank %d: [threads, pool, dtype, in place, wrong elements]" % rank


def test_set_host_threads_checks_its_arguments(comm1):
    for bad in (0, 65):
        with pytest.raises(ValueError, match="threads"):
            comm1.set_host_threads(bad)
    with pytest.raises(TypeError):
        comm1.set_host_threads(2.0)
    with pytest.raises(ValueError, match="pool must be None"):
        comm1.set_host_threads(2, pool="openmp")
    comm1.set_host_threads(2)
    x = torch.arange(COUNT, dtype=torch.float32)
    assert torch.equal(comm1.all_reduce(x), x)


PART = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)
RUN = ctypes.CFUNCTYPE(None, PART, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)


@needs_compiled
def test_torch_pool_runs_each_part_once_on_torchs_threads():
    run = RUN(ctypes.cast(ops._compiled.symmarTorchParallelFor, ctypes.c_void_p).value)
    before = torch.get_num_threads()
    try:
        for threads, parts in ((2, 2), (2, 5), (1, 3)):
            torch.set_num_threads(threads)
            seen = []
            lock = threading.Lock()

            def part(_arg, i, n, seen=seen, lock=lock):
                with lock:
                    seen.append((i, n, threading.get_native_id()))

            run(PART(part), None, parts, None)
            assert sorted(i for i, _, _ in seen) == list(range(parts))
            assert {n for _, n, _ in seen} == {parts}
            # at::parallel_for gives each of torch's threads a share of the parts.
            assert len({t for _, _, t in seen}) == min(threads, parts), seen
    finally:
        torch.set_num_threads(before)


def _communicator_rank(rank, nranks, store, out_dir, cpus, env_threads):
    from symmar.integrations import SymmarCommunicator
    torch.set_num_threads(2)
    os.cpu_count = lambda: cpus  # the machine the decision sees
    if env_threads:
        os.environ["SYMMAR_HOST_THREADS"] = env_threads
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=nranks)
    tp = SymmarCommunicator(None, "cpu", timeout_ms=20000)
    x = _ints(rank, COUNT, torch.float32)
    y = tp.all_reduce_(x)
    expect = sum(_ints(r, COUNT, torch.float64) for r in range(nranks))
    result = {"threads": tp.host_threads, "exact": y is x and bool(torch.equal(x.double(), expect))}
    tp.close()
    dist.destroy_process_group()
    with open(os.path.join(out_dir, "rank%d.json" % rank), "w") as f:
        json.dump(result, f)


@needs_compiled
@pytest.mark.parametrize("cpus,env_threads,lent", [
    pytest.param(4, None, 2, id="fits"),
    pytest.param(3, None, 1, id="too-few-cpus"),
    pytest.param(4, "1", 1, id="environment-says-1"),
])
def test_communicator_lends_torchs_threads_where_they_fit(cpus, env_threads, lent, tmp_path):
    """2 ranks of 2 torch threads each: lent where the 4 threads fit the CPUs and the environment is
    silent; the allreduce exact either way."""
    tmp.spawn(_communicator_rank, args=(2, str(tmp_path / "store"), str(tmp_path), cpus, env_threads), nprocs=2,
              join=True)
    for rank in range(2):
        with open(tmp_path / ("rank%d.json" % rank)) as f:
            assert json.load(f) == {"threads": lent, "exact": True}, "rank %d" % rank
