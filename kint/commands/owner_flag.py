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
                    other_owner_hint(obj, given))


def other_owner_hint(obj: Ctx, given: str) -> str:
    """What to do about another owner's `--owner`. `kint connect --owner GIVEN` moves the
    space to that owner only while this machine holds no epoch of the connected owner's
    vault (a connect given a mistyped owner, which started a vault nobody anchored); once
    it holds one (its mirror's head or watermark past 0, a push journal on its way)
    connect refuses it, and another
    owner's memory is another tenant's space, so the hint says that instead of sending the
    user to a connect that refuses (kint.tenant_worker.connect_owner.owner_change). Both
    ask kint.tenant_worker.owner_bound, so they agree."""
    from kint import spaces
    from kint.commands.seen_here import seen_on_disk
    from kint.paths import kint_home, space_files
    from kint.tenant_worker.owner_bound import bound_to_owner

    home, space_id = kint_home(), spaces.resolve(obj.tenant, obj.db).space_id
    if bound_to_owner(lambda: seen_on_disk(home, space_id),
                      space_files(home, space_id[:16])["pending"]):
        return ("leave --owner out; another owner's memory takes a tenant of its own: "
                f"`kint --tenant T connect --owner {given}`, then `kint --tenant T ...` "
                "(this space holds epochs of the connected owner's vault and stays theirs)")
    return f"leave --owner out, or run kint connect --owner {given} first"


def refuse_unconnected(obj: Ctx) -> None:
    """`rekey` on a space not connected here: its own refusal, exit 2, as kint v0.3.0's
    exit table has every refusal of rekey's own (09-cli.md), and before any passphrase is
    asked for. (The worker's NOT_CONNECTED is also a push's refusal, exit 5, so the status
    cannot come from the code alone.)"""
    from kint.commands.common import refuse
    from kint.commands.owner_address import connected_owner
    from kint.paths import kint_home
    from kint.protocol.errors import ErrorCode
    from kint.protocol.hints import NOT_CONNECTED_HINT
    from kint.tenant_worker.enrolment import NOT_CONNECTED_MESSAGE

    if connected_owner(obj.tenant, obj.db, kint_home()) is None:
        refuse(ErrorCode.NOT_CONNECTED, NOT_CONNECTED_MESSAGE, NOT_CONNECTED_HINT)
