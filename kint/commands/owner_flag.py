"""`--owner` on `push`, `compact`, `pull`, `rekey` and `doctor`, as kint v0.3.0's CLI
reference (09-cli.md) gives it: "the owner wallet address", default the connected owner.

This kint acts for the owner the space is connected to (its enrolment); a command does not
switch owners. So the flag is taken, for the scripts written against v0.3.0, and checked:
the connected owner passes, any other address is refused (exit 2) before anything is sent,
and a space that is not connected is left to the command's own refusal.
"""

from __future__ import annotations

from typing import Any, Callable

import click

from kint.commands.common import Ctx

OWNER_HELP = ("The owner wallet address; it must be the connected owner [default: the "
              "connected owner].")


def owner_option() -> Callable[[Any], Any]:
    return click.option("--owner", default=None, metavar="ADDRESS", help=OWNER_HELP)


def check_owner(obj: Ctx, owner: str | None) -> None:
    """Refuse `--owner` unless it names the owner this space is connected to. The address
    helpers (kint.commands.owner_address) load only when the flag is given, and web3 not
    at all."""
    if owner is None:
        return
    from kint.commands.common import usage_error
    from kint.commands.owner_address import checked_address, connected_owner
    from kint.paths import kint_home

    given = checked_address(owner)
    connected = connected_owner(obj.tenant, obj.db, kint_home(), owner_given=True)
    if connected is not None and connected != given:
        usage_error(f"--owner {given} is not the owner this space is connected to "
                    f"({connected}); this kint acts for the connected owner",
                    f"leave --owner out, or run kint connect --owner {given} first")


def refuse_unconnected(obj: Ctx) -> None:
    """`rekey` on a space not connected here: its own refusal, exit 2, as kint v0.3.0's
    exit table has every refusal of rekey's own (09-cli.md), and before any passphrase is
    asked for. (The worker's NOT_CONNECTED is also a push's refusal, exit 5, so the status
    cannot come from the code alone.)"""
    from kint.commands.common import refuse
    from kint.commands.owner_address import connected_owner
    from kint.paths import kint_home
    from kint.protocol.errors import ErrorCode
    from kint.tenant_worker.enrolment import NOT_CONNECTED_HINT, NOT_CONNECTED_MESSAGE

    if connected_owner(obj.tenant, obj.db, kint_home()) is None:
        refuse(ErrorCode.NOT_CONNECTED, NOT_CONNECTED_MESSAGE, NOT_CONNECTED_HINT)
