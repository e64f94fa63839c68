"""Settings that travel with a request, and the one-line reports of those not used.

A client sends, with every request to a worker, the value in its environment of each
setting the daemon reads (`outgoing`); of a secret, only that it is set, with a proof
that tells the worker whether it is the worker's own (kint.settings.secret_proof). The worker
(`apply`) uses the call-scope ones for this call, and the watcher's timings on attach;
every other value is compared with what the space runs with, and a difference comes back
as one line naming the running value, where it comes from and how to change it. A value
that does nothing on this platform (KINT_NO_KEYCHAIN off macOS) is said to do nothing. A
chain setting (strict) that does not parse is refused for the call: its chain work fails
naming it, rather than go to the space's chain in its place.
Nothing a caller sets is silently ignored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from kint.settings import secret_proof
from kint.settings.environ import environ_value
from kint.settings.loader import (DAEMON_ENV, DEFAULT, THIS_CALL, RequestView, Value, config,
                                  refused_in_env, shared_view)
from kint.settings.schema import BY_NAME, SENT, Setting
from kint.settings.values import BadValue, given, parse, shown

# Most settings a request may carry (there are fewer than this).
MAX_SENT = 64
MAX_SENT_CHARS = 4096

@dataclass(frozen=True)
class Kept:
    """What a watcher timing is compared with (the worker's SpaceContext.compared_setting)
    where KINT_NO_WATCHER=1 kint-server sessions gave one: their values, kept though no
    watcher takes them, the newest first, and the watcher's value (`running`) when one
    runs. A caller's value that is one of them is not reported (such a session's own
    calls, an older one's too); another is told what the watcher runs with, or that no
    watcher runs, as `kint config show` says, never that the space "runs with" a value
    nothing runs on."""

    values: tuple[Value, ...]
    running: Value | None = None


Effective = Callable[[str, Value], "Value | Kept"]
# Where a report's way to change the value begins (kint-server hands it to the human).
CHANGE_IT = "; to change it, "
# What becomes of a KINT_NO_WATCHER=1 session's watcher timing or push setting: kept, so its
# own calls are not told on each that it is unused, and taken by no watcher.
NONE_TAKE = "kept, unused: that session asked for no watcher"


def outgoing(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a client sends: its environment's value of every setting the daemon reads."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for name in sorted(SENT):
        raw = environ_value(name, env)
        if raw is None:
            continue
        if BY_NAME[name].secret:
            out[name] = secret_proof.proof(raw)
        elif len(raw) <= MAX_SENT_CHARS and "\x00" not in raw:
            out[name] = raw
    return out


def check_sent(sent: Any) -> tuple[str, str | None] | None:
    """(why `sent` is not a settings mapping a request may carry, what to do or None for
    the usual hint), or None."""
    if not isinstance(sent, dict):
        return "must be an object of setting names to strings", None
    if len(sent) > MAX_SENT:
        return f"carries more than {MAX_SENT} settings", None
    for name, raw in sent.items():
        if name not in SENT:
            return f"names {name[:64]!r}, which is not a setting the daemon reads", None
        if not isinstance(raw, str) or not raw or len(raw) > MAX_SENT_CHARS or "\x00" in raw:
            return (f"has a bad value for {name} (a string of 1 to {MAX_SENT_CHARS} "
                    f"characters)", None)
        if BY_NAME[name].secret and not secret_proof.well_formed(raw):
            return secret_proof.malformed(name)
    return None


def same(setting: Setting, a: Any, b: Any) -> bool:
    if setting.kind == "flag":
        return bool(a) == bool(b)
    if a is None or b is None:
        return a is b
    if setting.kind == "url":
        from kint.chain.config import same_endpoint

        return same_endpoint(a, b)
    if setting.kind == "address":
        return str(a).lower() == str(b).lower()
    if setting.kind == "ttl":
        from kint.custody.vault_cache import parse_key_ttl

        return parse_key_ttl(a) == parse_key_ttl(b)
    if setting.kind in ("float", "int"):
        return float(a) == float(b)
    return a == b


def source_text(v: Value) -> str:
    if v.source == DEFAULT:
        return "the default"
    if v.source == DAEMON_ENV:
        return "from the supervisor's environment"
    return f"from {v.described}"


def _how(setting: Setting, running: Value, label: str, path: str) -> str:
    table = f'[spaces."{label}"]'
    if setting.applied_on:
        return (f"kint-server sends it when it attaches (set it in the harness's MCP "
                f"configuration), or set {setting.key} under {table} in {path}")
    if setting.scope == "space":
        return (f"set {setting.key} under {table} in {path} (read again when it changes; at "
                f"the top level it applies to every space)")
    if running.source == DAEMON_ENV:
        return ("the supervisor was started with it: change it in the service's environment "
                "file and restart the service, or `kint supervisor stop` and run any command "
                "from this environment")
    return f"set {setting.key} in {path} (read again when it changes)"


def report(setting: Setting, raw: str, running: Value, label: str, path: str) -> str:
    """The one line for a value a caller gave that this call does not use."""
    who = f"space {label}" if setting.scope == "space" else "the supervisor"
    theirs = shown(setting, raw) if setting.kind == "url" else raw
    runs = (f"runs with {shown(setting, running.value)} ({source_text(running)})"
            if running.refused is None else f"has its own refused ({running.refused})")
    return (f"kint: {setting.name}={theirs} in this environment is not used: {who} {runs}"
            f"{CHANGE_IT}{_how(setting, running, label, path)}")


def kept_report(setting: Setting, raw: str, kept: Kept, running: Value, label: str,
                path: str) -> str:
    """The one line for a watcher timing a caller gave that is none of those `kept` holds:
    what the watcher runs with, or, while none runs, that none does."""
    if kept.running is not None:
        return report(setting, raw, kept.running, label, path)
    newest = kept.values[0]
    return (f"kint: {setting.name}={raw} in this environment is not used: no watcher runs in "
            f"space {label} (a {newest.source}'s {shown(setting, newest.value)} is {NONE_TAKE})"
            f"{CHANGE_IT}{_how(setting, running, label, path)}")


def apply(op: str, sent: Mapping[str, str], *, label: str,
          effective: Effective | None = None) -> tuple[dict[str, Value], list[str]]:
    """This request's settings (the process's, with the call's on top where they apply)
    and the lines to report: the config file refused, values not used."""
    cfg, error = config()
    notices: list[str] = []
    if error is not None:
        notices.append(f"kint: {error}; the last good configuration keeps serving")
    if not sent:  # most requests: nothing to compare, nothing written in the view
        return shared_view(cfg), notices
    values: dict[str, Value] = RequestView(cfg)
    path = str(cfg.path)
    for name, raw in sorted(sent.items()):
        setting = BY_NAME[name]
        running, kept = values[name], None
        if effective is not None:
            compared = effective(name, running)
            if isinstance(compared, Kept):
                kept = compared
            else:
                running = compared
        if setting.secret:
            line = secret_proof.notice(name, raw, running.value)
            if line is not None:
                notices.append(line)
            continue
        try:
            theirs = parse_sent(setting, raw)
        except BadValue as err:
            if setting.strict:  # the chain: refused for this call, never the space's instead
                values[name] = refused_in_env(setting, raw, str(err), THIS_CALL)
                notices.append(_chain_work_refused(setting, raw, err))
                continue
            notices.append(f"kint: {name}={given(setting, raw)} in this environment {err}, so "
                           f"it is not used: this call runs with "
                           f"{shown(setting, running.value)} ({source_text(running)})")
            continue
        idle = setting.no_effect_here(theirs)
        if idle is not None:  # wherever it were set, it would do nothing here
            notices.append(f"kint: {name}={raw} in this environment has {idle}")
            continue
        if setting.applies(op):
            values[name] = Value(setting, theirs, THIS_CALL, raw=raw)
        elif kept is not None:
            held = kept.values + ((kept.running,) if kept.running is not None else ())
            if not any(same(setting, theirs, v.value) for v in held):
                notices.append(kept_report(setting, raw, kept, running, label, path))
        elif not same(setting, theirs, running.value):
            notices.append(report(setting, raw, running, label, path))
    return values, notices


def differing(sent: Mapping[str, str]) -> list[str]:
    """The names among a caller's settings (as `outgoing` makes them) whose value this
    process does not run with, by apply's comparisons: a secret's proof checked against
    its own, a value parsed and compared as parsed (`24h` is 86400), one that does not
    parse counted as differing. Names only: a value may be a secret or hold a key."""
    cfg, _ = config()
    values = shared_view(cfg)
    out = []
    for name, raw in sorted(sent.items()):
        setting, running = BY_NAME[name], values[name]
        if setting.secret:
            if secret_proof.notice(name, raw, running.value) is not None:
                out.append(name)
            continue
        try:
            theirs = parse_sent(setting, raw)
        except BadValue:
            out.append(name)
            continue
        if not same(setting, theirs, running.value):
            out.append(name)
    return out


def parse_sent(setting: Setting, raw: str) -> Any:
    """A value a client sent, parsed and raised to the setting's minimum (BadValue when it
    does not parse): what the worker runs with for it."""
    value = parse(setting, raw)
    if setting.minimum is not None and value < setting.minimum:
        value = type(value)(setting.minimum)
    return value


def _chain_work_refused(setting: Setting, raw: str, err: BadValue) -> str:
    """The line for a chain setting of this call that does not parse."""
    return (f"kint: {setting.name}={given(setting, raw)} in this environment {err}, so this "
            f"call's chain work is refused")


def refusal_notices(notices: list[str], sent: Mapping[str, str], values: Mapping[str, Value],
                    refusal: str) -> list[str]:
    """The notices a refusal carries in its hint: all of them but the line saying a chain
    setting of this call does not parse when the refusal (`refusal`, its message) is that
    setting's own, whose message already names it and whose hint says what to do; the
    hint repeated it as a second `kint:` line under the `hint:` one."""
    restated = set()
    for name, raw in sent.items():
        value = values[name]
        if value.source == THIS_CALL and value.refused and value.refused in refusal:
            try:
                parse(value.setting, raw)
            except BadValue as err:
                restated.add(_chain_work_refused(value.setting, raw, err))
    return [line for line in notices if line not in restated]
