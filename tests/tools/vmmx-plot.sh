#!/bin/sh
# SPDX-License-Identifier: MIT
# vmmx-plot (python/vmmx_tools/plot.py): a chart of a tool's JSON as PNG, SVG and
# PDF by the file's extension, compressed PNG under 100 KB, a log-2 axis of
# byte sizes, --list, and its errors (no charts, a bad extension).  Every
# drawing test skips with the reason when matplotlib is missing.
plot="$top_builddir/tools/vmmx-plot"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-plot-sh.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$top_srcdir/tests/tools/tap.sh"

cat >"$tmp/in.json" <<'JSON'
{"tool": "test", "gpu_figures": false, "charts": [
 {"name": "doubling", "title": "one grow per doubling",
  "x": {"label": "size", "unit": "B", "scale": "log2"},
  "y": {"label": "time", "unit": "us", "scale": "linear"},
  "series": [{"name": "vmmx", "x": [2097152, 4194304, 8388608, 16777216], "y": [30, 31, null, 35]},
             {"name": "raw", "x": [2097152, 4194304, 8388608, 16777216], "y": [28, 29, 30, 33]}]},
 {"name": "share", "title": "GB/s by host share",
  "x": {"label": "host share", "unit": null, "scale": "linear"},
  "y": {"label": "bandwidth", "unit": "GB/s", "scale": "linear"},
  "series": [{"name": "device-first", "x": [0, 0.5, 1], "y": [3000, 90, 50]}]}]}
JSON
echo '{"tool": "x"}' >"$tmp/none.json"

if [ -n "$plot_why" ]; then
	echo "1..0 # SKIP $plot_why"
	exit 0
fi

"$plot" "$tmp/in.json" -o "$tmp/c.png" 2>"$tmp/err"
check $? "a PNG of two charts exits 0"
png_ok "$tmp/c.png"
check $? "the PNG is compressed: under 100 KB ($(wc -c <"$tmp/c.png") bytes)"
"$plot" "$tmp/in.json" -o "$tmp/c.svg" --chart doubling 2>"$tmp/err" &&
	grep -q '<svg' "$tmp/c.svg" && grep -q '16' "$tmp/c.svg"
check $? "--chart NAME to .svg writes an SVG"
"$plot" "$tmp/in.json" -o "$tmp/c.pdf" 2>"$tmp/err" && [ "$(head -c 5 "$tmp/c.pdf")" = "%PDF-" ]
check $? ".pdf writes a PDF"
"$plot" --list "$tmp/in.json" >"$tmp/list" 2>"$tmp/err" &&
	[ "$(cut -f1 "$tmp/list" | tr '\n' ' ')" = "doubling share " ]
check $? "--list names the charts"
"$plot" - -o "$tmp/stdin.png" <"$tmp/in.json" 2>"$tmp/err" && png_ok "$tmp/stdin.png"
check $? "- reads the JSON from standard input"
$py -c 'import sys; sys.path.insert(0, sys.argv[1]); import vmmx_tools.plot as p
assert p.fmt_bytes(2097152) == "2 MiB" and p.fmt_bytes(1536 << 20) == "1.5 GiB", p.fmt_bytes(1536 << 20)
assert "torch" not in sys.modules' "$top_srcdir/python" 2>"$tmp/err"
check $? "vmmx_tools.plot imports without torch; byte ticks read 2 MiB, 1.5 GiB"

"$plot" "$tmp/none.json" -o "$tmp/n.png" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q 'no "charts"' "$tmp/err" && test ! -e "$tmp/n.png"
check $? "a JSON without charts: exit 1, said so"
"$plot" "$tmp/in.json" -o "$tmp/c.gif" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q '.png, .svg or .pdf' "$tmp/err"
check $? "an unknown extension: exit 2"
"$plot" "$tmp/in.json" -o "$tmp/no/such/dir/c.png" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] && grep -q 'no/such/dir/c.png' "$tmp/err"
check $? "a missing directory: exit 1, the file named"

echo "1..$n"
