#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The man pages render with man(1) and name every flag their program's --help
# prints: jitcached(8) and jitcached.conf(5) every setting of `jitcached
# --help`, jitcachectl(1) every option and command of `jitcachectl --help` and
# of each `jitcachectl help COMMAND`, jitcache-run(1) those of its --help.
# usage: test_man.sh MANDIR JITCACHED JITCACHECTL JITCACHE_RUN
set -uo pipefail
mandir=$1 jitcached=$2 jitcachectl=$3 run=$4
command -v man >/dev/null || { echo "SKIP: man(1) is not installed (package man-db)"; exit 77; }
command -v col >/dev/null || { echo "SKIP: col(1) is not installed (package bsdextrautils)"; exit 77; }
[ -e "$mandir/jitcachectl.1" ] || { echo "SKIP: no man pages built (scdoc not found: package scdoc)"; exit 77; }
fail=0

render() { # PAGE: the page as text, plain ASCII, no hyphenation or justification
	MANWIDTH=250 MAN_KEEP_FORMATTING= man -E ascii --no-hyphenation --no-justification -l "$1" 2>&1 | col -bx
}
flags() { # the --long and -x options in a help text
	grep -oE '(^|[][ |(,])--?[a-zA-Z][a-zA-Z0-9-]*' | sed -E 's/^[][ |(,]//' | sort -u
}
check() { # PAGE WHAT WORD...
	local page=$1 what=$2; shift 2
	local text; text=$(render "$mandir/$page")
	if [ "$(printf '%s\n' "$text" | wc -l)" -lt 20 ]; then
		echo "FAIL: $page does not render:"; printf '%s\n' "$text" | head; fail=1; return
	fi
	local n=0 w
	for w in "$@"; do
		n=$((n + 1))
		# A whole word: not a prefix of a longer option (--link in --link-option).
		if ! printf '%s\n' "$text" | grep -qE -- "(^|[^a-zA-Z0-9-])$(printf '%s' "$w" | sed 's/[.]/\\./g')([^a-zA-Z0-9-]|$)"; then
			echo "FAIL: $page does not mention $what $w"; fail=1
		fi
	done
	echo "$page: renders ($(printf '%s\n' "$text" | wc -l) lines), $n ${what}s checked"
}

check jitcached.8 flag $("$jitcached" --help | flags)
check jitcached.conf.5 key $("$jitcached" --help | flags | sed 's/^--//' | grep -vxE 'config|help|version')
ctl_help=$("$jitcachectl" --help)
commands=$(printf '%s\n' "$ctl_help" | sed -n '/^commands:/,/^[^ ]/p' | grep -oE '^  [a-z]+' | tr -d ' ')
[ -n "$commands" ] || { echo "FAIL: no commands in jitcachectl --help"; fail=1; }
all=$(printf '%s\n' "$ctl_help" | flags)
for c in $commands; do all+=$'\n'$("$jitcachectl" help "$c" | flags); done
check jitcachectl.1 flag $(printf '%s\n' "$all" | sort -u)
check jitcachectl.1 command $commands
check jitcache-run.1 flag $("$run" --help | flags)
exit $fail
