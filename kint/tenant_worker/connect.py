"""`kint connect`: enrol this machine in a space (DESIGN §8).

- A fresh vault (the first machine): a new data key and recovery code, wraps of the data
  key under the recovery code and under this machine's session key, published on chain,
  the vault, `RECOVERY-<space>.txt`, and an empty mirror at seq 0.
- `--recovery-code` (a new machine): the data key from the wraps on chain, opened with the
  code; this machine's own wrap added and published; no recovery file is written.

Either way the space's writer key (derived from the session key, so tenants never share a
nonce sequence) is delegated by the session key and funded by it. On the devchain
(`--dev`) the owner is a fresh address and authorizes the session key by anvil's
impersonation; on a real chain the owner's wallet must have authorized it already.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from eth_account import Account
from web3 import Web3

from kint.chain import devchain
from kint.chain.anchor import Anchor, ChainRefused
from kint.chain.rpc import RpcUnavailable
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker import keys
from kint.tenant_worker.enrolment import Enrolment, save_enrolment
from kint.tenant_worker.funding import WRITER_FUNDING_WEI
from kint.tenant_worker.head_lock import head_op
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import empty_mirror

log = logging.getLogger("kint.worker")

SESSION_DAYS = 365
DEV_SESSION_FUNDING_WEI = 10**19


def _session(ctx: SpaceContext) -> Any:
    home = ctx.config.home
    if not keys.session_key_path(home).exists():
        try:
            keys.create_session_key(home)
        except keys.SessionKeyExists:
            pass  # another space's worker made it a moment ago
    try:
        return ctx.session_account()
    except keys.KeysError as err:
        raise ProtocolError(ErrorCode.NOT_CONNECTED, str(err)) from None


def ensure_authorized(anchor: Anchor, chain: Any, owner: str, session: Any) -> int:
    """Make sure `owner` has authorized `session` on chain; returns the expiry to give the
    writer's delegation. On the devchain the owner authorizes it here (impersonated) and
    the session key is funded; on a real chain the owner's wallet must have done it."""
    expiry = int(time.time()) + SESSION_DAYS * 86400
    if anchor.can_write(owner, session.address):
        return expiry
    if not chain.devchain:
        raise ProtocolError(
            ErrorCode.NOT_CONNECTED,
            f"the owner {owner} has not authorized this machine's session key "
            f"{session.address}",
            f"have the owner call authorize({session.address}, expiry) on EpochAnchor "
            f"{chain.anchor}, then run this again")
    url = chain.rpc_urls[0]
    data = anchor.contract.encode_abi("authorize", args=[session.address, expiry])
    devchain.send_as(url, owner, anchor.address, data)
    devchain.fund(url, session.address, DEV_SESSION_FUNDING_WEI)
    return expiry


def connect(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    try:
        with head_op(ctx, lock_file=False):
            return _connect(ctx, args)
    except RpcUnavailable as err:
        raise ProtocolError(ErrorCode.RPC_UNAVAILABLE, str(err)) from None
    except ChainRefused as err:
        raise ProtocolError(ErrorCode.NOT_CONNECTED, f"the chain refused: {err}") from None
    except devchain.DevchainError as err:
        raise ProtocolError(ErrorCode.NOT_CONNECTED, str(err)) from None


def _key_from_wraps(anchor: Anchor, owner: str, space_id: str, code_text: str
                    ) -> tuple[bytes, list[dict[str, Any]]]:
    """The data key the recovery code opens among the wraps on chain, and those wraps."""
    try:
        code = keys.parse_recovery_code(code_text)
    except keys.BadRecoveryCode as err:
        raise ProtocolError(ErrorCode.BAD_REQUEST, str(err)) from None
    blob = anchor.latest_wraps(owner, space_id)
    if blob is None:
        raise ProtocolError(ErrorCode.NOT_CONNECTED,
                            f"no key wraps are published for space {space_id[:16]} of owner "
                            f"{owner}", "check --owner and the tenant")
    wraps = keys.decode_wraps(blob)
    for wrap in wraps:
        if wrap.get("kind") == "recovery":
            try:
                return keys.unwrap(wrap, space_id=space_id, recovery_code=code), wraps
            except keys.WrongSecret:
                continue
    raise ProtocolError(ErrorCode.BAD_REQUEST,
                        "the recovery code does not open this space's key wraps; nothing was "
                        "changed", "check the code in RECOVERY-<space>.txt")


def _adopt_new_key(ctx: SpaceContext, enrolment: Enrolment, code_text: str) -> dict[str, Any]:
    """A connected machine takes the data key of a `kint rekey` made elsewhere."""
    from kint.paths import atomic_write

    cfg = ctx.config
    chain = ctx.chain()
    if chain is None:
        raise ProtocolError(ErrorCode.NOT_CONNECTED, "no chain is configured")
    anchor = Anchor(chain, ctx.tracker)
    data_key, wraps = _key_from_wraps(anchor, enrolment.owner, cfg.space_id, code_text)
    key_id = keys.data_key_id(data_key).hex()
    result = {"connected": True, "already": True, "owner": enrolment.owner,
              "space": cfg.space16, "session": enrolment.session_address,
              "writer": enrolment.writer, "key_id": key_id}
    if key_id in enrolment.key_ids[-1:]:
        return result
    session = ctx.session_account()
    tag = session.address.lower()
    wraps = [w for w in wraps if not (w.get("kind") == "machine" and w.get("tag") == tag)]
    wraps.append(keys.wrap_for_machine(data_key, bytes(session.key), tag, cfg.space_id))
    blob = keys.encode_wraps(wraps)
    writer = keys.writer_account(bytes(session.key), cfg.space_id)
    anchor.transact(writer, anchor.contract.functions.publishWraps(
        enrolment.owner, bytes.fromhex(cfg.space_id), blob))
    atomic_write(ctx.state.files["wraps"], blob)
    keys.write_vault(cfg.home, cfg.space_id, data_key,
                     keys.machine_secret(cfg.home).secret)
    enrolment.key_ids.append(key_id)
    save_enrolment(ctx.state.files["enrol"], enrolment)
    result["adopted_key"] = True
    return result


def _connect(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    cfg, state = ctx.config, ctx.state
    existing = ctx.enrolment()
    if existing is not None:
        if args.get("recovery_code") is not None:
            return _adopt_new_key(ctx, existing, args["recovery_code"])
        return {"connected": True, "already": True, "owner": existing.owner,
                "space": cfg.space16, "session": existing.session_address,
                "writer": existing.writer}
    chain = ctx.chain()
    rpc_urls = [u.strip() for u in (args.get("rpc_urls") or "").split(",") if u.strip()]
    if chain is not None and rpc_urls:
        from dataclasses import replace

        chain = replace(chain, rpc_urls=tuple(rpc_urls))
    if chain is None:
        raise ProtocolError(ErrorCode.NOT_CONNECTED, "no chain is configured",
                            "run `kint devchain start` (local) or set KINT_RPC_URLS, "
                            "KINT_CHAIN_ID and KINT_ANCHOR_ADDRESS")
    dev = bool(args.get("dev"))
    if dev and not chain.devchain:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "--dev needs the devchain",
                            "run `kint devchain start`, and unset KINT_RPC_URLS")
    code_text = args.get("recovery_code")
    owner = args.get("owner")
    if code_text is not None and not owner:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "--recovery-code needs --owner",
                            "the owner's address is printed by `kint connect` on the first "
                            "machine and by `kint status`")
    if code_text is None and not dev and not owner:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "name the owner with --owner, or use --dev "
                            "on the devchain")
    if owner is not None and not Web3.is_address(owner):
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"{owner!r} is not an address")
    anchor = Anchor(chain, ctx.tracker)
    secret = keys.machine_secret(cfg.home)

    # The data key: from the wraps on chain (a new machine) or fresh (the first one).
    if code_text is not None:
        data_key, wraps = _key_from_wraps(anchor, owner, cfg.space_id, code_text)
        recovery_code = None
    else:
        data_key = keys.new_data_key()
        recovery_code = keys.new_recovery_code()
        wraps = [keys.wrap_with_recovery_code(data_key, keys.parse_recovery_code(recovery_code),
                                              cfg.space_id)]
        if owner is None:
            owner = Account.create().address  # --dev: a fresh owner on the devchain
    owner = Web3.to_checksum_address(owner)

    session = _session(ctx)
    expiry = ensure_authorized(anchor, chain, owner, session)
    writer = keys.writer_account(bytes(session.key), cfg.space_id)
    anchor.transact(session, anchor.contract.functions.delegate(owner, writer.address, expiry))
    anchor.transfer(session, writer.address, WRITER_FUNDING_WEI)

    tag = session.address.lower()
    wraps = [w for w in wraps if not (w.get("kind") == "machine" and w.get("tag") == tag)]
    wraps.append(keys.wrap_for_machine(data_key, bytes(session.key), tag, cfg.space_id))
    blob = keys.encode_wraps(wraps)
    anchor.transact(writer, anchor.contract.functions.publishWraps(
        owner, bytes.fromhex(cfg.space_id), blob))
    from kint.paths import atomic_write

    atomic_write(state.files["wraps"], blob)
    keys.write_vault(cfg.home, cfg.space_id, data_key, secret.secret)
    recovery_path = None
    if recovery_code is not None:
        recovery_path = keys.write_recovery_file(cfg.home, cfg.space16, recovery_code)
    enrolment = Enrolment(space=cfg.space_id, tenant=cfg.tenant, owner=owner,
                          chain_id=chain.chain_id, anchor=chain.anchor,
                          session_address=session.address, writer=writer.address,
                          key_ids=[keys.data_key_id(data_key).hex()],
                          vault_created=recovery_code is not None,
                          rpc_urls=rpc_urls or None, db=cfg.db, label=cfg.label)
    save_enrolment(state.files["enrol"], enrolment)
    if state.mirror() is None:
        empty_mirror(state)
    log.info("space %s connected: owner %s, writer %s", cfg.space16, owner, writer.address)
    return {"connected": True, "already": False, "owner": owner, "space": cfg.space16,
            "session": session.address, "writer": writer.address,
            "recovery_file": str(recovery_path) if recovery_path else None,
            "secret_source": secret.source}
