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
in force must be the one the space was connected on, kint.commands.enrolled_contract). The flags are also accepted before the
action (`kint authorize --days 7 direct`), as kint v0.3.0's parser takes them.

web3 and eth_account (~0.5 s on a busy box) load only once the command line has passed
its checks: a refused flag, a missing session key and `kint authorize --help` answer
without them (`kint.commands.onchain` loads web3; the owner's and the session key's
addresses are read with kint.custody.ids' helpers, without eth_utils).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, NoReturn

import click
import orjson

from kint.commands.common import Ctx, refuse, usage_error
from kint.commands.exit_codes import INTERRUPTED, INTERRUPTED_CODE
from kint.commands.secrets import read_secret_file, read_stdin_line
from kint import settings
from kint.paths import kint_home
from kint.protocol import ErrorCode
from kint.render import utc_time as when

if TYPE_CHECKING:
    from eth_account.signers.local import LocalAccount

    from kint.chain.anchor import Anchor
    from kint.chain.calls import ChainRefused

OWNER_KEY_ENV = "KINT_OWNER_KEY"
DEFAULT_DAYS = 30
MAX_DAYS = 36500  # a hundred years: far inside uint64, and no key should need more
DEADLINE_S = 300
# The page lane's waits (docs: 900 s for the page, then canWrite every 3 s, 120 times).
# Overridable for tests and slow wallets; the defaults are v0.3.0's.
PAGE_TIMEOUT_ENV = "KINT_AUTHORIZE_PAGE_TIMEOUT"
POLL_SECONDS_ENV = "KINT_AUTHORIZE_POLL_SECONDS"
POLL_COUNT_ENV = "KINT_AUTHORIZE_POLL_COUNT"
_PRE = "kint.authorize.pre"


# -- the flags, accepted before or after the action -------------------------------------------


def _pre_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The lanes' flags on the group too (hidden), for `kint authorize --days 7 direct`."""
    for flag, kw in reversed([
            ("--owner", {}), ("--days", {"type": int}), ("--deadline", {"type": int}),
            ("--expiry", {"type": int}), ("--signature", {})]):
        fn = click.option(flag, default=None, hidden=True, **kw)(fn)
    return fn


def _flag(ctx: click.Context, name: str, value: Any, applies: bool = True) -> Any:
    """The subcommand's value, else the one given before the action. A flag given before
    an action it does not apply to is refused rather than silently ignored."""
    pre = ctx.meta.get(_PRE, {})
    if name in pre and not applies:
        usage_error(f"--{name} does not apply to `kint authorize {ctx.info_name}`",
                    f"leave --{name} out")
    return value if value is not None else pre.get(name)


def _days(ctx: click.Context, days: int | None) -> int:
    value = _flag(ctx, "days", days)
    value = DEFAULT_DAYS if value is None else value
    if value < 1:
        usage_error(f"--days {value}: the authorization must last at least one day",
                    "give --days 1 or more")
    if value > MAX_DAYS:
        usage_error(f"--days {value} is more than {MAX_DAYS} days",
                    f"give at most {MAX_DAYS}, and authorize again when it expires")
    return value


def _no_others(ctx: click.Context, *names: str) -> None:
    for name in names:
        _flag(ctx, name, None, applies=False)


owner_option = click.option(
    "--owner", default=None, metavar="ADDRESS",
    help="The owner wallet address [default: the connected owner]. The connected owner, "
         "given or not, is refused on another contract than the one the space was "
         "connected on.")
days_option = click.option(
    "--days", type=int, default=None, metavar="N",
    help=f"The authorization's lifetime in days, from now [default: {DEFAULT_DAYS}].")


@click.group("authorize")
@_pre_options
@click.pass_context
def authorize_group(ctx: click.Context, **pre: Any) -> None:
    """Authorize this machine's session key to push under the owner, in one of four lanes
    (direct; payload, then submit; page; burn-nonce, which only cancels). Every lane needs a session key (kint session-key create) and an owner (--owner, else
    the connected owner)."""
    ctx.meta[_PRE] = {k: v for k, v in pre.items() if v is not None}


# -- shared steps -----------------------------------------------------------------------------


def _ctx(ctx: click.Context) -> Ctx:
    return ctx.find_object(Ctx) or Ctx(None, None, False)


def _owner_and_key(ctx: click.Context, owner: str | None) -> tuple[str, str]:
    obj = _ctx(ctx)
    home = kint_home()
    from kint.commands.key_refusals import session_key_address
    from kint.commands.owner_address import resolve_owner

    owner_addr = resolve_owner(_flag(ctx, "owner", owner), obj.tenant, obj.db, home)

    return owner_addr, session_key_address(home)


def _anchor(ctx: click.Context, owner: str | None, say_endpoint: bool = True) -> Anchor:
    """EpochAnchor, through the endpoint and contract the caller's space's worker uses when
    the space is connected here, else the machine's, named on stderr with `say_endpoint`
    (onchain.open_anchor);
    refused when the owner is the space's own and the contract in
    force is not the one the space was connected on (the authorization would land where
    the space has no epochs)."""
    from kint.commands.onchain import open_anchor
    from kint.commands.owner_address import checked_address

    obj = _ctx(ctx)
    given = _flag(ctx, "owner", owner)
    return open_anchor(obj, kint_home(), checked_address(given) if given else None,
                       say_endpoint=say_endpoint)


def _owner_account(owner: str) -> LocalAccount:
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


def _send_from_owner(anchor: Anchor, account: LocalAccount, calldata: bytes) -> Any:
    """Send owner calldata to EpochAnchor and wait for it, with the refusals a person can
    act on."""
    from kint.chain.calls import INSUFFICIENT_FUNDS, ChainRefused

    try:
        return anchor.transact(account, calldata)
    except ChainRefused as err:
        if err.error == INSUFFICIENT_FUNDS:
            # The worker's code for a sender that cannot pay (session_sender).
            refuse(ErrorCode.NOT_CONNECTED,
                   f"the owner {account.address} cannot pay for the transaction",
                   f"send it a little ETH on chain {anchor.config.chain_id}, then run the "
                   f"command again")
        refuse(ErrorCode.BAD_REQUEST, f"EpochAnchor refused the owner's transaction ({err})",
               "nothing changed on chain; kint session-key show gives the key's "
               "authorization as the chain holds it")


def _funding_hint(anchor: Anchor, key: str) -> None:
    """An authorized key still pays for its own pushes: say so when it holds nothing."""
    try:
        empty = anchor.balance(key) == 0
    except Exception:  # noqa: BLE001 - a hint, never a failure
        return
    if empty:
        click.echo(f"the session key {key} holds no ETH yet: send it a little on chain "
                   f"{anchor.config.chain_id} before it pushes", err=True)


def _expiry_line(owner: str, key: str, expiry: int) -> str:
    """kint v0.3.0's line once the page's authorization is seen on chain (02-quickstart.md)."""
    return f"authorized: {key} may push under {owner} until {when(expiry)}"


def _sent_lines(receipt: Any, owner: str, key: str, expiry: int | None) -> list[str]:
    """kint v0.3.0's lines for an authorization the owner (`direct`, no expiry shown) or the
    session key (`submit`) sent: the transaction, then the key, owner, cost and block."""
    from kint.commands.onchain import cost_and_block, tx_hash_text

    until = f" until {when(expiry)}" if expiry is not None else ""
    return [f"submitted {tx_hash_text(receipt)}",
            f"authorized {key} under {owner}{until}; {cost_and_block(receipt)}"]


# -- direct -----------------------------------------------------------------------------------


@authorize_group.command("direct",
                         short_help="The owner key in KINT_OWNER_KEY sends setSessionKey.")
@owner_option
@days_option
@click.pass_context
def direct_cmd(ctx: click.Context, owner: str | None, days: int | None) -> None:
    """The owner key in KINT_OWNER_KEY (environment only) sends setSessionKey(key, now +
    days) and pays. Refused when that key is not the owner's."""
    _no_others(ctx, "deadline", "expiry", "signature")
    days_n = _days(ctx, days)
    owner_addr, key = _owner_and_key(ctx, owner)
    account = _owner_account(owner_addr)
    from kint.commands.onchain import chain_errors, chain_now, refuse_other_chain

    with chain_errors("authorize direct"):
        anchor = _anchor(ctx, owner)
        refuse_other_chain(anchor)  # before the owner's transaction is signed for it
        expiry = chain_now(anchor) + days_n * 86400
        receipt = _send_from_owner(anchor, account, anchor.encode_set_session_key(key, expiry))
    for line in _sent_lines(receipt, owner_addr, key, None):
        click.echo(line)
    click.echo(f"expiry {expiry} ({when(expiry)}, {days_n} days)")
    _funding_hint(anchor, key)


# -- burn-nonce -------------------------------------------------------------------------------


@authorize_group.command("burn-nonce", short_help="Consume authNonce: unsubmitted signatures die.")
@owner_option
@click.pass_context
def burn_nonce_cmd(ctx: click.Context, owner: str | None) -> None:
    """The owner key in KINT_OWNER_KEY re-sends setSessionKey with the key's current expiry:
    nothing changes but authNonce, so every signed, unsubmitted authorization dies."""
    _no_others(ctx, "days", "deadline", "expiry", "signature")
    owner_addr, key = _owner_and_key(ctx, owner)
    account = _owner_account(owner_addr)
    from kint.commands.onchain import chain_errors, refuse_other_chain, tx_line

    with chain_errors("authorize burn-nonce"):
        anchor = _anchor(ctx, owner)
        refuse_other_chain(anchor)
        current = anchor.session_key_expiry(owner_addr, key)
        receipt = _send_from_owner(anchor, account, anchor.encode_set_session_key(key, current))
        nonce = anchor.auth_nonce(owner_addr)
    click.echo(f"nonce consumed: authNonce({owner_addr}) is now {nonce}")
    click.echo(tx_line(receipt, f"the owner {owner_addr}"))


# -- payload and submit -----------------------------------------------------------------------


def _typed_data_hash(typed: dict[str, Any]) -> str:
    from eth_account.messages import _hash_eip191_message, encode_typed_data

    return _hash_eip191_message(encode_typed_data(full_message=typed)).hex()


@authorize_group.command("payload", short_help="Print the typed data the owner signs offline.")
@owner_option
@days_option
@click.pass_context
def payload_cmd(ctx: click.Context, owner: str | None, days: int | None) -> None:
    """Print the SessionKeyAuthorization typed data for the owner to sign offline (stdout,
    one line, as `cast wallet sign --data --from-file` reads it), with authNonce(owner) from
    the chain and a deadline 300 s out. The nonce, deadline, expiry and the `submit` line
    go to stderr."""
    _no_others(ctx, "deadline", "expiry", "signature")
    days_n = _days(ctx, days)
    owner_addr, key = _owner_and_key(ctx, owner)
    from kint.chain.anchor_abi import authorization_typed_data
    from kint.commands.onchain import chain_errors, chain_now, refuse_other_chain

    with chain_errors("authorize payload"):
        # Its stderr is v0.3.0's two lines, which scripts read; the typed data names the
        # chain and the contract the owner signs for.
        anchor = _anchor(ctx, owner, say_endpoint=False)
        now = chain_now(anchor)
        expiry, deadline = now + days_n * 86400, now + DEADLINE_S
        nonce = anchor.auth_nonce(owner_addr)
        typed = authorization_typed_data(anchor.config.chain_id, anchor.address, owner_addr,
                                         key, expiry, nonce, deadline)
        # The contract computes the digest itself: a payload it would not accept (another
        # contract at that address, another chain) is refused here, before anyone signs.
        onchain = anchor.authorization_digest(owner_addr, key, expiry, nonce, deadline)
        if onchain != _typed_data_hash(typed):
            # The digest binds the chain id: an endpoint of another chain (a local chain
            # reached through KINT_RPC_URL, with no devchain record) is the likelier cause,
            # and one read says so before the contract is blamed.
            refuse_other_chain(anchor)
            refuse(ErrorCode.CONFIG_INVALID,
                   f"the contract at {anchor.address} computes another digest for this "
                   f"authorization than kint's typed data: it is not the EpochAnchor kint "
                   f"knows",
                   "check KINT_CONTRACT: unset, it is kint's EpochAnchor on Base (a "
                   "devchain's record names its own)")
    click.echo(orjson.dumps(typed).decode())
    # kint v0.3.0's two lines (02-quickstart.md): what was stamped and how to sign it, then
    # the submit line. `--owner` is in it when it was given, after the action or before it
    # (`kint authorize --owner 0x… payload`): submit needs the same one.
    click.echo(f"# nonce {nonce}, deadline {deadline}, expiry {expiry}; sign with: cast "
               f"wallet sign --data --from-file <this file>", err=True)
    given = f" --owner {owner_addr}" if _flag(ctx, "owner", owner) else ""
    click.echo(f"# then: kint authorize submit{given} --deadline {deadline} --expiry {expiry} "
               f"--signature -", err=True)


def _read_signature(source: str) -> bytes:
    """`-` reads stdin; anything else is a path, read and then deleted (09-cli.md)."""
    text = (read_stdin_line("the signature") if source == "-"
            else read_secret_file(source, "the signature"))
    hex_text = text[2:] if text.lower().startswith("0x") else text
    try:
        signature = bytes.fromhex(hex_text)
    except ValueError:
        usage_error("the signature is not hex", "give the owner's signature as hex (65 bytes "
                    "for an EOA owner; an ERC-1271 account's may be longer)")
    if not signature:
        usage_error("the signature is empty", "give the owner's signature as hex")
    return signature


def _submit_refusal(err: ChainRefused, anchor: Anchor, owner: str, key: str, deadline: int,
                    expiry: int) -> NoReturn:
    """EpochAnchor's refusal of setSessionKeyBySig, in words that say which value was off;
    every one is fixed the same way, a fresh payload signed again."""
    again = "run kint authorize payload again, sign its output and submit it"
    if err.error == "AuthorizationExpired":
        refuse(ErrorCode.BAD_REQUEST,
               f"EpochAnchor refused the authorization: its deadline {deadline} "
               f"({when(deadline)}) has passed (AuthorizationExpired)",
               f"{again} within {DEADLINE_S} s")
    if err.error == "BadSignature":
        try:
            nonce: Any = anchor.auth_nonce(owner)
        except Exception:  # noqa: BLE001 - the refusal matters, the nonce only explains it
            nonce = "?"
        refuse(ErrorCode.BAD_REQUEST,
               f"EpochAnchor refused the signature (BadSignature): it does not verify for "
               f"owner {owner}, key {key}, expiry {expiry}, deadline {deadline} at "
               f"authNonce {nonce}; it was signed over other values, already used, or "
               f"cancelled by an owner transaction (burn-nonce)", again)
    refuse(ErrorCode.BAD_REQUEST, f"EpochAnchor refused setSessionKeyBySig ({err})",
           f"nothing changed on chain; {again}")


@authorize_group.command("submit", short_help="Send the owner's signature from the session key.")
@owner_option
@click.option("--deadline", type=int, default=None, metavar="UNIX",
              help="The deadline `payload` printed.")
@click.option("--expiry", type=int, default=None, metavar="UNIX",
              help="The expiry `payload` printed.")
@click.option("--signature", default=None, metavar="-|PATH",
              help="The owner's authorization signature: `-` reads stdin, a path is read "
                   "then deleted [default: -].")
@click.pass_context
def submit_cmd(ctx: click.Context, owner: str | None, deadline: int | None,
               expiry: int | None, signature: str | None) -> None:
    """Send setSessionKeyBySig from the session key, which pays the gas, with the owner's
    signature over the typed data `payload` printed. Works once: authNonce moves on."""
    _no_others(ctx, "days")
    deadline = _flag(ctx, "deadline", deadline)
    expiry = _flag(ctx, "expiry", expiry)
    if deadline is None or expiry is None:
        usage_error("--deadline and --expiry are required",
                    "pass the values kint authorize payload printed")
    if not 0 <= expiry < 2**64 or deadline < 0:
        usage_error("--expiry and --deadline are unix times (expiry a uint64)",
                    "pass the values kint authorize payload printed")
    owner_addr, key = _owner_and_key(ctx, owner)
    sig = _read_signature(_flag(ctx, "signature", signature) or "-")
    home = kint_home()
    from kint.chain.calls import ChainRefused
    from kint.chain.nonces import NonceBook
    from kint.commands.onchain import chain_errors, refuse_other_chain

    with chain_errors("authorize submit"):
        from kint.custody.session_key import unlock_session_key
        from kint.protocol import ProtocolError
        from kint.tenant_worker.session_sender import SessionSender

        anchor = _anchor(ctx, owner)
        # The signature binds the chain id `payload` read: on another chain's endpoint it
        # would come back BadSignature, which blames the signature.
        refuse_other_chain(anchor)
        account = unlock_session_key(home)
        sender = SessionSender(anchor, account, NonceBook(home), "machine")
        calldata = anchor.encode_set_session_key_by_sig(owner_addr, key, expiry, deadline, sig)
        try:
            signed = sender.sign(calldata, "nothing was sent")
            receipt = sender.wait(sender.send(signed), signed)
        except ChainRefused as err:
            _submit_refusal(err, anchor, owner_addr, key, deadline, expiry)
        except ProtocolError as err:
            refuse(err.code, err.message, err.hint)
        nonce = anchor.auth_nonce(owner_addr)
    for line in _sent_lines(receipt, owner_addr, key, expiry):
        click.echo(line)
    click.echo(f"authNonce({owner_addr}) is now {nonce}")


# -- page -------------------------------------------------------------------------------------


@authorize_group.command("page", short_help="A loopback page: the browser wallet authorizes.")
@owner_option
@days_option
@click.pass_context
def page_cmd(ctx: click.Context, owner: str | None, days: int | None) -> None:
    """Serve one page at http://127.0.0.1:<port>/kint/<token> (a random port, a 32-byte
    token) that asks the browser's wallet (EIP-6963, or the bundled Base Account SDK) to
    send setSessionKey(key, now + days) from the owner; then poll canWrite(owner, key)
    every 3 s, 120 times. The page refuses any account but the owner; no secret crosses
    it."""
    _no_others(ctx, "deadline", "expiry", "signature")
    days_n = _days(ctx, days)
    owner_addr, key = _owner_and_key(ctx, owner)
    from kint.authorize_page.server import AuthorizePage, PageRequest
    from kint.commands.onchain import chain_errors, chain_now, refuse_other_chain
    timeout = float(settings.value(PAGE_TIMEOUT_ENV))
    interval = float(settings.value(POLL_SECONDS_ENV))
    count = int(settings.value(POLL_COUNT_ENV))
    with chain_errors("authorize page"):
        anchor = _anchor(ctx, owner)
        # The wallet sends on the chain kint names; canWrite is read through this endpoint.
        refuse_other_chain(anchor)
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
    authorized, last_error = _poll_can_write(anchor, owner_addr, key, interval, count)
    if not authorized:
        why = f" (last error: {last_error})" if last_error else ""
        refuse(ErrorCode.TIMEOUT,
               f"canWrite({owner_addr}, {key}) is still false after {count} checks{why}",
               "look up the transaction in the wallet, then kint session-key show")
    with chain_errors("authorize page"):
        expiry_now = anchor.session_key_expiry(owner_addr, key)
    click.echo(_expiry_line(owner_addr, key, expiry_now))
    _funding_hint(anchor, key)


def _account_kind(ctx: click.Context, owner: str, anchor: Anchor) -> str | None:
    """The kind of account `owner` is ("smart", "eoa"), or None when kint cannot tell: the
    kind this machine's enrolment records for it, else, for an owner not connected here,
    "smart" when the chain holds code at its address (a Base Account that has sent a
    transaction is a deployed contract; an EOA has no code). An address without code may
    still be a Base Account not yet deployed (authorize.md), so that stays unknown, as does
    an endpoint that does not answer (the line is a courtesy, never a refusal)."""
    from kint.chain.calls import bounded
    from kint.commands.owner_address import connected_account_kind

    obj = _ctx(ctx)
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
    not answer counts as a miss, not as the end: the transaction may land meanwhile."""
    from kint.chain.rpc import RpcUnavailable

    last_error = None
    for attempt in range(count):
        try:
            if anchor.can_write(owner, key):
                return True, None
        except RpcUnavailable as err:
            last_error = str(err)
        if attempt + 1 < count:
            time.sleep(interval)
    return False, last_error
