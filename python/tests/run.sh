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
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pytest -q -rs -p no:cacheprovider --basetemp="$tmp/pytest" "$(dirname "$0")" "$@"
