"""What the watcher takes from a kint-server session (space_settings.PUSH_SETTINGS and its
timings), said where a user looks: a setting a user gives is honoured or reported, never
silently taken.

A session's KINT_RPC_TIMEOUT, KINT_KEY_TTL and KINT_NONCE_RETRY_SECONDS bound the pushes
the watcher makes, which no call carries (sessions._watcher_push). `kint supervisor
status` showed the supervisor's own values and `kint config show` the call's, so a user
who saw 10 s there could not tell why an automatic push waited a minute. The heartbeat
and the status op carry the values a session gives that differ from the worker's own
(`differing`: `kint supervisor status`, `kint status`, memory_status), and the config op
adds the watcher's value to each such row (`watcher_value`). A session's timings and
push settings kept while no watcher runs are said beside the row (`kept_value`), not
shown as in force; `kint status` and memory_status show push settings only for a watcher
that runs (`watcher_settings` is about its pushes). A timeout names the KINT_RPC_TIMEOUT
it waited and whose it was (rpc_hint.timeout_named).
"""

from __future__ import annotations

from typing import Any, Callable

from kint.settings.loader import SESSION, Value, own_lookup
from kint.settings.report import json_value
from kint.settings.wire import same
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.space_settings import PUSH_SETTINGS, WATCHER_SETTINGS


def _taken(ctx: SpaceContext, name: str) -> Value | None:
    """The session's value of `name` the watcher's pushes take, None when no session gave
    one (they take the space's own then, which every report already shows) or when no
    watcher runs: a KINT_NO_WATCHER=1 kint-server's values are kept all the same, and were
    shown for pushes that never happen (the watcher, once made, stays: sessions.new_watcher).
    Without a session holding `name`, the common case on every beat, no setting is looked
    up: `watcher_setting` would resolve the space's own only for it to be set aside."""
    if ctx.watcher is None or not _held(ctx, name):
        return None
    value = ctx.watcher_setting(name)
    return value if value.source == SESSION else None


def _held(ctx: SpaceContext, name: str) -> bool:
    """Whether any session's kept values hold `name` (no setting looked up)."""
    with ctx.sessions_lock:
        return any(name in values for _, values in ctx.session_settings.values())


def differing(ctx: SpaceContext, own: Callable[[str], Value] = own_lookup
              ) -> list[dict[str, Any]]:
    """For the heartbeat and the status op: each push setting a session gives the watcher's
    pushes that is not the worker's own (`own`: the supervisor's environment, config.toml,
    the default; a status call's own values, overlaid, are not what it is set beside), as
    {name, value, source, own, own_source}: `kint status` and memory_status say what
    `kint supervisor status` says."""
    found = []
    for name in PUSH_SETTINGS:
        taken = _taken(ctx, name)
        if taken is None:
            continue
        mine = own(name)
        if same(taken.setting, taken.value, mine.value):
            continue
        found.append({"name": name, "value": json_value(taken.setting, taken.value),
                      "source": taken.source, "own": json_value(mine.setting, mine.value),
                      "own_source": mine.source})
    return found


def watcher_value(ctx: SpaceContext, row: Value) -> dict[str, Any] | None:
    """For `kint config show`'s row of a push setting: the value the watcher's pushes take
    from a session, when it is not the row's own; None otherwise."""
    if row.setting.name not in PUSH_SETTINGS:
        return None
    taken = _taken(ctx, row.setting.name)
    if taken is None or same(taken.setting, taken.value, row.value):
        return None
    return {"value": json_value(taken.setting, taken.value), "source": taken.source}


def kept_value(ctx: SpaceContext, row: Value) -> dict[str, Any] | None:
    """For `kint config show`'s row of a watcher timing or push setting while no watcher
    runs (a timing's row is then the space's own: SpaceContext.effective_setting): the
    value the newest KINT_NO_WATCHER=1 kint-server session gave, kept though no watcher
    takes it (SpaceContext.watcher_setting), when it is not the row's; None otherwise.
    Shown as the timing in force, it said a watcher pushed on a quiet period nobody was
    counting; said nowhere, a user who set it in the harness could not tell why it did
    nothing."""
    name = row.setting.name
    if (name not in WATCHER_SETTINGS and name not in PUSH_SETTINGS) or ctx.watcher is not None \
            or not _held(ctx, name):
        return None
    found = ctx.kept_settings(name, watching=False)
    if not found:
        return None
    kept = found[0]
    if same(kept.setting, kept.value, row.value):
        return None
    return {"value": json_value(kept.setting, kept.value), "source": kept.source}
