"""The settings a supervisor was started with: the ones it reads that its own environment
sets, as `kint supervisor status` lists them.

Why: a supervisor started on demand takes the environment of the command that started it
for its whole life, so a one-off `KINT_RPC_URL=... kint status` leaves every space on that
endpoint until a restart. Later commands with another value are told in one line each
(kint.settings.wire); a command with none is not, and this list is where anyone can see
what the running supervisor took. A secret is named as set, never shown; an endpoint is
shown without its path, query or user, where providers put keys (kint.settings.urls).
"""

from __future__ import annotations

import os
from typing import Mapping

from kint.settings.environ import environ_value
from kint.settings.schema import SECRET_SET, SETTINGS
from kint.settings.urls import redact_url


def started_with(environ: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """Each setting the daemon reads that `environ` (this process's) sets, KINT_HOME
    aside, in the schema's order: `name` and `value` as it may be shown (`set` for a
    secret)."""
    env = os.environ if environ is None else environ
    out: list[dict[str, str]] = []
    for setting in SETTINGS:
        if "daemon" not in setting.read_by or setting.name == "KINT_HOME":
            continue  # the home is the status's first line
        raw = environ_value(setting.name, env)
        if raw is None:
            continue
        out.append({"name": setting.name, "value": _as_shown(setting.secret,
                                                             setting.kind, raw)})
    return out


def _as_shown(secret: bool, kind: str, raw: str) -> str:
    if secret:
        return SECRET_SET
    if kind == "url":
        return redact_url(raw.strip())
    return raw

