# SPDX-License-Identifier: MIT
"""Real-model workloads of vmmx-torch-bench: a Hugging Face Llama built from a
config with random weights, saved with ``save_pretrained`` and loaded with
``from_pretrained`` in each column's process, as a user would.

``hf-infer``   bf16 weights; prefill (``--hf-batch`` x ``--hf-seq`` tokens, one
               forward) and greedy decode (batch 1, ms per new token);
               the generated tokens are compared with native's
``hf-train``   fp32 weights, AdamW (``--hf-optim``: PyTorch's default, foreach,
               or fused), bf16 autocast, batches of ``--hf-batch`` x
               ``--hf-seq`` tokens; ms per step after two warm-up steps
               (offload plans on the second); the losses are compared with
               native's

How the weights reach the GPU (``--hf-load``): ``device-map``,
``from_pretrained(device_map="cuda")``: transformers first reserves one block of
min(the weights, free memory less 1.2 GiB) (its caching-allocator warm-up), and
PyTorch carves the weights out of that one allocation; ``to``,
``from_pretrained()`` on the CPU then ``.to("cuda")``: each weight is an
allocation of its own.  accelerate's column loads its own way.

Columns (each a process of its own):
  native       no cap
  capped       set_per_process_memory_fraction(cap): out of memory expected
  vmmx         vmmx.torch.enable(device_limit=cap)
  offload      the same plus vmmx.torch.offload(model) (optimizer=opt in training)
  vmmx-run     the native script, unmodified, under vmmx-run --device-limit cap
               (its default placement, driven by the kernel launches); its
               report's cycle, placement, trial and driver time lines are kept
  vmmx-run-alloc   the same with --placement alloc (segments stay where
               allocation put them)
  vmmx-run-launch  the same with --placement launch, named: the default
  vmmx-run-inference  the same with --preset inference (PyTorch's blocks over
               1 GiB left unsplit, sends back parked)
  accelerate   from_pretrained(device_map="auto", max_memory={0: 7/8 cap, "cpu": ...}),
               the process capped as "capped" is (max_memory bounds the weights only)
  floor        max(native time, the bytes past the cap at the pinned copy rate
               measured in the same run; twice that in training)

The cap of a ratio r is the native peak of the workload divided by r, so a
column at 1.5 runs a model whose working set is 1.5 times its device memory.
Needs transformers (and accelerate for its column); the model is never
downloaded.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

GiB = 1 << 30
COLUMNS = ["native", "capped", "vmmx", "offload", "vmmx-run", "vmmx-run-alloc", "vmmx-run-launch",
           "vmmx-run-inference", "accelerate", "floor"]
# The columns run under vmmx-run, and its options for each.
RUN_COLUMNS = {"vmmx-run": [], "vmmx-run-alloc": ["--placement", "alloc"],
               "vmmx-run-launch": ["--placement", "launch"],
               "vmmx-run-inference": ["--preset", "inference"]}
# hidden, intermediate, layers, heads: the Llama-2-7B shape and a 0.95 B one for training
PRESETS = {"7b": (4096, 11008, 32, 32), "3b": (3200, 8640, 26, 32),
           "1b": (2048, 5632, 16, 16), "tiny": (1024, 2816, 8, 16)}


def _config(preset):
    from transformers import LlamaConfig
    h, i, n, heads = PRESETS[preset]
    return LlamaConfig(hidden_size=h, intermediate_size=i, num_hidden_layers=n,
                       num_attention_heads=heads, num_key_value_heads=heads,
                       vocab_size=32000, max_position_embeddings=4096)


def save(spec):
    """Build the model from its config (random weights) and save it once (a --hf-dir
    that holds it from an earlier run is used as it is)."""
    import torch
    from transformers import LlamaForCausalLM
    dtype = torch.float32 if spec["workload"] == "hf-train" else torch.bfloat16
    if os.path.exists(os.path.join(spec["dir"], "config.json")):
        with torch.device("meta"):
            m = LlamaForCausalLM(_config(spec["preset"])).to(dtype)
        return {"param_bytes": sum(p.numel() * p.element_size() for p in m.parameters())}
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = LlamaForCausalLM(_config(spec["preset"])).to(dtype)
    m.save_pretrained(spec["dir"])
    return {"param_bytes": sum(p.numel() * p.element_size() for p in m.parameters())}


def _load(spec, torch):
    from transformers import LlamaForCausalLM
    dtype = torch.float32 if spec["workload"] == "hf-train" else torch.bfloat16
    if spec["column"] == "accelerate":
        # the weights may take the cap less what offload leaves for activations (1/8)
        kw = {"device_map": "auto",
              "max_memory": {0: spec["cap"] - spec["cap"] // 8, "cpu": 512 * GiB}}
        return LlamaForCausalLM.from_pretrained(spec["dir"], dtype=dtype, **kw)
    if _load_way(spec) == "to":
        return LlamaForCausalLM.from_pretrained(spec["dir"], dtype=dtype).to("cuda")
    return LlamaForCausalLM.from_pretrained(spec["dir"], dtype=dtype, device_map="cuda")


def _load_way(spec):
    """spec["load"]: "device-map" (the default) or "to" (see the top); anything else is
    refused by name."""
    way = spec.get("load", "device-map")
    if way not in ("device-map", "to"):
        raise ValueError(f"unknown way to load {way!r} (device-map or to)")
    return way


def _where(torch, model):
    """Parameter bytes on the GPU and elsewhere (host memory, or accelerate's CPU)."""
    import vmmx
    dev = host = 0
    for p in model.parameters():
        n = p.numel() * p.element_size()
        if not p.is_cuda:
            host += n
            continue
        r = None
        try:
            r = vmmx.residency(p.data_ptr(), n, p.device.index)
        except Exception:  # noqa: BLE001 - not libvmmx memory (native columns)
            pass
        d = r[0] if r else n
        dev, host = dev + d, host + n - d
    return dev, host


def child(spec):
    """One column of one hf workload in this process: a dict for the JSON line."""
    import torch
    col, cap = spec["column"], spec["cap"]
    out = {"column": col, "workload": spec["workload"], "ratio": spec["ratio"], "cap": cap}
    if col in ("vmmx", "offload"):
        import vmmx.torch
        vmmx.torch.enable(device_limit=cap)
    if col in ("capped", "accelerate"):  # accelerate's max_memory caps the weights only
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), 0)
    t0 = time.perf_counter()
    model = _load(spec, torch)
    out["load_s"] = time.perf_counter() - t0
    run = _infer if spec["workload"] == "hf-infer" else _train
    return run(spec, torch, model, out)


def _infer(spec, torch, model, out):
    model.eval()
    off = None
    if spec["column"] == "offload":
        import vmmx.torch
        off = vmmx.torch.offload(model, lookahead=spec["lookahead"], home=spec["home"],
                                 adapt=spec.get("adapt", True))
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 32000, (spec["hf_batch"], spec["hf_seq"]), generator=g).cuda()
    prompt = ids[:1, :32]
    times = []
    with torch.no_grad():
        for i in range(spec["warmup"] + spec["steps"]):
            torch.cuda.synchronize()
            t = time.perf_counter()
            logits = model(ids, use_cache=False).logits
            torch.cuda.synchronize()
            if i >= spec["warmup"]:
                times.append((time.perf_counter() - t) * 1e3)
        out["prefill_ms"] = statistics.median(times)
        out["prefill_times"] = times
        prof = os.environ.get("VMMX_BENCH_PROFILE")  # a file: one prefill's profile
        if prof:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as pr:
                model(ids, use_cache=False)
                torch.cuda.synchronize()
            _write_profile(pr, f"{prof}.{_label(spec)}")
        out["logits_sum"] = float(logits[:, -1].float().sum())
        del logits
        n = spec["new_tokens"]
        # a warm-up of the same length: the first generate() of a process is slower all
        # along (native too: 96 ms a token against 23 for the second on an H100), as
        # PyTorch's cache meets each new size of the growing KV cache once
        model.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        torch.cuda.synchronize()
        t = time.perf_counter()
        toks = model.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        torch.cuda.synchronize()
        out["decode_ms"] = (time.perf_counter() - t) * 1e3 / n
        if prof:  # and a few tokens of decode
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as pr:
                model.generate(prompt, max_new_tokens=12, min_new_tokens=12, do_sample=False)
                torch.cuda.synchronize()
            _write_profile(pr, f"{prof}.{_label(spec)}.decode")
    out["tokens"] = toks[0, 32:].tolist()
    out["ms"] = out["prefill_ms"]
    return _finish(spec, torch, model, off, out)


def _label(spec):
    """A column's name in file names: a vmmx-run column's own, not that of the native
    run inside it."""
    return spec.get("label") or spec["column"]


def _write_profile(pr, base):
    """A profile's table (base.txt) and its Chrome trace (base.json)."""
    with open(f"{base}.txt", "w") as f:
        f.write(pr.key_averages().table(sort_by="cuda_time_total", row_limit=25))
    pr.export_chrome_trace(f"{base}.json")


def _finish(spec, torch, model, off, out):
    """What every column reports after its timings: native's peak (the cap of the
    ratios), where the weights are, offload's statistics."""
    out["peak_bytes"] = torch.cuda.max_memory_allocated() if spec["column"] == "native" else None
    out["device_bytes"], out["host_bytes"] = _where(torch, model)
    if off is not None:
        out["offload"] = off.stats()
    return out


def _train(spec, torch, model, out):
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, **_optim_args(spec))
    off = None
    if spec["column"] == "offload":
        import vmmx.torch
        off = vmmx.torch.offload(model, lookahead=spec["lookahead"], optimizer=opt,
                                 home=spec["home"])
    g = torch.Generator().manual_seed(1)
    dev = next(model.parameters()).device if spec["column"] != "accelerate" else "cuda"
    ids = torch.randint(0, 32000, (spec["hf_batch"], spec["hf_seq"]), generator=g).to(dev)
    times, losses = [], []

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        return float(loss)

    for i in range(2 + spec["steps"]):
        torch.cuda.synchronize()
        t = time.perf_counter()
        losses.append(step())
        torch.cuda.synchronize()
        if i >= 2:
            times.append((time.perf_counter() - t) * 1e3)
    prof = os.environ.get("VMMX_BENCH_PROFILE")  # a file: one more step's profile
    if prof:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as pr:
            step()
            torch.cuda.synchronize()
        _write_profile(pr, f"{prof}.{_label(spec)}")
    out["ms"] = statistics.median(times)
    out["times"] = times
    out["losses"] = losses
    return _finish(spec, torch, model, off, out)


def _optim_args(spec):
    """AdamW's keyword arguments for spec["optim"]: PyTorch's own choice ("default":
    foreach when every parameter is on the GPU, eight or so passes over the states a
    step) or one fused kernel ("fused": one pass, what the Hugging Face Trainer picks)."""
    optim = spec.get("optim", "default")
    if optim == "default":
        return {}
    if optim == "fused":
        return {"fused": True}
    raise ValueError(f"unknown optimizer {optim!r} (default or fused)")


def _report_lines(path):
    """The launch lines of a vmmx-run report (cycle, placement, spread, trial, copies, cache
    first, settled) and its driver time, stripped; [] if none."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [ln.strip() for ln in f
                    if ln.strip().startswith(("cycle ", "placement ", "spread ", "trial ", "copies ",
                                              "cache first ", "settled ", "driver time "))]
    except OSError:
        return []


def _run_interruptible(cmd, timeout, env, grace=30):
    """subprocess.run(cmd) with output captured, in a process group of its own; past
    timeout, SIGINT to the group first (Python's KeyboardInterrupt: vmmx-run's report is
    written at the program's exit), SIGKILL after grace seconds more.  None on a
    timeout.  The child gets SIGINT's default action back: a bench started in the
    background (nohup, &) has it ignored, and a signal ignored at a program's start
    stays ignored (Python then installs no KeyboardInterrupt)."""
    import signal

    def sigint_default():
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, start_new_session=True, preexec_fn=sigint_default)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig, wait in ((signal.SIGINT, grace), (signal.SIGKILL, None)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.communicate(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        return None
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def run_column(spec, timeout, run_child, vmmx_run):
    """One column in a process of its own (vmmx-run: the native column under it)."""
    col = spec["column"]
    if col == "floor":
        return None
    if col not in RUN_COLUMNS:
        return run_child(spec, timeout)
    if not vmmx_run:
        return dict(spec, error="no vmmx-run (--vmmx-run PATH)")
    inner = dict(spec, column="native", label=col)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=pkg + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory(prefix="vmmx-bench-run-") as td:
        rep = os.path.join(td, "report")
        trace = []
        if spec.get("run_trace"):  # a launch trace per column, for vmmx-place --replay
            trace = ["--trace", os.path.join(
                spec["run_trace"], f"{spec['workload']}-x{spec['ratio']:g}.{col}.trace")]
        cmd = [vmmx_run, "--device-limit", str(spec["cap"]), *RUN_COLUMNS[col],
               "--report-file", rep, *trace, "--", sys.executable, "-m", "vmmx_tools.bench",
               "--child", json.dumps(inner)]
        r = _run_interruptible(cmd, timeout, env)
        report = _report_lines(rep)
        if r is None:
            return dict(spec, error=f"timeout after {timeout} s", report=report)
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line), column=col, peak_bytes=None, report=report)
    tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
    return dict(spec, error="OOM" if "OutOfMemoryError" in r.stderr else "failed",
                detail=" | ".join(tail)[:300], report=report)


def table(wl, ratio, row, h2d_gbs):
    """The floor of a row, and its printed lines: time, x native, x floor, and the check
    against native (tokens or losses)."""
    nat = row.get("native") or {}
    peak = nat.get("peak_bytes")
    cap = next((r["cap"] for r in row.values() if r and r.get("cap")), 0)
    floor = {}
    if peak:
        spill = max(0, peak - cap)
        xfer = spill / (h2d_gbs * 1e9) * 1e3 * (2 if wl == "hf-train" else 1)
        keys = ("prefill_ms", "decode_ms") if wl == "hf-infer" else ("ms",)
        floor = {"column": "floor", "workload": wl, "ratio": ratio, "spilled_bytes": spill,
                 "transfer_ms": xfer}
        for k in keys:
            floor[k] = max(nat.get(k) or 0, xfer)
        floor["ms"] = floor[keys[0]]
        row["floor"] = floor
    lines = []
    keys = ("prefill_ms", "decode_ms") if wl == "hf-infer" else ("ms",)
    for col, r in row.items():
        r = r or {}
        if r.get("error"):
            lines.append(f"  {col:15s} {r['error']} {r.get('detail', '')[:120]}")
            lines.extend(f"    {ln}" for ln in r.get("report") or [])
            continue
        cells = []
        for k in keys:
            v = r.get(k)
            if v is None:
                continue
            rel = f" {v / nat[k]:.2f}x native" if nat.get(k) else ""
            fl = f" {v / floor[k]:.2f}x floor" if floor.get(k) else ""
            cells.append(f"{k[:-3]} {v:.1f} ms{rel}{fl}")
        check = ""
        if col not in ("native", "floor") and nat:
            if "tokens" in r:
                check = " tokens=native" if r["tokens"] == nat.get("tokens") else " TOKENS DIFFER"
            if "losses" in r and nat.get("losses"):
                d = max(abs(a - b) for a, b in zip(r["losses"], nat["losses"]))
                check = f" max |loss - native| {d:.3g}"
        where = ""
        if r.get("device_bytes") is not None:
            where = f" [weights {r['device_bytes'] / GiB:.2f} GiB GPU, " \
                    f"{r['host_bytes'] / GiB:.2f} GiB host]"
        lines.append(f"  {col:15s} " + " | ".join(cells) + check + where)
        # copies, settled: only when some copy had host memory at both ends, some launch settled
        lines.extend(f"    {ln}" for ln in r.get("report") or []
                     if ln.startswith(("placement ", "spread ", "trial ", "driver time ")) or
                     (ln.startswith(("copies ", "settled ")) and ln.split()[1] != "0"))
    return lines
