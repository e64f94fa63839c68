"""What every `kint authorize` lane shares: its flags (accepted before the action too, as
kint v0.3.0's parser takes them), the owner and this machine's session key, EpochAnchor as
the caller's space reaches it, the owner's key and transaction, and the lines a sent
authorization prints.

Why a module of its own: the lanes (kint.commands.authorize: direct and burn-nonce;
authorize_signature: payload and submit; authorize_page_lane: page) each take these steps,
and each lane's module stays about its own. Nothing here loads web3 or eth_account at
import: `kint authorize --help` and a refused flag answer without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NoReturn

import click

from kint.commands.common import Ctx, refuse, usage_error
from kint import settings
from kint.paths import kint_home
from kint.protocol import ErrorCode
from kint.render import utc_time as when

if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount

    from kint.chain.anchor import Anchor

OWNER_KEY_ENV = "KINT_OWNER_KEY"
DEFAULT_DAYS = 30
MAX_DAYS = 36500  # a hundred years: far inside uint64, and no key should need more
# Where the group keeps the flags given before the action (click.Context.meta).
PRE_FLAGS = "kint.authorize.pre"


# -- the flags, accepted before or after the action -------------------------------------------


def pre_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The lanes' flags on the group too (hidden), for `kint authorize --days 7 direct`."""
    for flag, kw in reversed([
            ("--owner", {}), ("--days", {"type": int}), ("--deadline", {"type": int}),
            ("--expiry", {"type": int}), ("--signature", {})]):
        fn = click.option(flag, default=None, hidden=True, **kw)(fn)
    return fn


def flag_value(ctx: click.Context, name: str, value: Any, applies: bool = True) -> Any:
    """The subcommand's value, else the one given before the action. A flag given before
    an action it does not apply to is refused rather than silently ignored."""
    pre = ctx.meta.get(PRE_FLAGS, {})
    if name in pre and not applies:
        usage_error(f"--{name} does not apply to `kint authorize {ctx.info_name}`",
                    f"leave --{name} out")
    return value if value is not None else pre.get(name)


def days_flag(ctx: click.Context, days: int | None) -> int:
    value = flag_value(ctx, "days", days)
    value = DEFAULT_DAYS if value is None else value
    if value < 1:
        usage_error(f"--days {value}: the authorization must last at least one day",
                    "give --days 1 or more")
    if value > MAX_DAYS:
        usage_error(f"--days {value} is more than {MAX_DAYS} days",
                    f"give at most {MAX_DAYS}, and authorize again when it expires")
    return value


def no_others(ctx: click.Context, *names: str) -> None:
    for name in names:
        flag_value(ctx, name, None, applies=False)


owner_option = click.option(
    "--owner", default=None, metavar="ADDRESS",
    help="The owner wallet address [default: the connected owner]. The connected owner, "
         "given or not, is refused on another contract than the one the space was "
         "connected on.")
days_option = click.option(
    "--days", type=int, default=None, metavar="N",
    help=f"The authorization's lifetime in days, from now [default: {DEFAULT_DAYS}].")


# -- shared steps -----------------------------------------------------------------------------


def command_ctx(ctx: click.Context) -> Ctx:
    return ctx.find_object(Ctx) or Ctx(None, None, False)


def owner_and_key(ctx: click.Context, owner: str | None) -> tuple[str, str]:
    obj = command_ctx(ctx)
    home = kint_home()
    from kint.commands.key_refusals import session_key_address
    from kint.commands.owner_address import resolve_owner

    owner_addr = resolve_owner(flag_value(ctx, "owner", owner), obj.tenant, obj.db, home)

    return owner_addr, session_key_address(home)


def space_anchor(ctx: click.Context, owner: str | None, say_endpoint: bool = True) -> Anchor:
    """EpochAnchor, through the endpoint and contract the caller's space's worker uses when
    the space is connected here, else the machine's, named on stderr with `say_endpoint`
    (onchain.open_anchor);
    refused when the owner is the space's own and the contract in
    force is not the one the space was connected on (the authorization would land where
    the space has no epochs)."""
    from kint.commands.onchain import open_anchor
    from kint.commands.owner_address import checked_address

    obj = command_ctx(ctx)
    given = flag_value(ctx, "owner", owner)
    return open_anchor(obj, kint_home(), checked_address(given) if given else None,
                       say_endpoint=say_endpoint)


def owner_account(owner: str) -> LocalAccount:
    """The owner's key from KINT_OWNER_KEY, refused unless it is the owner's. The value is
    never printed, and is read from the environment only."""
    from eth_account import Account

    raw = (settings.value(OWNER_KEY_ENV) or "").strip()
    if not raw:
        refuse(ErrorCode.BAD_REQUEST,
               f"{OWNER_KEY_ENV} is not set: this lane reads the owner's private key from the "
               f"environment (never argv)",
               f"set {OWNER_KEY_ENV} in this command's environment, or let the owner wallet "
               f"sign instead: kint authorize payload (then submit), or kint authorize page")
    try:
        account: LocalAccount = Account.from_key(raw if raw.startswith("0x") else "0x" + raw)
    except Exception:
        refuse(ErrorCode.BAD_REQUEST,
               f"{OWNER_KEY_ENV} is not a private key (32 bytes as 64 hex characters)",
               f"set {OWNER_KEY_ENV} to the owner wallet's private key, 64 hex characters")
    if account.address != owner:
        refuse(ErrorCode.WRONG_KEY, f"{OWNER_KEY_ENV} is {account.address}, not the owner {owner}",
               f"set {OWNER_KEY_ENV} to the private key of {owner}, or pass --owner "
               f"{account.address} if that wallet is the owner")
    return account


def send_from_owner(anchor: Anchor, account: LocalAccount, calldata: bytes) -> Any:
    """Send owner calldata to EpochAnchor and wait for it, with the refusals a person can
    act on."""
    from kint.chain.calls import INSUFFICIENT_FUNDS, SEND_REFUSED, ChainRefused

    try:
        return anchor.transact(account, calldata)
    except ChainRefused as err:
        if err.error == SEND_REFUSED:
            refuse_send_refused(err, "the command", anchor)
        if err.error == INSUFFICIENT_FUNDS:
            # The worker's code for a sender that cannot pay (session_sender).
            refuse(ErrorCode.NOT_CONNECTED,
                   f"the owner {account.address} cannot pay for the transaction",
                   f"send it a little ETH on chain {anchor.config.chain_id}, then run the "
                   f"command again")
        refuse(ErrorCode.BAD_REQUEST, f"EpochAnchor refused the owner's transaction ({err})",
               "nothing changed on chain; kint session-key show gives the key's "
               "authorization as the chain holds it")


def funding_hint(anchor: Anchor, key: str) -> None:
    """An authorized key still pays for its own pushes: say so when it holds nothing."""
    try:
        empty = anchor.balance(key) == 0
    except Exception:  # noqa: BLE001 - a hint, never a failure
        return
    if empty and anchor.config.devchain:  # no wallet holds devchain ETH: kint gives it
        click.echo(f"the session key {key} holds no ETH yet: `kint devchain fund {key}` "
                   f"gives it devchain ETH before it pushes", err=True)
    elif empty:
        click.echo(f"the session key {key} holds no ETH yet: send it a little on chain "
                   f"{anchor.config.chain_id} before it pushes", err=True)


def sent_lines(receipt: Any, owner: str, key: str, expiry: int | None) -> list[str]:
    """kint v0.3.0's lines for an authorization the owner (`direct`, no expiry shown) or the
    session key (`submit`) sent: the transaction, then the key, owner, cost and block."""
    from kint.commands.onchain import cost_and_block, tx_hash_text

    until = f" until {when(expiry)}" if expiry is not None else ""
    return [f"submitted {tx_hash_text(receipt)}",
            f"authorized {key} under {owner}{until}; {cost_and_block(receipt)}"]


def refuse_send_refused(err: Any, rerun: str, anchor: Anchor) -> NoReturn:
    """The endpoint's refusal of an owner's send (ChainRefused SEND_REFUSED: the node's
    word on the transaction, not the contract's), said as the endpoint's: nothing changed
    on chain, and `rerun` (what to run again) once the endpoint is looked at. The endpoint
    is named where `anchor`'s were set (the space's worker's, as a push's refused send
    names them: kint.chain.endpoint_source.endpoint_in_force), where it said KINT_RPC_URL of
    a space whose endpoints a connect kept or its config table sets."""
    from kint.chain.endpoint_source import endpoint_in_force  # the worker's phrasing

    refuse(ErrorCode.RPC_UNAVAILABLE, f"{err.detail}: nothing changed on chain",
           f"check what the endpoint said ({endpoint_in_force(anchor.config)}), then run "
           f"{rerun} again")
