"""The tables of docs/settings.md, made from the schema, so the docs list each setting
once and say the same as the code (tests/test_settings.py compares them). Its prose is
wrapped at the docs' width (tests/test_line_width.py); a table row stays one line."""

from __future__ import annotations

import textwrap

from kint.settings.schema import (CALL_SWITCHES, EXTENSIONS, GROUPS, SETTINGS,
                                  V030_DEPARTURES, Setting)

BEGIN = "<!-- settings: generated from kint/settings/schema.py (python -m kint.settings.docs) -->"
END = "<!-- settings: end -->"


def _default(s: Setting) -> str:
    if s.default_doc:
        return s.default_doc
    if s.default is None or s.default is False:
        return "unset"
    value = s.default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = f"`{value}`"
    if s.minimum is not None and s.minimum > 0:
        minimum = int(s.minimum) if float(s.minimum).is_integer() else s.minimum
        text += f" (at least {minimum})"
    return text


def _read_by(s: Setting) -> str:
    names = {"cli": "CLI", "server": "kint-server", "daemon": "supervisor"}
    return ", ".join(names[r] for r in ("cli", "server", "daemon") if r in s.read_by)


def where_set(s: Setting) -> str:
    """Where a setting may be set, in words."""
    places = []
    if s.in_file:
        table = " (top level, or a space's table)" if s.per_space else ""
        places.append(f"`{s.key}` in config.toml{table}")
    if s.name in CALL_SWITCHES:  # a start on demand leaves them out (autostart.py)
        places.append("the supervisor's environment, when `kint supervisor start` or the "
                      "service starts it")
    elif "daemon" in s.read_by and s.name != "KINT_HOME":
        places.append("the supervisor's environment")
    clients = s.read_by & {"cli", "server"}
    if s.secret and "daemon" in s.read_by:
        places.append("the command's environment too, the same value")
    elif s.scope == "call" and "daemon" in s.read_by:
        places.append("a command's or kint-server's environment, for that call")
    elif s.applied_on:
        places.append("kint-server's environment (sent when it attaches)")
    elif s.name == "KINT_HOME":
        places.append("every process's environment, the same value")
    elif "daemon" in s.read_by and clients:
        places.append("the command's environment, for what the command does itself (†)")
    elif clients == {"cli"}:
        places.append("the command's environment")
    elif clients == {"server"}:
        places.append("kint-server's environment")
    elif clients:
        places.append("the command's or kint-server's environment")
    if s.secret:
        places.append("never in config.toml")
    return "; ".join(places)


def tables() -> str:
    """The generated block: one table per group, one row per setting."""
    out = [BEGIN]
    for group in GROUPS:
        out += ["", f"### {group}", "",
                "| variable | default | scope | where it may be set | read by | meaning |",
                "|---|---|---|---|---|---|"]
        for s in SETTINGS:
            if s.group == group:
                out.append(f"| `{s.name}` | {_default(s)} | {s.scope} | {where_set(s)} | "
                           f"{_read_by(s)} | {s.doc} |")
    out += ["", *_wrapped("† A command reads it for what it does itself (`kint session-key`'s "
                          "keystore and the session key `kint join` makes; the chain of `kint "
                          "authorize` and `kint session-key show` for a store whose space is "
                          "not connected here, an endpoint they name). The chain of a "
                          "connected space is its worker's, for `authorize` and `session-key "
                          "show` as for join's chain reads, connect and restore; the "
                          "supervisor does not take a command's value for a space: it reports "
                          "a different one in one line."), ""]
    out += departures()
    out += ["", END]
    return "\n".join(out)


def departures() -> list[str]:
    """Where a setting differs from the same variable in kint v0.3.0, and which settings
    are kint's own."""
    out = ["### Where a setting departs from kint v0.3.0", "",
           *_wrapped("kint v0.3.0's configuration page is the specification of the variables "
                     "it documents: their names, defaults and bounds are the same here. Where "
                     "one behaves otherwise:"), ""]
    by_note: dict[str, list[str]] = {}  # one line for the settings that share a departure
    for s in SETTINGS:
        if s.name in V030_DEPARTURES:
            by_note.setdefault(V030_DEPARTURES[s.name], []).append(f"`{s.name}`")
    for note, names in by_note.items():
        out += _wrapped(f"- {', '.join(names)}: {note}.", indent="  ")
    own = ", ".join(f"`{s.name}`" for s in SETTINGS if s.name in EXTENSIONS)
    out += ["", *_wrapped(f"kint's own settings, which v0.3.0 does not have: {own}. "
                          "`PYTHONPATH`, the one variable v0.3.0 reads that is no setting, is "
                          "flagged by `kint doctor` here too (a warning while it is set).")]
    return out


# The docs' width (tests/test_line_width.py checks README.md and docs/ against it).
WIDTH = 100


def _wrapped(text: str, indent: str = "") -> list[str]:
    """`text`, a paragraph or a list item (its further lines indented by `indent`), as lines
    of at most WIDTH. Words are never broken, nor at a hyphen (a setting's name, a flag)."""
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)


def replace_block(text: str) -> str:
    """`text` (docs/settings.md) with its generated block made again."""
    start = text.index(BEGIN)
    end = text.index(END) + len(END)
    return text[:start] + tables() + text[end:]


if __name__ == "__main__":
    import sys
    from pathlib import Path

    path = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/settings.md")
    path.write_text(replace_block(path.read_text()))
