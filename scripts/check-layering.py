#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# The library split (docs/ARCHITECTURE.md, "Layout"): every include of a
# project header is path-qualified, and a directory includes only from itself
# and the libraries below it. The client library's own sources (client_sources
# in client/meson.build) reach neither core/ nor daemon/: only jitcachectl,
# also in client/, runs the core's code offline.
# The local tier (docs/ARCHITECTURE.md, "Tiers") keeps its store and index to
# itself: outside LOCAL_TIER and tests/, no code names a jc__index_* or
# jc__store_* function (a call, or its address) and no file includes
# core/index.h or core/store.h; everything else goes through core/tier.h.
# usage: check-layering.py SOURCE_ROOT   (exit 0: clean; 1: the violations)
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else '.'
LIBS = ['common', 'proto', 'core', 'daemon', 'client', 'shim']
MAY = {
    'common': {'common'},
    'proto': {'common', 'proto'},
    'core': {'common', 'proto', 'core'},
    'daemon': {'common', 'proto', 'core', 'daemon'},
    'client': {'common', 'proto', 'core', 'client'},
    'shim': {'common', 'proto', 'client', 'shim'},
}
CLIENT_LIB_MAY = {'common', 'proto', 'client'}
# The local tier's files: the only ones that use the store and the index.
LOCAL_TIER = re.compile(r'core/(tier\.c|index(_\w+)?\.[ch]|store(_\w+)?\.[ch])$')
PRIVATE_HEADERS = {'core/index.h', 'core/store.h'}
PRIVATE_CALL = re.compile(r'\bjc__(index|store)_\w+')


def code_only(text):
    """text with its comments and string and character literals blanked
    (newlines kept, so line numbers stay)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            j = min(j + 1, n)
            out.append(c + ' ' * (j - i - 2) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return ''.join(out)


with open(os.path.join(root, 'client', 'meson.build')) as f:
    m = re.search(r"client_sources\s*=\s*files\(([^)]*)\)", f.read())
client_lib = set(re.findall(r"'([^']+)'", m.group(1))) if m else set()
if not client_lib:
    print('check-layering: client_sources not found in client/meson.build')
    sys.exit(1)

headers = {}
for d in LIBS:
    p = os.path.join(root, d)
    for name in os.listdir(p) if os.path.isdir(p) else []:
        if name.endswith('.h'):
            headers.setdefault(name, []).append(d)

inc_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
bad = []
for top in LIBS + ['bench', 'tests', 'examples']:
    for dirpath, _, names in os.walk(os.path.join(root, top)):
        for name in sorted(names):
            if not name.endswith(('.c', '.h', '.cu', '.cpp')):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            with open(path, errors='replace') as f:
                text = f.read()
            lines = text.split('\n')
            local = top == 'tests' or LOCAL_TIER.match(rel.replace(os.sep, '/'))
            if not local:
                for n, line in enumerate(code_only(text).split('\n'), 1):
                    for m in PRIVATE_CALL.finditer(line):
                        bad.append('%s:%d: %s: the store and index are the local tier\'s '
                                   '(core/tier.h)' % (rel, n, m.group(0)))
            for n, line in enumerate(lines, 1):
                m = inc_re.match(line)
                if not m:
                    continue
                target = m.group(1)
                if '/' not in target:
                    if target in headers:
                        bad.append('%s:%d: "%s" is not path-qualified (%s/%s)' %
                                   (rel, n, target, headers[target][0], target))
                    continue
                lib = target.split('/')[0]
                if lib not in LIBS:
                    continue
                if not os.path.exists(os.path.join(root, target)):
                    bad.append('%s:%d: "%s" does not exist' % (rel, n, target))
                    continue
                if target in PRIVATE_HEADERS and not local:
                    bad.append('%s:%d: %s is the local tier\'s (core/tier.h)' % (rel, n, target))
                if top in MAY:
                    may = MAY[top]
                    if top == 'client' and name in client_lib:
                        may = CLIENT_LIB_MAY
                    if lib not in may:
                        bad.append('%s:%d: %s/ may not include %s' % (rel, n, top, target))
for b in bad:
    print(b)
print('check-layering: %d violation(s)' % len(bad) if bad else 'check-layering: clean')
sys.exit(1 if bad else 0)
