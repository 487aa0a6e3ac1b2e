# SPDX-License-Identifier: MIT
"""PyTorch over libvmmx, on a GPU: each test runs in its own process, because
the allocator is chosen once per process.  Skipped without torch or CUDA."""
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device for PyTorch", allow_module_level=True)
if os.environ.get("VMMX_BACKEND", "cuda") != "cuda":
    pytest.skip("PyTorch needs VMMX_BACKEND=cuda (a real GPU)", allow_module_level=True)


def run(code, **env):
    e = dict(os.environ, **{k: str(v) for k, v in env.items()})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


TRAIN = """
    import torch, vmmx, vmmx.torch
    MODE = {mode!r}
    if MODE:
        vmmx.torch.enable(mode=MODE, device_limit="{limit}")
    torch.manual_seed(0)
    layers = []
    for i in range(12):
        layers += [torch.nn.Linear(4096, 4096, dtype=torch.bfloat16), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    off = None
    if {piece}:
        vmmx.torch._stepper._PIECE = {piece}  # pieces that cut state tensors and span two of them
    if MODE and {offload}:
        off = vmmx.torch.offload(model, lookahead=2, optimizer=opt if {stepper} else None)
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    for step in range(4):
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    print("LOSS", loss.item())
    for name in ("exp_avg", "exp_avg_sq"):  # the state as each step left it, where it lives
        print("STATE", name, sum(float(st[name].float().abs().sum()) for st in opt.state.values()))
    if MODE:
        st = vmmx.torch.stats()
        print("HOST", st["allocator"]["host_reserved"])
    if off:
        print("STATS", off.stats())
        if MODE == "pool":
            torch.cuda.memory_stats()  # still works
"""


def loss(out):
    return float(next(l for l in out.splitlines() if l.startswith("LOSS")).split()[1])


def state(out):
    return {l.split()[1]: float(l.split()[2]) for l in out.splitlines() if l.startswith("STATE")}


def host(out):
    return int(next(l for l in out.splitlines() if l.startswith("HOST")).split()[1])


@pytest.mark.gpu
@pytest.mark.parametrize("mode,offload", [("pool", False), ("allocator", False), ("pool", True)])
def test_training_matches_native_with_part_of_the_model_in_host_memory(mode, offload):
    # 12 x 32 MiB of bf16 weights, their gradients and two AdamW states: about 1.5 GiB;
    # 640 MiB on the device
    native = run(TRAIN.format(mode=None, limit="", offload=False, stepper=False, piece=0))
    ours = run(TRAIN.format(mode=mode, limit="640MiB", offload=offload, stepper=False, piece=0))
    assert host(ours) > 0, "part of the model must live in host memory"
    assert abs(loss(ours) - loss(native)) <= 2e-2 * max(1.0, abs(loss(native)))


@pytest.mark.gpu
@pytest.mark.parametrize("limit,piece", [("640MiB", 0), ("640MiB", 5 << 20), ("320MiB", 0)])
def test_training_with_the_step_in_backward_matches_native(limit, piece):
    # 384 MiB of weights and 768 MiB of AdamW state: at 640 MiB most of the state
    # streams through the slots, written back and copied in by 32 MiB pieces (each
    # state tensor one piece) or by 5 MiB pieces (cutting tensors, spanning two); at
    # 320 MiB part of the weights stream too
    native = run(TRAIN.format(mode=None, limit="", offload=False, stepper=False, piece=0))
    ours = run(TRAIN.format(mode="pool", limit=limit, offload=True, stepper=True, piece=piece))
    assert abs(loss(ours) - loss(native)) <= 2e-2 * max(1.0, abs(loss(native))), (
        loss(ours), loss(native))
    want, got = state(native), state(ours)
    assert set(got) == {"exp_avg", "exp_avg_sq"}, got
    for name in want:  # a piece copied back or in wrong, or late, shows here
        assert abs(got[name] - want[name]) <= 1e-2 * want[name], (name, got, want)
    st = eval(ours.split("STATS ")[1].splitlines()[0])
    opt = st["optimizer"]
    assert opt["phase"] == "planned" and opt["steps"] == 4 * opt["params"], opt
    assert opt["state_streamed"] > 0 and opt["state_slots"] == 2, opt
    # every streamed state went in and came back in each of the 3 planned steps
    assert opt["state_writebacks"] == 3 * opt["state_streamed"], opt
    assert opt["state_copies"] >= opt["state_writebacks"], opt
    assert opt["steps_on_host"] == 0, opt
    if limit == "320MiB":
        assert st["streamed"] > 0 and opt["param_writebacks"] > 0, st


INFER = """
    import torch, vmmx, vmmx.torch
    MODE = {mode!r}
    if MODE:
        vmmx.torch.enable(device_limit="640MiB")
    torch.manual_seed(0)
    # 24 x 32 MiB of bf16 weights: 768 MiB, past the 640 MiB cap
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096, bias=False, dtype=torch.bfloat16)
                                  for _ in range(24)]).cuda()
    off = vmmx.torch.offload(model, lookahead=2, headroom="64MiB", home={home!r}) if MODE else None
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    with torch.no_grad():
        a = model(x).float().pow(2).sum().item()
        b = model(x).float().pow(2).sum().item()  # from copies made at the end of the last pass
        for m in model:
            m.weight.mul_(1.5)                    # changed in place between passes
        c = model(x).float().pow(2).sum().item()
    print("OUT", a, b, c)
    if off:
        print("STATS", off.stats())
"""


@pytest.mark.gpu
@pytest.mark.parametrize("home", ["vmmx", "pinned"])
def test_offload_inference_matches_native_and_sees_changed_weights(home):
    native = run(INFER.format(mode=None, home=home))
    ours = run(INFER.format(mode="pool", home=home))
    want = [float(v) for v in native.split("OUT ")[1].split()[:3]]
    got = [float(v) for v in ours.split("OUT ")[1].split()[:3]]
    for w, g in zip(want, got):
        assert abs(g - w) <= 1e-3 * max(1.0, abs(w)), (want, got)
    st = eval(ours.split("STATS ")[1].splitlines()[0])
    assert st["streamed"] > 0 and st["slots"] == 2, st
    assert st["recopies"] > 0, st  # the in-place change was seen
    assert st["from_host"] == 0, st


ADAPT = """
    import torch, vmmx, vmmx.torch
    MODE = {mode!r}
    if MODE:
        vmmx.torch.enable(device_limit="1GiB")
    torch.manual_seed(0)
    # 24 x 32 MiB of bf16 weights: 768 MiB; a 512 MiB headroom streams far more than the
    # small passes need, so the second pass promotes what fits
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096, bias=False, dtype=torch.bfloat16)
                                  for _ in range(24)]).cuda()
    off = vmmx.torch.offload(model, lookahead=2, headroom="512MiB") if MODE else None
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    out = []
    with torch.no_grad():
        out.append(model(x).float().pow(2).sum().item())
        out.append(model(x).float().pow(2).sum().item())  # promotes at its start
        if off:
            print("MID", off.stats())
        for m in model:
            m.weight.mul_(1.5)   # promoted weights change on the GPU, streamed ones at home
        out.append(model(x).float().pow(2).sum().item())
        big = torch.randn(32768, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
        out.append(model(big).float().pow(2).sum().item())  # 256 MiB activations: a spill
        out.append(model(x).float().pow(2).sum().item())    # demotes at its start
    print("OUT", *out)
    if off:
        print("STATS", off.stats())
"""


@pytest.mark.gpu
def test_offload_adapt_promotes_into_unused_room_and_demotes_on_a_spill():
    native = run(ADAPT.format(mode=None))
    ours = run(ADAPT.format(mode="pool"))
    want = [float(v) for v in native.split("OUT ")[1].split()[:5]]
    got = [float(v) for v in ours.split("OUT ")[1].split()[:5]]
    for w, g in zip(want, got):
        assert abs(g - w) <= 1e-3 * max(1.0, abs(w)), (want, got)
    mid = eval(ours.split("MID ")[1].splitlines()[0])
    assert mid["promotions"] > 0 and mid["promoted_bytes"] >= 32 << 20, mid
    assert mid["streamed"] > 0, mid  # the room was not enough for all of them
    st = eval(ours.split("STATS ")[1].splitlines()[0])
    # the big pass spilled: every promoted unit streams again (the weights changed on the
    # GPU were written home: the last pass equals native's), and promotion stopped
    assert st["demotions"] == mid["promotions"] and st["promoted"] == 0, st
    assert st["from_host"] == 0, st


PARTIAL = """
    import torch, vmmx, vmmx.torch
    MODE = {mode!r}
    if MODE:
        vmmx.torch.enable(device_limit="640MiB")
    torch.manual_seed(0)

    class Two(torch.nn.Module):  # one unit of two parameters: 32 MiB and 8 MiB
        def __init__(self):
            super().__init__()
            self.big = torch.nn.Parameter(torch.randn(4096, 4096) * 4096 ** -0.5)
            self.small = torch.nn.Parameter(torch.randn(1024, 4096) * 1024 ** -0.5)

        def forward(self, x):
            h = torch.relu(x @ self.big)
            return x + h[:, :1024] @ self.small

    # 20 x 40 MiB of bf16 weights: 800 MiB, past the 640 MiB cap
    model = torch.nn.Sequential(*[Two() for _ in range(20)]).to("cuda", torch.bfloat16)
    off = vmmx.torch.offload(model, lookahead=2, headroom="64MiB") if MODE else None
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    with torch.no_grad():
        a = model(x).float().pow(2).sum().item()
        b = model(x).float().pow(2).sum().item()
        for m in model:
            m.big.mul_(1.5)
            m.small.mul_(0.5)                     # a resident part changed too
        c = model(x).float().pow(2).sum().item()
    print("OUT", a, b, c)
    if off:
        print("STATS", off.stats())
        print("SMALL", sum(vmmx.residency(m.small.data_ptr(), m.small.nbytes)[1] for m in model))
"""


@pytest.mark.gpu
def test_offload_streams_part_of_a_unit_when_that_streams_fewer_bytes():
    native = run(PARTIAL.format(mode=None))
    ours = run(PARTIAL.format(mode="pool"))
    want = [float(v) for v in native.split("OUT ")[1].split()[:3]]
    got = [float(v) for v in ours.split("OUT ")[1].split()[:3]]
    for w, g in zip(want, got):
        assert abs(g - w) <= 1e-3 * max(1.0, abs(w)), (want, got)
    st = eval(ours.split("STATS ")[1].splitlines()[0])
    # 32 MiB slots: only the big parameters stream; the small ones stay on the GPU
    assert st["slot_bytes"] == 32 << 20 and st["streamed"] > 0, st
    assert st["streamed_bytes"] == st["streamed"] * (32 << 20), st
    assert st["recopies"] > 0 and st["from_host"] == 0, st
    assert int(ours.split("SMALL ")[1].split()[0]) == 0


STRAY = """
    import torch, vmmx, vmmx.torch
    vmmx.torch.enable(device_limit="640MiB")
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096, bias=False, dtype=torch.bfloat16)
                                  for _ in range(24)]).cuda()
    x = torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16)  # the device is full: host
    before = vmmx.residency(x.data_ptr(), x.nbytes)
    with torch.no_grad():
        want = model(x).float().sum().item()
    off = vmmx.torch.offload(model, lookahead=2, headroom="64MiB")
    after = vmmx.residency(x.data_ptr(), x.nbytes)
    with torch.no_grad():
        got = model(x).float().sum().item()
    print("RES", before[1], after[1], off.stats()["strays_moved_bytes"], want, got)
"""


@pytest.mark.gpu
def test_offload_moves_tensors_made_while_the_device_was_full_to_the_gpu():
    before, after, moved, want, got = run(STRAY).split("RES ")[1].split()
    assert int(before) > 0, "the input must have been placed in host memory"
    assert int(after) == 0 and int(moved) >= int(before)
    assert abs(float(got) - float(want)) <= 1e-3 * max(1.0, abs(float(want)))


@pytest.mark.gpu
def test_enable_too_late_is_a_clear_error():
    out = run("""
        import torch, vmmx, vmmx.torch
        x = torch.ones(1024, device="cuda")
        try:
            vmmx.torch.enable()
        except vmmx.VmmxError as e:
            print("ERR", e)
    """)
    assert "too late" in out and "before the first CUDA tensor" in out


@pytest.mark.gpu
def test_prefetch_empty_cache_and_stats():
    out = run("""
        import torch, vmmx, vmmx.torch
        vmmx.torch.enable(device_limit="256MiB")
        a = torch.empty(192 << 20, dtype=torch.uint8, device="cuda")
        b = torch.full((128 << 20,), 7, dtype=torch.uint8, device="cuda")  # spills
        print("MOVED", vmmx.torch.prefetch(b, to="host"))
        print("HOST", vmmx.torch.stats()["allocator"]["host_reserved"])
        del a
        vmmx.torch.empty_cache()          # a's segment goes back: room on the device
        print("MOVED", vmmx.torch.prefetch(b, to="device"))
        print("DEV", vmmx.torch.stats()["allocator"]["device_reserved"])
        assert int(b.sum()) == 7 * (128 << 20)
        print("TORCH", torch.cuda.memory_allocated())
    """)
    lines = dict(l.split(None, 1) for l in out.splitlines() if " " in l)
    assert "MOVED 134217728" in out
    assert int(out.split("HOST ")[1].split()[0]) >= (128 << 20)
    assert int(lines["DEV"]) >= (128 << 20)
    assert int(lines["TORCH"]) >= (128 << 20)



def test_mem_get_info_tells_the_device_limit():
    """Under enable(device_limit=...), torch.cuda.mem_get_info answers with
    the limit as the total and what it still allows as free, so that the
    libraries sizing their allocations from it (transformers' warm-up,
    accelerate's device_map) plan for the limit."""
    out = run("""
        import torch, vmmx, vmmx.torch
        vmmx.torch.enable(device_limit="1GiB")
        nf, nt = vmmx.torch._state["mem_get_info"]()
        f0, t0 = torch.cuda.mem_get_info()
        x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        f1, t1 = torch.cuda.memory.mem_get_info(0)
        print("N", nf, nt)
        print("A", f0, t0)
        print("B", f1, t1)
    """)
    v = {l.split()[0]: [int(x) for x in l.split()[1:]] for l in out.splitlines() if l[:2] in ("N ", "A ", "B ")}
    assert v["A"][1] == v["B"][1] == 1 << 30, v
    assert v["N"][1] > 1 << 30, v
    assert 0 < v["A"][0] <= 1 << 30, v
    assert v["A"][0] - v["B"][0] >= 256 << 20, v


def _vmmx_run():
    """The build tree's vmmx-run and its preload library (None outside make check)."""
    top = os.environ.get("top_builddir")
    if not top or not os.path.exists(os.path.join(top, "tools", "vmmx-run")):
        return None
    return [os.path.join(top, "tools", "vmmx-run")], {
        "VMMX_RUN_PRELOAD": os.path.join(top, "preload", ".libs", "libvmmx-preload.so")}


LLAMA_SAVE = """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5504, num_hidden_layers=24,
                      num_attention_heads=16, num_key_value_heads=16, vocab_size=32000)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained({d!r})
"""

LLAMA_RUN = """
    import torch, vmmx, vmmx.torch
    from transformers import LlamaForCausalLM
    CAP, OFFLOAD = {cap!r}, {offload!r}
    if CAP:
        vmmx.torch.enable(device_limit=CAP)
    m = LlamaForCausalLM.from_pretrained({d!r}, dtype=torch.bfloat16, device_map="cuda")
    print("BYTES", sum(p.numel() * p.element_size() for p in m.parameters()))
    if CAP:
        a = vmmx.torch.stats()["allocator"]
        print("DEV", a["device_reserved"])
        print("HOST", a["host_reserved"])
    off = vmmx.torch.offload(m) if OFFLOAD else None
    ids = torch.arange(1, 17, device="cuda").reshape(1, 16)
    print("TOK", m.generate(ids, max_new_tokens=8, do_sample=False)[0].tolist())
    if off:
        print("STATS", off.stats())
"""


def _get(out, k):
    return [l.split(" ", 1)[1] for l in out.splitlines() if l.startswith(k + " ")][0]


def test_from_pretrained_fills_the_device_to_the_limit(tmp_path):
    """A Hugging Face model 1.5x the limit, saved and loaded with
    from_pretrained(device_map="cuda"): the device holds at least 95% of the
    limit (before, transformers' one model-sized warm-up tensor went to host
    memory whole and every weight followed it: 20 MiB on the device), and
    greedy generation gives native's tokens: under enable, under offload
    (whose parameters were carved out of the warm-up tensor's segment, so
    they move one tensor at a time) and under vmmx-run."""
    pytest.importorskip("transformers", reason="transformers is not installed")
    d = str(tmp_path / "llama")
    run(LLAMA_SAVE.format(d=d))
    cap = 1700 << 20
    native = run(LLAMA_RUN.format(cap=None, offload=False, d=d))
    ours = run(LLAMA_RUN.format(cap=cap, offload=False, d=d))
    assert int(_get(native, "BYTES")) >= 1.45 * cap
    assert _get(native, "TOK") == _get(ours, "TOK")
    assert int(_get(ours, "DEV")) >= 0.95 * cap, ours
    assert int(_get(ours, "HOST")) > 0, ours
    off = run(LLAMA_RUN.format(cap=cap, offload=True, d=d))
    assert _get(native, "TOK") == _get(off, "TOK")
    st = eval(_get(off, "STATS"))
    assert st["streamed"] > 0 and st["copies"] > 0, st
    # the weights in the warm-up tensor's segment moved by copy, the others came in
    assert st["copied_home_bytes"] > 0 and st["kept_in_host_bytes"] == 0, st
    vr = _vmmx_run()
    if vr is None:
        pytest.skip("vmmx-run: not in a build tree (run under make check)")
    r = subprocess.run(vr[0] + ["--device-limit", str(cap), "--", sys.executable, "-c",
                                textwrap.dedent(LLAMA_RUN.format(cap=None, offload=False, d=d))],
                       env=dict(os.environ, **vr[1]), capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _get(native, "TOK") == _get(r.stdout, "TOK")


GUARD = """
    import torch, vmmx, vmmx.torch
    WHAT, OFFLOAD = {what!r}, {offload!r}
    if OFFLOAD is not None:
        vmmx.torch.enable(device_limit="640MiB")
    torch.manual_seed(0)
    # fp32 (a GradScaler refuses bf16 gradients): 12 x 64 MiB, past the 640 MiB cap
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(12)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if OFFLOAD is not None:
        vmmx.torch.offload(model, optimizer=opt if OFFLOAD else None)
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(64, 4096, device="cuda", generator=g)
    scaler = torch.amp.GradScaler("cuda", enabled=WHAT == "scaler")
    try:
        for step in range(3):
            for micro in range(2 if WHAT == "accumulate" else 1):
                loss = model(x).float().pow(2).mean()
                scaler.scale(loss).backward()
            if WHAT == "clip":
                print("NORM", float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)))
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
        print("LOSS", loss.item())
    except RuntimeError as e:
        print("ERROR", str(e).replace(chr(10), " "))
"""


@pytest.mark.gpu
@pytest.mark.parametrize("what,needle", [
    ("accumulate", "a second backward before optimizer.step()"),
    ("clip", "clip_grad_norm_ after backward"),
    ("scaler", "an enabled GradScaler")])
def test_offload_with_the_optimizer_refuses_what_reads_gradients_after_backward(what, needle):
    """offload(optimizer=) steps inside backward: gradient accumulation,
    clip_grad_norm_ and a GradScaler would silently differ from the loop the
    user wrote, so each raises an error saying what to do; without
    optimizer= the same loop runs and matches native."""
    native = run(GUARD.format(what=what, offload=None))
    assert "LOSS" in native and "ERROR" not in native, native
    refused = run(GUARD.format(what=what, offload=True))
    assert needle in _get(refused, "ERROR"), refused
    assert "offload without optimizer=" in _get(refused, "ERROR").lower(), refused
    plain = run(GUARD.format(what=what, offload=False))
    assert abs(float(_get(plain, "LOSS")) - float(_get(native, "LOSS"))) <= \
        2e-2 * max(1.0, abs(float(_get(native, "LOSS")))), (plain, native)
    if what == "clip":
        assert abs(float(_get(plain, "NORM")) - float(_get(native, "NORM"))) <= \
            2e-2 * float(_get(native, "NORM")), (plain, native)


DISABLE = """
    import torch, vmmx, vmmx.torch
    vmmx.torch.enable(device_limit="2GiB")
    a = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    print("A_VMMX", vmmx.lookup(a.data_ptr()) is not None)
    print("CAP", torch.cuda.mem_get_info()[1])
    vmmx.torch.disable()
    print("ENABLED", vmmx.torch.is_enabled())
    b = torch.ones(1 << 20, device="cuda")
    print("B_VMMX", vmmx.lookup(b.data_ptr()) is not None)
    print("A_SUM", float(a.sum()))  # made under libvmmx: still valid
    print("NATIVE_TOTAL", torch.cuda.mem_get_info()[1] == torch.cuda.get_device_properties(0).total_memory)
    vmmx.torch.disable()            # twice: nothing to do
    vmmx.torch.enable(device_limit="2GiB", force=True)
    c = torch.ones(1 << 20, device="cuda")
    print("C_VMMX", vmmx.lookup(c.data_ptr()) is not None, float(a.sum() + c.sum()))
"""


@pytest.mark.gpu
def test_disable_routes_new_tensors_natively_and_keeps_the_old_ones():
    out = run(DISABLE)
    v = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert v["A_VMMX"] == "True" and int(v["CAP"]) == 2 << 30, out
    assert v["ENABLED"] == "None" and v["B_VMMX"] == "False", out
    assert float(v["A_SUM"]) == float(sum(range(1 << 20))), out
    assert v["NATIVE_TOTAL"] == "True", out
    assert v["C_VMMX"].split()[0] == "True", out


DISABLE_OFFLOAD = """
    import torch, vmmx, vmmx.torch
    vmmx.torch.enable(device_limit="640MiB")
    torch.manual_seed(0)
    # 24 x 32 MiB of bf16 weights: 768 MiB, past the 640 MiB cap
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096, bias=False, dtype=torch.bfloat16)
                                  for _ in range(24)]).cuda()
    off = vmmx.torch.offload(model, lookahead=2, headroom="64MiB")
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    with torch.no_grad():
        a = model(x).float().pow(2).sum().item()
        copies = off.stats()["copies"]
        vmmx.torch.disable()
        b = model(x).float().pow(2).sum().item()   # still streamed through its slots
        print("STILL_STREAMS", off.stats()["copies"] > copies)
        home = [m.weight for m in model if vmmx.lookup(m.weight.data_ptr()) is not None]
        print("HOMES_VMMX", len(home) > 0)
        off.close()
        c = model(x).float().pow(2).sum().item()   # from the homes, no hooks
    print("OUT", a, b, c)
"""


@pytest.mark.gpu
def test_disable_leaves_an_open_offloader_working():
    """disable() with an Offloader open: the offloader's slots and homes are
    libvmmx memory it holds, so it keeps streaming, and closes as before."""
    out = run(DISABLE_OFFLOAD)
    assert "STILL_STREAMS True" in out and "HOMES_VMMX True" in out, out
    a, b, c = (float(v) for v in out.split("OUT ")[1].split()[:3])
    assert abs(b - a) <= 1e-3 * max(1.0, abs(a)) and abs(c - a) <= 1e-3 * max(1.0, abs(a)), out


@pytest.mark.gpu
def test_disable_in_the_allocator_mode_says_why():
    out = run("""
        import torch, vmmx, vmmx.torch
        vmmx.torch.enable(mode="allocator")
        torch.ones(4, device="cuda")
        try:
            vmmx.torch.disable()
        except vmmx.VmmxError as e:
            print("ERR", e.code == vmmx.EBUSY, "swap its allocator back" in str(e))
    """)
    assert "ERR True True" in out, out


@pytest.mark.gpu
def test_bad_arguments_raise_python_errors_naming_them():
    out = run("""
        import torch, vmmx, vmmx.torch
        for call in (lambda: vmmx.torch.enable(mode="bogus"),
                     lambda: vmmx.torch.enable(mode=1)):
            try:
                call()
            except (TypeError, ValueError) as e:
                print("ERR", type(e).__name__, e)
        vmmx.torch.enable(device_limit="1GiB")
        m = torch.nn.Linear(64, 64).cuda()
        for kw in ({"home": "x"}, {"optimizer": object()}):
            try:
                vmmx.torch.offload(m, **kw)
            except (TypeError, ValueError) as e:
                print("ERR", type(e).__name__, e)
    """)
    errs = [line for line in out.splitlines() if line.startswith("ERR")]
    assert errs == [
        "ERR ValueError vmmx.torch.enable: mode 'bogus' is not one of 'pool', 'allocator'",
        "ERR TypeError vmmx.torch.enable: mode must be a str, not int",
        "ERR ValueError vmmx.torch.offload: home 'x' is not one of 'vmmx', 'pinned'",
        "ERR TypeError vmmx.torch.offload: optimizer must be a torch.optim.Optimizer, not object",
    ], out


@pytest.mark.gpu
def test_a_pytorch_without_a_private_call_is_refused_by_name():
    out = run("""
        import torch, vmmx, vmmx.torch
        del torch._C._cuda_beginAllocateToPool
        try:
            vmmx.torch.enable(device_limit="1GiB")
        except vmmx.VmmxError as e:
            print("ERR", e.code == vmmx.ENOTSUP, "torch._C._cuda_beginAllocateToPool" in str(e),
                  vmmx.torch.is_enabled())
    """)
    assert "ERR True True None" in out, out
