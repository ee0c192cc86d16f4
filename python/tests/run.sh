#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs the jitcache package's tests with pytest under $JC_PYTHON, else under
# PYTHON (the interpreter Meson found); exits 77 (skipped) without pytest.
# Usage: run.sh PYTHON [PYTEST_ARGS...]
py=${JC_PYTHON:-$1}
shift
if ! "$py" -c 'import pytest' 2>/dev/null; then
	echo "skipped: $py cannot import pytest (Debian: apt-get install python3-pytest)"
	exit 77
fi
# A client library built with AddressSanitizer (scripts/sanitize.sh) needs
# its runtime loaded before the interpreter's libraries. CPython does not
# free everything at exit, so leaks are not checked in this run's processes.
asan=$(ldd "${JITCACHE_CLIENT_LIB:-/nonexistent}" 2>/dev/null |
	sed -n 's/.*libasan\.so[^ ]* => \([^ ]*\).*/\1/p')
if [ -n "$asan" ]; then
	export LD_PRELOAD="$asan${LD_PRELOAD:+:$LD_PRELOAD}"
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	echo "AddressSanitizer build: $asan preloaded, leak checks off (CPython)"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pytest -q -rs -p no:cacheprovider --basetemp="$tmp/pytest" "$(dirname "$0")" "$@"
