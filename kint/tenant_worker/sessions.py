"""The agent sessions (kint-server processes) over this space's store, and what they ask
of the worker: attach and detach, the note of every write their tool path made, the
server-side push that passes the hold, and the exit push that outlives its server.

A session that vanished without detaching (a SIGKILLed server) is forgotten after
SESSION_TTL_S (space.py) without a keepalive, so the worker can still go idle.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kint import settings
from kint.open_files import OUT_OF_FILES, causes
from kint.protocol import ErrorCode, ProtocolError
from kint.rows.canon import TIERS, canonical_id
from kint.settings.loader import SESSION
from kint.settings.values import shown
from kint.settings.wire import same, source_text
from kint.tenant_worker.head_lock import TurnStopped
from kint.tenant_worker.rpc_hint import name_the_endpoint, timeout_named
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.space_settings import PUSH_SETTINGS, SESSION_SETTINGS

if TYPE_CHECKING:
    from kint.tenant_worker.exit_bound import ExitBound
    from kint.tenant_worker.statefiles import Mirror

log = logging.getLogger("kint.worker")

# What the exit push's line says of the rows once the worker's stop refused it (exit_push):
# it sent nothing, and the store keeps whatever it would have pushed.
NOT_STARTED = "any rows it would push stay in the store, unanchored, for the next push"
# Why an exit push begun past its request's deadline starts nothing (exit_push). Only what
# the worker knows: the check runs as the op begins on its pool, which may be long after the
# worker read the request; and the supervisor's TIMEOUT is not sure to have been given, as
# this reply, sent at once, wins if it reaches the supervisor first (timed.py `_expire`).
PAST_DEADLINE = "its request's deadline had passed when the worker came to begin it"

# What a read of the enrolment or of the data key's cache may meet for a moment: the
# process or the box out of open files, memory, an I/O error. Not "cannot push", which
# frees a dirty store from the worker once no session is attached (Watcher.work_left).
_MAY_PASS = OUT_OF_FILES | {errno.ENOMEM, errno.EIO, errno.EAGAIN, errno.EINTR}


def _key_read_may_pass(err: BaseException) -> bool:
    """Whether a read of the enrolment or the key cache that failed with `err` is known to
    be a moment's trouble: `err`, or an error it was raised from or in (custody and the
    state files wrap the OSError: a VaultCacheCorrupt "cannot be read", a
    CorruptStateFile), is an OSError that may pass by itself (_MAY_PASS). Anything else is
    taken as the key not there (missing, garbled, denied: "cannot push").

    Not unanchored.count_fails_for_good, which asks the opposite of the store's count,
    whose default is the other way: a key read's failures are mostly a file to mend, told
    apart from one that may pass by an errno; a count's are mostly a lock or SQLite's
    "unable to open" (no errno to read), told apart from the lasting ones by the file.
    Either, asked of the other's failures, is wrong: the errno test calls a locked store
    lasting, the file test a garbled key cache passing."""
    return any(isinstance(cause, OSError) and cause.errno in _MAY_PASS
               for cause in causes(err))


def _keyed(ctx: SpaceContext) -> bool:
    """Whether this space holds what a push from its store needs of its keys: connected (an
    enrolment) and a data key cached. False when not connected; a key cache that does not
    read, or holds no key, raises what its read met (custody's errors), as does an
    enrolment that does not read: the count tells a failure that may pass from a key truly
    not there by that error (`_key_read_may_pass`). An enrolment found marks the space seen
    connected (`enrolment_checked`, after which the count says its trouble), whoever asks:
    it is what was seen, kept once true, the look's (`_can_push`) as good as the count's."""
    from kint.tenant_worker.data_key import current_data_key

    if ctx.enrolment() is None:
        return False
    ctx.enrolment_checked = True
    current_data_key(ctx)  # no cached key: nothing the watcher could push
    return True


def _counted_against(ctx: SpaceContext) -> Mirror | None:
    """The mirror the watcher counts the store against, or None: no mirror (never pushed
    or pulled) or no store. Raises what the mirror's read raises."""
    mirror = ctx.state.mirror()
    return mirror if mirror is not None and os.path.exists(ctx.config.db) else None


def _changes_to_push(ctx: SpaceContext) -> tuple[int, int] | None:
    """The (changed, deleted) rows the watcher would push (a half-done pull's rows
    included, as push anchors them), or None when this space cannot push: not connected,
    no cached data key (`_keyed`), nothing to count against (`_counted_against`). A count
    that failed (the store, the mirror or the pull journal did not read) raises
    CountFailed naming the file: the store may hold rows to push, so it is not taken as
    clean (watcher.py). So does a read of the enrolment or the key cache that may pass by
    itself (`_key_read_may_pass`: out of open files, an I/O error), not lasting: taken as
    "cannot push", a dirty store was no work once no session was attached, and the idle
    stop took it, against the rule that a failure that may pass keeps the store the
    worker's. Only a key truly not there (not connected, no data key or session key
    cached, a cache file garbled or denied, which someone must mend) is None. Trouble is
    said once per reason, once the space has been seen connected."""
    from kint.tenant_worker.unanchored import (WATCHER, CountFailed, count_unanchored,
                                               count_fails_for_good, named)

    try:
        if not _keyed(ctx):
            return None
    except Exception as err:  # noqa: BLE001 - any trouble means: do not push from the watcher
        if ctx.enrolment_checked:
            ctx.unanchored.cannot_count(WATCHER, err, ctx.config.space16)
        if _key_read_may_pass(err):
            raise CountFailed(getattr(err, "message", None) or str(err), False) from err
        return None
    try:
        mirror = _counted_against(ctx)
        if mirror is None:
            return None
        changes = count_unanchored(ctx, mirror).diff
    except Exception as err:  # noqa: BLE001 - not counted: the watcher says so by name
        failed = named(err, ctx.config.db)
        ctx.unanchored.cannot_count(WATCHER, failed, ctx.config.space16)
        raise CountFailed(str(failed), count_fails_for_good(err, ctx.config.db)) from err
    ctx.unanchored.counts_again(WATCHER)
    return len(changes.rows), len(changes.deleted)


def _can_push(ctx: SpaceContext) -> bool:
    """Whether `_changes_to_push` would get past its None now, asked by the same two
    helpers (`_keyed`, `_counted_against`), so the two cannot drift (`recheck` cleared
    `cannot_push` for a space the count still answered None for): the watcher asks it at
    each tick while the last count answered None (WatcherCount.recheck), which costs a few
    small reads where the count is a diff of the whole store. Any trouble is False here:
    the count, when its rules make it, says what it was."""
    try:
        return _keyed(ctx) and _counted_against(ctx) is not None
    except Exception:  # noqa: BLE001 - said by the count (`_changes_to_push`), not here
        return False


def server_push(ctx: SpaceContext, reason: str,
                bound: ExitBound | None = None) -> dict[str, Any]:
    """A push under the hold, with a full disk or a corrupt state file answered as what it
    is (state_health.guarded), as a request's push is: the watcher's pushes come from no
    request, and a store read that met a full disk reached the watcher as a bare SQLite
    error, recorded as INTERNAL with a traceback. `bound` (the exit push's) waits its turn
    on the space and bounds its push (push.push, exit_bound.py); either push is refused
    once the worker's stop began (the watcher's by head_lock._take's `refuse_stopping`,
    the waiting one by _wait_turn), and either one's wait for another process's head lock
    is ended by the stop, refused the same way (head_lock._flock_unless_stopped): both
    chosen here, never by a request's args. So no push of the worker's own starts in the
    stop's grace, whose end could cut it between its send and its receipt (and the exit
    push, once started, starts no further epoch in it: exit_bound.cut)."""
    from kint.tenant_worker.push import push
    from kint.tenant_worker.state_health import guarded

    return guarded("push", lambda c, a: push(c, a, bound=bound, refuse_stopping=True))(
        ctx, {"hold_reason": reason})


def _watcher_push(ctx: SpaceContext, reason: str) -> dict[str, Any]:
    """The watcher's push, outside any request: it runs with the newest session's value
    (of those that asked for the watcher: SpaceContext.watcher_setting) of each call-scope
    setting a push reads (space_settings.PUSH_SETTINGS, from its kint-server's
    environment), else the space's, as v0.3.0's kint-server pushes with its own. Without
    it a harness's KINT_KEY_TTL=30d was cut to the space's 24 h by the first automatic
    push, and its KINT_RPC_TIMEOUT and KINT_NONCE_RETRY_SECONDS went unused, unsaid. Its
    refusal names the endpoint in force (rpc_hint), as a request's does in
    handlers.with_settings: status shows this hint as the watcher's failure, which sent a
    space connected with `--rpc-urls` to KINT_RPC_URL. A timeout names the KINT_RPC_TIMEOUT
    it ran with and whose it was (rpc_hint.timeout_named)."""
    with settings.overlay({name: ctx.watcher_setting(name) for name in PUSH_SETTINGS}):
        try:
            # Refused once the worker's stop began (server_push): no stop refuses it at
            # dispatch.
            return server_push(ctx, reason)
        except ProtocolError as err:
            name_the_endpoint(ctx, err)
            timeout_named(err)
            raise


def _session_timings(ctx: SpaceContext, sid: str) -> list[str]:
    """Keep the watcher timings and push settings a session's kint-server sent when it
    first attached (its own environment: the harness's MCP configuration); the newest live
    session's that asked for the watcher are the ones it runs with. A line for each of
    this session's that is not used; none for a KINT_NO_WATCHER=1 session's, which no
    watcher takes (kept so that its calls are not told so on each: compared_setting)."""
    now = time.monotonic()
    with ctx.sessions_lock:
        if sid not in ctx.session_settings:
            given = {name: replace(value, source=SESSION) for name in SESSION_SETTINGS
                     if (value := settings.lookup(name)).source == settings.THIS_CALL}
            ctx.session_settings[sid] = (now, given)
        own = ctx.session_settings[sid][1] if sid in ctx.watching else {}
    notices = []
    for name, mine in own.items():
        running = ctx.watcher_setting(name)
        if not same(mine.setting, mine.value, running.value):
            # A call-scope setting (PUSH_SETTINGS) still governs this session's own calls;
            # only the watcher's pushes, which no call carries, take the newest session's.
            where = ("is not used by the watcher's pushes (this session's own calls use it)"
                     if mine.setting.scope == "call" else "is not used")
            notices.append(
                f"kint: {name}={mine.raw} from this kint-server {where}: space "
                f"{ctx.config.label}'s watcher runs with {shown(mine.setting, running.value)} "
                f"({source_text(running)} that attached later); the newest session's "
                f"values apply while it runs")
    return notices


def new_watcher(ctx: SpaceContext) -> Any:
    """The space's one store watcher, made for the first session that asks for it (or for
    the sessions a recycled worker handed over: session_handoff.py); the caller starts
    it (its first count reads the store)."""
    from kint.tenant_worker.watcher import Watcher

    ctx.watcher = Watcher(ctx.config.db, lambda: _changes_to_push(ctx),
                          lambda reason: _watcher_push(ctx, reason),
                          lambda name: ctx.watcher_setting(name),
                          settled=lambda: ctx.beat_soon(),
                          own_op=lambda: ctx.head_op_began,
                          can_push=lambda: _can_push(ctx))
    return ctx.watcher


def attach(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    sid = args["session"]
    with ctx.sessions_lock:
        ended = sid in ctx.ended_sessions
        first = not ctx.sessions
        if not ended:
            ctx.sessions[sid] = time.monotonic()
            # Its values are the watcher's (watcher_setting) if it asks for one. Each
            # keepalive says so again: a session taken over from an older kint's handoff
            # was counted as asking when the watcher ran (session_handoff).
            if args.get("watcher"):
                ctx.watching.add(sid)
            else:
                ctx.watching.discard(sid)
    if ended:  # a keepalive sent before its session's goodbye, run after it
        return {"sessions": ctx.live_sessions(), "watcher": ctx.watcher is not None,
                "ended": True}
    notices = _session_timings(ctx, sid)
    if not ctx.drift.active:  # a store not created yet holds no rows: none to explain
        ctx.drift.reset(ctx.store_rows() or [])
    if args.get("watcher") and ctx.watcher is None:
        watcher = new_watcher(ctx)  # kept once the stop began: the handoff tells the next
        # worker to run one. Not started in a stopping worker's grace (an attach it took
        # before its stop), where its count ran and a push came due: the next worker's
        # watcher counts the store. A stop begun since this look stops the watcher just made
        # (process.py): it does not start (Watcher.start).
        if ctx.head_ops.stopped is None:
            watcher.start()
    elif ctx.watcher is not None:
        ctx.watcher.retime()  # this session's poll may be the one in force now
    if first:
        log.info("space %s: a session attached", ctx.config.space16)
    out: dict[str, Any] = {"sessions": ctx.live_sessions(), "watcher": ctx.watcher is not None}
    if notices:
        out["notices"] = notices
    return out


def _end(ctx: SpaceContext, sid: str) -> None:
    """The session said goodbye: forget it, and remember that it did."""
    with ctx.sessions_lock:
        ctx.sessions.pop(sid, None)
        ctx.session_settings.pop(sid, None)
        ctx.watching.discard(sid)
        ctx.ended_sessions[sid] = time.monotonic()


def detach(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    _end(ctx, args["session"])
    if ctx.watcher is not None:
        ctx.watcher.retime()  # an older session's poll, or the space's, may be in force now
    return {"sessions": ctx.live_sessions()}


def note_write(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    leaf = args.get("leaf")
    if leaf is not None and (len(leaf) != 64 or any(c not in "0123456789abcdef" for c in leaf)):
        raise ProtocolError(ErrorCode.BAD_REQUEST, "note_write: leaf must be 64 hex characters")
    tier = args["tier"]
    if tier not in TIERS:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"note_write: unknown tier {tier!r}")
    ctx.drift.note(canonical_id(tier, args.get("category"), args["key"]), leaf)
    return {"noted": True}


def exit_push(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    """One push, under the hold, for a server that is closing; it runs here after that
    server is gone, within its bound. One that meets an op of the space this worker runs
    (the watcher's push, another session's) waits for its turn, up to half its bound,
    rather than be refused BUSY (push.push): nobody is left to try it again. Its bound is
    the supervisor's deadline for its request (request_deadline.py), not a bound read from
    the clock here, which began late by however long the request had waited queued; it is
    made once, as the exit push begins, and carried with the work (exit_bound.py): its push
    starts no epoch past it, nor once the worker's stop began, and its line then says
    what it left in the store for the next push. Its failure is logged with the
    KINT_RPC_TIMEOUT a timeout waited (rpc_hint.timeout_named, as with_settings names it
    after): the log is the only place a closing server's failure is read. One the
    worker's stop refused before it began (TurnStopped: waiting its turn, or at its turn
    waiting for another process's head lock) is no failure: nothing was sent, and its
    line says the rows stay in the store for the next push (NOT_STARTED, in the words of
    a push cut before its first epoch: exit_bound.cut_message), where `exit push not made
    (WORKER_DOWN)` read as one. One whose request's deadline had passed when the worker
    came to begin it starts nothing and says so (PAST_DEADLINE): its caller has been, or is
    about to be, answered by the supervisor."""
    from kint.tenant_worker import request_deadline
    from kint.tenant_worker.exit_bound import ExitBound

    given = request_deadline.current()
    bound = ExitBound.for_request(given)  # before anything of it
    if args.get("session"):
        _end(ctx, args["session"])
    if given is not None and given.at <= time.monotonic():
        # Begun past its deadline (queued behind the worker's start, its other ops, a stop
        # of the box): it takes no turn, reads no chain and settles no journal, where it
        # went on to be cut only before its first epoch.
        log.info("space %s: exit push not started: %s; %s", ctx.config.space16, PAST_DEADLINE,
                 NOT_STARTED)
        return {"pushed": 0, "epochs": [], "message": f"{PAST_DEADLINE}; {NOT_STARTED}"}
    try:
        result = server_push(ctx, "exit", bound)
        log.info("space %s: exit push: %s", ctx.config.space16, result.get("message"))
        return result
    except TurnStopped as err:
        log.info("space %s: exit push not started: %s; %s", ctx.config.space16, err.message,
                 NOT_STARTED)
        raise
    except ProtocolError as err:
        timeout_named(err)
        log.info("space %s: exit push not made (%s): %s", ctx.config.space16, err.code.value,
                 err.message)
        raise
