# SPDX-License-Identifier: MIT
"""jitcache: CUDA JIT compiles served by jitcached, from Python.

    import jitcache
    with jitcache.Client() as c:
        r = c.compile(src, arch="sm_90", name_expressions=["saxpy<float>"])
        cubin, fn = r.data, r.lowered_names["saxpy<float>"]

Pure Python over libjitcache-client (ctypes); nothing else is required.
Framework hooks, imported on demand: :mod:`jitcache.cupy` (CuPy) and
:mod:`jitcache.cuda_core` (cuda.core). See python/README.md.
"""
from ._client import (LINK_KINDS, Client, Result, Timings, default_client, library_version,
                      stats)
from ._errors import (CompileError, Error, InvalidRequest, LibraryNotFound, Timeout,
                      Unavailable)

__version__ = "0.1.0"

__all__ = [
    "Client", "Result", "Timings", "LINK_KINDS", "default_client", "stats", "library_version",
    "Error", "CompileError", "Unavailable", "InvalidRequest", "Timeout", "LibraryNotFound",
]
