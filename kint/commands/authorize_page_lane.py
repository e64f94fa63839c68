"""`kint authorize page`: a one-shot page on 127.0.0.1 asks the browser's wallet to send
setSessionKey from the owner, then the command polls canWrite until the chain shows it.

Why a module of its own: this lane waits on a person and a wallet, not on kint: it runs the
loopback server (kint.authorize_page), bounds the wait for the page and the polling after
it (settings below), and says which kind of owner account the browser must hold.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from kint.commands.authorize_steps import (command_ctx, days_flag, days_option, funding_hint,
                                           no_others, owner_and_key, owner_option,
                                           space_anchor)
from kint.commands.common import refuse
from kint.commands.exit_codes import INTERRUPTED, INTERRUPTED_CODE
from kint import settings
from kint.paths import kint_home
from kint.protocol import ErrorCode
from kint.render import utc_time as when

if TYPE_CHECKING:
    from kint.chain.anchor import Anchor

# The page lane's waits (docs: 900 s for the page, then canWrite every 3 s, 120 times).
# Overridable for tests and slow wallets; the defaults are v0.3.0's.
PAGE_TIMEOUT_ENV = "KINT_AUTHORIZE_PAGE_TIMEOUT"
POLL_SECONDS_ENV = "KINT_AUTHORIZE_POLL_SECONDS"
POLL_COUNT_ENV = "KINT_AUTHORIZE_POLL_COUNT"


def _expiry_line(owner: str, key: str, expiry: int) -> str:
    """kint v0.3.0's line once the page's authorization is seen on chain (02-quickstart.md)."""
    return f"authorized: {key} may push under {owner} until {when(expiry)}"


@click.command("page", short_help="A loopback page: the browser wallet authorizes.")
@owner_option
@days_option
@click.pass_context
def page_cmd(ctx: click.Context, owner: str | None, days: int | None) -> None:
    """Serve one page at http://127.0.0.1:<port>/kint/<token> (a random port, a 32-byte
    token) that asks the browser's wallet (EIP-6963, or the bundled Base Account SDK) to
    send setSessionKey(key, now + days) from the owner; then poll canWrite(owner, key)
    every 3 s, 120 times. The page refuses any account but the owner; no secret crosses
    it."""
    no_others(ctx, "deadline", "expiry", "signature")
    days_n = days_flag(ctx, days)
    owner_addr, key = owner_and_key(ctx, owner)
    from kint.authorize_page.server import AuthorizePage, PageRequest
    from kint.commands.onchain import chain_errors, chain_now, refuse_other_chain
    timeout = float(settings.value(PAGE_TIMEOUT_ENV))
    interval = float(settings.value(POLL_SECONDS_ENV))
    count = int(settings.value(POLL_COUNT_ENV))
    with chain_errors("authorize page"):
        anchor = space_anchor(ctx, owner)
        # The wallet sends on the chain kint names; canWrite is read through this endpoint.
        refuse_other_chain(anchor)
        # One view before the page opens: a contract setting with no EpochAnchor behind it
        # (a view answered with no data) is refused here, before the human pays gas for a
        # transaction to it; the poll's no-data answer cannot tell that from a lagging node.
        anchor.can_write(owner_addr, key)
        expiry = chain_now(anchor) + days_n * 86400
        request = PageRequest(owner=owner_addr, key=key, expiry=expiry,
                              chain_id=anchor.config.chain_id, anchor=anchor.address,
                              calldata="0x" + anchor.encode_set_session_key(key, expiry).hex())
    open_line = _open_page_line(owner_addr, _account_kind(ctx, owner_addr, anchor))
    page = AuthorizePage(request, on_refused=lambda why: click.echo(
        f"kint: warning: refused a result sent to the page server: {why}", err=True))
    try:
        url = page.start()
        click.echo(open_line)
        click.echo(f"  {url}")
        click.echo(f"it asks the wallet to send setSessionKey({key}, {expiry}) to EpochAnchor "
                   f"{anchor.address} on chain {anchor.config.chain_id}; waiting up to "
                   f"{timeout:g} s", err=True)
        result = page.wait(timeout)
    except KeyboardInterrupt:  # every command's Ctrl-C: INTERRUPTED, exit 130
        refuse(INTERRUPTED_CODE, "interrupted (Ctrl-C) before the wallet reported; the page "
               "server is closed", "if the wallet sent the transaction, kint session-key show "
               "tells whether it landed; else run kint authorize page again", INTERRUPTED)
    finally:
        page.close()
    if result is None:
        refuse(ErrorCode.TIMEOUT,
               f"no result from the page within {timeout:g} s; the page server is closed",
               "run kint authorize page again, and approve the transaction in the wallet")
    click.echo(f"the wallet reported transaction {result.tx}; checking canWrite({owner_addr}, "
               f"{key}) every {interval:g} s, up to {count} times", err=True)
    with chain_errors("authorize page", anchor):  # what is no miss: refused as `authorize`
        authorized, last_error = _poll_can_write(anchor, owner_addr, key, interval, count)
    if not authorized:
        why = f" (last error: {last_error})" if last_error else ""
        refuse(ErrorCode.TIMEOUT,
               f"canWrite({owner_addr}, {key}) is still false after {count} checks{why}",
               "look up the transaction in the wallet, then kint session-key show")
    with chain_errors("authorize page", anchor):  # opened in the block above
        expiry_now = anchor.session_key_expiry(owner_addr, key)
    click.echo(_expiry_line(owner_addr, key, expiry_now))
    funding_hint(anchor, key)


def _account_kind(ctx: click.Context, owner: str, anchor: Anchor) -> str | None:
    """The kind of account `owner` is ("smart", "eoa"), or None when kint cannot tell: the
    kind this machine's enrolment records for it, else, for an owner not connected here,
    "smart" when the chain holds code at its address (a Base Account that has sent a
    transaction is a deployed contract; an EOA has no code). An address without code may
    still be a Base Account not yet deployed (authorize.md), so that stays unknown, as does
    an endpoint that does not answer (the line is a courtesy, never a refusal)."""
    from kint.chain.calls import bounded
    from kint.commands.owner_address import connected_account_kind

    obj = command_ctx(ctx)
    kind = connected_account_kind(owner, obj.tenant, obj.db, kint_home())
    if kind is not None:
        return kind
    try:
        code = bounded(lambda: bytes(anchor.w3.eth.get_code(owner)), "reading the owner's code")
    except Exception:  # noqa: BLE001 - unknown, said neutrally
        return None
    return "smart" if code else None


def _open_page_line(owner: str, account_kind: str | None) -> str:
    """The line above the page's URL. For a Base Account owner it is v0.3.0's, word for word
    (02-quickstart.md, step 4). Our page also serves an EOA in a browser-extension wallet,
    which v0.3.0's does not: for an EOA owner, or one whose kind kint cannot tell (not
    connected here, and no code on chain), the line is our own and names no Base Account,
    so it does not send an EOA's owner looking for one."""
    if account_kind == "smart":
        return (f"open this page in the browser where your Base Account is logged in "
                f"(owner {owner}):")
    return f"open this page in the browser whose wallet holds the owner account (owner {owner}):"


def _poll_can_write(anchor: Anchor, owner: str, key: str, interval: float,
                    count: int) -> tuple[bool, str | None]:
    """canWrite(owner, key) up to `count` times, `interval` apart. A check the chain does
    not answer counts as a miss, not as the end: the transaction may land meanwhile. So
    does one the endpoint answered with no data (NoContractThere): the contract was read
    before the page opened (page_cmd), so it is most often a load-balanced endpoint's node
    that lags behind the others, which answers a view "0x" while the wallet's transaction
    lands; ended there, the user was sent to check settings that are right and to pay gas
    for the transaction again. Its words are kept as the last error, so a lasting one is
    said in the TIMEOUT's message, whose hint looks the transaction up."""
    from kint.chain.rpc import RpcUnavailable
    from kint.commands.onchain import said

    last_error = None
    for attempt in range(count):
        try:
            if anchor.can_write(owner, key):
                return True, None
        except RpcUnavailable as err:  # NoContractThere among them: its own words
            last_error = said(err, anchor)
        if attempt + 1 < count:
            time.sleep(interval)
    return False, last_error
