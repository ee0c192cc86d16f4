#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `meson install --prefix P` into a temporary prefix gives programs and a
# client library that run without LD_LIBRARY_PATH: the installed jitcached
# serves a C program built through pkg-config (PKG_CONFIG_PATH=P/lib/.../pkgconfig)
# that compiles a kernel through it, and the Python package installed with
# `pip install --no-build-isolation --no-index ./python` into a fresh venv finds
# the installed libjitcache-client and compiles through the same daemon.
# Builds only what is installed (the tests are not).
# usage: test_install.sh SOURCE_ROOT
set -euo pipefail
src=$1
for tool in pkg-config cc meson ninja python3; do
	command -v $tool >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done
python3 -c 'import venv, ensurepip' 2>/dev/null || { echo "SKIP: python3 -m venv is not available (package python3-venv)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/jc-install-XXXXXX")
daemon=
cleanup() {
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
	[ -n "${JC_TEST_KEEP:-}" ] && echo "kept $T" || rm -rf "$T"
}
trap cleanup EXIT
P=$T/prefix
fail() { echo "FAIL: $*"; [ -f $T/daemon.log ] && sed 's/^/  daemon: /' $T/daemon.log | tail -20; exit 1; }
# Nothing of the build tree or the test environment may help the installed files.
unset LD_LIBRARY_PATH JITCACHED JITCACHECTL JITCACHE_WORKER JITCACHE_CLIENT_LIB PYTHONPATH

echo "== meson setup --prefix $P, build what is installed, meson install"
meson setup "$T/build" "$src" --prefix "$P" >"$T/setup.log" 2>&1 || { tail -20 "$T/setup.log"; fail "meson setup"; }
targets=$(meson introspect "$T/build" --installed | python3 -c '
import json, os, subprocess, sys
b = sys.argv[1]
known = {l.split(":")[0] for l in subprocess.run(["ninja", "-C", b, "-t", "targets", "all"],
         capture_output=True, text=True, check=True).stdout.splitlines()}
print(" ".join(sorted(r for r in (os.path.relpath(k, b) for k in json.load(sys.stdin)) if r in known)))' "$T/build")
ninja -C "$T/build" $targets >"$T/build.log" 2>&1 || { tail -20 "$T/build.log"; fail "build"; }
meson install -C "$T/build" --no-rebuild >"$T/install.log" 2>&1 || { tail -20 "$T/install.log"; fail "meson install"; }
pc=$(find "$P" -name jitcache-client.pc)
[ -n "$pc" ] || fail "no jitcache-client.pc under $P"
for f in sbin/jitcached bin/jitcachectl bin/jitcache-run libexec/jitcache-worker share/man/man1/jitcachectl.1 \
	 share/man/man1/jitcache-run.1 share/man/man8/jitcached.8 share/man/man5/jitcached.conf.5; do
	[ -e "$P/$f" ] || fail "$P/$f was not installed"
done
echo "installed: $(find "$P" -type f | wc -l) files; pkg-config file $pc"

echo "== the installed jitcached on a private socket and cache, the installed jitcachectl"
"$P/sbin/jitcached" --cache-dir "$T/cache" --socket "$T/sock" --config /dev/null 2>"$T/daemon.log" &
daemon=$!
for _ in $(seq 300); do "$P/bin/jitcachectl" --socket "$T/sock" ping >/dev/null 2>&1 && break; sleep 0.1; done
"$P/bin/jitcachectl" --socket "$T/sock" ping || fail "the installed jitcached does not answer"
export JITCACHE_SOCKET=$T/sock JITCACHE_AUTOSTART=0 JITCACHE_FALLBACK=error JITCACHE_SYSTEM_SOCKET=

echo "== a C program built through pkg-config, run without LD_LIBRARY_PATH"
export PKG_CONFIG_PATH=$(dirname "$pc")
cc "$src/examples/nvrtc_port.c" -o "$T/port" $(pkg-config --cflags --libs jitcache-client) || fail "cc through pkg-config"
readelf -d "$T/port" | grep -E 'RUNPATH|RPATH' || true
out=$("$T/port" 2>&1) || fail "the program failed: $out"
echo "port: $out"
case $out in *", cached") ;; *) fail "the program's compile did not go through the daemon: $out" ;; esac
loaded=$(ldd "$T/port" | grep libjitcache-client)
case $loaded in *"=> $P/"*) ;; *) fail "the program did not load the installed library: $loaded" ;; esac

echo "== the Python package, pip-installed offline into a fresh venv"
python3 -m venv "$T/venv"
"$T/venv/bin/pip" install --no-build-isolation --no-index -q "$src/python" >"$T/pip.log" 2>&1 ||
	{ cat "$T/pip.log"; fail "pip install --no-build-isolation --no-index ./python"; }
cd "$T"  # not the source tree: the venv's package, nothing else
"$T/venv/bin/python" - "$P" <<'PY' || fail "the venv's jitcache did not compile through the daemon"
import sys
import jitcache
prefix = sys.argv[1]
assert jitcache.__file__.startswith(sys.prefix), jitcache.__file__
src = "template <typename T> __global__ void scale(T a, T *x) { x[threadIdx.x] *= a; }\n"
with jitcache.Client() as c:
    r = c.compile(src, name="scale.cu", arch="sm_90", name_expressions=["&scale<float>"])
print("python:", r.status, len(r.data), "bytes,", r.lowered_names["&scale<float>"], "from", jitcache._lib.path())
assert r.status in ("miss", "hit"), r.status
assert jitcache._lib.path().startswith(prefix), jitcache._lib.path()
PY
stats=$("$P/bin/jitcachectl" --socket "$T/sock" stats --json)
compiles=$(printf '%s' "$stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["compiles"])')
[ "$compiles" -ge 2 ] || fail "the daemon compiled $compiles kernels, expected 2: $stats"
echo "PASS: the installed daemon compiled $compiles kernels for a pkg-config C program and the venv's Python package"
