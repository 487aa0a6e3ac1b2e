# SPDX-License-Identifier: MIT
"""Shared by the framework clients of frameworks.sh: skip cleanly, print one result line.

A client prints exactly one line starting with "RESULT " followed by JSON
(checksums and losses that frameworks.sh compares between a native run and a
run under vmmx-run), exits 0 when its work completed, 3 when it ran out of
device memory (the expected native outcome under a reduced memory
situation), and 77 with a reason when its framework is missing.
"""
import json
import sys

SKIP = 77
OOM = 3


def need(module):
    """Import @module or exit 77 saying which one is missing."""
    try:
        return __import__(module, fromlist=["_"])
    except Exception as e:  # ImportError, or a CUDA plugin that fails to load
        print(f"SKIP: {module} is not usable here: {type(e).__name__}: {e}")
        sys.exit(SKIP)


def is_oom(e):
    s = f"{type(e).__name__}: {e}".lower()
    return any(k in s for k in ("out of memory", "resource_exhausted", "out_of_memory",
                                 "cuda_error_out_of_memory", "outofmemory", "memoryerror"))


def run(main):
    """Run @main(); its dict is printed as the RESULT line; out of memory exits 3."""
    try:
        res = main()
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - frameworks raise their own OOM types
        if is_oom(e):
            print(f"OOM: {type(e).__name__}: {str(e)[:300]}")
            sys.exit(OOM)
        raise
    print("RESULT " + json.dumps(res, sort_keys=True))
    sys.stdout.flush()
