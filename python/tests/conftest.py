# SPDX-License-Identifier: MIT
"""Fixtures: a real jitcached on a temporary cache directory.

Paths come from the environment Meson gives the test (tests/meson.build:
JITCACHED, JITCACHE_WORKER, JITCACHECTL, JITCACHE_CLIENT_LIB, PYTHONPATH), else from
./build of the source tree, so that `python3 -m pytest python/tests` also
works by hand after ./scripts/setup.sh.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("JC_BUILD_ROOT", SRC / "build"))
os.environ.setdefault("JITCACHED", str(BUILD / "daemon" / "jitcached"))
os.environ.setdefault("JITCACHE_WORKER", str(BUILD / "daemon" / "jitcache-worker"))
os.environ.setdefault("JITCACHECTL", str(BUILD / "client" / "jitcachectl"))
os.environ.setdefault("JITCACHE_CLIENT_LIB", str(BUILD / "client" / "libjitcache-client.so.0"))
sys.path.insert(0, str(SRC / "python"))

import jitcache  # noqa: E402

EXAMPLES = SRC / "examples"
SAXPY = (EXAMPLES / "saxpy.cu").read_text()


class Daemon:
    """One jitcached on root/cache, listening on sock (default root/sock), log in
    root/daemon.log."""

    def __init__(self, root: Path, *flags: str, env: dict | None = None, sock: str | None = None):
        self.root = root
        self.sock = sock or str(root / "sock")
        self.cache = root / "cache"
        self.log = root / "daemon.log"
        (root / "empty.conf").write_text("")
        self.argv = [os.environ["JITCACHED"], "--cache-dir", str(self.cache), "--socket",
                     self.sock, "--config", str(root / "empty.conf"), "--log-level", "info",
                     *flags]
        self.env = dict(os.environ, **(env or {}))
        self.proc: subprocess.Popen | None = None

    def start(self) -> Daemon:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=log, env=self.env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jitcached exited ({self.proc.returncode}): "
                                   f"{self.log.read_text()}")
            try:
                jitcache.Client(self.sock, fallback="error").close()
                return self
            except jitcache.Unavailable:
                time.sleep(0.02)
        raise RuntimeError(f"jitcached did not answer in 30 s: {self.log.read_text()}")

    def stop(self) -> int:
        """SIGTERM and wait; the exit status."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(30)
        self.proc = None
        return rc

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """A daemon shared by the tests of one module (tests use distinct keys)."""
    d = Daemon(tmp_path_factory.mktemp("jitcached")).start()
    yield d
    assert d.stop() == 0, d.log.read_text()


@pytest.fixture
def own_daemon(tmp_path):
    """A daemon of the test's own (for tests that stop or pause it)."""
    d = Daemon(tmp_path).start()
    yield d
    d.kill()


@pytest.fixture
def client(daemon):
    with jitcache.Client(daemon.sock) as c:
        yield c


def unique(tag: str) -> str:
    """A key-changing suffix unique to this run (an app ABI string)."""
    return f"pytest/{tag}/{os.getpid()}/{time.monotonic_ns()}"


def run_python(*argv: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs this interpreter with argv ("-c", CODE or SCRIPT, ARGS...) in a
    fresh process that finds the package of this tree first."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC / "python"), e.get("PYTHONPATH")]))
    e.update(env or {})
    return subprocess.run([sys.executable, *argv], env=e, capture_output=True, text=True,
                          timeout=timeout)
