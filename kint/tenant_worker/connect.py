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
recovery code never starts a vault. Nothing here prints or logs the signature, a KEK or the data key.

The steps that take time say so in the space's progress line (`connect: ...`, `say`), which
`kint connect` and `kint join` show on a terminal as push and pull show theirs: making the
session key and each passphrase stretch (scrypt, under a lock other workers share), the
chain reads (the head, then each epoch header looked at), and `--dev`'s authorization
transaction. The rest (the unwrap, the files) is quick.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount

from kint import settings
from kint.chain import devchain
from kint.chain.anchor import Anchor
from kint.chain.calls import ChainRefused
from kint.chain.config import ChainConfig
from kint.chain.rpc import RpcUnavailable
from kint.custody import errors as custody_errors
from kint.custody.data_key import dek_id, new_data_key
from kint.custody.ids import NOT_ITS_CHECKSUM, address_problem, checksum_address
from kint.custody.keks import kek_tag, passphrase_kek, signature_kek
from kint.custody.recovery_code import recovery_file_path, write_recovery_file
from kint.custody.session_key import create_session_key, session_key_exists
from kint.custody.vault_cache import cache_data_key
from kint.custody.vault_message import check_derive_signature, parse_signature_text
from kint.custody.wraps import (KIND_PASSPHRASE, KIND_SIGNATURE, Wrap, WrapsFile, find_wrap,
                                read_wraps, unwrap, wrap_data_key, write_wraps)
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.errors import CHECKSUM_HINT
from kint.tenant_worker import dev_owner
from kint.tenant_worker.custody_errors import as_protocol_error
from kint.tenant_worker.enrolled_chain import other_chain
from kint.tenant_worker.enrolment import Enrolment, save_enrolment
from kint.tenant_worker.head_header import ReadableHeader, newest_readable_header, read_head
from kint.tenant_worker.head_lock import head_op
from kint.tenant_worker.recovery_binding import HeldHere, bind_recovery_code, held_here
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import empty_mirror

log = logging.getLogger("kint.worker")

SOURCE_LOCAL = "local wraps"
SOURCE_HEADER = "chain head header"
SOURCE_FRESH = "fresh vault"
SOURCE_CODE = "recovery code"


@dataclass(frozen=True)
class SuppliedKey:
    kind: int
    kek: bytes

    @property
    def tag(self) -> bytes:
        return kek_tag(self.kek)


@dataclass(frozen=True)
class _Found:
    """The data key, the wraps found with it, and where it came from."""

    dek: bytes
    wraps: tuple[Wrap, ...]
    source: str
    fresh: bool = False  # a new vault: its recovery code file is written
    # Local wraps while the chain, read, holds no epochs: this machine started the vault
    # (an earlier connect, killed before its recovery file or enrolment, is finished).
    started_here: bool = False
    key_tag: bytes | None = None  # the supplied key's tag (None for a recovery code)


def say(ctx: SpaceContext, step: str) -> None:
    """The connect's progress line: what it waits on now (cleared by head_op at its end)."""
    ctx.progress = f"connect: {step}"


def connect(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    try:
        with head_op(ctx, "connect", lock_file=False):
            return _connect(ctx, args)
    except custody_errors.CustodyError as err:
        raise as_protocol_error(err) from None
    except ChainRefused as err:
        raise ProtocolError(ErrorCode.NOT_CONNECTED, f"the chain refused: {err}") from None
    except devchain.DevchainError as err:  # `--dev`'s own calls: the devchain's code and hint
        raise ProtocolError(err.code, str(err), err.hint) from None
    except RpcUnavailable as err:  # a chain call no step above turned into a refusal of its own
        raise ProtocolError(ErrorCode.RPC_UNAVAILABLE, str(err)) from None


def _owner(args: dict[str, Any]) -> str:
    owner = args.get("owner")
    if not owner:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "--owner 0x... is required")
    problem = address_problem(owner)
    if problem == NOT_ITS_CHECKSUM:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"--owner {owner!r} {problem}",
                            CHECKSUM_HINT)
    if problem is not None:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"--owner {owner!r} is not an address",
                            "give the owner wallet's address, 0x and 40 hex characters")
    return checksum_address(owner)


def _secrets_given(args: dict[str, Any]) -> bool:
    """Whether the caller gave a key's secret: a vault passphrase or a derive signature."""
    return args.get("passphrase") is not None or args.get("signature") is not None


def _check_secrets(owner: str, args: dict[str, Any]) -> None:
    """The caller's secrets refused where they are wrong on their face, before the chain is
    read: a signature that does not parse or is not the owner's, an empty passphrase. Their
    stretch (scrypt, ~0.4 s and 128 MiB under the home's scrypt lock) waits for the chain,
    which may show there is nothing to open (`_connect`); these refusals come first, as
    they did when the stretch came first."""
    if args.get("passphrase") is not None:
        if args["passphrase"] == "":
            raise custody_errors.EmptyPassphrase()
    elif args.get("signature") is not None:
        check_derive_signature(parse_signature_text(args["signature"]), owner)
        if args.get("salt_passphrase") == "":
            raise custody_errors.EmptyPassphrase()


def _supplied(ctx: SpaceContext, owner: str, args: dict[str, Any]) -> list[SuppliedKey]:
    """The KEKs the caller's secrets derive, the one that must open the vault first."""
    home, space = ctx.config.home, ctx.config.space_id
    keys: list[SuppliedKey] = []
    if args.get("passphrase") is not None or args.get("salt_passphrase") is not None:
        say(ctx, "stretching the passphrase (scrypt)")
    if args.get("passphrase") is not None:
        keys.append(SuppliedKey(KIND_PASSPHRASE, passphrase_kek(args["passphrase"], owner, space,
                                                                home=home)))
    elif args.get("signature") is not None:
        signature = parse_signature_text(args["signature"])
        keys.append(SuppliedKey(KIND_SIGNATURE, signature_kek(
            signature, owner, space, salt_passphrase=args.get("salt_passphrase"), home=home)))
    return keys


def _wrong_key(owner: str, key: SuppliedKey, rotated: bool) -> ProtocolError:
    tag8 = key.tag.hex()[:8]
    if rotated:
        message = (f"the data key of this vault was rotated and this key (tag {tag8}) was not "
                   f"carried over: it opens the epochs sealed before the rotation and nothing "
                   f"after it")
    else:
        message = (f"this key (tag {tag8}) does not open the vault anchored under {owner}: the "
                   f"wraps in the head epoch carry different tags. Wrong wallet, wrong "
                   f"passphrase, or wrong tenant.")
    return ProtocolError(ErrorCode.WRONG_KEY, message,
                         f"if the key is lost, the recovery code opens the vault: kint connect "
                         f"--owner {owner} --recovery-code-stdin")


def _from_recovery_code(code: str, owner: str, header: ReadableHeader | None,
                        held: HeldHere, chain_error: ProtocolError | None) -> _Found:
    """The recovery code, bound to the vault by the chain's header or, when the chain shows
    none, by what this machine holds of it (recovery_binding); it never starts a vault."""
    dek, wraps = bind_recovery_code(code, owner, header, held, chain_error)
    return _Found(dek, wraps, SOURCE_CODE)


def _connect(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    """The steps: the chain and the owner, the caller's secrets checked, what the chain and
    this machine hold, the data key from the first source that has it (the module's
    docstring), then the files that keep it. A passphrase is stretched only once the chain
    was read: a chain that cannot be read, with no wraps here, refuses whatever the key."""
    cfg = ctx.config
    chain, rpc_urls = _chain_for(ctx, args)
    existing = ctx.enrolment()
    moved = _moved_from(ctx, existing, chain)
    owner, dev_account, args = _owner_for(cfg.home, cfg.space_id, chain, existing, args)
    owner_changed = _owner_change(ctx, existing, owner)
    if owner_changed is not None:  # nothing of the old vault is kept: not its wraps, not
        existing = replace(existing, vault_created=False)  # its maker's claim (the file's)
    if not session_key_exists(cfg.home):
        say(ctx, "making this machine's session key")
    session_address, _ = create_session_key(cfg.home)
    anchor = Anchor(chain, ctx.tracker)
    code = args.get("recovery_code")
    if not _secrets_given(args) and code is None:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "connect needs a derive signature, a vault "
                            "passphrase or the recovery code")
    _check_secrets(owner, args)
    header, chain_error = _chain_view(ctx, anchor, owner)
    local = read_wraps(cfg.home, cfg.space_id) if owner_changed is None else None
    may_have_started = _may_have_started(existing)
    if code is not None:
        held = held_here(ctx) if header is None and owner_changed is None else HeldHere()
        found = _from_recovery_code(code, owner, header, held, chain_error)
    elif header is None and local is None and chain_error is not None:
        raise chain_error  # nothing a key could open, nor a vault to start: no stretch for it
    else:
        found = _from_supplied_key(owner, _supplied(ctx, owner, args)[0], header, local,
                                   chain_error, may_have_started=may_have_started)
    wraps = _with_extra_passphrase(ctx, owner, found.dek, found.wraps,
                                   args.get("extra_passphrase"))
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
            "owner_changed": _owner_changed_words(ctx, owner_changed, recovery_path)}


def _owner_change(ctx: SpaceContext, existing: Enrolment | None, owner: str) -> str | None:
    """The owner this space was connected to, when `owner` is another one and this machine
    holds no epoch of the old one's vault (its mirror at 0, no watermark, no push on its
    way in a pending journal): the space
    connects to the new owner, and nothing of the old vault is kept. That is a connect
    given the wrong owner, which started a fresh vault nobody anchored: v0.3.0's way out
    (03-new-machine.md, the fresh-vault warning) is to connect again with the right one,
    which was refused here. With an epoch of the old vault here it is still refused
    (another owner's memory belongs to another tenant)."""
    if existing is None or existing.owner == owner:
        return None
    if ctx.seen_here() > 0 or ctx.state.files["pending"].exists():  # or a push on its way
        raise ProtocolError(ErrorCode.BAD_REQUEST,
                            f"this space is connected to owner {existing.owner}, not {owner}",
                            "another owner's memory takes a tenant of its own: `kint "
                            "--tenant T` on the command line, KINT_TENANT in kint-server's "
                            "MCP configuration (nothing was changed)")
    return existing.owner


def _owner_changed_words(ctx: SpaceContext, old: str | None,
                         recovery_path: Path | None) -> str | None:
    """What connect says of an owner change: from whom, and, when the recovery file here is
    still the old vault's (a fresh vault's file, not rewritten by this connect), that it
    is not this vault's code."""
    if old is None:
        return None
    words = (f"this space was connected to owner {old}, of whose vault this machine holds no "
             f"epoch; its wraps and key are replaced")
    stale = recovery_file_path(ctx.config.home, ctx.config.space_id)
    if recovery_path is None and stale.exists():
        words += (f"; {stale} still holds that vault's recovery code: `kint recovery-code` "
                  f"writes this one's")
    return words


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


def _may_have_started(existing: Enrolment | None) -> bool:
    """Whether local wraps, with no epoch found on chain, may be a vault this machine
    started. Before any enrolment they are (this connect's, or one killed before its
    enrolment was written); under an enrolment only when it says so (`vault_created`) and
    the chain was read. A machine that joined from a header keeps the old vault's wraps
    when its enrolment moves to another chain or contract, or the chain is reset; counting
    them would write it a recovery file (the data key in the clear) and call it the maker.
    Under KINT_OFFLINE=1 no chain said it is empty, so only the first case holds.

    The maker moved to another contract (or chain) still counts its wraps as started here,
    and that is right: `vault_created` names the machine that made the data key, and a key
    belongs to no contract. The move is allowed only while this machine holds none of the
    old contract's epochs (`_moved_from`), and the new one shows none either, so the first
    epoch there is sealed under that same key, and its recovery code is the one the maker
    already holds; a missing file is written back, as for a connect killed before writing
    it. Not counting it would change nothing else: `_keep` carries `vault_created` over,
    so push would still ask for the file (push_refusals.py), with no connect to restore it."""
    if existing is None:
        return True
    return existing.vault_created and not settings.value("KINT_OFFLINE")


def _moved_from(ctx: SpaceContext, existing: Enrolment | None,
                chain: ChainConfig) -> str | None:
    """What a connect on another chain or contract than the space's enrolment does, said:
    the enrolment is rewritten for the ones in force. Refused (CONFIG_INVALID, with
    `other_chain`'s words) when this machine holds epochs of the old one (its mirror past
    0, its watermark): they would stay under the new enrolment, and every pull would refuse
    the new head as stale; refused as CORRUPT_STATE, naming the file, when one of those
    does not read and the other shows none (SpaceContext.seen_here). Before, connect
    overwrote the enrolment without a word."""
    elsewhere = other_chain(existing, chain, ctx.seen_here) if existing is not None else None
    if elsewhere is None:
        return None
    if ctx.seen_here() > 0:
        raise ProtocolError(ErrorCode.CONFIG_INVALID,
                            f"{elsewhere.message}: connect does not move the space off them",
                            elsewhere.hint)
    return f"{elsewhere.message}: the space is connected on the one kint reads now"


def _chain_for(ctx: SpaceContext, args: dict[str, Any]) -> tuple[ChainConfig, list[str]]:
    """The chain settings, with `--rpc-url`'s endpoints in place of the configured ones
    when given (returned too: the enrolment keeps them for this space)."""
    chain = ctx.chain()
    rpc_urls = [u.strip() for u in (args.get("rpc_urls") or "").split(",") if u.strip()]
    if rpc_urls:
        chain = replace(chain, rpc_urls=tuple(rpc_urls))
    return chain, rpc_urls


def _owner_for(home: Path, space: str, chain: ChainConfig, existing: Enrolment | None,
               args: dict[str, Any]) -> tuple[str, LocalAccount | None, dict[str, Any]]:
    """The owner, the devchain's owner account (`--dev` only, else None), and the args
    with `--dev`'s derive signature in them. `--dev` refuses a chain that is not the
    devchain and keeps the space's owner account. Another owner than the space's is for
    `_owner_change` to take or refuse."""
    dev_account: LocalAccount | None = None
    if args.get("dev"):
        if not chain.devchain:
            raise ProtocolError(ErrorCode.BAD_REQUEST, "--dev needs the devchain",
                                "run `kint devchain start`, and unset KINT_RPC_URL")
        if existing is not None:
            dev_account = dev_owner.load_owner(home, existing.owner)
        else:  # a `--dev` connect killed before its enrolment: the owner its wraps name
            local = read_wraps(home, space)
            if local is not None:
                dev_account = dev_owner.owner_of_wraps(home, space,
                                                       {w.tag for w in local.wraps})
        dev_account = dev_account or dev_owner.new_owner(home)
        owner = dev_account.address
        args = {**args, "signature": dev_owner.derive_signature(dev_account)}
    else:
        owner = _owner(args)
    return owner, dev_account, args


def _chain_view(ctx: SpaceContext, anchor: Anchor,
                owner: str) -> tuple[ReadableHeader | None, ProtocolError | None]:
    """What the chain says (unless KINT_OFFLINE=1): the newest readable header (None when
    the chain holds no epochs), or the RPC_UNAVAILABLE error when it cannot be read, kept
    so that local wraps can still answer and only a fresh vault is refused for it."""
    header: ReadableHeader | None = None
    chain_error: ProtocolError | None = None
    space = ctx.config.space_id
    if not settings.value("KINT_OFFLINE"):
        try:
            say(ctx, "reading the chain head")
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


def _from_supplied_key(owner: str, key: SuppliedKey, header: ReadableHeader | None,
                       local: WrapsFile | None, chain_error: ProtocolError | None, *,
                       may_have_started: bool = True) -> _Found:
    """The data key a supplied KEK opens, from the first source that has it: local wraps
    while they hold the head header's key, else the header's wrap with this key's tag
    (checked to open the key that sealed it), else a fresh vault, only when the chain
    was read, holds no epochs, and this machine has no wraps (a vault is never started
    over one the chain could not show, nor over local wraps this key does not open).
    `may_have_started` False: local wraps are not taken as a vault started here, whatever the
    chain shows (a machine that joined, or KINT_OFFLINE=1 on one already enrolled:
    _may_have_started)."""
    local_wrap = find_wrap(local.wraps, key.tag) if local is not None else None
    if local_wrap is not None and (header is None or header.header.dek_id == local.dek_id):
        return _Found(unwrap(local_wrap, key.kek), tuple(local.wraps), SOURCE_LOCAL,
                      key_tag=key.tag,
                      started_here=header is None and chain_error is None and may_have_started)
    if header is not None:
        wrap = find_wrap(header.header.wraps, key.tag)
        if wrap is None:
            raise _wrong_key(owner, key, rotated=local_wrap is not None)
        dek = unwrap(wrap, key.kek)
        if dek_id(dek) != header.header.dek_id:
            raise ProtocolError(ErrorCode.WRONG_KEY, f"the wrap of epoch {header.seq} opens "
                                f"a data key that did not seal it (dek_id mismatch)")
        return _Found(dek, tuple(header.header.wraps), SOURCE_HEADER, key_tag=key.tag)
    if chain_error is not None:
        raise chain_error
    if local is not None:
        raise _wrong_key(owner, key, rotated=False)
    dek = new_data_key()
    return _Found(dek, (wrap_data_key(dek, key.kek, key.kind),), SOURCE_FRESH, fresh=True,
                  key_tag=key.tag)


def _keep(ctx: SpaceContext, chain: ChainConfig, existing: Enrolment | None,
          args: dict[str, Any], owner: str, session_address: str, rpc_urls: list[str],
          found: _Found, wraps: tuple[Wrap, ...]) -> Path | None:
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


def _with_extra_passphrase(ctx: SpaceContext, owner: str, dek: bytes, wraps: tuple[Wrap, ...],
                           passphrase: str | None) -> tuple[Wrap, ...]:
    """`--add-passphrase`: a kind 0x02 wrap beside the others, so the passphrase alone opens
    the vault; every epoch pushed after this carries it."""
    if not passphrase:
        return wraps
    say(ctx, "stretching the extra passphrase (scrypt)")
    kek = passphrase_kek(passphrase, owner, ctx.config.space_id, home=ctx.config.home)
    if find_wrap(wraps, kek_tag(kek)) is not None:
        return wraps
    return wraps + (wrap_data_key(dek, kek, KIND_PASSPHRASE),)
