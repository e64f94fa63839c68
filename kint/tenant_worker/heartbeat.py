"""The worker's heartbeat: what a beat says, and when the next one is due.

Why a module of its own: the supervisor judges a worker only by its beats (busy, idle,
hung, ready to stop or to recycle), so their cadence and their content are one concern,
apart from the loop that sends them. A worker beats every second while it works and for
`idle_beat_s` after, then every `idle_beat_s`; each beat says when the next is due, and a
request, or an answer, makes the next one due within a second. A beat never reads the
store: the unanchored count it carries is the last one an op made, and when the store or
the head moved since, the beat starts a recount on the pool (kint.tenant_worker.unanchored);
so too, every minute, a look for another KINT_HOME's worker on the store (store_sharers).

`Heartbeat` is one of the parts kint.tenant_worker.process.Worker is made of; the
attributes it reads are the worker's, named below.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

import zmq

from kint.protocol import worker_wire
from kint.tenant_worker.push_settings import differing
from kint.tenant_worker.statefiles import Mirror
from kint.tenant_worker.store_sharers import still_sharing

if TYPE_CHECKING:
    from kint.tenant_worker.config import WorkerConfig
    from kint.tenant_worker.op_pool import OpPool
    from kint.tenant_worker.op_replies import InFlight
    from kint.tenant_worker.own_memory import MemoryReading
    from kint.tenant_worker.space import SpaceContext
    from kint.tenant_worker.store_sharers import LaterLooks
    from kint.tenant_worker.wake_pipe import WakePipe

# How long after a session's lapse the beat that no longer counts it comes: past the
# lapse, so that the beat surely forgets it.
SESSION_LAPSE_MARGIN_S = 0.05


class Heartbeat:
    """The beats of a worker: their cadence (`_next_beat`, `_active_at`, `_beat_wanted`,
    all the main thread's but the flag) and their message."""

    # The worker's, set in its __init__.
    config: WorkerConfig
    ctx: SpaceContext
    inflight: InFlight
    memory: MemoryReading
    pool: OpPool
    sharing: LaterLooks
    stopping: bool
    _taken: int
    _active_at: float
    _next_beat: float
    _beat_wanted: bool
    wake_pipe: WakePipe
    _send: Callable[..., None]

    def _beat(self, now: float) -> None:
        """One beat, never waited on: while the supervisor does not read (it is stopped,
        say) and the queue to it is full, a beat is skipped, not queued behind the rest.
        The next is due in a second while the worker works (an op in flight, or a push
        the store watcher started, which shows as progress) or worked lately, else in
        `idle_beat_s`."""
        count, op, age = self.inflight.snapshot()
        idle_s = self.config.idle_beat_s
        working = count or self.ctx.progress is not None or now - self._active_at < idle_s
        every = worker_wire.BEAT_SECONDS if working else idle_s
        self._next_beat = now + every
        message, recount = self._beat_message(now, count, op, age, every)
        # A session that lapses (its kint-server gone without a goodbye) frees the worker
        # for its idle exit with no request or answer to bring a beat: the beat that says
        # so comes as it lapses, not up to an idle beat later.
        lapses_at = self.ctx.session_lapses_at()
        if lapses_at is not None:
            self._next_beat = min(self._next_beat, max(now, lapses_at) + SESSION_LAPSE_MARGIN_S)
        try:
            self._send(message, zmq.NOBLOCK)
        except zmq.Again:
            pass
        if recount:
            self.pool.submit(self._recount)
        if self.sharing.due(now):  # another home's worker on the store, started since
            self.pool.submit(self.sharing.look)

    def beat_soon(self) -> None:
        """From any thread: beat at the loop's next turn. For work that ends with no
        request or answer (the store watcher's push settling the store): the supervisor
        stops an idle worker only on a beat, and this one would otherwise wait for the
        idle cadence. The flag goes before the byte, so the turn that reads the byte
        finds it."""
        self._beat_wanted = True
        self.wake_pipe.wake()  # nothing once closed: an op outliving the stop grace

    def _busy_now(self) -> None:
        """A request went to the pool or its reply came back: beat within a second."""
        self._active_at = now = time.monotonic()
        self._next_beat = min(self._next_beat, now + worker_wire.BEAT_SECONDS)

    def _beat_message(self, now: float, count: int, op: str | None, age: float | None,
                      every: float) -> tuple[dict[str, Any], bool]:
        """The beat, and whether to start a recount of the unanchored rows on the pool (the
        store or the head moved since the last count: unanchored.py). This thread never
        reads the store: a few stats and the mirror as cached."""
        mirror = self._mirror()
        quiet = not count and self.ctx.progress is None and not self.stopping
        unanchored, recount = self.ctx.unanchored.at_beat(now, self.config.db, mirror, quiet)
        watcher = self.ctx.watcher
        sessions = self.ctx.live_sessions()
        return {"kind": "beat", "state": {
            "op": op, "op_age_s": round(age, 3) if age is not None else None,
            "inflight": count, "ops": self.inflight.named(worker_wire.MAX_OPS_NAMED),
            "rpc": self.ctx.tracker.beat(self.ctx.endpoints),
            "head": ({"seq": mirror.head.seq, "block": mirror.head.block}
                     if mirror is not None else None),
            **unanchored,
            "held": self.ctx.drift.held.to_json() if self.ctx.drift.held else None,
            "watcher_failure": watcher.backoff.for_beat(now) if watcher is not None else None,
            # Why the watcher cannot count the store's unanchored rows (the file named).
            "watcher_uncounted": (watcher.counting.for_beat(now)
                                  if watcher is not None else None),
            # What the watcher's pushes take from a session, where not the worker's own.
            "watcher_settings": differing(self.ctx) or None,
            "has_work": self._has_work(count, sessions),
            # Agent sessions attached: they keep the worker from an idle stop, not from a
            # recycle, which hands them to its successor (session_handoff.py).
            "sessions": sessions,
            # Another home's workers on the store, as the last look found them: `kint
            # supervisor status` shows it as `kint status` does (nothing read on a box
            # with no sharing found).
            "store_shared": still_sharing(self.config.db, self.config.kint_home),
            # An op's, or a push the store watcher started with no op in flight; which
            # op's, and how long ago that op began.
            **self._progress(now),
            "own_mib": self.memory.at_beat(time.monotonic(), count),
            "every_s": every,
            "taken": self._taken,
        }}, recount

    def _progress(self, now: float) -> dict[str, Any]:
        """The progress line, the op it belongs to and that op's age, read together: a
        client shows the line only when that op began after it sent its call
        (kint.client.Client.progress_line). The op is read before and after the line (each
        op's is a new tuple): an op that ended and the next one that began and said its
        first line between two reads would otherwise label the old op's last line as the
        new op's, and a client of the new op would show it. Such a beat names no op."""
        began = self.ctx.head_op_began
        line = self.ctx.progress
        if began is None or line is None or self.ctx.head_op_began is not began:
            return {"progress": line, "progress_op": None, "progress_age_s": None}
        return {"progress": line, "progress_op": began[0],
                "progress_age_s": round(max(0.0, now - began[1]), 3)}

    def _recount(self) -> None:
        """The unanchored rows counted on a pool thread, for the beats to come. Not an op:
        not in flight, not activity (an idle worker still exits); its memory is measured
        again after it, as an op's."""
        try:
            self.ctx.unanchored.recount(self.ctx)
        finally:
            self.memory.worked()

    def _has_work(self, inflight: int, sessions: int) -> bool:
        """Work this worker must finish before any stop: ops in flight, a push to finish,
        or a dirty store the watcher has yet to push (or whose push is held or waits to
        be tried again), unless its count fails for good and no session is attached
        (watcher.work_left: no work this worker can finish). Attached sessions are not
        work otherwise: the beat counts them apart."""
        watcher = self.ctx.watcher
        return bool(inflight or self.ctx.state.files["pending"].exists()
                    or (watcher is not None and watcher.work_left(sessions)))

    def _mirror(self) -> Mirror | None:
        """The mirror as last saved (cached by the file's identity: a stat a beat)."""
        try:
            return self.ctx.state.mirror()
        except Exception:  # noqa: BLE001 - a corrupt mirror is reported by the ops, not here
            return None
