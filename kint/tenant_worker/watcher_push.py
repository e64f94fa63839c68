"""The store watcher's push and its stop (the watcher's docstring,
kint/tenant_worker/watcher.py): the half of `Watcher` that pushes for a trigger the tick
found due (`_fire`), waits for an op of the space this worker runs (`_op_runs`, TurnTaken),
records a failed push for the backoff (`_failed`), and ends the watcher as the worker's
stop begins (`stop`), saying once that a store's rows are left for the worker's next start
(`_say_rows_left`). Kept apart from the ticks and the counts, which decide when a push is
due. The stop's line is said only by `_say_rows_left`, here, against a push of its own
under way (`_pushing`) and a tick running (`_ticking`), both read under `_push_lock`; its
other two callers are in watcher.py: `tick`, which sets `_ticking` and says the line as a
tick the stop met ends, and `start`, as a start's count the stop met ends.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from kint.protocol import ProtocolError
from kint.tenant_worker.head_lock import TurnStopped, TurnTaken
from kint.tenant_worker.push_backoff import PushBackoff
from kint.tenant_worker.watcher_count import WatcherCount
from kint.tenant_worker.watcher_timings import WatcherTimings

log = logging.getLogger("kint.worker")

ROWS_LEFT = "the store's rows are left for the worker's next start"


class WatcherPush:
    """A mixin of `Watcher`: its push and its stop. `Watcher` owns the marks and the parts
    (`dirty`, the lock and its flags, the stop's event and reason, the count, the backoff,
    the timings) and the settling of a store (`_settle`, `_nothing_left`); these read and
    set them."""

    # Watcher's own, declared for the type checker.
    dirty: bool
    counting: WatcherCount
    backoff: PushBackoff
    timings: WatcherTimings
    _push: Callable[[str], Any]
    _own_op: Callable[[], tuple[str, float] | None]
    _waited_for: tuple[str, float] | None
    _stop: threading.Event
    _push_lock: threading.Lock
    _pushing: bool
    _ticking: bool
    _stopped_why: str | None
    _retimed: threading.Event
    _last_size_check: float
    _held_at_signature: tuple[int, ...] | None
    _untold: tuple[int, ...] | None
    _settle: Callable[[tuple[int, ...] | None, bool], None]
    _nothing_left: Callable[[tuple[int, ...] | None, bool], None]

    def stop(self, why: str | None = None) -> None:
        """End the watcher (its thread at its next wake). `why`: the worker's stop began
        (process.py), and a dirty store's rows are said to be left (`_say_rows_left`): now,
        or by the tick this stop met as it ends (`tick`), or never, over a push of its own
        under way, whose end is what is logged."""
        with self._push_lock:
            self._stopped_why = self._stopped_why if self._stop.is_set() else why  # the first
            self._stop.set()
            if self._pushing:
                self._stopped_why = None
            elif not self._ticking:
                self._say_rows_left()
        self._retimed.set()

    def _say_rows_left(self) -> None:
        """The one place that says the stop's line, once, under `_push_lock` (by `stop`, by
        `start` as a count the stop met ends, or by `tick` as a tick the stop met ends): not
        over a push of its own (`_fire`), nor for `work_left`'s two stores, where the idle
        stop said it of exactly those it takes."""
        if self._stopped_why and self.dirty and not self._pushing and not (
                self.counting.cannot_push or self.counting.lasting):
            log.info("watcher: stopped: %s; %s", self._stopped_why, ROWS_LEFT)
            self._stopped_why = None

    def _op_runs(self) -> bool:
        """Whether a head-moving op of the space runs in this worker (head_lock.HeadTurn),
        so the push or size check due neither pushes nor counts (an owed start's count,
        made before, still is): its push was refused BUSY and waited out as a failed push
        (KINT_PUSH_RETRY_SECONDS), where the first tick after the op could push it. Asked
        only where the tick acts (`_fire`, the size check), so the wait is said only when
        one was due. An op begun since: `_fire`'s TurnTaken, met after its count."""
        running = self._own_op()
        if running is not None and running != self._waited_for:
            log.info("watcher: a %s is running for this space; the watcher waits for it "
                     "to end", running[0])
            self._waited_for = running
        return running is not None

    def _fire(self, trigger: str, sig: tuple[int, ...] | None, told: bool,
              now: float, counted: tuple[int, int] | None = None) -> None:
        """Push (as the `watcher`) for `trigger`, `quiet trigger` or `size trigger`, with
        kint v0.3.0's log lines around it (10-configuration.md, "Logs"): what triggered
        the push, then its result. A held push logs its own line (drift.py), a failed one
        the backoff's (push_backoff.py). `counted`: the count this tick made already (the
        owed start's, or the size check's that fired it), not made again: each is a diff of
        the whole store, and a size-triggered push made two."""
        if self.backoff.waiting(now):
            return  # a failed push's wait is not over (checked before the diff it costs)
        if self._op_runs():
            self._turn_taken(trigger)  # nor a diff while it runs
            return
        counts = counted or self.counting()
        if counts is None:
            return  # cannot push (no data key), the count failed, or its retry is not due
        if counts == (0, 0):
            self._nothing_left(sig, told)
            return
        with self._push_lock:
            if self._stop.is_set():
                return  # stopped since the tick began: `tick` says what is left
            self._pushing = True
        started = time.monotonic()
        log.info("watcher: pushing (%s)", trigger)
        try:
            result = self._push("watcher")  # push.push ends the backoff's wait when it goes through
            if isinstance(result, dict) and result.get("message"):
                log.info("watcher: %s", result["message"])
            # What the push anchored is what the store held at `sig` or later; a change
            # made while it ran shows as a new signature at the next tick.
            self._settle(sig, told)
        except TurnTaken:
            self._turn_taken(trigger)  # an op of the space began since `_op_runs`
        except TurnStopped as err:
            self._not_started(trigger, err.message)  # the stop began as this push did
        except ProtocolError as err:
            if err.code.value == "HELD":
                # Wait for the next store change; one a signature that does not tell every
                # commit may miss is looked at again once it tells (`_look_again`).
                self._held_at_signature = sig
                if not told:
                    self._untold = sig
            else:
                self._failed(err.code.value, err.message, err.hint, now, started)
        except Exception as err:  # noqa: BLE001 - a bug: waited out and logged like the rest
            if self._failed("INTERNAL", f"{type(err).__name__}: {err}", None, now, started):
                log.exception("watcher push failed")
        finally:
            self._pushing = False

    def _not_started(self, trigger: str, why: str) -> None:
        """The stop's gate refused this push, begun past `_fire`'s look at `stop`
        (watcher.py's docstring): one line, no failure, no backoff."""
        log.info("watcher: push (%s) not started: %s; %s", trigger, why, ROWS_LEFT)
        self.stop()

    def _turn_taken(self, trigger: str) -> None:
        """An op of the space holds its turn: no failure, and a size check (or its push, or
        a look's count: `_look_again`) is made again at the next tick, not a minute on."""
        if trigger == "size trigger":
            self._last_size_check = float("-inf")

    def _failed(self, code: str, message: str, hint: str | None, now: float,
                started: float) -> bool:
        """The wait runs from when the attempt ended (a hung endpoint's timeout included),
        on the tick's clock."""
        ended = now + (time.monotonic() - started)
        return self.backoff.failed(code, message, hint, ended, self.timings.first_wait_s)
