# SPDX-License-Identifier: MIT
"""vmmx-torch-bench: PyTorch past the GPU's memory, libvmmx against the alternatives.

Workloads (``--workload``):
  matmul       a bf16 chain of 8192x8192 matmul + ReLU layers over a batch
  infer        a small decoder-only transformer (plain PyTorch, random weights)
  train        the same transformer, forward + backward + AdamW
at working sets of ``--ratios`` times a device cap (``--cap``), and columns
(``--columns``), each run in a process of its own (the allocator is chosen
once per process), all from the same run:
  native       PyTorch's allocator, no cap
  capped       set_per_process_memory_fraction(cap): out of memory expected
  expandable   PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, capped
  vmmx         vmmx.torch.enable(device_limit=cap), device-first, no hooks:
               the "sysmem fallback" row
  offload      the same with vmmx.torch.offload(model, lookahead)
  manual       hand-written offload: the layers that do not fit live in pinned
               host memory and are copied in, double-buffered on a side stream;
               in training, AdamW's state that does not fit lives there and is
               copied in and back, double-buffered, at the step
  floor        the PCIe floor model: max(native time, bytes that do not fit /
               pinned H2D bandwidth measured in this run; twice that for training);
               the bytes that do not fit: the working set past the cap less
               the headroom, or native's peak past the cap if that is more
``--alloc`` adds the allocation microbenchmark: PyTorch's mixed-size pattern,
microseconds per alloc+free, native against libvmmx (both modes); each column
runs in ``--alloc-procs`` processes, interleaved, of 5 timed rounds each; the
median of all its rounds and its fastest round are each compared with native's.

Real models (``--workload hf-infer,hf-train``): a Hugging Face Llama saved
and loaded with ``from_pretrained``, with the columns native, capped, vmmx,
offload, vmmx-run, vmmx-run-alloc, vmmx-run-launch, vmmx-run-inference, accelerate
and floor (see
``vmmx_tools.bench_hf``); the cap of each ratio is native's peak divided by it.

Output: a table, ``--json FILE``, ``--plot FILE.png`` (matplotlib).  Never
uses managed memory.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from vmmx import _args

GiB = 1 << 30
MiB = 1 << 20
COLUMNS = ["native", "capped", "expandable", "vmmx", "offload", "manual", "floor"]


def parse_size(s):
    """Bytes of --cap or --headroom: an int, or text: a number, fractions allowed
    ("1.5GiB"), then GiB, MiB, G, M or nothing (bytes).  ValueError for text that
    is not such a size or a negative one, TypeError for anything else (a float:
    the command line gives text)."""
    fn = "vmmx_tools.bench.parse_size"
    if not isinstance(s, str):
        return _args.size(fn, "s", s)
    t = _args.text(fn, "s", s).strip()
    mul = 1
    for suf, m in (("GiB", GiB), ("MiB", MiB), ("G", GiB), ("M", MiB)):
        if t.endswith(suf):
            t, mul = t[:-len(suf)], m
            break
    try:
        n = int(t) * mul if mul == 1 else int(float(t) * mul)
    except (ValueError, OverflowError):  # not a number; inf
        raise ValueError(f"{fn}: s {s!r} is not a size (examples: 8GiB, 1.5G, 512M)") from None
    if n < 0:
        raise ValueError(f"{fn}: s {s!r} is negative")
    return n


# ---------------------------------------------------------------- models (child side)

def _models(torch):
    nn = torch.nn

    class Layer(nn.Module):
        """One matmul + ReLU of the chain; its weight is a buffer of its own (128 MiB)."""

        def __init__(self, d, dtype):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(d, d, dtype=dtype, device="cuda").normal_(
                0, d ** -0.5), requires_grad=False)

        def forward(self, x, w=None):
            return torch.relu(x @ (self.weight if w is None else w))

    class Block(nn.Module):
        """A pre-norm decoder block; its parameters are the module's own (one unit each)."""

        def __init__(self, d, heads, dtype):
            super().__init__()
            self.heads = heads
            mk = lambda *s: nn.Parameter(torch.empty(*s, dtype=dtype, device="cuda").normal_(  # noqa: E731
                0, s[-1] ** -0.5))
            self.wqkv, self.wo = mk(3 * d, d), mk(d, d)
            self.w1, self.w2 = mk(4 * d, d), mk(d, 4 * d)
            self.n1 = nn.Parameter(torch.ones(d, dtype=dtype, device="cuda"))
            self.n2 = nn.Parameter(torch.ones(d, dtype=dtype, device="cuda"))

        @staticmethod
        def names():
            return ["wqkv", "wo", "w1", "w2", "n1", "n2"]

        def forward(self, x, p=None):
            p = p or {n: getattr(self, n) for n in self.names()}
            b, s, d = x.shape
            h = torch.nn.functional.rms_norm(x, (d,), p["n1"])
            q, k, v = (h @ p["wqkv"].t()).view(b, s, 3, self.heads, d // self.heads).unbind(2)
            a = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            x = x + a.transpose(1, 2).reshape(b, s, d) @ p["wo"].t()
            h = torch.nn.functional.rms_norm(x, (d,), p["n2"])
            return x + torch.nn.functional.gelu(h @ p["w1"].t()) @ p["w2"].t()

    class Decoder(nn.Module):
        def __init__(self, vocab, d, heads, layers, dtype):
            super().__init__()
            self.emb = nn.Parameter(torch.empty(vocab, d, dtype=dtype, device="cuda").normal_(0, 1))
            self.blocks = nn.ModuleList(Block(d, heads, dtype) for _ in range(layers))
            self.norm = nn.Parameter(torch.ones(d, dtype=dtype, device="cuda"))

        def forward(self, tokens, run_block=None):
            x = self.emb[tokens]
            for i, blk in enumerate(self.blocks):
                x = run_block(i, blk, x) if run_block else blk(x)
            x = torch.nn.functional.rms_norm(x, (x.shape[-1],), self.norm)
            return x @ self.emb.t()

    return Layer, Block, Decoder


class Manual:
    """Hand-written offload: blocks past the budget in pinned host memory, copied in
    on a side stream into two device staging buffers, double-buffered."""

    def __init__(self, torch, blocks, names, budget):
        self.torch = torch
        self.side = torch.cuda.Stream()
        first = getattr(blocks[0], names[0])
        dtype, esz = first.dtype, first.element_size()
        sizes = [sum(getattr(b, n).numel() for n in names) for b in blocks]
        stage = 2 * max(sizes) * esz
        self.resident, self.host, used = [], {}, 0
        for i, b in enumerate(blocks):
            if used + sizes[i] * esz + stage <= budget:
                self.resident.append(True)
                used += sizes[i] * esz
                continue
            self.resident.append(False)
            shapes = [(n, tuple(getattr(b, n).shape)) for n in names]
            flat, off = torch.empty(sizes[i], dtype=dtype, pin_memory=True), 0
            for n, _ in shapes:
                t = getattr(b, n)
                flat[off:off + t.numel()].copy_(t.detach().flatten())
                off += t.numel()
                t.data = torch.empty(0, dtype=dtype, device="cuda")
            self.host[i] = (flat, shapes)
        torch.cuda.empty_cache()
        self.stage = [torch.empty(max(sizes), dtype=dtype, device="cuda") for _ in range(2)]
        self.ready = [torch.cuda.Event() for _ in range(2)]
        self.free = [torch.cuda.Event() for _ in range(2)]
        self.offloaded = [i for i, r in enumerate(self.resident) if not r]
        self.spilled_bytes = sum(self.host[i][0].numel() * esz for i in self.offloaded)

    def _copy(self, k):
        slot = k % 2
        with self.torch.cuda.stream(self.side):
            self.side.wait_event(self.free[slot])
            flat = self.host[self.offloaded[k]][0]
            self.stage[slot][:flat.numel()].copy_(flat, non_blocking=True)
            self.ready[slot].record(self.side)

    def start(self):
        """Queue the first two copies of a step."""
        for k in range(min(2, len(self.offloaded))):
            self._copy(k)

    def params(self, i):
        """Views of block i's parameters in its staging buffer, once its copy is done."""
        k = self.offloaded.index(i)
        slot = k % 2
        self.torch.cuda.current_stream().wait_event(self.ready[slot])
        views, off = {}, 0
        for name, shape in self.host[i][1]:
            n = 1
            for s in shape:
                n *= s
            views[name] = self.stage[slot][off:off + n].view(shape)
            off += n
        return k, slot, views

    def done(self, k, slot):
        """Block k's kernels are queued: its slot is free after them; copy block k+2 in."""
        self.free[slot].record()
        if k + 2 < len(self.offloaded):
            self._copy(k + 2)


class ManualTrain:
    """Hand-written offload for training: AdamW (written out) whose state past the
    budget lives in pinned host memory; at the step it is copied into two device
    staging buffers on a side stream, double-buffered, stepped there and copied back
    on another stream.  Weights and gradients stay on the device."""

    def __init__(self, torch, params, budget, lr=1e-4, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=1e-2):
        self.torch, self.lr, self.betas, self.eps, self.wd = torch, lr, betas, eps, weight_decay
        self.params = [p for p in params if p.requires_grad]
        big = max(p.nbytes for p in self.params)
        used = 2 * sum(p.nbytes for p in self.params) + 2 * 2 * big  # weights, grads, staging
        self.state, self.offloaded, self.t = {}, [], 0
        for p in self.params:
            if used + 2 * p.nbytes <= budget:
                self.state[p] = (torch.zeros_like(p), torch.zeros_like(p))
                used += 2 * p.nbytes
            else:
                self.state[p] = tuple(torch.zeros(p.shape, dtype=p.dtype, pin_memory=True)
                                      for _ in range(2))
                self.offloaded.append(p)
        self.spilled_bytes = sum(2 * p.nbytes for p in self.offloaded)
        self.resident = [p for p in self.params if all(p is not q for q in self.offloaded)]
        self.stage = [torch.empty(2 * big, dtype=torch.uint8, device="cuda") for _ in range(2)]
        self.h2d, self.d2h = torch.cuda.Stream(), torch.cuda.Stream()
        self.ready = [torch.cuda.Event() for _ in range(2)]
        self.free = [torch.cuda.Event() for _ in range(2)]

    def _views(self, p, slot):
        n = p.nbytes
        return tuple(self.stage[slot][i * n:(i + 1) * n].view(p.dtype).view(p.shape)
                     for i in range(2))

    def _copy_in(self, j):
        p, slot = self.offloaded[j], j % 2
        with self.torch.cuda.stream(self.h2d):
            self.h2d.wait_event(self.free[slot])
            for view, host in zip(self._views(p, slot), self.state[p]):
                view.copy_(host, non_blocking=True)
            self.ready[slot].record(self.h2d)

    def _adamw(self, p, m, v):
        b1, b2 = self.betas
        g = p.grad
        p.mul_(1 - self.lr * self.wd)
        m.lerp_(g, 1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        denom = (v.sqrt() / (1 - b2 ** self.t) ** 0.5).add_(self.eps)
        p.addcdiv_(m, denom, value=-self.lr / (1 - b1 ** self.t))

    def step(self):
        with self.torch.no_grad():
            self._step()

    def _step(self):
        torch, cur = self.torch, self.torch.cuda.current_stream()
        self.t += 1
        self.h2d.wait_stream(self.d2h)  # the last step's write-backs are done
        self.h2d.wait_stream(cur)
        for j in range(min(2, len(self.offloaded))):
            self._copy_in(j)
        for p in self.resident:
            if p.grad is not None:
                self._adamw(p, *self.state[p])
        for j, p in enumerate(self.offloaded):
            slot = j % 2
            cur.wait_event(self.ready[slot])
            views = self._views(p, slot)
            if p.grad is not None:
                self._adamw(p, *views)
            self.d2h.wait_stream(cur)
            with torch.cuda.stream(self.d2h):
                for view, host in zip(views, self.state[p]):
                    host.copy_(view, non_blocking=True)
                self.free[slot].record(self.d2h)
            if j + 2 < len(self.offloaded):
                self._copy_in(j + 2)
        cur.wait_stream(self.d2h)


def child(spec):
    """Run one column of one workload in this process; print one JSON line."""
    if spec["workload"].startswith("hf-"):
        from . import bench_hf
        return bench_hf.save(spec) if spec["column"] == "save" else bench_hf.child(spec)
    if spec["column"] == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch

    out = {"column": spec["column"], "workload": spec["workload"], "ratio": spec["ratio"]}
    cap = spec["cap"]
    if spec["column"] in ("vmmx", "offload", "alloc-pool", "alloc-allocator"):
        import vmmx.torch
        mode = "allocator" if spec["column"] == "alloc-allocator" else "pool"
        vmmx.torch.enable(mode=mode, device_limit=cap if spec["column"] in ("vmmx", "offload")
                          else None)
    total = torch.cuda.get_device_properties(0).total_memory
    if spec["column"] in ("capped", "expandable"):
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), 0)
    if spec["workload"] == "alloc":
        return _alloc_bench(torch, out, spec)
    if spec["workload"] == "bandwidth":
        return _bandwidth(torch, out)
    Layer, Block, Decoder = _models(torch)
    torch.manual_seed(0)
    wl, ratio = spec["workload"], spec["ratio"]
    try:
        if wl == "matmul":
            d = 8192
            n = max(1, round(ratio * cap / (d * d * 2)))
            layers = [Layer(d, torch.bfloat16) for _ in range(n)]
            model = torch.nn.ModuleList(layers)
            x = torch.randn(spec["batch"], d, dtype=torch.bfloat16, device="cuda")
            out["weights_bytes"] = n * d * d * 2
            out["layers"] = n
            names = ["weight"]
            blocks = layers

            def step(run_block=None):
                h = x
                for i, layer in enumerate(layers):
                    h = run_block(i, layer, h) if run_block else layer(h)
                return h
        else:
            d, heads, vocab, seq = spec["d_model"], spec["heads"], spec["vocab"], spec["seq"]
            per_layer = 12 * d * d * 2
            mult = 4 if wl == "train" else 1  # params, grads, two AdamW states
            n = max(1, round((ratio * cap / mult - vocab * d * 2) / per_layer))
            model = Decoder(vocab, d, heads, n, torch.bfloat16)
            out["weights_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
            out["layers"] = n
            tokens = torch.randint(0, vocab, (spec["batch"], seq), device="cuda")
            blocks, names = list(model.blocks), Block.names()
            opt = None
            if wl == "train" and spec["column"] == "manual":
                opt = ManualTrain(torch, model.parameters(), cap - spec["headroom"])
                out["spilled_bytes"] = opt.spilled_bytes
            elif wl == "train":
                opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)

            def step(run_block=None):
                if wl == "train":
                    logits = model(tokens, run_block)
                    loss = torch.nn.functional.cross_entropy(
                        logits.view(-1, vocab).float(), tokens.view(-1))
                    loss.backward()
                    opt.step()
                    model.zero_grad(set_to_none=True)
                    return loss
                return model(tokens, run_block)
        out["working_set_bytes"] = out["weights_bytes"] * (4 if wl == "train" else 1)
        run_block, off = None, None
        if spec["column"] == "offload":
            import vmmx.torch
            off = vmmx.torch.offload(model, lookahead=spec["lookahead"],
                                     adapt=spec.get("adapt", True),
                                     headroom=spec["headroom"], backward=(wl == "train"),
                                     home=spec.get("home", "vmmx"),
                                     optimizer=opt if wl == "train" else None)
        if spec["column"] == "manual" and wl != "train":
            budget = cap - spec["headroom"]
            m = Manual(torch, blocks, names, budget)
            out["spilled_bytes"] = m.spilled_bytes

            def run_block(i, blk, h):
                if m.resident[i]:
                    return blk(h)
                k, slot, p = m.params(i)
                r = blk(h, p if len(names) > 1 else p["weight"])
                m.done(k, slot)
                return r
        ctx = torch.no_grad() if wl != "train" else _null()
        times = []
        with ctx:
            for it in range(spec["warmup"] + spec["steps"]):
                if spec["column"] == "manual" and wl != "train":
                    m.start()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                step(run_block)
                torch.cuda.synchronize()
                if it >= spec["warmup"]:
                    times.append((time.perf_counter() - t0) * 1e3)
        out["ms"] = sorted(times)[len(times) // 2]
        if off is not None:
            out["offload"] = off.stats()
        out["peak_device_bytes"] = torch.cuda.max_memory_reserved() \
            if spec["column"] not in ("vmmx", "offload") else None
        out["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        if spec["column"] in ("vmmx", "offload"):
            st = vmmx.torch.stats()
            out["host_bytes"] = st["allocator"]["host_reserved"]
            out["device_bytes"] = st["allocator"]["device_reserved"]
            out["migrated_bytes"] = st["context"].get("migrated_bytes")
    except torch.cuda.OutOfMemoryError as e:
        out["error"] = "OOM"
        out["detail"] = str(e).splitlines()[0][:200]
    return out


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _bandwidth(torch, out):
    n = 1 * GiB
    h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    d = torch.empty(n, dtype=torch.uint8, device="cuda")
    d.copy_(h, non_blocking=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(3):
        d.copy_(h, non_blocking=True)
    torch.cuda.synchronize()
    out["h2d_gbs"] = 3 * n / (time.perf_counter() - t0) / 1e9
    out["total_memory"] = torch.cuda.get_device_properties(0).total_memory
    out["device_name"] = torch.cuda.get_device_name(0)
    out["torch"] = torch.__version__
    return out


def _alloc_bench(torch, out, spec):
    # PyTorch's mixed pattern: many small activations, some medium, a few large, freed LIFO-ish
    sizes = [256, 4096, 65536, 512 * 1024, 2 * MiB, 8 * MiB, 24 * MiB, 1024, 131072, 3 * MiB]
    for s in sizes:  # warm the caches
        torch.empty(s, dtype=torch.uint8, device="cuda")
    n = spec.get("iters", 20000)
    rounds = []
    for _ in range(spec.get("rounds", 5)):
        live = []
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(n):
            live.append(torch.empty(sizes[i % len(sizes)], dtype=torch.uint8, device="cuda"))
            if len(live) > 6:
                del live[(i * 7) % len(live)]
        del live
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - t0) / n * 1e6)
    out["us_rounds"] = rounds
    out["us_per_alloc_free"] = statistics.median(rounds)
    return out


def alloc_bench(base, procs, timeout, results):
    """The allocation microbenchmark: each column in ``procs`` processes of its own,
    interleaved (native, pool, allocator, native, ...) so that a machine's drift
    reaches every column alike; each process times several rounds.  Prints, for
    each column, the median over all its rounds and its fastest round, each
    with its ratio to native's: on the GPU machine whole processes ran at 2.3 or
    at 4.5 us per pair whatever the mode, so a median over few processes can
    land on either side, while the fastest round is the cost itself."""
    cols = ("native", "alloc-pool", "alloc-allocator")
    got = {c: [] for c in cols}
    errors = {}
    for _ in range(procs):
        for col in cols:
            r = run_child(dict(base, workload="alloc", column=col, ratio=0), timeout)
            results["runs"].append(r)
            if r.get("us_rounds"):
                got[col] += r["us_rounds"]
            else:
                errors[col] = f"{r.get('error')}: {r.get('detail', '')}"
    print(f"# allocation microbenchmark (torch.empty + del, mixed sizes), us per alloc+free, "
          f"{procs} processes per column, interleaved: the median of every round, and the "
          f"fastest round (the cost with the least interference), each against native's")
    nat = got["native"]
    summary = {}
    for col in cols:
        if not got[col]:
            print(f"  {col:16s} {errors.get(col)}")
            continue
        med, lo, hi = statistics.median(got[col]), min(got[col]), max(got[col])
        ratio = med / statistics.median(nat) if nat else None
        ratio_min = lo / min(nat) if nat else None
        rel = f"{ratio:5.2f}x" if nat else "    -"
        rel_min = f"{ratio_min:5.2f}x" if nat else "    -"
        print(f"  {col:16s} median {med:6.2f} {rel}   fastest {lo:6.2f} {rel_min}   "
              f"slowest {hi:6.2f}")
        summary[col] = dict(us=med, min=lo, max=hi, rounds=len(got[col]), ratio=ratio,
                            ratio_min=ratio_min)
    results["alloc"] = summary


# ---------------------------------------------------------------- parent side

def run_child(spec, timeout):
    env = dict(os.environ)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = pkg + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        r = subprocess.run([sys.executable, "-m", "vmmx_tools.bench", "--child", json.dumps(spec)],
                           capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return dict(spec, error=f"timeout after {timeout} s")
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
    err = "OOM" if "OutOfMemoryError" in (r.stderr or "") else "failed"
    return dict(spec, error=err, detail=" | ".join(tail)[:300])


def main(argv=None):
    ap = argparse.ArgumentParser(prog="vmmx-torch-bench", description=__doc__.split("\n")[0])
    ap.add_argument("--workload", default="matmul,infer,train")
    ap.add_argument("--ratios", default="0.5,1.125,1.5")
    ap.add_argument("--cap", default="8GiB", help="device cap (default 8GiB)")
    ap.add_argument("--columns", default=",".join(COLUMNS))
    ap.add_argument("--batch", type=int, default=None,
                    help="rows of the matmul chain (4096) / sequences of the transformer "
                         "(4; 1 in training, whose activations then fit the headroom)")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--d-model", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--lookahead", type=int, default=2)
    ap.add_argument("--no-adapt", dest="adapt", action="store_false",
                    help="offload(adapt=False): keep the first plan")
    ap.add_argument("--home", default="vmmx", choices=("vmmx", "pinned"),
                    help="where offload keeps streamed parameters (vmmx.torch.offload home=)")
    ap.add_argument("--headroom", default="1GiB",
                    help="device memory kept for activations by offload and manual (1GiB)")
    ap.add_argument("--alloc", action="store_true", help="add the allocation microbenchmark")
    ap.add_argument("--alloc-procs", type=int, default=3,
                    help="processes per column of the allocation microbenchmark (3)")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--hf-model", default="7b", help="hf-infer's Llama shape: 7b, 3b, 1b, tiny")
    ap.add_argument("--hf-train-model", default="1b", help="hf-train's Llama shape (1b)")
    ap.add_argument("--hf-optim", default="default", choices=("default", "fused"),
                    help="hf-train's AdamW: PyTorch's default (foreach on the GPU: a pass "
                         "over the states per operation) or fused=True (one pass; the "
                         "Hugging Face Trainer's default)")
    ap.add_argument("--hf-load", default="device-map", choices=("device-map", "to"),
                    help="how the weights reach the GPU: from_pretrained(device_map=\"cuda\") "
                         "(transformers' warm-up: most weights carved out of one allocation) "
                         "or from_pretrained() then .to(\"cuda\") (an allocation a weight)")
    ap.add_argument("--hf-batch", type=int, default=4)
    ap.add_argument("--hf-seq", type=int, default=512)
    ap.add_argument("--hf-new-tokens", type=int, default=32)
    ap.add_argument("--hf-dir", default=None,
                    help="where the models are saved (default: a temporary directory)")
    ap.add_argument("--vmmx-run", default=None,
                    help="the vmmx-run program for its column (default: from PATH)")
    ap.add_argument("--run-trace", default=None, metavar="DIR",
                    help="the vmmx-run columns write their launch trace (vmmx-run --trace) "
                         "to DIR/WORKLOAD-xRATIO.COLUMN.trace")
    ap.add_argument("--json", help="write every result to this file")
    ap.add_argument("--plot", help="write a bar chart (PNG) to this file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(json.loads(a.child))), flush=True)
        return 0
    cap = parse_size(a.cap)
    base = dict(cap=cap, seq=a.seq, d_model=a.d_model, heads=a.heads, vocab=a.vocab,
                steps=a.steps, warmup=a.warmup, lookahead=a.lookahead, adapt=a.adapt, home=a.home,
                headroom=parse_size(a.headroom))
    bw = run_child(dict(base, workload="bandwidth", column="native", ratio=0), a.timeout)
    results = {"machine": bw, "cap": cap, "runs": []}
    print(f"# {bw.get('device_name')} ({bw.get('total_memory', 0) / GiB:.1f} GiB), torch "
          f"{bw.get('torch')}, pinned H2D {bw.get('h2d_gbs', 0):.1f} GB/s, cap {a.cap}")
    cols = [c for c in a.columns.split(",") if c]
    for wl in a.workload.split(","):
        if wl.startswith("hf-"):
            hf_rows(a, wl, base, bw, results)
            continue
        batch = a.batch or {"matmul": 4096, "infer": 4, "train": 1}[wl]
        for ratio in (float(r) for r in a.ratios.split(",")):
            row = {}
            for col in cols:
                if col == "floor":
                    continue
                r = run_child(dict(base, workload=wl, column=col, ratio=ratio, batch=batch),
                              a.timeout)
                row[col] = r
                results["runs"].append(r)
            nat = row.get("native", {})
            if "floor" in cols and nat.get("ms") is not None:
                # what does not fit: the working set past the cap less the headroom, or
                # native's peak past the cap where its activations outgrow the headroom
                spill = max(0, nat["working_set_bytes"] - (cap - base["headroom"]),
                            nat.get("peak_allocated_bytes", 0) - cap)
                xfer = spill / (bw["h2d_gbs"] * 1e9) * 1e3 * (2 if wl == "train" else 1)
                fl = {"column": "floor", "workload": wl, "ratio": ratio,
                      "ms": max(nat["ms"], xfer), "transfer_ms": xfer, "spilled_bytes": spill}
                row["floor"] = fl
                results["runs"].append(fl)
            print_row(wl, ratio, batch, row, cols)
    if a.alloc:
        alloc_bench(base, a.alloc_procs, a.timeout, results)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    if a.plot:
        plot(results, cols, a.plot)
    return 0


def hf_rows(a, wl, base, bw, results):
    """The real-model workload wl: save the model once, run native, then each ratio's
    columns at native's peak / ratio."""
    import shutil
    import tempfile
    from . import bench_hf
    hf_cols = [c for c in (a.columns if a.columns != ",".join(COLUMNS)
                           else ",".join(bench_hf.COLUMNS)).split(",") if c]
    preset = a.hf_model if wl == "hf-infer" else a.hf_train_model
    top = a.hf_dir or tempfile.mkdtemp(prefix="vmmx-bench-")
    d = os.path.join(top, f"{wl}-{preset}")
    spec = dict(base, workload=wl, preset=preset, dir=d, hf_batch=a.hf_batch, hf_seq=a.hf_seq,
                new_tokens=a.hf_new_tokens, optim=a.hf_optim, load=a.hf_load, ratio=0, cap=0,
                run_trace=a.run_trace)
    try:
        saved = run_child(dict(spec, column="save"), a.timeout)
        if saved.get("error"):
            print(f"{wl}: could not build the model: {saved['error']} {saved.get('detail', '')}")
            return
        nat = run_child(dict(spec, column="native"), a.timeout)
        results["runs"].append(nat)
        optim = f", AdamW {a.hf_optim}" if wl == "hf-train" else ""
        print(f"# {wl}: Llama {preset}, {saved['param_bytes'] / GiB:.2f} GiB of weights, "
              f"native peak {(nat.get('peak_bytes') or 0) / GiB:.2f} GiB{optim}, "
              f"loaded {'with .to()' if a.hf_load == 'to' else 'with device_map'}", flush=True)
        vmmx_run = a.vmmx_run or shutil.which("vmmx-run")
        for ratio in (float(r) for r in a.ratios.split(",")):
            if not nat.get("peak_bytes"):
                print(f"{wl}: native failed: {nat.get('error')} {nat.get('detail', '')}")
                return
            cap = int(nat["peak_bytes"] / ratio)
            row = {"native": nat}
            for col in hf_cols:
                if col in ("native", "floor"):
                    continue
                r = bench_hf.run_column(dict(spec, column=col, ratio=ratio, cap=cap),
                                        a.timeout, run_child, vmmx_run)
                row[col] = r
                results["runs"].append(r)
            print(f"{wl} x{ratio:g} (cap {cap / GiB:.2f} GiB)", flush=True)
            for line in bench_hf.table(wl, ratio, row, bw["h2d_gbs"]):
                print(line, flush=True)
            if row.get("floor"):
                results["runs"].append(row["floor"])
    finally:
        if not a.hf_dir:
            shutil.rmtree(top, ignore_errors=True)


def print_row(wl, ratio, batch, row, cols):
    nat = row.get("native", {}).get("ms")
    head = f"{wl} x{ratio:g} (batch {batch})"
    cells = []
    for c in cols:
        r = row.get(c, {})
        if r.get("ms") is not None:
            rel = f" {r['ms'] / nat:.2f}x" if nat else ""
            cells.append(f"{c} {r['ms']:.1f} ms{rel}")
        else:
            cells.append(f"{c} {r.get('error', '-')}")
    print(f"{head:28s} | " + " | ".join(cells), flush=True)


def plot(results, cols, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# no matplotlib: no plot", file=sys.stderr)
        return
    groups = sorted({(r["workload"], r["ratio"]) for r in results["runs"]
                     if r.get("workload") not in ("alloc", "bandwidth")})
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(groups)), 4.5))
    w = 0.8 / max(1, len(cols))
    for k, c in enumerate(cols):
        xs, ys = [], []
        for g, (wl, ratio) in enumerate(groups):
            r = next((r for r in results["runs"] if r.get("column") == c and
                      r.get("workload") == wl and r.get("ratio") == ratio), None)
            if r and r.get("ms"):
                xs.append(g + k * w)
                ys.append(r["ms"])
            elif r and r.get("error"):  # a bar that is missing says why (OOM, timeout)
                ax.text(g + k * w, 0.02, r["error"].split(" ")[0], rotation=90, ha="center",
                        va="bottom", fontsize=7, transform=ax.get_xaxis_transform())
        ax.bar(xs, ys, w, label=c)
    ax.set_xticks([g + 0.4 - w / 2 for g in range(len(groups))])
    ax.set_xticklabels([f"{wl}\nx{ratio:g}" for wl, ratio in groups])
    ax.set_ylabel("ms per step (log)")
    ax.set_yscale("log")
    ax.legend(ncol=4, fontsize=8)
    ax.set_title(f"vmmx-torch-bench, cap {results['cap'] / GiB:g} GiB, "
                 f"{results['machine'].get('device_name', '')}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
