"""`kint connect` in the space's worker: find the data key and keep it (05-keys.md, "One
data key, many wraps").

The key the owner supplies is a key-encryption key (from the wallet's derive signature,
optionally salted, or from a vault passphrase), or the recovery code, which is the data key
itself. The data key comes from the first of:

1. this machine's wraps (`wraps-<space16>.json`), while they hold the key the newest
   readable header was sealed with (or the chain cannot be read);
2. the header of the newest readable epoch on chain: its wrap is found by `kek_tag`,
   never by trying each one;
3. a fresh vault, when the chain holds no epochs for this owner and space and this machine
   has no wraps: a new data key, its wrap, and the recovery code written to
   `RECOVERY-<space16>.txt`.

A recovery code is bound to the vault before it is trusted: its `dek_id` must equal the
head header's (or, when the chain cannot be read, the local wraps'). A recovery code never
starts a vault. Nothing here prints or logs the signature, a KEK or the data key.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from web3 import Web3

from kint import settings
from kint.chain import devchain
from kint.chain.anchor import Anchor
from kint.chain.calls import ChainRefused
from kint.custody import errors as custody_errors
from kint.custody.data_key import dek_id, new_data_key
from kint.custody.keks import kek_tag, passphrase_kek, signature_kek
from kint.custody.recovery_code import decode_recovery_code, write_recovery_file
from kint.custody.session_key import create_session_key
from kint.custody.vault_cache import cache_data_key
from kint.custody.vault_message import parse_signature_text
from kint.custody.wraps import (KIND_PASSPHRASE, KIND_SIGNATURE, Wrap, find_wrap, read_wraps,
                                unwrap, wrap_data_key, write_wraps)
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker import dev_owner
from kint.tenant_worker.custody_errors import as_protocol_error
from kint.tenant_worker.enrolment import Enrolment, save_enrolment
from kint.tenant_worker.head_header import ReadableHeader, newest_readable_header, read_head
from kint.tenant_worker.head_lock import head_op
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


def _owner(args: dict[str, Any]) -> str:
    owner = args.get("owner")
    if not owner:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "--owner 0x... is required")
    if not Web3.is_address(owner):
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"--owner {owner!r} is not an address",
                            "give the owner wallet's address, 0x and 40 hex characters")
    return Web3.to_checksum_address(owner)


def _supplied(ctx: SpaceContext, owner: str, args: dict[str, Any]) -> list[SuppliedKey]:
    """The KEKs the caller's secrets derive, the one that must open the vault first."""
    home, space = ctx.config.home, ctx.config.space_id
    keys: list[SuppliedKey] = []
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
                        local_dek_id: bytes | None) -> bytes:
    dek = decode_recovery_code(code)
    want = header.header.dek_id if header is not None else local_dek_id
    if want is None:
        raise ProtocolError(ErrorCode.WRONG_KEY,
                            "a recovery code cannot start a vault: the chain holds no epochs "
                            f"for owner {owner} in this space, and this machine has nothing "
                            "to check the code against",
                            "check --owner and the tenant, and that the chain can be read")
    if dek_id(dek) != want:
        raise ProtocolError(ErrorCode.WRONG_KEY, "this recovery code does not belong to the "
                            "vault anchored under this owner",
                            "check the code, --owner and the tenant")
    return dek


def _connect(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    cfg = ctx.config
    home, space = cfg.home, cfg.space_id
    chain = ctx.chain()
    rpc_urls = [u.strip() for u in (args.get("rpc_urls") or "").split(",") if u.strip()]
    if rpc_urls:
        chain = replace(chain, rpc_urls=tuple(rpc_urls))
    existing = ctx.enrolment()
    dev_account = None
    if args.get("dev"):
        if not chain.devchain:
            raise ProtocolError(ErrorCode.BAD_REQUEST, "--dev needs the devchain",
                                "run `kint devchain start`, and unset KINT_RPC_URL")
        if existing is not None:
            dev_account = dev_owner.load_owner(home, existing.owner)
        dev_account = dev_account or dev_owner.new_owner(home)
        owner = dev_account.address
        args = {**args, "signature": dev_owner.derive_signature(dev_account)}
    else:
        owner = _owner(args)
    if existing is not None and existing.owner != owner:
        raise ProtocolError(ErrorCode.BAD_REQUEST,
                            f"this space is connected to owner {existing.owner}, not {owner}",
                            "use another tenant (--tenant) for another owner's memory")
    session_address, _ = create_session_key(home)
    anchor = Anchor(chain, ctx.tracker)

    supplied = _supplied(ctx, owner, args)
    code = args.get("recovery_code")
    if not supplied and code is None:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "connect needs a derive signature, a vault "
                            "passphrase or the recovery code")

    # What the chain says (unless KINT_OFFLINE=1), and what this machine holds.
    header: ReadableHeader | None = None
    chain_error: ProtocolError | None = None
    chain_empty = False
    if not settings.value("KINT_OFFLINE"):
        try:
            head = read_head(anchor, owner, space)
            chain_empty = head.seq == 0
            if not chain_empty:
                header = newest_readable_header(anchor, owner, space, head, command="connect")
        except ProtocolError as err:
            if err.code is not ErrorCode.RPC_UNAVAILABLE:
                raise
            chain_error = err
    local = read_wraps(home, space)

    fresh = False
    key_tag: bytes | None = None
    if code is not None:
        dek = _from_recovery_code(code, owner, header, local.dek_id if local else None)
        wraps = header.header.wraps if header is not None else local.wraps  # type: ignore[union-attr]
        source = SOURCE_CODE
    else:
        key = supplied[0]
        key_tag = key.tag
        local_wrap = find_wrap(local.wraps, key_tag) if local is not None else None
        if local_wrap is not None and (header is None or header.header.dek_id == local.dek_id):
            dek = unwrap(local_wrap, key.kek)
            wraps, source = local.wraps, SOURCE_LOCAL  # type: ignore[union-attr]
        elif header is not None:
            wrap = find_wrap(header.header.wraps, key_tag)
            if wrap is None:
                raise _wrong_key(owner, key, rotated=local_wrap is not None)
            dek = unwrap(wrap, key.kek)
            if dek_id(dek) != header.header.dek_id:
                raise ProtocolError(ErrorCode.WRONG_KEY, f"the wrap of epoch {header.seq} opens "
                                    f"a data key that did not seal it (dek_id mismatch)")
            wraps, source = header.header.wraps, SOURCE_HEADER
        elif chain_error is not None:
            raise chain_error
        elif local is not None:
            raise _wrong_key(owner, key, rotated=False)
        else:
            dek, fresh = new_data_key(), True
            wraps, source = (wrap_data_key(dek, key.kek, key.kind),), SOURCE_FRESH
    wraps = _with_extra_passphrase(ctx, owner, dek, tuple(wraps), args.get("extra_passphrase"))

    write_wraps(home, space, dek_id(dek), wraps)
    cache_data_key(home, space, dek)
    recovery_path = write_recovery_file(home, owner, space, dek) if fresh else None
    enrolment = Enrolment(
        space=space, tenant=cfg.label, owner=owner,
        account="smart" if args.get("passphrase") is not None else "eoa",
        contract=chain.anchor, chain_id=chain.chain_id, key_tags=[w.tag.hex() for w in wraps],
        session_address=session_address,
        vault_created=fresh or bool(existing and existing.vault_created),
        rpc_urls=rpc_urls or (existing.rpc_urls if existing else None),
        db=cfg.db, label=cfg.label)
    save_enrolment(ctx.state.files["enrol"], enrolment)
    if ctx.state.mirror() is None:
        empty_mirror(ctx.state)
    if dev_account is not None and not anchor.can_write(owner, session_address):
        dev_owner.authorize(anchor, chain.rpc_urls[0], dev_account, session_address)
    log.info("space %s connected: owner %s, data key from %s", cfg.space16, owner, source)
    return {"connected": True, "owner": owner, "space": cfg.space16, "source": source,
            "key_tag": key_tag.hex()[:8] if key_tag is not None else None,
            "session": session_address, "fresh_vault": fresh,
            "recovery_file": str(recovery_path) if recovery_path else None,
            "chain_unreadable": chain_error.message if chain_error else None}


def _with_extra_passphrase(ctx: SpaceContext, owner: str, dek: bytes, wraps: tuple[Wrap, ...],
                           passphrase: str | None) -> tuple[Wrap, ...]:
    """`--add-passphrase`: a kind 0x02 wrap beside the others, so the passphrase alone opens
    the vault; every epoch pushed after this carries it."""
    if not passphrase:
        return wraps
    kek = passphrase_kek(passphrase, owner, ctx.config.space_id, home=ctx.config.home)
    if find_wrap(wraps, kek_tag(kek)) is not None:
        return wraps
    return wraps + (wrap_data_key(dek, kek, KIND_PASSPHRASE),)
