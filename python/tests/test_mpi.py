"""symmar.mpi under mpirun: Comm.from_mpi through the bounded allgather and through libsymmar_mpi
(with the mpi fallback) against MPI.Allreduce at worlds 2 and 4, and the bounded bootstrap."""
import json
import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("mpi4py", reason="mpi4py is not installed (CI installs it in its cached venv)")
MPIRUN = shutil.which("mpirun")
HERE = os.path.dirname(os.path.abspath(__file__))


def _mpirun(nranks, mode):
    if MPIRUN is None:
        pytest.skip("mpirun is not on PATH")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", PYTHONPATH=os.path.dirname(HERE))
    proc = subprocess.run([MPIRUN, "--timeout", "240", "-np", str(nranks), sys.executable,
                           os.path.join(HERE, "mpi_ranks.py"), mode],
                          env=env, capture_output=True, text=True, timeout=300)
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            results = dict(enumerate(json.loads(line[len("RESULT "):])))
    assert proc.returncode == 0 and len(results) == nranks, \
        "mpirun exited %d\n%s\n%s" % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    return results


@pytest.mark.parametrize("nranks", [2, 4])
def test_from_mpi_matches_mpi_allreduce(nranks):
    results = _mpirun(nranks, "compare")
    for rank, res in results.items():
        assert not res["failures"], "rank %d:\n%s" % (rank, "\n".join(res["failures"][:20]))
    modes = results[0]["modes"]
    if nranks == 4:  # mpi_ranks.py's host row at world 4 starts with mpi<=1K
        assert "mpi<=1K (not on this comm: this comm has no such fallback)" in modes["False"]["describe"], modes
        assert modes["False"]["plan16"] != "mpi", modes
        if "(not on this comm" not in modes["auto"]["describe"]:  # libsymmar_mpi was usable
            assert modes["auto"]["plan16"] == "mpi", modes


def test_from_mpi_is_bounded_when_a_rank_never_joins():
    """The bootstrap's MPI allgather gives up at the comm's timeout instead of blocking forever."""
    res = _mpirun(2, "timeout")[0]
    assert res["error"] == "symmarTimeout" and res["cause"] == "TimeoutError", res
    assert res["seconds"] < 10, res
