"""kint's own bytes under KINT_HOME against Sibyl's store bytes for the same rows (issue 15,
item 1), after a push and after a restore, on the real devchain with real supervisors,
workers and Sibyl stores.

For each size (1,000 and 10,000 rows; `--quick`: 200 and 1,000), in its own hermetic folder:

- a devchain under its own KINT_HOME; machine A's store written from `corpus.rows(n)`
  through Sibyl's own methods (10,000 rows as a Pro account on a throwaway signing key,
  bench/pro_account.py: the free tier cannot hold them); A `connect`s with `dev` and
  `push`es everything;
- machine B `connect`s with A's recovery code and `pull`s: a full restore, replayed through
  Sibyl's write methods in B's worker;
- after A's push and after B's restore, every file under that machine's KINT_HOME but its
  devchain/ folder is sized (`st_size`), as Sibyl's cap counts it through kint's
  `footprint_bytes`, which leaves that folder out (a local chain's files: the devchain's
  record, the `--dev` owners' keys; its bytes are reported apart, as `devchain_bytes`),
  and sorted: the space's own files (the mirror, the watermark, the epoch cache, the
  enrolment, the wraps, the key cache, the recovery code: every name carrying the space's
  16 hex) and the machine's (session key, logs, nonces, sockets), and the store is sized
  with Sibyl's own `db_size_bytes` (the store and its WAL).

Baseline: Sibyl's store bytes for the same rows, on the same machine, in the same run.
Target: the space's own bytes at most 10% of the store's, at each size, after push and
after restore. The machine's files are reported beside it (they do not grow with rows; the
logs are bounded by KINT_LOG_MAX_BYTES).

Free tier: Sibyl's 5 MiB cap counts, for kint's own client, the store plus everything
under KINT_HOME but its devchain/ folder. From the two sizes' restores (B's store and B's
KINT_HOME as the cap counts it, each a straight line in rows), the rows that fit; then
(not under `--quick`) one more cycle on the free tier at that size checks it: A writes
through Sibyl (capped: past ~2,047 of these rows Sibyl itself refuses A's writes, and A
holds what it could), pushes, and B restores (its replay is refused by the cap if the
store plus KINT_HOME does not fit; the size then goes down by 100 rows, at most three
times). `--free-at N ...` runs only such cycles, to narrow the limit down.

To measure another commit ("before"), export it (`git archive`), copy this folder into the
export and run from there with PYTHONPATH set to it (bench/README.md): the bench only uses
kint's ops and walks files, so it runs against either state layout. It leaves devchain/ out
of the totals there too, though a commit older than kint.paths.devchain_dir counted it
against the cap: that commit's cap count is `total_bytes` plus `devchain_bytes`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import common
import corpus
from bench_chain import _call, _join_devchain, _recovery_code, _restore, _start
from bench_chain import _options as sizes_option
from pro_account import ProAccount

TARGET_RATIO = 0.10
CAP_BYTES = 5 * 1024 * 1024
PRO_ACCOUNT_MIN_ROWS = 2001  # the free tier's 5 MiB holds ~2,050 of these rows
# kint.paths.DEVCHAIN_DIR, spelt here: the bench also runs against older commits' kint
# (the module's last paragraph), which have no such name (and whose cap counted the folder).
DEVCHAIN_DIR = "devchain"


def inventory(kint_home: Path, space16: str) -> dict[str, Any]:
    """Every file under KINT_HOME the cap counts by size (all but the devchain folder, as
    kint.paths.footprint_bytes walks it), split into the space's own and the machine's;
    the devchain folder's bytes apart."""
    space: dict[str, int] = {}
    machine: dict[str, int] = {}
    devchain = _folder_bytes(kint_home / DEVCHAIN_DIR)
    for root, dirs, files in os.walk(kint_home):
        if root == str(kint_home) and DEVCHAIN_DIR in dirs:
            dirs.remove(DEVCHAIN_DIR)
        for name in files:
            path = Path(root, name)
            try:
                size = os.lstat(path).st_size
            except FileNotFoundError:
                continue
            rel = str(path.relative_to(kint_home))
            (space if space16 in rel else machine)[rel] = size
    return {"space_bytes": sum(space.values()), "machine_bytes": sum(machine.values()),
            "total_bytes": sum(space.values()) + sum(machine.values()),
            "space_by_kind": _by_kind(space), "machine_files": machine,
            "space_files": len(space), "devchain_bytes": devchain}


def _folder_bytes(folder: Path) -> int:
    """Every file's `st_size` under `folder` (0 when it does not exist): the devchain's
    bytes, reported apart because the cap leaves them out. A file removed during the walk
    counts nothing rather than failing the run."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(Path(root, name)).st_size
            except FileNotFoundError:
                continue
    return total


def _by_kind(files: dict[str, int]) -> dict[str, int]:
    """The space's bytes by what they are: mirror, watermark, each kind of epoch-cache file,
    custody."""
    out: dict[str, int] = {}
    for rel, size in files.items():
        name = Path(rel).name
        if rel.startswith("epochs"):
            kind = "epoch cache " + name[8:]  # what follows NNNNNNNN
        else:
            kind = name.split("-", 1)[0]
        out[kind] = out.get(kind, 0) + size
    return dict(sorted(out.items()))


def _store_bytes(db: Path) -> int:
    from sibyl_memory_client.storage import db_size_bytes

    return db_size_bytes(db)


def _side(kint_home: Path, db: Path, space16: str, rows: int) -> dict[str, Any]:
    inv = inventory(kint_home, space16)
    store = _store_bytes(db)
    return {**inv, "store_bytes": store, "rows": rows,
            "space_per_row": inv["space_bytes"] / rows, "store_per_row": store / rows,
            "ratio_space_over_store": inv["space_bytes"] / store,
            "ratio_total_over_store": inv["total_bytes"] / store}


def cycle(n: int, tag: str, free_tier: bool = False) -> dict[str, Any]:
    """Write n rows on A, push, restore on B; both sides' bytes."""
    from kint.chain import devchain
    from kint.spaces import space_id

    data = corpus.rows(n)
    with common.hermetic(f"footprint-{tag}") as env:
        chain = common.Machine("chain", env.root / "chain")
        chain.kint_home.mkdir(parents=True, mode=0o700)
        devchain.start(chain.kint_home)
        env.on_exit.append(lambda: devchain.stop(chain.kint_home))
        account = None if free_tier or n < PRO_ACCOUNT_MIN_ROWS else \
            ProAccount.signed_in_here()
        a = common.Machine("a", env.root / "a")
        _join_devchain(chain, a)
        written = corpus.write_store(a.sibyl_db, common.TENANT, data, account=account)
        rows = written.written
        _start(env, a, account)
        _, connected = _call(a, "connect", {"dev": True})
        _, pushed = _call(a, "push", timeout_s=900)
        if pushed["pushed"] != rows:
            raise RuntimeError(f"push anchored {pushed['pushed']} rows, not {rows}")
        common.stop_supervisor_at(a.kint_home, env.cleanup_notes, "a")
        space16 = space_id(common.TENANT)[:16]
        after_push = _side(a.kint_home, a.sibyl_db, space16, rows)
        code = _recovery_code(connected["recovery_file"])
        restore = _restore(env, chain, "b", {"owner": connected["owner"],
                                             "recovery_code": code}, account)
        b = common.Machine("b", env.root / "b")
        out: dict[str, Any] = {
            "rows_requested": n, "rows": rows, "epochs": len(pushed["epochs"]),
            "account": "Pro (bench/pro_account.py)" if account else "free tier",
            "a_writes_stopped_by": written.stopped_by, "after_push": after_push,
            "restore_ok": restore["ok"], "env": env.report()}
        if restore["ok"]:
            restored = restore.pop("rows")
            out["restore_rows_match_a"] = len(restored) == rows
            out["after_restore"] = _side(b.kint_home, b.sibyl_db, space16, rows)
        else:
            out["restore_refusal"] = {k: restore.get(k) for k in
                                      ("code", "message", "refused_by_cap", "left_behind")}
    return out


def fit(sizes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Rows a free-tier machine can hold and restore, from the restores' bytes: the store
    and everything under KINT_HOME, each a line through the two sizes."""
    points = [(s["rows"], s["after_restore"]) for s in sizes if s.get("after_restore")]
    if len(points) < 2:
        return None
    (n1, s1), (n2, s2) = points[0], points[-1]
    per_row = {k: (s2[k] - s1[k]) / (n2 - n1) for k in ("store_bytes", "total_bytes",
                                                         "space_bytes")}
    fixed = {k: s1[k] - per_row[k] * n1 for k in per_row}
    both = per_row["store_bytes"] + per_row["total_bytes"]
    rows = int((CAP_BYTES - fixed["store_bytes"] - fixed["total_bytes"]) / both)
    store_only = int((CAP_BYTES - fixed["store_bytes"]) / per_row["store_bytes"])
    return {"per_row": per_row, "fixed": fixed, "rows_store_and_kint_home": rows,
            "rows_store_alone": store_only, "cap_bytes": CAP_BYTES}


def free_tier_check(estimate: int) -> list[dict[str, Any]]:
    attempts = []
    n = estimate
    for _ in range(3):
        result = cycle(n, f"free-{n}", free_tier=True)
        attempts.append(result)
        if result["restore_ok"]:
            break  # (fewer rows than asked: Sibyl's own cap stopped A's writes there)
        n = min(n, result["rows"]) - 100
    return attempts


def run(quick: bool = False, sizes: list[int] | None = None, free_check: bool = True,
        free_at: list[int] | None = None) -> dict[str, Any]:
    """`free_at`: only free-tier cycles at those sizes (to narrow down the largest that
    restores), no sizes and no fit."""
    load_before = list(os.getloadavg())
    sizes = [] if free_at else sizes or ([200, 1000] if quick else [1000, 10000])
    per_size = [cycle(n, str(n)) for n in sizes]
    estimate = fit(per_size)
    check = [cycle(n, f"free-{n}", free_tier=True) for n in free_at] if free_at else \
        free_tier_check(estimate["rows_store_and_kint_home"]) \
        if estimate and free_check and not quick else None
    met = bool(per_size) and all(s["restore_ok"] for s in per_size) and all(
        s[side]["ratio_space_over_store"] <= TARGET_RATIO
        for s in per_size for side in ("after_push", "after_restore"))
    envs = [s.pop("env") for s in per_size + (check or [])]
    return {
        "name": "footprint", "quick": quick, "machine": common.machine(),
        "loadavg_before": load_before, "loadavg_after": list(os.getloadavg()),
        "sizes": per_size, "free_tier": {"estimate": estimate, "check": check},
        "target": {"description": "the space's own bytes under KINT_HOME at most 10% of "
                                  "Sibyl's store bytes for the same rows, after push and "
                                  "after restore", "max_ratio": TARGET_RATIO, "met": met},
        "env": {"supervisor_log_problems": [p for e in envs
                                            for p in e["supervisor_log_problems"]],
                "cleanup_notes": [p for e in envs for p in e["cleanup_notes"]],
                "supervisor_log_copy": None},
    }


def report(result: dict[str, Any], path: Path) -> None:
    for s in result["sizes"]:
        print(f"{s['rows']} rows ({s['account']}, {s['epochs']} epochs):")
        for side in ("after_push", "after_restore"):
            x = s.get(side)
            if x is None:
                print(f"  {side}: restore refused: {s.get('restore_refusal')}")
                continue
            print(f"  {side}: space {x['space_bytes']:,} B ({x['space_per_row']:.0f} B/row) "
                  f"vs store {x['store_bytes']:,} B ({x['store_per_row']:.0f} B/row) = "
                  f"{x['ratio_space_over_store']:.3f}x; all of KINT_HOME {x['total_bytes']:,}"
                  f" B = {x['ratio_total_over_store']:.3f}x; by kind {x['space_by_kind']}")
    est = result["free_tier"]["estimate"]
    if est:
        print(f"free tier (5 MiB over store + KINT_HOME): ~{est['rows_store_and_kint_home']} "
              f"rows (the store alone: ~{est['rows_store_alone']})")
    for c in result["free_tier"]["check"] or []:
        total = (c.get("after_restore") or {}).get("total_bytes")
        store = (c.get("after_restore") or {}).get("store_bytes")
        print(f"  checked at {c['rows_requested']} rows: A held {c['rows']}, restore "
              f"{'ok' if c['restore_ok'] else 'refused'}"
              + (f" (B: store {store:,} + KINT_HOME {total:,} = {store + total:,} B)"
                 if total else ""))
    if result["sizes"]:
        print(f"target met: {result['target']['met']}")
    print(f"-> {path}")


def _options(parser: Any) -> None:
    sizes_option(parser)
    parser.add_argument("--no-free-check", dest="free_check", action="store_false",
                        help="skip the free-tier restore at the estimated size")
    parser.add_argument("--free-at", type=int, nargs="+", metavar="N",
                        help="only free-tier cycles (write, push, restore) at these sizes")


def main() -> int:
    return common.bench_main("footprint", __doc__, run, report, _options)


if __name__ == "__main__":
    sys.exit(main())
