"""What a push refuses before it signs anything (push.py), in the order it asks: a vault
created here whose recovery code file is gone, wraps that do not hold the cached data key,
a gap the last pull left, a store another process keeps locked, one kint cannot read, or
one not created over anchored rows, the drift hold (server-side pushes only), a chain head
that is not the mirror's, and a session key the chain does not authorize. None of them
drops anything: the changes stay in the store until a push goes through.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from kint.chain.anchor import Anchor, Head
from kint.chain.calls import SEND_REFUSED, ChainRefused
from kint.custody.data_key import dek_id
from kint.custody.recovery_code import recovery_file_present
from kint.custody.wraps import Wrap, read_wraps
from kint.outcomes import NOTHING_DROPPED
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import (GAP_NEVER_OPENS_HINT, RECOVERY_FILE_AT, ROTATED_GAP_HINT,
                                 SEND_REFUSED_HINT, STORE_LOCKED_PUSH_HINT, STORE_READ_FAILED_HINT,
                                 UNAUTHORIZED_HINT, UNREAD_GAP_HINT, UNREAD_OVER_SKIPPED_HINT,
                                 WRAPS_ROTATED_HINT)
from kint.rows.canon import Row
from kint.tenant_worker.behind_head import behind_refusal
from kint.tenant_worker.data_key import current_data_key
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import Mirror
from kint.tenant_worker.state_health import store_full, store_refusal
from kint.store_denied import DENIED_HINT, denied_message, denied_reason
from kint.tenant_worker.store_errors import (StoreUnreadable, is_damaged, is_locked,
                                             unreadable_text)

log = logging.getLogger("kint.worker")

# How a refusal over the store's read ends: the rows' (`_store_rows`) and the drift check's
# read of the archive (`rows_to_push`) alike.
NOTHING_ANCHORED = "; nothing was anchored"

# `--over-skipped` where the last pull skipped nothing (09-cli.md: honoured only then).
OVER_SKIPPED_UNUSED = ("kint: --over-skipped not used: this machine's last pull applied every "
                       "epoch, so the snapshot chains on the epoch it last saw, as without it")
def key_and_wraps(ctx: SpaceContext,
                  vault_created: bool) -> tuple[bytes, tuple[Wrap, ...]]:
    """The data key and the wraps every epoch's header carries, refused before anything
    is read from the store: a machine that created the vault must still hold its recovery
    code file (else the code that opens it may exist nowhere), and this machine's wraps
    must hold the cached key (else it was rotated elsewhere and the wraps are stale). The
    file's path is the hint's (RECOVERY_FILE_AT, which kint-server carries to an agent),
    not the message's too: it was said twice in one refusal."""
    cfg, state = ctx.config, ctx.state
    if vault_created and not recovery_file_present(cfg.home, cfg.space_id):
        raise ProtocolError(
            ErrorCode.NOT_CONNECTED,
            f"this machine created the vault but its recovery code file is missing or empty; "
            f"{NOTHING_DROPPED}",
            RECOVERY_FILE_AT.format(file=state.files['recovery']))
    key = current_data_key(ctx)
    local = read_wraps(cfg.home, cfg.space_id)
    if local is None or local.dek_id != dek_id(key):
        raise ProtocolError(ErrorCode.NO_DATA_KEY,
                            "this machine's key wraps do not hold the cached data key (the "
                            f"key was rotated on another machine); {NOTHING_DROPPED}",
                            WRAPS_ROTATED_HINT)
    return key, local.wraps


def refuse_gap(mirror: Mirror | None, over: bool) -> None:
    """A machine that could not apply an epoch on its last pull has an incomplete picture
    of the memory, and its diff would anchor over what it never saw: refused GAP, unless
    `over` (a snapshot from compact or rekey with `--over-skipped`) says to anchor over it,
    and the epoch is one the pull read and could not open or apply, the case v0.3.0 scopes
    the override to (06-epochs.md, "An epoch nobody can open"). One it could not read (the
    endpoint would not serve it, served it altered, or its link broke) is the endpoint's
    failure, not the epoch's, and is refused GAP even with `over`."""
    if mirror is None or not mirror.skipped:
        return
    if not over:
        raise ProtocolError(ErrorCode.GAP, f"this machine could not apply epoch(s) "
                            f"{sorted(mirror.skipped)} on its last pull, so its picture of the "
                            f"memory is incomplete; {NOTHING_DROPPED}",  # v0.3.0's words
                            gap_hint(mirror))
    if mirror.unread_gap is not None:
        # 06-epochs.md, "An epoch nobody can open": the override is for an epoch that will
        # never open. One the last pull could not read may be another machine's rows.
        raise ProtocolError(ErrorCode.GAP, f"--over-skipped is not honoured: this machine's "
                            f"last pull could not read epoch {min(mirror.skipped)} "
                            f"({mirror.unread_gap}), so nobody here knows it will never open, "
                            f"and a snapshot over it could drop rows another machine anchored; "
                            f"{NOTHING_DROPPED}",
                            UNREAD_OVER_SKIPPED_HINT)


def gap_hint(mirror: Mirror) -> str:
    """What to do about the gap the last pull left: pull again (an endpoint's failure heals),
    and for an epoch that will never open (a leaked session key's), the owner's snapshot
    over it; an epoch the pull could not read at all (`unread_gap`) is the endpoint's
    failure, so only the pull again, never the snapshot over it. For an epoch sealed under a
    data key another machine's rekey made (its header carries a wrap under one of this
    machine's keys), connect again first, and nothing else: it opens then, and a snapshot
    over it from here would seal the memory under the key that rotation retired, a gap for
    every machine that holds only the new one."""
    if mirror.rotated_gap:  # or, should connect find the wrap forged, a leaked key's
        return ROTATED_GAP_HINT
    if mirror.unread_gap is not None:  # the endpoint's failure, not the epoch's
        return UNREAD_GAP_HINT
    return GAP_NEVER_OPENS_HINT


def rows_to_push(ctx: SpaceContext, mirror: Mirror | None,
                  hold_reason: str | None) -> list[Row] | None:
    """What the store holds now (None: not created yet, refused when that forgets anchored
    rows; a store kint cannot read is refused by `_store_rows`). A server-side push
    (`hold_reason`) passes the drift hold first, so a store that lost rows it should not
    have is not anchored as a wish to forget them. The drift check reads the store again
    (its rows, and the archive: store.archived_entities); a read of it that fails is
    answered as the rows' read answers the same failure (`read_refusal`): a damaged archive
    holds the push as a damaged store does, where it was INTERNAL naming the store."""
    cfg = ctx.config
    rows = _store_rows(ctx, hold_reason)
    if rows is None:  # not created yet: no rows, unless that forgets anchored ones
        _refuse_forgetting_anchored_rows(cfg.db, mirror)
    elif hold_reason is not None:
        from kint.tenant_worker.drift import hold_error

        try:
            with ctx.reading() as conn:
                hold = ctx.drift.evaluate(conn, cfg.tenant, mirror, hold_reason, db=cfg.db)
        except StoreUnreadable as err:  # its read of the archive (store.archived_entities)
            if err.error is None:
                raise store_refusal(err, "push", NOTHING_ANCHORED) from None
            raise read_refusal(ctx, err.error, hold_reason) from None
        except sqlite3.DatabaseError as err:  # its read of the rows (export_rows)
            if store_full(err):
                raise  # DISK_FULL, naming the store (state_health.guarded)
            raise read_refusal(ctx, err, hold_reason) from None
        if hold is not None:
            raise hold_error(hold)
    return rows


def _store_rows(ctx: SpaceContext, hold_reason: str | None) -> list[Row] | None:
    """The store's rows (None: not created yet); a read that failed is refused as
    `read_refusal` says, a full disk as DISK_FULL (state_health.guarded)."""
    try:
        return ctx.store_rows()
    except sqlite3.DatabaseError as err:
        if store_full(err):
            raise  # DISK_FULL, naming the store (state_health.guarded)
        raise read_refusal(ctx, err, hold_reason) from None


def read_refusal(ctx: SpaceContext, err: sqlite3.Error,
                 hold_reason: str | None) -> ProtocolError:
    """What a push answers a read of the store that failed with `err`: the rows'
    (`_store_rows`) and the drift check's (its rows and its archive) alike, so one store is
    answered one way whichever read met it. A store whose file kint cannot read
    (`store_errors.is_damaged`: corrupt, not a database, not to be opened or read) is
    refused: a server-side push is held over it (docs/how-it-works.md: an unchecked push is
    what the hold stops), and a push from a terminal says which file, with nothing
    anchored. One this user may not open (kint.store_denied) is refused as that, held for
    nobody and never sent to `--discard-local`: the push goes through once the permission
    is fixed. A read that failed for another reason is refused as what it is, never as a
    damaged file: a lock is BUSY, anything else names SQLite's error and is tried again by
    the next push, not held for a human. A refusal names the store and SQLite's error in
    the words every other read of it uses (store_errors.unreadable_text: `kint status`, pull,
    export), so a status and a push over one store say the same thing of it, each with its
    own hint; the push's said "reading the store PATH failed (NAME: error)"."""
    db = ctx.config.db
    if is_locked(err):
        # Another process holds the store's lock past the read's busy wait: the store
        # is fine and the push can run once it lets go. Not a hold, which waits for a
        # human, and not "cannot be read", which sends one to `--discard-local`.
        return ProtocolError(ErrorCode.BUSY, f"the store {db} is locked by another process "
                             f"({err}){NOTHING_ANCHORED}", STORE_LOCKED_PUSH_HINT)
    denied = denied_reason(db, err)
    if denied is not None:  # a store this user may not open: fixed by a human, not held
        return ProtocolError(ErrorCode.SIBYL_ERROR, f"{denied_message(db, denied)}"
                             f"{NOTHING_ANCHORED}", DENIED_HINT)
    if not is_damaged(err):
        name = getattr(err, "sqlite_errorname", None) or type(err).__name__
        # The details the hint sends a user to: where in the read it failed.
        log.warning("space %s: reading the store %s failed (%s: %s); nothing is held",
                    ctx.config.space16, db, name, err, exc_info=err)
        return ProtocolError(ErrorCode.INTERNAL, f"{unreadable_text(db, err)}{NOTHING_ANCHORED}",
                             STORE_READ_FAILED_HINT)
    if hold_reason is not None:
        from kint.tenant_worker.drift import hold_error

        hold = ctx.drift.unreadable(db, str(err), hold_reason)
        return hold_error(hold)  # an unreadable store's hold: nothing refused
    return ProtocolError(ErrorCode.INTERNAL, f"{unreadable_text(db, err)}{NOTHING_ANCHORED}",
                         "check the store file (kint only reads it); `kint pull "
                         "--discard-local` moves it aside and restores the anchored values")


def _refuse_forgetting_anchored_rows(db: str, mirror: Mirror | None) -> None:
    """A store not created yet (Sibyl creates it on the first write) holds no rows: on a
    fresh vault, nothing to push. Over rows this machine anchored, it is refused: its diff
    would anchor the deletion of every one of them, and a store that moved or a mistyped
    `--db` is not a wish to forget them."""
    if mirror is not None and mirror.rows:
        raise ProtocolError(
            ErrorCode.BAD_REQUEST,
            f"the store {db} does not exist, and {len(mirror.rows)} row(s) anchored from this "
            f"space's store are on chain: a push would anchor the deletion of every one; "
            f"nothing was anchored",
            "check --db or SIBYL_MEMORY_DB; `kint pull` restores the anchored rows into a new "
            "store")


def head_is_the_mirrors(head: Head, mirror: Mirror | None, over: bool,
                        said: dict[str, Any]) -> None:
    """Order on chain: an epoch chains on the head this machine last saw, so a head that
    moved (another machine pushed) is refused CHAIN_MOVED before anything is signed (one
    older than it, `refuse_behind`, before this). With
    `over` and a gap, the snapshot chains on the chain head instead, said in an override
    line put in `said` for the result (09-cli.md prints it) and logged; `over` without a
    gap is said to be unused, in a notice in `said` (carried by a later refusal too)."""
    seen = mirror.head if mirror is not None else None
    if over and mirror is not None and mirror.skipped:
        said["override"] = (f"push: OVERRIDE, anchoring a snapshot on top of chain head seq "
                            f"{head.seq} ({head.digest[:12]}) although this machine stopped "
                            f"at seq {mirror.head.seq} and could not apply epoch(s) "
                            f"{mirror.skipped}")
        log.warning("%s", said["override"])
    elif seen is None or (head.seq, head.digest) != (seen.seq, seen.digest):
        raise ProtocolError(
            ErrorCode.CHAIN_MOVED,
            f"the chain head is at seq {head.seq} but this machine last saw seq "
            f"{seen.seq if seen else 0}: another machine pushed; {NOTHING_DROPPED}",
            "run `kint pull` first, or `kint pull --discard-local` when unanchored local "
            "changes make that pull a fork")
    if over and "override" not in said:
        said["notices"] = [OVER_SKIPPED_UNUSED]  # honoured only past a skipped epoch


def refuse_behind(anchor: Anchor, head: Head, mirror: Mirror | None) -> None:
    """A head older than the one this machine last saw anchored is no other machine's push
    (the chain never loses an epoch it keeps): the endpoint lags or lies, or the chain lost
    the block (behind_head.py). STALE_RPC, where CHAIN_MOVED's "another machine pushed"
    sent the user to a pull that refuses the same head."""
    if mirror is None or head.seq >= mirror.head.seq:
        return
    raise behind_refusal(anchor, head, mirror.head.seq, mirror.head.block,
                         f"the endpoint's head (seq {head.seq}) is older than the seq "
                         f"{mirror.head.seq} this machine last saw anchored: a stale or "
                         f"lagging RPC", NOTHING_DROPPED)


def refuse_unauthorized(ctx: SpaceContext, anchor: Anchor, owner: str) -> None:
    """The session key must be authorized for the owner (`canWrite`) before an epoch is
    signed: the chain would revert the transaction, and its gas, anyway."""
    session = ctx.session_account()
    if not anchor.can_write(owner, session.address):
        raise ProtocolError(ErrorCode.NOT_CONNECTED,
                            f"session key {session.address} is not authorized for owner "
                            f"{owner}: authorize it (kint authorize) and fund it",
                            UNAUTHORIZED_HINT)


def unauthorized_notice(ctx: SpaceContext, anchor: Anchor, owner: str) -> str | None:
    """For `--dry-run`, which sends nothing: the session key's refusal as a line saying a
    push would be refused, not a refusal of the preview. A machine that joined (`kint join`:
    writes off until the owner authorizes its key) can see what its first push would
    anchor, as docs/commands.md advises before a push that may anchor deletions. So can
    one whose session key does not load (none made yet, another local passphrase, a
    keystore that does not read): v0.3.0's dry run returned before loading it."""
    try:
        ctx.session_account()
    except ProtocolError as err:  # the custody refusal: NO_SESSION_KEY, CORRUPT_STATE
        return f"kint: a push would be refused: {err.message}; {err.hint}"
    try:
        refuse_unauthorized(ctx, anchor, owner)
    except ProtocolError as err:
        if err.code is not ErrorCode.NOT_CONNECTED:
            raise
        return f"kint: a push would be refused: {err.message}"
    return None


def refused(err: ChainRefused) -> ProtocolError:
    """What a push answers a transaction the chain (or the node) refused as it was signed
    or mined: the contract's custom error said as the user's next step."""
    if err.error == "StaleHead":
        return ProtocolError(ErrorCode.CHAIN_MOVED,
                             f"the chain refused the epoch ({err}): another machine pushed "
                             f"first; {NOTHING_DROPPED}", "run `kint pull` first")
    if err.error == SEND_REFUSED:
        # The endpoint answered the send and did not take it: unlike a send that timed
        # out (epoch_send.MAY_STILL_LAND), this transaction cannot land (its nonce is given
        # back: SessionSender.send).
        return ProtocolError(ErrorCode.RPC_UNAVAILABLE,
                             f"{err.detail}: the epoch was not taken and cannot land; "
                             f"{NOTHING_DROPPED}",
                             SEND_REFUSED_HINT)
    if err.error == "NotAuthorized":
        return ProtocolError(ErrorCode.NOT_CONNECTED,
                             f"the chain refused the epoch: this machine's session key is not "
                             f"authorized for the owner; {NOTHING_DROPPED}",
                             UNAUTHORIZED_HINT)
    return ProtocolError(ErrorCode.INTERNAL, f"transaction would revert: {err}",
                         NOTHING_DROPPED)
