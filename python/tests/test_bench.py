# SPDX-License-Identifier: MIT
"""vmmx-torch-bench's parent side, which needs no GPU and no torch: the floor
model, the table, the JSON, and the allocation microbenchmark's interleaving
and medians.  The children (one process per column, which need torch and a
GPU) are replaced by a function that answers as they would."""
import contextlib
import io
import json
import os
import tempfile

import pytest

from vmmx_tools import bench

GiB = 1 << 30


def _fake(calls, native_ms=10.0, peak=0, us=None):
    """A stand-in for run_child: records each spec, answers like a child."""
    us = us or {}

    def run_child(spec, timeout):
        calls.append(spec)
        col, wl = spec["column"], spec["workload"]
        if wl == "bandwidth":
            return dict(h2d_gbs=50.0, total_memory=80 * GiB, device_name="fake GPU",
                        torch="0")
        if wl == "alloc":
            n = sum(1 for c in calls if c["workload"] == "alloc" and c["column"] == col)
            rounds = us.get(col)
            if rounds is None:
                return dict(spec, error="failed", detail="no such column here")
            return dict(spec, us_rounds=[r + n for r in rounds])  # drifts with each process
        ws = int(spec["ratio"] * spec["cap"])
        if col == "capped" and spec["ratio"] > 1:
            return dict(spec, error="OOM", detail="CUDA out of memory")
        ms = {"native": native_ms, "vmmx": 600.0, "offload": 12.0}.get(col, 20.0)
        return dict(spec, ms=ms, working_set_bytes=ws, peak_allocated_bytes=peak)

    return run_child


def _main(argv, fake):
    saved = bench.run_child
    bench.run_child = fake
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            assert bench.main(argv) == 0
    finally:
        bench.run_child = saved
    return out.getvalue()


def _floor(results, wl, ratio):
    return next(r for r in results["runs"] if r["column"] == "floor" and
                r["workload"] == wl and r["ratio"] == ratio)


def test_parse_size():
    assert bench.parse_size("8GiB") == 8 * GiB
    assert bench.parse_size("512MiB") == 512 << 20
    assert bench.parse_size("1.5G") == 3 * GiB // 2
    assert bench.parse_size(4096) == 4096


def test_floor_model_and_table():
    calls = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.json")
        text = _main(["--workload", "infer,train", "--ratios", "0.5,1.5", "--columns",
                      "native,capped,offload,floor", "--json", path], _fake(calls))
        with open(path) as f:
            results = json.load(f)
    # one process per measured column and row, the bandwidth first; floor is computed
    assert calls[0]["workload"] == "bandwidth"
    assert [(c["workload"], c["ratio"], c["column"]) for c in calls[1:]] == [
        (wl, r, col) for wl in ("infer", "train") for r in (0.5, 1.5)
        for col in ("native", "capped", "offload")]
    assert {c["batch"] for c in calls[1:] if c["workload"] == "infer"} == {4}
    assert {c["batch"] for c in calls[1:] if c["workload"] == "train"} == {1}
    # fits: the floor is native's time
    assert _floor(results, "infer", 0.5)["ms"] == 10.0
    assert _floor(results, "infer", 0.5)["spilled_bytes"] == 0
    # 1.5x an 8 GiB cap with 1 GiB of headroom: 12 - 7 = 5 GiB over 50 GB/s
    fl = _floor(results, "infer", 1.5)
    assert fl["spilled_bytes"] == 5 * GiB
    assert abs(fl["ms"] - 5 * GiB / 50e9 * 1e3) < 1e-9
    # training moves what does not fit out and back
    assert abs(_floor(results, "train", 1.5)["ms"] - 2 * fl["ms"]) < 1e-9
    assert results["machine"]["device_name"] == "fake GPU"
    assert "pinned H2D 50.0 GB/s" in text
    assert "capped OOM" in text
    assert "offload 12.0 ms 1.20x" in text


def test_floor_counts_activations_past_the_cap():
    calls = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.json")
        _main(["--workload", "infer", "--ratios", "1.125", "--columns", "native,floor",
               "--json", path], _fake(calls, peak=11 * GiB))
        with open(path) as f:
            fl = _floor(json.load(f), "infer", 1.125)
    assert fl["spilled_bytes"] == 3 * GiB  # native's peak past the cap, more than 9 - 7


def test_alloc_interleaved_medians():
    calls = []
    us = {"native": [2.0, 2.1, 2.2, 2.3, 2.4], "alloc-pool": [3.0, 3.1, 3.2, 3.3, 3.4],
          "alloc-allocator": [4.0, 4.0, 4.0, 4.0, 4.0]}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.json")
        text = _main(["--workload", "infer", "--ratios", "0.5", "--columns", "native",
                      "--alloc", "--alloc-procs", "3", "--json", path], _fake(calls, us=us))
        with open(path) as f:
            results = json.load(f)
    order = [c["column"] for c in calls if c["workload"] == "alloc"]
    assert order == ["native", "alloc-pool", "alloc-allocator"] * 3
    a = results["alloc"]
    # each process drifts by +1, +2, +3: 15 rounds, median of native 2.2 + 2 = 4.2
    assert a["native"]["rounds"] == 15
    assert abs(a["native"]["us"] - 4.2) < 1e-9
    assert abs(a["alloc-pool"]["us"] - 5.2) < 1e-9
    assert abs(a["alloc-pool"]["ratio"] - 5.2 / 4.2) < 1e-9
    assert abs(a["alloc-allocator"]["min"] - 5.0) < 1e-9
    assert abs(a["alloc-allocator"]["max"] - 7.0) < 1e-9
    assert abs(a["alloc-pool"]["ratio_min"] - 4.0 / 3.0) < 1e-9  # 3.0 + 1 against 2.0 + 1
    assert "alloc-pool       median   5.20  1.24x   fastest   4.00  1.33x   slowest   6.40" \
        in text


def test_alloc_failure_is_reported():
    calls = []
    us = {"native": [2.0], "alloc-pool": [3.0]}
    text = _main(["--workload", "infer", "--ratios", "0.5", "--columns", "native",
                  "--alloc", "--alloc-procs", "1"], _fake(calls, us=us))
    assert "alloc-allocator  failed: no such column here" in text


def test_plot_is_written():
    pytest.importorskip("matplotlib", reason="python3-matplotlib is not installed")
    calls = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.png")
        _main(["--workload", "matmul", "--ratios", "0.5,1.5", "--columns",
               "native,capped,offload,floor", "--plot", path], _fake(calls))
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


_FAKE_RUN = r'''#!/bin/sh
# A stand-in for vmmx-run: records its arguments, writes a report, answers as a child.
# FAKE_RUN_HANG: it hangs until SIGINT, then writes its report (the trap is set
# first thing, so that a signal soon after the start finds it).
[ "$FAKE_RUN_HANG" = 1 ] &&
	trap 'kill $! 2>/dev/null; echo "  placement        launch: cut short" >"$rep"; exit 130' INT
printf '%s\n' "$@" >"$(dirname "$0")/args"
while [ $# -gt 0 ]; do
	case $1 in
	--report-file) rep=$2; shift 2 ;;
	--) shift; break ;;
	*) shift ;;
	esac
done
{ echo 'vmmx-run: report'; echo '    cycle          learned 1 times'
  echo '  placement        launch: 3 segments'
  echo '  spread           2 segments kept (1.0 GiB) of the cycle'"'"'s 4 (2.0 GiB), chosen 1 times'
  echo "  copies           5 with host memory at both ends, the CPU granted both first"
  echo "    driver time    map 1.5 ms (12), set_access 20.0 ms (10), checksums 0.5 ms (4), events 0.0 ms (0)"
  echo "    host copies    4 moves to host memory mapped a kept copy"; } >"$rep"
if [ "$FAKE_RUN_FAIL" = 1 ]; then echo "OutOfMemoryError: CUDA out of memory" >&2; exit 1; fi
if [ "$FAKE_RUN_HANG" = 1 ]; then
	sleep 60 >/dev/null 2>&1 &
	wait
fi
echo '{"column": "native", "prefill_ms": 5.0, "decode_ms": 2.0, "tokens": [1, 2]}'
'''


def test_vmmx_run_columns(monkeypatch):
    """vmmx-run, vmmx-run-alloc, vmmx-run-launch and vmmx-run-inference run the native
    child under vmmx-run, the first with its default placement, the next two with
    --placement alloc and launch, the last with --preset inference;
    the report's launch lines and its driver time come back with the result, also on a
    failure, and the table prints the placement, spread and driver time lines, and the
    copies line when not 0."""
    from vmmx_tools import bench_hf
    with tempfile.TemporaryDirectory() as d:
        fake = os.path.join(d, "vmmx-run")
        with open(fake, "w") as f:
            f.write(_FAKE_RUN)
        os.chmod(fake, 0o755)
        spec = dict(column="vmmx-run-launch", workload="hf-infer", cap=3 * GiB, ratio=1.5)
        r = bench_hf.run_column(spec, 60, None, fake)
        with open(os.path.join(d, "args")) as f:
            args = f.read().split("\n")
        assert args[:5] == ["--device-limit", str(3 * GiB), "--placement", "launch",
                            "--report-file"]
        assert r["column"] == "vmmx-run-launch" and r["prefill_ms"] == 5.0
        assert r["report"] == ["cycle          learned 1 times",
                               "placement        launch: 3 segments",
                               "spread           2 segments kept (1.0 GiB) of the cycle's 4 "
                               "(2.0 GiB), chosen 1 times",
                               "copies           5 with host memory at both ends, the CPU "
                               "granted both first",
                               "driver time    map 1.5 ms (12), set_access 20.0 ms (10), "
                               "checksums 0.5 ms (4), events 0.0 ms (0)"]
        assert "--trace" not in args
        # the native run inside is labelled with the column: its files (profiles) are its own
        child = json.loads(args[args.index("--child") + 1])
        assert child["column"] == "native" and child["label"] == "vmmx-run-launch"
        assert bench_hf._label(child) == "vmmx-run-launch"
        assert bench_hf._label(dict(column="native")) == "native"
        bench_hf.run_column(dict(spec, column="vmmx-run", run_trace=d), 60, None, fake)
        with open(os.path.join(d, "args")) as f:
            args = f.read().split("\n")
        assert "--placement" not in args
        assert args[args.index("--trace") + 1] == os.path.join(d, "hf-infer-x1.5.vmmx-run.trace")
        assert args.index("--trace") < args.index("--")
        bench_hf.run_column(dict(spec, column="vmmx-run-alloc"), 60, None, fake)
        with open(os.path.join(d, "args")) as f:
            args = f.read().split("\n")
        assert args[:5] == ["--device-limit", str(3 * GiB), "--placement", "alloc",
                            "--report-file"]
        r = bench_hf.run_column(dict(spec, column="vmmx-run-inference"), 60, None, fake)
        with open(os.path.join(d, "args")) as f:
            args = f.read().split("\n")
        assert args[:5] == ["--device-limit", str(3 * GiB), "--preset", "inference",
                            "--report-file"]
        assert r["column"] == "vmmx-run-inference"
        monkeypatch.setenv("FAKE_RUN_FAIL", "1")
        bad = bench_hf.run_column(spec, 60, None, fake)
        assert bad["error"] == "OOM" and len(bad["report"]) == 5
        monkeypatch.delenv("FAKE_RUN_FAIL")
        monkeypatch.setenv("FAKE_RUN_HANG", "1")
        hung = bench_hf.run_column(spec, 3, None, fake)
        assert hung["error"] == "timeout after 3 s"
        assert hung["report"] == ["placement        launch: cut short"]
    row = {"native": dict(prefill_ms=4.0, decode_ms=2.0, tokens=[1, 2], peak_bytes=0),
           "vmmx-run-launch": r}
    lines = bench_hf.table("hf-infer", 1.5, row, 50.0)
    assert any(ln.startswith("  vmmx-run-launch prefill 5.0 ms 1.25x native") and
               "tokens=native" in ln for ln in lines), lines
    # the placement and spread lines are printed under the row; the cycle line is not
    assert "    placement        launch: 3 segments" in lines
    assert any(ln.startswith("    spread           2 segments kept") for ln in lines), lines
    assert not any("cycle " in ln for ln in lines), lines
    # the driver time line too (where the moves' driver time went); the host copies line not
    assert "    driver time    map 1.5 ms (12), set_access 20.0 ms (10), checksums 0.5 ms (4), " \
        "events 0.0 ms (0)" in lines, lines
    assert not any("host copies" in ln for ln in lines), lines
    # the copies line, when some copy had host memory at both ends; not with none
    assert "    copies           5 with host memory at both ends, the CPU granted both first" \
        in lines, lines
    r0 = dict(r, report=[ln.replace("copies           5", "copies           0")
                         for ln in r["report"]])
    lines0 = bench_hf.table("hf-infer", 1.5, dict(row, **{"vmmx-run-launch": r0}), 50.0)
    assert not any("copies " in ln for ln in lines0), lines0
    assert bench_hf.run_column(dict(spec, column="vmmx-run"), 60, None, None)["error"].startswith(
        "no vmmx-run")


def _hf_child(calls):
    """A child that answers as a real model's would (its spec kept in @calls): the copy
    rate, the model saved, then 10 ms a step and an 8 GiB peak."""
    def run_child(spec, timeout):
        calls.append(spec)
        if spec["workload"] == "bandwidth":
            return dict(h2d_gbs=50.0, total_memory=80 * GiB, device_name="fake GPU", torch="0")
        if spec["column"] == "save":
            return dict(param_bytes=4 * GiB)
        return dict(spec, ms=10.0, losses=[1.0], peak_bytes=8 * GiB)
    return run_child


def _hf_run(args):
    """bench.main() on @args at 1.5, native and floor, with _hf_child(): its output and
    the children's specs."""
    calls = []
    with tempfile.TemporaryDirectory() as d:
        out = _main(["--ratios", "1.5", "--columns", "native,floor", "--hf-dir", d] + args,
                    _hf_child(calls))
    return out, calls


def test_hf_optim_reaches_the_training_children():
    """--hf-optim goes into every hf-train child's spec and names the optimizer in the
    row's heading; AdamW's arguments follow it, and a name it does not know is refused
    by name (the child's own check: a spec written by hand)."""
    from vmmx_tools import bench_hf
    out, calls = _hf_run(["--workload", "hf-train", "--hf-optim", "fused"])
    train = [c for c in calls if c["workload"] == "hf-train"]
    assert train and all(c["optim"] == "fused" for c in train), train
    assert "AdamW fused" in out, out
    assert bench_hf._optim_args(dict(optim="fused")) == {"fused": True}
    assert bench_hf._optim_args(dict(optim="default")) == {}
    assert bench_hf._optim_args({}) == {}
    with pytest.raises(ValueError, match="unknown optimizer 'sgd'"):
        bench_hf._optim_args(dict(optim="sgd"))
    with pytest.raises(SystemExit):
        with contextlib.redirect_stderr(io.StringIO()):
            bench.main(["--hf-optim", "sgd"])


def test_hf_load_reaches_the_children():
    """--hf-load goes into every hf-infer child's spec and names the way in the heading;
    a way the child does not know is refused by name, and so is one on the command line."""
    from vmmx_tools import bench_hf
    out, calls = _hf_run(["--workload", "hf-infer", "--hf-load", "to"])
    infer = [c for c in calls if c["workload"] == "hf-infer"]
    assert infer and all(c["load"] == "to" for c in infer), infer
    assert "loaded with .to()" in out, out
    out, calls = _hf_run(["--workload", "hf-infer"])
    assert all(c["load"] == "device-map" for c in calls if c["workload"] == "hf-infer"), calls
    assert "loaded with device_map" in out, out
    assert bench_hf._load_way(dict(load="to")) == "to"
    assert bench_hf._load_way({}) == "device-map"
    with pytest.raises(ValueError, match="unknown way to load 'cpu'"):
        bench_hf._load_way(dict(load="cpu"))
    with pytest.raises(SystemExit):
        with contextlib.redirect_stderr(io.StringIO()):
            bench.main(["--hf-load", "cpu"])
