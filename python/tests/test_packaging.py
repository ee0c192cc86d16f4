# SPDX-License-Identifier: MIT
"""`pip install ./python` gives a package that works against a real daemon."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import SRC, run_python, unique


def test_pip_install_then_compile(tmp_path, daemon):
    # The build backend is python/build_backend.py (standard library only):
    # pip is all it takes, no setuptools, no wheel package.
    if subprocess.run([sys.executable, "-c", "import pip"], capture_output=True).returncode:
        pytest.skip(f"{sys.executable} has no pip (Debian: python3-pip)")
    target = tmp_path / "site"
    # A copy, so that nothing is written into the source tree.
    project = tmp_path / "project"
    shutil.copytree(SRC / "python", project, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    # Offline: nothing comes from an index.
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation",
                        "--no-deps", "--no-index", "--target", str(target), str(project)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (target / "jitcache" / "_client.py").is_file()
    p = run_python("-c",
        "import jitcache\n"
        "assert jitcache.__file__.startswith(" + repr(str(target)) + "), jitcache.__file__\n"
        f"r = jitcache.Client({daemon.sock!r}).compile('__global__ void k() {{}}', arch='sm_90', "
        f"app_abi={unique('pip')!r})\n"
        "print(r.status)\n", env={"PYTHONPATH": str(target)})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "miss"
