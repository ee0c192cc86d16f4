# SPDX-License-Identifier: MIT
"""Exceptions, one per kind of failure the C library reports."""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import _lib as L

if TYPE_CHECKING:
    from ._client import Result


class Error(Exception):
    """Base class of every jitcache failure.

    Attributes:
        code: the library's negative ``JC_E*`` code (``None`` when the
            library itself could not be loaded).
        message: the library's message (``jc_client_errmsg``), which says
            what failed and why.
    """

    def __init__(self, code: int | None, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class Unavailable(Error):
    """No result could be had from a daemon: none answers (``JC_ECONNECT``),
    it is overloaded or shutting down (``JC_EBUSY``), or libjitcache-client
    itself is missing. Where the library's in-process fallback is enabled
    (``JITCACHE_FALLBACK=compile``), compiles get a result with status
    ``"uncached"`` instead of this."""


class InvalidRequest(Error, ValueError):
    """The request was refused as malformed (``JC_EINVAL``): an unknown
    architecture, an option naming the architecture, a bad header name..."""


class Timeout(Error, TimeoutError):
    """The answer did not come within the client's timeout, or the compile
    ran past the daemon's ``--compile-timeout`` (``JC_ETIMEOUT``)."""


class CompileError(Error):
    """The compile or link failed (``JC_ECOMPILE``): not a daemon failure.

    Attributes:
        log: NVRTC's (or nvJitLink's) full log.
        status: ``"miss"`` when it was compiled just now, ``"negative-hit"``
            when the failure was cached (within the daemon's negative TTL),
            ``"uncached"`` when compiled in-process.
        key: the cache key (32 hex digits).
    """

    def __init__(self, message: str, result: Result):
        super().__init__(L.JC_ECOMPILE, message)
        self.log = result.log
        self.status = result.status
        self.key = result.key


class LibraryNotFound(Unavailable, OSError):
    """libjitcache-client could not be loaded (see ``jitcache._lib``)."""

    def __init__(self, message: str):
        Unavailable.__init__(self, None, message)


_BY_CODE: dict[int, type[Error]] = {
    L.JC_ECONNECT: Unavailable,
    L.JC_EBUSY: Unavailable,
    L.JC_EINVAL: InvalidRequest,
    L.JC_ETIMEOUT: Timeout,
}


def from_code(code: int, message: str) -> Error:
    """The exception for a JC_E* code (a plain Error for the rarer ones)."""
    return _BY_CODE.get(code, Error)(code, message)
