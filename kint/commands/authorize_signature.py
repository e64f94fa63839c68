"""`kint authorize payload`, then `kint authorize submit`: the owner signs EIP-712 typed
data offline (a hardware wallet, `cast wallet sign`), and this machine's session key sends
setSessionKeyBySig with that signature and pays for it.

Why a module of its own: this lane is the one where the owner's key never meets kint, so
it carries what the others do not: the typed data checked against the contract's own
digest before anyone signs, the signature read from stdin or a file (then deleted), and
the contract's refusals of it in words that say which value was off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import click
import orjson

from kint.commands.authorize_steps import (days_flag, days_option, flag_value, no_others,
                                           owner_and_key, owner_option, refuse_send_refused,
                                           sent_lines, space_anchor)
from kint.commands.common import refuse, usage_error
from kint.commands.secrets import read_secret_file, read_stdin_line
from kint.paths import kint_home
from kint.protocol import ErrorCode
from kint.render import utc_time as when

if TYPE_CHECKING:
    from kint.chain.anchor import Anchor
    from kint.chain.calls import ChainRefused

DEADLINE_S = 300


def _typed_data_hash(typed: dict[str, Any]) -> str:
    from eth_account.messages import _hash_eip191_message, encode_typed_data

    return _hash_eip191_message(encode_typed_data(full_message=typed)).hex()


@click.command("payload", short_help="Print the typed data the owner signs offline.")
@owner_option
@days_option
@click.pass_context
def payload_cmd(ctx: click.Context, owner: str | None, days: int | None) -> None:
    """Print the SessionKeyAuthorization typed data for the owner to sign offline (stdout,
    one line, as `cast wallet sign --data --from-file` reads it), with authNonce(owner) from
    the chain and a deadline 300 s out. The nonce, deadline, expiry and the `submit` line
    go to stderr."""
    no_others(ctx, "deadline", "expiry", "signature")
    days_n = days_flag(ctx, days)
    owner_addr, key = owner_and_key(ctx, owner)
    from kint.chain.anchor_abi import authorization_typed_data
    from kint.commands.onchain import (chain_errors, chain_now, not_epoch_anchor_hint,
                                       refuse_other_chain)

    with chain_errors("authorize payload"):
        # Its stderr is v0.3.0's two lines, which scripts read; the typed data names the
        # chain and the contract the owner signs for.
        anchor = space_anchor(ctx, owner, say_endpoint=False)
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
                   f"knows", not_epoch_anchor_hint(anchor.config))
    click.echo(orjson.dumps(typed).decode())
    # kint v0.3.0's two lines (02-quickstart.md): what was stamped and how to sign it, then
    # the submit line. `--owner` is in it when it was given, after the action or before it
    # (`kint authorize --owner 0x… payload`): submit needs the same one.
    click.echo(f"# nonce {nonce}, deadline {deadline}, expiry {expiry}; sign with: cast "
               f"wallet sign --data --from-file <this file>", err=True)
    given = f" --owner {owner_addr}" if flag_value(ctx, "owner", owner) else ""
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
    every one is fixed the same way, a fresh payload signed again. The endpoint's refusal
    of the send itself is said as the endpoint's."""
    from kint.chain.calls import SEND_REFUSED

    again = "run kint authorize payload again, sign its output and submit it"
    if err.error == SEND_REFUSED:
        refuse_send_refused(err, "kint authorize submit", anchor)
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


@click.command("submit", short_help="Send the owner's signature from the session key.")
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
    no_others(ctx, "days")
    deadline = flag_value(ctx, "deadline", deadline)
    expiry = flag_value(ctx, "expiry", expiry)
    if deadline is None or expiry is None:
        usage_error("--deadline and --expiry are required",
                    "pass the values kint authorize payload printed")
    if not 0 <= expiry < 2**64 or deadline < 0:
        usage_error("--expiry and --deadline are unix times (expiry a uint64)",
                    "pass the values kint authorize payload printed")
    owner_addr, key = owner_and_key(ctx, owner)
    sig = _read_signature(flag_value(ctx, "signature", signature) or "-")
    home = kint_home()
    from kint.chain.calls import ChainRefused
    from kint.chain.nonces import NonceBook
    from kint.commands.onchain import chain_errors, refuse_other_chain

    with chain_errors("authorize submit"):
        from kint.custody.session_key import unlock_session_key
        from kint.protocol import ProtocolError
        from kint.tenant_worker.session_sender import SessionSender

        anchor = space_anchor(ctx, owner)
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
    for line in sent_lines(receipt, owner_addr, key, expiry):
        click.echo(line)
    click.echo(f"authNonce({owner_addr}) is now {nonce}")

