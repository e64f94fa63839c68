"""After `kint session-key rotate`: move one space over to the machine's new session key.

The owner must authorize the new key (on the devchain by anvil's impersonation, on a real
chain by the owner's wallet, before this runs); the new key delegates the space's new
writer (derived from it) and funds it; the machine's wrap of the data key is made again
for the new key and published; the enrolment records the new addresses.
"""

from __future__ import annotations

from typing import Any

from web3 import Web3

from kint.chain.anchor import Anchor
from kint.paths import atomic_write
from kint.tenant_worker import keys
from kint.tenant_worker.connect import ensure_authorized
from kint.tenant_worker.funding import WRITER_FUNDING_WEI
from kint.tenant_worker.enrolment import save_enrolment
from kint.tenant_worker.push import connected, data_key
from kint.tenant_worker.rekey import _locked
from kint.tenant_worker.space import SpaceContext


def reenrol(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        cfg = ctx.config
        chain, enrolment = connected(ctx)
        key = data_key(ctx)
        ctx.forget_session()
        session = ctx.session_account()
        if session.address == enrolment.session_address:
            return {"space": cfg.space16, "session": session.address, "changed": False}
        anchor = Anchor(chain, ctx.tracker)
        owner = Web3.to_checksum_address(enrolment.owner)
        expiry = ensure_authorized(anchor, chain, owner, session)
        writer = keys.writer_account(bytes(session.key), cfg.space_id)
        anchor.transact(session, anchor.contract.functions.delegate(owner, writer.address,
                                                                    expiry))
        anchor.transfer(session, writer.address, WRITER_FUNDING_WEI)
        wraps = keys.decode_wraps(ctx.state.files["wraps"].read_bytes())
        old_tag = enrolment.session_address.lower()
        wraps = [w for w in wraps if not (w.get("kind") == "machine" and w.get("tag") == old_tag)]
        wraps.append(keys.wrap_for_machine(key, bytes(session.key), session.address.lower(),
                                           cfg.space_id))
        blob = keys.encode_wraps(wraps)
        anchor.transact(writer, anchor.contract.functions.publishWraps(
            owner, bytes.fromhex(cfg.space_id), blob))
        atomic_write(ctx.state.files["wraps"], blob)
        enrolment.session_address, enrolment.writer = session.address, writer.address
        save_enrolment(ctx.state.files["enrol"], enrolment)
        return {"space": cfg.space16, "session": session.address, "writer": writer.address,
                "changed": True}

    return _locked(ctx, run)
