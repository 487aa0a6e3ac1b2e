# SPDX-License-Identifier: MIT
"""vmmx-plot: draw the charts of any libvmmx tool's JSON with matplotlib.

The tools (vmmx-bench, vmmx-place, the framework benchmarks) write their
results as JSON; a document that has a ``charts`` member can be drawn here,
whichever tool wrote it.  Each chart is an object::

    {"name": "grow", "title": "...",
     "x": {"label": "buffer size", "unit": "B", "scale": "log2"},
     "y": {"label": "cumulative time", "unit": "ms", "scale": "linear"},
     "series": [{"name": "vmmx_buf_resize", "x": [...], "y": [...]}]}

``unit`` "B" marks byte counts: their ticks read 2 MiB, 1 GiB.  ``scale``
"log2" (for sizes that double) or "linear".  A null point breaks its line.

A chart with ``"type": "residency"`` (``vmmx-place --replay --json``) is a
grid instead: a row per segment, a column per launch of one step, each cell
coloured by where the segment is at that launch, and marked where the
launch names it::

    {"name": "residency-launch-lru", "type": "residency", "title": "...",
     "first_launch": 12,
     "segments": [{"base": "0x7f..", "size": 67108864, "cells": "Ddhh.."}]}

``cells``: one letter a launch, ``d`` on the device, ``h`` in host memory,
``.`` not allocated; upper case where the launch names the segment.

The output format follows the file's extension: .png (compressed, 100 dpi:
tens of KB), .svg or .pdf.  Several charts go one under the other in one
figure.  Needs matplotlib (Debian: python3-matplotlib) and nothing of
libvmmx: importing this module loads neither torch nor the C library.

Exit status: 0 drawn, 1 the input or the output failed, 2 bad usage,
3 matplotlib is missing.
"""

import argparse
import json
import math
import os
import sys

_SIZE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]


def fmt_bytes(v, _pos=None):
    """A byte count as the tools print it: 512 B, 2 MiB, 1.5 GiB."""
    u = 0
    while abs(v) >= 1024 and u < len(_SIZE_UNITS) - 1:
        v /= 1024.0
        u += 1
    return ("%d %s" if v == int(v) else "%.3g %s") % (v, _SIZE_UNITS[u])


def load_charts(doc, names=None):
    """The charts of a tool's JSON document, those named in @names only."""
    charts = doc.get("charts") if isinstance(doc, dict) else None
    if not isinstance(charts, list) or not charts:
        raise ValueError("no \"charts\" in this JSON: the tool wrote nothing to draw")
    if names:
        charts = [c for c in charts if c.get("name") in names]
        if not charts:
            raise ValueError("no chart named %s" % ", ".join(names))
    return charts


def _axis_label(axis):
    label = axis.get("label", "")
    unit = axis.get("unit")
    return "%s (%s)" % (label, unit) if unit and unit != "B" else label


def _pow2_step(lo, hi, most=8):
    """A power-of-two tick step giving at most @most ticks over [lo, hi]."""
    step = 1.0
    while (hi - lo) / step > most:
        step *= 2
    return step


def _setup_axis(ax, which, axis):
    from matplotlib.ticker import FuncFormatter, LogLocator, MultipleLocator

    setlabel = ax.set_xlabel if which == "x" else ax.set_ylabel
    setscale = ax.set_xscale if which == "x" else ax.set_yscale
    target = ax.xaxis if which == "x" else ax.yaxis
    setlabel(_axis_label(axis))
    if axis.get("scale") == "log2":
        setscale("log", base=2)
        target.set_major_locator(LogLocator(base=2))
    elif axis.get("unit") == "B":
        lo, hi = ax.get_xlim() if which == "x" else ax.get_ylim()
        target.set_major_locator(MultipleLocator(_pow2_step(max(lo, 0), hi)))
    if axis.get("unit") == "B":
        target.set_major_formatter(FuncFormatter(fmt_bytes))


def _points(series):
    xs, ys = [], []
    for x, y in zip(series.get("x", []), series.get("y", [])):
        ok = x is not None and y is not None and math.isfinite(x) and math.isfinite(y)
        xs.append(x if ok else float("nan"))
        ys.append(y if ok else float("nan"))
    return xs, ys


_RESIDENCY = {".": 0, "d": 1, "h": 2}


def residency_grid(chart):
    """A residency chart's cells as rows of codes (0 none, 1 device, 2 host)
    and the (launch, row) places a launch names."""
    grid, named = [], []
    for row, seg in enumerate(chart.get("segments", [])):
        cells = seg.get("cells", "")
        if any(c.lower() not in _RESIDENCY for c in cells):
            raise ValueError("residency chart %s: a cell that is not d, h or ." % chart.get("name"))
        grid.append([_RESIDENCY[c.lower()] for c in cells])
        named += [(x, row) for x, c in enumerate(cells) if c.isupper()]
    return grid, named


def _draw_residency(ax, chart):
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    grid, named = residency_grid(chart)
    colours = ["#ffffff", "#3b75af", "#ef8636"]
    first = chart.get("first_launch", 0)
    if grid and grid[0]:
        ax.imshow(grid, cmap=ListedColormap(colours), vmin=0, vmax=2, aspect="auto",
                  interpolation="nearest", origin="upper",
                  extent=(first - 0.5, first + len(grid[0]) - 0.5, len(grid) - 0.5, -0.5))
    if named:
        ax.scatter([first + x for x, _ in named], [y for _, y in named], s=12, c="black",
                   marker="o", linewidths=0)
    segs = chart.get("segments", [])
    if len(segs) <= 32:
        ax.set_yticks(range(len(segs)))
        ax.set_yticklabels(["%s %s" % (s.get("base", "?"), fmt_bytes(s.get("size", 0)))
                            for s in segs], fontsize=7)
    ax.set_xlabel("launch")
    ax.set_ylabel("segment")
    ax.legend(handles=[Patch(color=colours[1], label="on the device"),
                       Patch(color=colours[2], label="in host memory"),
                       Patch(facecolor=colours[0], edgecolor="#999", label="not allocated")],
              fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def draw(charts, out, doc=None):
    """Draw @charts into the file @out (format from its extension)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(charts), 1, figsize=(8, 4 * len(charts)), squeeze=False)
    for ax, chart in zip(axes[:, 0], charts):
        if chart.get("type") == "residency":
            _draw_residency(ax, chart)
            ax.set_title(chart.get("title", chart.get("name", "")) +
                         " (dots: named by the launch)", fontsize=10)
            continue
        for s in chart.get("series", []):
            xs, ys = _points(s)
            ax.plot(xs, ys, marker="o", markersize=3.5, linewidth=1.6, label=s.get("name"))
        _setup_axis(ax, "x", chart.get("x", {}))
        _setup_axis(ax, "y", chart.get("y", {}))
        ax.set_title(chart.get("title", chart.get("name", "")), fontsize=11)
        ax.grid(True, which="major", alpha=0.3)
        if chart.get("series"):
            ax.legend(fontsize=9, frameon=False)
    if isinstance(doc, dict) and doc.get("gpu_figures") is False:
        fig.text(0.99, 0.005, "simulated backend: not GPU figures", ha="right",
                 va="bottom", fontsize=8, color="#a00")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def _reexec_with_system_python():
    """matplotlib may be installed for the system's python3 only (Debian's
    python3-matplotlib) while another python3 comes first in PATH."""
    sysp = "/usr/bin/python3"
    if os.environ.get("VMMX_PLOT_REEXEC") or not os.path.exists(sysp):
        return
    if os.path.realpath(sys.executable) == os.path.realpath(sysp):
        return
    os.environ["VMMX_PLOT_REEXEC"] = "1"
    args = [sysp, "-c", "import sys; sys.path[:0] = %r; from vmmx_tools.plot import main; "
            "sys.exit(main(sys.argv[1:]))" % [p for p in sys.path if p], ] + sys.argv[1:]
    os.execv(sysp, args)


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="vmmx-plot",
        description="Draw the charts of a libvmmx tool's JSON (vmmx-bench --json, "
        "vmmx-place --json, ...) as PNG, SVG or PDF, by the output's extension.")
    p.add_argument("json", nargs="?", help="the tool's JSON file; - for standard input")
    p.add_argument("-o", "--output", help="the chart file: NAME.png, NAME.svg or NAME.pdf")
    p.add_argument("--chart", action="append", metavar="NAME",
                   help="draw only this chart (repeatable)")
    p.add_argument("--list", action="store_true", help="list the charts and exit")
    p.add_argument("--check", action="store_true",
                   help="exit 0 when matplotlib can be imported, else say why and exit 3")
    a = p.parse_args(argv)
    if not have_matplotlib() and (a.check or a.output):
        _reexec_with_system_python()
        print("vmmx-plot: matplotlib is not installed for %s (Debian: apt-get install "
              "python3-matplotlib; else pip install matplotlib)" % sys.executable,
              file=sys.stderr)
        return 3
    if a.check:
        return 0
    if not a.json or (not a.output and not a.list):
        p.print_usage(sys.stderr)
        print("vmmx-plot: a JSON file and -o FILE (or --list) are needed", file=sys.stderr)
        return 2
    ext = os.path.splitext(a.output or "")[1].lower()
    if a.output and ext not in (".png", ".svg", ".pdf"):
        print("vmmx-plot: %s: the output must end in .png, .svg or .pdf" % a.output,
              file=sys.stderr)
        return 2
    try:
        f = sys.stdin if a.json == "-" else open(a.json, encoding="utf-8")
        with f:
            doc = json.load(f)
        charts = load_charts(doc, a.chart)
    except (OSError, ValueError) as e:
        print("vmmx-plot: %s: %s" % (a.json, e), file=sys.stderr)
        return 1
    if a.list:
        for c in charts:
            print("%s\t%s" % (c.get("name", ""), c.get("title", "")))
        return 0
    try:
        draw(charts, a.output, doc)
    except (OSError, ValueError) as e:
        print("vmmx-plot: %s: %s" % (a.output, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
