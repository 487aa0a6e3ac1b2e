# SPDX-License-Identifier: MIT
"""compare.py NATIVE_OUT VMMX_OUT: do the RESULT lines of two runs agree?

Integers, booleans and strings exactly; floats within a relative 1e-4 (a
GPU reduction may sum in another order when memory lies elsewhere).  Prints
"match" or "differ: <what>" and exits 0 or 1; "no result" (exit 2) when a
file has no RESULT line.
"""
import json
import math
import sys


def result(path):
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("RESULT "):
                return json.loads(line[7:])
    return None


def same(a, b, where):
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or not math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6):
            return f"{where}: {a!r} != {b!r}"
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, f"{where}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            d = same(a.get(k), b.get(k), f"{where}.{k}")
            if d:
                return d
        return None
    return None if a == b else f"{where}: {a!r} != {b!r}"


a, b = result(sys.argv[1]), result(sys.argv[2])
if a is None or b is None:
    print("no result")
    sys.exit(2)
d = same(a, b, "result")
print("match" if d is None else "differ: " + d)
sys.exit(0 if d is None else 1)
