"""The agent sessions a worker recycled for its memory, or restarted, hands to its successor.

A kint-server stays attached for its whole agent session, so the worker of the space an
agent uses, the one that grows, would never be recycled if sessions kept it alive
(kint.supervisor.lifecycle recycles a quiet worker with sessions attached). What the
sessions rely on lives in the worker's memory: who is attached and when each was last
seen, the watcher timings and key TTL each sent, whether the store watcher runs, the drift
baseline their notes moved (with the hold it found), and which sessions said goodbye (a
keepalive sent before its goodbye must not attach a gone server to the successor). The
worker writes them here as it exits for a recycle, a restart (`kint supervisor restart`)
or an upgrade of kint on disk (the whole supervisor then exits for the new version, and
the next one starts the space's worker at once: kint.supervisor.succession). Before, a
restart or an upgrade left the sessions to their next keepalive: up to a minute without
the watcher, and the baseline, with the drift it had seen, made anew from the store. The
supervisor starts the successor at once, and the successor takes them over before it
serves anything, so the watcher pushes and the sessions' notes count from the first
request on, not from each session's next keepalive (up to a minute).

The file names the store it was written over: a space that moved to another store (its
own one gone, `routing._move_space`, a restart too) takes none of it, as those sessions
are over a store it no longer serves and the baseline holds another store's rows. They
are told at their next call, which names the store that is gone: the supervisor refuses
it (SPACE_CONFLICT, "served from the store NEW: OLD does not exist", routing._same_store),
and kint-server logs that its keepalive was not taken, with the hint to restart the
session (in kint.log and on stderr, which the harness shows).

A file in the space's 0600 state, not a message through the supervisor: the baseline
holds a leaf per row (more than a back-socket header carries), and the supervisor stays a
router that reads only the fields it checks. The file is taken once and removed; one the
same supervisor did not hand over (another start of one, told by the id each draws at its
start, `WorkerConfig.supervisor_run`, not by its pid, which a restart can get again: the
notes cast to the old one in between are lost) or older than SESSION_TTL_S is dropped,
and the sessions then attach anew at their next keepalive, as after any restart of the
worker. The one exception is an upgrade: the supervisor that exits for it names its run
id to the next one (`WorkerConfig.predecessor_run`), whose workers take its workers'
files too. A supervisor that crashed, or was stopped on command (the sessions end with
it), names none, so a later start takes nothing it left.

Its age is told by the monotonic clock, not the wall clock: both workers run on the same
boot, and CLOCK_MONOTONIC is one clock for the whole system on Linux, which a step of the
wall clock (NTP, a user setting the date) does not move, so such a step can neither drop a
fresh file nor take a stale one. A monotonic reading means nothing across a reboot, so the
file carries the boot id (/proc/sys/kernel/random/boot_id) and one from another boot is
never taken. Where the OS has no boot id (macOS) both sides read None, and the supervisor's
run id, drawn again at every start, is what keeps an earlier boot's file out.

The previous format (version 2) is taken too, the one exception to removing an old design
rather than keeping two: on an upgrade the old workers hand over with the code they
imported at their start, so the first worker of a new kint reads what the old one wrote,
and dropping it lost the sessions, the watcher and the drift baseline that README's
upgrade promises keep. Version 2 does not say which sessions asked for the watcher; it ran
then with the newest session's timings and push settings, so when it ran, every session
counts as asking and the watcher goes on as it ran (its KINT_KEY_TTL, not the space's 24 h,
on a push within the first minute); else none does. Each session's next keepalive says
for itself (`sessions.attach`), so a KINT_NO_WATCHER=1 one counts as asking until then.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import orjson

from kint.boot import boot_id
from kint.paths import atomic_write, session_handoff_path
from kint.settings.loader import SESSION, Value
from kint.settings.schema import BY_NAME
from kint.settings.values import BadValue
from kint.settings.wire import parse_sent
from kint.taken_once import take_once
from kint.tenant_worker.drift import Hold
from kint.tenant_worker.space import SESSION_TTL_S, SpaceContext
from kint.tenant_worker.space_settings import SESSION_SETTINGS
from kint.tenant_worker.state_format import is_hex64

log = logging.getLogger("kint.worker")

# 2: written_mono and boot_id in place of the wall clock's written_at; the store's path
# 3: each session's `watcher`, whether it asked for one (only theirs run it)
VERSION = 3
# The versions taken: this one, and the one a running older kint writes on an upgrade.
TAKEN_VERSIONS = (2, VERSION)

def _path(ctx: SpaceContext) -> Path:
    return session_handoff_path(ctx.config.home, ctx.config.space16)


def hand_over(ctx: SpaceContext) -> int:
    """Write the attached sessions for the successor (a worker exiting for a recycle, a
    restart or an upgrade); how many there were. Nothing is written when none is attached
    and none has ended."""
    if not ctx.live_sessions() and not ctx.ended_sessions:
        return 0
    now = time.monotonic()
    sessions = []
    with ctx.sessions_lock:
        ended = {sid: now - at for sid, at in ctx.ended_sessions.items()}
        for sid, seen in ctx.sessions.items():
            first, values = ctx.session_settings.get(sid, (None, {}))
            sessions.append({
                "id": sid, "seen_s_ago": now - seen,
                "first_s_ago": now - first if first is not None else None,
                "watcher": sid in ctx.watching,
                "settings": {name: v.raw for name, v in values.items() if v.raw is not None}})
    atomic_write(_path(ctx), orjson.dumps({
        "version": VERSION, "written_mono": now, "boot_id": boot_id(), "db": ctx.config.db,
        "supervisor_run": ctx.config.supervisor_run, "watcher": ctx.watcher is not None,
        "sessions": sessions, "ended": ended, **ctx.drift.handed()}))
    log.info("space %s: %d session(s) handed to the next worker", ctx.config.space16,
             len(sessions))
    return len(sessions)


def take_over(ctx: SpaceContext) -> Any:
    """Take the sessions a recycled worker handed over, if any (before the first request).
    When they ran the store watcher, its successor is made, and returned for the caller to
    start (its first count reads the store: not on the thread that says hello); else None.
    The file is removed either way."""
    path = _path(ctx)
    return take_once(path, lambda data: _apply(ctx, data),
                     (KeyError, TypeError, ValueError, AttributeError, BadValue),
                     lambda why: log.warning("space %s: %s %s; the sessions it hands over "
                                             "attach again at their next keepalive",
                                             ctx.config.space16, path, why))


def _ago(value: Any) -> float:
    """A number of seconds read back from the file: a finite JSON number, never below 0.
    float() alone would take "nan" or "-1e9" (text) or true, and a session seen in the
    future, or at NaN, is never forgotten (`live_sessions` compares its age), so it would
    keep the worker from its idle exit for good."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{value!r} is not a number of seconds")
    if not 0 <= value < float("inf"):
        raise ValueError(f"{value!r} is not a number of seconds ago")
    return float(value)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not text")
    return value


def _runs_taken(ctx: SpaceContext) -> tuple[str, ...]:
    """The supervisor runs whose workers' files this worker takes: its own supervisor's,
    and the one that supervisor took over from on an upgrade, if it did."""
    cfg = ctx.config
    return (cfg.supervisor_run, cfg.predecessor_run) if cfg.predecessor_run else (
        cfg.supervisor_run,)


def _apply(ctx: SpaceContext, data: dict[str, Any]) -> Any:
    space16 = ctx.config.space16
    if data["version"] not in TAKEN_VERSIONS or data["supervisor_run"] not in _runs_taken(ctx):
        log.info("space %s: sessions handed over under another supervisor or format are not "
                 "taken; they attach again at their next keepalive", space16)
        return None
    if _text(data["db"]) != ctx.config.db:
        log.info("space %s: sessions handed over for the store %s are not taken: this worker "
                 "serves %s (the space moved); they are told at their next call", space16,
                 data["db"], ctx.config.db)
        return None
    written_mono, boot = data["written_mono"], data["boot_id"]
    if isinstance(written_mono, bool) or not isinstance(written_mono, (int, float)):
        raise TypeError(f"written_mono {written_mono!r} is not a time")
    if boot is not None:
        _text(boot)
    if boot != boot_id():
        log.info("space %s: sessions handed over before this boot are not taken", space16)
        return None
    elapsed = time.monotonic() - written_mono
    if not 0 <= elapsed <= SESSION_TTL_S:  # NaN fails both
        log.info("space %s: sessions handed over %.0fs ago are not taken", space16, elapsed)
        return None
    if not isinstance(data["watcher"], bool):
        raise TypeError(f"watcher {data['watcher']!r} is not true or false")
    now = time.monotonic()
    sessions: dict[str, float] = {}
    watching: set[str] = set()
    settings: dict[str, tuple[float, dict[str, Value]]] = {}
    # Every field is checked before any is taken: a file that does not hold what a
    # worker writes is dropped whole, never half applied.
    for entry in data["sessions"]:
        sid, seen_ago = _text(entry["id"]), _ago(entry["seen_s_ago"])
        if seen_ago + elapsed > SESSION_TTL_S:
            continue
        sessions[sid] = now - seen_ago - elapsed
        # Version 2 does not say; its sessions ran the watcher, when one ran (the module's
        # docstring).
        asked = entry["watcher"] if data["version"] == VERSION else data["watcher"]
        if not isinstance(asked, bool):
            raise TypeError(f"watcher {asked!r} is not true or false")
        if asked:
            watching.add(sid)
        if entry["first_s_ago"] is not None:
            settings[sid] = (now - _ago(entry["first_s_ago"]) - elapsed, {
                name: Value(BY_NAME[name], parse_sent(BY_NAME[name], _text(raw)), SESSION,
                            raw=raw)
                for name, raw in entry["settings"].items() if name in SESSION_SETTINGS})
    ended = {sid: now - _ago(ago) - elapsed for sid, ago in data["ended"].items()
             if _ago(ago) + elapsed <= SESSION_TTL_S}
    held = data["held"]
    leaves = data["leaves"]
    # A leaf is a row's 64 hex digits, as a session's note sends it (sessions.note_write):
    # any other text matches no row, so that row would be held as changed behind Sibyl's back.
    if leaves is not None and not all(isinstance(k, str) and (v is None or is_hex64(v))
                                      for k, v in leaves.items()):
        raise ValueError("a baseline leaf is not 64 hex digits")
    ctx.drift.take_over(leaves, Hold(_text(held["message"]), _text(held["reason"]),
                                     _text(held["at"])) if held is not None else None)
    with ctx.sessions_lock:
        ctx.sessions.update(sessions)
        ctx.session_settings.update(settings)
        ctx.watching.update(watching)
        ctx.ended_sessions.update(ended)
    log.info("space %s: %d session(s) taken over from the worker before this one", space16,
             len(sessions))
    if not sessions or not data["watcher"] or ctx.watcher is not None:
        return None
    from kint.tenant_worker.sessions import new_watcher

    return new_watcher(ctx)
