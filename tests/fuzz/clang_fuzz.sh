#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds a libFuzzer target with clang, the sources under test instrumented:
#   clang_fuzz.sh CLANG OUTPUT DEPFILE --cflags FLAG... --sources SRC... --ldflags FLAG...
# Each source is compiled on its own (so each has its header list), then all
# are linked; DEPFILE gets one rule, OUTPUT: every header any source read
# (Meson's depfile for the custom target).
set -euo pipefail
clang=$1 out=$2 dep=$3
shift 3
cflags=() srcs=() ldflags=() mode=
for a in "$@"; do
	case $a in --cflags | --sources | --ldflags) mode=$a; continue ;; esac
	case $mode in
	--cflags) cflags+=("$a") ;;
	--sources) srcs+=("$a") ;;
	--ldflags) ldflags+=("$a") ;;
	*) echo "clang_fuzz.sh: '$a' before --cflags" >&2; exit 2 ;;
	esac
done
tmp=$(mktemp -d "$out.objs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
objs=()
for i in "${!srcs[@]}"; do
	"$clang" "${cflags[@]}" -MD -MF "$tmp/$i.d" -c "${srcs[$i]}" -o "$tmp/$i.o"
	objs+=("$tmp/$i.o")
done
"$clang" "${cflags[@]}" "${objs[@]}" -o "$out" "${ldflags[@]}"
{
	printf '%s:' "$out"
	for i in "${!srcs[@]}"; do
		sed -e '1s/^[^:]*://' -e 's/\\$//' "$tmp/$i.d" | tr '\n' ' '
	done
	echo
} >"$dep"
