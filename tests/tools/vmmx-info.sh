#!/bin/sh
# SPDX-License-Identifier: MIT
# vmmx-info on the sim backend: the table, --json (valid JSON with the keys
# scripts use, strings escaped), usage errors (exit 2) and configuration
# errors (exit 1, the variable named on stderr).
info="$top_builddir/tools/vmmx-info"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-info-sh.XXXXXX") || exit 1
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

. "$top_srcdir/tests/tools/tap.sh"

echo "1..26"

"$info" >"$tmp/table" 2>"$tmp/err"
check $? "vmmx-info exits 0 on the sim"
grep -q '^backend  *sim' "$tmp/table"
check $? "the table names the sim backend"
grep -q '^  granularity  *device 2 MiB, host 2 MiB' "$tmp/table"
check $? "the table gives the granularity per location"
grep -q '^  state  *absent' "$tmp/table" && grep -q '^  why  *HMM is absent: ' "$tmp/table"
check $? "the table says HMM is absent on the sim, and why"
grep -q '^host access  *registration: cuMemHostRegister' "$tmp/table"
check $? "the table names the host-access path"
grep -q '^  device-first  ' "$tmp/table" && grep -q '^  device limit  *none' "$tmp/table"
check $? "the table lists the policies and the limits"
test ! -s "$tmp/err"
check $? "nothing on stderr"

VMMX_DEVICE_LIMIT=512MiB "$info" --json >"$tmp/json" 2>"$tmp/err"
check $? "vmmx-info --json exits 0"
pycheck "--json output is valid JSON" "$tmp/json" 'True'
pycheck "--json: backend, version" "$tmp/json" 'd["backend"] == "sim" and d["version"].count(".") == 2 and d["cuda_unavailable"] is None'
pycheck "--json: devices[0] granularity, memory, attributes" "$tmp/json" \
	'd["devices"][0]["granularity"] == {"device": 2097152, "host": 2097152} and d["devices"][0]["memory"]["total"] > 0 and d["devices"][0]["attributes"]["vmm"] is True and d["devices"][0]["attributes"]["pageable_access"] is False'
pycheck "--json: hmm.state and hmm.why" "$tmp/json" \
	'd["hmm"]["state"] == "absent" and d["hmm"]["why"].startswith("HMM is absent: ") and d["host_access"]["path"] == "registration"'
pycheck "--json: policies[] has device-first, built in and from the build tree" "$tmp/json" \
	'any(p["name"] == "device-first" and p["file"] == "built-in" for p in d["policies"]) and any(p["name"] == "interleave" and p["usable"] for p in d["policies"])'
pycheck "--json: config.device_limit is the effective limit" "$tmp/json" \
	'd["config"]["device_limit"] == 512 << 20 and d["config"]["host_limit"] is None and d["config"]["chunk_size"] == 2097152 and d["config"]["policy"] == "device-first"'

# Two devices, and a refused plugin in a directory whose name needs escaping.
odd="$tmp/q\"b\\s$(printf '\377')x"
mkdir "$odd" && chmod 700 "$odd" &&
	cp "$top_builddir/policies/.libs/vmmx_policy_interleave.so" "$odd/" &&
	chmod 664 "$odd/vmmx_policy_interleave.so"
VMMX_SIM_DEVICES=2 VMMX_POLICY_PATH="$odd" "$info" --json >"$tmp/json2" 2>"$tmp/err"
check $? "vmmx-info --json with two devices and an odd VMMX_POLICY_PATH exits 0"
pycheck "--json: escaped strings still parse, file names kept" "$tmp/json2" \
	'd["policies"][0]["file"].endswith("/q\"b\\s\xffx/vmmx_policy_interleave.so")'
pycheck "--json: a refused file is not usable and says why" "$tmp/json2" \
	'd["policies"][0]["usable"] is False and d["policies"][0]["status"] == "refused" and "writable by group or others" in d["policies"][0]["why"]'
pycheck "--json: two devices, each the other's peer" "$tmp/json2" \
	'[x["peers"] for x in d["devices"]] == [[1], [0]] and d["device_count"] == 2'

"$info" --help >"$tmp/out" 2>&1
st=$?
test $st -eq 0 && grep -q '^usage: vmmx-info' "$tmp/out"
check $? "--help prints the usage and exits 0"

"$info" --bogus >"$tmp/out" 2>"$tmp/err"
st=$?
test $st -eq 2 && test ! -s "$tmp/out" && grep -q -- '^vmmx-info: unknown option --bogus$' "$tmp/err"
check $? "--bogus exits 2 with the option named on stderr (exit $st)"

"$info" --device >"$tmp/out" 2>"$tmp/err"
st=$?
test $st -eq 2 && grep -q -- '^vmmx-info: --device needs an argument$' "$tmp/err" &&
	grep -q '^usage: vmmx-info' "$tmp/err"
check $? "--device without a number exits 2, the option and the usage on stderr (exit $st)"

"$info" --device 1x >"$tmp/out" 2>"$tmp/err"
st=$?
test $st -eq 2 && test ! -s "$tmp/out" &&
	grep -q -- '^vmmx-info: --device 1x: expected a device ordinal (0, 1, ...)$' "$tmp/err"
check $? "--device 1x exits 2 naming the value (exit $st)"

"$info" --json extra >"$tmp/out" 2>"$tmp/err"
st=$?
test $st -eq 2 && test ! -s "$tmp/out" && grep -q -- '^vmmx-info: unexpected argument "extra"$' "$tmp/err"
check $? "a stray argument exits 2 naming it (exit $st)"

VMMX_DEVICE_LIMIT=bad "$info" >"$tmp/out" 2>"$tmp/err"
st=$?
test $st -eq 1 && grep -q 'VMMX_DEVICE_LIMIT' "$tmp/err" && test ! -s "$tmp/out"
check $? "VMMX_DEVICE_LIMIT=bad exits 1 naming the variable on stderr (exit $st)"

"$info" --device 5 >"$tmp/out" 2>"$tmp/err"
st=$?
test $st -eq 1 && grep -q 'device 5' "$tmp/err"
check $? "--device 5 of one sim device exits 1 naming the device (exit $st)"

VMMX_SIM_PAGEABLE=1 "$info" --json >"$tmp/json3" 2>"$tmp/err"
st=$?
if [ $st -eq 0 ]; then
	pycheck "--json: a pageable device takes malloc'd pointers as they are" "$tmp/json3" \
		'd["hmm"]["state"] == "ats" and d["host_access"]["path"] == "ats"'
else
	skip "VMMX_SIM_PAGEABLE not known to this libvmmx"
fi
