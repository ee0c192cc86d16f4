#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds jitcache with AddressSanitizer + UndefinedBehaviorSanitizer in
# ./build-asan and runs the whole test suite there (extra arguments go to
# `meson test`, e.g. --suite unit). It passes only when every test passes AND
# no process (tests, daemons, workers, jitcachectl) wrote a sanitizer report.
# ASan and LSan reports go to files (kept in build-asan/sanitizer-reports/); UBSan
# (which, combined with ASan, prints to stderr only) stops the process that
# hit it, and the daemons' logs (stderr of daemons and their workers) are kept
# for the run (JC_TEST_KEEP, TMPDIR) and searched for reports.
#
# The compile worker is sanitized too, NVRTC running inside it: its memory
# limit is relative to its start-up size (daemon/worker.h), so ASan's
# terabytes of shadow address space do not count. Leaks are checked in every
# process that exits by itself (tests, jitcachectl, daemons stopped with
# SIGTERM); workers are killed by their daemon, or die with it
# (PR_SET_PDEATHSIG), so LSan does not run there. Leak checks are off only
# where LSan cannot work or the leaks are not ours (docs/contributing.md, "CI
# and sanitizers": CPython, a process under strace, NVRTC's own in the shim
# tests).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=build-asan

if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" -Db_sanitize=address,undefined -Db_lundef=false \
		-Dbuildtype=debugoptimized -Dc_args=-fno-omit-frame-pointer
fi
ninja -C "$build"

reports=$root/$build/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"
# Short, under /tmp: Unix socket paths inside it must fit 108 bytes (the
# tests' roots are at most 63), whatever the checkout's path.
tmp=$(mktemp -d /tmp/jc-sanitize.XXXXXX)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
chmod 0755 "$tmp" # other users of the tests reach their roots in it
export TMPDIR="$tmp" JC_TEST_KEEP=1
# The reports are written here first: the users the tests make (daemons,
# workers and clients of other uids) must be able to write theirs, which
# they cannot in the checkout (a clone may be in a 0700 directory).
live=$tmp/reports
mkdir -m 1777 "$live"
# allocator_may_return_null: our code handles failed allocations (and the
# worker's memory-limit test relies on it); detect_stack_use_after_return:
# more checks; halt_on_error: UBSan findings fail, not just print. Not
# strict_string_checks: it makes strndup() of a buffer without a NUL, which
# is valid C, a report.
export ASAN_OPTIONS="log_path=$live/asan:allocator_may_return_null=1:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="log_path=$live/ubsan:halt_on_error=1:print_stacktrace=1"

# Most tests run alone (is_parallel: false: real daemons, users, timings)
# and wait more than they compute, so the whole suite runs in two lanes at
# once, a test of each at a time, each lane its own `meson test` (logs
# build-asan/meson-logs/lane-{a,b}.*): lane a the suites below, lane b every
# test in none of them, so each test runs once. The split balances the
# lanes' times (docs/contributing.md, "CI and sanitizers"). Tests run on
# this machine beside other runs of the suite all day: theirs are their own
# roots, users, ports and sockets. With arguments: one `meson test` of them.
lane_a="integration conformance crash concurrency"
lane() { # lane NAME MESON-TEST-ARGS...: prefixes its output with [NAME]
	local name=$1
	shift
	meson test -C "$build" --no-rebuild --print-errorlogs --timeout-multiplier 3 --num-processes 1 \
		--logbase "lane-$name" "$@" 2>&1 | sed -u "s/^/[$name] /"
}
status=0
if [ $# -gt 0 ]; then
	meson test -C "$build" --print-errorlogs --timeout-multiplier 3 "$@" || status=$?
else
	with=() without=()
	for s in $lane_a; do
		with+=(--suite "$s")
		without+=(--no-suite "$s")
	done
	lane a "${with[@]}" &
	a=$!
	lane b "${without[@]}" &
	b=$!
	wait "$a" || status=$?
	wait "$b" || status=$?
fi
find "$live" -type f -exec cp {} "$reports/" \;

# Reports in the daemons' logs (and their workers'), copied beside the others.
for log in "$tmp"/jc-test-*/daemon*.log; do
	[ -f "$log" ] || continue
	if grep -q -E 'runtime error:|Sanitizer' "$log"; then
		cp "$log" "$reports/$(basename "$(dirname "$log")").log"
	fi
done

# LeakSanitizer's own failure to stop a process's threads at exit (a report
# holding only "Unable to get registers from thread N"; seen now and then
# on a loaded machine) is no finding, but that process's leaks went
# unchecked: said, not failed.
for f in "$reports"/*; do
	[ -f "$f" ] || continue
	if ! grep -q -v 'Unable to get registers from thread' "$f"; then
		echo "sanitize: LeakSanitizer could not stop the threads of pid ${f##*.} at its exit" \
			"(no leak check there): $(head -n 1 "$f")" >&2
		rm -f "$f"
	fi
done
found=$(find "$reports" -type f | wc -l)
if [ "$found" -ne 0 ]; then
	echo "sanitizer reports ($found):" >&2
	for f in "$reports"/*; do
		echo "== $f" >&2
		head -n 40 "$f" >&2
	done
	status=1
fi
if [ "$status" -eq 0 ]; then
	echo "sanitize: ${*:-the whole suite}: clean under ASan + UBSan (no reports)"
fi
exit "$status"
