"""`kint session-key create` and `rotate` against the running supervisor's local secret.

Both seal the new keystore locally with this command's local secret (its
KINT_SESSION_PASSPHRASE, else the Keychain item or KINT_HOME/local.secret), and only the
supervisor's workers ever open it, with theirs. A command whose passphrase is not the
supervisor's made a key no worker could open: nothing said so until a push refused
NO_SESSION_KEY, long after. So, when a supervisor runs for the home, the command asks it
first, as `kint supervisor status` does (kint.settings.secret_proof: a one-use proof of
this passphrase goes over the socket, one bit comes back; neither secret is printed,
logged or written), and when they differ it refuses before anything is written.

Refused rather than warned, because the key it would write is of no use while that
supervisor runs, and a warning after the write comes too late for `rotate`: the old key
has become session.key.old, and rotating again with the right passphrase would replace
session.key.old, the only copy of the key before (whose authorization, or a push journal
it signed, may still be wanted). The way on costs nothing: the same passphrase as the
supervisor's, or the supervisor stopped first (the next command that needs one starts it
from its own environment). No supervisor running, or one that cannot say (stopped, or
older than the proof), is not asked and not waited for: nothing runs to disagree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kint.client import Client, KintError
from kint.commands.common import refuse
from kint.protocol import ErrorCode
from kint.settings.environ import environ_value

NAME = "KINT_SESSION_PASSPHRASE"


def refuse_if_supervisor_differs(home: Path, verb: str) -> None:
    """Refuse (CONFIG_INVALID, nothing written) when the supervisor running for `home`
    unseals the session key with another local secret than this command would seal the key
    `verb` (created, rotated) with."""
    said = _disagreement(home)
    if said is None:
        return
    pid, why = said
    refuse(ErrorCode.CONFIG_INVALID,
           f"the running supervisor (pid {pid}) {why}: a key {verb} here would be sealed "
           f"under another local secret than its workers unseal it with, and every push "
           f"would refuse NO_SESSION_KEY; nothing was changed",
           f"run it again with the supervisor's {NAME} (or without one, if the supervisor "
           f"runs without it), or give the supervisor this environment's first: the "
           f"service's environment file, or `kint supervisor stop`, then this command "
           f"again (the next command that needs the supervisor starts it from its own "
           f"environment)")


def _disagreement(home: Path) -> tuple[Any, str] | None:
    """(the supervisor's pid, how its local secret differs) or None when it agrees, none
    runs, or it cannot tell."""
    from kint.commands.supervisor_status import status_with_proof

    client = Client(home, autostart=False)
    if not client.ping(1.0):
        return None
    try:
        status = status_with_proof(client)
    except KintError:
        return None
    sup = status.get("supervisor") or {}
    has_it = any(e.get("name") == NAME for e in sup.get("started_with") or [])
    mine = environ_value(NAME) is not None
    if mine and not has_it:
        return sup.get("pid"), (f"runs without {NAME}, so it unseals the session key with "
                                f"this machine's other local secret (the Keychain item or "
                                f"KINT_HOME/local.secret), not this command's {NAME}")
    if mine and sup.get("passphrase_differs"):
        return sup.get("pid"), f"runs with another {NAME} than this command's"
    if not mine and has_it:
        return sup.get("pid"), (f"unseals the session key with its {NAME}, which this "
                                f"command's environment does not set")
    return None
