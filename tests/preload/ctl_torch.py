# SPDX-License-Identifier: MIT
"""ctl_torch.py - an unmodified PyTorch program idle between phases, for
ctl_gpu.sh: it fills SIZE_MIB of device memory with a pattern (several
tensors, as a model's weights), prints "ready", then reads commands on
standard input, one a line, answering one line each, flushed:
  check   compare every tensor with its pattern: "check ok" or "check bad ..."
  fill    write the patterns again (after a discard): "fill ok"
  quit    "bye", exit 0
It never touches its tensors unless told: the control socket's rule."""
import sys

import torch

size_mib = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
n = 8
elems = size_mib * (1 << 20) // 4 // n
tensors = [torch.empty(elems, dtype=torch.int32, device="cuda") for _ in range(n)]


def pattern(i):
    return (torch.arange(elems, dtype=torch.int64, device="cuda") * 2654435761 + i) % 1000003


def fill():
    for i, t in enumerate(tensors):
        t.copy_(pattern(i).to(torch.int32))
    torch.cuda.synchronize()


def check():
    for i, t in enumerate(tensors):
        if not torch.equal(t, pattern(i).to(torch.int32)):
            bad = (t != pattern(i).to(torch.int32)).nonzero()[0].item()
            return f"bad: tensor {i} element {bad}"
    torch.cuda.synchronize()
    # The temporaries are freed to PyTorch's cache, not to the driver.
    return "ok"


fill()
print(f"ready {n} tensors, {size_mib} MiB", flush=True)
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "check":
        print("check", check(), flush=True)
    elif cmd == "fill":
        fill()
        print("fill ok", flush=True)
    elif cmd == "quit":
        print("bye", flush=True)
        break
    else:
        print(f"unknown command {cmd!r}", flush=True)
