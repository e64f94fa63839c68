"""`kint connect` in the space's worker: find the data key and keep it (05-keys.md, "One
data key, many wraps").

The key the owner supplies is a key-encryption key (from the wallet's derive signature,
optionally salted, or from a vault passphrase), or the recovery code, which is the data key
itself. The data key comes from the first of:

1. this machine's wraps (`wraps-<space16>.json`), while they hold the key the newest
   readable header was sealed with (or the chain cannot be read). Wraps here while the
   chain holds no epochs mean this machine started the vault only where no enrolment is
   yet (a connect killed before its recovery file or enrolment was written is finished by
   the next one) or the enrolment says it made the vault (not under KINT_OFFLINE=1, where
   no chain was read): a machine that joined from a header is never made the vault's
   maker, not even after connect moved its enrolment to a chain or contract without its
   epochs;
2. the header of the newest readable epoch on chain: its wrap is found by `kek_tag`,
   never by trying each one;
3. a fresh vault, when the chain holds no epochs for this owner and space and this machine
   has no wraps: a new data key, its wrap, and the recovery code written to
   `RECOVERY-<space16>.txt`.

A recovery code is bound to the vault before it is trusted: its `dek_id` must equal the
head header's or, when the chain shows no header, that of what this machine holds of the
vault (its cached data key, wraps file or newest cached epoch: recovery_binding). A
recovery code never starts a vault. Nothing here prints or logs the signature, a KEK or
the data key.

The steps that take time say so in the space's progress line (`connect: ...`, `say`), which
`kint connect` and `kint join` show on a terminal as push and pull show theirs: making the
session key and each passphrase stretch (scrypt, under a lock other workers share), the
chain reads (the head, then each epoch header looked at), and `--dev`'s authorization
transaction. The rest (the unwrap, the files) is quick.

This module runs the steps and keeps the files; the data key from the caller's secrets is
connect_key.py's, and who the space is connected to, on which chain, connect_owner.py's.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount

from kint import settings
from kint.chain import devchain
from kint.chain.anchor import Anchor
from kint.chain.calls import ChainRefused
from kint.chain.chain_id import other_chain
from kint.chain.config import DEVCHAIN_SOURCE, ChainConfig
from kint.chain.rpc import RpcUnavailable
from kint.custody import errors as custody_errors
from kint.custody.data_key import dek_id
from kint.custody.recovery_code import recovery_file_path, write_recovery_file
from kint.custody.session_key import create_session_key, session_key_exists
from kint.custody.session_key import session_address as key_address
from kint.custody.vault_cache import cache_data_key
from kint.custody.wraps import Wrap, read_wraps, write_wraps
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import HEADER_TRANSPORT_HINT
from kint.tenant_worker import dev_owner
from kint.tenant_worker.chain_refusal import chain_unavailable
from kint.tenant_worker.connect_key import (FoundKey, check_secrets, key_from_recovery_code,
                                            key_from_supplied, say, secrets_given,
                                            supplied_keks, with_extra_passphrase)
from kint.tenant_worker.connect_owner import (moved_from, owner_change, owner_changed_words,
                                              owner_for, wraps_may_be_ours)
from kint.tenant_worker.custody_errors import as_protocol_error
from kint.tenant_worker.enrolment import Enrolment, save_enrolment
from kint.tenant_worker.head_header import ReadableHeader, newest_readable_header, read_head
from kint.tenant_worker.head_lock import head_op
from kint.tenant_worker.recovery_binding import HeldHere, held_here
from kint.tenant_worker.rpc_hint import name_the_given
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import empty_mirror

log = logging.getLogger("kint.worker")


def connect(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    """`_connect` under the head lock, its failures as refusals. One through the endpoints
    given to `--rpc-urls` names those (rpc_hint.name_the_given): on the way out the hint
    is otherwise named from the settings, which this connect did not use."""
    try:
        return _refused_as(ctx, args)
    except ProtocolError as err:
        if _given_urls(args):
            name_the_given(err, _settings_chain(ctx))
        raise


def _settings_chain(ctx: SpaceContext) -> ChainConfig | None:
    """The chain settings the connect read through, its endpoints aside (None: they do not
    read, and no hint is named from them)."""
    try:
        return ctx.chain()
    except ProtocolError:
        return None


def _refused_as(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    try:
        with head_op(ctx, "connect", lock_file=False):
            return _connect(ctx, args)
    except custody_errors.CustodyError as err:
        raise as_protocol_error(err, ctx.config.space16) from None
    except ChainRefused as err:
        raise ProtocolError(ErrorCode.NOT_CONNECTED, f"the chain refused: {err}") from None
    except devchain.DevchainError as err:  # `--dev`'s own calls: the devchain's code and hint
        raise ProtocolError(err.code, str(err), err.hint) from None
    except RpcUnavailable as err:  # a chain call no step above turned into a refusal of its own
        raise chain_unavailable(err) from None


def _connect(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    """The steps: the chain and the owner, the caller's secrets checked, what the chain and
    this machine hold, the data key from the first source that has it (the module's
    docstring), then the files that keep it. A passphrase is stretched only once the chain
    was read: a chain that cannot be read, with no wraps here, refuses whatever the key.
    Nothing is written before every check passed, a new session key included."""
    cfg = ctx.config
    chain, rpc_urls = _chain_for(ctx, args)
    existing = ctx.enrolment()
    moved = moved_from(ctx, existing, chain)
    owner, dev_account, args = owner_for(cfg.home, cfg.space_id, chain, existing, args)
    owner_changed = owner_change(ctx, existing, owner)
    if owner_changed is not None:  # nothing of the old vault is kept: not its wraps, not
        existing = replace(existing, vault_created=False)  # its maker's claim (the file's)
    # The session key's address when there is one (one that does not read is refused
    # here, before any chain read or stretch); a new key is made once every check passed.
    session_address = key_address(cfg.home) if session_key_exists(cfg.home) else None
    anchor = Anchor(chain, ctx.tracker)
    code = args.get("recovery_code")
    if not secrets_given(args) and code is None:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "connect needs a derive signature, a vault "
                            "passphrase or the recovery code")
    check_secrets(owner, args)
    header, chain_error = _chain_view(ctx, anchor, owner, rpc_given=bool(rpc_urls))
    local = read_wraps(cfg.home, cfg.space_id) if owner_changed is None else None
    may_have_started = wraps_may_be_ours(existing)
    if code is not None:
        held = held_here(ctx) if header is None and owner_changed is None else HeldHere()
        found = key_from_recovery_code(code, owner, header, held, chain_error,
                                       space16=cfg.space16)
    elif header is None and local is None and chain_error is not None:
        raise chain_error  # nothing a key could open, nor a vault to start: no stretch for it
    else:
        found = key_from_supplied(owner, supplied_keks(ctx, owner, args)[0], header, local,
                                   chain_error, may_have_started=may_have_started)
    wraps = with_extra_passphrase(ctx, owner, found.dek, found.wraps,
                                   args.get("extra_passphrase"))
    # A new session key and `--dev`'s owner key, written once every check above passed, and
    # before the wraps that may name its owner and the enrolment that names the key: made
    # before the checks, a connect refused for another owner's space left a new owner key,
    # and one refused for an endpoint of another chain a new machine-wide session key. The
    # session key first: its creation can still refuse (a local.secret others may read, the
    # Keychain), and the owner key then left was one for a vault that never started; a
    # session key left is the machine's, which the next connect uses.
    if session_address is None:
        say(ctx, "making this machine's session key")
        session_address, _ = create_session_key(cfg.home)
    if dev_account is not None:
        dev_owner.keep_owner(cfg.home, dev_account)
    recovery_path = _keep(ctx, chain, existing, args, owner, session_address, rpc_urls,
                          found, wraps)
    if dev_account is not None:
        _authorize_on_devchain(ctx, anchor, chain, owner, dev_account, session_address)
    log.info("space %s connected: owner %s, data key from %s", cfg.space16, owner,
             found.source)
    return {"connected": True, "owner": owner, "space": cfg.space16, "source": found.source,
            "key_tag": found.key_tag.hex()[:8] if found.key_tag is not None else None,
            "session": session_address, "fresh_vault": found.fresh,
            "recovery_file": str(recovery_path) if recovery_path else None,
            "chain_unreadable": chain_error.message if chain_error else None,
            "chain_moved": moved,
            "owner_changed": owner_changed_words(ctx, owner_changed, recovery_path)}


def _chain_for(ctx: SpaceContext, args: dict[str, Any]) -> tuple[ChainConfig, list[str]]:
    """The chain settings, with `--rpc-url`'s endpoints in place of the configured ones
    when given (returned too: the enrolment keeps them for this space)."""
    chain = ctx.chain()
    rpc_urls = _given_urls(args)
    if rpc_urls:
        chain = replace(chain, rpc_urls=tuple(rpc_urls))
    return chain, rpc_urls


def _given_urls(args: dict[str, Any]) -> list[str]:
    """The endpoints given to `--rpc-urls`, in order (none: the settings' are used)."""
    return [u.strip() for u in (args.get("rpc_urls") or "").split(",") if u.strip()]


def _chain_view(ctx: SpaceContext, anchor: Anchor, owner: str, *,
                rpc_given: bool) -> tuple[ReadableHeader | None, ProtocolError | None]:
    """What the chain says (unless KINT_OFFLINE=1): the newest readable header (None when
    the chain holds no epochs), or the RPC_UNAVAILABLE error when it cannot be read, kept
    so that local wraps can still answer and only a fresh vault is refused for it.
    `rpc_given`: the endpoints came from `--rpc-urls` (_refuse_another_chain names it)."""
    header: ReadableHeader | None = None
    chain_error: ProtocolError | None = None
    space = ctx.config.space_id
    if not settings.value("KINT_OFFLINE"):
        try:
            say(ctx, "reading the chain head")
            _refuse_another_chain(ctx, anchor.config, given=rpc_given)
            head = read_head(anchor, owner, space)
            if head.seq != 0:
                header = newest_readable_header(
                    anchor, owner, space, head, command="connect",
                    on_epoch=lambda seq, block: say(
                        ctx, f"reading the header of epoch {seq} (block {block})"))
        except ProtocolError as err:
            if err.code is not ErrorCode.RPC_UNAVAILABLE:
                raise
            chain_error = err
    return header, chain_error


def _refuse_another_chain(ctx: SpaceContext, chain: ChainConfig, *, given: bool) -> None:
    """STALE_RPC when the primary endpoint answers for another chain than the one this
    machine signs for (kint.chain.chain_id), as a pull's cold start and `kint doctor` say
    it. Without it a KINT_RPC_URL on another chain whose contract sits at the same address
    (a local anvil reached without its devchain record) was read as Base: the connect took
    its head, started a fresh vault there or took a key from its header, and recorded the
    space as connected on Base, where the next pull and push then refused. Asked before the
    head: an endpoint of another chain with no contract at the address fails the head read,
    and a machine holding wraps then connected from them anyway, moving its enrolment to
    Base. An endpoint that does not answer is the head's RPC_UNAVAILABLE, in its words, so
    a dead endpoint is still one wait. On the devchain only the endpoint its record sets is
    not asked (the record names the chain its own anvil runs): `--rpc-urls`, the endpoints
    a space's enrolment keeps from it and a `[spaces."<label>"]` table's `rpc_url` change
    how the space reaches that chain, never which chain it is (kint.chain.config), and a
    Base endpoint given there was read as the devchain's (its contract, chain 31337 signed
    for) and kept in the enrolment. Only the primary (KINT_RPC_URL, or the first of
    `--rpc-urls`) is asked, as a pull asks the endpoints it read the head from: connect
    reads no other, and a second opinion on another chain is its cold start's to refuse.
    `given`: the endpoint came from `--rpc-urls`, so the words name that option, not the
    KINT_RPC_URL it stood in for."""
    if chain.devchain and not given and chain.rpc_source == DEVCHAIN_SOURCE:
        return
    names = ("--rpc-urls",) if given else None  # else the settings', or the space's kept
    try:
        found = other_chain(chain, ctx.tracker, 1, names=names)
    except RpcUnavailable as err:
        raise ProtocolError(ErrorCode.RPC_UNAVAILABLE, f"cannot read the chain head: {err}",
                            HEADER_TRANSPORT_HINT) from None
    if found is not None:
        raise another_chain_refused(found)


def another_chain_refused(found: tuple[str, str],
                          done: str = "nothing was connected") -> ProtocolError:
    """The refusal of an endpoint of another chain in kint.chain.chain_id's words (what is
    wrong, what to do), then what was not done: connect's, and join's vault step's
    (join_chain._head). Apart, so that the page that quotes it (docs/new-machine.md) is
    checked against it."""
    return ProtocolError(ErrorCode.STALE_RPC, f"{found[0]}; {done}", found[1])


def _authorize_on_devchain(ctx: SpaceContext, anchor: Anchor, chain: ChainConfig, owner: str,
                           dev_account: LocalAccount, session_address: str) -> None:
    """`--dev`'s last step: the throwaway owner authorizes this machine's session key, unless
    the chain says it may write already. The data key and the enrolment are kept by then,
    so a devchain that does not answer here is said as that (RPC_UNAVAILABLE, the hint
    naming the devchain), and the same connect run again once it answers finishes it."""
    try:
        if not anchor.can_write(owner, session_address):
            say(ctx, "authorizing this machine's session key on the devchain")
            dev_owner.authorize(anchor, chain.rpc_urls[0], dev_account, session_address)
    except RpcUnavailable as err:
        raise ProtocolError(ErrorCode.RPC_UNAVAILABLE,
                            f"the data key is kept, but the session key's authorization "
                            f"could not be checked: {err}") from None


def _keep(ctx: SpaceContext, chain: ChainConfig, existing: Enrolment | None,
          args: dict[str, Any], owner: str, session_address: str, rpc_urls: list[str],
          found: FoundKey, wraps: tuple[Wrap, ...]) -> Path | None:
    """The files that keep the key, in this order: the wraps, the cached data key, a fresh
    vault's recovery code file, then the enrolment (what says the space is connected, so
    written last) and an empty mirror for a space that never pulled. Returns the recovery
    file's path, written only for a fresh vault, or for one this machine started whose
    file a killed connect never wrote (the wraps go first: a connect again finds them and
    writes what is missing)."""
    cfg = ctx.config
    home, space = cfg.home, cfg.space_id
    write_wraps(home, space, dek_id(found.dek), wraps)
    cache_data_key(home, space, found.dek)
    unwritten = found.started_here and not recovery_file_path(home, space).exists()
    recovery_path = (write_recovery_file(home, owner, space, found.dek)
                     if found.fresh or unwritten else None)
    enrolment = Enrolment(
        space=space, tenant=cfg.label, owner=owner,
        account="smart" if args.get("passphrase") is not None else "eoa",
        contract=chain.anchor, chain_id=chain.chain_id, key_tags=[w.tag.hex() for w in wraps],
        session_address=session_address,
        vault_created=(found.fresh or found.started_here
                       or bool(existing and existing.vault_created)),
        rpc_urls=rpc_urls or (existing.rpc_urls if existing else None),
        db=cfg.db, label=cfg.label)
    save_enrolment(ctx.state.files["enrol"], enrolment)
    if ctx.state.mirror() is None:
        empty_mirror(ctx.state)
    return recovery_path
