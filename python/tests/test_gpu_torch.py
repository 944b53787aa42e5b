"""The GPU path of torch.ops.symmar (eager, torch.compile, CUDA graph replay): gpu_torch_check.py
run as a child process, so that its CUDA state stays out of this one. It skips, with the reason,
where torch sees no CUDA device."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs it in its cached venv)")

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible to torch (the GPU check runs this)")
def test_torch_ops_on_a_gpu_comm():
    run = subprocess.run([sys.executable, os.path.join(HERE, "gpu_torch_check.py")], capture_output=True, text=True,
                         timeout=300)
    if run.returncode == 77:
        pytest.skip(run.stdout.strip().splitlines()[-1])
    assert run.returncode == 0, run.stdout + run.stderr
