#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# No cycles between source files (docs/ARCHITECTURE.md, "Layout"): from the
# built objects (nm), file A depends on file B when A uses a symbol B
# defines; every strongly connected group of two or more files is a cycle.
# usage: check-cycles.py BUILD_DIR   (exit 0: none; 1: the cycles; 77: no objects)
import collections
import os
import re
import subprocess
import sys

build = sys.argv[1] if len(sys.argv) > 1 else 'build'
objs = []
for dirpath, dirnames, names in os.walk(build):
    if not dirpath.endswith('.p'):
        continue
    top = os.path.relpath(dirpath, build).split(os.sep)[0]
    if top not in ('common', 'proto', 'core', 'daemon', 'client', 'shim'):
        continue
    objs += [os.path.join(dirpath, n) for n in names if n.endswith('.c.o')]
# Only the objects of the current build (compile_commands.json): a file
# removed since leaves its object behind.
cc = os.path.join(build, 'compile_commands.json')
if os.path.exists(cc):
    import json
    current = {os.path.normpath(os.path.join(build, e['output'])) for e in json.load(open(cc))
               if 'output' in e}
    objs = [o for o in objs if os.path.normpath(o) in current]
if not objs:
    print('check-cycles: no objects under %s (build first)' % build)
    sys.exit(77)


def src_of(obj):
    # build/daemon/libjc_daemon.a.p/flight.c.o -> daemon/flight.c
    top = os.path.relpath(obj, build).split(os.sep)[0]
    return top + '/' + os.path.basename(obj)[:-2]


defines, uses = {}, collections.defaultdict(set)
for obj in objs:
    out = subprocess.run(['nm', '-P', obj], capture_output=True, text=True, check=True).stdout
    src = src_of(obj)
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if not name.startswith('jc'):
            continue  # the project's own symbols (worker_fs.c interposes libc's)
        if kind == 'U':
            uses[src].add(name)
        elif kind in 'TDBRCV':
            defines.setdefault(name, set()).add(src)

graph = collections.defaultdict(set)
for src, names in uses.items():
    for n in names:
        for d in defines.get(n, ()):
            if d != src:
                graph[src].add(d)

# Tarjan's strongly connected components.
index, low, on, stack, sccs, counter = {}, {}, set(), [], [], [0]
sys.setrecursionlimit(10000)


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in graph[v]:
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            sccs.append(sorted(comp))


for v in sorted(set(graph) | set(uses)):
    if v not in index:
        visit(v)
for comp in sccs:
    edges = ['%s -> %s' % (a, b) for a in comp for b in sorted(graph[a]) if b in comp]
    print('cycle: ' + ', '.join(comp) + '\n  ' + '\n  '.join(edges))
print('check-cycles: %d files, %d cycles' % (len(set(graph) | set(uses)), len(sccs)))
sys.exit(1 if sccs else 0)
