# SPDX-License-Identifier: MIT
"""jitcache for CuPy (tested with CuPy 14.2): CuPy's NVRTC compiles done by jitcached.

    import jitcache.cupy
    jitcache.cupy.install()          # from now on, in this process
    mod = cupy.RawModule(code=src, name_expressions=["saxpy<float>"])
    mod.get_function("saxpy<float>")  # compiled (or served) by the daemon

What :func:`install` changes, through CuPy's own seams in
``cupy.cuda.compiler``:

- the NVRTC step (``_compile_using_nvrtc_no_warning``, which CuPy calls on a
  miss of its kernel cache with the source, options, architecture and name
  expressions) sends the compile to jitcached instead, and hands CuPy the
  artifact and the lowered names the daemon made;
- the compiler probe (``_preprocess``: CuPy compiles an empty program to PTX
  once per process and option set, for its cache key) is a jitcache compile
  too, so a process whose kernels are all hits runs no NVRTC;
- the kernel cache backend (``_set_kernel_cache_backend``) becomes one that
  stores nothing, so every process asks the daemon (a hit is a socket round
  trip) and no second, unmanaged copy of the artifacts builds up in
  ``~/.cupy/kernel_cache``. ``keep_cupy_cache=True`` leaves CuPy's backend.

Why not a backend that stores in jitcache: CuPy's backend is a store of
bytes CuPy compiled itself, looked up by CuPy's own hash (``load(name)``
never sees the source). jitcache's entries are made by the daemon from the
inputs and never uploaded by a client, so that no client can poison
another's cache (see python/README.md, "Design").

Left to CuPy itself: jitify, -rdc (separate compilation, linked with
cudadevrt by CuPy), LTO-IR (``to_ltoir``), HIP, and the nvcc backend.
CuPy is imported only by these functions.
"""
from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
import threading

from . import _client
from ._errors import CompileError

_lock = threading.Lock()
_installed: dict | None = None  # what install() replaced: compile, preprocess, backend
_tmpdir: str | None = None


def _compiler():
    import cupy.cuda.compiler as compiler
    return compiler


def _jitcache_nvrtc(orig, client):
    """A replacement of CuPy's _compile_using_nvrtc_no_warning (same
    signature and result: (artifact bytes, {name expression: lowered name}
    or None)) that asks jitcached."""
    compiler = _compiler()

    def compile_nvrtc(source, options=(), arch=None, filename="kern.cu", name_expressions=None,
                      log_stream=None, cache_in_memory=False, jitify=None, method=None):
        if jitify or method is not None or compiler.runtime.is_hip or \
                compiler._is_cudadevrt_needed(options):
            return orig(source, options, arch, filename, name_expressions, log_stream,
                        cache_in_memory, jitify, method)
        arch_opt, kind = compiler._get_arch_for_options_for_nvrtc(arch)  # "-arch=sm_90", "cubin"
        opts = tuple(options) + ("--device-as-default-execution-space",)
        name = os.path.basename(filename) or "kern.cu"
        c = client or _client.default_client()
        try:
            res = c.compile(source, name=name, arch=arch_opt.split("=", 1)[1], options=opts,
                            name_expressions=name_expressions or (), output=kind)
        except CompileError as e:
            if log_stream is not None:
                log_stream.write(e.log)
            raise compiler.CompileException(e.log, source, name, opts, "nvrtc") from e
        if log_stream is not None and res.log:
            log_stream.write(res.log)
        return bytes(res), (dict(res.lowered_names) if name_expressions else None)

    compile_nvrtc.jitcache = True
    return compile_nvrtc


def _jitcache_preprocess(orig, client):
    """A replacement of CuPy's _preprocess (same signature and result: the
    "//" lines of NVRTC's PTX for source, which CuPy puts in its cache key
    as the compiler's identity) that asks jitcached, so that a process whose
    kernels are all hits runs no NVRTC at all."""
    compiler = _compiler()

    def preprocess(source, options, arch, backend):
        if backend != "nvrtc" or compiler.runtime.is_hip:
            return orig(source, options, arch, backend)
        c = client or _client.default_client()
        try:
            res = c.compile(source, name="default_program", arch=f"compute_{arch}",
                            options=tuple(options), output="ptx")
        except CompileError as e:
            raise compiler.CompileException(e.log, source, "default_program", options,
                                            "nvrtc") from e
        return "\n".join(x for x in bytes(res).decode().splitlines() if x.startswith("//"))

    return preprocess


def _no_store_backend(compiler):
    class JitcacheNoStoreBackend(compiler._KernelCacheBackend):
        """CuPy kernel cache backend that keeps nothing (jitcached is the cache)."""

        def load(self, name: str):
            return None

        def save(self, name: str, cubin: bytes, source: str) -> None:
            pass

    return JitcacheNoStoreBackend()


def install(client: _client.Client | None = None, *, keep_cupy_cache: bool = False) -> None:
    """Routes this process's CuPy NVRTC compiles to jitcached.

    Args:
        client: the Client to use (None: each thread's
            :func:`jitcache.default_client`).
        keep_cupy_cache: leave CuPy's own kernel cache backend in place
            (then only CuPy's misses reach the daemon).

    Calling it again replaces the settings. Thread-safe.
    """
    global _installed
    compiler = _compiler()
    with _lock:
        if _installed is not None:
            _restore(compiler, _installed)
        state = {"compile": compiler._compile_using_nvrtc_no_warning,
                 "preprocess": compiler._preprocess,
                 "backend": compiler._kernel_cache_backend}
        compiler._compile_using_nvrtc_no_warning = _jitcache_nvrtc(state["compile"], client)
        compiler._preprocess = _jitcache_preprocess(state["preprocess"], client)
        if not keep_cupy_cache:
            compiler._set_kernel_cache_backend(_no_store_backend(compiler))
        _installed = state


def _restore(compiler, state: dict) -> None:
    compiler._compile_using_nvrtc_no_warning = state["compile"]
    compiler._preprocess = state["preprocess"]
    compiler._set_kernel_cache_backend(state["backend"])


def uninstall() -> None:
    """Gives CuPy back its own NVRTC step and kernel cache (idempotent)."""
    global _installed
    with _lock:
        if _installed is not None:
            _restore(_compiler(), _installed)
            _installed = None


def is_installed() -> bool:
    return _installed is not None


def _private_dir() -> str:
    global _tmpdir
    with _lock:
        if _tmpdir is None:
            _tmpdir = tempfile.mkdtemp(prefix="jitcache-cupy-")  # 0700
            atexit.register(shutil.rmtree, _tmpdir, True)
        return _tmpdir


def raw_module(result: _client.Result):
    """A ``cupy.RawModule`` of a Result's cubin or PTX.

    CuPy loads a module from code or from a file path only
    (``RawModule(path=...)``), so the artifact is written once to a private
    directory of this process (removed at exit), named by its content hash.
    ``get_function`` and ``get_global`` take the name expressions of the
    request (mapped to the lowered names) as well as plain symbol names.
    """
    if result.output not in ("cubin", "ptx"):
        raise ValueError(f"CuPy loads cubin or PTX, not {result.output}")
    data = bytes(result)
    path = os.path.join(_private_dir(), hashlib.sha256(data).hexdigest()[:32] + "." + result.output)
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    mod = _raw_module_class()(path=path)
    mod._jc_lowered = dict(result.lowered_names)
    return mod


_raw_module_cls = None


def _raw_module_class():
    global _raw_module_cls
    if _raw_module_cls is None:
        import cupy

        class JitcacheRawModule(cupy.RawModule):
            """RawModule of a jitcache Result; names map through its lowered names."""

            def get_function(self, name: str):
                return super().get_function(self._jc_lowered.get(name, name))

            def get_global(self, name: str):
                return super().get_global(self._jc_lowered.get(name, name))

        _raw_module_cls = JitcacheRawModule
    return _raw_module_cls
