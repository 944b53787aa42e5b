"""Unique ids across launchers: an id made in a process that is not a rank (the parent of
multiprocessing's "spawn" start method, which torch.multiprocessing.spawn uses) must form a comm in
freshly started children, which inherit neither the id's socket nor the library's state."""
import multiprocessing as mp
import time
import traceback

import numpy as np

import symmar

TIMEOUT_MS = 10000


def _spawned_rank(rank, nranks, uid, queue):
    try:
        with symmar.Comm(nranks, rank, uid, device="cpu", timeout_ms=TIMEOUT_MS) as comm:
            x = np.arange(5, dtype=np.float64) * (rank + 1)
            queue.put((rank, "ok", comm.all_reduce(x).tolist()))
    except BaseException:
        queue.put((rank, "err", traceback.format_exc()))


def _run_spawned(nranks, uid):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_spawned_rank, args=(r, nranks, uid, queue), daemon=True) for r in range(nranks)]
    start = time.monotonic()
    for p in procs:
        p.start()
    try:
        results = sorted(queue.get(timeout=60) for _ in procs)
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    return results, time.monotonic() - start


def test_id_made_in_a_spawn_parent_forms_the_comm():
    """Regression: rank 0 failed with 'address in use' (the parent kept the id's port listening) and
    the other ranks waited out the timeout, queued on the parent's listener."""
    nranks = 3
    uid = symmar.get_unique_id()  # in this process, which takes no part in the comm
    results, seconds = _run_spawned(nranks, uid)
    expected = (np.arange(5, dtype=np.float64) * sum(r + 1 for r in range(nranks))).tolist()
    for rank, status, value in results:
        assert status == "ok", "rank %d:\n%s" % (rank, value)
        assert value == expected, (rank, value)
    assert seconds < TIMEOUT_MS / 1000, "formation took %.1f s: a rank waited out its timeout" % seconds


def test_spawn_parent_may_make_several_ids():
    """Each id reserves its own port: two comms from two ids made in the same parent."""
    first, second = symmar.get_unique_id(), symmar.get_unique_id()
    assert first != second
    for uid in (first, second):
        results, _ = _run_spawned(2, uid)
        assert [s for _, s, _ in results] == ["ok", "ok"], results
