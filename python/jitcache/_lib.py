# SPDX-License-Identifier: MIT
"""Loading libjitcache-client and declaring its C functions (ctypes).

The library is looked for, in order, at:

1. ``$JITCACHE_CLIENT_LIB`` (a path; used by the tests on the build tree),
2. its soname ``libjitcache-client.so.0`` through the dynamic loader
   (``LD_LIBRARY_PATH``, the ``ldconfig`` cache, the system directories),
   and the name ``ctypes.util.find_library("jitcache-client")`` gives,
3. the library directory recorded when this package was installed: by
   ``meson install``, or by ``pip install`` (``python/build_backend.py``, from
   ``pkg-config jitcache-client``): ``_build_config.LIBDIR``.

The first one that loads is used for the whole process. Every declaration
below mirrors ``include/jitcache/jitcache.h``; ``tests/test_client.py``
checks the constants against that header.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

SONAME = "libjitcache-client.so.0"

# Error codes (jitcache.h, "Error codes").
JC_EINVAL = -1
JC_ENOMEM = -2
JC_EIO = -3
JC_ECONNECT = -4
JC_EPROTO = -5
JC_ETOOBIG = -6
JC_ECOMPILE = -7
JC_ECRASH = -8
JC_ETIMEOUT = -9
JC_ENOSPC = -10
JC_ECORRUPT = -11
JC_EVERSION = -12
JC_EDENIED = -13
JC_ELOCKED = -14
JC_ENOTFOUND = -15
JC_EBUSY = -16
JC_EINTERNAL = -17
JC_ENOTSUP = -18

# jc_output, jc_link_input, jc_cache_status, jc_timing.
OUTPUTS = {"cubin": 1, "ptx": 2, "ltoir": 3, "fatbin": 4}  # fatbin: arch a target list
LINK_INPUTS = {"cubin": 1, "ptx": 2, "ltoir": 3, "fatbin": 4, "object": 5, "library": 6}
CACHE_STATUS = {1: "miss", 2: "hit", 3: "negative-hit", 4: "joined", 5: "uncached",
                6: "remote-hit"}
JC_TIME_TOTAL, JC_TIME_SERVER, JC_TIME_COMPILE, JC_TIME_INCLUDES = 0, 1, 2, 3


def _candidates() -> list[str]:
    out = []
    env = os.environ.get("JITCACHE_CLIENT_LIB")
    if env:
        out.append(env)
    out.append(SONAME)
    found = ctypes.util.find_library("jitcache-client")
    if found:
        out.append(found)
    try:
        from . import _build_config  # type: ignore[attr-defined]  # written at install
        out.append(os.path.join(_build_config.LIBDIR, SONAME))
    except ImportError:
        pass
    return out


_P = ctypes.c_void_p
_S = ctypes.c_char_p
_SZ = ctypes.c_size_t
_I = ctypes.c_int

# name: (restype, argtypes)
# jc_log_cb: (ctx, level, message)
LOG_CB = ctypes.CFUNCTYPE(None, _P, _I, _S)
JC_FALLBACK_COMPILE, JC_FALLBACK_ERROR = 1, 2
JC_LOG_WARNING, JC_LOG_NOTICE, JC_LOG_INFO = 4, 5, 6

_PROTOTYPES = {
    "jc_options_new": (_I, [ctypes.POINTER(_P)]),
    "jc_options_free": (None, [_P]),
    "jc_options_set_socket": (_I, [_P, _S]),
    "jc_options_set_cache_dir": (_I, [_P, _S]),
    "jc_options_set_autostart": (_I, [_P, _I]),
    "jc_options_set_fallback": (_I, [_P, _I]),
    "jc_options_set_log": (_I, [_P, LOG_CB, _P]),
    "jc_client_open": (_I, [_P, ctypes.POINTER(_P)]),
    "jc_client_socket": (_S, [_P]),
    "jc_client_close": (None, [_P]),
    "jc_client_set_timeout": (_I, [_P, _I]),
    "jc_client_errmsg": (_S, [_P]),
    "jc_request_new": (_I, [ctypes.POINTER(_P)]),
    "jc_request_free": (None, [_P]),
    "jc_request_set_source": (_I, [_P, _S, _S, _SZ]),
    "jc_request_add_header": (_I, [_P, _S, _S, _SZ]),
    "jc_request_add_option": (_I, [_P, _S]),
    "jc_request_set_arch": (_I, [_P, _S]),
    "jc_request_set_output": (_I, [_P, _I]),
    "jc_request_add_name_expression": (_I, [_P, _S]),
    "jc_request_add_link_input": (_I, [_P, _I, _S, _S, _SZ]),
    "jc_request_add_link_option": (_I, [_P, _S]),
    "jc_request_set_app_abi": (_I, [_P, _S]),
    "jc_compile": (_I, [_P, _P, ctypes.POINTER(_P)]),
    "jc_report_load_failure": (_I, [_P, _P, _P, _S, ctypes.POINTER(_P)]),
    "jc_result_free": (None, [_P]),
    "jc_result_data": (_P, [_P, ctypes.POINTER(_SZ)]),
    "jc_result_output": (_I, [_P]),
    "jc_result_cache_status": (_I, [_P]),
    "jc_result_log": (_S, [_P]),
    "jc_result_lowered_count": (_SZ, [_P]),
    "jc_result_lowered_at": (_I, [_P, _SZ, ctypes.POINTER(_S), ctypes.POINTER(_S)]),
    "jc_result_key": (_S, [_P]),
    "jc_result_time_ns": (ctypes.c_uint64, [_P, _I]),
    "jc_client_stats": (_I, [_P, ctypes.POINTER(_P)]),
    "jc_stats_count": (_SZ, [_P]),
    "jc_stats_at": (_I, [_P, _SZ, ctypes.POINTER(_S), ctypes.POINTER(ctypes.c_int64),
                         ctypes.POINTER(_S)]),
    "jc_stats_free": (None, [_P]),
    "jc_strerror": (_S, [_I]),
    "jc_version": (_S, []),
    "jc_cuda_resolve_target": (_I, [_P, _I, ctypes.c_char_p, _SZ]),
    "jc_cuda_errmsg": (_S, []),
}

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_path: str | None = None


def lib() -> ctypes.CDLL:
    """The loaded library (loaded on first use; thread-safe).

    Raises jitcache.LibraryNotFound (an Unavailable) naming every place searched and why each failed.
    """
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        for cand in _candidates():
            try:
                handle = ctypes.CDLL(cand)
            except OSError as e:
                errors.append(f"{cand}: {e}")
                continue
            for name, (res, args) in _PROTOTYPES.items():
                fn = getattr(handle, name)
                fn.restype = res
                fn.argtypes = args
            _path = cand
            _lib = handle
            return _lib
        from ._errors import LibraryNotFound
        raise LibraryNotFound(
            "libjitcache-client not found (set JITCACHE_CLIENT_LIB to its path); tried: "
            + "; ".join(errors))


def path() -> str:
    """Where the loaded library came from (as it was opened)."""
    lib()
    assert _path is not None
    return _path
