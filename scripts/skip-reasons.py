#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Meson shows a skipped test only as "SKIP exit status 77": this prints, for
# each skipped test of a meson test log (build/meson-logs/testlog.json), the
# reason it printed (its last line that says "skip", else its last line).
# scripts/test.sh runs it after the suite.
# usage: skip-reasons.py TESTLOG.json   (a missing log prints nothing)
import json
import re
import sys

try:
    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
except OSError:
    sys.exit(0)
for line in lines:
    t = json.loads(line)
    if t.get("result") != "SKIP":
        continue
    text = (t.get("stdout") or "") + "\n" + (t.get("stderr") or "")
    out = [l.strip() for l in text.splitlines() if l.strip()]
    why = [l for l in out if re.search(r"skip", l, re.I) and not l.startswith("[")]
    print(f"SKIP {t['name']}: {why[-1] if why else out[-1] if out else 'no reason printed'}")
