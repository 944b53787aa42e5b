#!/usr/bin/env python3
"""What the Python binding adds to one allreduce call on a warm comm.

One rank (symmar.Comm.init_all(1, devices=["cpu"])), one float32 element: the collective itself
is as cheap as it gets, so the difference between a binding call and the bare C call is the
binding's overhead. The C call is timed by a small C program linked against the same libsymmar
(compiled here with `cc` when one is present); without a compiler the floor is the raw ctypes call.

    SYMMAR_LIBRARY=build/src/libsymmar.so python3 python/benchmarks/bench_binding.py [--calls N]

Prints one line per form (median of 5 runs of N calls, in microseconds per call) and the
overhead over the C call. Numbers for this machine are in docs/python.md.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import numpy as np  # noqa: E402

import symmar  # noqa: E402
from symmar import _lib as L  # noqa: E402

C_TIMER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <symmar/symmar.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char** argv) {
  long n = atol(argv[1]);
  int dev = SYMMAR_DEVICE_CPU;
  symmarComm_t comm;
  if (symmarCommInitAll(&comm, 1, &dev, NULL) != symmarSuccess) return 1;
  float x = 1.0f;
  for (long i = 0; i < n / 10; ++i) symmarAllReduce(&x, &x, 1, symmarFloat32, symmarSum, comm, NULL);
  for (int rep = 0; rep < 5; ++rep) {
    double t0 = now();
    for (long i = 0; i < n; ++i) {
      if (symmarAllReduce(&x, &x, 1, symmarFloat32, symmarSum, comm, NULL) != symmarSuccess) return 2;
    }
    printf("%.6f\n", (now() - t0) / n * 1e6);
  }
  symmarCommDestroy(comm);
  return 0;
}
"""


def time_call(fn, calls):
    for _ in range(calls // 10):
        fn()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(runs)


def c_call_us(calls):
    """Median us per symmarAllReduce from C, or None where no compiler or header is at hand."""
    lib = symmar.library_path()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    include = os.path.join(root, "include")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "t.c"), os.path.join(tmp, "t")
        with open(src, "w") as f:
            f.write(C_TIMER)
        try:
            subprocess.run(["cc", "-O2", "-I", include, src, "-o", exe, lib, "-Wl,-rpath," + os.path.dirname(lib)],
                           check=True, capture_output=True)
            out = subprocess.run([exe, str(calls)], check=True, capture_output=True, text=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            print("# no C timing (%s): the floor is the raw ctypes call" % e)
            return None
    return statistics.median(float(v) for v in out.split())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200000)
    args = parser.parse_args()
    comm = symmar.Comm.init_all(1, devices=["cpu"])[0]
    x = np.ones(1, np.float32)
    y = np.empty_like(x)
    lib = L.lib()
    h = comm.handle
    ptr = x.ctypes.data

    rows = []
    c_us = c_call_us(args.calls)
    if c_us is not None:
        rows.append(("C symmarAllReduce (floor)", c_us))
    rows.append(("raw ctypes symmarAllReduce", time_call(lambda: lib.symmarAllReduce(ptr, ptr, 1, 0, 0, h, None),
                                                         args.calls)))
    if hasattr(comm, "all_reduce_ptr"):
        rows.append(("comm.all_reduce_ptr(p, p, 1, 'float32')",
                     time_call(lambda: comm.all_reduce_ptr(ptr, ptr, 1, "float32"), args.calls)))
    rows.append(("comm.all_reduce(x, out=x)   numpy", time_call(lambda: comm.all_reduce(x, out=x), args.calls)))
    rows.append(("comm.all_reduce(x, out=y)   numpy", time_call(lambda: comm.all_reduce(x, out=y), args.calls)))
    rows.append(("comm.all_reduce(x)          numpy", time_call(lambda: comm.all_reduce(x), args.calls)))
    rows.append(("  the same, algo='oneshot'", time_call(lambda: comm.all_reduce(x, algo="oneshot"), args.calls)))
    try:
        import torch
    except ImportError:
        torch = None
        print("# torch is not installed: no tensor rows")
    if torch is not None:
        t = torch.ones(1, dtype=torch.float32)
        u = torch.empty_like(t)
        rows.append(("comm.all_reduce(t, out=t)   torch cpu", time_call(lambda: comm.all_reduce(t, out=t), args.calls)))
        rows.append(("comm.all_reduce(t, out=u)   torch cpu", time_call(lambda: comm.all_reduce(t, out=u), args.calls)))
        rows.append(("comm.all_reduce(t)          torch cpu", time_call(lambda: comm.all_reduce(t), args.calls)))
        rows.append(("  (torch.empty_like(t) alone)", time_call(lambda: torch.empty_like(t), args.calls)))
        if hasattr(comm, "all_reduce_"):
            rows.append(("comm.all_reduce_(t)         torch cpu", time_call(lambda: comm.all_reduce_(t), args.calls)))
            rows.append(("  the same, algo='oneshot'",
                         time_call(lambda: comm.all_reduce_(t, algo="oneshot"), args.calls)))
    floor = rows[0][1]
    print("# libsymmar: %s; python %s; numpy %s%s" % (symmar.library_path(), sys.version.split()[0], np.__version__,
                                                      "; torch %s" % torch.__version__ if torch else ""))
    print("%-42s %10s %14s" % ("form (1 x float32, 1 rank, warm)", "us/call", "over floor us"))
    for name, us in rows:
        print("%-42s %10.3f %14.3f" % (name, us, us - floor))
    comm.close()


if __name__ == "__main__":
    main()
