# SPDX-License-Identifier: MIT
"""On a GPU (skipped without CuPy, cuda.core or a device): SAXPY through the
CuPy hook, the CuPy helper, the cuda.core Program and the cuda.core helper;
each kernel runs and is checked, and a second fresh process is served by
the daemon (a hit, no compile). Run on the GPU machine by
scripts/gpu-run.sh with its Python (JC_PYTHON)."""
from __future__ import annotations

import json
import os

import pytest
from conftest import EXAMPLES, SRC, run_python

SCRIPT = os.path.join(os.path.dirname(__file__), "gpu_saxpy.py")


def _probe(code: str) -> str | None:
    p = run_python("-c", code)
    return None if p.returncode == 0 else (p.stderr.strip().splitlines() or ["failed"])[-1]


def _need(mode: str) -> None:
    why = _probe("import cupy; assert cupy.cuda.runtime.getDeviceCount() > 0")
    if why:
        pytest.skip(f"no CuPy with a CUDA device: {why}")
    if mode.startswith("core") and (why := _probe("import cuda.core; cuda.core.Device(0)")):
        pytest.skip(f"no cuda.core with a CUDA device: {why}")


def _run(mode: str, sock: str, cupy_cache) -> dict:
    p = run_python(SCRIPT, mode, sock, str(EXAMPLES / "saxpy.cu"),
                   env={"CUPY_CACHE_DIR": str(cupy_cache)}, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    print(out)  # the versions tested with, in the test log
    return out


@pytest.mark.parametrize("mode", ["cupy-hook", "cupy-helper", "core-program", "core-helper"])
def test_saxpy_runs_and_a_fresh_process_is_served(request, tmp_path, mode):
    _need(mode)
    own_daemon = request.getfixturevalue("own_daemon")
    cupy_cache = tmp_path / "cupy-cache"
    first = _run(mode, own_daemon.sock, cupy_cache)
    second = _run(mode, own_daemon.sock, cupy_cache)
    assert first["ok"] and second["ok"], (first, second)
    if mode != "cupy-hook":
        assert (first["misses"], second["misses"], second["hits"]) == (1, 0, 1), (first, second)
        assert (first["status"], second["status"]) == ("miss", "hit")
    else:
        # SAXPY and CuPy's compiler probe; the second process: all hits, and
        # CuPy's own kernel cache stored nothing.
        assert first["misses"] == 2 and second["misses"] == 0, (first, second)
        assert second["hits"] == first["misses"] + first["hits"], (first, second)
        assert not any(cupy_cache.rglob("*.cubin")), list(cupy_cache.rglob("*"))


def _hooked(request, tmp_path, body: str, runs: int = 1) -> list[list[str]]:
    """Runs body in fresh processes with jitcache.cupy installed on a daemon
    of the test's own (as `c`); the words each printed."""
    _need("cupy")
    own_daemon = request.getfixturevalue("own_daemon")
    code = ("import io, cupy, jitcache, jitcache.cupy\n"
            f"c = jitcache.Client({own_daemon.sock!r})\n"
            "jitcache.cupy.install(c)\n" + body)
    out = []
    for _ in range(runs):
        p = run_python("-c", code, env={"CUPY_CACHE_DIR": str(tmp_path / "cupy-cache")},
                       timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr
        out.append(p.stdout.split())
    return out


def test_cupy_hook_compile_error_and_uninstall(request, tmp_path):
    (words,) = _hooked(request, tmp_path, """
from cupy.cuda.compiler import CompileException
log = io.StringIO()
try:
    cupy.RawModule(code='__global__ void k() { nope(); }').compile(log_stream=log)
except CompileException as e:
    print('error', 'nope' in str(e), 'nope' in log.getvalue())
n = c.stats()['misses']
jitcache.cupy.uninstall()
cupy.RawModule(code='extern "C" __global__ void k2(int *p) { *p = 1; }').get_function('k2')
print('after-uninstall', c.stats()['misses'] - n, jitcache.cupy.is_installed())
""")
    assert words == ["error", "True", "True", "after-uninstall", "0", "False"]


def test_cupy_own_kernels_through_the_hook(request, tmp_path):
    """CuPy's elementwise and reduction kernels (its headers, CCCL, -I
    directories) compile through the hook too, and a fresh process gets
    them all from the daemon."""
    runs = _hooked(request, tmp_path, """
before = c.stats()
x = cupy.arange(1000, dtype=cupy.float32)
total = float((2 * x + 1).sum())
after = c.stats()
print(total == 1000.0 ** 2, after['misses'] - before['misses'], after['hits'] - before['hits'])
""", runs=2)
    (ok1, miss1, hit1), (ok2, miss2, hit2) = runs
    assert ok1 == ok2 == "True", runs
    assert int(miss1) >= 2 and int(miss2) == 0 and int(hit2) == int(miss1) + int(hit1), runs


def test_the_readme_example(request, tmp_path):
    """python/README.md's CuPy example, as written, against a daemon of the
    test's own (found through $JITCACHE_SOCKET); run twice: miss, then hit."""
    _need("cupy")
    own_daemon = request.getfixturevalue("own_daemon")
    text = (SRC / "python" / "README.md").read_text()
    example = text.split("## CuPy", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    env = {"JITCACHE_SOCKET": own_daemon.sock, "JITCACHE_FALLBACK": "error",
           "JITCACHE_AUTOSTART": "0", "CUPY_CACHE_DIR": str(tmp_path / "cupy-cache")}
    hits = []
    for _ in range(2):
        p = run_python("-c", example, env=env, timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr
        assert p.stdout.endswith(" hits so far\n"), p.stdout
        hits.append(int(p.stdout.split()[-4]))
    assert hits[1] > hits[0]
