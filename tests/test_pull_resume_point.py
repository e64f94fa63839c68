"""Where a pull resumes past an epoch it cannot open, and where it must stop instead
(kint v0.3.0's 03-new-machine.md, "Gaps"): an epoch this machine cannot open is passed when
a later snapshot that opens carries the whole state, but a read failure (the RPC would not
serve the calldata, or served it altered) and an epoch that opened and contradicts the
chain always stop the pull: no one has read what such an epoch holds.

The walked epochs are real: each sealed and opened with kint's own envelope code under one
data key; the unread and unopenable ones are made as `epoch_walk.fetch_epoch` makes them
(`_gap`, and an epoch whose bytes are not a kint header)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from kint.chain.anchor import EpochLog
from kint.custody.wraps import Wrap
from kint.epochs.envelope import open_epoch, seal
from kint.epochs.plaintext import build_plaintext
from kint.protocol import ErrorCode, ProtocolError
from kint.rows.merkle import EMPTY_ROOT
from kint.tenant_worker.epoch_walk import Fetched, _gap
from kint.tenant_worker.pull import _epochs_to_apply

V = json.loads((Path(__file__).parent / "vectors" / "kint-v0.3.0.json").read_text("utf-8"))
DEK = bytes.fromhex(V["dek"])
WRAPS = [Wrap.decode(bytes.fromhex(w["bytes"])) for w in V["wraps"]]
OWNER = "0x" + "11" * 20
SPACE = "ab" * 32
MIRROR = f"{0:064x}"  # the digest epoch 1 chains on (`_log`): a mirror at seq 0


def _log(seq: int) -> EpochLog:
    return EpochLog(owner=OWNER, space=SPACE, seq=seq, prev=f"{seq - 1:064x}",
                    digest=f"{seq:064x}", prev_block=seq - 1, writer=OWNER, block=seq,
                    tx_hash=f"{seq + 1000:064x}")


def _opened(seq: int, snapshot: bool) -> Fetched:
    prev = f"{seq - 1:064x}"
    raw = build_plaintext(tenant="t", space=SPACE, seq=seq, prev=prev, rows=(),
                          rows_root=EMPTY_ROOT, n_rows=0, snapshot=snapshot)
    blob, header = seal(raw, dek=DEK, owner=OWNER, space=SPACE, seq=seq, prev=prev,
                        rows_root=EMPTY_ROOT, wraps=WRAPS, snapshot=snapshot)
    opened = open_epoch(blob, dek=DEK, owner=OWNER, space=SPACE, seq=seq, prev=prev)
    assert opened.plaintext.snapshot is snapshot
    return Fetched(_log(seq), blob, header, opened)


def _unopenable(seq: int) -> Fetched:  # a leaked session key's bytes: not a kint epoch
    return Fetched(_log(seq), b"\x07 not a kint epoch", None, None, "not a kint epoch")


def _unread_epoch(seq: int) -> Fetched:
    reason = f"cannot fetch the calldata of epoch {seq}: pruned"
    return _gap(_log(seq), reason, ProtocolError(ErrorCode.RPC_UNAVAILABLE, reason))


def _prev_broken(f: Fetched) -> Fetched:
    """The epoch as a walk meets it when the event below it is not the one its prev names
    (a lying RPC): walk() goes on through it and leaves the break to the pull."""
    return replace(f, log=replace(f.log, prev="ee" * 32))


def _seqs(fetched: list[Fetched]) -> list[int]:
    return [f.log.seq for f in fetched]


def test_an_epoch_nobody_can_open_is_passed_for_a_later_snapshot():
    walked = [_opened(1, False), _unopenable(2), _opened(3, False), _opened(4, True),
              _opened(5, False)]
    todo, skipped = _epochs_to_apply(walked, MIRROR)
    assert _seqs(todo) == [4, 5]
    assert [(s["seq"], s["superseded_by"]) for s in skipped] == [(2, 4)]


def test_an_unread_epoch_is_never_walked_past_even_for_a_later_snapshot():
    """An epoch this machine cannot open, then one the RPC would not serve, then a
    snapshot: the pull resumed at the snapshot, passing the unread epoch as "superseded"
    though nobody saw it. It must stop at the unread one, the first epoch it cannot pass
    (here the unopenable epoch before it, which has no snapshot before the unread one)."""
    walked = [_opened(1, False), _unopenable(2), _unread_epoch(3), _opened(4, True),
              _opened(5, False)]
    todo, skipped = _epochs_to_apply(walked, MIRROR)
    assert _seqs(todo) == [1, 2, 3, 4, 5]  # the pull applies 1 and stops at 2
    assert skipped == []


def test_the_resume_point_is_the_newest_snapshot_before_an_unread_epoch():
    walked = [_unopenable(1), _opened(2, True), _opened(3, False), _unread_epoch(4),
              _opened(5, True)]
    todo, skipped = _epochs_to_apply(walked, MIRROR)
    assert _seqs(todo) == [2, 3, 4, 5]  # applies 2 and 3, stops at 4
    assert [(s["seq"], s["superseded_by"]) for s in skipped] == [(1, 2)]


def test_a_broken_prev_link_is_never_walked_past_even_for_a_later_snapshot():
    """03-new-machine.md, "Gaps": a read failure, the prev links breaking among them, always
    stops the pull. An epoch this machine cannot open, then one whose prev is not the digest
    of the epoch before it, then a snapshot: the pull resumed at the snapshot, complete,
    where the same walk with the calldata of epoch 4 unread stops at epoch 2."""
    walked = [_opened(1, False), _unopenable(2), _opened(3, False),
              _prev_broken(_opened(4, False)), _opened(5, True), _opened(6, False)]
    todo, skipped = _epochs_to_apply(walked, MIRROR)
    assert _seqs(todo) == [1, 2, 3, 4, 5, 6]  # the pull applies 1 and stops at 2
    assert skipped == []
    # The first walked epoch's link is to the mirror's head.
    walked = [_prev_broken(_opened(1, False)), _unopenable(2), _opened(3, True)]
    todo, skipped = _epochs_to_apply(walked, MIRROR)
    assert _seqs(todo) == [1, 2, 3] and skipped == []


def test_a_snapshot_whose_prev_breaks_is_still_a_resume_point():
    """A snapshot stands alone: the break below it is behind a pull that starts there."""
    walked = [_opened(1, False), _unopenable(2), _prev_broken(_opened(3, True)),
              _opened(4, False)]
    todo, skipped = _epochs_to_apply(walked, MIRROR)
    assert _seqs(todo) == [3, 4]
    assert [(s["seq"], s["superseded_by"]) for s in skipped] == [(2, 3)]
