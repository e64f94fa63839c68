"""`kint rekey` and `kint recovery-code` (DESIGN §8).

rekey: a new data key and recovery code, new wraps published on chain, the vault and the
recovery file replaced, then a snapshot sealed under the new key. Epochs under the old key
stay readable only where the old key is held (a machine that never gets the new code sees a
gap from the snapshot on).

recovery-code: a new recovery code for the same data key, its wrap published in place of
the old one, and `RECOVERY-<space>.txt` written again.
"""

from __future__ import annotations

from typing import Any

from kint.chain.anchor import Anchor
from kint.chain.rpc import RpcUnavailable
from kint.paths import atomic_write
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker import keys
from kint.tenant_worker.enrolment import save_enrolment
from kint.tenant_worker.head_lock import head_op
from kint.tenant_worker.push import _push, connected, data_key
from kint.tenant_worker.space import SpaceContext


def _publish(ctx: SpaceContext, anchor: Anchor, owner: str, key: bytes, code: str) -> None:
    cfg = ctx.config
    session = ctx.session_account()
    wraps = [keys.wrap_with_recovery_code(key, keys.parse_recovery_code(code), cfg.space_id),
             keys.wrap_for_machine(key, bytes(session.key), session.address.lower(),
                                   cfg.space_id)]
    blob = keys.encode_wraps(wraps)
    writer = keys.writer_account(bytes(session.key), cfg.space_id)
    anchor.transact(writer, anchor.contract.functions.publishWraps(
        owner, bytes.fromhex(cfg.space_id), blob))
    atomic_write(ctx.state.files["wraps"], blob)


def _locked(ctx: SpaceContext, fn: Any) -> dict[str, Any]:
    try:
        with head_op(ctx):
            return fn()
    except RpcUnavailable as err:
        raise ProtocolError(ErrorCode.RPC_UNAVAILABLE, str(err)) from None


def rekey(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        cfg = ctx.config
        chain, enrolment = connected(ctx)
        data_key(ctx)  # refuse as push would when the current key is not at hand
        anchor = Anchor(chain, ctx.tracker)
        key, code = keys.new_data_key(), keys.new_recovery_code()
        _publish(ctx, anchor, enrolment.owner, key, code)
        keys.write_vault(cfg.home, cfg.space_id, key, keys.machine_secret(cfg.home).secret)
        path = keys.write_recovery_file(cfg.home, cfg.space16, code)
        enrolment.key_ids.append(keys.data_key_id(key).hex())
        enrolment.vault_created = True
        save_enrolment(ctx.state.files["enrol"], enrolment)
        pushed = _push(ctx, True)
        return {"key_id": keys.data_key_id(key).hex(), "recovery_file": str(path),
                "snapshot": pushed["epochs"]}

    return _locked(ctx, run)


def recovery_code(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        cfg = ctx.config
        chain, enrolment = connected(ctx)
        key = data_key(ctx)
        code = keys.new_recovery_code()
        _publish(ctx, Anchor(chain, ctx.tracker), enrolment.owner, key, code)
        path = keys.write_recovery_file(cfg.home, cfg.space16, code)
        enrolment.vault_created = True
        save_enrolment(ctx.state.files["enrol"], enrolment)
        return {"recovery_file": str(path)}

    return _locked(ctx, run)
