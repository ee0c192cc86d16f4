#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Size limits of production C (docs/contributing.md): no file over 800
# lines, no function over 120. A function is a definition whose body opens
# with "{" alone in column 0 and closes with "}" alone in column 0 (kernel
# style, .clang-format).
# usage: check-sizes.py SOURCE_ROOT   (exit 0: within the limits; 1: the list)
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else '.'
FILE_MAX, FUNC_MAX = 800, 120
DIRS = ['common', 'proto', 'core', 'daemon', 'client', 'shim']
bad = []
for d in DIRS:
    for name in sorted(os.listdir(os.path.join(root, d))):
        if not name.endswith('.c'):
            continue
        rel = d + '/' + name
        lines = open(os.path.join(root, rel), errors='replace').read().split('\n')
        if len(lines) - 1 > FILE_MAX:
            bad.append('%s: %d lines (at most %d)' % (rel, len(lines) - 1, FILE_MAX))
        start = None
        for n, line in enumerate(lines, 1):
            if line == '{':
                start = n
            elif line == '}' and start is not None:
                body = n - start - 1
                head = lines[start - 2] if start >= 2 else ''
                m = re.search(r'(\w+)\s*\(', head) or re.search(r'(\w+)\s*\(', lines[start - 3])
                if body > FUNC_MAX:
                    bad.append('%s:%d: %s() is %d lines (at most %d)' %
                               (rel, start, m.group(1) if m else '?', body, FUNC_MAX))
                start = None
for b in bad:
    print(b)
print('check-sizes: %d over the limits' % len(bad))
sys.exit(1 if bad else 0)
