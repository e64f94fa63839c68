"""Pull's fork step (pull.py, step 2): what the store holds, and what the pull keeps of it,
decided before the walk so a fork refuses before anything is fetched or written.

Four cases, each with its own answer:

- a discarding pull (`--discard-local`): the store will be moved aside after the walk
  (discard.py); nothing moves before it can refuse, so only the checks run here, and the
  pull applies onto an empty mirror;
- a lost store (changes.store_lost: it holds none of the anchored rows and forgot none):
  restored from the first epoch, keeping the rows the tenant wrote into it since (never
  anchored) unless an epoch would overwrite one; nothing is moved aside (the file may
  hold other tenants' rows);
- a lost store's restore a killed pull began (lost_restore.py): the rows it recorded
  keeping, unchanged, are its own, and the pull resumes it;
- otherwise the store must hold nothing the chain never saw once the head has moved,
  beyond what an interrupted epoch (apply_journal.py) explains: any other change is a FORK.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kint.chain.anchor import Head
from kint.protocol import ErrorCode, ProtocolError
from kint.rows.canon import Row, canonical_id
from kint.tenant_worker import apply_journal, lost_restore
from kint.tenant_worker.changes import diff, store_lost
from kint.tenant_worker.discard import refuse_to_move, sibyl_takes_writes
from kint.tenant_worker.epoch_walk import Fetched
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import Mirror, empty_mirror, unsaved_empty_mirror
from kint.tenant_worker.store import archived_entities

log = logging.getLogger("kint.worker")

# A pull over a store that holds rows while this machine has no mirror, in v0.3.0's words
# (14-agents.md, "Common errors and fixes"; 03-new-machine.md, "The fork check"), with
# the row count and the tenant filled in; docs/commands.md quotes it.
NO_MIRROR_FORK = ("the local store already holds {rows} rows for tenant {tenant} and this "
                  "machine has no record of what the chain last saw. Refusing to merge "
                  "blindly")


@dataclass
class LocalState:
    """What the pull starts from."""

    mirror: Mirror  # the epochs apply onto it: seq 0, unsaved, for a restore from the first
    from_first: bool  # a discarding pull or a lost store: restored from the first epoch
    present: dict[str, Row] = field(default_factory=dict)  # what the store holds
    # The never-anchored rows the restore keeps (a lost store's, or those a killed restore
    # recorded keeping when `resumed`), checked against every epoch to apply.
    kept: dict[str, Row] = field(default_factory=dict)
    resumed: bool = False

    def refuse_overwriting(self, todo: list[Fetched], db: str) -> None:
        """A restore keeps the rows this tenant wrote into a lost store since (never
        anchored), and refuses FORK, before anything is written, when an epoch to apply
        would overwrite or delete one of them: pull never merges blindly. A resumed
        restore's kept rows are checked again against the epochs still to apply."""
        if not self.kept:
            return
        touched: set[str] = set()
        for f in todo:
            if f.opened is None:
                break
            touched.update(w.canonical_id for w in f.opened.plaintext.rows)
            touched.update(canonical_id(*d) for d in f.opened.plaintext.deleted)
        kept = self.kept
        clash = sorted(cid for cid in kept if cid in touched)
        if not clash:
            return
        named = ", ".join(kept[cid].label() for cid in clash[:5])
        more = f" and {len(clash) - 5} more" if len(clash) > 5 else ""
        where = (f"the restore of the store {db} was interrupted; it keeps {len(kept)} "
                 f"row(s) written since the loss that were never anchored" if self.resumed
                 else f"the store {db} holds none of this tenant's anchored rows, and "
                 f"{len(kept)} row(s) that were never anchored")
        raise ProtocolError(
            ErrorCode.FORK,
            f"{where}; restoring the anchored rows would overwrite or "
            f"delete {len(clash)} of them ({named}{more}). Refusing to merge blindly; nothing "
            f"was written",
            "save what you need out of the store (`kint export`), then `kint pull "
            "--discard-local` moves it aside and restores the anchored state (on a store "
            "other tenants share, remove those rows through Sibyl and `kint pull` again)")


def _archived(ctx: SpaceContext) -> set[tuple[str, str]]:
    """The store's archived entities (store.archived_entities), read through this thread's
    connection. A lock another process holds raises StoreLocked (BUSY, state_health.guarded),
    rather than restore rows the tenant forgot: the pull can be run again once it is let go.
    Any other failed read raises StoreUnreadable, refused naming the store."""
    with ctx.reading() as conn:
        return archived_entities(conn, ctx.config.tenant, ctx.config.db)


def local_state(ctx: SpaceContext, head: Head, discard: bool) -> LocalState:
    """The fork step: refuses FORK (or, discarding, a store it may not move), else says
    what the pull starts from. Saves an empty mirror only for a machine that never pulled."""
    cfg, state = ctx.config, ctx.state
    mirror = state.mirror()
    if discard:  # moved aside after the walk (pull.py): nothing moves before it can refuse
        refuse_to_move(ctx)
        sibyl_takes_writes()
        return LocalState(unsaved_empty_mirror(state), from_first=True)
    rows = ctx.store_rows()  # None: the store does not exist
    if store_lost(mirror, rows, lambda: _archived(ctx)):
        assert mirror is not None
        present = {r.canonical_id: r for r in rows or []}  # never anchored: kept as they are
        log.warning("pull: %s; restoring them from the first epoch",
                    _lost_words(cfg.db, cfg.tenant, len(mirror.rows), rows))
        return LocalState(unsaved_empty_mirror(state), from_first=True, present=present,
                          kept=dict(present))
    restoring = lost_restore.kept(state)
    rows = rows or []
    present = {r.canonical_id: r for r in rows}
    if mirror is None and rows:
        raise ProtocolError(ErrorCode.FORK,
                            NO_MIRROR_FORK.format(rows=len(rows), tenant=cfg.tenant),
                            "`kint pull --discard-local` moves the store aside and restores "
                            "from the chain")
    local = diff(mirror, rows) if mirror is not None else []
    interrupted = apply_journal.interrupted(state) if mirror is not None else None
    if interrupted is not None and mirror is not None and interrupted.seq <= mirror.head.seq:
        apply_journal.settle_recorded(state, mirror)
        interrupted = None
    if interrupted is not None and local:
        local = apply_journal.unexplained(local, interrupted, mirror)
        if not local:
            log.info("pull: finishing epoch %d, which an interrupted pull had begun to "
                     "apply", interrupted.seq)
    kept: dict[str, Row] = {}  # a lost store's restore a killed pull began: the rows it kept
    if restoring is not None and local and mirror is not None:
        own, local = lost_restore.its_own(local, restoring)
        if own and not local:
            log.info("pull: resuming a lost store's restore after epoch %d, keeping the "
                     "%d row(s) written since the loss", mirror.head.seq, len(own))
            kept = {r.canonical_id: r for r in own}
    moved = mirror is None or (head.seq, head.digest) != (mirror.head.seq, mirror.head.digest)
    if local and moved:
        raise ProtocolError(
            ErrorCode.FORK,
            f"the chain moved to seq {head.seq} and this store has {len(local.rows)} "
            f"changed and {len(local.deleted)} deleted rows that were never anchored: a "
            f"fork. Pulling would lose them, and pushing is impossible because the head "
            f"moved",
            "save what you need out of the store, then `kint pull --discard-local` moves "
            "it aside (keeping a backup) and restores the anchored state")
    return LocalState(mirror if mirror is not None else empty_mirror(state), from_first=False,
                      present=present, kept=kept, resumed=bool(kept))


def _lost_words(db: str, tenant: str, anchored: int, rows: list[Row] | None) -> str:
    """How the log names a lost store: gone, or there without any of the tenant's rows."""
    where = (f"the store {db} does not exist" if rows is None else
             f"the store {db} holds none of tenant {tenant}'s rows anchored from it")
    return f"{where} ({anchored} on chain)"
