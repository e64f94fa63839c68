"""kint's state and Sibyl's cap walk (v0.3.0's judge claim "all kint state lives outside
the paths Sibyl's cap walk sizes").

Sibyl's free-tier cap sums every store an agent on the machine resolves
(`sibyl_memory_client._capcheck.aggregate_db_size`: the store written to,
~/.sibyl-memory/memory.db, Hermes' stores, SIBYL_MEMORY_DB); kint volunteers the bytes
under KINT_HOME on top (kint.sibyl_client.cap_sizes). A kint file kept among or beside
Sibyl's stores would be counted twice, or fall between the two counts. So a whole round on
the devchain (connect, a write through Sibyl's client, push, pull, verify) must leave
every file kint made under KINT_HOME, and nothing new in HOME but the store's own files;
and the two halves `status` reports must be Sibyl's own measurement of the store alone
and kint's bytes, each counted once.
"""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

from chain_machines import kjson, new_machine, ok
from conftest import write_rules

# What Sibyl's own client makes beside a store it writes (SQLite's WAL files, the tier
# cache kint's client keeps where Sibyl's server keeps it): Sibyl's files, not kint's.
STORE_COMPANIONS = ("memory.db", "memory.db-wal", "memory.db-shm", "tier_cache.json")


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def _walk_bytes(root: Path) -> int:
    return sum(p.lstat().st_size for p in _files(root))


def test_kint_keeps_its_state_under_kint_home_and_out_of_sibyls_cap_walk(tmp_path,
                                                                        chain_home):
    sb = new_machine(tmp_path / "machine", chain_home)
    try:
        ok(sb.kint("connect", "--dev"))
        write_rules(sb.sibyl_db, sb.tenant, release="never ship on a Friday")
        before = _files(sb.home)
        ok(sb.kint("push"))
        ok(sb.kint("pull"))
        assert kjson(sb, "verify", "release rule")["decision"] == "proceed"
        status = kjson(sb, "status")
    finally:
        sb.shutdown()

    made = sorted(_files(sb.home) - before)
    strays = [p for p in made
              if p.parent != sb.sibyl_db.parent or p.name not in STORE_COMPANIONS]
    assert strays == [], f"kint wrote outside KINT_HOME: {strays}"
    assert {"wraps", "vault", "mirror", "watermark"} <= {
        p.name.split("-")[0] for p in sb.kint_home.iterdir()}

    from sibyl_memory_client._capcheck import aggregate_db_size
    from sibyl_memory_client.storage import db_size_bytes

    # Sibyl's walk, in the machine's environment, sizes the store and nothing of kint's:
    # the same figure as the store's own size, whatever KINT_HOME holds.
    machine_env = {k: v for k, v in sb.env.items() if k in ("HOME", "HERMES_HOME")}
    with mock.patch.dict(os.environ, machine_env):
        os.environ.pop("SIBYL_MEMORY_DB", None)
        sibyl = aggregate_db_size(sb.sibyl_db)
        assert sibyl == db_size_bytes(sb.sibyl_db) > 0
        (sb.kint_home / "filler.bin").write_bytes(b"\0" * 100_000)
        assert aggregate_db_size(sb.sibyl_db) == sibyl
    cap = status["cap"]
    assert cap["sibyl_bytes"] == sibyl
    # kint's half is the walk of KINT_HOME (made before the filler; its log may grow since).
    assert 0 < cap["kint_bytes"] <= _walk_bytes(sb.kint_home) - 100_000
    assert cap["volunteered_total"] == cap["sibyl_bytes"] + cap["kint_bytes"]
