"""What the engine plugin tests (test_vllm_plugin.py, test_sglang_plugin.py) check on a group the
plugin serves, and how they run: two gloo ranks spawned, each writing its failures to a file."""
import json
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as tmp


def check_served_group(tp, cls, rank, nranks, dtypes):
    """Failures of a group the plugin serves: in-place sums of every dtype and size through symmar
    (the engine's own all_reduce, counted by cls.own_calls, not run), a float64 tensor left to the
    engine's path, and the hooked all_reduce traced by torch.compile(fullgraph=True)."""
    failures = []
    total = float(nranks * (nranks + 1) // 2)
    for dtype in dtypes:
        for count in (1, 1000, 70000):
            x = torch.full((count,), float(rank + 1), dtype=dtype)
            before = cls.own_calls
            y = tp.all_reduce(x)
            if y is not x or not torch.equal(x, torch.full((count,), total, dtype=dtype)):
                failures.append("%s %d: not the sum in place" % (dtype, count))
            if cls.own_calls != before:
                failures.append("%s %d: the engine's own path ran" % (dtype, count))
    before = cls.own_calls
    z = tp.all_reduce(torch.ones(8, dtype=torch.float64))  # a dtype symmar declines
    if cls.own_calls != before + 1 or not torch.equal(z, torch.full((8,), float(nranks), dtype=torch.float64)):
        failures.append("a float64 tensor did not go to the engine's own path")
    compiled = torch.compile(lambda t: tp.all_reduce(t * 1) + 0, fullgraph=True, dynamic=True, backend="aot_eager")
    if not torch.equal(compiled(torch.full((257,), float(rank + 1))), torch.full((257,), total)):
        failures.append("compiled: wrong sum")
    return failures


def run_ranks(rank_fn, tmp_path, on):
    """Spawns rank_fn(rank, 2, store, out_dir, on) on two processes; returns their failures."""
    tmp.spawn(rank_fn, args=(2, str(tmp_path / "store"), str(tmp_path), on), nprocs=2, join=True)
    failures = []
    for r in range(2):
        with open(tmp_path / ("%d.json" % r)) as f:
            failures += json.load(f)
    return failures


def write_failures(out_dir, rank, failures):
    with open(os.path.join(out_dir, "%d.json" % rank), "w") as f:
        json.dump(failures, f)


def init_gloo(rank, nranks, store):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=nranks)
