#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs on a GPU machine from the directory holding .device (scripts/gpu-pack.sh):
# the gpu and integration suites, then the figures: cold-start phases of
# fresh processes (misses and hits), cubin against PTX, and CuPy's warm
# kernel cache for the same kernel. Everything it prints goes to $OUT/run.log;
# per-part outputs and a summary of medians to $OUT (default /tmp/jc-out).
set -u
D=$PWD/.device
OUT=${OUT:-/tmp/jc-out}
N=${JC_RUNS:-10}
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
echo "== machine"
nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm --format=csv
uname -r; nproc
src=$(cat "$D/srcdir")
mkdir -p "$(dirname "$src")" && ln -sfn "$D/wt" "$src"
nvrtc=$(ls /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13 2>/dev/null | head -1)
[ -n "$nvrtc" ] || nvrtc=$(find / -xdev -name 'libnvrtc.so.1[23]' 2>/dev/null | head -1)
echo "nvrtc: $nvrtc"
plain_ldp=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH="$D/lib:$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
B=$src/build
E=$B/examples/gpu
ldd "$B/daemon/jitcached" "$B/tests/test_gpu" "$E/coldstart" | grep 'not found' && echo "MISSING LIBRARIES"

echo "== meson test --suite gpu --suite integration"
python3 "$D/meson/meson.py" test -C "$B" --no-rebuild --suite gpu --suite integration --print-errorlogs 2>&1 | tee "$OUT/suite.txt"
cp "$B/meson-logs/testlog.txt" "$OUT/testlog.txt" 2>/dev/null
if ! grep -q '^Ok:' "$OUT/suite.txt"; then
	echo "meson test did not run here: running test_gpu directly"
	JITCACHED=$B/daemon/jitcached JITCACHECTL=$B/client/jitcachectl JITCACHE_WORKER=$B/daemon/jitcache-worker \
		JC_EXAMPLES=$src/examples JC_GPU_BIN=$E JC_GPU_CHECKS=$B/tests/gpu "$B/tests/test_gpu" 2>&1 |
		tee "$OUT/suite.txt"
fi

echo "== figures"
T=$(mktemp -d)
export JITCACHE_SOCKET=$T/sock JITCACHE_WORKER=$B/daemon/jitcache-worker
"$B/daemon/jitcached" --cache-dir "$T/cache" --socket "$T/sock" --log-level warning &
dpid=$!
for _ in $(seq 200); do [ -S "$T/sock" ] && break; sleep 0.05; done
"$B/client/jitcachectl" version
"$B/client/jitcachectl" stats --json | grep -o '"confinement": "[a-z]*"' # the workers' kind here
{
	for i in $(seq "$N"); do
		JC_T0_NS=$(date +%s%N) "$E/coldstart" "run-$i-$$" 200 # a new key: miss
		JC_T0_NS=$(date +%s%N) "$E/coldstart" "run-$i-$$" 200 # the same: hit
	done
} | tee "$OUT/coldstart.txt"
{
	CUDA_CACHE_DISABLE=1 "$E/cubin_vs_ptx" 20
	CUDA_CACHE_DISABLE=1 CUDA_MODULE_LOADING=EAGER "$E/cubin_vs_ptx" 20
	CUDA_CACHE_PATH=$T/nvcache "$E/cubin_vs_ptx" 20
} | tee "$OUT/cubin_vs_ptx.txt"
export CUPY_CACHE_DIR=$T/cupy
LD_LIBRARY_PATH=$plain_ldp python3 "$src/examples/gpu/cupy_warm.py" "$src/examples/saxpy.cu" | sed 's/^cupy /cupy-cold /'
{
	for i in $(seq "$N"); do
		LD_LIBRARY_PATH=$plain_ldp python3 "$src/examples/gpu/cupy_warm.py" "$src/examples/saxpy.cu"
		JC_T0_NS=$(date +%s%N) "$E/coldstart" "run-1-$$" 200 # interleaved jitcache hits
	done
} | tee "$OUT/side_by_side.txt"
"$B/client/jitcachectl" stats
kill "$dpid"; wait "$dpid"
LD_LIBRARY_PATH=$plain_ldp python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import re, statistics, sys
out = sys.argv[1]
def rows(path, prefix):
    for line in open(f"{out}/{path}"):
        if line.startswith(prefix):
            yield dict(re.findall(r"(\w+)=(\S+)", line))
def table(title, rs, keys):
    rs = list(rs)
    print(f"{title} (n={len(rs)}, median [min..max])")
    for k in keys:
        v = [float(r[k]) for r in rs if k in r]
        if v:
            print(f"  {k:26s} {statistics.median(v):10.3f}  [{min(v):.3f} .. {max(v):.3f}]")
cs = list(rows("coldstart.txt", "coldstart"))
keys = ["exec_ms", "cuinit_ms", "ctx_ms", "connect_ms", "resolve_ms", "fetch_ms", "load_ms", "lookup_ms",
        "module_ready_ms", "alloc_copy_ms", "first_launch_ms", "steady_us", "main_to_first_launch_ms"]
table("coldstart miss", [r for r in cs if r["cache"] == "miss"], keys)
table("coldstart hit", [r for r in cs if r["cache"] == "hit"], keys)
sb = list(rows("side_by_side.txt", "coldstart"))
table("side by side: jitcache hit", sb, ["module_ready_ms", "first_launch_ms", "main_to_first_launch_ms"])
table("side by side: CuPy warm cache", rows("side_by_side.txt", "cupy"),
      ["import_ms", "ctx_ms", "module_ready_ms", "first_launch_ms", "start_to_first_launch_ms"])
bad = [l for f in ("coldstart.txt", "side_by_side.txt") for l in open(f"{out}/{f}") if "WRONG" in l]
print("wrong results:", len(bad))
PY
