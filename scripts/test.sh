#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the whole test suite (one Meson suite per tests/ directory: unit, fuzz,
# integration, concurrency, crash, isolation, ops, remote, gpu, shim; and
# python; gpu tests skip without a GPU, remote tests without redis-server).
# Installs and builds first. Extra arguments go to `meson test` (e.g.
# --suite unit).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
rc=0
meson test -C build --print-errorlogs "$@" || rc=$?
# Meson shows a skipped test as "SKIP exit status 77" only: say why.
python3 scripts/skip-reasons.py build/meson-logs/testlog.json
exit $rc
