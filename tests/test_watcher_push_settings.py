"""The call-scope settings a kint-server session sends on attach, as the watcher's pushes
take them (kint.tenant_worker.sessions._watcher_push, space_settings.PUSH_SETTINGS).

In process: the real attach op (handlers.HANDLERS, through with_settings and the wire's
own parsing) on a real SpaceContext, then the watcher's push with the push itself replaced
by one that records the settings it would read. The push over a real chain with a
session's KINT_RPC_TIMEOUT is tests/test_call_switches.py's; a nonce stuck long enough to
show KINT_NONCE_RETRY_SECONDS at work there is beyond a quick test, so this one pins that
every name of the tuple reaches the push. What the heartbeat and `kint config show` say of
those values (push_settings.differing, watcher_value) is read on the same context, with a
real watcher made and not started; a status row from a WorkerHandle holding no process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kint import settings
from kint.tenant_worker import push as push_mod
from kint.tenant_worker import sessions
from kint.tenant_worker.config import WorkerConfig
from kint.tenant_worker.handlers import HANDLERS
from kint.tenant_worker.push_settings import differing
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.space_settings import PUSH_SETTINGS
from kint.tenant_worker.store import StoreReader

SPACE16 = "0123456789abcdef"
OLDER = {"KINT_KEY_TTL": "30d", "KINT_RPC_TIMEOUT": "60", "KINT_NONCE_RETRY_SECONDS": "40"}
NEWER = {"KINT_KEY_TTL": "1h", "KINT_RPC_TIMEOUT": "5", "KINT_NONCE_RETRY_SECONDS": "3"}


def _context(tmp_path: Path) -> SpaceContext:
    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    db = tmp_path / "memory.db"  # not created: attach reads no rows from it
    cfg = WorkerConfig(space_id=SPACE16 * 4, label="t", tenant="t", db=str(db),
                       kint_home=str(home), back_address="ipc:///unused", supervisor_pid=1,
                       idle_beat_s=2.5)
    return SpaceContext(config=cfg, store=StoreReader(str(db), "t"))


def _attach(ctx: SpaceContext, sid: str, sent: dict[str, str], watcher: bool = True
            ) -> list[str]:
    """Attach session `sid`, asking for the watcher unless `watcher` is false (a
    KINT_NO_WATCHER=1 kint-server): one asked for is made here and not started (no thread,
    no store to count), so attach retimes it rather than starting one."""
    if watcher and ctx.watcher is None:
        sessions.new_watcher(ctx)
    said = HANDLERS["attach"](ctx, {"session": sid, "watcher": watcher,
                                    "settings": dict(sent)})
    return said.get("notices", [])


def _pushed_with(ctx: SpaceContext, monkeypatch) -> dict[str, Any]:
    """What each push setting reads as inside the watcher's push (named here, not taken
    from the tuple: a name dropped from it is what this is to catch)."""
    seen: dict[str, Any] = {}

    def recorded(_ctx: SpaceContext, args: dict[str, Any], **how: Any) -> dict[str, Any]:
        # the watcher's push, refused in a stop (head_lock._take), not waiting its turn nor
        # bounded as the exit push is (no `bound`)
        assert how == {"bound": None, "refuse_stopping": True}
        seen.update({name: settings.lookup(name) for name in NEWER})
        return {"pushed": False}

    monkeypatch.setattr(push_mod, "push", recorded)
    sessions._watcher_push(ctx, "watcher")
    return seen


def test_the_watchers_push_runs_with_the_newest_sessions_push_settings(tmp_path,
                                                                        monkeypatch):
    """Every name of PUSH_SETTINGS, KINT_NONCE_RETRY_SECONDS among them, reaches the
    watcher's push as the newest session sent it (one dropped from the tuple went back to
    the space's value, unsaid), and the space's own values once no session is attached."""
    ctx = _context(tmp_path)
    assert _attach(ctx, "older", OLDER) == []
    assert _attach(ctx, "newer", NEWER) == []
    seen = _pushed_with(ctx, monkeypatch)
    assert set(PUSH_SETTINGS) <= set(NEWER)
    for name, raw in NEWER.items():
        assert (seen[name].source, seen[name].raw) == (settings.SESSION, raw), seen[name]
    assert seen["KINT_NONCE_RETRY_SECONDS"].value == 3.0
    assert seen["KINT_RPC_TIMEOUT"].value == 5.0
    for sid in ("older", "newer"):
        HANDLERS["detach"](ctx, {"session": sid})
    alone = _pushed_with(ctx, monkeypatch)
    for name in NEWER:
        assert alone[name].source != settings.SESSION, alone[name]
        assert alone[name].value == settings.lookup(name).value


def test_an_older_session_is_told_its_rpc_timeout_is_not_the_watchers(tmp_path):
    """KINT_RPC_TIMEOUT is a call setting: the older session's own calls still use its
    value, only the watcher's pushes take the newest session's, and its line says so (as
    for KINT_KEY_TTL), never a bare "is not used"."""
    ctx = _context(tmp_path)
    _attach(ctx, "older", OLDER)
    _attach(ctx, "newer", NEWER)
    said = _attach(ctx, "older", OLDER)  # its next keepalive
    timeout = [line for line in said if line.startswith("kint: KINT_RPC_TIMEOUT=60 ")]
    assert timeout == [
        "kint: KINT_RPC_TIMEOUT=60 from this kint-server is not used by the watcher's pushes "
        "(this session's own calls use it): space t's watcher runs with 5 (from "
        "kint-server session that attached later); the newest session's values apply "
        "while it runs"], said
    assert any(line.startswith("kint: KINT_NONCE_RETRY_SECONDS=40 from this kint-server is "
                               "not used by the watcher's pushes ") for line in said), said
    assert _attach(ctx, "newer", NEWER) == []  # the newest is told nothing


def test_each_push_settings_row_says_the_watchers_pushes_take_the_newest_sessions():
    """docs/settings.md's table (generated from the schema) said so for KINT_KEY_TTL
    only: a reader of KINT_RPC_TIMEOUT's or KINT_NONCE_RETRY_SECONDS's row could not tell
    that a kint-server's value reaches the automatic pushes too."""
    from kint.settings.schema import BY_NAME

    for name in PUSH_SETTINGS:
        doc = BY_NAME[name].doc
        assert "watcher's pushes" in doc and "newest kint-server session's value" in doc, name


def _own(name: str) -> settings.Value:
    """The worker's own values as the heartbeat's `own` gives them, named here so no other
    test's configuration leaks in: the defaults."""
    from kint.settings.schema import BY_NAME

    mine = {"KINT_RPC_TIMEOUT": 10.0, "KINT_KEY_TTL": "24h", "KINT_NONCE_RETRY_SECONDS": 15.0}
    return settings.Value(BY_NAME[name], mine[name], settings.DEFAULT)


def _config_watcher(ctx: SpaceContext) -> dict[str, Any]:
    """`kint config show`'s `watcher` of each push setting's row, from the real config op."""
    rows = HANDLERS["config"](ctx, {})["settings"]
    return {e["name"]: e["watcher"] for e in rows if e["name"] in PUSH_SETTINGS}


def test_no_push_settings_are_shown_for_a_watcher_that_does_not_run(tmp_path,
                                                                    monkeypatch):
    """A KINT_NO_WATCHER=1 kint-server attaches with `watcher: false`, and its values are
    kept all the same: the beat and `kint config show` named them as what "the watcher's
    pushes" run with while no watcher existed to push. No watcher takes them: one a later
    session asks for runs with that session's, or the space's (its pushes too), where it
    ran with the newest session's, this one's included."""
    ctx = _context(tmp_path)
    assert _attach(ctx, "nowatcher", OLDER, watcher=False) == []
    assert ctx.watcher is None
    assert differing(ctx, _own) == []
    assert set(_config_watcher(ctx).values()) == {None}

    assert _attach(ctx, "watching", {}) == []  # asks for the watcher, gives none of its own
    assert ctx.watcher is not None
    assert differing(ctx, _own) == []
    assert set(_config_watcher(ctx).values()) == {None}
    assert all(v.source != settings.SESSION for v in _pushed_with(ctx, monkeypatch).values())
    assert _attach(ctx, "newer", NEWER) == []
    assert _attach(ctx, "latest", OLDER, watcher=False) == []  # attached last: not taken
    assert {e["name"]: (e["value"], e["source"]) for e in differing(ctx, _own)} == {
        "KINT_RPC_TIMEOUT": (5.0, settings.SESSION), "KINT_KEY_TTL": ("1h", settings.SESSION),
        "KINT_NONCE_RETRY_SECONDS": (3.0, settings.SESSION)}
    assert _config_watcher(ctx)["KINT_RPC_TIMEOUT"] == {"value": 5.0,
                                                        "source": settings.SESSION}
    assert _pushed_with(ctx, monkeypatch)["KINT_RPC_TIMEOUT"].raw == "5"


def test_the_beat_leaves_out_a_sessions_value_equal_to_the_workers_own(tmp_path,
                                                                        monkeypatch):
    """A session's value that is the worker's own, however spelt (1d is 24h), governs
    nothing the status does not already show: the beat names only the one that differs,
    and nothing at all once no session is attached, found with no setting looked up (the
    space's own values were resolved on every beat, only to be set aside)."""
    ctx = _context(tmp_path)
    _attach(ctx, "s", {"KINT_RPC_TIMEOUT": "10", "KINT_KEY_TTL": "1d",
                       "KINT_NONCE_RETRY_SECONDS": "40"})
    assert differing(ctx, _own) == [{"name": "KINT_NONCE_RETRY_SECONDS", "value": 40.0,
                                     "source": settings.SESSION, "own": 15.0,
                                     "own_source": settings.DEFAULT}]
    HANDLERS["detach"](ctx, {"session": "s"})
    looked_up: list[str] = []
    real = settings.lookup
    monkeypatch.setattr(settings, "lookup", lambda name: looked_up.append(name) or real(name))
    assert differing(ctx, _own) == []
    assert looked_up == []


def test_status_shows_the_beats_push_settings_only_while_its_worker_runs():
    """The last beat outlives its worker: a dead worker's row must not still say what its
    watcher's pushes run with (docs/commands.md: null when none or no worker runs)."""
    from kint.supervisor.status import space_row
    from kint.supervisor.workers import WorkerHandle

    entry = {"name": "KINT_RPC_TIMEOUT", "value": 60.0, "source": settings.SESSION,
             "own": 10.0, "own_source": settings.DEFAULT}
    handle = WorkerHandle(space_id=SPACE16 * 4, label="t", tenant="t", db="/x.db")
    handle.state = "ready"
    handle.process = object()  # alive is "a process is held"; none is started here
    handle.beat = {"watcher_settings": [entry], "sessions": 1}
    handle.last_beat_at = 1000.0
    home = Path("/nonexistent-kint-home")
    assert space_row(handle, 1001.0, home)["watcher_settings"] == [entry]

    handle.process = None  # it died; the supervisor keeps its last beat
    handle.state = "idle"
    assert space_row(handle, 1001.0, home)["watcher_settings"] is None


def test_the_status_line_prints_the_values_as_config_show_does():
    """Both print a `--json` value with kint.render.value_text: whole seconds without
    `.0`, a duration as given, and a value's control characters escaped on the terminal."""
    from kint.render import watcher_settings_text
    from kint.settings.report import text_lines

    entries = [{"name": "KINT_KEY_TTL", "value": "30d", "source": settings.SESSION,
                "own": "24h", "own_source": settings.DEFAULT},
               {"name": "KINT_RPC_TIMEOUT", "value": 60.0, "source": settings.SESSION,
                "own": 2.5, "own_source": settings.FILE},
               {"name": "KINT_NONCE_RETRY_SECONDS", "value": "4\x1b[2J", "source":
                settings.SESSION, "own": 15.0, "own_source": settings.DEFAULT}]
    assert watcher_settings_text(entries, "watcher of s") == (
        "watcher of s: its pushes run with the kint-server session's KINT_KEY_TTL=30d (the "
        "supervisor's: 24h, default); KINT_RPC_TIMEOUT=60 (the supervisor's: 2.5, "
        "file); KINT_NONCE_RETRY_SECONDS=4\\x1b[2J (the supervisor's: 15, default)")
    row = {"name": "KINT_RPC_TIMEOUT", "value": 10.0, "source": settings.DEFAULT,
           "where": None, "watcher": {"value": 60.0, "source": settings.SESSION}}
    assert text_lines([row]) == [
        "KINT_RPC_TIMEOUT  10  default; the watcher's pushes use 60 (kint-server session)"]
