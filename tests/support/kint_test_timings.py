"""Lets a test shorten a fixed timing of kint's that no setting reaches, so that it waits
seconds where a user's worker waits its default, and nothing else changes. Preloaded into
the worker forkserver by the test supervisor (run_supervisor.py), which also calls
`install_supervisor` in its own process; the test command launcher (run_kint.py) calls
`install_cli`.

- `KINT_TEST_RECOUNT_INTERVAL_S` (set only by tests): the least time between two recounts
  of a space's unanchored rows for the heartbeat
  (`kint.tenant_worker.unanchored.RECOUNT_MIN_INTERVAL_S`, 5 s). Its other bound, a multiple
  of the last recount's duration, stays as it is.
- `KINT_TEST_QUIET_SECONDS` (set only by tests): how long a worker is quiet after work
  before it reads its own memory, and the supervisor before it recycles a worker over
  KINT_WORKER_RECYCLE_MIB (`kint.tenant_worker.own_memory.QUIET_SECONDS`, 5 s, which
  `kint.supervisor.lifecycle` imports by name).
- `KINT_TEST_SIZE_CHECK_INTERVAL_S` (set only by tests): the least time between two of the
  store watcher's size checks while the store is dirty
  (`kint.tenant_worker.watcher.SIZE_CHECK_INTERVAL_S`, 60 s), so a test sees the size
  trigger within seconds.
- `KINT_TEST_UNREACHABLE_AFTER_S` (set only by tests): how long a command waits on a
  supervisor that holds the home, says it serves and does not answer, before it says so
  (`kint.supervisor.autostart.UNREACHABLE_AFTER_S`, 10 s). A command reads it only when
  started by tests/support/run_kint.py, which calls `install_cli`.
- `KINT_TEST_STOP_EXIT_WAIT_S` (set only by tests): how long `kint supervisor stop` waits,
  once the supervisor answered the stop, for its process to be gone before it says TIMEOUT
  (`kint.commands.supervisor_stop.STOP_EXIT_WAIT_S`, 10 s). Read as the one above.
- `KINT_TEST_START_WAIT_S` (set only by tests): how long `kint supervisor start` waits for
  a supervisor to answer, one stopping beside it included
  (`kint.supervisor.autostart.START_WAIT_S`, 30 s), and so any start the command's client
  makes. Read as the one above.
- `KINT_TEST_STOP_BOUND_S` (set only by tests): how long a command's wait must have seen
  a supervisor stopping before it says the stop has not ended, with `kill -KILL`
  (`kint.supervisor.autostart.STOP_BOUND_S`, the most a stop takes: 20 s). Read as the one
  above.
- `KINT_TEST_SECOND_OPINION_S` (set only by tests): how long a cold start waits before it
  asks the second endpoint again when the two disagree on the head
  (`kint.tenant_worker.cold_start.SECOND_OPINION_RETRY_S`, 3 s), where a test's endpoint
  disagrees on purpose, every time.
- `KINT_TEST_PID_LOCK_RETRY_S` (set only by tests): how long a supervisor starting keeps
  trying for a pid lock that clients' shared looks hold before it says one is already
  running (`kint.supervisor.pidlock.PID_LOCK_RETRY_S`, 3 s; another supervisor's lock is
  refused at once), for a `kint supervisor start --foreground` started through run_kint.py
  next to a running supervisor or a held look (lengthened there, so that a loaded box never
  ends the retry before the test has seen it retry).
- `KINT_TEST_PID_NAMED_S` (set only by tests): how long a supervisor refused the pid lock
  looks again for a live pid in the pid file to name (`kint.supervisor.pidlock.
  NAMED_WITHIN_S`, 1 s), lengthened so that a loaded box never ends the look before the
  test has written the holder's pid (tests/test_pid_lock_loser.py).
- `KINT_TEST_HOUSEKEEPING_S` (set only by tests): how often the supervisor checks its logs'
  size and kint's installed files (`kint.supervisor.housekeeping.HOUSEKEEPING_EVERY_S`,
  5 s), so that a test sees a log rotated, or an upgrade on disk, within a second. Read by
  the test supervisor, and by a `kint supervisor start --foreground` started through
  run_kint.py (the supervisor then runs in the command's own process).
- `KINT_TEST_STORE_BUSY_WAIT_S` (set only by tests): how long a worker's read of Sibyl's
  store waits on another process's lock before it fails (SQLite's busy timeout: 2 s for a
  count or check, `kint.tenant_worker.store.READ_BUSY_WAIT_S`; 5 s for a read of the rows,
  `kint.rows.export.READ_BUSY_WAIT_S`; both take the value), so that a test whose store
  another process keeps locked meets BUSY without waiting the defaults out at every read.
- `KINT_TEST_BEAT_SECONDS` (set only by tests): how often a worker beats while it works,
  and how soon after a request or an answer its next beat comes at the latest
  (`kint.protocol.worker_wire.BEAT_SECONDS`, 1 s), in the worker only: longer, it holds
  the first beat after a session's attach back past a short KINT_WORKER_IDLE_SECONDS, so a
  test sees, every time, what the supervisor does between that attach and that beat. The
  supervisor keeps its own cadences and hung limit (10 s by default, over this).
- `KINT_TEST_POLL_MINIMUM_S` (set only by tests): the least value KINT_POLL_SECONDS may
  take (the setting's own minimum in `kint.settings.schema`, 1 s), in the worker, the
  supervisor and a command, so that a test's KINT_POLL_SECONDS of a fraction of a second
  is the store watcher's tick rather than raised to 1 s: a test whose steps each wait for
  a tick or two waits a fraction of a second per tick. A kint-server session sends the
  value as text and the worker parses it, so that process needs nothing. The watcher's
  other timings (quiet, push retry, size check) stay what the settings say.
- `KINT_TEST_LOG_RETRY_S` (set only by tests): how long a pull's history walk waits before
  it asks once more for an Epoch event the endpoint refused
  (`kint.tenant_worker.walk_history.LOG_RETRY_S`, 1 s), in the worker, where a test's
  endpoint refuses on purpose and the second ask, not the pause, is what it checks.
- `KINT_TEST_SHARING_LOOK_S` (set only by tests): how long a running worker waits between
  two looks for another KINT_HOME's worker on its store
  (`kint.tenant_worker.store_sharers.LOOK_EVERY_S`, 60 s), in the worker, so that a test
  sees a worker that started first learn of a later one within a second.
- `KINT_TEST_LAST_REPLY_GRACE_S` (set only by tests): how long the supervisor waits, after
  a worker stopped on command exited, for the replies it sent before its exit
  (`kint.supervisor.last_words.LAST_REPLY_GRACE_S`, 1 s), so that a test whose reply comes
  late on purpose (KINT_TEST_LATE_REPLY) is not at the mercy of a loaded box.
- `KINT_TEST_REASON_GRACE_S` (set only by tests): how long the supervisor holds the exit of
  a worker that said it sent its reason, for that reason
  (`kint.supervisor.exit_hold.REASON_GRACE_S`, 0.5 s), so that a test whose reason comes
  just after the exit on purpose (KINT_TEST_LATE_FATAL's `soon`) is inside the hold even
  when its sender stalls on a loaded box.
- `KINT_TEST_EXIT_BOUND_S` and `KINT_TEST_EXIT_EPOCH_ROOM_S` (set only by tests): the exit
  push's bound as the worker keeps it (`kint.tenant_worker.exit_bound.EXIT_BOUND_S`, 900 s),
  and the room it keeps for one epoch before it, whatever the push's chain settings
  (`exit_bound.epoch_room`, replaced by a function giving that number: about 300 s at the
  default KINT_RPC_TIMEOUT; `kept_room` still caps it at half the bound), in the worker, so
  that a test sees an exit push stop between two epochs at its bound within seconds, its
  first epoch started however slowly the box brings it there. Its wait for the turn
  (`EXIT_TURN_S`) and the supervisor's bound stay.
- `KINT_TEST_DOCTOR_CALL_S` (set only by tests): the most `kint doctor` waits for one of
  its chain calls whatever KINT_RPC_TIMEOUT says
  (`kint.tenant_worker.doctor_chain.DOCTOR_CALL_S`, 12 s), in the worker, so that a test
  whose endpoint never answers sees the cap said without waiting 12 s a call.
- `KINT_TEST_STOP_GRACE_S` (set only by tests): how long a stopping worker waits for its
  ops in flight, and the store watcher's push, before it exits anyway
  (`kint.tenant_worker.stop_grace.STOP_GRACE_SECONDS`, 10 s), in the worker; and in the
  supervisor, how long a commanded stop waits before its SIGKILL (`Settings.stop_grace_s`,
  15 s), set to that value and the 5 s the defaults keep between the two, so that the
  worker's own grace, not the supervisor's SIGKILL, ends a stop, as it does by default. A
  test whose premise must fit in a stopping worker's grace gives it room there on a slow
  box, where 10 s could run out before the step it waits for. It leaves stop_grace's
  ORPHAN_EXIT_S (bound at import from the 10 s) as it is.
- `KINT_TEST_SETTLE_S` (set only by tests): how long a space waits for a running worker
  answering, or owing its beat after work, before it is refused BUSY for want of room
  (`kint.supervisor.room.SETTLE_S`, 3 s), in the supervisor, so that a test whose premise
  is that the space waits for that beat, and is served after it, does not also need the
  worker's answer to land within 3 s of the space's request on a loaded box.

Unset, nothing changes; kint's own code reads none of this.
"""

from __future__ import annotations

import importlib
import os

RECOUNT_ENV = "KINT_TEST_RECOUNT_INTERVAL_S"
QUIET_ENV = "KINT_TEST_QUIET_SECONDS"
SIZE_CHECK_ENV = "KINT_TEST_SIZE_CHECK_INTERVAL_S"
UNREACHABLE_ENV = "KINT_TEST_UNREACHABLE_AFTER_S"
STOP_EXIT_WAIT_ENV = "KINT_TEST_STOP_EXIT_WAIT_S"
START_WAIT_ENV = "KINT_TEST_START_WAIT_S"
STOP_BOUND_ENV = "KINT_TEST_STOP_BOUND_S"
HOUSEKEEPING_ENV = "KINT_TEST_HOUSEKEEPING_S"
PID_LOCK_RETRY_ENV = "KINT_TEST_PID_LOCK_RETRY_S"
PID_NAMED_ENV = "KINT_TEST_PID_NAMED_S"
SECOND_OPINION_ENV = "KINT_TEST_SECOND_OPINION_S"
STORE_BUSY_WAIT_ENV = "KINT_TEST_STORE_BUSY_WAIT_S"
BEAT_ENV = "KINT_TEST_BEAT_SECONDS"
POLL_MINIMUM_ENV = "KINT_TEST_POLL_MINIMUM_S"
LOG_RETRY_ENV = "KINT_TEST_LOG_RETRY_S"
SHARING_LOOK_ENV = "KINT_TEST_SHARING_LOOK_S"
LAST_REPLY_GRACE_ENV = "KINT_TEST_LAST_REPLY_GRACE_S"
REASON_GRACE_ENV = "KINT_TEST_REASON_GRACE_S"
DOCTOR_CALL_ENV = "KINT_TEST_DOCTOR_CALL_S"
STOP_GRACE_ENV = "KINT_TEST_STOP_GRACE_S"
EXIT_BOUND_ENV = "KINT_TEST_EXIT_BOUND_S"
EPOCH_ROOM_ENV = "KINT_TEST_EXIT_EPOCH_ROOM_S"
SETTLE_ENV = "KINT_TEST_SETTLE_S"
# What the supervisor's stop grace is given over the worker's (15 s over 10 s by default).
SUPERVISOR_STOP_GRACE_OVER_S = 5.0


def _set_from_env(env: str, module: str, name: str) -> None:
    """`module.name` = the float in `env`, when the test set it (the module imported only then)."""
    raw = os.environ.get(env)
    if raw:
        setattr(importlib.import_module(module), name, float(raw))


def _lower_poll_minimum() -> None:
    """KINT_POLL_SECONDS's minimum, lowered to KINT_TEST_POLL_MINIMUM_S when the test set
    it, through kint's own hook (`kint.settings.schema.lower_minimum`), before any value
    is read: the loader, the wire and the config file's check all read the lowered rule."""
    raw = os.environ.get(POLL_MINIMUM_ENV)
    if raw:
        from kint.settings.schema import BY_NAME, lower_minimum

        if float(raw) < (BY_NAME["KINT_POLL_SECONDS"].minimum or 0.0):  # once a process
            lower_minimum("KINT_POLL_SECONDS", float(raw))


def _fixed_epoch_room() -> None:
    """`exit_bound.epoch_room` gives KINT_TEST_EXIT_EPOCH_ROOM_S whatever the chain, when
    the test set it: the room is worked out from the push's own settings at each epoch, so
    the function, not a module value, is what a test replaces."""
    raw = os.environ.get(EPOCH_ROOM_ENV)
    if raw:
        module = importlib.import_module("kint.tenant_worker.exit_bound")
        setattr(module, "epoch_room", lambda chain: float(raw))


def _install_worker() -> None:
    _set_from_env(RECOUNT_ENV, "kint.tenant_worker.unanchored", "RECOUNT_MIN_INTERVAL_S")
    _set_from_env(QUIET_ENV, "kint.tenant_worker.own_memory", "QUIET_SECONDS")
    _set_from_env(SIZE_CHECK_ENV, "kint.tenant_worker.watcher", "SIZE_CHECK_INTERVAL_S")
    _set_from_env(SECOND_OPINION_ENV, "kint.tenant_worker.cold_start", "SECOND_OPINION_RETRY_S")
    _set_from_env(STORE_BUSY_WAIT_ENV, "kint.tenant_worker.store", "READ_BUSY_WAIT_S")
    _set_from_env(STORE_BUSY_WAIT_ENV, "kint.rows.export", "READ_BUSY_WAIT_S")
    _set_from_env(BEAT_ENV, "kint.protocol.worker_wire", "BEAT_SECONDS")
    _set_from_env(LOG_RETRY_ENV, "kint.tenant_worker.walk_history", "LOG_RETRY_S")
    _set_from_env(SHARING_LOOK_ENV, "kint.tenant_worker.store_sharers", "LOOK_EVERY_S")
    _set_from_env(DOCTOR_CALL_ENV, "kint.tenant_worker.doctor_chain", "DOCTOR_CALL_S")
    _set_from_env(STOP_GRACE_ENV, "kint.tenant_worker.stop_grace", "STOP_GRACE_SECONDS")
    _set_from_env(EXIT_BOUND_ENV, "kint.tenant_worker.exit_bound", "EXIT_BOUND_S")
    _fixed_epoch_room()
    _lower_poll_minimum()


def _lengthen_supervisor_stop_grace() -> None:
    """The supervisor's stop grace, KINT_TEST_STOP_GRACE_S and the defaults' 5 s over it,
    when the test set it: a frozen dataclass field, given by every `Settings.load` (the
    start's and each config reload's), so that load is wrapped, not a module name set."""
    raw = os.environ.get(STOP_GRACE_ENV)
    if not raw:
        return
    from dataclasses import replace

    from kint.supervisor.settings import Settings

    load = Settings.load
    grace_s = float(raw) + SUPERVISOR_STOP_GRACE_OVER_S
    Settings.load = classmethod(  # type: ignore[method-assign]
        lambda cls: replace(load(), stop_grace_s=grace_s))


def install_supervisor() -> None:
    """The supervisor's side of KINT_TEST_QUIET_SECONDS (its own process, not a worker's),
    KINT_TEST_HOUSEKEEPING_S, KINT_TEST_POLL_MINIMUM_S, KINT_TEST_LAST_REPLY_GRACE_S,
    KINT_TEST_REASON_GRACE_S, KINT_TEST_STOP_GRACE_S and KINT_TEST_SETTLE_S."""
    _lengthen_supervisor_stop_grace()
    _set_from_env(SETTLE_ENV, "kint.supervisor.room", "SETTLE_S")
    _set_from_env(QUIET_ENV, "kint.supervisor.lifecycle", "QUIET_SECONDS")
    _set_from_env(LAST_REPLY_GRACE_ENV, "kint.supervisor.last_words", "LAST_REPLY_GRACE_S")
    _set_from_env(REASON_GRACE_ENV, "kint.supervisor.exit_hold", "REASON_GRACE_S")
    _set_from_env(HOUSEKEEPING_ENV, "kint.supervisor.housekeeping", "HOUSEKEEPING_EVERY_S")
    _lower_poll_minimum()


def install_cli() -> None:
    """The command's side of KINT_TEST_UNREACHABLE_AFTER_S, KINT_TEST_STOP_EXIT_WAIT_S,
    KINT_TEST_START_WAIT_S and KINT_TEST_STOP_BOUND_S (a `kint` process's own), and
    KINT_TEST_HOUSEKEEPING_S, KINT_TEST_PID_LOCK_RETRY_S, KINT_TEST_PID_NAMED_S and
    KINT_TEST_POLL_MINIMUM_S for a supervisor the command runs in the foreground."""
    _set_from_env(UNREACHABLE_ENV, "kint.supervisor.autostart", "UNREACHABLE_AFTER_S")
    _set_from_env(STOP_EXIT_WAIT_ENV, "kint.commands.supervisor_stop", "STOP_EXIT_WAIT_S")
    _set_from_env(START_WAIT_ENV, "kint.supervisor.autostart", "START_WAIT_S")
    _set_from_env(STOP_BOUND_ENV, "kint.supervisor.autostart", "STOP_BOUND_S")
    _set_from_env(HOUSEKEEPING_ENV, "kint.supervisor.housekeeping", "HOUSEKEEPING_EVERY_S")
    _set_from_env(PID_LOCK_RETRY_ENV, "kint.supervisor.pidlock", "PID_LOCK_RETRY_S")
    _set_from_env(PID_NAMED_ENV, "kint.supervisor.pidlock", "NAMED_WITHIN_S")
    _lower_poll_minimum()


_install_worker()
