"""One `WorkerHandle` per space: the worker process, its last heartbeat, its requests,
and the rules of its lifecycle (README, "How it runs").

The rules, in one place:
- A crash restarts that space's worker alone (one_for_one, transient).
- More than `max_restarts_in_window` crashes in `restart_window_s` quarantines the space;
  it is retried after a backoff that doubles (30 s to 10 min) and never gives up for good.
- A commanded stop, a restart by command, or an idle exit is not a crash; nor is a start
  the worker refuses because an older worker of the space still runs (its requests are
  answered with the refusal, and the next request tries again).
- A stop of the supervisor's own choosing (the idle exit, a recycle for memory) is
  decided only on a beat read after the worker's last request and answer
  (`beat_tells_after_work`): the beat is where sessions attached and work left show.
- No beat for `heartbeat_timeout_s` is a hang: the worker is declared down at once (the
  requests it was sent are answered WORKER_DOWN, and nothing it sends after is believed),
  then SIGTERM with a SIGCONT, and SIGKILL after a grace. The silence is counted only
  while the supervisor itself ran: after a pause of its own it gives every worker a full
  timeout from its resume (`excuse_silence`), the time to be heard again, so a stopped
  supervisor never finds its whole fleet hung; a stop's or a kill's grace running across
  that pause is given whole again from the resume too (`grace_over`), and so is the quiet
  an idle exit or a recycle waits for (`quiet_for`).

All times are `time.monotonic()`; wall-clock time is used for display only.
"""

from __future__ import annotations

import collections
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from kint.protocol.worker_wire import BEAT_SECONDS, MAX_OPS_NAMED, beat_seconds_in_range

State = Literal["starting", "ready", "busy", "hung", "restarting", "quarantined", "idle",
                "stopping", "stopped"]
StopReason = Literal["idle", "recycle", "stop", "restart", "upgrade"]

# Past the beat a worker said would be its next, this long without one is worth saying
# in a TIMEOUT or a status row.
SILENT_MARGIN_S = 0.5

# States in which the space is serving or can serve on demand.
HEALTHY_STATES = frozenset({"starting", "ready", "busy", "idle"})
# States in which the worker takes requests.
SERVING_STATES = frozenset({"ready", "busy"})


def ops_in_flight(beat: dict[str, Any], since: float) -> list[dict[str, Any]]:
    """Every op the last beat named as in flight, oldest first, each `name` and `age_s` as
    of now (at most MAX_OPS_NAMED; `ops_running` counts them all). An item not shaped as
    a worker makes it is left out: the beat is checked field by field, not item by item."""
    named = []
    for item in beat.get("ops") or []:
        if (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], (int, float)) and not isinstance(item[1], bool)):
            named.append({"name": item[0], "age_s": round(float(item[1]) + since, 3)})
    return named[:MAX_OPS_NAMED]


class StartRefusal(NamedTuple):
    """A start the worker refused: the code and hint its space's requests get, and the pid
    of the worker holding the space, None when nobody could name it. One for want of open
    files under its limit keeps the supervisor's soft limit then (`limit`, which the worker
    inherited): a higher one is what mends it (room.py's sweep)."""

    code: str
    hint: str
    holder_pid: int | None
    limit: int | None = None


@dataclass(slots=True)
class Pending:
    """A request forwarded to (or waiting for) a worker, under the supervisor's own id;
    `body` is the request's frame as the client sent it."""

    internal_id: str
    client: bytes | None  # the front socket identity; None for a cast
    client_id: str
    op: str
    deadline: float
    timeout_ms: int
    body: bytes
    forwarded: bool = False


@dataclass
class WorkerHandle:
    space_id: str
    label: str
    tenant: str
    db: str
    state: State = "idle"
    process: Any = None
    pid: int | None = None
    # This spawn's secret and the DEALER identity derived from it (kint.protocol.worker_wire).
    token: bytes | None = field(default=None, repr=False)
    route: bytes | None = field(default=None, repr=False)
    spawned_at: float | None = None
    hello_at: float | None = None
    last_beat_at: float | None = None
    # When the supervisor last resumed from a pause of its own: silence before that is not
    # the worker's.
    excused_until: float | None = None
    beat: dict[str, Any] = field(default_factory=dict)
    last_activity: float = field(default_factory=time.monotonic)
    stop_reason: StopReason | None = None
    # When this space's worker was last replaced for its memory (KINT_WORKER_RECYCLE_MIB).
    recycled_at: float | None = None
    stop_deadline: float | None = None
    kill_at: float | None = None
    hung_reason: str | None = None
    fatal_reason: str | None = None
    # The start the worker refused (another worker of the space still holds it:
    # kint.tenant_worker.worker_lock): its requests are answered with its code and hint,
    # no restart follows, and `kint supervisor status` shows it until the next spawn.
    start_refused: StartRefusal | None = None
    # The worker exited with a code that says it sent its reason (`fatal`), not read yet:
    # until when (monotonic) its exit's handling waits for it (exit_hold.py). Its process
    # is gone meanwhile, and its pid may be another process's: no signal is sent to it.
    held_until: float | None = None
    crash_times: collections.deque[float] = field(default_factory=collections.deque)
    restarts: int = 0
    last_exit: str | None = None
    quarantined_until: float | None = None
    # Why the last spawn did not happen: the supervisor had no file descriptors to spare
    # (kint/open_files.py). Not a crash; cleared by the next spawn.
    no_room: str | None = None
    # The workers alive and the limit when it was refused: the refusal is forgotten once
    # fewer run or the limit rose, not when a client's connection closing frees a
    # descriptor or two (room.py's sweep).
    no_room_seen: tuple[int, int] | None = None
    backoff_s: float | None = None
    retry_started_at: float | None = None
    pending: dict[str, Pending] = field(default_factory=dict)
    # Requests an earlier worker of the space was sent and had not answered at its clean
    # exit, waiting for its last replies (last_words.py's `Unreplied` keeps the count):
    # they wait as much as those in `pending`, and count towards the space's bound.
    parked: int = 0
    # Requests sent to this spawn of the worker (`TimedWork._forward`); its beats say how
    # many it took (`beat_tells_after_work`).
    sent: int = 0

    @property
    def space16(self) -> str:
        return self.space_id[:16]

    @property
    def alive(self) -> bool:
        return self.process is not None

    def waiting(self) -> int:
        """The space's requests not answered yet: its own, and those parked on an exited
        worker's last replies (`parked`), which MAX_WAITING_PER_SPACE bounds together."""
        return len(self.pending) + self.parked

    def queued(self) -> list[Pending]:
        return [p for p in self.pending.values() if not p.forwarded]

    def doing(self, now: float) -> str:
        """What the worker is doing, in words, for a TIMEOUT message or a status row."""
        if self.state == "hung":
            return f"hung ({self.hung_reason})"
        if self.state == "starting":
            return "starting"
        if self.state == "quarantined":
            return "quarantined"
        if (self.last_beat_at is not None
                and now - self.last_beat_at > self.beat_every_s() + SILENT_MARGIN_S):
            return f"silent: no heartbeat for {now - self.last_beat_at:.1f}s"
        op = self.beat.get("op")
        if op:
            since = now - self.last_beat_at if self.last_beat_at is not None else 0.0
            age = (self.beat.get("op_age_s") or 0.0) + since
            return f"running {op} for {age:.1f}s{self._others(since)}"
        return self.state

    def _others(self, since: float) -> str:
        """The ops in flight beside the oldest, for `doing`: a TIMEOUT of a verify sent
        while a restore runs says the verify runs too, not only the restore."""
        others = ops_in_flight(self.beat, since)[1:]
        count = int(self.beat.get("inflight") or 0) - 1
        if count <= 0 or not others:
            return ""
        said = ", ".join(f"{o['name']} for {o['age_s']:.1f}s" for o in others)
        more = count - len(others)
        return f" (and {said}{f' and {more} more' if more > 0 else ''})"

    # -- lifecycle decisions ---------------------------------------------------------------

    def beat_every_s(self) -> float:
        """When the worker's last beat said the next would come (every second before it
        said anything), held to the cadences a worker may have (1 to 3 s): the hung limit
        grows with it, and no beat may put a worker out of reach of that judgement."""
        every = self.beat.get("every_s")
        if not every:
            return BEAT_SECONDS
        return beat_seconds_in_range(float(every))

    def silent_for(self, now: float) -> float | None:
        """How long the worker has said nothing while the supervisor was listening: since
        its last beat (or its spawn, before its hello), or since the supervisor's own
        resume when that is later."""
        since = self.last_beat_at if self.last_beat_at is not None else self.spawned_at
        if since is None:
            return None
        if self.excused_until is not None:
            since = max(since, self.excused_until)
        return now - since

    def heard(self, now: float) -> None:
        """A hello or a beat arrived."""
        self.last_beat_at = now

    def quiet_for(self, now: float) -> float:
        """How long no request or answer passed while the supervisor listened: since the
        last one, or since the supervisor's own resume when that is later. The requests
        clients sent during its pause wait unread on its socket, so the pause is no sign
        that nobody asked: counted as quiet, the first sweep after a long Ctrl-Z stopped as
        idle (or recycled) workers whose requests were next in line."""
        since = self.last_activity
        if self.excused_until is not None:
            since = max(since, self.excused_until)
        return now - since

    def worked(self, now: float) -> None:
        """A request for the worker arrived, or its answer came back: the quiet the idle
        exit and the recycle wait for counts from here."""
        self.last_activity = now

    def beat_tells_after_work(self) -> bool:
        """Whether the last beat read tells what the worker's last work left behind: it was
        read after the last request arrived and after the last answer came back, and the
        worker made it once it had taken every request sent to it. Only such a beat may
        decide a stop (the idle exit, a recycle): a session's attach, or a write that
        dirtied the store, shows in the beats that follow its answer, and a worker beats up
        to `idle_beat_s` apart, so one judged on an older beat could be stopped with a
        session just attached. A beat and a reply travel on the worker's one socket in the
        order it sent them, so a beat read after the answer was made after it. A request
        travels the other way: a beat read after it arrived may have been made before the
        worker read it, and once the request is answered TIMEOUT nothing else shows it
        still reaching the worker; the count of requests taken does."""
        return (self.last_beat_at is not None and self.last_beat_at > self.last_activity
                and (self.beat.get("taken") or 0) >= self.sent)

    def excuse_silence(self, now: float) -> None:
        """The supervisor itself did not run until `now`: the worker's silence counts from
        here, and so does what is left of a grace it was given (`grace_over`). (Taking off
        only the pause would leave a worker that had been quiet for most of a beat before
        it too little time to be heard again once both resume.)"""
        self.excused_until = now

    def grace_over(self, deadline: float, grace_s: float, now: float) -> bool:
        """Whether a grace of `grace_s` that ends at `deadline` (a commanded stop's before
        its SIGKILL, or a hung worker's after its SIGTERM) is over at `now`. After a pause
        of the supervisor's own the worker has the whole grace again from the resume: the
        pause may have stopped it too (a Ctrl-Z stops a foreground supervisor's whole
        process group), and a worker stopping with a push in flight was otherwise
        SIGKILLed at the first sweep after `fg`, before it had run a moment."""
        if self.excused_until is not None:
            deadline = max(deadline, self.excused_until + grace_s)
        return now >= deadline

    def record_crash(self, now: float, reason: str, window_s: float) -> int:
        self.restarts += 1
        self.last_exit = reason
        self.crash_times.append(now)
        while self.crash_times and now - self.crash_times[0] > window_s:
            self.crash_times.popleft()
        return len(self.crash_times)

    def terminate(self) -> None:
        """SIGTERM, then SIGCONT: a stopped process (SIGSTOP, a debugger) does not run its
        SIGTERM handler until it is continued, so without the SIGCONT a stopped worker
        waited for the SIGKILL after the kill grace instead of exiting at once on its own.
        A worker that was not stopped ignores the SIGCONT."""
        self.signal(signal.SIGTERM)
        self.signal(signal.SIGCONT)

    def signal(self, sig: signal.Signals) -> None:
        if self.pid is None or self.held_until is not None:
            return
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass


# The hint of a request a stopping supervisor refuses before its worker got it
# (STOPPING_HINT, kint/front_closed.py, which a client names too), and of one its worker
# had not finished when it exited: nothing is left running, and the next call starts a
# supervisor again.
STOPPED_MID_OP_HINT = ("the supervisor was stopped before the worker finished; `kint status` "
                       "shows where the space stands, and the next call starts a new "
                       "supervisor")


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "exited (status unknown)"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


def live_sessions(beat: dict[str, Any]) -> int:
    """The agent sessions the worker's last beat said were attached (a field the beat's
    decoder checked is an int or None)."""
    return beat.get("sessions") or 0
