"""The one deadline a client call keeps (`kint.client.Client.call`), and what of it the
request itself is given: kept apart from the socket and its waits, which only read it.

A tool call may ask the supervisor more than once (a status, then the op; an op, then a
status to word its refusal), and an agent's bound is for the tool call, not for each
request: so the bound is the thread's (`bounded`), and each request goes out with what is
left of it less a grace, so that the supervisor's TIMEOUT (which says what the worker is
doing) arrives before the client gives up on its own.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

from kint.protocol.limits import MIN_TIMEOUT_MS

# How much sooner than the call's deadline the request's own ends (a quarter of a short
# bound at most): the supervisor's TIMEOUT then comes before the client gives up.
CLIENT_GRACE_S = 2.0

# The deadline of the tool call this thread is running, when one is (`bounded`).
_bound = threading.local()


@contextmanager
def bounded(seconds: float) -> Iterator[None]:
    """Every call this thread makes inside the block ends by one deadline, `seconds` from
    now (or an outer block's, when sooner): a tool call that asks the supervisor twice (a
    status, then the op; an op, then a status to word its refusal) waits its bound in all,
    not each call's bound in turn. A call's refusal names the block's bound."""
    outer = getattr(_bound, "at", None)
    at = time.monotonic() + seconds
    if outer is not None and outer[0] <= at:
        at, seconds = outer
    _bound.at = (at, seconds)
    try:
        yield
    finally:
        _bound.at = outer


def call_deadline(timeout_s: float) -> tuple[float, float]:
    """(the monotonic deadline of a call begun now with `timeout_s`, the bound it names):
    the thread's block's, when that ends sooner."""
    at = time.monotonic() + timeout_s
    outer = getattr(_bound, "at", None)
    return outer if outer is not None and outer[0] < at else (at, timeout_s)


def request_ms(left_s: float) -> int:
    """The request's own timeout, with `left_s` left of the call: the grace less, so that
    the supervisor's TIMEOUT reaches the client before its deadline."""
    return max(MIN_TIMEOUT_MS, int((left_s - min(CLIENT_GRACE_S, left_s / 4)) * 1000))
