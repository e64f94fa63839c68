"""`kint config show`: every setting, its effective value and where it comes from.

The settings the daemon reads are reported by the space's worker, as this space and this
call run with them (the call's own values included); the ones only a client reads are
this process's own. Secrets are shown as set or unset, never their value; URLs without
their path or query (where an API key lives).
"""

from __future__ import annotations

from typing import Any

from kint.render import value_text
from kint.settings.loader import Value
from kint.settings.schema import GROUPS, SETTINGS, Setting
from kint.settings.values import shown
from kint.settings.wire import NONE_TAKE

SCHEMA_VERSION = 1


def json_value(setting: Setting, value: Any) -> Any:
    """A value as `config show --json` gives it."""
    if setting.secret:
        return "set" if value else "unset"
    if value is None:
        return None
    if setting.kind == "flag":
        return bool(value)
    if setting.kind in ("float", "int"):
        return value
    return shown(setting, value)


def entry(v: Value) -> dict[str, Any]:
    s = v.setting
    return {"name": s.name, "value": json_value(s, v.value), "source": v.source,
            "where": (f'{v.where} [spaces."{v.table}"]' if v.table else v.where),
            "scope": s.scope, "read_by": sorted(s.read_by), "secret": s.secret,
            "file_key": s.key if s.in_file else None,
            "no_effect_here": s.no_effect_here(v.value), "refused": v.refused,
            # A push setting's value the watcher's pushes take from a kint-server session
            # instead ({value, source}); the worker fills it in (push_settings.watcher_value).
            "watcher": None,
            # A watcher timing or push setting a session gave, kept while no watcher runs
            # ({value, source}); a timing's row is then the space's own
            # (push_settings.kept_value).
            "kept_for_watcher": None}


def ordered(found: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries in the schema's order (the order of docs/settings.md)."""
    return [found[s.name] for s in SETTINGS if s.name in found]


def text_lines(shown_entries: list[dict[str, Any]]) -> list[str]:
    rows = []
    by_name = {e["name"]: e for e in shown_entries}
    for group in GROUPS:
        for s in SETTINGS:
            if s.group != group or s.name not in by_name:
                continue
            e = by_name[s.name]
            text = "refused" if e.get("refused") else value_text(e["value"])
            source = e["source"] + (f" ({e['where']})" if e.get("where") else "")
            if e.get("no_effect_here"):
                source += f"; {e['no_effect_here']}"
            if e.get("refused"):
                source += f": {e['refused']}; its chain work refuses"
            if e.get("watcher"):  # a session's value the watcher's pushes take instead
                source += (f"; the watcher's pushes use {value_text(e['watcher']['value'])} "
                           f"({e['watcher']['source']})")
            kept = e.get("kept_for_watcher")  # a KINT_NO_WATCHER=1 session's, none runs
            if kept:
                source += (f"; no watcher runs (a {kept['source']}'s "
                           f"{value_text(kept['value'])} is {NONE_TAKE})")
            rows.append((s.name, text, source))
    width = [max(len(r[i]) for r in rows) for i in range(2)] if rows else [0, 0]
    return [f"{r[0]:<{width[0]}}  {r[1]:<{width[1]}}  {r[2]}".rstrip() for r in rows]
