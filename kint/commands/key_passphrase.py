"""`kint session-key create` and `rotate` against the running supervisor's local secret.

Both seal the new keystore locally with this command's local secret (its
KINT_SESSION_PASSPHRASE, else the Keychain item or KINT_HOME/local.secret), and only the
supervisor's workers ever open it, with theirs. A command whose passphrase is not the
supervisor's made a key no worker could open: nothing said so until a push refused
NO_SESSION_KEY, long after. So, when a supervisor runs for the home, the command asks it
first, as `kint supervisor status` does (kint.settings.secret_proof: a proof of this
passphrase, an HMAC over a fresh nonce, goes over the socket, one bit comes back; neither
secret is printed, logged or written), and when they differ it refuses before anything is
written. `kint join`, which makes the key where there is none, stops at its session key
step the same way.
What is compared is KINT_SESSION_PASSPHRASE alone, whether each side has one and whether
they are the same: with none on either side, whether each uses the Keychain item or
local.secret (KINT_NO_KEYCHAIN=1 on macOS) is not known to the command, and not refused.

Refused rather than warned, because the key it would write is of no use while that
supervisor runs, and a warning after the write comes too late for `rotate`: the old key
has become session.key.old, and rotating again with the right passphrase would replace
session.key.old, the only copy of the key before (whose authorization, or a push journal
it signed, may still be wanted). The way on costs nothing: the same passphrase as the
supervisor's, or the supervisor stopped first (the next command that needs one starts it
from its own environment). No supervisor running (or one stopped) is not waited for:
nothing runs to disagree. One that cannot say is not refused: older than `started_with`
(the settings it took from its environment), it cannot say whether it has a passphrase;
older than the proof, whether one both have is the same.
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
    said = supervisor_disagrees(home, verb)
    if said is not None:
        refuse(ErrorCode.CONFIG_INVALID, *said)


def supervisor_disagrees(home: Path, verb: str, command: str = "this command"
                         ) -> tuple[str, str] | None:
    """The refusal's (message, hint) when the running supervisor unseals the session key
    with another local secret than this command's, else None; the hint names `command` as
    the one to run again. `kint join`, which makes the key where there is none, stops at its
    session key step with it (join_steps)."""
    said = _disagreement(home)
    if said is None:
        return None
    pid, why = said
    # This environment's passphrase given to the supervisor comes first: a key sealed under
    # the supervisor's instead could not be opened by this shell's later commands that sign
    # with it (`kint authorize submit`).
    return (f"the running supervisor (pid {pid}) {why}: a key {verb} here would be sealed "
            f"under another local secret than its workers unseal it with, and every push "
            f"would refuse NO_SESSION_KEY; nothing was changed",
            f"give the supervisor this environment's {NAME} (or none, if this environment "
            f"has none) first: the service's environment file, or `kint supervisor stop`, "
            f"then {command} again (the next command that needs the supervisor starts it "
            f"from its own environment); or run {command} with the supervisor's {NAME} "
            f"(without one, if the supervisor has none)")


def _disagreement(home: Path) -> tuple[Any, str] | None:
    """(the supervisor's pid, how its local secret differs) or None when it agrees, none
    runs, or it cannot tell (stopped, or older than `started_with`, the list of the
    settings it took from its environment: it cannot say whether it has a passphrase)."""
    from kint.commands.supervisor_status import status_with_proof

    with Client(home, autostart=False) as client:
        if not client.ping(1.0):
            return None
        try:
            status = status_with_proof(client)
        except KintError:
            return None
    sup = status.get("supervisor") or {}
    if "started_with" not in sup:
        return None
    has_it = any(e.get("name") == NAME for e in sup["started_with"] or [])
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
