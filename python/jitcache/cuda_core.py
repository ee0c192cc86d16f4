# SPDX-License-Identifier: MIT
"""jitcache for cuda.core (tested with cuda.core 1.2): C++ programs compiled by jitcached.

    from cuda.core import Device, ProgramOptions
    from jitcache.cuda_core import Program
    prog = Program(src, "c++", ProgramOptions(std="c++17"))   # as cuda.core.Program
    obj = prog.compile("cubin", name_expressions=["saxpy<float>"])
    kernel = obj.get_kernel("saxpy<float>")                    # symbol_mapping kept

:class:`Program` takes the arguments of ``cuda.core.Program`` and its
``compile`` those of ``Program.compile``; C++ to cubin, PTX or LTO-IR goes to
the daemon with the options ``ProgramOptions.as_bytes("nvrtc")`` makes
(``-arch=`` becomes the request's architecture), and the ObjectCode it
returns carries the lowered names as its ``symbol_mapping`` (which
cuda.core's own ``cache=`` cannot keep: it refuses name expressions).
PTX and NVVM sources, ``extra_sources``, ``use_libdevice`` and the options
that make NVRTC write files of its own (PCH, ``time``,
``fdevice_time_trace``) are compiled by cuda.core itself.

Why not a ``cuda.core.utils.ProgramCacheResource``: that is a bytes store
keyed by cuda.core's digest, filled with what cuda.core compiled in this
process. jitcache's entries are made by the daemon from the inputs and never
uploaded by a client, so that no client can poison another's cache (see
python/README.md, "Design").

cuda.core is imported only by these functions.
"""
from __future__ import annotations

from typing import Any

from . import _client

# ProgramOptions fields that make NVRTC read or write files of its own (the
# daemon refuses those options), or add sources the request cannot carry:
# left to cuda.core.
_LOCAL_ONLY = ("extra_sources", "pch", "create_pch", "use_pch", "pch_dir", "use_libdevice",
               "time", "fdevice_time_trace")


def object_code(result: _client.Result, *, name: str = ""):
    """A ``cuda.core.ObjectCode`` of a Result (``from_cubin`` / ``from_ptx``
    / ``from_ltoir`` by ``result.output``), its ``symbol_mapping`` the
    result's lowered names, so ``get_kernel("saxpy<float>")`` works."""
    from cuda.core import ObjectCode

    make = getattr(ObjectCode, "from_" + result.output)
    # cuda.core hands the mapped names to cuModuleGetFunction as bytes, the
    # form its own Program.compile stores (nvrtcGetLoweredName's).
    mapping = {expr: lowered.encode() for expr, lowered in result.lowered_names.items()}
    return make(bytes(result), name=name, symbol_mapping=mapping)


class Program:
    """``cuda.core.Program`` whose C++ compiles jitcached does.

    Args:
        code, code_type, options: as for ``cuda.core.Program``.
        client: the Client to use (None: :func:`jitcache.default_client`).
    """

    def __init__(self, code: Any, code_type: str, options: Any = None, *,
                 client: _client.Client | None = None):
        from cuda.core import ProgramOptions

        self._code = code
        self._code_type = str(code_type).lower()
        self._options = options if options is not None else ProgramOptions()
        self._client = client
        self._local: Any = None  # a cuda.core.Program, made when one is needed
        self.last_result: _client.Result | None = None  #: the last jitcache Result

    def _by_daemon(self, target_type: str) -> bool:
        return (self._code_type == "c++" and target_type in ("cubin", "ptx", "ltoir")
                and not any(getattr(self._options, f, None) for f in _LOCAL_ONLY))

    def compile(self, target_type: str, name_expressions=(), logs=None, *, cache=None):
        """As ``cuda.core.Program.compile``. ``cache`` is passed to cuda.core
        for what it compiles itself and ignored for what jitcached compiles
        (the daemon is the cache). Raises :class:`jitcache.CompileError`
        (with the log) when the compile fails."""
        target_type = str(target_type)
        if not self._by_daemon(target_type):
            from cuda.core import Program as CoreProgram

            if self._local is None:
                self._local = CoreProgram(self._code, self._code_type, self._options)
            kw = {"cache": cache} if cache is not None else {}
            return self._local.compile(target_type, name_expressions, logs, **kw)
        opts = [o.decode() for o in self._options.as_bytes("nvrtc", target_type)]
        # ProgramOptions always names one (the current device's by default).
        arch = next((o.split("=", 1)[1] for o in opts if o.startswith("-arch=")), None)
        # The architecture is a field of its own; the daemon adds -dlto for LTO-IR.
        lto = ("-dlto", "--dlink-time-opt") if target_type == "ltoir" else ()
        opts = [o for o in opts if not o.startswith("-arch=") and o not in lto]
        name = self._options.name or "default_program"
        client = self._client or _client.default_client()
        res = client.compile(self._code, name=name, arch=arch, options=opts,
                             name_expressions=tuple(name_expressions), output=target_type)
        self.last_result = res
        if logs is not None and res.log:
            logs.write(res.log)
        return object_code(res, name=name)

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
            self._local = None

    def __enter__(self) -> Program:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
