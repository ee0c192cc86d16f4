# SPDX-License-Identifier: MIT
"""jitcache.Client and jitcache.Result: ctypes over libjitcache-client."""
from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from typing import NamedTuple, Union

from . import _errors
from . import _lib as L

Text = Union[str, bytes]
LinkInput = tuple[str, str, bytes]  # (kind, name, data); kind as in LINK_KINDS
LINK_KINDS = tuple(L.LINK_INPUTS)


class Timings(NamedTuple):
    """Times of one result, in nanoseconds (jc_timing)."""

    total_ns: int    #: the compile call, client side
    server_ns: int   #: inside the daemon, including the wait for a compile
    compile_ns: int  #: NVRTC/nvJitLink time when the entry was compiled
    #: client side, checking include trees it reads on disk (0: watched, unchanged)
    includes_ns: int


class _CRequest:
    """Owns one jc_request (kept with its results for report_load_failure)."""

    __slots__ = ("ptr", "_free")

    def __init__(self, ptr: int | None):
        self.ptr = ptr
        self._free = L.lib().jc_request_free  # kept: usable during interpreter exit

    def __del__(self) -> None:
        if self.ptr:
            self._free(self.ptr)
            self.ptr = None


class _CResult:
    """Owns one jc_result; frees it when the last Python reference goes.

    The Result and every memoryview of its data hold a reference to this, so
    the C bytes stay valid as long as anything can still read them."""

    __slots__ = ("ptr", "req", "_free")

    def __init__(self, ptr: int | None, req: _CRequest):
        self.ptr = ptr
        self.req = req
        self._free = L.lib().jc_result_free

    def __del__(self) -> None:
        if self.ptr:
            self._free(self.ptr)
            self.ptr = None


class Result:
    """The artifact of a compile or link, with its log and lowered names.

    Attributes:
        data: the artifact (cubin, PTX or LTO-IR) as a read-only
            ``memoryview`` of bytes over the library's own buffer (no copy;
            it stays valid as long as the view or this Result lives).
            ``bytes(result)`` makes a copy. Empty for a failed compile.
        status: ``"hit"``, ``"remote-hit"`` (served from the daemon's remote
            tier: another machine's compile), ``"miss"`` (compiled for this
            request), ``"negative-hit"`` (a cached failure), ``"joined"``
            (waited on another client's compile of the same key) or
            ``"uncached"`` (compiled, not stored: in-process without a
            daemon, or a result the daemon would not store).
        lowered_names: name expression -> lowered (mangled) name.
        log: the NVRTC / nvJitLink log ("" when there was none).
        key: the cache key, 32 lowercase hex digits.
        output: ``"cubin"``, ``"ptx"``, ``"ltoir"`` or ``"fatbin"``.
        timings: a :class:`Timings`.

    The last five are read from the C result when first asked for (a hit
    from Python costs little more than one from C). Immutable; may be
    shared by threads.
    """

    __slots__ = ("data", "status", "_c", "_names", "_log", "_key", "_output", "_timings")
    _names: dict[str, str] | None
    _log: str | None
    _key: str | None
    _output: str | None
    _timings: Timings | None

    def __init__(self, cres: _CResult):
        lib = L.lib()
        size = ctypes.c_size_t(0)
        addr = lib.jc_result_data(cres.ptr, ctypes.byref(size))
        if addr and size.value:
            arr = (ctypes.c_ubyte * size.value).from_address(addr)
            arr._jc_owner = cres  # type: ignore[attr-defined]  # view -> arr -> C result
            self.data = memoryview(arr).cast("B").toreadonly()
        else:
            self.data = memoryview(b"")
        st = lib.jc_result_cache_status(cres.ptr)
        self.status: str = L.CACHE_STATUS.get(st, f"status-{st}")
        self._c = cres
        self._names = self._log = self._key = self._output = None
        self._timings = None

    @property
    def lowered_names(self) -> dict[str, str]:
        if self._names is None:
            lib, p = L.lib(), self._c.ptr
            names = {}
            expr, lowered = ctypes.c_char_p(), ctypes.c_char_p()
            for i in range(lib.jc_result_lowered_count(p)):
                if lib.jc_result_lowered_at(p, i, ctypes.byref(expr), ctypes.byref(lowered)) == 0:
                    names[(expr.value or b"").decode()] = (lowered.value or b"").decode()
            self._names = names
        return dict(self._names)

    @property
    def log(self) -> str:
        if self._log is None:
            self._log = (L.lib().jc_result_log(self._c.ptr) or b"").decode("utf-8",
                                                                            "backslashreplace")
        return self._log

    @property
    def key(self) -> str:
        if self._key is None:
            self._key = (L.lib().jc_result_key(self._c.ptr) or b"").decode()
        return self._key

    @property
    def output(self) -> str:
        if self._output is None:
            out = L.lib().jc_result_output(self._c.ptr)
            self._output = next((k for k, v in L.OUTPUTS.items() if v == out), f"output-{out}")
        return self._output

    @property
    def timings(self) -> Timings:
        if self._timings is None:
            lib, p = L.lib(), self._c.ptr
            self._timings = Timings(*(lib.jc_result_time_ns(p, w) for w in
                                      (L.JC_TIME_TOTAL, L.JC_TIME_SERVER, L.JC_TIME_COMPILE,
                                       L.JC_TIME_INCLUDES)))
        return self._timings

    def __bytes__(self) -> bytes:
        return self.data.tobytes()

    def __len__(self) -> int:
        return self.data.nbytes

    def __repr__(self) -> str:
        return (f"<jitcache.Result {self.status} {self.output} {self.data.nbytes} bytes "
                f"key={self.key}>")


def _b(s: Text) -> bytes:
    return s if isinstance(s, bytes) else s.encode()


_log = logging.getLogger("jitcache")
_LEVELS = {L.JC_LOG_WARNING: logging.WARNING, L.JC_LOG_NOTICE: logging.INFO,
           L.JC_LOG_INFO: logging.DEBUG}


@L.LOG_CB
def _log_cb(ctx, level, message):
    """The library's messages (e.g. the first in-process fallback) go to the
    "jitcache" logger."""
    _log.log(_LEVELS.get(level, logging.INFO), "%s", message.decode("utf-8", "replace"))


_FALLBACKS = {"compile": L.JC_FALLBACK_COMPILE, "error": L.JC_FALLBACK_ERROR}
_cuda_ready = False


def _cuda_init() -> None:
    """cuInit(0), once: jc_cuda_request_set_target needs an initialised
    driver. Without one the library's own call says why it failed."""
    global _cuda_ready
    if not _cuda_ready:
        try:
            ctypes.CDLL("libcuda.so.1").cuInit(0)
        except OSError:
            return
        _cuda_ready = True


class Client:
    """A client of jitcached (``jc_client``), found as the C library finds one.

    Args:
        socket: only the daemon on this socket. None: the library's search
            order ($JITCACHE_SOCKET, the per-user socket, the system socket,
            then an auto-started per-user daemon; docs/getting-started.md, "The client never fails the application").
        timeout: seconds to wait for each answer (None: no bound; a compile
            takes as long as it takes, up to the daemon's --compile-timeout).
            Past it the call raises :class:`Timeout`; the library drops that
            connection and the next call connects afresh.
        cache_dir: only the daemon of this cache directory (found through
            the socket path file it writes), or one auto-started on it.
        autostart: start a per-user daemon when none answers (None:
            $JITCACHE_AUTOSTART, else yes).
        fallback: "compile" (run NVRTC in this process when no daemon can be
            had: results have status "uncached") or "error" (raise
            :class:`Unavailable`); None: $JITCACHE_FALLBACK, else "compile".

    Opens at construction. A broken connection is mended by the library
    (reconnect and resend). Use as a context manager or call :meth:`close`.
    A Client may be shared by threads: calls on it are serialised (the C
    handle is not thread-safe); use one Client per thread to compile in
    parallel. The GIL is released while waiting on the daemon. After
    ``fork()`` the child opens a connection of its own on first use.
    The library's messages go to the ``logging`` logger "jitcache".
    """

    def __init__(self, socket: str | os.PathLike | None = None, timeout: float | None = None,
                 *, cache_dir: str | os.PathLike | None = None, autostart: bool | None = None,
                 fallback: str | None = None):
        if fallback is not None and fallback not in _FALLBACKS:
            raise ValueError(f"fallback must be 'compile' or 'error', not {fallback!r}")
        self._settings = (None if socket is None else os.fsencode(socket),
                          None if cache_dir is None else os.fsencode(cache_dir),
                          -1 if autostart is None else int(bool(autostart)),
                          0 if fallback is None else _FALLBACKS[fallback])
        self._timeout_ms = -1 if timeout is None else max(0, int(timeout * 1000))
        self._lock = threading.Lock()
        self._h: int | None = None
        self._pid = 0
        self._open()

    def _open(self) -> None:
        lib = L.lib()
        socket, cache_dir, autostart, fallback = self._settings
        o = ctypes.c_void_p()
        if lib.jc_options_new(ctypes.byref(o)) != 0:
            raise MemoryError("jc_options_new")
        try:
            rc = lib.jc_options_set_log(o, _log_cb, None)
            if socket is not None:
                rc = rc or lib.jc_options_set_socket(o, socket)
            if cache_dir is not None:
                rc = rc or lib.jc_options_set_cache_dir(o, cache_dir)
            rc = rc or lib.jc_options_set_autostart(o, autostart)
            if fallback:
                rc = rc or lib.jc_options_set_fallback(o, fallback)
            if rc != 0:
                raise _errors.from_code(rc, f"client options: {lib.jc_strerror(rc).decode()}")
            h = ctypes.c_void_p()
            rc = lib.jc_client_open(o, ctypes.byref(h))
        finally:
            lib.jc_options_free(o)
        if rc != 0:
            raise _errors.from_code(rc, lib.jc_client_errmsg(None).decode())
        if self._timeout_ms >= 0:
            lib.jc_client_set_timeout(h, self._timeout_ms)
        self._h, self._pid = h.value, os.getpid()
        self._targets: dict[int, str] = {}  # device -> resolved arch
        self._close_fn = lib.jc_client_close  # kept: usable during interpreter exit

    def _handle(self) -> int:
        """The C handle (the caller holds the lock); a fresh one after fork()."""
        if self._h is None:
            raise _errors.Error(None, "the jitcache.Client is closed")
        if self._pid != os.getpid():  # the parent's connection is the parent's
            self._close_fn(self._h)
            self._h = None
            self._open()
        assert self._h is not None
        return self._h

    def _raise(self, rc: int) -> None:
        raise _errors.from_code(rc, L.lib().jc_client_errmsg(self._h).decode())

    @property
    def socket(self) -> str | None:
        """The socket of the daemon in use, or None while compiling in-process."""
        with self._lock:
            s = L.lib().jc_client_socket(self._handle())
        return None if s is None else os.fsdecode(s)

    def close(self) -> None:
        """Closes the client (idempotent). Results stay valid."""
        with self._lock:
            if self._h is not None:
                self._close_fn(self._h)
                self._h = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_h", None) is not None:
            self.close()

    def compile(self, source: Text | None, *, name: str = "kernel.cu", arch: str | None = None,
                options: Iterable[str] = (), headers: Mapping[str, Text] = {},
                name_expressions: Iterable[str] = (), output: str = "cubin",
                app_abi: str | None = None, link: Iterable[LinkInput] = (),
                link_options: Iterable[str] = (), device: int = 0) -> Result:
        """Compiles CUDA C++ ``source`` (str or UTF-8 bytes), or links, through the daemon.

        ``source`` None with ``link`` inputs: a link-only job.

        Args:
            name: NVRTC's program name (it enters the key).
            arch: "sm_90", "sm_90a", "compute_90" (PTX). None: the target
                for CUDA ``device`` (cuDeviceGetAttribute against the daemon's
                NVRTC, asked once per device; a PTX target, and PTX output,
                when NVRTC does not know the device), which needs the CUDA
                driver; see ``Result.output``.
            options: NVRTC options in order ("-std=c++17", "-DN=4"). Include
                directories (-IDIR, -I DIR, --include-path=DIR; relative ones
                against the working directory) are read for the headers the
                compile may include, whose content enters the key.
            headers: in-memory headers, name -> text, as NVRTC's headers.
            name_expressions: expressions ("saxpy<float>") whose lowered
                names the result holds.
            output: "cubin", "ptx", "ltoir" or "fatbin" (arch a target list).
            app_abi: the application's ABI/schema version (enters the key).
            link: nvJitLink inputs, (kind, name, data) with kind in
                LINK_KINDS; with a source the job is compile to LTO-IR + link.
            link_options: nvJitLink options.

        Returns a :class:`Result`. Raises :class:`CompileError` (with the
        log) when the compile failed, :class:`InvalidRequest`,
        :class:`Timeout`, :class:`Unavailable`, or :class:`Error`.
        """
        lib = L.lib()
        if output not in L.OUTPUTS:
            raise ValueError(f"output must be one of {', '.join(L.OUTPUTS)}, not {output!r}")
        for what, seq in (("options", options), ("name_expressions", name_expressions),
                          ("link_options", link_options)):
            if isinstance(seq, (str, bytes)):
                raise TypeError(f"{what} must be a sequence of strings, not one string")
        r = ctypes.c_void_p()
        if lib.jc_request_new(ctypes.byref(r)) != 0:
            raise MemoryError("jc_request_new")
        req = _CRequest(r.value)
        with self._lock:
            self._build(r, source, name, arch, options, headers, name_expressions, output,
                        app_abi, link, link_options, device)
            out = ctypes.c_void_p()
            rc = lib.jc_compile(self._handle(), r, ctypes.byref(out))
            return self._result(rc, out, req, name)

    def _result(self, rc: int, out: ctypes.c_void_p, req: _CRequest, name: str) -> Result:
        """The Result of a jc_compile-like call (the caller holds the lock)."""
        if out.value is None:
            self._raise(rc)
        res = Result(_CResult(out.value, req))
        if rc == L.JC_ECOMPILE:
            raise _errors.CompileError(f"compile of {name} failed ({res.status}):\n{res.log}", res)
        if rc != 0:
            self._raise(rc)
        return res

    def report_load_failure(self, result: Result, reason: str | None = None) -> Result:
        """Tells the daemon that result's artifact could not be used (e.g.
        the driver refused to load it, with reason) and returns a freshly
        compiled one: the daemon quarantines the old object and compiles
        afresh, a bounded number of times per key (jc_report_load_failure).
        Raises as :meth:`compile` does."""
        lib = L.lib()
        out = ctypes.c_void_p()
        with self._lock:
            rc = lib.jc_report_load_failure(self._handle(), result._c.req.ptr, result._c.ptr,
                                            None if reason is None else _b(reason),
                                            ctypes.byref(out))
            return self._result(rc, out, result._c.req, "the reported artifact")

    def _build(self, r, source, name, arch, options, headers, name_expressions, output,
               app_abi, link, link_options, device) -> None:
        """Fills request r (the caller holds the lock: arch=None talks to the daemon)."""
        lib = L.lib()

        def check(rc: int, what: str) -> None:
            if rc != 0:
                raise _errors.from_code(rc, f"{what}: {lib.jc_strerror(rc).decode()}")

        if source is not None:
            src = _b(source)
            check(lib.jc_request_set_source(r, _b(name), src, len(src)), "source")
        if arch is None:
            arch = self._target(device)
            if arch.startswith("compute_") and output == "cubin":
                output = "ptx"  # what the device can load from this NVRTC
        check(lib.jc_request_set_arch(r, _b(arch)), "arch")
        if output != "cubin":  # jc_request_new's default
            check(lib.jc_request_set_output(r, L.OUTPUTS[output]), "output")
        for o in options:
            check(lib.jc_request_add_option(r, _b(o)), f"option {o!r}")
        for hname, text in headers.items():
            t = _b(text)
            check(lib.jc_request_add_header(r, _b(hname), t, len(t)), f"header {hname!r}")
        for e in name_expressions:
            check(lib.jc_request_add_name_expression(r, _b(e)), f"name expression {e!r}")
        for kind, lname, data in link:
            if kind not in L.LINK_INPUTS:
                raise ValueError(f"link input kind must be one of {', '.join(LINK_KINDS)}, "
                                 f"not {kind!r}")
            d = bytes(data)
            check(lib.jc_request_add_link_input(r, L.LINK_INPUTS[kind], _b(lname), d, len(d)),
                  f"link input {lname!r}")
        for o in link_options:
            check(lib.jc_request_add_link_option(r, _b(o)), f"link option {o!r}")
        if app_abi is not None:
            check(lib.jc_request_set_app_abi(r, _b(app_abi)), "app_abi")

    def _target(self, device: int) -> str:
        """The target for CUDA device `device` (jc_cuda_resolve_target: its
        compute capability against the daemon's NVRTC), asked once per
        device by this Client (the caller holds the lock)."""
        arch = self._targets.get(device)
        if arch is None:
            lib = L.lib()
            _cuda_init()
            buf = ctypes.create_string_buffer(32)
            rc = lib.jc_cuda_resolve_target(self._handle(), device, buf, len(buf))
            if rc != 0:
                raise _errors.from_code(rc, "no arch given and the target for device "
                                        f"{device} is unknown: {lib.jc_cuda_errmsg().decode()}")
            arch = self._targets[device] = buf.value.decode()
        return arch

    def stats(self) -> dict[str, int | str]:
        """The daemon's statistics (the keys of ``jitcachectl stats --json``)."""
        lib = L.lib()
        s = ctypes.c_void_p()
        with self._lock:
            rc = lib.jc_client_stats(self._handle(), ctypes.byref(s))
            if rc != 0:
                self._raise(rc)
        try:
            out: dict[str, int | str] = {}
            name, text, num = ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_int64()
            for i in range(lib.jc_stats_count(s)):
                lib.jc_stats_at(s, i, ctypes.byref(name), ctypes.byref(num), ctypes.byref(text))
                out[(name.value or b"").decode()] = num.value if text.value is None else text.value.decode()
            return out
        finally:
            lib.jc_stats_free(s)


_local = threading.local()


def default_client() -> Client:
    """This thread's Client on the default socket (made on first use, kept
    for the thread's life): what the framework hooks use unless given one."""
    c = getattr(_local, "client", None)
    if c is None:
        c = _local.client = Client()
    return c


def stats(socket: str | os.PathLike | None = None) -> dict[str, int | str]:
    """The statistics of the daemon at socket (None: the default one)."""
    if socket is None:
        return default_client().stats()
    with Client(socket) as c:
        return c.stats()


def library_version() -> str:
    """The loaded libjitcache-client's version (jc_version)."""
    return L.lib().jc_version().decode()
