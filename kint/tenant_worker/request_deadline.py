"""The deadline of the request an op of the worker runs for: the moment the supervisor
answers it TIMEOUT (time.monotonic(), the box's clock, shared by both processes), sent with
the request and checked as it arrives (worker_wire.req_deadline), and the whole bound it
was given (its timeout).

Why one process may read the other's monotonic time: Python's docs promise no shared
reference point, but on every Python kint supports (>= 3.11) it is system-wide: Linux's
CLOCK_MONOTONIC (the worker is the supervisor's forkserver's child, in its time namespace),
macOS's mach_absolute_time since Python 3.10 (bpo-37205; before, an offset taken at each
process's start). Were it not, the deadline could only come sooner, never later: the worker
holds it to the request's own timeout from its arrival.

Why it is carried: a bound an op read from the clock as its handler began started late by
however long the request had waited, in the supervisor's queue while its worker started,
or behind the worker's other ops on the op pool; so the exit push, given 900 s from then,
could still start an epoch after the supervisor had answered it TIMEOUT, its work going on
unseen. Set around each request's handler (op_replies), read by the op that bounds its own
work (exit_bound.ExitBound.for_request); None outside a request (a direct call).
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, NamedTuple


class Deadline(NamedTuple):
    """A request's deadline (`at`, time.monotonic()) and its whole bound (`seconds`)."""

    at: float
    seconds: float


_CURRENT: ContextVar[Deadline | None] = ContextVar("kint_request_deadline", default=None)


def current() -> Deadline | None:
    """The deadline of the request this thread runs an op for, or None."""
    return _CURRENT.get()


@contextmanager
def running_until(deadline: Deadline | None) -> Iterator[None]:
    """`deadline` is the current one while the block runs (on a pool thread: one op's)."""
    token = _CURRENT.set(deadline)
    try:
        yield
    finally:
        _CURRENT.reset(token)
