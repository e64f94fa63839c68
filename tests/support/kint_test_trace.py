"""Preloaded into the worker forkserver by the test supervisor (run_supervisor.py): while
`KINT_TEST_WATCHER_TRACE` (set only by tests) names a file, a worker appends to it one line
for each store watcher tick (`Watcher.tick`), for each count the watcher makes
(`sessions._changes_to_push`, the one its WatcherCount calls) and for each push it starts
(`sessions._watcher_push`): `tick`, then `count ok` or `count failed`, and `push`. A test
reads in it how many ticks passed between two counts, which no log line says (a count that
fails is logged once per reason), with no clock read: what
tests/test_watcher_count_backoff.py checks of a count that keeps meeting a lock; and how
many counts a tick made before its push (tests/test_watcher_size_trigger.py).

Unset, nothing is wrapped; kint's own code reads none of this.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable

TRACE_ENV = "KINT_TEST_WATCHER_TRACE"


def _say(line: str) -> None:
    with open(os.environ[TRACE_ENV], "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def _said_first(word: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A wrapper that writes `word` as the call starts, then makes it: a tick's line and a
    push's line say the call began, whatever it then does."""

    def wrap(call: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(call)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _say(word)
            return call(*args, **kwargs)

        return wrapper

    return wrap


def _counts(count: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(count)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            result = count(*args, **kwargs)
        except Exception:
            _say("count failed")
            raise
        _say("count ok")
        return result

    return wrapper


def _install() -> None:
    if not os.environ.get(TRACE_ENV):
        return
    from kint.tenant_worker import sessions
    from kint.tenant_worker.watcher import Watcher

    Watcher.tick = _said_first("tick")(Watcher.tick)  # type: ignore[method-assign]
    sessions._changes_to_push = _counts(sessions._changes_to_push)
    sessions._watcher_push = _said_first("push")(sessions._watcher_push)


_install()
