"""Freed memory handed back to the system after an op that handled whole epochs.

A push, pull, connect or rekey allocates tens of MB in small pieces (rows, plaintexts,
gzip and cipher buffers) on a thread of the worker's pool. CPython frees them when the op
ends, but glibc keeps the freed pages in that thread's malloc arena for reuse, so an idle
worker that once pushed 500 rows kept ~28 MiB PSS against ~15 MiB for one that only
verified (issue 15's many-tenants benchmark: 20 MiB of anonymous memory, 19.5 of it
private and dirty). With one worker per space, that is paid per tenant for the worker's
whole life. `malloc_trim(0)` returns the free pages of every arena; it costs a walk of
the arenas, so it runs after these ops only, never after a verify or a status.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import logging
from typing import Any, Callable

log = logging.getLogger("kint.worker")


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


def release_freed_memory() -> None:
    """Collect cycles, then give the free pages of every malloc arena back."""
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)


def releasing(handler: Callable[..., Any]) -> Callable[..., Any]:
    """`handler`, then `release_freed_memory()` once it has returned or raised (its locals
    are gone by then, so what it allocated is free)."""

    @functools.wraps(handler)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return handler(*args, **kwargs)
        finally:
            release_freed_memory()

    return run
