"""A pull interrupted is a pull resumed (issue 14, item 1): a pull killed with SIGKILL
half-way through an epoch's replay leaves the store holding part of that epoch; the next
pull finishes it, in step with the chain and byte-exact, with nothing to discard (it used
to refuse the partial rows as a fork).

Two machines for the module, A and B (B's workers carry the crash points,
tests/support/kint_test_faults.py); each test works in a space of its own, a profile store
of one name on each machine (one label, so one space), and the crash flag names that space."""

from __future__ import annotations

import gzip
import json
import sqlite3
from contextlib import closing

import pytest

from chain_machines import connect_with_wallet, kjson, ok, on, owner_account
from conftest import Sandbox, sibyl_client, write_rules
from machines_together import new_machines


@pytest.fixture(scope="module")
def pair(tmp_path_factory, chain_home):
    """(A, B, B's crash flag), the supervisors started side by side
    (machines_together.new_machines)."""
    root = tmp_path_factory.mktemp("pull-resume")
    flag = root / "crash-flag"
    a, b = new_machines([root / "a", root / "b"], chain_home,
                        envs=[{}, {"KINT_TEST_CRASH_FLAG": str(flag)}])
    yield a, b, flag
    a.shutdown()
    b.shutdown()


def log_since(sb: Sandbox, offset: int) -> str:
    """What the machine's supervisor log gained past `offset` (this test's lines)."""
    with open(sb.kint_home / "supervisor.log", "rb") as fh:
        fh.seek(offset)
        return fh.read().decode(errors="replace")


def log_size(sb: Sandbox) -> int:
    log = sb.kint_home / "supervisor.log"
    return log.stat().st_size if log.exists() else 0


def _entities(db) -> list[tuple]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("select category, name, status, body from entities "
                            "order by category, name").fetchall()


def test_a_pull_killed_mid_epoch_is_finished_by_the_next(pair):
    a, b, flag = pair
    adb, bdb = a.profile_db("killed"), b.profile_db("killed")
    log_from = log_size(b)
    client = sibyl_client(adb, a.tenant)
    for i in range(5):
        client.set_entity("rules", f"rule-{i}", {"rule": f"rule number {i}"})
    client.storage.close()
    connected = kjson(a, *on(adb, "connect", "--dev"))
    assert kjson(a, *on(adb, "push"))["pushed"] == 5
    connect_with_wallet(b, owner_account(a, connected["owner"]), db=bdb)

    flag.write_text(f"after_set_entity {connected['space']}")
    killed = b.kint(*on(bdb, "pull"))
    assert killed.returncode != 0  # the worker died under the request
    assert not flag.exists()
    partial = _entities(bdb)
    assert 1 <= len(partial) < 5  # part of the epoch is in the store
    # The journal is the epoch's own gzip (Sibyl's cap counts it while the replay runs).
    journal = b.kint_home / f"applying-{connected['space']}.json.gz"
    assert b'"seq":1' in gzip.decompress(journal.read_bytes())

    pulled = kjson(b, *on(bdb, "pull"))
    assert pulled["applied"] == [1] and pulled["store_root_matches"] is True, pulled
    assert pulled["backups"] == []
    assert _entities(bdb) == _entities(adb)
    assert kjson(b, *on(bdb, "verify", "rule number"))["decision"] == "proceed"
    assert not list(b.kint_home.glob(f"applying-{connected['space']}*"))
    assert "an interrupted pull had begun to apply" in log_since(b, log_from)


def test_changes_the_interrupted_epoch_does_not_explain_are_still_a_fork(pair):
    a, b, flag = pair
    adb, bdb = a.profile_db("forked"), b.profile_db("forked")
    client = sibyl_client(adb, a.tenant)
    for i in range(3):
        client.set_entity("rules", f"rule-{i}", {"rule": f"rule number {i}"})
    client.storage.close()
    connected = kjson(a, *on(adb, "connect", "--dev"))
    kjson(a, *on(adb, "push"))
    connect_with_wallet(b, owner_account(a, connected["owner"]), db=bdb)
    flag.write_text(f"after_set_entity {connected['space']}")
    assert b.kint(*on(bdb, "pull")).returncode != 0
    assert not flag.exists()
    own = sibyl_client(bdb, b.tenant)
    own.set_entity("rules", "mine", {"rule": "written on B, never anchored"})
    own.storage.close()
    fork = b.kint(*on(bdb, "pull"))
    assert fork.returncode == 4 and "[FORK]" in fork.stderr
    ok(b.kint(*on(bdb, "status")))


def _rules(db) -> dict[str, str]:
    with closing(sqlite3.connect(db)) as conn:
        return {name: body for name, body in conn.execute(
            "select name, body from entities where category = 'rules'")}


def test_a_lost_stores_restore_killed_mid_epoch_is_resumed_by_the_next(pair):
    """A pull restoring a lost store (deleted here) keeps the row the tenant wrote into the
    new one since. Killed half-way through the first epoch, it leaves that row beside a
    mirror behind the chain: the next pull resumes the restore (the row is one the restore
    recorded keeping) instead of refusing it as a fork. A row written after the kill is
    still a fork; gone again, the restore finishes, the kept row still unanchored. Until
    then status and doctor name the restore in progress and say `kint pull` finishes it;
    a record that does not read is a state problem, named."""
    _, k, flag = pair
    db = k.profile_db("lost")
    log_from = log_size(k)
    write_rules(db, k.tenant, **{f"rule-{i}": f"rule number {i}" for i in range(4)})
    connected = kjson(k, *on(db, "connect", "--dev"))
    assert kjson(k, *on(db, "push"))["pushed"] == 4
    for suffix in ("", "-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    write_rules(db, k.tenant, since="written after the store was lost")

    flag.write_text(f"after_set_entity {connected['space']}")
    assert k.kint(*on(db, "pull")).returncode != 0  # the worker died under the request
    assert not flag.exists()
    assert 2 <= len(_rules(db)) < 5  # the row kept, and part of the epoch
    record, = k.kint_home.glob("restoring-*.json")
    said = (f"a lost store's restore is in progress ({record}), keeping 1 row(s) written "
            f"since the store was lost (never anchored): `kint pull` finishes it")
    status = kjson(k, *on(db, "status"))
    assert status["restore_in_progress"] == said, status
    assert status["unanchored"] == 1, status  # the kept row, unanchored as any other
    assert f"\nrestore: {said}\n" in ok(k.kint(*on(db, "status"))).stdout
    doctor = k.kint(*on(db, "doctor", "--json"))
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    pull_check = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["pull"]
    assert pull_check["ok"] is False and said in pull_check["detail"], pull_check

    write_rules(db, k.tenant, after="written after the kill")
    fork = k.kint(*on(db, "pull"))
    assert fork.returncode == 4 and "[FORK]" in fork.stderr, fork.stdout + fork.stderr
    client = sibyl_client(db, k.tenant)
    client.delete_entity("rules", "after")
    client.storage.close()

    pulled = kjson(k, *on(db, "pull"))
    assert pulled["applied"] == [1] and pulled["store_root_matches"] is False, pulled
    assert len(_rules(db)) == 5 and "since" in _rules(db)
    assert not list(k.kint_home.glob("restoring-*")), "the restore is done"
    assert kjson(k, *on(db, "status"))["restore_in_progress"] is None
    assert kjson(k, *on(db, "push", "--dry-run"))["epochs"][0]["rows"] == 1
    assert "resuming a lost store's restore after epoch 0" in log_since(k, log_from)

    record.write_text("{")
    status = kjson(k, *on(db, "status"))
    assert status["restore_in_progress"] is None, status
    assert any(str(record) in p for p in status["state_problems"]), status
    record.unlink()
