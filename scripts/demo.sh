#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job: build, start jitcached on the default cache (unless one is
# running), compile the SAXPY and CUB examples through it twice each, show
# the miss (with its compile time), the hit (with its time) and the stats.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

ctl=build/client/jitcachectl
daemon=build/daemon/jitcached
started=
if pid=$($ctl ping 2>/dev/null); then
	echo "== using the jitcached already answering on the default socket: $pid"
else
	log=$(mktemp /tmp/jitcached-demo.XXXXXX.log)
	$daemon --log-level notice 2>"$log" &
	started=$!
	trap 'kill $started 2>/dev/null; wait $started 2>/dev/null || true' EXIT
	for _ in $(seq 100); do $ctl ping >/dev/null 2>&1 && break; sleep 0.1; done
	echo "== started jitcached (pid $started, log $log)"
fi
$ctl version | grep -E '^(nvrtc_version|nvjitlink_version|driver_version|daemon_pid) '

# A fresh application ABI string per run puts new keys in the cache, so each
# run shows a real miss first (the ABI version is part of the key).
abi="jitcache-demo/$(date +%s%N)"
out=$(mktemp -d)
run() {
	local name=$1; shift
	for attempt in 1 2; do
		printf '== %-6s request %d: ' "$name" "$attempt"
		$ctl compile --app-abi "$abi" -o "$out/$name.cubin" "$@" 2>"$out/err" >"$out/names"
		cut -f1,3,4 "$out/err" | tr '\t' ' '
	done
	sed 's/^/   lowered: /' "$out/names"
	printf '   artifact: %s (%s bytes)\n' "$(file -b "$out/$name.cubin" | cut -d, -f1-2)" "$(stat -c %s "$out/$name.cubin")"
}
run saxpy examples/saxpy.cu --arch sm_90 --name-expr '&saxpy<float>' --name-expr '&saxpy<double>'
run cub examples/cub_sort.cu --arch sm_90 --name-expr 'sort_and_sum<128, 8>' \
	-- -std=c++17 -I"${CUDA_PATH:-/usr/local/cuda}/include/cccl"
echo "== jitcachectl stats"
$ctl stats
rm -rf "$out"
