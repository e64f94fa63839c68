"""What the supervisor does once a worker exited: answer the requests it had in flight,
then restart the space (one_for_one), quarantine it after too many crashes, leave it idle
or stopped as the commands said, or hold it idle with the refusal of a worker that would
not start (another worker's lock, no open files). A mixin of `Supervisor`
(kint/supervisor/daemon.py) through `WorkerLifecycle` (lifecycle.py: spawn, stop, the
hung judgement), apart from it. An exit is noticed by the exit watch (`_on_exit`) and
handled then, or, held for the reason its worker sent (exit_hold.py), once that reason is
read (`_reason_heard`, from worker_messages.py) or its hold ends at the loop's timed work
(`_release_due`, timed.py); `_crashed` also takes a spawn that failed (`spawn`,
lifecycle.py), counted as a crash. Its bases keep what an exit reads: the routes and late
replies (`LastWords`: last_words.py), the exit held for its reason (`ExitHold`:
exit_hold.py), the spaces waiting for room (`WorkerRoom`: room.py).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from kint.open_files import SYSTEM_FILES_HINT, WORKER_ROOM_HINT, open_files
from kint.paths import worker_lock_path
from kint.protocol import ErrorCode, worker_wire
from kint.protocol.envelope import error_reply
from kint.supervisor.exit_hold import ExitHold
from kint.supervisor.exits import ExitWatch
from kint.supervisor.last_words import LastWords, worker_down_reply
from kint.supervisor.room import WorkerRoom
from kint.supervisor.workers import (STOPPED_MID_OP_HINT, StartRefusal, WorkerHandle,
                                    describe_exit, live_sessions)
from kint.tenant_worker.worker_lock import unnamed_holder_hint

log = logging.getLogger("kint.supervisor")


class WorkerExit(WorkerRoom, LastWords, ExitHold):
    home: Any
    settings: Any
    shutting_down: bool
    handles: dict[str, WorkerHandle]
    exits: ExitWatch[WorkerHandle]
    # WorkerLifecycle's and ClientRouting's own methods, declared for the type checker (the
    # mixin has no body of its own for them).
    spawn: Callable[[WorkerHandle], None]
    _answer: Callable[[WorkerHandle, Any, Any], None]
    _quarantine_message: Callable[[WorkerHandle, float], str]

    def _on_exit(self, handle: WorkerHandle) -> None:
        """The exit watch says the worker exited. Handled now, or, when its exit code says
        it sent a reason not read yet, once that reason is read or its hold is over
        (`_hold_exit`, exit_hold.py): what the exit answers and records says the reason."""
        proc = handle.process
        self.exits.forget(proc.sentinel)
        proc.join(timeout=1.0)
        if not self._hold_exit(handle, proc.exitcode, time.monotonic()):
            self._exited(handle)

    def _exited(self, handle: WorkerHandle) -> None:
        """Handle the worker's exit: answer its requests in flight, then restart the space,
        quarantine it, leave it idle or stopped, as the exit and the commands say."""
        proc = handle.process
        exitcode = proc.exitcode
        try:
            proc.close()
        except Exception:
            pass
        now = time.monotonic()
        pid = handle.pid
        stopped_for_room = handle.space_id in self._evicting
        self._evicting.discard(handle.space_id)
        retired = self._retire_route(handle)  # with the pid, which its late words carry
        handle.process = None
        handle.pid = None
        reason = handle.fatal_reason or describe_exit(exitcode)
        if handle.hung_reason:
            reason = f"hung ({handle.hung_reason}); {describe_exit(exitcode)}"
        elif exitcode == worker_wire.EXIT_REFUSED and handle.start_refused is None:
            reason = self._refused_unheard(handle)
        elif exitcode == worker_wire.EXIT_NO_FILES:
            reason = (f"the worker of space {handle.space16} could not start: it ran out of "
                      f"open files (the limit it inherited, ulimit -n)")
            files = open_files()
            handle.start_refused = StartRefusal(ErrorCode.BUSY.value, WORKER_ROOM_HINT, None,
                                                files.limit if files is not None else None)
        elif exitcode == worker_wire.EXIT_NO_SYSTEM_FILES:
            reason = (f"the worker of space {handle.space16} could not start: it ran out of "
                      f"open files (the system's table of them is full)")
            handle.start_refused = StartRefusal(ErrorCode.BUSY.value, SYSTEM_FILES_HINT, None)
        stop_reason = handle.stop_reason
        # Read before the branch below, which may spawn (and clear it): whether the worker's
        # reason came in time, or a late one may still mend what this exit writes.
        told = handle.fatal_reason is not None
        # Stopped with the supervisor, it is not being restarted (the code's usual hint).
        hint = STOPPED_MID_OP_HINT if stop_reason == "stop" else None
        if exitcode == 0 and handle.hung_reason is None and retired is not None:
            # A clean exit, on command or on a user's SIGTERM: the answers it sent before it
            # may still be on their way, behind its exit (last_words.py). They are waited
            # for, not refused.
            self._await_replies(retired, handle, reason, hint, now)
        for pending in [p for p in handle.pending.values() if p.forwarded]:
            self._answer(handle, pending, worker_down_reply(handle.space16, reason,
                                                            pending.op, hint))
        log.info("space %s: worker %s %s%s", handle.space16, pid, reason,
                 f" (commanded: {stop_reason})" if stop_reason else "")
        if stop_reason in ("idle", "recycle"):
            handle.state = "idle"
            # A worker recycled with sessions attached left them for its successor
            # (kint/tenant_worker/session_handoff.py), which starts now: their watcher
            # and notes go on without waiting for a request.
            handed = stop_reason == "recycle" and live_sessions(handle.beat)
            if stopped_for_room and handle.pending and not self.shutting_down:
                # Asked for while it was stopped to make room: its requests wait their
                # turn behind the spaces the room was made for (room.py).
                self._queue_for_room(handle)
            elif (handle.pending or handed) and not self.shutting_down:
                self.spawn(handle)
        elif stop_reason in ("stop", "upgrade") or self.shutting_down:
            # One stopped for an upgrade handed its sessions over, if it had any, to the
            # next supervisor's worker (kint/supervisor/succession.py).
            handle.state = "stopped"
        elif stop_reason == "restart":
            # Its sessions too were handed to the successor (session_handoff.py), unless
            # the space moved to another store, which that successor serves.
            self.spawn(handle)
        else:
            if handle.start_refused is not None:
                self._start_refused(handle, now, reason, handle.start_refused)
            else:
                self._crashed(handle, now, reason)
            if not told:  # its `fatal` may still come, later than the hold: what to mend
                self.record_unheard(retired, reason)

    def _refused_unheard(self, handle: WorkerHandle) -> str:
        """The worker exited EXIT_REFUSED and its `fatal`, which names the holder, has not
        been read (lost, or later than the exit's hold for it, exit_hold.py, and then names
        the holder from when it comes: last_words.py). The code says as much as the message would
        have, bar the holder: a refusal, never a crash (which restarted the space and
        counted towards a quarantine). Returns the reason, and sets `start_refused` for
        `_exited`."""
        path = worker_lock_path(self.home, handle.space16)
        handle.start_refused = StartRefusal(ErrorCode.WORKER_DOWN.value,
                                            unnamed_holder_hint(path), None)
        return (f"the worker of space {handle.space16} refused to start: another worker of "
                f"the space holds its worker lock {path}; no second worker is started "
                f"beside it on the same store")

    def _start_refused(self, handle: WorkerHandle, now: float, reason: str,
                       refusal: StartRefusal) -> None:
        """The worker refused to start, for one of two causes, neither a crash (a restart
        would only be refused again, and a quarantine would outlast the cause):
        - an older worker of the space, left by a supervisor that died, still runs
          (stopped or stuck) and holds the space's worker lock
          (kint.tenant_worker.worker_lock): WORKER_DOWN naming the holder; the sweep
          drops the refusal once the lock is free (timed.py);
        - it began short of open files, under its limit (worker_wire.EXIT_NO_FILES) or
          the system's table full (worker_wire.EXIT_NO_SYSTEM_FILES, ENFILE): BUSY, as
          an op that runs out is, with that cause's hint; the sweep forgets the refusal
          once the supervisor's limit rose or the table has room (room.py).
        The requests waiting for it are answered with the refusal's code and hint, the
        space is left idle with the reason as its last exit and the refusal in its row
        (`kint supervisor status`: degraded, `idle (held by pid N)` or `idle (no open
        files)`), and the next request starts a worker again.

        Refused at a quarantine's retry, the space stays quarantined, its backoff as it
        was, the next retry one backoff from now: the refusal says nothing of the crashes
        the quarantine is for (neither that they are mended, which lifting it would
        assume, every request then starting a worker at once, nor that one more happened,
        which doubling the backoff would count)."""
        code, hint = refusal.code, refusal.hint
        if handle.backoff_s is not None and handle.retry_started_at is not None:
            handle.quarantined_until = now + handle.backoff_s
            handle.state = "quarantined"
        else:
            handle.state = "idle"
        handle.last_exit = reason
        log.warning("space %s: the worker refused to start: %s", handle.space16, reason)
        for pending in list(handle.pending.values()):
            self._answer(handle, pending, error_reply(None, ErrorCode(code), reason, hint))

    def _crashed(self, handle: WorkerHandle, now: float, reason: str) -> None:
        recent = handle.record_crash(now, reason, self.settings.restart_window_s)
        if recent > self.settings.max_restarts_in_window:
            s = self.settings
            handle.backoff_s = (s.backoff_initial_s if handle.backoff_s is None
                                else min(handle.backoff_s * 2, s.backoff_max_s))
            handle.quarantined_until = now + handle.backoff_s
            handle.state = "quarantined"
            log.warning("space %s quarantined for %.0fs after %d crashes in %.0fs: %s",
                        handle.space16, handle.backoff_s, recent, s.restart_window_s, reason)
            message = self._quarantine_message(handle, now)
            for pending in list(handle.pending.values()):
                self._answer(handle, pending, error_reply(None, ErrorCode.QUARANTINED, message))
            return
        handle.state = "restarting"
        self.spawn(handle)
