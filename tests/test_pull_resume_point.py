"""Where a pull resumes past an epoch it cannot open, and where it must stop instead
(kint v0.3.0's 03-new-machine.md, "Gaps"): an epoch this machine cannot open is passed when
a later snapshot that opens carries the whole state, but a read failure (the RPC would not
serve the calldata, or served it altered) and an epoch that opened and contradicts the
chain always stop the pull: no one has read what such an epoch holds. A prev link that
breaks stops it too, unless the epoch is a snapshot the pull starts at (pull_plan.py's one
rule, answering both where the pull resumes and where it stops).

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
from kint.tenant_worker.pull_plan import epochs_to_apply

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
    todo, skipped = epochs_to_apply(walked, MIRROR)
    assert _seqs(todo) == [4, 5]
    assert [(s["seq"], s["superseded_by"]) for s in skipped] == [(2, 4)]


def test_an_unread_epoch_is_never_walked_past_even_for_a_later_snapshot():
    """An epoch this machine cannot open, then one the RPC would not serve, then a
    snapshot: the pull resumed at the snapshot, passing the unread epoch as "superseded"
    though nobody saw it. It must stop at the unread one, the first epoch it cannot pass
    (here the unopenable epoch before it, which has no snapshot before the unread one)."""
    walked = [_opened(1, False), _unopenable(2), _unread_epoch(3), _opened(4, True),
              _opened(5, False)]
    todo, skipped = epochs_to_apply(walked, MIRROR)
    assert _seqs(todo) == [1, 2, 3, 4, 5]  # the pull applies 1 and stops at 2
    assert skipped == []


def test_the_resume_point_is_the_newest_snapshot_before_an_unread_epoch():
    walked = [_unopenable(1), _opened(2, True), _opened(3, False), _unread_epoch(4),
              _opened(5, True)]
    todo, skipped = epochs_to_apply(walked, MIRROR)
    assert _seqs(todo) == [2, 3, 4, 5]  # applies 2 and 3, stops at 4
    assert [(s["seq"], s["superseded_by"]) for s in skipped] == [(1, 2)]


def test_a_broken_prev_link_is_never_walked_past_even_for_a_later_snapshot():
    """03-new-machine.md, "Gaps": a read failure, the prev links breaking among them, always
    stops the pull. An epoch this machine cannot open, then one whose prev is not the digest
    of the epoch before it, then a snapshot: the pull resumed at the snapshot, complete,
    where the same walk with the calldata of epoch 4 unread stops at epoch 2."""
    walked = [_opened(1, False), _unopenable(2), _opened(3, False),
              _prev_broken(_opened(4, False)), _opened(5, True), _opened(6, False)]
    todo, skipped = epochs_to_apply(walked, MIRROR)
    assert _seqs(todo) == [1, 2, 3, 4, 5, 6]  # the pull applies 1 and stops at 2
    assert skipped == []
    # The first walked epoch's link is to the mirror's head: it is the gap.
    walked = [_prev_broken(_opened(1, False)), _unopenable(2), _opened(3, True)]
    todo, skipped = epochs_to_apply(walked, MIRROR)
    assert _seqs(todo) == [1] and todo[0].opened is None and skipped == []
    assert todo[0].reason == f"epoch 1 does not follow the last applied epoch ({MIRROR[:12]})"


def test_a_snapshot_whose_prev_breaks_is_still_a_resume_point():
    """A snapshot stands alone: the break below it is behind a pull that starts there."""
    walked = [_opened(1, False), _unopenable(2), _prev_broken(_opened(3, True)),
              _opened(4, False)]
    todo, skipped = epochs_to_apply(walked, MIRROR)
    assert _seqs(todo) == [3, 4]
    assert [(s["seq"], s["superseded_by"]) for s in skipped] == [(2, 3)]


# --- the one prev-continuity rule, over hand-built walks --------------------------------
# Each answer is the pull's: the epochs it applies (from where it resumes), the epoch it
# stops at with its reason (None: it reaches the newest walked), and what it passed for
# a later snapshot.


def _plan(walked: list[Fetched]) -> tuple[list[int], int | None, str | None,
                                           list[tuple[int, int]]]:
    todo, skipped = epochs_to_apply(walked, MIRROR)
    applied = []
    for f in todo:
        if f.opened is None:
            break
        applied.append(f.log.seq)
    stop = todo[len(applied)] if len(applied) < len(todo) else None
    return (applied, stop and stop.log.seq, stop and stop.reason,
            [(s["seq"], s["superseded_by"]) for s in skipped])


def _broken_at(seq: int, after: int) -> str:
    """The gap's reason for epoch `seq` whose prev is not the digest of epoch `after`."""
    return f"epoch {seq} does not follow the last applied epoch ({f'{after:064x}'[:12]})"


def test_a_snapshot_the_pull_starts_at_stands_alone():
    """The walk stopped at a snapshot whose prev is not the mirror's head: it holds the
    whole memory, so the pull applies it and the epochs after it; a diff in its place is
    the gap, nothing applied."""
    assert _plan([_prev_broken(_opened(1, True)), _opened(2, False)]) == ([1, 2], None, None,
                                                                         [])
    assert _plan([_prev_broken(_opened(1, False)), _opened(2, False)]) == (
        [], 1, _broken_at(1, 0), [])


def test_a_snapshot_below_a_broken_link_is_applied_and_the_break_is_the_gap():
    """v0.3.0 applies the epochs before the gap: a snapshot (or a diff that chains on the
    mirror) reached only through the broken link of the epoch above it is applied."""
    assert _plan([_opened(1, True), _prev_broken(_opened(2, False))]) == (
        [1], 2, _broken_at(2, 1), [])
    assert _plan([_opened(1, False), _prev_broken(_opened(2, False))]) == (
        [1], 2, _broken_at(2, 1), [])


def test_a_snapshot_after_a_broken_link_is_never_reached():
    """A diff whose prev breaks, then a snapshot that opens: the pull applies what is
    before the break and stops there, the snapshot after it untaken."""
    walked = [_opened(1, False), _prev_broken(_opened(2, False)), _opened(3, True),
              _opened(4, False)]
    assert _plan(walked) == ([1], 2, _broken_at(2, 1), [])
    # The same past an epoch this machine cannot open: it stops at that one instead.
    walked = [_unopenable(1), _prev_broken(_opened(2, False)), _opened(3, True)]
    assert _plan(walked) == ([], 1, "not a kint epoch", [])


def test_a_break_right_before_a_snapshot_stops_a_pull_that_reaches_it_from_below():
    """The snapshot's own link breaks: it stands alone only where the pull starts. After
    epochs the pull applied it is the gap; past an epoch that cannot open, the pull starts
    at it."""
    assert _plan([_opened(1, False), _prev_broken(_opened(2, True)), _opened(3, False)]) == (
        [1], 2, _broken_at(2, 1), [])
    assert _plan([_unopenable(1), _prev_broken(_opened(2, True)), _opened(3, False)]) == (
        [2, 3], None, None, [(1, 2)])


def test_with_two_breaks_the_first_the_pull_meets_is_the_gap():
    walked = [_opened(1, False), _prev_broken(_opened(2, False)),
              _prev_broken(_opened(3, False))]
    assert _plan(walked) == ([1], 2, _broken_at(2, 1), [])
    # Resumed at a snapshot whose own link breaks: the next break is the gap.
    walked = [_unopenable(1), _prev_broken(_opened(2, True)), _opened(3, False),
              _prev_broken(_opened(4, False)), _opened(5, True)]
    assert _plan(walked) == ([2, 3], 4, _broken_at(4, 3), [(1, 2)])
    # A break that is no place to start (a diff) before the snapshot's: no resume at all.
    walked = [_unopenable(1), _prev_broken(_opened(2, False)), _prev_broken(_opened(3, True)),
              _opened(4, False)]
    assert _plan(walked) == ([], 1, "not a kint epoch", [])


def test_an_unread_epoch_between_is_met_before_a_break_above_it():
    """The first epoch the pull cannot pass stops it, whichever kind: an unread epoch below
    a break is the gap (a discarding pull refuses with its RPC_UNAVAILABLE), a break below
    an unread epoch is."""
    walked = [_opened(1, False), _unread_epoch(2), _prev_broken(_opened(3, False)),
              _opened(4, True)]
    todo, _ = epochs_to_apply(walked, MIRROR)
    assert _plan(walked) == ([1], 2, "cannot fetch the calldata of epoch 2: pruned", [])
    assert todo[1].refusal is not None and todo[1].refusal.code is ErrorCode.RPC_UNAVAILABLE
    walked = [_opened(1, False), _prev_broken(_opened(2, False)), _unread_epoch(3)]
    todo, _ = epochs_to_apply(walked, MIRROR)
    assert _plan(walked) == ([1], 2, _broken_at(2, 1), [])
    assert todo[-1].refusal is not None and todo[-1].refusal.code is ErrorCode.STALE_RPC
    # Past an epoch that cannot open, a snapshot whose link breaks above an unread epoch is
    # no resume point: nothing walks past the unread one.
    walked = [_unopenable(1), _unread_epoch(2), _prev_broken(_opened(3, True))]
    assert _plan(walked) == ([], 1, "not a kint epoch", [])
