"""What `kint supervisor start` says of the settings its environment gives when a supervisor
was already running: that it applied none of them.

Why: `kint supervisor start` is how a user gives the supervisor settings for its life (the
service's own, the one-off switches too: kint.settings.schema.CALL_SWITCHES). Beside a
running supervisor it starts nothing, so the settings of its environment go nowhere: the
running one keeps those it was started with. A setting a user gives is honoured or
reported, never silently dropped, so the start says so in one line (a `notices` entry under
--json), naming the settings only: a value may be a secret or hold an endpoint's key.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from kint.client import Client, KintError
from kint.settings.started_with import started_with


def answering_pid(home: Path) -> int | None:
    """The pid of the supervisor answering on `home`'s socket now, or None when none does
    (asked without starting one)."""
    with Client(home, autostart=False) as client:
        if not client.ping(1.0):
            return None
        try:
            return int(client.call("sup.ping", timeout_s=5)["pid"])
        except KintError:
            return None


def not_applied(before: int | None, running: int,
                environ: Mapping[str, str] | None = None) -> list[str]:
    """The line for a start that found supervisor `running` already answering (`before`,
    the pid seen before the start, is the same one) while `environ` (this process's) sets
    settings it reads; none otherwise (this start started it, with them all)."""
    given = [entry["name"] for entry in started_with(os.environ if environ is None
                                                     else environ)]
    if before != running or not given:
        return []
    return [f"kint: a supervisor was already running (pid {running}): this start applied "
            f"none of this environment's settings ({', '.join(given)}); it keeps the ones it "
            f"was started with (`kint supervisor status` lists them). To run it with these, "
            f"`kint supervisor stop`, then `kint supervisor start` again"]
