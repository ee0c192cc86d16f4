# SPDX-License-Identifier: MIT
"""The PEP 517 build backend of the pure-Python package ``jitcache``.

Standard library only, so ``pip install --no-build-isolation ./python`` works
offline in any virtual environment: no setuptools, no ``wheel`` package (a
plain venv's setuptools fails with ``invalid command 'bdist_wheel'``).

The wheel holds ``jitcache/*.py`` and a generated ``jitcache/_build_config.py``
naming the directory of libjitcache-client as ``pkg-config jitcache-client``
gives it at build time (set ``PKG_CONFIG_PATH`` for a private prefix); the
package loads the library from there when the dynamic loader does not find it
(``jitcache/_lib.py``). Without pkg-config or the C library the wheel is built
without it, and ``$JITCACHE_CLIENT_LIB`` or the loader's search must supply it.
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import subprocess
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "jitcache"
TAG = "py3-none-any"


def _project() -> dict:
    """The [project] table of pyproject.toml (name, version, description...)."""
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        data = f.read()
    try:
        import tomllib  # Python 3.11+
        return tomllib.loads(data.decode())["project"]
    except ImportError:  # 3.9, 3.10: the plain `key = "string"` lines of [project]
        text = data.decode().split("[project]", 1)[1].split("\n[", 1)[0]
        return dict(re.findall(r'^([a-z-]+)\s*=\s*"([^"]*)"\s*$', text, re.M))


def _libdir() -> str | None:
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "jitcache-client"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    libdir = out.stdout.strip()
    return libdir if out.returncode == 0 and libdir else None


def _metadata(p: dict) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p.get('description', '')}", "License: MIT"]
    if p.get("requires-python"):
        lines.append(f"Requires-Python: {p['requires-python']}")
    for c in p.get("classifiers", []) if isinstance(p.get("classifiers"), list) else []:
        lines.append(f"Classifier: {c}")
    for extra, reqs in (p.get("optional-dependencies") or {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    readme = os.path.join(HERE, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _dist_info(p: dict) -> str:
    return f"{p['name']}-{p['version']}.dist-info"


def _files(p: dict) -> dict[str, bytes]:
    """Archive name -> content: the package and its dist-info, RECORD last."""
    files = {}
    pkg = os.path.join(HERE, PACKAGE)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            with open(os.path.join(pkg, name), "rb") as f:
                files[f"{PACKAGE}/{name}"] = f.read()
    libdir = _libdir()
    if libdir:
        files[f"{PACKAGE}/_build_config.py"] = (
            "# SPDX-License-Identifier: MIT\n"
            "# Written by python/build_backend.py: where pkg-config found libjitcache-client.\n"
            f"LIBDIR = {libdir!r}\n").encode()
    di = _dist_info(p)
    files[f"{di}/METADATA"] = _metadata(p).encode()
    files[f"{di}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: {PACKAGE}-build-backend\n"
                            f"Root-Is-Purelib: true\nTag: {TAG}\n").encode()
    files[f"{di}/top_level.txt"] = f"{PACKAGE}\n".encode()
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{di}/RECORD,,")
    files[f"{di}/RECORD"] = ("\n".join(record) + "\n").encode()
    return files


# --- PEP 517 hooks ---------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p = _project()
    di = os.path.join(metadata_directory, _dist_info(p))
    os.makedirs(di, exist_ok=True)
    with open(os.path.join(di, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata(p))
    return _dist_info(p)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    name = f"{p['name']}-{p['version']}-{TAG}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in _files(p).items():
            z.writestr(zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return name


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = f"{p['name']}-{p['version']}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ["pyproject.toml", "build_backend.py", "README.md"] + [
                f"{PACKAGE}/{n}" for n in sorted(os.listdir(os.path.join(HERE, PACKAGE)))
                if n.endswith(".py")]:
            path = os.path.join(HERE, rel)
            if os.path.exists(path):
                t.add(path, arcname=f"{base}/{rel}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata(p).encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
