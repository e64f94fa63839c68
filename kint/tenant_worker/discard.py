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
    before minutes of fetching) and again at the move (something may have opened it since).

    One Sibyl store holds many tenants, so kint's own worker for another space on it (a
    sibling: forked by the same forkserver) may be the holder: it keeps its read-only
    connection between ops for as long as it runs. The refusal names it as such, with the way
    to stop it, rather than send the user looking for an agent that is not there."""
    from kint.tenant_worker.store_holders import describe, other_holders, same_parent

    ctx.reset_client()
    holders = other_holders(ctx.config.db)
    if not holders:
        return
    ours = same_parent(holders)
    named = describe([p for p in holders if p not in ours])
    if ours:
        whose = ("kint's worker for another space on this store" if len(ours) == 1 else
                 "kint's workers for other spaces on this store")
        named = ", ".join(filter(None, [f"{', '.join(map(str, ours))} ({whose})", named]))
    hints = []
    if ours:
        hints.append("kint's workers keep the store open while they run: `kint supervisor "
                     "stop` stops them (the next command starts it again)")
    if len(ours) < len(holders):
        hints.append("stop what holds it (an agent's MCP server, Hermes, a script), or from a "
                     "kint-server agent call memory_pull with discard_local")
    raise ProtocolError(
        ErrorCode.BUSY,
        f"the store is open in {len(holders)} other process(es), pid {named}: moving it "
        f"aside now would let them keep writing into the backup and, when they close it, "
        f"delete the restored store's journal; nothing was moved",
        "; ".join(hints) + ", then try again")


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
