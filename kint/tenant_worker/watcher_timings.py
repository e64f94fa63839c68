"""What the store watcher (watcher.py) reads of the settings at every tick: its timings in
force, and how many times the config file has changed (a change ends a failed push's wait).

Why a module of its own: the timings are looked up afresh at each use, never kept, so a
session that attaches or leaves, or an edited config.toml, takes effect without a restart;
that lookup, its one log line when what is in force changes, and the floor of the retry
wait are one concern, apart from the ticks, the counts and the pushes that use them.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from kint.tenant_worker.space_settings import WATCHER_SETTINGS

log = logging.getLogger("kint.worker")


def config_generation() -> int:
    """How many times this process has read a changed config file (one stat to check)."""
    from kint import settings

    watch = settings.watch()
    watch.current()
    return watch.generation


class WatcherTimings:
    """The watcher's timings, each read when it is used: the newest kint-server session's
    (sent on attach, from the harness's MCP configuration), else the space's settings
    (config.toml, the supervisor's environment, the defaults)."""

    def __init__(self, timing: Callable[[str], Any] | None = None) -> None:
        from kint import settings

        # name -> the settings Value in force (the newest session's, else the space's)
        self._timing = timing or settings.lookup
        self._shown: tuple[Any, ...] | None = None

    def _value(self, name: str) -> float:
        return float(self._timing(name).value)

    @property
    def poll_s(self) -> float:
        return self._value("KINT_POLL_SECONDS")

    @property
    def quiet_s(self) -> float:
        return self._value("KINT_QUIET_SECONDS")

    @property
    def size_trigger(self) -> float:
        return self._value("KINT_SIZE_TRIGGER_BYTES")

    @property
    def first_wait_s(self) -> float:
        """The wait after a first failed push: never shorter than a tick."""
        return max(self._value("KINT_PUSH_RETRY_SECONDS"), self.poll_s)

    def log(self) -> None:
        """One line whenever the timings in force change (and at start)."""
        values = [self._timing(n) for n in WATCHER_SETTINGS]
        shown = tuple((v.value, v.source) for v in values)
        if shown != self._shown:
            self._shown = shown
            log.info("watcher: quiet %gs (%s), poll %gs (%s), size trigger %g bytes (%s), "
                     "push retry %gs (%s)", *(x for v in values for x in (v.value, v.described)))
