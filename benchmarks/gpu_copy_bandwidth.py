#!/usr/bin/env python3
"""The GPU's own device-to-device copy bandwidth, the ceiling to hold symmar's large-message
bandwidth against (measured in the same session as the collectives, on the same GPU).

Times torch's copy_ between two buffers of the same device with CUDA events (a warm-up copy, then
the mean of --iters copies) and prints, per size, the time and the bandwidth counting the bytes
copied once and counting them read and written. Exit 77 when torch sees no CUDA device.

    python3 benchmarks/gpu_copy_bandwidth.py [--min 1M] [--max 1G] [--iters 20]
"""
import argparse
import sys


def size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min", type=size, default=1 << 20)
    ap.add_argument("--max", type=size, default=1 << 30)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("SKIP: PyTorch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device visible to torch")
        return 77
    print("# %s, device-to-device copy_ (CUDA events, mean of %d)" % (torch.cuda.get_device_name(0), args.iters))
    print("#%13s %12s %14s %20s" % ("bytes", "us", "GB/s (copied)", "GB/s (read+written)"))
    n = args.min
    while n <= args.max:
        src = torch.empty(n, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        dst.copy_(src)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.iters):
            dst.copy_(src)
        stop.record()
        stop.synchronize()
        us = start.elapsed_time(stop) * 1000.0 / args.iters
        print("%14d %12.2f %14.1f %20.1f" % (n, us, n / us / 1e3, 2 * n / us / 1e3))
        del src, dst
        n *= 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
