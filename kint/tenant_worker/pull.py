"""Pull (seed 001, "Restore: pull, through Sibyl's write methods"): bring the chain's epochs
into this machine's store, checking each before anything is written.

The checks, each before the next: freshness (the watermark is a floor; a cold start needs
two endpoints that agree, cold_start.py), fork (local rows the chain never saw are never merged blindly),
the walk (head back through each event's prevBlock, one exact-block log query per epoch,
stopping at the newest snapshot unless `full`), then per epoch: prev continuity, the
ciphertext's keccak against the event digest, the header, the data key, the GCM tag, and
the plaintext's agreement with chain and header. Only when every epoch to apply has passed
are rows replayed through Sibyl's own write methods, re-read, and recorded one epoch at a
time.

A store that lost this tenant's rows (it holds none of the anchored ones and forgot none
of them: it does not exist, or another tenant's pull remade a file they share) is
restored from seq 0, keeping the rows this tenant wrote into it since unless an epoch
would overwrite one (FORK).

`discard_local` moves the store aside only after all of that could refuse (and never while
it holds another tenant's rows, or another process holds it open): the walk from
seq 0 has fetched and checked every epoch the restore needs, and Sibyl's account gate has
said it takes writes. A chain that does not answer, or a Sibyl without an account, leaves
the store where it was rather than leaving the agent with no memory until a later pull.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from eth_hash.auto import keccak

from kint.chain.anchor import Anchor, CalldataRefused, EpochLog, Head
from kint.chain.rpc import RpcUnavailable
from kint.custody import errors as custody_errors
from kint.epochs.envelope import Header, Opened, open_epoch, parse_header
from kint.epochs.errors import Disagreement, HeaderError, Malformed, Unopenable
from kint.epochs.plaintext import Plaintext
from kint.protocol import ErrorCode, ProtocolError
from kint.rows.canon import Row, canonical_id
from kint.rows.merkle import merkle_root
from kint.tenant_worker import apply_journal, lost_restore
from kint.tenant_worker.cache_check import rebuilt_envelope
from kint.tenant_worker.changes import diff, store_lost
from kint.tenant_worker.cold_start import cold_start, stale
from kint.tenant_worker.custody_errors import as_protocol_error
from kint.tenant_worker.data_key import held_keys, renew
from kint.tenant_worker.discard import discard_local, refuse_to_move, sibyl_takes_writes
from kint.tenant_worker.head_lock import head_op
from kint.tenant_worker.pending import resolve_pending
from kint.tenant_worker.connected import connected, sender_for
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import (
    EpochMeta,
    EpochRejected,
    Mirror,
    cache_epoch,
    empty_mirror,
    record_epoch,
    unsaved_empty_mirror,
)
from kint.tenant_worker.store import archived_entities

log = logging.getLogger("kint.worker")


@dataclass
class Fetched:
    log: EpochLog
    envelope: bytes
    header: Header | None  # None: the bytes do not parse as a kint header
    opened: Opened | None  # None: this machine cannot open it (`reason` says why)
    reason: str | None = None
    # True when nobody can walk past it (it opened and contradicts itself, or is garbage
    # inside a valid seal); False for an epoch a later snapshot can supersede.
    final: bool = False

    @property
    def snapshot(self) -> bool:
        return self.opened is not None and self.opened.plaintext.snapshot

    def entry(self, **extra: Any) -> dict[str, Any]:
        return {"seq": self.log.seq, "block": self.log.block, "tx": self.log.tx_hash,
                "reason": self.reason, **extra}


def pull(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    try:
        with head_op(ctx):
            return _pull(ctx, bool(args.get("full")), bool(args.get("discard_local")))
    except RpcUnavailable as err:
        raise ProtocolError(ErrorCode.RPC_UNAVAILABLE, str(err)) from None
    except custody_errors.CustodyError as err:
        raise as_protocol_error(err) from None


def _pull(ctx: SpaceContext, full: bool, discard: bool) -> dict[str, Any]:
    cfg, state = ctx.config, ctx.state
    chain, enrolment = connected(ctx)
    held = held_keys(ctx)
    owner = enrolment.owner
    anchor = Anchor(chain, ctx.tracker)
    if state.files["pending"].exists():  # the session key's unlock (a scrypt) only then
        resolve_pending(ctx, anchor, sender_for(ctx, anchor), owner)
    head = anchor.head(owner, cfg.space_id)

    # 1. Freshness.
    mark = state.watermark()
    agreed, single = None, None
    if mark is not None:
        if head.seq < mark.seq:
            raise stale(f"the endpoint's head (seq {head.seq}) is older than the newest this "
                         f"machine saw (seq {mark.seq}): a stale or lying RPC, refusing")
        if head.seq == mark.seq and head.digest != mark.digest:
            raise stale(f"the endpoint's head at seq {head.seq} has digest {head.digest[:12]}, "
                         f"not the {mark.digest[:12]} this machine saw: a stale or lying RPC, "
                         f"refusing")
    else:
        agreed, single = cold_start(ctx, chain, owner, head)

    # 2. Fork.
    mirror = state.mirror()
    backups: list[str] = []
    present: dict[str, Row] = {}  # what the store holds, carried epoch to epoch
    written: dict[str, int] = {}  # the rows this pull wrote or deleted, and the epoch that did
    rows = None if discard else ctx.store_rows()  # None: the store does not exist
    # Lost (changes.store_lost): restored from seq 0, as a discarding pull does, with
    # nothing to move aside (the file may hold other tenants' rows).
    lost = not discard and store_lost(
        mirror, rows, lambda: archived_entities(ctx.ro_connection(), cfg.tenant))
    restoring = None if discard or lost else lost_restore.kept(state)
    # A lost store's restore a killed pull began: the rows it kept, when this pull resumes it.
    resuming: dict[str, Row] = {}
    if discard:  # moved aside after the walk, below: nothing moves before it can refuse
        refuse_to_move(ctx)
        sibyl_takes_writes()
        mirror = unsaved_empty_mirror(state)  # what the emptied store will hold: seq 0
    elif lost:
        assert mirror is not None
        present = {r.canonical_id: r for r in rows or []}  # never anchored: kept as they are
        log.warning("pull: %s; restoring them from the first epoch",
                    _lost_words(cfg.db, cfg.tenant, len(mirror.rows), rows))
        mirror = unsaved_empty_mirror(state)
    else:
        rows = rows or []
        present = {r.canonical_id: r for r in rows}
        if mirror is None and rows:
            raise ProtocolError(ErrorCode.FORK, "the store already holds rows and this machine "
                                "has no mirror of what the chain last saw. Refusing to merge "
                                "blindly",  # v0.3.0's words (03-new-machine.md, "The fork check")
                                "`kint pull --discard-local` moves the store aside and restores "
                                "from the chain")
        local = diff(mirror, rows) if mirror is not None else []
        resumed = apply_journal.interrupted(state) if mirror is not None else None
        if resumed is not None and mirror is not None and resumed.seq <= mirror.head.seq:
            apply_journal.settle_recorded(state, mirror)
            resumed = None
        if resumed is not None and local:
            local = apply_journal.unexplained(local, resumed, mirror)
            if not local:
                log.info("pull: finishing epoch %d, which an interrupted pull had begun to "
                         "apply", resumed.seq)
        if restoring is not None and local and mirror is not None:
            kept, local = lost_restore.its_own(local, restoring)
            if kept and not local:
                log.info("pull: resuming a lost store's restore after epoch %d, keeping the "
                         "%d row(s) written since the loss", mirror.head.seq, len(kept))
                resuming = {r.canonical_id: r for r in kept}
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
    if mirror is None:
        mirror = empty_mirror(state)
    base = mirror.head.seq

    # 3. Walk, and 4. check every epoch before anything is written.
    fetched = _walk(ctx, anchor, owner, head, base, full, held)
    fetched.reverse()  # oldest first
    start = 0
    for i, f in enumerate(fetched):  # resume at the newest snapshot that opens past a gap
        if f.opened is None and not f.final:
            later = [j for j in range(i + 1, len(fetched)) if fetched[j].snapshot]
            if later:
                start = later[-1]
    skipped = [f.entry(superseded_by=fetched[start].log.seq)
               for f in fetched[:start] if f.opened is None]
    todo = fetched[start:]
    _check_continuity(todo, mirror.head.digest)
    if lost and present:
        _refuse_overwriting(todo, present, cfg.db)
    if resuming:
        _refuse_overwriting(todo, resuming, cfg.db, resumed=True)
    if discard or lost:
        if discard:
            backups = discard_local(ctx)
        if lost and present:  # before the empty mirror: a pull killed after it resumes
            lost_restore.begin(state, present)
        else:
            lost_restore.end(state)
        apply_journal.end(state)  # the store it described is the one moved aside or gone
        mirror = empty_mirror(state)
    gap: list[int] = []
    applied: list[int] = []
    applied_epochs: list[dict[str, int]] = []  # what each carried, for join's lines
    warnings: list[str] = []
    for number, f in enumerate(todo, 1):
        ctx.progress = f"pull: applying epoch {f.log.seq} ({number} of {len(todo)})"
        if f.opened is None:
            gap = [x.log.seq for x in fetched if x.log.seq >= f.log.seq]
            skipped.append(f.entry())
            break
        plaintext = f.opened.plaintext
        apply_journal.begin(state, f.opened.payload)
        warnings += _replay(ctx, mirror, plaintext, present, written)
        try:
            mirror = record_epoch(state, f.opened.raw, plaintext, f.envelope, _meta(f),
                                  payload=f.opened.payload)
        except EpochRejected as err:
            raise stale(str(err)) from None
        apply_journal.end(state)
        applied.append(f.log.seq)
        applied_epochs.append({"seq": f.log.seq, "block": f.log.block,
                               "rows": len(plaintext.rows), "deletions": len(plaintext.deleted)})
    # The root is checked once, for the newest epoch applied: building the tree after every
    # epoch of a long restore cost more than the replay's own reads, and what verify trusts
    # is the head's root. Each epoch's content is already authenticated (AES-GCM under the
    # data key, its digest chained on chain).
    if applied and not mirror.root_matches:
        warnings.append(f"epoch {applied[-1]}: the replayed rows do not reproduce its rows root")
    if mirror.skipped != gap:
        mirror.skipped = gap
        state.save_mirror(mirror)
    if (mirror.head.seq, mirror.head.digest) == (head.seq, head.digest):
        lost_restore.end(state)  # a lost store's restore, if one ran, is done
    backfilled, closed = _backfill(ctx, anchor, owner, head, held) if full else ([], [])
    rows = ctx.store_rows() or []
    warnings += _not_back(mirror, rows, written)
    if ctx.drift.active:
        ctx.drift.reset(rows)
    ordered = sorted(rows, key=lambda r: r.canonical_id.encode("utf-8"))
    store_root = merkle_root([r.leaf for r in ordered]).hex()
    matches = store_root == mirror.anchored_root
    report = ("store root matches the anchored root" if matches else
              "store root does not match the anchored root (the store holds unanchored changes)")
    if not gap:
        renew(ctx, next(iter(held.values())))
    result = {"applied": applied, "applied_epochs": applied_epochs,
              "head": {"seq": mirror.head.seq, "block": mirror.head.block,
                       "digest": mirror.head.digest},
              "chain_head": {"seq": head.seq, "block": head.block, "digest": head.digest},
              "gap": gap, "skipped": skipped, "closed": closed, "warnings": warnings,
              "backups": backups, "backfilled": backfilled, "rows_total": len(rows),
              "store_root_matches": matches, "rpcs_agreed": agreed, "single_rpc": single,
              "report": report}
    if gap:
        result["message"] = (f"stopped at epoch {gap[0]}: {skipped[-1]['reason']}; the mirror "
                             f"stays at epoch {mirror.head.seq}, and push and verify refuse "
                             f"until it applies")
    elif not applied:
        result["message"] = (f"already at the chain head (epoch {mirror.head.seq})"
                             + _older_epochs(backfilled, closed))
    else:
        # kint v0.3.0's summary line (03-new-machine.md, "What it prints"), word for word.
        result["message"] = (f"restored {len(applied)} epoch(s), {len(rows)} rows; head seq "
                             f"{mirror.head.seq} at block {mirror.head.block}; {report}"
                             + _older_epochs(backfilled, closed))
    return result


def _lost_words(db: str, tenant: str, anchored: int, rows: list[Row] | None) -> str:
    """How the log names a lost store: gone, or there without any of the tenant's rows."""
    where = (f"the store {db} does not exist" if rows is None else
             f"the store {db} holds none of tenant {tenant}'s rows anchored from it")
    return f"{where} ({anchored} on chain)"


def _refuse_overwriting(todo: list[Fetched], present: dict[str, Row], db: str, *,
                        resumed: bool = False) -> None:
    """A lost store's restore keeps the rows this tenant wrote into it since (never
    anchored), and refuses FORK, before anything is written, when an epoch to apply would
    overwrite or delete one of them: pull never merges blindly. `resumed`: the restore a
    killed pull began, its kept rows checked again against the epochs still to apply."""
    touched: set[str] = set()
    for f in todo:
        if f.opened is None:
            break
        touched.update(w.canonical_id for w in f.opened.plaintext.rows)
        touched.update(canonical_id(*d) for d in f.opened.plaintext.deleted)
    clash = sorted(cid for cid in present if cid in touched)
    if not clash:
        return
    named = ", ".join(present[cid].label() for cid in clash[:5])
    more = f" and {len(clash) - 5} more" if len(clash) > 5 else ""
    where = (f"the restore of the store {db} was interrupted; it keeps {len(present)} "
             f"row(s) written since the loss that were never anchored" if resumed else
             f"the store {db} holds none of this tenant's anchored rows, and {len(present)} "
             f"row(s) that were never anchored")
    raise ProtocolError(
        ErrorCode.FORK,
        f"{where}; restoring the anchored rows would overwrite or "
        f"delete {len(clash)} of them ({named}{more}). Refusing to merge blindly; nothing "
        f"was written",
        "save what you need out of the store (`kint export`), then `kint pull "
        "--discard-local` moves it aside and restores the anchored state (on a store "
        "other tenants share, remove those rows through Sibyl and `kint pull` again)")


def _older_epochs(backfilled: list[int], closed: list[dict[str, Any]]) -> str:
    """What `--full` did beyond the restore, in v0.3.0's words: the epochs it cached for
    history, and those sealed under a retired data key that stay closed."""
    tail = ""
    if backfilled:
        tail += f"; {len(backfilled)} older epoch(s) cached for history"
    if closed:
        tail += (f"; {len(closed)} older epoch(s) sealed under a retired key stay closed on "
                 f"this machine")
    return tail


def _check_continuity(todo: list[Fetched], prev_digest: str) -> None:
    """Each epoch to apply follows the one before it (a snapshot stands alone), checked
    for them all before the first is written, and before a discarding pull moves the store."""
    for f in todo:
        if f.opened is None:  # the pull stops there
            return
        if not f.opened.plaintext.snapshot and f.log.prev != prev_digest:
            raise stale(f"epoch {f.log.seq} does not follow the last applied epoch "
                         f"({prev_digest[:12]})")
        prev_digest = f.log.digest


def _meta(f: Fetched) -> EpochMeta:
    assert f.opened is not None
    return EpochMeta(seq=f.log.seq, digest=f.log.digest, prev=f.log.prev, block=f.log.block,
                     tx=f.log.tx_hash, bucket=f.opened.header.bucket,
                     rows_root=f.opened.plaintext.rows_root, writer=f.log.writer)


def _fetch(ctx: SpaceContext, anchor: Anchor, owner: str, ev: EpochLog,
           held: dict[bytes, bytes]) -> Fetched:
    """The epoch's ciphertext (rebuilt from the cache when it hashes to the event's digest,
    else from the push calldata, checked), opened with the key its header names."""
    envelope = rebuilt_envelope(ctx.state, ev.seq, held, owner)
    if envelope is not None and keccak(envelope).hex() != ev.digest:
        envelope = None
    if envelope is None:
        try:
            envelope = anchor.push_calldata(ev.tx_hash, owner, ctx.config.space_id, ev.prev,
                                            ev.digest)
        except CalldataRefused as err:
            raise stale(f"epoch {ev.seq}: {err}") from None
    try:
        header = parse_header(envelope)
    except HeaderError as err:
        return Fetched(ev, envelope, None, None, f"not a kint epoch ({err})")
    key = held.get(header.dek_id)
    if key is None:
        return Fetched(ev, envelope, header, None,
                       "sealed under a data key this machine does not hold (rotated)")
    try:
        opened = open_epoch(envelope, dek=key, owner=owner, space=ctx.config.space_id,
                            seq=ev.seq, prev=ev.prev)
    except Unopenable as err:
        return Fetched(ev, envelope, header, None, str(err))
    except Disagreement as err:
        if err.field == "snapshot":
            return Fetched(ev, envelope, header, None, str(err), final=True)
        raise stale(f"epoch {ev.seq}: {err}") from None
    except Malformed as err:
        return Fetched(ev, envelope, header, None, f"its content is not an epoch ({err})",
                       final=True)
    return Fetched(ev, envelope, header, opened)


def _walk(ctx: SpaceContext, anchor: Anchor, owner: str, head: Head, base: int, full: bool,
          held: dict[bytes, bytes]) -> list[Fetched]:
    """Newest first, from the head down to the epoch after `base` (or the newest snapshot
    that opens, unless `full`)."""
    out: list[Fetched] = []
    seq, block, expect = head.seq, head.block, head.digest
    while seq > base:
        ctx.progress = f"pull: checking epoch {seq} (walking back from {head.seq})"
        ev = anchor.epoch_log(owner, ctx.config.space_id, seq, block)
        if ev is None:
            raise stale(f"no Epoch event for seq {seq} at block {block}; the RPC may be "
                         f"pruned or lying")
        if ev.digest != expect:
            raise stale(f"epoch {seq}: its event digest is not the one the next epoch chains on")
        f = _fetch(ctx, anchor, owner, ev, held)
        out.append(f)
        if f.snapshot and not full:
            if seq > base + 1:  # v0.3.0's log line (03-new-machine.md, "Snapshots and --full")
                log.info("pull: starting at snapshot epoch %d; the epochs before it are not "
                         "needed to restore (`kint pull --full` walks them for the older "
                         "versions)", seq)
            break
        if f.opened is None and f.header is not None and f.header.snapshot and not full:
            log.warning("pull: epoch %d claims to be a snapshot but cannot be applied; walking "
                        "the full history instead", seq)
        seq, block, expect = seq - 1, ev.prev_block, ev.prev
    return out


def _backfill(ctx: SpaceContext, anchor: Anchor, owner: str, head: Head,
              held: dict[bytes, bytes]) -> tuple[list[int], list[dict[str, Any]]]:
    """`--full`: walk from the head to epoch 1 and cache, for history, every epoch this
    machine has not decrypted (those a snapshot let an earlier pull skip). Returns the seqs
    cached, and the epochs it could not open (CLOSED)."""
    cached = set(ctx.state.cached_seqs())
    added: list[int] = []
    closed: list[dict[str, Any]] = []
    seq, block, expect = head.seq, head.block, head.digest
    while seq >= 1:
        ev = anchor.epoch_log(owner, ctx.config.space_id, seq, block)
        if ev is None or ev.digest != expect:
            raise stale(f"epoch {seq}: no matching Epoch event at block {block}")
        if seq not in cached:
            f = _fetch(ctx, anchor, owner, ev, held)
            if f.opened is not None:
                cache_epoch(ctx.state, f.opened.payload, f.envelope, _meta(f))
                added.append(seq)
            else:
                closed.append(f.entry())
        seq, block, expect = seq - 1, ev.prev_block, ev.prev
    return sorted(added), closed


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _replay(ctx: SpaceContext, mirror: Mirror, plaintext: Plaintext,
            present: dict[str, Row], written: dict[str, int]) -> list[str]:
    """Write one epoch's rows through Sibyl's own write methods. Rows the store already
    holds byte for byte are not written again.

    `present` is what the store holds, by canonical id (a row's leaf is worked out only
    when an epoch carries a row of the same id); it is brought up to date here for the
    next epoch. The ids written go into `written`, with this epoch's seq: the pull reads the
    store back once, when it
    ends (one export, which the store root needs anyway), and names any written row that
    did not come back byte for byte. Reading each row back after each epoch cost more than
    Sibyl's own writes on a long restore."""
    client = ctx.client()
    warnings: list[str] = []
    if plaintext.snapshot:  # the whole state: what it does not carry is gone
        carried = {r.canonical_id for r in plaintext.rows}
        deletions = [m.deletion for cid, m in mirror.rows.items() if cid not in carried]
    else:
        deletions = list(plaintext.deleted)
    for tier, category, key in deletions:
        cid = canonical_id(tier, category, key)
        if present.get(cid) is None:
            continue
        if tier == "entity":
            client.delete_entity(category, key)
            present.pop(cid, None)
            written[cid] = plaintext.seq
        else:  # v0.3.0's words (03-new-machine.md, "Replay through Sibyl's write methods")
            warnings.append(f"epoch {plaintext.seq}: {tier} {key}: deleted on chain; no SDK "
                            f"delete for this tier, so it stays in the store")
    for wire in plaintext.rows:
        row = wire.to_row()
        cid = row.canonical_id
        held = present.get(cid)
        if held is not None and held.leaf == row.leaf:
            continue
        f = row.fields
        if row.tier == "entity":
            client.set_entity(row.category, row.key, _loads(f.get("body")),
                              status=f.get("status"))
        elif row.tier == "state":
            client.set_state(row.key, _loads(f.get("body")))
        elif row.tier == "reference":
            client.set_reference(row.key, f.get("body"), metadata=_loads(f.get("metadata")))
        elif row.tier == "journal":
            client.write_event(ts=f.get("ts"), evaluated=_loads(f.get("evaluated")),
                               acted=_loads(f.get("acted")), forward=_loads(f.get("forward")),
                               extra=_loads(f.get("extra")))
        present[cid] = row
        written[cid] = plaintext.seq
    return warnings


def _not_back(mirror: Mirror, rows: list[Row], written: dict[str, int]) -> list[str]:
    """The rows this pull wrote that the store does not hold as anchored, each named with
    the epoch that last wrote it, in v0.3.0's words (03-new-machine.md, step 8)."""
    stored = {r.canonical_id: r for r in rows if r.canonical_id in written}
    out = []
    for cid in sorted(written):
        anchored = mirror.rows.get(cid)
        back = stored.get(cid)
        epoch = f"epoch {written[cid]}"
        if anchored is None:
            if back is not None and back.tier == "entity":
                out.append(f"{epoch}: {back.label()}: deleted on chain but still in the store")
        elif back is None:
            out.append(f"{epoch}: {anchored.label()}: row missing after replay")
        elif back.leaf != anchored.leaf:
            out.append(f"{epoch}: {anchored.label()}: stored text differs from the anchored "
                       f"leaf after replay")
    return out
