"""`kint session-key create | show | rotate`: this machine's session key.

The session key is a plain EOA in `$KINT_HOME/session.key` (a V3 scrypt keystore, 0600,
kint.custody.session_key) that pays for epochs and decrypts nothing. Creating and rotating
are local: neither touches the chain, and a new key needs the owner's authorization
(`kint authorize`) and a little ETH before it can push. `show` is the one that asks the
chain, so a person can see at a glance whether this machine can write.

The keystore's and the chain's modules (eth_account, web3: ~0.6 s) load in the action that
uses them, so `kint session-key --help` and a refused command line load neither.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kint.commands.common import Ctx, echo_json, json_option, usage_error
from kint.custody.errors import CustodyError
from kint.paths import kint_home


# `--owner` given before the action (`kint session-key --owner 0x... show`), as kint
# v0.3.0's command line took it: its action was a positional argument beside the flag.
_PRE_OWNER = "kint.session_key.owner"


def _remember_owner(ctx: click.Context, _param: click.Parameter, value: str | None
                    ) -> str | None:
    if value is not None:
        ctx.meta[_PRE_OWNER] = value
    return value


@click.group("session-key")
@click.option("--owner", default=None, hidden=True, expose_value=False,
              callback=_remember_owner)
def session_key_group() -> None:
    """This machine's session key: a plain EOA in KINT_HOME/session.key (a V3 scrypt
    keystore, mode 0600) that signs EpochAnchor transactions and decrypts nothing. Its
    password is the local secret: KINT_SESSION_PASSPHRASE, else the macOS Keychain item
    dev.kint-session-key (skipped with KINT_NO_KEYCHAIN=1), else KINT_HOME/local.secret."""


def _no_owner(action: str) -> None:
    """`--owner` before an action that takes none is refused, not silently ignored."""
    if _PRE_OWNER in click.get_current_context().meta:
        usage_error(f"--owner does not apply to `kint session-key {action}` (it is for "
                    f"`show`)", "leave --owner out")


# kint v0.3.0's line after `created:` (02-quickstart.md): what a new key needs before it
# can push. On stderr, so that stdout stays the one `created: 0x...` line a script reads.
CREATED_NEXT = ("fund it with a little ETH on Base and authorize it from the owner "
                "(kint authorize ...)")


@session_key_group.command("create", short_help="Create the session key (an existing one is kept).")
def create_cmd() -> None:
    """Create the session key: prints `created: 0x...` and, on stderr, kint v0.3.0's next
    step (fund it, authorize it), or `exists: 0x...` when there is one already (it is left
    alone). Does not touch the chain. A supervisor running with another
    KINT_SESSION_PASSPHRASE (or none where this has one, or one where this has none)
    refuses it before a key is made: its workers could not open the key."""
    from kint.commands.key_passphrase import refuse_if_supervisor_differs
    from kint.commands.key_refusals import refuse_custody
    from kint.custody.session_key import create_session_key, session_key_exists

    _no_owner("create")
    if not session_key_exists(kint_home()):  # an existing key is left alone: nothing to seal
        refuse_if_supervisor_differs(kint_home(), "created")
    try:
        address, existed = create_session_key(kint_home())
    except CustodyError as err:
        refuse_custody(err)
    click.echo(f"{'exists' if existed else 'created'}: {address}")
    if not existed:
        click.echo(CREATED_NEXT, err=True)


@session_key_group.command("rotate",
                           short_help="Keep the old key as session.key.old; make a new one.")
def rotate_cmd() -> None:
    """Move session.key to session.key.old and create a new key. Local only: the new key
    needs its own authorization and ETH, and the old one stays authorized on chain until
    its expiry unless the owner revokes it (revokeSessionKey). Refused, nothing moved, while
    a supervisor runs with another KINT_SESSION_PASSPHRASE (or none where this has one, or
    one where this has none): its workers could not open the new key."""
    from kint.commands.key_passphrase import refuse_if_supervisor_differs
    from kint.commands.key_refusals import refuse_custody
    from kint.custody.session_key import rotate_session_key, session_key_path

    _no_owner("rotate")
    refuse_if_supervisor_differs(kint_home(), "rotated")
    try:
        old, new = rotate_session_key(kint_home())
    except CustodyError as err:
        refuse_custody(err)
    click.echo(f"rotated: {old or '(no previous key)'} -> {new}")
    # With no key before it, nothing was moved: session.key.old is not there to name.
    kept = (f"the old keystore is {session_key_path(kint_home(), old=True)}" if old
            else "there was no key to keep")
    click.echo(f"{kept}; authorize the new key (kint authorize) and send it a little ETH",
               err=True)


@session_key_group.command("show", short_help="JSON: address, path, balance, authorized, expiry.")
@click.option("--owner", default=None, metavar="ADDRESS",
              help="The owner to check the authorization against [default: the connected "
                   "owner]; also taken before the action (kint session-key --owner 0x... "
                   "show). The connected owner, given or not, is refused on another "
                   "contract than the one the space was connected on.")
@json_option("The answer is JSON either way (as in kint v0.3.0); with --json a refusal is "
             "one JSON object on stdout too.")
@click.pass_obj
def show_cmd(obj: Ctx, owner: str | None, as_json: bool) -> None:
    """JSON: address, path, exists, and when the chain answers balance_wei, balance_eth,
    and (for a known owner) authorized and expiry.

    The answer is v0.3.0's JSON with or without --json; --json only makes a refusal (a bad
    --owner, an unreadable keystore or enrolment, a refused chain setting) the JSON object
    every other --json command refuses with, where v0.3.0's plain `kint: error` line stays
    the default."""
    from kint.commands.key_refusals import session_key_address
    from kint.commands.owner_address import checked_address, connected_owner
    from kint.custody.session_key import session_key_exists, session_key_path

    del as_json  # read by json_option's callback: it only changes how refusals print
    before = click.get_current_context().meta.get(_PRE_OWNER)
    if owner is None:
        owner = before
    elif before is not None and before.lower() != owner.lower():
        usage_error(f"--owner is given twice, {before} before `show` and {owner} after it",
                    "give --owner once")
    home = kint_home()
    path = session_key_path(home)
    out: dict[str, Any] = {"address": None, "path": str(path),
                           "exists": session_key_exists(home)}
    if out["exists"]:
        out["address"] = session_key_address(home)
    given = checked_address(owner) if owner else None
    owner = given or connected_owner(obj.tenant, obj.db, home)
    if owner is not None:
        out["owner"] = owner
    if out["address"] is not None:
        out.update(_from_chain(obj, home, out["address"], owner, given))
    echo_json(out)


def _from_chain(obj: Ctx, home: Path, address: str, owner: str | None,
                owner_given: str | None) -> dict[str, Any]:
    """Which chain it read (its id, endpoint and what set it: the space's worker's when the
    caller's space is connected here, else the machine's; before `connect`, or with
    KINT_RPC_URL alone, that is Base), then balance and, for an owner, authorization: what the chain
    says, or nothing more when it does not answer or answers for another chain than the
    one this machine signs for (the local half of `show` still prints). A view that
    returned no data (no EpochAnchor at the contract on the endpoint's chain) is said as
    the endpoint's answer with what to check, as `authorize` refuses it, where it said the
    chain did not answer. The connected owner's authorization on another contract than the
    space's is refused (exit 2): it says nothing of the key's right to push to the space
    (open_anchor)."""
    from kint.chain.anchor import NoContractThere
    from kint.chain.calls import ChainRefused
    from kint.chain.key_facts import read_key_facts
    from kint.chain.rpc import RpcUnavailable
    from kint.commands.onchain import chain_shown, endpoint_on_other_chain, open_anchor, said

    anchor = open_anchor(obj, home, owner_given)
    shown = {"chain": chain_shown(anchor)}
    try:
        wrong = endpoint_on_other_chain(anchor)
        if wrong is not None:
            click.echo(f"kint: warning: {wrong[0]}; showing the local half only ({wrong[1]})",
                       err=True)
            return shown
        return {**shown, **read_key_facts(anchor, address, owner).as_json()}
    except NoContractThere as err:  # the endpoint answered: no EpochAnchor at the address
        click.echo(f"kint: warning: {err.happened}; showing the local half only "
                   f"({err.step})", err=True)
        return shown
    except (RpcUnavailable, ChainRefused) as err:
        words = said(err, anchor) if isinstance(err, RpcUnavailable) else str(err)
        click.echo(f"kint: warning: the chain did not answer ({words}); showing the local "
                   f"half only", err=True)
        return shown
