#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs on a GPU machine from the directory holding .device (scripts/gpu-pack.sh):
# the gpu, integration, isolation, ops and shim suites, the Python package's
# tests (its CuPy and cuda.core hooks on the GPU) under the machine's python3,
# then the figures:
# cold-start phases of fresh processes (misses and hits), cubin against PTX,
# CuPy's warm kernel cache for the same kernel, and CuPy / PyTorch /
# cuda.core compile times with and without jitcache-run (the NVRTC shim).
# Everything it prints goes to $OUT/run.log;
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

# Python frameworks under the NVRTC shim run with the machine's own library
# path (test_shim.sh gpu): the packed libraries are the daemon's.
export JC_SHIM_PY_LDP=$plain_ldp
suites="--suite gpu --suite integration --suite isolation --suite ops --suite shim"
echo "== meson test $suites"
# shellcheck disable=SC2086
python3 "$D/meson/meson.py" test -C "$B" --no-rebuild $suites --print-errorlogs 2>&1 | tee "$OUT/suite.txt"
cp "$B/meson-logs/testlog.txt" "$OUT/testlog.txt" 2>/dev/null
if ! grep -q '^Ok:' "$OUT/suite.txt"; then
	echo "meson test did not run here: running test_gpu directly"
	JITCACHED=$B/daemon/jitcached JITCACHECTL=$B/client/jitcachectl JITCACHE_WORKER=$B/daemon/jitcache-worker \
		JC_EXAMPLES=$src/examples JC_GPU_BIN=$E JC_GPU_CHECKS=$B/tests/gpu "$B/tests/test_gpu" 2>&1 |
		tee "$OUT/suite.txt"
fi

echo "== python package: CuPy and cuda.core hooks (python/tests under $(command -v python3))"
LD_LIBRARY_PATH="$D/lib${plain_ldp:+:$plain_ldp}:$(dirname "$nvrtc")" JC_PYTHON=$(command -v python3) JC_BUILD_ROOT=$B \
	JITCACHED=$B/daemon/jitcached JITCACHE_WORKER=$B/daemon/jitcache-worker \
	JITCACHE_CLIENT_LIB=$B/client/libjitcache-client.so.0 JITCACHE_AUTOSTART=0 JITCACHE_SYSTEM_SOCKET= \
	sh "$src/python/tests/run.sh" python3 -v -s 2>&1 | tee "$OUT/python.txt"

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
# Cold start by module loading mode (jitcache miss, then hit), and with the
# PTX path forced (JITCACHE_FORCE_PTX=1): the driver JIT-compiles on every
# load with its own cache off, or once with it on.
{
	for i in $(seq "$N"); do
		for ml in LAZY EAGER; do
			CUDA_MODULE_LOADING=$ml JC_T0_NS=$(date +%s%N) "$E/coldstart" "ml-$ml-$i-$$" 200
			CUDA_MODULE_LOADING=$ml JC_T0_NS=$(date +%s%N) "$E/coldstart" "ml-$ml-$i-$$" 200
		done
		JITCACHE_FORCE_PTX=1 CUDA_CACHE_DISABLE=1 JC_T0_NS=$(date +%s%N) "$E/coldstart" "ptx-$i-$$" 200
		JITCACHE_FORCE_PTX=1 CUDA_CACHE_DISABLE=1 JC_T0_NS=$(date +%s%N) "$E/coldstart" "ptx-$i-$$" 200
		JITCACHE_FORCE_PTX=1 CUDA_CACHE_PATH=$T/nvcache-ptx JC_T0_NS=$(date +%s%N) "$E/coldstart" "ptx-$i-$$" 200
	done
} | tee "$OUT/coldstart_modes.txt"
# The heavy example: cubin, fatbin (built from its parts: the log line says
# how long against the sum of the parts' compiles) and forced PTX, each
# checked against the CPU.
{
	"$E/cub_sort" auto 64
	"$E/cub_sort" auto 64
	"$E/cub_sort" sm_80,sm_90,compute_90 64
	for i in $(seq "$N"); do
		"$E/cub_sort" sm_80,sm_90,compute_90 64
		JITCACHE_FORCE_PTX=1 CUDA_CACHE_DISABLE=1 "$E/cub_sort" sm_80,sm_90,compute_90 64
		JITCACHE_FORCE_CUBIN=1 "$E/cub_sort" sm_80,sm_90,compute_90 64
	done
	"$B/client/jitcachectl" compile "$src/examples/cub_sort.cu" --arch sm_90,sm_100,compute_90 \
		--name-expr 'sort_and_sum<128, 8>' -o "$T/cub.fatbin" -- -std=c++17 -I/usr/local/cuda/include/cccl
	"$B/client/jitcachectl" inspect "$T/cub.fatbin"
} 2>&1 | tee "$OUT/cub_sort.txt"
export CUPY_CACHE_DIR=$T/cupy
LD_LIBRARY_PATH=$plain_ldp python3 "$src/examples/gpu/cupy_warm.py" "$src/examples/saxpy.cu" | sed 's/^cupy /cupy-cold /'
# The same through jitcache.cupy (first run: the daemon's misses).
hook="JC_CUPY_HOOK=1 PYTHONPATH=$src/python JITCACHE_CLIENT_LIB=$B/client/libjitcache-client.so.0"
env $hook LD_LIBRARY_PATH="$D/lib${plain_ldp:+:$plain_ldp}" python3 "$src/examples/gpu/cupy_warm.py" \
	"$src/examples/saxpy.cu" | sed 's/^cupy-jitcache /cupy-jitcache-cold /'
{
	for i in $(seq "$N"); do
		LD_LIBRARY_PATH=$plain_ldp python3 "$src/examples/gpu/cupy_warm.py" "$src/examples/saxpy.cu"
		env $hook LD_LIBRARY_PATH="$D/lib${plain_ldp:+:$plain_ldp}" python3 \
			"$src/examples/gpu/cupy_warm.py" "$src/examples/saxpy.cu" # CuPy through jitcache.cupy
		JC_T0_NS=$(date +%s%N) "$E/coldstart" "run-1-$$" 200 # interleaved jitcache hits
	done
} | tee "$OUT/side_by_side.txt"
"$B/client/jitcachectl" stats
kill "$dpid"; wait "$dpid"
echo "== NVRTC shim: CuPy, PyTorch, cuda.core with and without jitcache-run (compile_ms of run 1 and 2)"
JITCACHED=$B/daemon/jitcached JITCACHECTL=$B/client/jitcachectl JITCACHE_RUN_BIN=$B/shim/jitcache-run \
	SHIM_LIB=$B/shim/libjitcache-nvrtc.so \
	JC_SHIM_TESTS=$src/tests/shim JC_SHIM_GPU_RUNS=${JC_SHIM_GPU_RUNS:-2} \
	bash "$src/tests/shim/test_shim.sh" gpu 2>&1 | tee "$OUT/shim_frameworks.txt"
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
keys = ["exec_ms", "cuinit_ms", "ctx_ms", "connect_ms", "resolve_ms", "fetch_ms", "server_ms", "load_ms", "lookup_ms",
        "module_ready_ms", "alloc_copy_ms", "first_launch_ms", "steady_us", "main_to_first_launch_ms"]
table("coldstart miss", [r for r in cs if r["cache"] == "miss"], keys)
table("coldstart hit", [r for r in cs if r["cache"] == "hit"], keys)
cm = list(rows("coldstart_modes.txt", "coldstart"))
for ml in ("LAZY", "EAGER"):
    for cache in ("miss", "hit"):
        table(f"coldstart CUDA_MODULE_LOADING={ml} {cache}",
              [r for r in cm if r["modload"] == ml and r["cache"] == cache and r["forced"] == "none"],
              ["load_ms", "module_ready_ms", "first_launch_ms", "main_to_first_launch_ms"])
for cache, drv in (("miss", "off"), ("hit", "off"), ("hit", "on")):
    table(f"coldstart forced PTX, jitcache {cache}, driver JIT cache {drv}",
          [r for r in cm if r["forced"] == "ptx" and r["cache"] == cache and r["drvcache"] == drv],
          ["fetch_ms", "load_ms", "module_ready_ms", "main_to_first_launch_ms"])
cub = list(rows("cub_sort.txt", "cub_sort "))
for t, loaded in (("auto", "cubin"), ("sm_80,sm_90,compute_90", "fatbin"), ("sm_80,sm_90,compute_90", "ptx"),
                  ("sm_80,sm_90,compute_90", "cubin")):
    table(f"cub_sort targets={t} loaded={loaded}", [r for r in cub if r["targets"] == t and r["loaded"] == loaded],
          ["fetch_ms", "load_ms", "kernel_ms"])
for line in open(f"{out}/cub_sort.txt"):
    if line.startswith("cub_sort_fatbin_log"):
        print(line.strip())
sb = list(rows("side_by_side.txt", "coldstart"))
table("side by side: jitcache hit", sb, ["module_ready_ms", "first_launch_ms", "main_to_first_launch_ms"])
table("side by side: CuPy warm cache", rows("side_by_side.txt", "cupy "),
      ["import_ms", "ctx_ms", "module_ready_ms", "first_launch_ms", "start_to_first_launch_ms"])
table("side by side: CuPy through jitcache.cupy (daemon hits)", rows("side_by_side.txt", "cupy-jitcache "),
      ["import_ms", "ctx_ms", "module_ready_ms", "first_launch_ms", "start_to_first_launch_ms"])
bad = [l for f in ("coldstart.txt", "side_by_side.txt", "coldstart_modes.txt", "cub_sort.txt")
       for l in open(f"{out}/{f}") if "WRONG" in l]
print("wrong results:", len(bad))
PY
