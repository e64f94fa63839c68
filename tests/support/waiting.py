"""Waiting on what a test cannot be told of: a predicate looked at until it holds.
"""

from __future__ import annotations

import time
from typing import Any


def wait_until(predicate: Any, timeout: float = 20.0, interval: float = 0.1) -> Any:
    """`predicate()`'s first true value within `timeout` seconds, else its last value (for
    the caller's assert to show)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()
