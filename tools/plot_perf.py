#!/usr/bin/env python3
"""Plots symmar_perf JSON files (-J): latency and bus bandwidth against message size, one line per
algorithm (and per file when several are given), with the crossovers between the fastest
algorithms and the decode-message range (14 KiB - 3.5 MiB) marked.

    python3 tools/plot_perf.py results.json [more.json ...] -o perf.png
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DECODE_RANGE = (14 * 1024, 3.5 * 1024 * 1024)  # 1..256 tokens of a 7168-wide bf16 model


def load(paths):
    series = {}  # label -> {bytes: (time_us, busbw)}
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        tag = os.path.splitext(os.path.basename(path))[0] if len(paths) > 1 else ""
        for r in doc["results"]:
            label = r["algo"] + (f" ({tag})" if tag else "")
            series.setdefault(label, {})[r["bytes"]] = (r["time_us"], r["busbw_gbs"])
        title = f'{doc.get("backend", "?")} backend, {doc.get("world", "?")} ranks, {doc.get("device", "")}'
    return series, title


def crossovers(series):
    """Sizes where the fastest non-auto algorithm changes."""
    sizes = sorted({b for s in series.values() for b in s})
    marks, prev = [], None
    for b in sizes:
        cands = [(s[b][0], name) for name, s in series.items() if b in s and not name.startswith("auto")]
        if not cands:
            continue
        best = min(cands)[1]
        if prev is not None and best != prev:
            marks.append((b, f"{prev} -> {best}"))
        prev = best
    return marks


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("-o", "--output", default="perf.png")
    args = ap.parse_args()
    series, title = load(args.files)
    fig, (lat, bw) = plt.subplots(1, 2, figsize=(13, 5))
    for name, pts in sorted(series.items()):
        xs = sorted(pts)
        style = "-" if name.startswith("auto") else "--"
        lat.plot(xs, [pts[x][0] for x in xs], style, marker="o", ms=3, label=name)
        bw.plot(xs, [pts[x][1] for x in xs], style, marker="o", ms=3, label=name)
    for ax, ylabel in ((lat, "time (us, median; max over ranks)"), (bw, "bus bandwidth (GB/s)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.axvspan(*DECODE_RANGE, color="tab:green", alpha=0.08, label="decode range (14 KiB - 3.5 MiB)")
        for b, text in crossovers(series):
            ax.axvline(b, color="grey", lw=0.8, ls=":")
            ax.annotate(text, (b, 0.98), xycoords=("data", "axes fraction"), rotation=90, va="top", fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    lat.set_yscale("log")
    bw.legend(fontsize=8)
    fig.suptitle(f"symmar allreduce: {title}")
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
