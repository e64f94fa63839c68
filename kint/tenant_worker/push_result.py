"""What a push that sent epochs answers (push.py): what they carried and the head after,
and, for an exit push that stopped between two epochs or in its settlement of an earlier
push's journal (exit_bound.py), what it left in the store for the next push. A module of
its own so push.py keeps to the steps of a push."""

from __future__ import annotations

from typing import Any

from kint.epochs.split import Chunk
from kint.tenant_worker.exit_bound import cut_message, settle_cut_message
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import Mirror
from kint.tenant_worker.unanchored import note_count


def anchored(said: dict[str, Any], pushed: list[dict[str, Any]],
             current: Mirror) -> dict[str, Any]:
    """The result of a push that sent its epochs: what they carried, and the head after."""
    changed_rows = sum(p["rows"] for p in pushed)
    deleted_rows = sum(p["deleted"] for p in pushed)
    total = changed_rows + deleted_rows
    return {**said, "pushed": total, "epochs": pushed, "changed_rows": changed_rows,
            "deleted_rows": deleted_rows, **head_after(current),
            "message": f"anchored {total} row change(s) in {len(pushed)} epoch(s), head "
                       f"epoch {current.head.seq} at block {current.head.block}"}


def cut_short(ctx: SpaceContext, said: dict[str, Any], before: Any, current: Mirror | None,
              pushed: list[dict[str, Any]], chunks: list[Chunk], why: str,
              in_wait: bool = False) -> dict[str, Any]:
    """The exit push's result when it stopped between epochs (`why`, the reason it stopped
    on), or in an epoch's receipt wait (`in_wait`, at the bound: that epoch's
    rows are counted left, its journal settles whether they landed): what landed, and the
    rows of the epochs not recorded, left in the store (counted) for the next push, said
    once."""
    left = chunks[len(pushed):]
    rows_left = sum(len(c.rows) + len(c.deleted) for c in left)
    note_count(ctx, before, current, rows_left)
    result = anchored(said, pushed, current) if current is not None and pushed else {
        **said, "pushed": 0, "epochs": [], **head_after(current)}
    head = (f", head epoch {current.head.seq} at block {current.head.block}"
            if current is not None and pushed else "")
    result["message"] = cut_message(why, len(pushed), len(chunks), result["pushed"],
                                    rows_left, head, in_wait)
    result["cut_short"] = {"epochs_left": len(left), "rows_left": rows_left}
    return result


def settle_cut(said: dict[str, Any], mirror: Mirror | None, seq: int) -> dict[str, Any]:
    """The exit push's result when its bound came in the receipt wait of an earlier push's
    journal, epoch `seq`, sent again by its settlement (pending.SettleCut): it read no rows
    and sent nothing of its own; the journal is kept, and the store's rows wait for the next
    push, which settles it first. Said once, in its log line."""
    return {**said, "pushed": 0, "epochs": [], **head_after(mirror),
            "message": settle_cut_message(seq), "cut_short": {"settling": seq}}


def head_after(mirror: Mirror | None) -> dict[str, Any]:
    """The head this machine holds after the push (v0.3.0's memory_push names it)."""
    head = mirror.head if mirror is not None else None
    return {"head_seq": head.seq if head else 0,
            "head_digest": head.digest if head else "0" * 64}
