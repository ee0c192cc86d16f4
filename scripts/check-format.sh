#!/bin/sh
# SPDX-License-Identifier: MIT
# Every tracked C source and header is as clang-format leaves it
# (.clang-format; docs/contributing.md, "Style"). The format depends on
# clang-format's major version: the one scripts/setup.sh installs (Debian 12:
# 14) is checked; another version, or none, skips (exit 77) and says so.
# usage: check-format.sh SOURCE_ROOT   (exit 0 clean; 1 the files that differ)
set -u
root=${1:-.}
want=14
cf=$(command -v clang-format-$want || command -v clang-format || true)
if [ -z "$cf" ]; then
	echo "check-format: no clang-format (scripts/setup.sh installs it): skipped"
	exit 77
fi
have=$("$cf" --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
if [ "$have" != "$want" ]; then
	echo "check-format: $cf is version $have, the tree is formatted by $want: skipped"
	exit 77
fi
cd "$root" || exit 1
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "check-format: $root is not a git checkout: skipped"
	exit 77
fi
files=$(git ls-files '*.c' '*.h')
# One clang-format for every file (a process per file took 30 s on a loaded
# machine); it names each file and line it would change.
if ! out=$("$cf" --style=file --dry-run -Werror $files 2>&1); then
	printf '%s\n' "$out" | grep -E '^[^ ].*(error|warning):' | head -n 50
	echo "check-format: the files above differ from $cf's format (run: $cf -i FILE)"
	exit 1
fi
echo "check-format: $(echo "$files" | wc -l) files as clang-format $want leaves them"
