"""`kint authorize direct | payload | submit | page | burn-nonce`: give this machine's
session key the right to push under an owner, on EpochAnchor.

The contract lets `key` push for `owner` while sessionKeyExpiry[owner][key] is in the
future. The lanes differ only in who signs and who pays (docs/authorize.md):

- `direct`: the owner key from KINT_OWNER_KEY (the environment only, never argv) sends
  setSessionKey(key, now + days).
- `payload`, then `submit`: the owner signs EIP-712 typed data offline (a hardware wallet);
  the session key submits setSessionKeyBySig and pays.
- `page`: a one-shot page on 127.0.0.1 asks the browser's wallet to send setSessionKey.
- `burn-nonce`: the owner re-sends the key's current expiry, which only consumes authNonce
  and so kills any signed authorization that was never submitted.

Every lane needs this machine's session key and an owner (`--owner`, else the owner this
machine is connected to for the caller's space; for that owner, given or not, the contract
in force must be the one the space was connected on, kint.commands.enrolled_contract). The
flags are also accepted before the action (`kint authorize --days 7 direct`), as kint
v0.3.0's parser takes them.

web3 and eth_account (~0.5 s on a busy box) load only once the command line has passed
its checks: a refused flag, a missing session key and `kint authorize --help` answer
without them (`kint.commands.onchain` loads web3; the owner's and the session key's
addresses are read with kint.custody.ids' helpers, without eth_utils).

This module is the group and the two lanes where the owner's key is in the environment
(direct, burn-nonce); payload and submit are kint.commands.authorize_signature, page is
kint.commands.authorize_page_lane, and the steps every lane takes kint.commands.authorize_steps.
"""

from __future__ import annotations

from typing import Any

import click

from kint.commands.authorize_page_lane import page_cmd
from kint.commands.authorize_signature import payload_cmd, submit_cmd
from kint.commands.authorize_steps import (PRE_FLAGS, days_flag, days_option, funding_hint,
                                           no_others, owner_account, owner_and_key,
                                           owner_option, pre_options, send_from_owner,
                                           sent_lines, space_anchor)
from kint.render import utc_time as when


@click.group("authorize")
@pre_options
@click.pass_context
def authorize_group(ctx: click.Context, **pre: Any) -> None:
    """Authorize this machine's session key to push under the owner, in one of four lanes
    (direct; payload, then submit; page; burn-nonce, which only cancels). Every lane
    needs a session key (kint session-key create) and an owner (--owner, else the
    connected owner)."""
    ctx.meta[PRE_FLAGS] = {k: v for k, v in pre.items() if v is not None}


authorize_group.add_command(payload_cmd)
authorize_group.add_command(submit_cmd)
authorize_group.add_command(page_cmd)


# -- direct -----------------------------------------------------------------------------------


@authorize_group.command("direct",
                         short_help="The owner key in KINT_OWNER_KEY sends setSessionKey.")
@owner_option
@days_option
@click.pass_context
def direct_cmd(ctx: click.Context, owner: str | None, days: int | None) -> None:
    """The owner key in KINT_OWNER_KEY (environment only) sends setSessionKey(key, now +
    days) and pays. Refused when that key is not the owner's."""
    no_others(ctx, "deadline", "expiry", "signature")
    days_n = days_flag(ctx, days)
    owner_addr, key = owner_and_key(ctx, owner)
    account = owner_account(owner_addr)
    from kint.commands.onchain import chain_errors, chain_now, refuse_other_chain

    with chain_errors("authorize direct"):
        anchor = space_anchor(ctx, owner)
        refuse_other_chain(anchor)  # before the owner's transaction is signed for it
        expiry = chain_now(anchor) + days_n * 86400
        receipt = send_from_owner(anchor, account, anchor.encode_set_session_key(key, expiry))
    for line in sent_lines(receipt, owner_addr, key, None):
        click.echo(line)
    click.echo(f"expiry {expiry} ({when(expiry)}, {days_n} days)")
    funding_hint(anchor, key)


# -- burn-nonce -------------------------------------------------------------------------------


@authorize_group.command("burn-nonce", short_help="Consume authNonce: unsubmitted signatures die.")
@owner_option
@click.pass_context
def burn_nonce_cmd(ctx: click.Context, owner: str | None) -> None:
    """The owner key in KINT_OWNER_KEY re-sends setSessionKey with the key's current expiry:
    nothing changes but authNonce, so every signed, unsubmitted authorization dies."""
    no_others(ctx, "days", "deadline", "expiry", "signature")
    owner_addr, key = owner_and_key(ctx, owner)
    account = owner_account(owner_addr)
    from kint.commands.onchain import chain_errors, refuse_other_chain, tx_line

    with chain_errors("authorize burn-nonce"):
        anchor = space_anchor(ctx, owner)
        refuse_other_chain(anchor)
        current = anchor.session_key_expiry(owner_addr, key)
        receipt = send_from_owner(anchor, account, anchor.encode_set_session_key(key, current))
        nonce = anchor.auth_nonce(owner_addr)
    click.echo(f"nonce consumed: authNonce({owner_addr}) is now {nonce}")
    click.echo(tx_line(receipt, f"the owner {owner_addr}"))

