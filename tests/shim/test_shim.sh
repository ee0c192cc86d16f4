#!/bin/bash
# SPDX-License-Identifier: MIT
#
# libjitcache-nvrtc and jitcache-run against a real jitcached and the real
# NVRTC, with unmodified NVRTC programs (C linked with -lnvrtc, Python
# ctypes). One case per run: test_shim.sh CASE (Meson registers each).
#
#   symbols      the shim exports every nvrtc* symbol of the real library, with
#                its symbol versions and SONAME, and every function of nvrtc.h
#   conformance  the conformance table gives the same lines under the shim
#                (a miss run, then a hit run) as with the real NVRTC
#   twice        a C program run twice: the 2nd run is served from the cache
#                (daemon stats), outputs and lowered names equal the 1st's and
#                the real NVRTC's
#   tmpname      programs named after a fresh temporary file in every process
#                (as CuPy names them), with a warning: the 2nd process is
#                served, its log names its own program; with -lineinfo (the
#                name enters the artifact) it is not the 1st one's entry
#   tmpname_include
#                programs named after a fresh temporary file in every process
#                (as CuPy names them) that include a header of a -I directory
#                (CuPy's cupy/carray.cuh): without __FILE__, the 2nd process is
#                a hit (the daemon found no name in the result), also through
#                a client-read tree (a team daemon's path); with a header
#                macro that puts __FILE__ in the cubin, every process gets its
#                own name's bytes (a miss for a new name, a hit for the same
#                name again), and so with __builtin_FILE() in the source
#                folded into a number; with an anonymous namespace and with CUB
#                (examples/cub_sort.cu), whose internal names hold the base
#                name, the same base name in a new directory is a hit, a new
#                base name a miss.
#                Outputs always equal the real NVRTC's for each process's name
#   ctypes       the same through Python ctypes.CDLL("libnvrtc.so.N")
#   include      a header found through a relative -I (the process's working
#                directory): served twice, then changed on disk: a new result;
#                one of that name in the working directory: passed through
#   error        a compile error: result code and log identical to NVRTC's
#   passthrough  an option that writes a file (--time) runs in process, the
#                daemon sees nothing, NVRTC writes the file
#   nodaemon     no daemon answers: compiled in process, the same results
#   threads      16 threads compiling different programs at once, twice; and
#                16 threads querying one program at once
#   soname       what dlopen() resolves to with the shim preloaded (by soname:
#                the shim; a copy of the real library by path: that copy)
#   realpath     $JITCACHE_REAL_NVRTC names a copy of the real library in a
#                directory of its own: that copy compiles, with the builtins
#                beside it (the real library has no RUNPATH)
#   autostart    no daemon running: jitcache-run starts one (client library)
#   summary      the one summary line of a run (misses, then hits), none with
#                -q or when nothing compiled; --check naming a static NVRTC;
#                ls naming the program and process, not the stand-in name
#   bypath       a program that opens a copy of the real library by absolute
#                path: not reached by jitcache-run, served with --by-path; a
#                second distinct path in one process is not redirected
#   bypath_build another NVRTC build (a wheel's) opened by absolute path under
#                --by-path, $JITCACHE_REAL_NVRTC unset: compiled with that
#                library (the daemon refuses its build-id), not the toolkit's
#   gpu          (suite gpu; exits 77 without a GPU) fresh processes of CuPy,
#                PyTorch and cuda.core (frameworks.py) compile, launch and
#                check a kernel, twice without and twice under jitcache-run
#                ($JC_SHIM_GPU_RUNS rounds, default 1, each a new program):
#                the 2nd shim run is all daemon hits but the results of the
#                1st that the name check bound to their program names (the
#                daemon's debug log says why; printed); prints compile times.
#                $JC_SHIM_PY_LDP, when set, is the Python processes'
#                LD_LIBRARY_PATH (the GPU machine's own, without the packed
#                libraries the daemon needs)
#
# Environment (set by Meson): JITCACHED, JITCACHECTL, JITCACHE_RUN_BIN,
# SHIM_LIB, REAL_NVRTC, NVRTC_HEADER, SHIM_SONAME, SHIM_CONFORMANCE,
# SHIM_APP, SHIM_DLOPEN_PROBE, JC_SHIM_TESTS (this directory).
set -u
CASE=${1:?usage: test_shim.sh CASE}
ARCH=sm_90
ROOT=$(mktemp -d "${TMPDIR:-/tmp}/jc-shim.XXXXXX")
DAEMON_PID=
SOCK=$ROOT/sock
CTL=("$JITCACHECTL" --socket "$SOCK")

cleanup() {
	if [ -n "$DAEMON_PID" ]; then
		kill "$DAEMON_PID" 2>/dev/null
		wait "$DAEMON_PID" 2>/dev/null
	fi
	[ -n "${JC_TEST_KEEP:-}" ] || rm -rf "$ROOT"
}
trap cleanup EXIT

fail() {
	echo "FAIL ($CASE): $*"
	[ -f "$ROOT/daemon.log" ] && { echo "--- daemon log"; tail -20 "$ROOT/daemon.log"; }
	exit 1
}

start_daemon() { # start_daemon [JITCACHED_OPTION...]
	"$JITCACHED" --cache-dir "$ROOT/cache" --socket "$SOCK" "$@" >"$ROOT/daemon.log" 2>&1 &
	DAEMON_PID=$!
	for _ in $(seq 200); do
		"${CTL[@]}" ping >/dev/null 2>&1 && return 0
		kill -0 "$DAEMON_PID" 2>/dev/null || fail "jitcached exited at start"
		sleep 0.1
	done
	fail "jitcached did not answer within 20 s"
}

# stat KEY: an integer of stats --json.
stat() {
	"${CTL[@]}" stats --json | sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p"
}

# The counts of jitcache-run --check's summary line in file $1: "REACHED HIT MISS".
check_counts() {
	sed -n 's/.* \([0-9]*\) reached jitcached (\([0-9]*\) hit, \([0-9]*\) miss.*/\1 \2 \3/p' "$1"
}

need() { # need TOOL...: skip without them (the GPU machine has no build tools)
	for t in "$@"; do
		command -v "$t" >/dev/null || { echo "SKIP: $t is not installed"; exit 77; }
	done
}

same() { # same FILE_A FILE_B WHAT
	cmp -s "$1" "$2" || { diff "$1" "$2" | head -30; fail "$3 differ"; }
}

# The client library's daemon search must find this test's daemon or none:
# no per-user or system daemon of the machine, no auto-start (the tests start
# their daemons themselves).
export JITCACHE_SOCKET=$SOCK XDG_RUNTIME_DIR=$ROOT/run JITCACHE_SYSTEM_SOCKET= JITCACHE_AUTOSTART=0
export JITCACHE_DIR=$ROOT/default-cache
mkdir -p "$XDG_RUNTIME_DIR"
# In an ASan build (scripts/sanitize.sh) the shim needs the ASan runtime
# loaded first in every process it is preloaded into, Python included, whose
# own leaks at exit are not ours; NVRTC's own leaks are suppressed (lsan.supp).
asan=$(ldd "${SHIM_LIB:-}" 2>/dev/null | awk '/libasan/ { print $3 }')
export LSAN_OPTIONS="suppressions=$JC_SHIM_TESTS/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
if [ -n "$asan" ]; then
	RUN=(env "LD_PRELOAD=$asan${LD_PRELOAD:+:$LD_PRELOAD}" "$JITCACHE_RUN_BIN")
	PY_ASAN=(env "ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0")
	PRELOAD_FIRST=$asan:
else
	RUN=("$JITCACHE_RUN_BIN")
	PY_ASAN=()
	PRELOAD_FIRST=
fi

# run_twice NAME CMD...: the real NVRTC once, then twice under jitcache-run;
# all three outputs must be equal and the 2nd shim run all hits. Prints the
# number of daemon requests of the 2nd run.
run_twice() {
	local name=$1
	shift
	"$@" >"$ROOT/$name.real" 2>"$ROOT/$name.real.err" || fail "$name without the shim failed"
	"${RUN[@]}" --check "$@" >"$ROOT/$name.1" 2>"$ROOT/$name.check1" ||
		{ cat "$ROOT/$name.check1"; fail "$name under jitcache-run (1st) failed"; }
	local h1 m1
	h1=$(stat hits) m1=$(stat misses)
	"${RUN[@]}" --check "$@" >"$ROOT/$name.2" 2>"$ROOT/$name.check2" ||
		{ cat "$ROOT/$name.check2"; fail "$name under jitcache-run (2nd) failed"; }
	local h2 m2
	h2=$(stat hits) m2=$(stat misses)
	same "$ROOT/$name.real" "$ROOT/$name.1" "$name: real NVRTC's and the 1st shim run's outputs"
	same "$ROOT/$name.real" "$ROOT/$name.2" "$name: real NVRTC's and the 2nd shim run's outputs"
	read -r reached1 _ _ < <(check_counts "$ROOT/$name.check1")
	read -r reached2 hit2 miss2 < <(check_counts "$ROOT/$name.check2")
	[ "${reached1:-0}" -gt 0 ] || { cat "$ROOT/$name.check1"; fail "$name: no compile reached the daemon"; }
	[ "$reached2" = "$reached1" ] && [ "$hit2" = "$reached2" ] && [ "$miss2" = 0 ] ||
		{ cat "$ROOT/$name.check2"; fail "$name: 2nd run not all hits"; }
	[ "$m2" = "$m1" ] || fail "$name: 2nd run made the daemon compile ($m1 -> $m2 misses)"
	[ $((h2 - h1)) -ge "$hit2" ] || fail "$name: daemon counted $((h2 - h1)) hits, shim $hit2 compiles"
	echo "$name: run 1 $(cat "$ROOT/$name.check1")"
	echo "$name: run 2 $(cat "$ROOT/$name.check2"); daemon hits +$((h2 - h1)), misses +$((m2 - m1))"
}

case "$CASE" in
symbols)
	need nm readelf "${CC:-cc}"
	syms() { nm -D --defined-only "$1" | awk '$3 ~ /^nvrtc/ { print $3 }' | sort; }
	syms "$REAL_NVRTC" >"$ROOT/real.syms"
	syms "$SHIM_LIB" >"$ROOT/shim.syms"
	[ -s "$ROOT/real.syms" ] || fail "no nvrtc* symbols in $REAL_NVRTC"
	same "$ROOT/real.syms" "$ROOT/shim.syms" "exported nvrtc* symbols (name@version) of the real library and the shim"
	# Every function nvrtc.h declares to C (its C++-only templates aside).
	"${CC:-cc}" -E -P -x c "$NVRTC_HEADER" | grep -oE '\bnvrtc[A-Za-z]+ *\(' |
		sed 's/ *(//' | sort -u >"$ROOT/header.funcs"
	[ "$(wc -l <"$ROOT/header.funcs")" -ge 20 ] || fail "too few functions read from $NVRTC_HEADER"
	while read -r f; do
		grep -q "^$f@" "$ROOT/shim.syms" || fail "$f (nvrtc.h) is not exported by the shim"
	done <"$ROOT/header.funcs"
	soname() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
	[ "$(soname "$SHIM_LIB")" = "$(soname "$REAL_NVRTC")" ] && [ "$(soname "$SHIM_LIB")" = "$SHIM_SONAME" ] ||
		fail "SONAME $(soname "$SHIM_LIB") vs the real $(soname "$REAL_NVRTC")"
	readelf -d "$SHIM_LIB" | grep -q 'NEEDED.*libnvrtc' && fail "the shim must not link libnvrtc"
	echo "symbols: $(wc -l <"$ROOT/shim.syms") nvrtc* symbols match, $(wc -l <"$ROOT/header.funcs") nvrtc.h functions exported"
	;;
conformance)
	start_daemon
	# LTO-IR records the working directory of the compile: the real run
	# compiles in the daemon's worker directory so the bytes can be compared.
	(cd "$ROOT/cache/worker-cwd" && "$SHIM_CONFORMANCE" $ARCH) >"$ROOT/real.txt" ||
		fail "conformance table against the real NVRTC failed"
	for run in 1 2; do
		"${RUN[@]}" --check "$SHIM_CONFORMANCE" $ARCH >"$ROOT/shim$run.txt" 2>"$ROOT/check$run" ||
			{ cat "$ROOT/check$run"; fail "conformance run $run under jitcache-run failed"; }
		same "$ROOT/real.txt" "$ROOT/shim$run.txt" "conformance table (run $run) of the real NVRTC and the shim"
	done
	read -r reached1 _ _ < <(check_counts "$ROOT/check1")
	read -r reached2 hit2 miss2 < <(check_counts "$ROOT/check2")
	[ "${reached1:-0}" -ge 6 ] && [ "$reached2" = "$reached1" ] && [ "$hit2" = "$reached1" ] && [ "$miss2" = 0 ] ||
		{ cat "$ROOT/check1" "$ROOT/check2"; fail "conformance: expected the 2nd run's served compiles all hits"; }
	echo "conformance: $(wc -l <"$ROOT/real.txt") lines identical; run 2: $(cat "$ROOT/check2")"
	;;
twice)
	start_daemon
	run_twice app "$SHIM_APP" --threads 3 $ARCH -std=c++17
	# A virtual architecture (PTX only) too.
	run_twice app-ptx "$SHIM_APP" compute_${ARCH#sm_}
	;;
include)
	start_daemon
	mkdir -p "$ROOT/work/inc" && cd "$ROOT/work" || fail "mkdir"
	echo '#define EXTRA 5' >inc/extra.h
	# The daemon does not store a result that read a header changed in the
	# last 100 ms (2 s where timestamps are whole seconds): older than that.
	sleep 2.1
	run_twice include "$SHIM_APP" --include extra.h $ARCH -I inc
	# A header of that name in the program's directory (the working
	# directory: the name has none) comes first for NVRTC: passed through.
	echo '#define EXTRA 7' >extra.h
	"$SHIM_APP" --include extra.h $ARCH -I inc >"$ROOT/include.real7" || fail "real run failed"
	"${RUN[@]}" --check "$SHIM_APP" --include extra.h $ARCH -I inc >"$ROOT/include.7" 2>"$ROOT/include.check7"
	same "$ROOT/include.real7" "$ROOT/include.7" "outputs with extra.h in the working directory"
	grep -q "1 passed through" "$ROOT/include.check7" || { cat "$ROOT/include.check7"; fail "not passed through"; }
	cmp -s "$ROOT/include.real" "$ROOT/include.7" && fail "the working directory's extra.h was not used"
	rm extra.h
	echo '#define EXTRA 6' >inc/extra.h
	"$SHIM_APP" --include extra.h $ARCH -I inc >"$ROOT/include.real6" || fail "real run failed"
	"${RUN[@]}" --check "$SHIM_APP" --include extra.h $ARCH -I inc >"$ROOT/include.6" 2>"$ROOT/include.check6"
	same "$ROOT/include.real6" "$ROOT/include.6" "outputs after the header changed"
	cmp -s "$ROOT/include.real" "$ROOT/include.6" && fail "the changed header gave the old PTX/cubin"
	grep -q "1 miss" "$ROOT/include.check6" || { cat "$ROOT/include.check6"; fail "changed header: not a miss"; }
	echo "include: header changed -> $(cat "$ROOT/include.check6")"
	;;
tmpname)
	start_daemon
	for run in 1 2; do
		mkdir "$ROOT/tmp$run"
		name=$ROOT/tmp$run/$(printf '%032d' 7)_2.cubin.cu
		"$SHIM_APP" --warn --name "$name" $ARCH >"$ROOT/real$run.txt" || fail "real run failed"
		"${RUN[@]}" --check "$SHIM_APP" --warn --name "$name" $ARCH >"$ROOT/shim$run.txt" 2>"$ROOT/check$run"
		same "$ROOT/real$run.txt" "$ROOT/shim$run.txt" "outputs (log included) of run $run"
		grep -q "$name(" "$ROOT/shim$run.txt" || fail "the log does not name $name"
		"${RUN[@]}" --check "$SHIM_APP" --warn --name "$name" $ARCH -lineinfo >"$ROOT/li$run.txt" 2>"$ROOT/licheck$run"
	done
	grep -q "1 reached jitcached (1 hit, 0 miss" "$ROOT/check2" || { cat "$ROOT/check2"; fail "the 2nd name was not served"; }
	grep -q "1 reached jitcached (0 hit, 1 miss" "$ROOT/licheck2" || { cat "$ROOT/licheck2"; fail "-lineinfo: served another name's entry"; }
	[ "$(grep -o 'ptx=[^ ]*' "$ROOT/li1.txt")" != "$(grep -o 'ptx=[^ ]*' "$ROOT/li2.txt")" ] ||
		fail "-lineinfo: the name did not change the PTX?"
	[ "$(grep -o 'ptx=[^ ]*' "$ROOT/shim1.txt")" = "$(grep -o 'ptx=[^ ]*' "$ROOT/shim2.txt")" ] ||
		fail "without -lineinfo the name changed the PTX"
	echo "tmpname: $(cat "$ROOT/check2"); with -lineinfo: $(cat "$ROOT/licheck2")"
	;;
tmpname_include)
	start_daemon
	mkdir -p "$ROOT/inc"
	printf '#define EXTRA 5\n' >"$ROOT/inc/plain.h"
	# assert's own expansion, as a header macro expanded in the source
	printf '#define EXTRA (__assertfail("bad", __FILE__, 1, "f", 1), 0)\n' >"$ROOT/inc/file.h"
	# the name folded into a number: no search for its text finds it
	printf '#define EXTRA ((int)sizeof(__FILE__))\n' >"$ROOT/inc/fsize.h"
	# ... through another macro; through pieces that ## pastes into
	# __FILE__; by a __builtin_FILE() default argument of a call in the source
	printf '#define INNER ((int)sizeof(__FILE__))\n#define EXTRA (INNER + 1)\n' >"$ROOT/inc/chain.h"
	printf '%s\n' '#define CAT(a, b) a##b' '#define XCAT(a, b) CAT(a, b)' \
		'#define EXTRA ((int)sizeof(XCAT(__FI, LE__)))' >"$ROOT/inc/piece.h"
	printf '%s\n' '__device__ constexpr int where(const char *f = __builtin_FILE())' \
		'{ int n = 0; while (*f) n += *f++; return n; }' '#define EXTRA where()' >"$ROOT/inc/caller.h"
	# A macro that folds the name, which the source does not use (CCCL's
	# assertion macros, CuPy's copy of CCCL): nothing reaches the source.
	printf '%s\n' '#define WHERE_IMPL(m) ((int)sizeof(__FILE__) + m)' '#define WHERE(m) WHERE_IMPL(m)' \
		'inline __device__ int here() { return WHERE(0); }' '#define EXTRA 7' >"$ROOT/inc/unused.h"
	# The daemon stores no result that read a header changed in the last 100 ms.
	sleep 2.1
	# served RUN WHAT APP_ARGS...: the real NVRTC and jitcache-run, for a
	# program named after a fresh temporary file (same base name, as CuPy's;
	# RUN NNx: another base name); RUN 1b names it as RUN 1 did. Outputs
	# equal; prints the check line.
	served() {
		local run=$1 what=$2 dir
		shift 2
		dir=$ROOT/$what-tmp${run%b}
		mkdir -p "$dir"
		local name=$dir/$(printf '%032d' "$([ "${run%x}" = "$run" ] && echo 9 || echo 8)")_2.cubin.cu
		"$SHIM_APP" --name "$name" "$@" >"$ROOT/$what.real$run" || fail "$what: real run $run failed"
		"${RUN[@]}" --check "$SHIM_APP" --name "$name" "$@" >"$ROOT/$what.shim$run" 2>"$ROOT/$what.check$run"
		if [ -n "${UNSTABLE:-}" ]; then
			# NVRTC itself gives other bytes each time (below), of another
			# length too: all but the artifacts (rc, names, log)
			same <(unhashed <"$ROOT/$what.real$run") <(unhashed <"$ROOT/$what.shim$run") \
				"$what: outputs but the artifacts (log included) of run $run"
		else
			same "$ROOT/$what.real$run" "$ROOT/$what.shim$run" "$what: outputs (log included) of run $run"
		fi
		echo "$what run $run: $(cat "$ROOT/$what.check$run")"
	}
	unhashed() { sed -E 's#(ptx|cubin)=[0-9]+/[0-9a-f]+#\1=*#g'; }
	expect() { # expect WHAT RUN HIT MISS
		grep -q "1 reached jitcached ($3 hit, $4 miss" "$ROOT/$1.check$2" ||
			{ cat "$ROOT/$1.check$2"; fail "$1 run $2: expected $3 hit, $4 miss"; }
	}
	free0=$(stat name_free) bound0=$(stat name_bound)
	for run in 1 2; do served $run plain --include plain.h $ARCH -I "$ROOT/inc"; done
	expect plain 1 0 1
	expect plain 2 1 0
	[ "$(stat name_free)" = $((free0 + 2)) ] || fail "plain: cubin and PTX not stored as name-free"
	cmp -s <(grep -o 'cubin=[^ ]*' "$ROOT/plain.real1") <(grep -o 'cubin=[^ ]*' "$ROOT/plain.real2") ||
		fail "plain: the name changed the real NVRTC's cubin?"
	# A team daemon's path: the client reads the -I tree and sends it
	# (JITCACHE_SEND_HEADERS=1 asks it of any daemon); a new name is a hit.
	trees=$(stat tree_requests)
	JITCACHE_SEND_HEADERS=1 served 3 plain --include plain.h $ARCH -I "$ROOT/inc"
	expect plain 3 1 0
	[ "$(stat tree_requests)" -gt "$trees" ] || fail "plain: no client-read tree reached the daemon"
	# bound WHAT OTHER WHY ARGS...: runs 1, OTHER (another name) and 1b (run
	# 1's name again); the real NVRTC's cubins of 1 and OTHER differ (else
	# the test proves nothing); each name is a miss of its own, 1b a hit.
	bound() {
		local what=$1 other=$2 why=$3 run
		shift 3
		for run in 1 "$other" 1b; do served $run "$what" "$@"; done
		cmp -s <(grep -o 'cubin=[^ ]*' "$ROOT/$what.real1") \
			<(grep -o 'cubin=[^ ]*' "$ROOT/$what.real$other") &&
			fail "$what: $why did not change the real NVRTC's cubin (the test proves nothing)"
		expect "$what" 1 0 1
		expect "$what" "$other" 0 1
		expect "$what" 1b 1 0
	}
	bound file 2 __FILE__ --include file.h $ARCH -I "$ROOT/inc"
	[ "$(stat name_bound)" = $((bound0 + 4)) ] || fail "file: cubin and PTX not stored as name-bound for each name"
	# A header on disk folds the name into a number (run 22: a name of
	# another length): bound to each name, as in the source (below).
	bound fsize 22 'sizeof(__FILE__)' --include fsize.h $ARCH -I "$ROOT/inc"
	# The same through a client-read tree (a team daemon's path).
	JITCACHE_SEND_HEADERS=1 bound fsizetree 22 'sizeof(__FILE__)' --include fsize.h $ARCH -I "$ROOT/inc"
	bound chain 22 'sizeof(__FILE__) through a macro' --include chain.h $ARCH -I "$ROOT/inc"
	bound piece 22 '## of __FI and LE__' --include piece.h $ARCH -I "$ROOT/inc"
	bound caller 22 'a __builtin_FILE() default argument' --include caller.h $ARCH -I "$ROOT/inc"
	free1=$(stat name_free)
	for run in 1 22; do served $run unused --include unused.h $ARCH -I "$ROOT/inc"; done
	expect unused 1 0 1
	expect unused 22 1 0
	[ "$(stat name_free)" = $((free1 + 2)) ] || fail "unused: cubin and PTX not stored as name-free"
	# __builtin_FILE() in the source, folded into a number: the name is not
	# in the artifact as text, so the request must go under its own name.
	printf '%s\n' '__device__ constexpr int sum(const char *s) { int n = 0; while (*s) n += *s++; return n; }' \
		'extern "C" __global__ void k(int *o) { constexpr int v = sum(__builtin_FILE()); *o = v; }' >"$ROOT/bfile.cu"
	bound bfile 2 '__builtin_FILE()' --source "$ROOT/bfile.cu" $ARCH
	# No include, no __FILE__: an anonymous namespace's function, whose
	# internal name NVRTC mangles with the program's base name.
	printf '%s\n' 'namespace { __device__ __noinline__ float twice(float x) { return 2 * x; } }' \
		'extern "C" __global__ void k(float *a) { a[threadIdx.x] = twice(a[threadIdx.x]); }' >"$ROOT/anon.cu"
	# Only the base name is in its cubin: the same base name in another
	# directory is a hit (the same bytes), another base name a miss.
	for run in 1 2 3x; do served $run anon --source "$ROOT/anon.cu" $ARCH; done
	cmp -s <(grep -o 'cubin=[^ ]*' "$ROOT/anon.real1") <(grep -o 'cubin=[^ ]*' "$ROOT/anon.real3x") &&
		fail "anon: the base name did not change the real NVRTC's cubin (the test proves nothing)"
	expect anon 1 0 1
	expect anon 2 1 0
	expect anon 3x 0 1
	cccl=$JC_CUDA_INCLUDE/cccl
	[ -d "$cccl/cub" ] || { echo "SKIP (CUB part): no $cccl/cub"; exit 0; }
	cub=(--source "$JC_EXAMPLES/cub_sort.cu" $ARCH -std=c++17 -I "$cccl")
	# NVRTC 13.0 names CUB's internal-linkage objects (cuda::std's customisation
	# point objects) after the program, a random number and its pid: two
	# compiles of one program never give the same bytes, nor always as many
	# (an ASan run: 63948 and 63820 bytes of PTX for one name).
	"$SHIM_APP" --name "$ROOT/cub.cu" "${cub[@]}" >"$ROOT/cub.a" && "$SHIM_APP" --name "$ROOT/cub.cu" "${cub[@]}" >"$ROOT/cub.b" ||
		fail "cub: real run failed"
	cmp -s "$ROOT/cub.a" "$ROOT/cub.b" || UNSTABLE=1
	for run in 1 2 3x; do served $run cub "${cub[@]}"; done
	# The base name is in CUB's cubin (its internal names), not the directory:
	# a new directory is a hit, a new base name a miss with its own bytes.
	expect cub 1 0 1
	expect cub 2 1 0
	expect cub 3x 0 1
	cmp -s "$ROOT/cub.shim1" "$ROOT/cub.shim2" || fail "cub: run 2 was not served run 1's entry"
	;;
ctypes)
	PY=$(command -v python3 || true)
	[ -n "$PY" ] || { echo "SKIP: no python3"; exit 77; }
	# debug: the name check says why a result is bound to its program name
	start_daemon --log-level debug
	bound_lines() { grep -c 'bound to its program name' "$ROOT/daemon.log"; }
	run_twice ctypes "${PY_ASAN[@]}" "$PY" "$JC_SHIM_TESTS/ctypes_app.py" "$SHIM_SONAME" $ARCH
	;;
error)
	start_daemon
	"$SHIM_APP" --broken $ARCH >"$ROOT/real.txt" || fail "real run failed"
	grep -q "compile rc=6" "$ROOT/real.txt" || fail "the broken program compiled?"
	for run in 1 2; do
		"${RUN[@]}" --check "$SHIM_APP" --broken $ARCH >"$ROOT/shim$run.txt" 2>"$ROOT/check$run"
		same "$ROOT/real.txt" "$ROOT/shim$run.txt" "compile error result and log (run $run)"
		grep -q "compile error 1" "$ROOT/check$run" || { cat "$ROOT/check$run"; fail "not counted as a compile error"; }
	done
	[ "$(stat compile_failures)" -ge 1 ] || fail "the daemon did not see the failure"
	[ "$(stat negative_hits)" -ge 1 ] || fail "the 2nd run was not a negative hit in the daemon"
	echo "error: log identical ($(grep -c error "$ROOT/real.txt") error lines); $(cat "$ROOT/check2")"
	;;
passthrough)
	start_daemon
	"$SHIM_APP" $ARCH "--time=$ROOT/real-time.csv" >"$ROOT/real.txt" || fail "real run failed"
	before=$(($(stat hits) + $(stat misses) + $(stat bad_requests)))
	"${RUN[@]}" --check "$SHIM_APP" $ARCH "--time=$ROOT/shim-time.csv" >"$ROOT/shim.txt" 2>"$ROOT/check"
	rc=$?
	after=$(($(stat hits) + $(stat misses) + $(stat bad_requests)))
	[ "$rc" = 1 ] || { cat "$ROOT/check"; fail "jitcache-run --check should exit 1 (nothing reached the daemon), got $rc"; }
	grep -q "1 passed through" "$ROOT/check" || { cat "$ROOT/check"; fail "not passed through"; }
	grep -q -- "--time" "$ROOT/check" || { cat "$ROOT/check"; fail "reason does not name the option"; }
	[ "$before" = "$after" ] || fail "the daemon got a request ($before -> $after)"
	[ -s "$ROOT/shim-time.csv" ] || fail "NVRTC did not write the --time file"
	same "$ROOT/real.txt" "$ROOT/shim.txt" "outputs with --time"
	echo "passthrough: $(cat "$ROOT/check")"
	;;
nodaemon)
	export JITCACHE_SOCKET=$ROOT/no-such.sock
	"$SHIM_APP" --threads 2 $ARCH >"$ROOT/real.txt" || fail "real run failed"
	"${RUN[@]}" --check "$SHIM_APP" --threads 2 $ARCH >"$ROOT/shim.txt" 2>"$ROOT/check"
	rc=$?
	[ "$rc" = 1 ] || { cat "$ROOT/check"; fail "jitcache-run --check should exit 1, got $rc"; }
	grep -q "compiles will run in process" "$ROOT/check" || { cat "$ROOT/check"; fail "no warning"; }
	grep -q "daemon unavailable 2" "$ROOT/check" || { cat "$ROOT/check"; fail "not compiled in process"; }
	same "$ROOT/real.txt" "$ROOT/shim.txt" "outputs without a daemon"
	echo "nodaemon: $(tail -1 "$ROOT/check")"
	# The client's fallback off: the shim compiles through the real program.
	JITCACHE_FALLBACK=error "${RUN[@]}" --check "$SHIM_APP" --threads 2 $ARCH >"$ROOT/shim-err.txt" 2>"$ROOT/check-err"
	grep -q "daemon unavailable 2" "$ROOT/check-err" || { cat "$ROOT/check-err"; fail "not compiled in process"; }
	same "$ROOT/real.txt" "$ROOT/shim-err.txt" "outputs without a daemon, JITCACHE_FALLBACK=error"
	echo "nodaemon, JITCACHE_FALLBACK=error: $(tail -1 "$ROOT/check-err")"
	;;
threads)
	start_daemon
	run_twice threads "$SHIM_APP" --threads 16 $ARCH
	[ "$(grep -c 'compile rc=0' "$ROOT/threads.2")" = 16 ] || fail "not 16 programs"
	# One program queried by 16 threads at once (its PTX fetched lazily
	# while the others wait): every thread sees the same.
	run_twice shared "$SHIM_APP" --threads 16 --shared $ARCH
	[ "$(grep '^shared program' "$ROOT/shared.2" | sort -u | wc -l)" = 1 ] &&
		[ "$(grep -c '^shared program' "$ROOT/shared.2")" = 16 ] || fail "threads saw different results"
	;;
soname)
	mkdir "$ROOT/copy" && cp "$REAL_NVRTC" "$ROOT/copy/$SHIM_SONAME" || fail "cannot copy $REAL_NVRTC"
	shim=$(realpath "$SHIM_LIB")
	copy=$(realpath "$ROOT/copy/$SHIM_SONAME")
	LD_PRELOAD=$PRELOAD_FIRST$shim "$SHIM_DLOPEN_PROBE" "$SHIM_SONAME" "$SHIM_SONAME" "$copy" >"$ROOT/probe" ||
		fail "probe failed"
	cat "$ROOT/probe"
	grep -qx "$SHIM_SONAME -> $shim same-as-soname=1" "$ROOT/probe" ||
		fail "dlopen by soname does not give the preloaded shim"
	grep -qx "$copy -> $copy same-as-soname=0" "$ROOT/probe" ||
		fail "dlopen of another $SHIM_SONAME by absolute path: expected that copy, a separate object"
	# Without the shim, the soname is the real library.
	"$SHIM_DLOPEN_PROBE" "$SHIM_SONAME" "$SHIM_SONAME" | grep -q "$shim" && fail "shim loaded without LD_PRELOAD"
	echo "soname: by soname -> the shim; by the path of a copy -> the copy (not interceptable)"
	;;
gpu)
	if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
		echo "SKIP: no GPU (nvidia-smi -L fails)"
		exit 77
	fi
	PY=$(command -v python3 || true)
	[ -n "$PY" ] || { echo "SKIP: no python3"; exit 77; }
	# debug: the name check says why a result is bound to its program name
	start_daemon --log-level debug
	bound_lines() { grep -c 'bound to its program name' "$ROOT/daemon.log"; }
	"$PY" -m pip list 2>/dev/null | grep -Ei '^(cupy|torch|cuda-core|cuda-pathfinder|cuda-bindings|nvidia-cuda-nvrtc|numba-cuda) ' |
		sed 's/^/gpu: package /'
	ran=0
	for fw in cupy torch cuda.core; do
		for rep in $(seq "${JC_SHIM_GPU_RUNS:-1}"); do
			salt="$$-$rep-$(date +%s%N)"
			for mode in plain shim; do
				before=$(bound_lines)
				for run in 1 2; do
					c=$ROOT/fw/$fw-$rep-$mode-$run
					mkdir -p "$c"
					cmd=(env LD_LIBRARY_PATH="${JC_SHIM_PY_LDP-${LD_LIBRARY_PATH:-}}" CUPY_CACHE_DIR="$c/cupy" PYTORCH_KERNEL_CACHE_PATH="$c/torch"
						USE_PYTORCH_KERNEL_CACHE=0 JC_SHIM_SALT="$salt"
						"$PY" "$JC_SHIM_TESTS/frameworks.py" "$fw")
					[ "$mode" = shim ] && cmd=("${RUN[@]}" --check "${cmd[@]}")
					"${cmd[@]}" >"$c/out" 2>"$c/err"
					rc=$?
					if [ "$rc" = 77 ]; then
						echo "gpu: $fw skipped: $(cat "$c/out")"
						continue 4
					fi
					grep -q "result=ok" "$c/out" ||
						{ cat "$c/out" "$c/err"; fail "$fw ($mode, run $run): exit $rc, no right result"; }
					echo "gpu: mode=$mode run=$run $(grep '^framework=' "$c/out")" \
						"$(grep -o '[0-9]* reached jitcached.*' "$c/err")"
					# the results of run 1 the name check bound to their
					# program names (each a miss again for run 2's name)
					[ "$run" = 1 ] && bound=$(($(bound_lines) - before))
				done
				if [ "$mode" = shim ]; then
					read -r reached1 _ _ < <(check_counts "$ROOT/fw/$fw-$rep-shim-1/err")
					read -r reached2 hit2 miss2 < <(check_counts "$ROOT/fw/$fw-$rep-shim-2/err")
					grep 'bound to its program name' "$ROOT/daemon.log" | tail -n "$((bound + 0))" | sed 's/^/gpu: /'
					[ "${reached2:-0}" -gt 0 ] && [ "$reached2" = "$reached1" ] && [ "$miss2" = "$bound" ] &&
						[ "$hit2" = $((reached2 - bound)) ] && [ "$hit2" -gt 0 ] ||
						{ cat "$ROOT/fw/$fw-$rep-shim-2/err"; fail "$fw: 2nd run under jitcache-run not served by the daemon (name-bound in run 1: $bound)"; }
				fi
			done
			ran=1
		done
	done
	[ "$ran" = 1 ] || { echo "SKIP: none of cupy, torch, cuda.core can run here"; exit 77; }
	# Medians of compile_ms per framework, mode and run.
	for d in "$ROOT"/fw/*; do
		b=${d##*/}
		echo "$b $(sed -n 's/.*compile_ms=\([0-9.]*\).*/\1/p' "$d/out")"
	done | awk '{ n = split($1, p, "-"); k = p[1] " " p[n - 1] " run " p[n]; v[k] = v[k] " " $2 }
		END { for (k in v) print k, v[k] }' | sort | while read -r fw mode _ run vals; do
		m=$(printf '%s\n' $vals | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
		echo "gpu: summary $fw $mode run $run compile_ms median $m (n=$(wc -w <<<"$vals"))"
	done
	;;
realpath)
	need readelf
	readelf -d "$REAL_NVRTC" | grep -qE 'RUNPATH|RPATH' && { echo "SKIP: the real library has a RUNPATH"; exit 77; }
	builtins=$(ls "$(dirname "$REAL_NVRTC")"/libnvrtc-builtins.so.*.* 2>/dev/null | grep -v alt | head -1)
	[ -n "$builtins" ] || fail "no libnvrtc-builtins beside $REAL_NVRTC"
	mkdir "$ROOT/alt" && cp "$REAL_NVRTC" "$builtins" "$ROOT/alt/" || fail "copy"
	alt=$(realpath "$ROOT/alt")
	export JITCACHE_SOCKET=$ROOT/no-such.sock
	"$SHIM_APP" $ARCH >"$ROOT/real.txt" || fail "real run failed"
	for fallback in compile error; do
		JITCACHE_FALLBACK=$fallback JITCACHE_REAL_NVRTC=$alt/$SHIM_SONAME "${RUN[@]}" --check \
			"$SHIM_APP" --maps $ARCH >"$ROOT/shim.txt" 2>"$ROOT/err"
		same "$ROOT/real.txt" "$ROOT/shim.txt" "outputs with JITCACHE_REAL_NVRTC (fallback $fallback)"
		grep -q "^$alt/$SHIM_SONAME" "$ROOT/err" || { cat "$ROOT/err"; fail "the copy was not loaded"; }
		grep -q "^$alt/$(basename "$builtins")" "$ROOT/err" || { cat "$ROOT/err"; fail "its builtins were not loaded"; }
		grep -q "^$(dirname "$(realpath "$REAL_NVRTC")")" "$ROOT/err" &&
			{ cat "$ROOT/err"; fail "the toolkit's NVRTC was loaded too"; }
		grep -q "compiled in process" "$ROOT/err" || fail "not compiled in process"
	done
	echo "realpath: compiled by $alt/$SHIM_SONAME with its own builtins"
	;;
autostart)
	command -v "$JITCACHED" >/dev/null || fail "no jitcached"
	unset JITCACHE_SOCKET
	export JITCACHE_AUTOSTART=1 JITCACHE_AUTOSTART_IDLE_EXIT=30 JITCACHE_DIR=$ROOT/auto
	sock=$XDG_RUNTIME_DIR/jitcached.sock
	run_autostarted() {
		"${RUN[@]}" --check "$SHIM_APP" $ARCH >"$ROOT/auto.$1" 2>"$ROOT/auto.check$1" ||
			{ cat "$ROOT/auto.check$1"; fail "run $1 failed"; }
	}
	run_autostarted 1
	CTL=("$JITCACHECTL" --socket "$sock")
	DAEMON_PID=$("${CTL[@]}" ping 2>/dev/null | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p')
	[ -n "$DAEMON_PID" ] || { cat "$ROOT/auto.check1"; fail "no daemon answers at $sock after jitcache-run"; }
	run_autostarted 2
	grep -q "1 reached jitcached (0 hit, 1 miss" "$ROOT/auto.check1" &&
		grep -q "1 reached jitcached (1 hit, 0 miss" "$ROOT/auto.check2" ||
		{ cat "$ROOT/auto.check1" "$ROOT/auto.check2"; fail "expected a miss, then a hit"; }
	echo "autostart: jitcached pid $DAEMON_PID started by jitcache-run; $(cat "$ROOT/auto.check2")"
	kill "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	for _ in $(seq 100); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
	# The shim preloaded without jitcache-run, no daemon: the daemon the client
	# library starts inherits LD_PRELOAD, and must shed the shim (else its
	# workers' NVRTC would be the shim, asking that very daemon).
	export JITCACHE_DIR=$ROOT/auto2
	report=$ROOT/direct.report
	: >"$report"
	JITCACHE_RUN_REPORT=$report LD_PRELOAD=$PRELOAD_FIRST$(realpath "$SHIM_LIB") \
		timeout 120 "$SHIM_APP" $ARCH -DDIRECT >"$ROOT/direct.txt" || fail "the app under LD_PRELOAD failed or hung"
	grep -q "compile rc=0" "$ROOT/direct.txt" || fail "no compile"
	# The compile reached the daemon, or (it took more than the auto-start's
	# 1 s to answer, on a loaded machine) ran in process while it started.
	grep -q -E "misses=1 |unavailable=1 " "$report" || { cat "$report"; fail "the compile did not reach the started daemon"; }
	for _ in $(seq 300); do
		DAEMON_PID=$("${CTL[@]}" ping 2>/dev/null | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p')
		[ -n "$DAEMON_PID" ] && break
		sleep 0.1
	done
	[ -n "$DAEMON_PID" ] || fail "no daemon was started"
	for p in "$DAEMON_PID" $(pgrep -P "$DAEMON_PID"); do
		grep -q libjitcache-nvrtc "/proc/$p/maps" && fail "process $p of the daemon runs with the shim"
		tr '\0' '\n' <"/proc/$p/environ" | grep -q '^LD_PRELOAD=.*libjitcache-nvrtc' &&
			fail "process $p of the daemon has the shim in LD_PRELOAD"
	done
	echo "autostart: from a process with the shim preloaded: daemon $DAEMON_PID and its workers run without it"
	;;
summary)
	need "${CC:-cc}"
	start_daemon
	# One line on stderr sums up a run that compiled; the 2nd run is all hits.
	for run in 1 2; do
		"${RUN[@]}" "$SHIM_APP" --threads 2 $ARCH >/dev/null 2>"$ROOT/summary$run" || fail "run $run failed"
		cat "$ROOT/summary$run"
		[ "$(grep -c '^jitcache-run: ' "$ROOT/summary$run")" = 1 ] || fail "run $run: not one summary line"
	done
	grep -q '^jitcache-run: 2 NVRTC compiles: 2 from jitcached (0 hit, 2 miss, 0 joined)' "$ROOT/summary1" ||
		fail "run 1: the summary does not say 2 misses"
	grep -q '^jitcache-run: 2 NVRTC compiles: 2 from jitcached (2 hit, 0 miss, 0 joined)' "$ROOT/summary2" ||
		fail "run 2: the summary does not say 2 hits"
	# ls lists them under the program name NVRTC was given and the process's
	# name, not the stand-in name the key has (jitcache-program.cu).
	"${CTL[@]}" ls >"$ROOT/ls" || fail "ls failed"
	cat "$ROOT/ls"
	grep -q ' app.cu (shim_nvrtc_app)$' "$ROOT/ls" || fail "ls does not name app.cu (shim_nvrtc_app)"
	grep -q 'jitcache-program.cu' "$ROOT/ls" && fail "ls names the stand-in jitcache-program.cu"
	# -q: no line; a command that compiles nothing: no line either.
	"${RUN[@]}" -q "$SHIM_APP" --threads 2 $ARCH >/dev/null 2>"$ROOT/quiet" || fail "-q run failed"
	grep -q '^jitcache-run' "$ROOT/quiet" && { cat "$ROOT/quiet"; fail "-q printed a summary"; }
	"${RUN[@]}" true 2>"$ROOT/nothing" || fail "jitcache-run true failed"
	[ -s "$ROOT/nothing" ] && { cat "$ROOT/nothing"; fail "a command that compiled nothing got a summary"; }
	# --check on a program with NVRTC's code linked in (as libnvrtc_static.a
	# would put it; the toolkit here has none): the fix names it.
	printf '%s\n' 'int nvrtcCompileProgram(void *p, int n, const char **o) { (void)p; (void)o; return n; }' \
		'int main(void) { return nvrtcCompileProgram(0, 0, 0); }' >"$ROOT/static.c"
	"${CC:-cc}" -o "$ROOT/static-app" "$ROOT/static.c" || fail "cannot build the static-NVRTC stand-in"
	"${RUN[@]}" --check "$ROOT/static-app" 2>"$ROOT/static.check"
	[ $? = 1 ] || { cat "$ROOT/static.check"; fail "--check should exit 1"; }
	cat "$ROOT/static.check"
	grep -q "fix: .*static-app has NVRTC linked in statically" "$ROOT/static.check" || fail "the fix does not name the static NVRTC"
	;;
bypath)
	PY=$(command -v python3 || true)
	[ -n "$PY" ] || { echo "SKIP: no python3"; exit 77; }
	# debug: the name check says why a result is bound to its program name
	start_daemon --log-level debug
	bound_lines() { grep -c 'bound to its program name' "$ROOT/daemon.log"; }
	mkdir "$ROOT/copy" && cp "$REAL_NVRTC" "$ROOT/copy/$SHIM_SONAME" || fail "cannot copy $REAL_NVRTC"
	shim=$(realpath "$SHIM_LIB")
	copy=$(realpath "$ROOT/copy/$SHIM_SONAME")
	LD_AUDIT=$(dirname "$shim")/libjitcache-audit.so LD_PRELOAD=$PRELOAD_FIRST$shim \
		"$SHIM_DLOPEN_PROBE" "$SHIM_SONAME" "$copy" "$REAL_NVRTC" >"$ROOT/probe" || fail "probe failed"
	cat "$ROOT/probe"
	# The first path opened is served; the second, a distinct file, would get
	# the first's compiler under its name: it is opened for real (uncached).
	grep -q "^$copy -> $shim same-as-soname=1" "$ROOT/probe" ||
		fail "with the audit module, an open by path should give the shim"
	grep -q "^$REAL_NVRTC -> $(realpath "$REAL_NVRTC") same-as-soname=0" "$ROOT/probe" ||
		fail "a second distinct NVRTC path was redirected to the shim (which compiles with the first)"
	# A library named in $JITCACHE_REAL_NVRTC is the process's from the start:
	# an open of another file by path is not redirected.
	JITCACHE_REAL_NVRTC=$REAL_NVRTC LD_AUDIT=$(dirname "$shim")/libjitcache-audit.so \
		LD_PRELOAD=$PRELOAD_FIRST$shim "$SHIM_DLOPEN_PROBE" "$SHIM_SONAME" "$copy" >"$ROOT/probe.env" 2>&1 ||
		fail "probe failed"
	grep -q "^$copy -> $copy same-as-soname=0" "$ROOT/probe.env" ||
		{ cat "$ROOT/probe.env"; fail "another file than \$JITCACHE_REAL_NVRTC was redirected to the shim"; }
	py=("${PY_ASAN[@]}" "$PY" "$JC_SHIM_TESTS/ctypes_app.py" "$copy" $ARCH)
	"${RUN[@]}" --check "${py[@]}" >"$ROOT/plain.txt" 2>"$ROOT/plain.check"
	[ $? = 1 ] && grep -q "no NVRTC compile went through the shim" "$ROOT/plain.check" ||
		{ cat "$ROOT/plain.check"; fail "a load by path reached the shim without --by-path?"; }
	grep -q "fix: .*opens libnvrtc by absolute path.*--by-path" "$ROOT/plain.check" ||
		{ cat "$ROOT/plain.check"; fail "--check does not name --by-path as the fix"; }
	RUN+=(--by-path)
	run_twice bypath "${py[@]}"
	;;
bypath_build)
	# The application opens its own NVRTC (another build: a wheel's; here the
	# toolkit's with its build-id changed) by absolute path, under --by-path,
	# $JITCACHE_REAL_NVRTC unset: the shim must compile with that library, not
	# the toolkit's it would pick by default; the daemon (toolkit's NVRTC)
	# refuses its build-id, so it compiles in process, counted.
	PY=$(command -v python3 || true)
	[ -n "$PY" ] || { echo "SKIP: no python3"; exit 77; }
	# debug: the name check says why a result is bound to its program name
	start_daemon --log-level debug
	bound_lines() { grep -c 'bound to its program name' "$ROOT/daemon.log"; }
	copy=$("$JTL_NVRTC_COPY" "$REAL_NVRTC" "$ROOT/wheel" 91) || fail "cannot make an NVRTC copy"
	c0=$(stat compiles)
	py=("${PY_ASAN[@]}" "$PY" "$JC_SHIM_TESTS/ctypes_app.py" "$copy" $ARCH)
	"${py[@]}" >"$ROOT/own.py" || fail "the copy's own ctypes run failed"
	# (--check exits 1: no compile reached the daemon)
	RUN+=(--by-path)
	env -u JITCACHE_REAL_NVRTC "${RUN[@]}" --check "${py[@]}" >"$ROOT/shim.py" 2>"$ROOT/shim.check"
	[ $? -le 1 ] || { cat "$ROOT/shim.check"; fail "the ctypes app under jitcache-run --by-path failed"; }
	cat "$ROOT/shim.check"
	same "$ROOT/own.py" "$ROOT/shim.py" "outputs of the application's own NVRTC and the shim's"
	grep -q "0 reached jitcached" "$ROOT/shim.check" && grep -q "another NVRTC build" "$ROOT/shim.check" ||
		fail "the shim sent the toolkit's NVRTC build, not the one the application opened"
	[ "$(stat compiles)" = "$c0" ] || fail "the daemon compiled for an application that opened another NVRTC build"
	# The same with the toolkit's own library opened by path: served (miss, then hits)
	run_twice toolkit env -u JITCACHE_REAL_NVRTC "${PY_ASAN[@]}" "$PY" "$JC_SHIM_TESTS/ctypes_app.py" \
		"$REAL_NVRTC" $ARCH
	;;
build)
	# The application loaded another NVRTC build (a wheel's libnvrtc.so.13;
	# here the toolkit's with its build-id changed, jtl_nvrtc_copy): the
	# daemon, whose NVRTC is the toolkit's, must not answer for it. The shim
	# compiles with the application's own library, in process, and counts it.
	need readelf
	PY=$(command -v python3 || true)
	start_daemon
	copy=$("$JTL_NVRTC_COPY" "$REAL_NVRTC" "$ROOT/wheel" 90) || fail "cannot make an NVRTC copy"
	c0=$(stat compiles)
	# The C program and the ctypes program, each: its own library's output
	LD_LIBRARY_PATH=$ROOT/wheel "$SHIM_APP" --threads 2 $ARCH >"$ROOT/own.txt" || fail "the copy's own run failed"
	# (--check exits 1: no compile reached the daemon)
	JITCACHE_REAL_NVRTC=$copy "${RUN[@]}" --check "$SHIM_APP" --threads 2 $ARCH >"$ROOT/shim.txt" 2>"$ROOT/shim.check"
	[ $? -le 1 ] || { cat "$ROOT/shim.check"; fail "the app under jitcache-run failed"; }
	same "$ROOT/own.txt" "$ROOT/shim.txt" "outputs of the application's own NVRTC and the shim's"
	grep -q "0 reached jitcached" "$ROOT/shim.check" && grep -q "refused 2" "$ROOT/shim.check" &&
		grep -q "another NVRTC build" "$ROOT/shim.check" ||
		{ cat "$ROOT/shim.check"; fail "another NVRTC build reached the daemon, or was not counted"; }
	if [ -n "$PY" ]; then
		LD_LIBRARY_PATH=$ROOT/wheel "${PY_ASAN[@]}" "$PY" "$JC_SHIM_TESTS/ctypes_app.py" "$SHIM_SONAME" $ARCH \
			>"$ROOT/own.py" || fail "the copy's own ctypes run failed"
		JITCACHE_REAL_NVRTC=$copy "${RUN[@]}" --check "${PY_ASAN[@]}" "$PY" "$JC_SHIM_TESTS/ctypes_app.py" \
			"$SHIM_SONAME" $ARCH >"$ROOT/shim.py" 2>"$ROOT/shim.pycheck"
		[ $? -le 1 ] || { cat "$ROOT/shim.pycheck"; fail "the ctypes app under jitcache-run failed"; }
		same "$ROOT/own.py" "$ROOT/shim.py" "ctypes outputs of the application's own NVRTC and the shim's"
		grep -q "0 reached jitcached" "$ROOT/shim.pycheck" ||
			{ cat "$ROOT/shim.pycheck"; fail "ctypes: another NVRTC build reached the daemon"; }
	fi
	[ "$(stat compiles)" = "$c0" ] || fail "the daemon compiled for another NVRTC build"
	[ "$(stat nvrtc_other_builds)" -ge 1 ] || fail "the daemon did not count the other build"
	# version and doctor name both builds: the daemon's, and the application's it did not answer for
	own=$(readelf -n "$REAL_NVRTC" | sed -n 's/.*Build ID: //p') other=$(readelf -n "$copy" | sed -n 's/.*Build ID: //p')
	[ -n "$own" ] && [ "$own" != "$other" ] || fail "no build-ids read ($own, $other)"
	"${CTL[@]}" version >"$ROOT/version.txt" 2>&1
	grep -q "build-id:$own (compiles here); build-id:$other (another build: compiled in the application)" \
		"$ROOT/version.txt" || { cat "$ROOT/version.txt"; fail "version does not list the NVRTC builds"; }
	"${CTL[@]}" doctor >"$ROOT/doctor.txt" 2>&1
	grep -q "NVRTC builds applications asked the daemon for: .*build-id:$other" "$ROOT/doctor.txt" ||
		{ cat "$ROOT/doctor.txt"; fail "doctor does not list the NVRTC builds"; }
	# The toolkit's own build through the same daemon: served (a miss, then hits)
	run_twice toolkit "$SHIM_APP" $ARCH
	echo "build: another NVRTC build: $(cat "$ROOT/shim.check"); daemon nvrtc_other_builds=$(stat nvrtc_other_builds)"
	;;
*)
	fail "unknown case"
	;;
esac
exit 0
