# SPDX-License-Identifier: MIT
"""The package's type hints hold (mypy, for the oldest and the newest Python it supports)."""
from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import SRC


@pytest.mark.parametrize("version", ["3.9", "3.12"])
def test_mypy(version):
    if subprocess.run([sys.executable, "-c", "import mypy"], capture_output=True).returncode:
        pytest.skip(f"{sys.executable} has no mypy (Debian: python3-mypy)")
    p = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir=/dev/null", "--ignore-missing-imports",
                        "--python-version", version, "jitcache"], cwd=SRC / "python",
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
