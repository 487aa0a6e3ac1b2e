# SPDX-License-Identifier: MIT
# wait_for.sh - sourced by ctl.sh and ctl_gpu.sh: wait_for FILE PATTERN
# [SECONDS] waits until a line of FILE matches PATTERN (grep), 10 seconds
# at most by default; returns 1 when the time is up.
wait_for() {
	i=0
	while ! grep -q "$2" "$1" 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt $((${3:-10} * 10)) ] && return 1
		sleep 0.1
	done
}
