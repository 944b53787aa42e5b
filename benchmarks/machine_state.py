"""What state the machine's two CPUs are in for handing data from one to the other, for the
benchmarks to print beside their results: symmar_coherence_probe's writer time for a 256 KiB
buffer the other CPU has just read (median of 5 rounds). On the 2-core Zen 4 VM of
docs/performance/ it reads about 28 us in the fast state and about 115 us in the slow one (the
host placing the two vCPUs apart), where plain stores into shared staging run at about 2 GB/s and
symmar streams them instead; the state changes from one minute to the next, so a comparison means
the most when the state held throughout it.

    from machine_state import handoff_us
    print("# 256 KiB handoff: %s us" % handoff_us())
"""
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROBE = os.path.join(os.path.dirname(HERE), "build", "benchmarks", "symmar_coherence_probe")


def handoff_us(probe=None):
    """The probe's median writer time in us, or a short reason why there is none (no probe built,
    one CPU only, a failed run) as a string."""
    probe = probe or os.environ.get("SYMMAR_COHERENCE_PROBE", DEFAULT_PROBE)
    if not os.access(probe, os.X_OK):
        return "n/a (no %s; build the checkout or set SYMMAR_COHERENCE_PROBE)" % probe
    try:
        run = subprocess.run([probe, "--bytes", "256K", "--rounds", "5", "--quiet"], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "n/a (%s)" % type(e).__name__
    m = re.search(r"^\s+writer\s+\S+\s+(\S+)", run.stdout, re.M)
    if run.returncode != 0 or not m:
        return "n/a (the probe exited %d)" % run.returncode
    return m.group(1)
