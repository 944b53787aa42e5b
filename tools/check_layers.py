#!/usr/bin/env python3
"""Fails when a project include runs upward (or sideways) between the layers of the layout.

Layers, lowest first; a file may include its own folder or a strictly lower layer:
  0 include/symmar   the public C API
  1 src/core         errors, logging, environment, names, schedule and limits, interfaces
  2 src/bootstrap, src/plan, cuda   how ranks meet; tables and planning; the kernels
  3 src/host, src/gpu               the executors
  4 src/api                         the C entry points and the comm object
  5 src/mpi                         libsymmar_mpi: a client of the C API (and header-only helpers)
Usage: tools/check_layers.py [ROOT]   (exit 1 and one line per offending include)
"""
import os
import re
import sys

LAYERS = {
    "include/symmar": 0,
    "src/core": 1,
    "src/bootstrap": 2,
    "src/plan": 2,
    "cuda": 2,
    "src/host": 3,
    "src/gpu": 3,
    "src/api": 4,
    "src/mpi": 5,
}
# How an include spells each folder (the include paths are include/, src/ and the project root).
SPELLING = {
    "symmar/": "include/symmar",
    "core/": "src/core",
    "bootstrap/": "src/bootstrap",
    "plan/": "src/plan",
    "cuda/": "cuda",
    "host/": "src/host",
    "gpu/": "src/gpu",
    "api/": "src/api",
    "mpi/": "src/mpi",
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(include):
    for prefix, folder in SPELLING.items():
        if include.startswith(prefix):
            return folder
    return None


def check(root):
    problems = []
    for folder, layer in LAYERS.items():
        path = os.path.join(root, folder)
        if not os.path.isdir(path):
            continue
        for dirpath, _, files in os.walk(path):
            for name in sorted(files):
                if not name.endswith((".h", ".cc", ".cu", ".cuh")):
                    continue
                source = os.path.join(dirpath, name)
                with open(source, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = folder_of(m.group(1))
                        if target is None or target == folder:
                            continue
                        if LAYERS[target] >= layer:
                            rel = os.path.relpath(source, root)
                            problems.append(f"{rel}:{number}: includes {m.group(1)} ({target}, layer "
                                            f"{LAYERS[target]}) from layer {layer} ({folder})")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) run upward or sideways between layers", file=sys.stderr)
        return 1
    print("layers: every include runs downward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
