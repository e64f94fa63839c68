"""Settling a rotation of the data key that a killed worker left (the journal:
`kint.custody.rekey_journal`; 05-keys.md, "Rotate the data key").

A rekey writes its journal (the new key, sealed under the local secret, and its wraps)
before its snapshot's transaction is signed, and its push journal (`pending.py`) holds the
snapshot. Once the push journal is settled against the chain head (`resolve_pending`: the
snapshot recorded, sent again, or dropped), this machine's recorded epochs say what
happened to the rotation:

- an epoch recorded under the new key's dek_id: the rotation landed. Its last step is done
  now, exactly as rekey does it: the wraps, the key cache, the recovery file, then the
  enrolment (05-keys.md, "The recovery code": a rekey writes the new code);
- none: nothing was anchored under the new key, so the old key stays in force and the
  journal goes. A second `kint rekey` starts afresh.

Either way the journal is removed last, so a kill during the settlement settles it again.
It runs when a worker starts, and before a push, pull, rekey or recovery-code reads a key,
each under the head lock: no epoch is ever sealed under the old key on top of the
rotation's snapshot, and no pull meets the snapshot without the key that opens it.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from kint.chain.anchor import Anchor
from kint.chain.rpc import RpcUnavailable
from kint.custody.errors import CustodyError
from kint.custody.recovery_code import write_recovery_file
from kint.custody.rekey_journal import (RekeyJournal, load_rekey_journal,
                                        rekey_journal_path, remove_rekey_journal)
from kint.custody.wraps import Wrap, read_wraps, write_wraps
from kint.epochs.errors import EpochError
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.connected import connected, sender_for
from kint.tenant_worker.data_key import keep_rotated_key
from kint.tenant_worker.enrolment import save_enrolment
from kint.tenant_worker import settled_notice
from kint.tenant_worker.settled_notice import Found
from kint.tenant_worker.pending import resolve_pending
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.state_format import CorruptStateFile

log = logging.getLogger("kint.worker")

COMPLETED = "completed"
ABANDONED = "abandoned"
Outcome = Literal["completed", "abandoned"]


def rekey_in_progress(ctx: SpaceContext) -> bool:
    return rekey_journal_path(ctx.config.home, ctx.config.space_id).exists()


def settle_rekey(ctx: SpaceContext) -> Outcome | None:
    """Settle the space's rekey journal from this machine's recorded epochs; None when
    there is none, or while a push journal is still unsettled (the caller resolves it
    first: until then, whether the snapshot landed is unknown)."""
    cfg = ctx.config
    if ctx.state.files["pending"].exists():
        return None
    journal = load_rekey_journal(cfg.home, cfg.space_id)
    if journal is None:
        return None
    if _recorded_under(ctx, journal):
        keep_new_key(ctx, journal)
        outcome: Outcome = COMPLETED
    else:
        outcome = ABANDONED
    remove_rekey_journal(cfg.home, cfg.space_id)
    log.info("space %s: an interrupted rekey %s (data key %s -> %s)", cfg.space16,
             "completed" if outcome == COMPLETED else "did not happen; the old key stays",
             journal.old_dek_id.hex(), journal.new_dek_id.hex())
    return outcome


def _recorded_under(ctx: SpaceContext, journal: RekeyJournal) -> bool:
    """Whether an epoch this machine recorded was sealed under the journal's new key,
    looking back from the mirror's head to the first epoch under the old key (the one
    the rotation chained on). The new dek_id is random and was never used before."""
    state = ctx.state
    mirror = state.mirror()
    seq = mirror.head.seq if mirror is not None else 0
    while seq > 0:
        try:
            found = state.meta(seq).parsed_header().dek_id
        except (CorruptStateFile, EpochError) as err:
            # Undecided is not "did not happen": the journal stays, and says why.
            raise ProtocolError(ErrorCode.CORRUPT_STATE, f"an interrupted rekey cannot be "
                                f"settled: epoch {seq} of this machine's cache does not "
                                f"read ({err})", "run `kint doctor`; the rekey journal "
                                "is kept until it can be settled") from None
        if found == journal.new_dek_id:
            return True
        if found == journal.old_dek_id:
            return False
        seq -= 1
    return False


def keep_new_key(ctx: SpaceContext, journal: RekeyJournal) -> None:
    """The rotation's last step (05-keys.md, "Rotate the data key", 9): the wraps (the
    journal's, and any a connect added under the new key meanwhile), the cached key, the
    recovery file, then the enrolment. Each write is whole or absent, and all are
    idempotent, so a kill between them is finished by the next settlement."""
    cfg = ctx.config
    enrolment = ctx.enrolment()
    if enrolment is None:
        raise ProtocolError(ErrorCode.NOT_CONNECTED, "a rekey is to be finished but this "
                            "space has no enrolment", "run `kint connect` first")
    wraps = journal.wraps + _added_since(ctx, journal)
    write_wraps(cfg.home, cfg.space_id, journal.new_dek_id, wraps)
    keep_rotated_key(ctx, journal.dek, journal.key_ttl)
    write_recovery_file(cfg.home, enrolment.owner, cfg.space_id, journal.dek)
    enrolment.key_tags = [w.tag.hex() for w in wraps]
    enrolment.vault_created = True
    save_enrolment(ctx.state.files["enrol"], enrolment)


def _added_since(ctx: SpaceContext, journal: RekeyJournal) -> tuple[Wrap, ...]:
    """The wraps of the new data key this machine's wraps file holds and the journal does
    not: a `kint connect --add-passphrase` run before the settlement (the connect takes the
    new key from the head header) added one, and a key leaves a vault only with a rotation
    (header_wraps.py). Wraps of another data key, or a file that does not read, add none:
    the journal's wraps then replace the file, as rekey's own end does."""
    try:
        local = read_wraps(ctx.config.home, ctx.config.space_id)
    except CustodyError:
        return ()
    if local is None or local.dek_id != journal.new_dek_id:
        return ()
    carried = {w.tag for w in journal.wraps}
    return tuple(w for w in local.wraps if w.tag not in carried)


def settle_journals(ctx: SpaceContext, anchor: Anchor | None = None, owner: str | None = None,
                    *, sender: Any = None, rekey: bool = True,
                    told: bool = True,
                    until: float | None = None) -> tuple[Outcome | None, Found | None]:
    """The one order for every command about to read a key (push, pull, rekey,
    recovery-code, a worker's start), under the head lock: the push journal is resolved
    against the chain first, since only then is it known whether a rotation's snapshot
    landed, and the rekey journal is settled after. The chain, the session key (a scrypt)
    and the sender are reached only when a push journal is there; a caller that already
    has them passes them. `rekey=False` is rekey's own push: the journal then is the
    rotation in progress, not one a killed worker left.
    Returns the rekey's outcome, and what the push journal's settlement found when the
    chain had passed it (overtaken.py) or dropped it (unauthorized_journal.py): this one's,
    or, when the caller tells its user (`told`), an earlier one's no command has said yet
    (a worker's start settlement: it is kept in settled_notice.py until the caller says it
    and calls `settled_notice.said`). The watcher's and the exit push's refusals reach
    nobody (`told=False`): given the kept one, they refused on it and the next command the
    user ran said nothing of it, the notice used up. Theirs is only a finding of this
    settlement, which stays kept for that command. `until` (the exit push's bound, None for
    every other caller): a re-send of the push journal waits for its receipt only until
    then, pending.SettleCut, the journal kept (resolve_pending)."""
    overtaken = None
    if ctx.state.files["pending"].exists():
        if anchor is None or owner is None:
            chain, enrolment = connected(ctx)
            anchor, owner = Anchor(chain, ctx.tracker), enrolment.owner
        if sender is None:
            sender = sender_for(ctx, anchor)
        vault = settled_notice.vault(ctx)  # before the settlement may drop the journal
        overtaken = resolve_pending(ctx, anchor, sender, owner, until)
        if overtaken is not None:
            settled_notice.keep(ctx, overtaken, vault)
    outcome = settle_rekey(ctx) if rekey else None
    if overtaken is None and told:
        overtaken = settled_notice.found(ctx)
    return outcome, overtaken


def settle_now(ctx: SpaceContext) -> tuple[Outcome | None, Found | None]:
    """`settle_journals` for rekey and recovery-code; nothing to do (no RPC) without a
    rekey journal, but to say what an earlier settlement found (settled_notice.py)."""
    if not rekey_in_progress(ctx):
        return None, settled_notice.found(ctx)
    return settle_journals(ctx)


def settle_at_start(ctx: SpaceContext) -> None:
    """A worker that starts with a push journal or a rekey journal settles them at once;
    when the chain cannot be read, the next push, pull or rekey does it. What settling the
    push journal found is kept (settled_notice.py) for the next push (compact's too), pull,
    rekey or recovery-code to say: it was only logged, and that command found nothing left to
    settle and said nothing. A state file that
    does not read (the mirror the push journal is checked against, or the mirror and
    watermark `connected` asks of a space on another contract) is left the same way,
    logged as one line, not as an op that escaped its handler: the next op names it as
    CORRUPT_STATE, and a start has no caller to report it to."""
    from kint.tenant_worker.head_lock import HeadLockBusy, settlement_op

    if not (ctx.state.files["pending"].exists() or rekey_in_progress(ctx)):
        return
    try:
        with settlement_op(ctx):
            settle_journals(ctx, told=False)  # no command to say it: kept for the next
    except (ProtocolError, RpcUnavailable, HeadLockBusy, CustodyError,
            CorruptStateFile) as err:
        log.warning("space %s: an interrupted push or rekey is left for the next push, pull "
                    "or rekey: %s", ctx.config.space16, err)
