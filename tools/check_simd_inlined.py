#!/usr/bin/env python3
"""Fails when a host SIMD kernel has a lambda compiled out of line at some Highway target.

The kernels (src/host/simd_*.cc, compiled once per target into namespaces symmar::N_<TARGET>) rely
on every helper being inlined into their loops. GCC does not always inline a lambda there: the fused
norm's bfloat16 rows at AVX2 once called a lambda per block of 16 elements, with the accumulators
in memory, and ran 2-3x slower than the same code inlined. Such a lambda shows up as a defined
symbol of its own, which this check looks for in the library's object files (`nm -C`).

    check_simd_inlined.py OBJECT...      check the objects
    check_simd_inlined.py --self-test    check the matching on made-up symbol lines
"""
import re
import subprocess
import sys

# A defined code symbol (t, T or W) of a per-target namespace that is, or is inside, a lambda.
OUTLINED = re.compile(r"^[0-9a-f]+ [tTW] .*\bsymmar::N_[A-Z0-9_]+::.*\{lambda\(")


def outlined(nm_lines):
    return [line for line in nm_lines if OUTLINED.match(line)]


def self_test():
    bad = "0000000000000000 W symmar::N_AVX2::AddResidualBf16Blocks<1>(...)::{lambda(float&, unsigned long)#1}::" \
          "operator()(float&, unsigned long) const"
    good = [
        "0000000000000000 W float symmar::N_AVX2::AddResidualTyped<symmar::N_AVX2::Bf16Fmt>(void const* const*)",
        "0000000000000000 t symmar::HostBackend::run()::{lambda(int)#1}::operator()(int) const",  # not per target
        "                 U symmar::N_SSE4::Foo()::{lambda(int)#1}::operator()(int) const",  # not defined here
    ]
    if outlined([bad]) != [bad] or outlined(good):
        sys.exit("self-test failed: the pattern does not tell outlined lambdas from other symbols")
    print("self-test passed")


def main(objects):
    found = []
    for obj in objects:
        nm = subprocess.run(["nm", "-C", obj], check=True, capture_output=True, text=True).stdout
        found += [f"{obj}: {line}" for line in outlined(nm.splitlines())]
    if found:
        print("lambdas compiled out of line in per-target SIMD code (make them HWY_INLINE functions):")
        print("\n".join(found))
        sys.exit(1)
    print(f"no outlined lambda in the per-target code of {len(objects)} objects")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    else:
        main(sys.argv[1:])
