#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/skip-reasons.py names each skipped test of a meson test log with
# the reason it printed (stdout or stderr), and nothing for tests that ran.
# usage: test_skip_reasons.sh SOURCE_ROOT
set -euo pipefail
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cat > "$T/testlog.json" <<'LOG'
{"name": "jitcache:gpu / gpu", "result": "SKIP", "returncode": 77, "stdout": "[==========] Running\nskipped: no CUDA driver: libcuda.so.1: cannot open shared object file\n"}
{"name": "jitcache:ops / cli", "result": "OK", "returncode": 0, "stdout": "skip nothing here\n"}
{"name": "jitcache:shim / shim_gpu", "result": "SKIP", "returncode": 77, "stdout": "", "stderr": "SKIP: no GPU (nvidia-smi -L fails)\n"}
{"name": "jitcache:x / quiet", "result": "SKIP", "returncode": 77, "stdout": "only this line\n"}
LOG
out=$(python3 "$1/scripts/skip-reasons.py" "$T/testlog.json")
printf '%s\n' "$out"
want='SKIP jitcache:gpu / gpu: skipped: no CUDA driver: libcuda.so.1: cannot open shared object file
SKIP jitcache:shim / shim_gpu: SKIP: no GPU (nvidia-smi -L fails)
SKIP jitcache:x / quiet: only this line'
[ "$out" = "$want" ] || { echo "FAIL: expected:"; printf '%s\n' "$want"; exit 1; }
[ -z "$(python3 "$1/scripts/skip-reasons.py" "$T/none.json")" ] || { echo "FAIL: output for a missing log"; exit 1; }
echo "PASS"
