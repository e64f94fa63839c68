"""A pull's writes: one epoch's rows replayed through Sibyl's own write methods, and the
one read-back at the end that names every written row that did not come back as anchored
(pull.py). Rows the store already holds byte for byte are not written again.
"""

from __future__ import annotations

import json
from typing import Any

from kint.epochs.plaintext import Plaintext
from kint.rows.canon import Row, canonical_id
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.statefiles import Mirror


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def replay(ctx: SpaceContext, mirror: Mirror, plaintext: Plaintext,
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
    with ctx.using_client():  # never closed under it (shared_client.py)
        return _replay(ctx.client(), mirror, plaintext, present, written)


def _replay(client: Any, mirror: Mirror, plaintext: Plaintext, present: dict[str, Row],
            written: dict[str, int]) -> list[str]:
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


def rows_not_back(mirror: Mirror, rows: list[Row], written: dict[str, int]) -> list[str]:
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
