"""A pull interrupted is a pull resumed (issue 14, item 1): a pull killed with SIGKILL
half-way through an epoch's replay leaves the store holding part of that epoch; the next
pull finishes it, in step with the chain and byte-exact, with nothing to discard (it used
to refuse the partial rows as a fork)."""

from __future__ import annotations

import gzip
import json
import sqlite3
from contextlib import closing

from chain_machines import connect_with_wallet, kjson, new_machine, ok, owner_account
from conftest import sibyl_client, write_rules


def _entities(db) -> list[tuple]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("select category, name, status, body from entities "
                            "order by category, name").fetchall()


def test_a_pull_killed_mid_epoch_is_finished_by_the_next(tmp_path, chain_home):
    a = new_machine(tmp_path / "a", chain_home)
    flag = tmp_path / "crash-flag"
    b = new_machine(tmp_path / "b", chain_home, KINT_TEST_CRASH_FLAG=str(flag))
    try:
        client = sibyl_client(a.sibyl_db, a.tenant)
        for i in range(5):
            client.set_entity("rules", f"rule-{i}", {"rule": f"rule number {i}"})
        client.storage.close()
        connected = kjson(a, "connect", "--dev")
        assert kjson(a, "push")["pushed"] == 5
        connect_with_wallet(b, owner_account(a, connected["owner"]))

        flag.write_text(f"after_set_entity {connected['space']}")
        killed = b.kint("pull")
        assert killed.returncode != 0  # the worker died under the request
        assert not flag.exists()
        partial = _entities(b.sibyl_db)
        assert 1 <= len(partial) < 5  # part of the epoch is in the store
        # The journal is the epoch's own gzip (Sibyl's cap counts it while the replay runs).
        journal = b.kint_home / f"applying-{connected['space']}.json.gz"
        assert b'"seq":1' in gzip.decompress(journal.read_bytes())

        pulled = kjson(b, "pull")
        assert pulled["applied"] == [1] and pulled["store_root_matches"] is True, pulled
        assert pulled["backups"] == []
        assert _entities(b.sibyl_db) == _entities(a.sibyl_db)
        assert kjson(b, "verify", "rule number")["decision"] == "proceed"
        assert not list(b.kint_home.glob("applying-*"))
        log = (b.kint_home / "supervisor.log").read_text(errors="replace")
        assert "an interrupted pull had begun to apply" in log
    finally:
        a.shutdown()
        b.shutdown()


def test_changes_the_interrupted_epoch_does_not_explain_are_still_a_fork(tmp_path,
                                                                         chain_home):
    a = new_machine(tmp_path / "a", chain_home)
    flag = tmp_path / "crash-flag"
    b = new_machine(tmp_path / "b", chain_home, KINT_TEST_CRASH_FLAG=str(flag))
    try:
        client = sibyl_client(a.sibyl_db, a.tenant)
        for i in range(3):
            client.set_entity("rules", f"rule-{i}", {"rule": f"rule number {i}"})
        client.storage.close()
        connected = kjson(a, "connect", "--dev")
        kjson(a, "push")
        connect_with_wallet(b, owner_account(a, connected["owner"]))
        flag.write_text(f"after_set_entity {connected['space']}")
        assert b.kint("pull").returncode != 0
        own = sibyl_client(b.sibyl_db, b.tenant)
        own.set_entity("rules", "mine", {"rule": "written on B, never anchored"})
        own.storage.close()
        fork = b.kint("pull")
        assert fork.returncode == 4 and "[FORK]" in fork.stderr
        ok(b.kint("status"))
    finally:
        a.shutdown()
        b.shutdown()


def _rules(db) -> dict[str, str]:
    with closing(sqlite3.connect(db)) as conn:
        return {name: body for name, body in conn.execute(
            "select name, body from entities where category = 'rules'")}


def test_a_lost_stores_restore_killed_mid_epoch_is_resumed_by_the_next(tmp_path, chain_home):
    """A pull restoring a lost store (deleted here) keeps the row the tenant wrote into the
    new one since. Killed half-way through the first epoch, it leaves that row beside a
    mirror behind the chain: the next pull resumes the restore (the row is one the restore
    recorded keeping) instead of refusing it as a fork. A row written after the kill is
    still a fork; gone again, the restore finishes, the kept row still unanchored. Until
    then status and doctor name the restore in progress and say `kint pull` finishes it;
    a record that does not read is a state problem, named."""
    flag = tmp_path / "crash-flag"
    k = new_machine(tmp_path / "k", chain_home, KINT_TEST_CRASH_FLAG=str(flag))
    try:
        write_rules(k.sibyl_db, k.tenant, **{f"rule-{i}": f"rule number {i}" for i in range(4)})
        connected = kjson(k, "connect", "--dev")
        assert kjson(k, "push")["pushed"] == 4
        for suffix in ("", "-wal", "-shm"):
            k.sibyl_db.with_name(k.sibyl_db.name + suffix).unlink(missing_ok=True)
        write_rules(k.sibyl_db, k.tenant, since="written after the store was lost")

        flag.write_text(f"after_set_entity {connected['space']}")
        assert k.kint("pull").returncode != 0  # the worker died under the request
        assert not flag.exists()
        assert 2 <= len(_rules(k.sibyl_db)) < 5  # the row kept, and part of the epoch
        record, = k.kint_home.glob("restoring-*.json")
        said = (f"a lost store's restore is in progress ({record}), keeping 1 row(s) written "
                f"since the store was lost (never anchored): `kint pull` finishes it")
        status = kjson(k, "status")
        assert status["restore_in_progress"] == said, status
        assert status["unanchored"] == 1, status  # the kept row, unanchored as any other
        assert f"\nrestore: {said}\n" in ok(k.kint("status")).stdout
        doctor = k.kint("doctor", "--json")
        assert doctor.returncode == 1, doctor.stdout + doctor.stderr
        pull_check = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["pull"]
        assert pull_check["ok"] is False and said in pull_check["detail"], pull_check

        write_rules(k.sibyl_db, k.tenant, after="written after the kill")
        fork = k.kint("pull")
        assert fork.returncode == 4 and "[FORK]" in fork.stderr, fork.stdout + fork.stderr
        client = sibyl_client(k.sibyl_db, k.tenant)
        client.delete_entity("rules", "after")
        client.storage.close()

        pulled = kjson(k, "pull")
        assert pulled["applied"] == [1] and pulled["store_root_matches"] is False, pulled
        assert len(_rules(k.sibyl_db)) == 5 and "since" in _rules(k.sibyl_db)
        assert not list(k.kint_home.glob("restoring-*")), "the restore is done"
        assert kjson(k, "status")["restore_in_progress"] is None
        assert kjson(k, "push", "--dry-run")["epochs"][0]["rows"] == 1
        log = (k.kint_home / "supervisor.log").read_text(errors="replace")
        assert "resuming a lost store's restore after epoch 0" in log

        record.write_text("{")
        status = kjson(k, "status")
        assert status["restore_in_progress"] is None, status
        assert any(str(record) in p for p in status["state_problems"]), status
        record.unlink()
    finally:
        k.shutdown()
