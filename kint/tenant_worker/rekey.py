"""`kint rekey` and `kint recovery-code` (05-keys.md, "Rotate the data key", "The recovery
code").

rekey replaces the data key and keeps the keys that open it, in v0.3.0's order: connected;
the head lock; the newest readable header (the wraps a new machine sees decide what must be
carried over; local wraps count only when the chain has no epochs); a KEK from every key
supplied, each of which must open a current wrap; the current data key unwrapped and its
dek_id checked against the header; the wraps not supplied refused by name unless
`--drop-missing`; a new data key wrapped under each supplied key; one snapshot sealed under
it and anchored with push's checks; only then the local wraps, key cache, recovery file and
enrolment rewritten. If the push fails, nothing on this machine has changed.

Between the new key's making and those writes, the key lives in the rekey journal
(`kint.custody.rekey_journal`, written before the snapshot is signed): a worker killed
anywhere in between leaves the journal, which `rekey_settle` finishes (the snapshot
landed) or drops (it did not) when the worker restarts or the next command runs. A rekey
first settles one left by an earlier rekey.

recovery-code writes `RECOVERY-<space16>.txt` again from the cached data key, refusing when
that key is not the one the head epoch was sealed with.
"""

from __future__ import annotations

import logging
from typing import Any

from kint import settings
from kint.chain.anchor import Anchor
from kint.chain.rpc import RpcUnavailable
from kint.custody import errors as custody_errors
from kint.custody.data_key import dek_id, new_data_key
from kint.custody.recovery_code import recovery_file_path, write_recovery_file
from kint.custody.rekey_journal import RekeyJournal, save_rekey_journal
from kint.custody.wraps import Wrap, find_wrap, read_wraps, unwrap, wrap_data_key
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.connect_key import SuppliedKey, supplied_keks
from kint.tenant_worker.data_key import current_data_key, rotated_key_ttl
from kint.tenant_worker.head_header import newest_readable_header, read_head
from kint.tenant_worker.head_lock import head_op
from kint.tenant_worker.connected import connected
from kint.tenant_worker.push import SettledSaid, _push, failure_refusal, went_through
from kint.tenant_worker import settled_notice
from kint.tenant_worker.rekey_settle import COMPLETED, settle_now, settle_rekey
from kint.tenant_worker.space import SpaceContext

log = logging.getLogger("kint.worker")

OLD_CODE_NOTE = ("the old recovery code no longer opens this vault; copy the new one somewhere "
                 "that is not this machine")
KIND_NAMES = {0x01: "wallet signature", 0x02: "passphrase", 0x03: "webauthn", 0x04: "smart"}


def _locked(ctx: SpaceContext, fn: Any) -> dict[str, Any]:
    try:
        with head_op(ctx, "rekey"):
            return fn()
    except (RpcUnavailable, custody_errors.CustodyError) as err:
        raise failure_refusal(err) from None


def _current_wraps(ctx: SpaceContext, anchor: Anchor, owner: str, offline: bool
                   ) -> tuple[tuple[Wrap, ...], bytes]:
    """The wraps a new machine sees, and the dek_id they hold: the newest readable header,
    or the local wraps when the chain has no epochs (or is not asked)."""
    space = ctx.config.space_id
    if not offline:
        try:
            head = read_head(anchor, owner, space)
            found = (newest_readable_header(anchor, owner, space, head, command="rekey")
                     if head.seq > 0 else None)
        except ProtocolError as err:
            if err.code not in (ErrorCode.RPC_UNAVAILABLE, ErrorCode.STALE_RPC):
                raise
            # rekey's own refusal, exit 2 as v0.3.0's rekey gives every refusal before its
            # push (05-keys.md, "Rotate the data key": 5 is for the push): the words and
            # the hint stay the read's own.
            raise ProtocolError(ErrorCode.CHAIN_UNREADABLE, err.message, err.hint) from None
        if found is not None:
            return found.header.wraps, found.header.dek_id
    local = read_wraps(ctx.config.home, space)
    if local is None:
        # rekey's own refusal, exit 2 (BAD_REQUEST): not NOT_CONNECTED, which is also what
        # the snapshot push refuses an unfunded or unauthorized session key with (exit 5).
        raise ProtocolError(ErrorCode.BAD_REQUEST, "this machine holds no key wraps for this "
                            "space", "run `kint connect` first")
    return local.wraps, local.dek_id


def _describe(wrap: Wrap) -> str:
    return f"{KIND_NAMES.get(wrap.kind, f'kind {wrap.kind}')} (tag {wrap.tag.hex()[:8]})"


def supplied_keys(ctx: SpaceContext, owner: str, args: dict[str, Any]) -> list[SuppliedKey]:
    """Every key rekey was given, each once: the signature (salted when a salt came with
    it), the vault passphrase (`--smart-account`, beside a signature or alone) and the extra
    passphrase wrap. Connect's `supplied_keks` picks one of the first two; rekey carries every
    one it was given (09-cli.md: a signature with `--smart-account` carries both)."""
    supplied: list[SuppliedKey] = []
    if args.get("signature") is not None:
        supplied += supplied_keks(ctx, owner, {"signature": args["signature"],
                                           "salt_passphrase": args.get("salt_passphrase")})
    if args.get("passphrase") is not None:
        supplied += supplied_keks(ctx, owner, {"passphrase": args["passphrase"]})
    if args.get("extra_passphrase"):  # an empty answer at its prompt skips it
        supplied += supplied_keks(ctx, owner, {"passphrase": args["extra_passphrase"]})
    once: dict[bytes, SuppliedKey] = {}
    for key in supplied:  # the same passphrase given twice is one wrap
        once.setdefault(key.tag, key)
    return list(once.values())


def rekey(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        cfg = ctx.config
        chain, enrolment = connected(ctx)
        # An earlier rekey killed mid-way: finished or dropped first. A push journal the
        # chain had passed leaves this machine behind it, one dropped leaves rows for a
        # key that may write: said now, not as the snapshot's refusal (also when a
        # restarted worker's settlement found it, said by no command yet). One whose rows
        # a later push anchored since owes nothing: it was refused, the user giving the
        # signature or passphrase again for a rekey that then went through. It is left
        # kept for the snapshot's push, which says it among the notices and goes on, as
        # a push does: used up here, a rekey refused next (a key that does not open the
        # vault) would drop it unsaid.
        overtaken = settle_now(ctx)[1]
        if overtaken is not None and not settled_notice.owes_nothing(overtaken):
            settled_notice.said(ctx)
            raise overtaken.refusal("kint rekey")
        owner = enrolment.owner
        anchor = Anchor(chain, ctx.tracker)
        current, current_id = _current_wraps(ctx, anchor, owner,
                                             bool(settings.value("KINT_OFFLINE")))
        supplied = supplied_keys(ctx, owner, args)
        if not supplied:
            raise ProtocolError(ErrorCode.BAD_REQUEST, "rekey needs every key that is to keep "
                                "opening the vault: a derive signature and/or the vault "
                                "passphrase")
        old_key = None
        for key in supplied:
            wrap = find_wrap(current, key.tag)
            if wrap is None:
                raise ProtocolError(ErrorCode.WRONG_KEY, f"this key (tag {key.tag.hex()[:8]}) "
                                    f"does not open a current wrap of the vault: rekey re-wraps "
                                    f"keys that work today and cannot add a new one")
            old_key = unwrap(wrap, key.kek)
        assert old_key is not None
        if dek_id(old_key) != current_id:
            raise ProtocolError(ErrorCode.WRONG_KEY, "the supplied key opens a data key the "
                                "newest epoch was not sealed with")
        tags = {k.tag for k in supplied}
        missing = [w for w in current if w.tag not in tags]
        if missing and not args.get("drop_missing"):
            raise ProtocolError(ErrorCode.BAD_REQUEST, "rekey would drop "
                                + ", ".join(_describe(w) for w in missing)
                                + ": supply those keys too, or pass --drop-missing")
        dek = new_data_key()
        wraps = tuple(wrap_data_key(dek, k.kek, k.kind) for k in supplied)
        save_rekey_journal(cfg.home, cfg.space_id, RekeyJournal(
            dek, wraps, current_id, key_ttl=rotated_key_ttl(ctx)))
        # A settled notice the snapshot's push says goes back to this rekey in `pushed`,
        # not to the user: used up only once the rekey's own result carries it. Used up as
        # the push returned, a rekey that failed after (the recovery file not written) lost
        # it unsaid.
        settled = SettledSaid()
        try:
            pushed = _push(ctx, True, over_skipped=bool(args.get("over_skipped")),
                           new_key=(dek, wraps), confirmations=args.get("confirmations"),
                           settled=settled)
        except BaseException:
            _settle_after_failure(ctx)
            raise
        went_through(ctx, "kint rekey")
        # The snapshot is on chain: only now does this machine move to the new key.
        if settle_rekey(ctx) != COMPLETED:
            raise ProtocolError(ErrorCode.INTERNAL, "the rekey snapshot was anchored but is "
                                "not among this machine's recorded epochs",
                                "run `kint pull`, then `kint recovery-code`")
        path = recovery_file_path(cfg.home, cfg.space_id)
        log.info("space %s: data key rotated %s -> %s", cfg.space16, current_id.hex(),
                 dek_id(dek).hex())
        result = {"old_dek_id": current_id.hex(), "new_dek_id": dek_id(dek).hex(),
                  "snapshot": pushed["epochs"], "carried": len(wraps),
                  "dropped": [_describe(w) for w in missing], "recovery_file": str(path),
                  "note": OLD_CODE_NOTE, **({"notices": pushed["notices"]}
                                            if pushed.get("notices") else {})}
        settled.used_up(ctx)
        return result

    return _locked(ctx, run)


def _settle_after_failure(ctx: SpaceContext) -> None:
    """A push that failed before its transaction was sent (or was refused) leaves no
    pending epoch: the journal is dropped now. One that may have sent it keeps both
    journals for the next settlement. Never masks the push's own refusal."""
    try:
        settle_rekey(ctx)
    except Exception as err:  # noqa: BLE001 - the push's error is the one to report
        log.warning("space %s: the rekey journal is left for the next command: %s",
                    ctx.config.space16, err)


# v0.3.0's refusal (09-cli.md, "kint recovery-code"), whether this machine never connected
# or its cached key is gone.
NO_KEY_FOR_CODE = "no data key cached on this machine: kint connect first"
CONNECT_AGAIN_FOR_CODE = ("run `kint connect --owner ADDRESS` again (the wallet's signature or "
                          "the vault passphrase) to cache the data key, then `kint "
                          "recovery-code`")


def settled_warning(found: Any) -> str:
    """What recovery-code says of the push journal its settlement passed or dropped
    (overtaken.py, unauthorized_journal.py): the refusal a push would give, line and hint.
    The code is written all the same (exit 0): it is the cached key's, which the settlement
    does not change, and the rows or the chain the journal leaves behind are the next
    push's and pull's. It was logged alone, the user never told the journal was gone."""
    refusal = found.refusal()
    return f"{refusal.message}; {refusal.hint}"


def recovery_code(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        cfg = ctx.config
        enrolment = ctx.enrolment()
        if enrolment is None:
            raise ProtocolError(ErrorCode.NO_DATA_KEY, NO_KEY_FOR_CODE,
                                "run `kint connect --owner ADDRESS` first")
        outcome, settled = settle_now(ctx)
        if outcome == COMPLETED:  # a killed rekey's code is written by its end
            enrolment = ctx.enrolment() or enrolment
        try:
            key = current_data_key(ctx)
        except ProtocolError:
            # Not the code's default hint (about changes waiting for a push): what brings
            # the key back here.
            raise ProtocolError(ErrorCode.NO_DATA_KEY, NO_KEY_FOR_CODE,
                                CONNECT_AGAIN_FOR_CODE) from None
        if not settings.value("KINT_OFFLINE"):  # another chain's head is refused unread
            chain, enrolment = connected(ctx)
            anchor = Anchor(chain, ctx.tracker)
            head = read_head(anchor, enrolment.owner, cfg.space_id)
            if head.seq > 0:
                found = newest_readable_header(anchor, enrolment.owner, cfg.space_id, head,
                                               command="recovery-code")
                if found.header.dek_id != dek_id(key):
                    raise ProtocolError(ErrorCode.WRONG_KEY,
                                        "the cached data key is not the one the head epoch was "
                                        "sealed with (the key was rotated on another machine)",
                                        "run `kint connect` again first")
        path = write_recovery_file(cfg.home, enrolment.owner, cfg.space_id, key)
        said: dict[str, Any] = {"recovery_file": str(path)}
        if settled is not None:
            said["warnings"] = [settled_warning(settled)]
            settled_notice.said(ctx)
        return said

    return _locked(ctx, run)
