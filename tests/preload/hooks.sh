#!/bin/sh
# SPDX-License-Identifier: MIT
# Every interposed call through vmmx-run on the sim backend (client.c prints
# the TAP): 2 devices of 1 GiB, a 256 MiB device limit, no headroom, chunks
# of at most 64 MiB (so that a large allocation spans several host chunks).
# Placement by allocation: the client checks that chunks stay where they were
# put, and reads spilled memory from the CPU (launches.sh covers the default,
# launch placement).
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-hooks.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$top_srcdir/tests/preload/env.sh"
VMMX_SIM_DEVICES=2 VMMX_SIM_DEVICE_MEM=1GiB VMMX_HOST_LIMIT=1GiB VMMX_CHUNK_MAX=64MiB \
	exec "$run" --placement alloc --device-limit 256MiB --headroom 0 -- "$client"
