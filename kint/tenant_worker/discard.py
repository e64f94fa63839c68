"""`pull --discard-local`'s one destructive step and the checks made before it: the Sibyl
store (and its -wal and -shm) moved aside to timestamped `.kint-backup-` copies, only once
it holds no other tenant's rows, nothing else holds it open and Sibyl's account gate takes
writes (pull.py also walks and checks every epoch first), so a refusal leaves the store
where it was.

The move is safe against a kill at any point. A WAL left beside a store that is no longer
there is the danger: the store the restore creates under the same name would have SQLite
replay the old WAL's frames into it. So the WAL is first checkpointed into the store and
closed (SQLite then deletes the -wal and -shm), and the store alone is renamed. When that
cannot be done (a store SQLite cannot read), the -wal and -shm are moved before the store.
A -wal or -shm found beside no store (a discard killed between its moves left it) is moved
aside all the same, before the restore can meet it.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Callable
from urllib.parse import quote

from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import (DISCARD_FROM_AGENT, STORE_LOCKED_PULL_HINT,
                                 STORE_UNCOUNTED_DISCARD_HINT)
from kint.sibyl_client import account_gate
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.store import rows_by_tenant
from kint.tenant_worker.store_errors import (StoreDenied, StoreLocked, StoreUnreadable,
                                            is_damaged)

log = logging.getLogger("kint.worker")

# Other tenants named in the refusal; the rest are counted.
NAMED_TENANTS = 5


def refuse_if_shared(ctx: SpaceContext) -> None:
    """BUSY while the store holds rows of any tenant but this one: Sibyl keys rows by
    tenant in one file, so moving the file aside would take every other tenant's rows out
    of the live store with this one's, and restore only this one's; the next push of an
    anchored other tenant would then anchor the deletion of every one of its rows. Asked
    with `refuse_if_held`, before the walk and again at the move. A store SQLite cannot
    read as a database (store_errors.is_damaged: corrupt, not a database, an I/O error) is
    let through: nobody's rows can be read from it, and discarding it (kept as the backup)
    is the way out. One SQLite reads and kint cannot count is refused, naming why: a schema
    it does not read (SQLite's error, a newer Sibyl's collation, say), tables none of which
    has Sibyl's tenant_id (store.rows_by_tenant), or any other SQLite error that says
    nothing of the file (out of memory, a cut-short transaction SQLite could not roll
    back; one it could is rolled back and counted). Such a file is not damaged, so
    nothing makes it nobody's: it may hold other tenants' rows in a shape this kint does
    not know, or be another tool's file that --db names by mistake, and v0.3.0 moved it
    aside all the same (09-cli.md: the whole file moves), putting a restore in its place
    and taking it from whatever wrote it. One this user may not open is refused too
    (StoreDenied): nothing says it is damaged, and moving it would put a restore over a
    good store; nor is one another process holds locked (StoreLocked): it is being written."""
    try:
        counts = rows_by_tenant(ctx.config.db)
    except StoreDenied as err:
        raise ProtocolError(ErrorCode.SIBYL_ERROR, f"{err}; nothing was moved",
                            err.hint) from None
    except StoreLocked as err:
        # Not a store nobody can read: a process holds it in a write. Named by pid where
        # it can be seen (refuse_if_held); where it cannot (another user's, no /proc nor
        # lsof), it was moved aside under that writer, its tenants uncounted.
        refuse_if_held(ctx)
        raise ProtocolError(ErrorCode.BUSY, f"{err}; nothing was moved",
                            STORE_LOCKED_PULL_HINT) from None
    except StoreUnreadable as err:
        if err.error is None or not is_damaged(err.error):  # SQLite reads it: not damaged
            raise ProtocolError(ErrorCode.SIBYL_ERROR, f"{err}; whose rows it holds cannot "
                                f"be counted, so nothing was moved",
                                STORE_UNCOUNTED_DISCARD_HINT) from None
        log.warning("pull: %s; moving it aside without counting its tenants", err)
        return
    others = sorted((t, n) for t, n in counts.items() if t != ctx.config.tenant and n)
    if not others:
        return
    named = ", ".join(f"{tenant} ({n} rows)" for tenant, n in others[:NAMED_TENANTS])
    if len(others) > NAMED_TENANTS:
        named += f" and {len(others) - NAMED_TENANTS} more"
    raise ProtocolError(
        ErrorCode.BUSY,
        f"the store {ctx.config.db} also holds the rows of {len(others)} other tenant(s): "
        f"{named}; moving it aside would take theirs out of the live store with tenant "
        f"{ctx.config.tenant}'s, and an anchored tenant's next push would anchor the "
        f"deletion of them all; nothing was moved",
        "a discard moves the whole file, so it is only for a store one tenant holds alone "
        "(SIBYL_MEMORY_DB gives a tenant its own when it joins); here, save what you need "
        "(`kint export`) and put this tenant's rows back as anchored through Sibyl, then a "
        "plain `kint pull` applies the chain")


def refuse_if_held(ctx: SpaceContext) -> None:
    """BUSY while another process has the store open: see store_holders for why moving it
    then would lose the restored rows. Asked before the walk (so a held store is refused
    before minutes of fetching) and again at the move (something may have opened it since).

    One Sibyl store holds many tenants, so kint's own worker for another space on it (a
    sibling: forked by the same forkserver) may be the holder: it keeps its read-only
    connection between ops for as long as it runs. The refusal names it as such, with the way
    to stop it, rather than send the user looking for an agent that is not there. This
    worker's own connections are closed first (those no op is reading through), so the
    checkpoint before the move removes the -wal and -shm (fold_wal)."""
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
        hints.append(f"stop what holds it (an agent's MCP server, Hermes, a script)"
                     f"{DISCARD_FROM_AGENT}")
    raise ProtocolError(
        ErrorCode.BUSY,
        f"the store is open in {len(holders)} other process(es), pid {named}: moving it "
        f"aside now would let them keep writing into the backup and, when they close it, "
        f"delete the restored store's journal; nothing was moved",
        "; ".join(hints) + ", then try again")


def refuse_to_move(ctx: SpaceContext) -> None:
    """Both refusals of a store that is not this tenant's alone to move: other tenants'
    rows in it (first: no stopping of anything clears it), other processes holding it."""
    refuse_if_shared(ctx)
    refuse_if_held(ctx)


STORE_SUFFIXES = ("", "-wal", "-shm")


def backup_stamp(db: str) -> str:
    """The time in a backup's name: kint v0.3.0's `YYYYmmdd-HHMMSS` (09-cli.md, "kint
    pull"), in UTC, as the worker's clock has no user's time zone. A second discard within
    the same second gets `-2`, `-3`, ...: a rename onto an earlier backup would replace it,
    losing the rows the first discard set aside."""
    base = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    stamp, n = base, 1
    while any(Path(f"{db}.kint-backup-{stamp}{suffix}").exists()
              for suffix in STORE_SUFFIXES):
        n += 1
        stamp = f"{base}-{n}"
    return stamp


def discard_local(ctx: SpaceContext,
                  naming: Callable[[str], None] | None = None) -> list[str]:
    """Move the store and its -wal and -shm aside to timestamped `.kint-backup-` copies.
    Refused (BUSY, nothing moved) while the store holds another tenant's rows or another
    process has it open. `naming` is told the store's copy before anything is moved (the
    pull's kept notice names it: settled_notice.moving_aside), so a kill between the
    rename and what the caller writes after it leaves that copy named.

    The -wal and -shm keep SQLite's names beside the moved store (`memory.db.kint-backup-
    STAMP-wal`), where v0.3.0 gave each file the suffix (`memory.db-wal.kint-backup-STAMP`):
    SQLite finds a database's WAL by that name, so a backup whose WAL could not be folded
    into it still opens with the writes that WAL held."""
    refuse_to_move(ctx)
    db = ctx.config.db
    fold_wal(db)
    moved = []
    stamp = backup_stamp(db)
    if naming is not None and Path(db).exists():
        naming(f"{db}.kint-backup-{stamp}")
    # The store last: at no point is its WAL left beside a store that is gone. With no
    # store, a -wal or -shm is a killed discard's leftover, moved aside all the same.
    for suffix in ("-wal", "-shm", ""):
        src = Path(db + suffix)
        if src.exists():
            dst = Path(f"{db}.kint-backup-{stamp}{suffix}")
            shutil.move(src, dst)
            moved.append(str(dst))
    return sorted(moved, key=_store_first)


def discard_released(ctx: SpaceContext,
                     naming: Callable[[str], None] | None = None) -> list[str]:
    """`discard_local` with the space's Sibyl client closed until the store is moved: a
    verify reading through it is waited for, and one asked meanwhile waits, then finds the
    store gone (shared_client.py), never its connection closed under it."""
    with ctx.store_released("pull --discard-local"):
        return discard_local(ctx, naming)


def fold_wal(db: str) -> None:
    """Checkpoint the store's WAL into it and close it, so SQLite deletes the -wal and -shm
    and the store is one file to move. Only once nothing else holds the store
    (`refuse_to_move`). A store SQLite cannot open or checkpoint is left as it is, with a
    warning: its -wal and -shm are then moved before it."""
    if not (Path(db).exists() and any(Path(db + s).exists() for s in ("-wal", "-shm"))):
        return
    if not _wal_pair(db):
        log.warning("pull: the store or its -wal is not what SQLite writes in WAL mode; "
                    "they are moved aside as they are")
        return
    try:
        conn = sqlite3.connect(f"file:{quote(db)}?mode=rw", uri=True, timeout=5)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as err:
        log.warning("pull: could not fold the store's WAL into it before moving it aside "
                    "(%s); the -wal and -shm are moved with it", err)


SQLITE_MAGIC = b"SQLite format 3\x00"
WAL_MAGICS = (bytes.fromhex("377f0682"), bytes.fromhex("377f0683"))
WAL_HEADER_LEN = 32


def _wal_pair(db: str) -> bool:
    """Whether the store is an SQLite database in WAL mode (header bytes 18 and 19 both 2)
    and its -wal, when there, is empty or starts with a WAL header. Only such a pair is opened to be
    checkpointed: SQLite deletes on close a -wal it cannot make sense of, and a discard
    deletes nothing."""
    try:
        with open(db, "rb") as fh:
            head = fh.read(20)
        wal = Path(db + "-wal")
        wal_head = b""
        if wal.exists():
            with open(wal, "rb") as fh:
                wal_head = fh.read(WAL_HEADER_LEN)
    except OSError:
        return False
    if len(head) < 20 or head[:16] != SQLITE_MAGIC or head[18:20] != b"\x02\x02":
        return False
    return (not wal.exists() or not wal_head
            or (len(wal_head) == WAL_HEADER_LEN and wal_head[:4] in WAL_MAGICS))


def _store_first(path: str) -> tuple[str, int]:
    """Order for the list a discard answers: each backup's store, then its -wal, -shm."""
    for rank, suffix in ((1, "-wal"), (2, "-shm")):
        if path.endswith(suffix):
            return path[:-len(suffix)], rank
    return path, 0


def sibyl_takes_writes() -> None:
    """Sibyl's own account gate, asked for a write before a discarding pull moves the store
    aside: the same check (and the same refusal, SIBYL_ERROR "needs an account") every
    write through Sibyl makes first. It does not see a store Sibyl would refuse for its size
    (the cap is measured on the restored store, which does not exist yet)."""
    account_gate().require("set_entity")
