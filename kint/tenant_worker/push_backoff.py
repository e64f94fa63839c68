"""The watcher's wait after a push that failed (anything but HELD): an endpoint down or
hung, RPC_UNAVAILABLE, TIMEOUT, NO_SESSION_KEY, a refused chain setting, ...

After such a failure the store is still dirty and the quiet period has long passed, so
without a wait the watcher would push again at its very next tick, every
KINT_POLL_SECONDS: each attempt a log line under KINT_HOME (which counts against Sibyl's
5 MiB free-tier cap) and, with a hung endpoint, another RPC timeout spent hammering it.
So the next attempt waits KINT_PUSH_RETRY_SECONDS (at least one poll interval), and each
further failure doubles the wait up to MAX_WAIT_S. Any successful push of the space (the
watcher's, `kint push`, memory_push, the exit push) and a change of the configuration start
it over; a store change does not (agents write often, and the endpoint is no better for it).

The times are the monotonic clock's, the failure carried as a deadline. Logging is one line
at the first failure and at each change of (code, message), and one when a push goes
through after failures, never a line per attempt.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from kint.seconds_text import seconds_text

log = logging.getLogger("kint.worker")

# The longest wait between two attempts: an outage of hours costs a few lines and a few
# dozen RPC timeouts, and a mended endpoint is used again within a quarter of an hour.
MAX_WAIT_S = 900.0
# A heartbeat carries the failure's message cut to this many characters: `kint supervisor
# status` shows one line of it per space, and every worker beats up to once a second.
BEAT_MESSAGE_CHARS = 200


@dataclass(frozen=True)
class Failure:
    """The last failed attempt: what it said, when (monotonic), how many in a row, and
    how long the watcher waits from then before it tries again."""

    code: str
    message: str
    hint: str | None
    at: float
    attempts: int
    wait_s: float

    @property
    def retry_at(self) -> float:
        return self.at + self.wait_s

    def report(self, now: float) -> dict[str, Any]:
        """What status shows: seconds since it failed, seconds until the next attempt
        (0: at the next tick that finds the store dirty)."""
        return {"code": self.code, "message": self.message, "hint": self.hint,
                "age_s": round(max(0.0, now - self.at), 3), "attempts": self.attempts,
                "retry_in_s": round(max(0.0, self.retry_at - now), 3),
                "wait_s": self.wait_s}


class PushBackoff:
    """The failure the watcher is waiting out, if any. Read by status and reset by other
    pushes from request threads, so every change is under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failure: Failure | None = None

    @property
    def failure(self) -> Failure | None:
        return self._failure

    def waiting(self, now: float) -> bool:
        failure = self._failure
        return failure is not None and now < failure.retry_at

    def failed(self, code: str, message: str, hint: str | None, now: float,
               first_wait_s: float) -> bool:
        """Record a failed attempt that ended at `now`. Returns whether it was logged (the
        first failure, or one that says something else than the last)."""
        with self._lock:
            last = self._failure
            if last is None:
                attempts, wait = 1, first_wait_s
            else:
                attempts = last.attempts + 1
                wait = min(max(last.wait_s * 2, first_wait_s), max(MAX_WAIT_S, first_wait_s))
            self._failure = Failure(code, message, hint, now, attempts, wait)
        if last is not None and (last.code, last.message) == (code, message):
            return False
        if last is None:
            log.info("watcher: push failed (%s): %s; it is tried again in %s, and after each "
                     "further failure the wait doubles up to %s", code, message,
                     seconds_text(wait), seconds_text(max(MAX_WAIT_S, first_wait_s)))
        else:
            log.info("watcher: push failed again, now (%s): %s; %d failed attempts, the "
                     "next in %s", code, message, attempts, seconds_text(wait))
        return True

    def went_through(self, by: str | None = None) -> None:
        """A push of the space succeeded (`by` names one that was not the watcher's)."""
        with self._lock:
            last, self._failure = self._failure, None
        if last is not None:
            log.info("watcher: push went through after %d failed attempt%s%s", last.attempts,
                     "" if last.attempts == 1 else "s", f" ({by})" if by else "")

    def forget(self, why: str) -> None:
        """Drop the failure and its wait (`why` says so in the log, when there was one)."""
        with self._lock:
            last, self._failure = self._failure, None
        if last is not None:
            log.info("watcher: %s (the last attempt failed with %s)", why, last.code)

    def report(self, now: float) -> dict[str, Any] | None:
        failure = self._failure
        return failure.report(now) if failure is not None else None

    def for_beat(self, now: float) -> dict[str, Any] | None:
        """The failure as the worker's heartbeat carries it to `kint supervisor status`:
        the report without its hint and wait, its message cut short."""
        report = self.report(now)
        if report is None:
            return None
        message = report["message"]
        if len(message) > BEAT_MESSAGE_CHARS:
            message = message[:BEAT_MESSAGE_CHARS - 3] + "..."
        return {"code": report["code"], "message": message, "attempts": report["attempts"],
                "age_s": report["age_s"], "retry_in_s": report["retry_in_s"]}
