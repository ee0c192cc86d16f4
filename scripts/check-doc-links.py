#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Every relative link of README.md and docs/*.md resolves: the file (or
# directory) exists, and a #fragment names a heading of the target page, with
# anchors made as GitHub makes them (lower case, punctuation dropped, spaces
# to '-', a repeated heading gets -1, -2...). Links inside code are not links.
# README.md must also stay at most 250 lines and keep the two set-up commands,
# and docs/configuration.md must name every JITCACHE_* variable the programs
# and the Python package read.
# usage: check-doc-links.py SOURCE_ROOT   (exit 0: clean; 1: what is broken)
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else '.'
README_MAX_LINES = 250
SETUP_LINES = ['./scripts/demo.sh', './scripts/test.sh']


def strip_code(text):
    """The text without fenced blocks and inline code, line numbers kept."""
    out, fence = [], False
    for line in text.split('\n'):
        if re.match(r'^\s*(```|~~~)', line):
            fence = not fence
            out.append('')
            continue
        out.append('' if fence else re.sub(r'`[^`]*`', '', line))
    return out


def anchors(path):
    seen, result = {}, set()
    with open(path, encoding='utf-8') as f:
        text = f.read()
    fence = False
    for line in text.split('\n'):
        if re.match(r'^\s*(```|~~~)', line):
            fence = not fence
            continue
        m = None if fence else re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
        if not m:
            continue
        title = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', m.group(1))
        slug = re.sub(r'[^\w\- ]', '', title.lower().replace('`', '')).replace(' ', '-')
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        result.add(slug if n == 0 else f'{slug}-{n}')
    return result


def pages():
    yield os.path.join(root, 'README.md')
    docs = os.path.join(root, 'docs')
    for name in sorted(os.listdir(docs)):
        if name.endswith('.md'):
            yield os.path.join(docs, name)


errors = []
checked = 0
for page in pages():
    rel = os.path.relpath(page, root)
    with open(page, encoding='utf-8') as f:
        lines = strip_code(f.read())
    for no, line in enumerate(lines, 1):
        for target in re.findall(r'\]\(([^)\s]+)(?:\s+"[^"]*")?\)', line):
            if re.match(r'^[a-z][a-z0-9+.-]*:', target):  # http:, mailto:, ...
                continue
            checked += 1
            path, _, frag = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest):
                errors.append(f'{rel}:{no}: {target}: no file {os.path.relpath(dest, root)}')
            elif frag and (not dest.endswith('.md') or frag not in anchors(dest)):
                errors.append(f'{rel}:{no}: {target}: no heading #{frag} in {os.path.relpath(dest, root)}')

readme = os.path.join(root, 'README.md')
with open(readme, encoding='utf-8') as f:
    text = f.read()
n = text.count('\n')
if n > README_MAX_LINES:
    errors.append(f'README.md: {n} lines, more than {README_MAX_LINES}: move sections into docs/')
for cmd in SETUP_LINES:
    if not re.search(r'^' + re.escape(cmd) + r'\s', text, re.M):
        errors.append(f'README.md: no line starting with {cmd} (CI runs the test command from it)')

# Every JITCACHE_* name in the sources (header guards aside) is in the table.
with open(os.path.join(root, 'docs', 'configuration.md'), encoding='utf-8') as f:
    conf = f.read()
names = set()
for top in ['common', 'proto', 'core', 'daemon', 'client', 'shim', 'include', os.path.join('python', 'jitcache')]:
    for dirpath, _, files in os.walk(os.path.join(root, top)):
        for name in files:
            if name.endswith(('.c', '.h', '.py', '.in', '.sh')):
                with open(os.path.join(dirpath, name), encoding='utf-8', errors='replace') as f:
                    names |= set(re.findall(r'\bJITCACHE_[A-Z0-9_]*[A-Z0-9]\b', f.read()))
for var in sorted(names):
    if not var.endswith('_H') and f'`{var}`' not in conf:
        errors.append(f'docs/configuration.md: the environment variable {var} is read but not documented')

for e in errors:
    print(e)
print(f'check-doc-links: {checked} links checked, {len(errors)} problems')
sys.exit(1 if errors else 0)
