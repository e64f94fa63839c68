"""`pull --discard-local`'s one destructive step and the checks made before it: the Sibyl
store (and its -wal and -shm) moved aside to timestamped `.kint-backup-` copies, only once
nothing else holds it open and Sibyl's account gate takes writes (pull.py also walks and
checks every epoch first), so a refusal leaves the store where it was.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from kint.protocol import ErrorCode, ProtocolError
from kint.sibyl_client import account_gate
from kint.tenant_worker.space import SpaceContext


def refuse_if_held(ctx: SpaceContext) -> None:
    """BUSY while another process has the store open: see store_holders for why moving it
    then would lose the restored rows. Asked before the walk (so a held store is refused
    before minutes of fetching) and again at the move (something may have opened it since)."""
    from kint.tenant_worker.store_holders import describe, other_holders

    ctx.reset_client()
    holders = other_holders(ctx.config.db)
    if holders:
        raise ProtocolError(
            ErrorCode.BUSY,
            f"the store is open in {len(holders)} other process(es), pid "
            f"{describe(holders)}: moving it aside now would let them keep writing into the "
            f"backup and, when they close it, delete the restored store's journal; nothing "
            f"was moved",
            "stop what holds it (an agent's MCP server, Hermes, a script), or from a kint-server "
            "agent call memory_pull with discard_local, then try again")


def discard_local(ctx: SpaceContext) -> list[str]:
    """Move the store and its -wal and -shm aside to timestamped `.kint-backup-` copies.
    Refused (BUSY, nothing moved) while another process has the store open."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    refuse_if_held(ctx)
    moved = []
    for suffix in ("", "-wal", "-shm"):
        src = Path(ctx.config.db + suffix)
        if src.exists():
            dst = Path(f"{ctx.config.db}.kint-backup-{stamp}{suffix}")
            shutil.move(src, dst)
            moved.append(str(dst))
    return moved


def sibyl_takes_writes() -> None:
    """Sibyl's own account gate, asked for a write before a discarding pull moves the store
    aside: the same check (and the same refusal, SIBYL_ERROR "needs an account") every
    write through Sibyl makes first. It does not see a store Sibyl would refuse for its size
    (the cap is measured on the restored store, which does not exist yet)."""
    account_gate().require("set_entity")
