"""A space that finds no room for its worker, while the only worker with no agent session
is busy or on its way out (kint/supervisor/room.py): the real supervisor under a low
`ulimit -n`, real workers for a few Sibyl stores, every worker but one (X) holding a
session.

- X, started for a first request that outlasts a beat (its store held locked by another
  process, so its `status` waits in SQLite's busy wait until the test lets the lock go,
  HELD_S): its beats say `has_work` every second meanwhile, and a space asking for room
  was refused BUSY at once, though X, its answer given, was idle a moment later. It now
  waits for X's beat after its work, and is served.
- X answering forever (a request always in flight): the space waited its whole deadline
  for X and was answered TIMEOUT, where it was refused BUSY at once before. The wait now
  has its own bound (room.SETTLE_S) and ends in the BUSY naming the limit.
- X already stopping as idle (held by a SIGSTOP within its stop grace): its exit frees
  the room, yet the space was refused BUSY meanwhile. It now waits for that exit.

And docs/faults.md says that bound in beats and seconds, from the code's values: it is no
setting, and the table said only "3 s (three beats)".
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from conftest import Sandbox, let_go_on, make_sandbox
from kint.client import KintError
from kint.supervisor.room import SETTLE_S
from support.limited_box import (fill_with_sessions, held_connections, idle_after_detach,
                                 in_thread, profile_stores, start_limited)
from support.locked_store import locked

# Room for a few workers: the supervisor keeps 16 + LIMIT/8 descriptors free, holds about
# 20 of its own and 3 for each worker.
LIMIT = 56
SPACES = 6
# X's idle exit (KINT_WORKER_IDLE_SECONDS): the workers with a session never take it.
# The test that stops X within it (SIGSTOP after a beat read past the detach) must read
# that beat, a second after the detach, and stop X before its exit: 3 s left a second or
# two for those status reads, a window a loaded box's reads can miss (as CI's did
# `_x_gone`'s, session 37), so it has 8 s, and a heartbeat timeout (HEARTBEAT_S) that
# leaves X, silent from its SIGSTOP, judged idle at 8 s and not hung first. The others
# only wait it out (`_x_gone`), and no step of theirs races it, so they take 1 s
# (KINT_WORKER_IDLE_SECONDS' least value).
IDLE_S = 8
HEARTBEAT_S = 60
X_GONE_IDLE_S = 1
# The first test's premise is that A waits for X's beat after its answer and is then
# served: X's status in flight as long as the test holds its store locked (the busy wait
# lengthened past it, KINT_TEST_STORE_BUSY_WAIT_S), and A's wait for it as long as that
# takes (room.SETTLE_S lengthened, KINT_TEST_SETTLE_S), both let go by the lock's release
# once A waits. With the defaults, X's status ended its 2 s busy wait on its own, and X's
# beats had to be read in flight and its answer land within SETTLE_S (3 s) of A's request:
# windows a loaded box could miss. The bound itself is the second test's, at its default.
HELD_S = 60
# A status that runs on the worker's pool, counted in flight by its beats (a plain one runs
# on the thread that beats): its read of the locked store fails first, BUSY, chain unasked.
ON_POOL = {"chain": True}


def _queued(sb: Sandbox, db: Path, said: dict) -> bool:
    """Whether the request for `db` was answered (`said`), or waits for room."""
    return bool(said) or any(r["store"] == str(db) and r["waiting"] == 1 and r["pid"] is None
                             for r in sb.sup_status()["spaces"])


def _box(tmp_path: Path, spare: int, idle_s: int = IDLE_S, timed: bool = False, **env: str
         ) -> tuple[Sandbox, list[Path], Path]:
    """The machine at its limit: the stores served (X first, its session ended) and the
    next one (A), which has no worker. `spare`: the clients connected at once when A asks,
    but one (A's own: fill_with_sessions); `idle_s`: the workers' idle exit; `env`: more
    of the machine's settings; `timed`: the test supervisor, which KINT_TEST_* timings
    in `env` reach (start_limited)."""
    sb = make_sandbox(tmp_path / "machine", KINT_WORKER_IDLE_SECONDS=str(idle_s), **env)
    dbs = profile_stores(sb, list(range(SPACES)))
    start_limited(sb, LIMIT, timed=timed)
    served = fill_with_sessions(sb, dbs, spare=spare)
    return sb, served, dbs[len(served)]


def _x_gone(sb: Sandbox, served: list[Path]) -> Path:
    """X's session ended, and its worker exited as idle: its store may now be locked (an
    open worker keeps SQLite's exclusive lock from being taken at all), and the next
    request for X starts a worker in the room it left. Only the exit is waited for, not a
    beat between the detach and it (idle_after_detach): with a 1 s idle exit that window
    is a second or two, which a loaded box's status reads missed (CI, session 37). X held
    a session until the detach, so no worker for it means the exit came after it."""
    x = served[0]
    sb.call("detach", x, args={"session": "agent-0"})
    sb.wait_for(lambda: sb.row(x)["pid"] is None, timeout=20, what="X's idle exit")
    return x


def test_a_space_waits_for_a_worker_whose_first_answer_outlasts_a_beat(tmp_path):
    hold = tmp_path / "hold-dispatch"
    sb, served, space_a = _box(tmp_path, spare=2, idle_s=X_GONE_IDLE_S,  # X's request, 1 more
                               timed=True, KINT_TEST_HOLD_DISPATCH=str(hold),
                               KINT_TEST_STORE_BUSY_WAIT_S=str(HELD_S),
                               KINT_TEST_SETTLE_S=str(HELD_S),
                               # The dispatch hold stops X's beats: not judged hung meanwhile.
                               KINT_WORKER_HEARTBEAT_TIMEOUT=str(HEARTBEAT_S))
    try:
        x = _x_gone(sb, served)
        with held_connections(sb, 1):
            # X's worker starts for a status, held as it reads it (KINT_TEST_HOLD_DISPATCH)
            # until the store is locked: its start's own reads of the store would wait on
            # the lock as long as the status does.
            hold.touch()
            x_thread, x_said = in_thread(lambda: sb.call("status", x, timeout_s=2 * HELD_S,
                                                         args=ON_POOL))
            sb.wait_for(lambda: Path(f"{hold}.reached").exists(), timeout=60,
                        what="X's worker started, its status read")
            with locked(x):
                hold.unlink()
                # X's status waits on the lock (SQLite's busy wait) until the block's end.
                sb.wait_for(lambda: sb.row(x)["ops_running"] >= 1, timeout=20,
                            what="a beat of X with its status in flight (has_work)")
                a_thread, a_said = in_thread(lambda: sb.call("status", space_a,
                                                             timeout_s=2 * HELD_S))
                sb.wait_for(lambda: _queued(sb, space_a, a_said), timeout=20,
                            what="A's request answered or waiting for room")
                # Once refused BUSY at once here: "no room to start the worker".
                assert "error" not in a_said, a_said
        for thread in (x_thread, a_thread):
            thread.join(60)
        assert x_said, "X's status was never answered"
        assert "answer" in a_said, a_said
        rows = {r["store"]: r for r in sb.sup_status()["spaces"]}
        assert rows[str(space_a)]["state"] == "ready", rows[str(space_a)]
        assert rows[str(x)]["pid"] is None, rows[str(x)]  # X was stopped for A
        for other in served[1:]:  # the spaces with sessions kept their workers
            assert rows[str(other)]["state"] == "ready", rows[str(other)]
    finally:
        sb.shutdown()


def test_a_space_is_refused_once_a_worker_that_answers_on_and_on_has_had_its_beats(tmp_path):
    sb, served, space_a = _box(tmp_path, spare=3, idle_s=X_GONE_IDLE_S)  # X's 2 callers, 1 more
    stop = threading.Event()

    def keep_x_answering() -> None:
        # Over one connection: a BUSY comes back at once, and a connection a call made
        # closes behind it in ZeroMQ's own threads, which on a loaded box lag the next
        # calls': the supervisor held a growing crowd of them, past its door's margin.
        with sb.client() as client:
            while not stop.is_set():
                try:
                    client.call("status", tenant=sb.tenant, db=str(x), space=sb.label(x),
                                timeout_s=30, args=ON_POOL)
                except KintError:
                    pass  # BUSY (the store is locked): the next one goes at once

    try:
        x = _x_gone(sb, served)
        with held_connections(sb, 1), locked(x):
            callers = [threading.Thread(target=keep_x_answering, daemon=True)
                       for _ in range(2)]  # one always in flight while the other turns
            for caller in callers:
                caller.start()
            sb.wait_for(lambda: sb.row(x)["ops_running"] >= 1, timeout=20,
                        what="a beat of X with a status in flight")
            try:
                sb.call("status", space_a, timeout_s=4 * SETTLE_S + 8)
                raise AssertionError("A served while X never stopped answering")
            except KintError as err:
                refusal = err
            stop.set()
            for caller in callers:
                caller.join(60)
        # Once answered TIMEOUT at its deadline ("waiting for room ..."): X is forever
        # answering, so the wait for it would never end otherwise.
        assert refusal.code == "BUSY", refusal
        assert refusal.message.startswith("no room to start the worker"), refusal.message
        assert "ulimit -n" in (refusal.hint or ""), refusal.hint
        assert sb.row(x)["restarts"] == 0, sb.row(x)
    finally:
        stop.set()
        sb.shutdown()


def test_a_space_waits_for_a_worker_already_stopping_as_idle(tmp_path):
    sb, served, space_a = _box(tmp_path, spare=2,  # two more than A's request
                               KINT_WORKER_HEARTBEAT_TIMEOUT=str(HEARTBEAT_S))
    held = None
    try:
        x = served[0]
        held = idle_after_detach(sb, x, "agent-0")
        os.kill(held, signal.SIGSTOP)  # kept from exiting once it is told to stop
        sb.wait_for(lambda: sb.row(x)["state"] == "stopping", timeout=20,
                    what="X stopped as idle")
        with held_connections(sb, 2):
            a_thread, a_said = in_thread(lambda: sb.call("status", space_a, timeout_s=30))
            sb.wait_for(lambda: _queued(sb, space_a, a_said), timeout=20,
                        what="A's request answered or waiting for room")
            # Once refused BUSY here, though X's exit (within its stop grace) frees room.
            assert "error" not in a_said, a_said
            os.kill(held, signal.SIGCONT)
            a_thread.join(60)
        assert "answer" in a_said, a_said
        row = sb.row(space_a)
        assert row["state"] == "ready" and row["no_room"] is None, row
        assert sb.row(x)["pid"] is None and sb.row(x)["restarts"] == 0, sb.row(x)
    finally:
        let_go_on(held)
        sb.shutdown()


def test_the_faults_page_says_what_a_queued_space_waits_in_beats_and_seconds():
    """SETTLE_S is a constant, not a setting: docs/faults.md (its section "More spaces than
    the supervisor's open files allow") says it in beats and seconds, and when the refusal
    comes (the sweep that looks again), from the code's own values."""
    from kint.protocol.worker_wire import BEAT_SECONDS
    from kint.supervisor.settings import Settings

    # Its whitespace as one space: the page wraps its sections' prose across lines.
    faults = " ".join((Path(__file__).parent.parent / "docs" / "faults.md").read_text().split())
    beats = {3: "three"}[round(SETTLE_S / BEAT_SECONDS)]
    tick = Settings().tick_s
    assert (f"have answered on for {SETTLE_S:g} s ({beats} beats of a worker at work, one a "
            f"second)") in faults
    assert "that bound is fixed, not a setting" in faults
    assert (f"(every {tick:g} s), so it is refused within {SETTLE_S + tick:g} s ({beats} "
            f"beats and a sweep)") in faults
