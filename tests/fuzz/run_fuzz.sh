#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs the libFuzzer target on a fresh seed corpus for SECONDS seconds.
# usage: run_fuzz.sh FUZZER DRIVER SECONDS ARTIFACT_DIR
# A crash, leak, undefined behaviour or failed round trip fails the test; the
# input that caused it is kept in ARTIFACT_DIR (replay: DRIVER FILE).
set -eu
fuzzer=$1 driver=$2 secs=$3 artifacts=$4
work=$(mktemp -d /tmp/jc-fuzz-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$artifacts"
"$driver" --seeds "$work/corpus"
# -rss_limit_mb: the decoders must not balloon on a small input.
"$fuzzer" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=1024 \
	-print_final_stats=1 -artifact_prefix="$artifacts/" "$work/corpus" >"$work/log" 2>&1 || {
	status=$?
	tail -n 60 "$work/log"
	echo "$(basename "$fuzzer") failed (status $status); artifacts in $artifacts" >&2
	exit 1
}
grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb|#[0-9]+ *DONE)' "$work/log" || true
echo "corpus: $(ls "$work/corpus" | wc -l) inputs after ${secs}s"
