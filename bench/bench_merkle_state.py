"""The state's root per epoch: `MerkleState.apply` (kept tree) against the whole root rebuilt
per chunk (what `apply` did before session 16), in the same run, on the same chunks.

Push hands `split_diff` a `MerkleState` built from its mirror, and the epoch cache's check (history,
provenance) replays each epoch through one: every chunk needs the root of the whole state after it.
The rows are entity, journal and state rows (85 / 12 / 3 %, bench/corpus.py's mix) made as
`WireRow`s here (nothing is written to a store: only the tree is measured). Four cases at 10,000
rows (`--quick`: 2,000), chunks of 770 rows (what the 92,160-byte split makes of corpus rows):

- first push: every row new, in store order (random against the ids' order), 13 chunks;
- journal appended: 800 new journal rows and 100 entities changed in place, 2 chunks;
- edits in place: 3,000 entities changed, 4 chunks;
- new entities: 1,540 new entities (ids anywhere in the order), 2 chunks.

CPU per chunk (`time.process_time`, the best of 3 rounds; the state is made from the held
leaves inside the first chunk's time, as push makes one from its mirror per push, so the
first chunk always builds the whole tree), each chunk's root compared with the whole tree's
(a difference stops the run). Where the change is everywhere in the order
(new rows whose ids fall all over it) every pair after the first new row moves, so the kept
tree hashes about what the whole one does: the gain is where changes are in place or late in
the order.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common  # noqa: E402

CHUNK = 770
ROUNDS = 3


def _rows(n: int, rng: random.Random, *, tiers: str = "mix", start: int = 0) -> list[Any]:
    from kint.epochs.plaintext import WireRow

    out = []
    for i in range(start, start + n):
        r = rng.random() if tiers == "mix" else {"entity": 0.5, "journal": 0.1}[tiers]
        body = '{"summary":"' + " ".join(rng.choices(_WORDS, k=30)) + '"}'
        if r < 0.03:
            out.append(WireRow("state", f"focus-{rng.getrandbits(40):x}-{i}", None, body=body))
        elif r < 0.15:
            out.append(WireRow("journal", f"{rng.getrandbits(128):032x}", None,
                               ts="2026-12-05T01:00:00Z", evaluated=f'["{body[:60]}"]',
                               acted="[]", forward=None, extra=None))
        else:
            out.append(WireRow("entity", f"{rng.choice(_WORDS)}-{rng.choice(_WORDS)}-{i}",
                               rng.choice(_CATEGORIES), status="active", body=body))
    return out


_WORDS = ("release deploy review merge branch commit build pipeline staging production "
          "incident outage latency budget invoice customer vendor water people number "
          "sound light house picture animal mother world country school").split()
_CATEGORIES = ("decisions people projects rules tools notes places vendors incidents "
               "contracts habits goals").split()


class _WholeRoot:
    """`apply` as it was before: the state's dict moved, then the whole root rebuilt."""

    def __init__(self, leaves: dict[str, bytes]) -> None:
        self.leaves = dict(leaves)

    def apply(self, rows: Sequence[Any], deleted: Sequence[Any]) -> tuple[bytes, int]:
        from kint.rows.canon import canonical_id
        from kint.rows.merkle import merkle_root

        for tier, category, key in deleted:
            self.leaves.pop(canonical_id(tier, category, key), None)
        for row in rows:
            self.leaves[row.canonical_id] = row.leaf
        return merkle_root([self.leaves[cid] for cid in sorted(self.leaves)]), len(self.leaves)


def _cases(n: int) -> list[tuple[str, list[Any], list[list[Any]]]]:
    """(name, the rows held before, the chunks): the same rows every run (seeded)."""
    rng = random.Random(16)
    held = _rows(n, rng)
    scale = n / 10_000
    entities = [r for r in held if r.tier == "entity"]

    def edited(rows: list[Any]) -> list[Any]:
        from dataclasses import replace
        return [replace(r, body=r.body[:-2] + ' edited"}') for r in rows]

    def chunks(rows: list[Any]) -> list[list[Any]]:
        return [rows[i:i + CHUNK] for i in range(0, len(rows), CHUNK)]

    journal = _rows(int(800 * scale), rng, tiers="journal", start=n)
    appended = journal + edited(rng.sample(entities, int(100 * scale)))
    rng.shuffle(appended)
    return [("first push", [], chunks(held)),
            ("journal appended", held, chunks(appended)),
            ("edits in place", held, chunks(edited(rng.sample(entities, int(3000 * scale))))),
            ("new entities", held, chunks(_rows(int(1540 * scale), rng, tiers="entity",
                                                start=2 * n)))]


def _time_chunks(make: Any, leaves: dict[str, bytes],
                 chunks: list[list[Any]]) -> tuple[list[float], list[bytes]]:
    """Each chunk's CPU; the state is made from the held leaves inside the first chunk's
    time, as push makes one per push from its mirror."""
    times, roots = [], []
    state = None
    for chunk in chunks:
        t0 = time.process_time()
        state = state or make(leaves)
        root, _ = state.apply(chunk, ())
        times.append((time.process_time() - t0) * 1e3)
        roots.append(root)
    return times, roots


def run(quick: bool = False) -> dict[str, Any]:
    from kint.epochs.split import MerkleState

    n = 2_000 if quick else 10_000
    out: dict[str, Any] = {"rows": n, "chunk_rows": CHUNK, "rounds": ROUNDS, "cases": {}}
    for name, held, chunks in _cases(n):
        leaves = {r.canonical_id: r.leaf for r in held}
        best: dict[str, list[float]] = {}
        for _ in range(ROUNDS):
            whole, whole_roots = _time_chunks(_WholeRoot, leaves, chunks)
            kept, kept_roots = _time_chunks(MerkleState, leaves, chunks)
            if kept_roots != whole_roots:
                raise SystemExit(f"{name}: the kept tree's roots differ from the whole tree's")
            for key, times in (("whole", whole), ("kept", kept)):
                if key not in best or sum(times) < sum(best[key]):
                    best[key] = times
        out["cases"][name] = {
            "chunks": len(chunks), "rows_changed": sum(len(c) for c in chunks),
            "whole_ms_first_chunk": round(best["whole"][0], 2),
            "kept_ms_first_chunk": round(best["kept"][0], 2),
            "whole_ms_later_chunks": common.summarize(best["whole"][1:], "ms"),
            "kept_ms_later_chunks": common.summarize(best["kept"][1:], "ms"),
            "whole_ms_total": round(sum(best["whole"]), 2),
            "kept_ms_total": round(sum(best["kept"]), 2)}
    out["machine"] = common.machine()
    out["code"] = common.code_info()
    return out


def report(result: dict[str, Any], path: Path) -> None:
    print(f"MerkleState.apply at {result['rows']:,} rows, chunks of {result['chunk_rows']} "
          f"(CPU ms, best of {result['rounds']})")
    print(f"{'case':<18} {'chunks':>6} {'first, whole / kept':>20} "
          f"{'later p50, whole / kept':>24} {'total, whole / kept':>20}")
    for name, c in result["cases"].items():
        first = f"{c['whole_ms_first_chunk']:.1f} / {c['kept_ms_first_chunk']:.1f}"
        later = (f"{c['whole_ms_later_chunks']['p50']:.1f} / "
                 f"{c['kept_ms_later_chunks']['p50']:.1f}")
        total = f"{c['whole_ms_total']:.1f} / {c['kept_ms_total']:.1f}"
        print(f"{name:<18} {c['chunks']:>6} {first:>20} {later:>24} {total:>20}")
    print(f"-> {path}")


if __name__ == "__main__":
    sys.exit(common.bench_main("merkle_state", __doc__, run, report))
