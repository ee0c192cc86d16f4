# SPDX-License-Identifier: MIT
"""jitcache-bench's Python side (bench/python.c): hits of jitcache.Client.compile,
timed in blocks the benchmark asks for, so that they interleave with the C
client's hits on the same machine at the same time.

Usage: python_hit.py SOCKET SOURCE NAME ARCH NAME_EXPRESSION
Prints "ready STATUS" after 200 warm-up calls; then for each line "N" read
from stdin, times N calls and prints their durations (ns) on one line;
exits at end of input.
"""
import sys
import time

import jitcache

sock, path, name, arch, expr = sys.argv[1:6]
with open(path) as f:
    src = f.read()
c = jitcache.Client(sock)
exprs = (expr,)
for _ in range(200):
    r = c.compile(src, name=name, arch=arch, name_expressions=exprs)
print("ready", r.status, flush=True)
now = time.perf_counter_ns
for line in sys.stdin:
    out = []
    for _ in range(int(line)):
        t0 = now()
        c.compile(src, name=name, arch=arch, name_expressions=exprs)
        out.append(now() - t0)
    print(" ".join(map(str, out)), flush=True)
