"""Several tenants in one Sibyl store (Sibyl keys rows by tenant in one file), on a real
anvil, with a real supervisor, workers and kint-server: a store deleted by hand comes back
for every tenant that pulls, not only the first (whose pull remakes the file), and a
kint-server's watcher does not anchor the deletion of every row of a tenant whose rows the
remade store does not hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain_machines import anchored_then_forgotten, kjson, new_machine
from conftest import sibyl_client
from conftest import write_rules as write
from kint.commands.exit_codes import CHAIN_MOVED

from mcp_session import AgentProcess

OTHER = "kint-shared-other"


def names(db: Path, tenant: str) -> dict[str, str]:
    client = sibyl_client(db, tenant)
    try:
        return {e["name"]: e["body"]["rule"] for e in client.list_entities(category="rules")}
    finally:
        client.storage.close()


def delete_store(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)


@pytest.fixture(scope="module")
def shared(tmp_path_factory, chain_home):
    """One machine, two tenants on Sibyl's own store, each connected (an owner of its own)
    and anchored: the machine's own tenant with two rules, the other with one."""
    sb = new_machine(tmp_path_factory.mktemp("shared"), chain_home,
                     KINT_POLL_SECONDS="1", KINT_QUIET_SECONDS="2")
    try:
        write(sb.sibyl_db, sb.tenant, **{"mine-one": "first of mine", "mine-two": "second"})
        write(sb.sibyl_db, OTHER, **{"theirs": "the other tenant's rule"})
        for tenant in (sb.tenant, OTHER):
            kjson(sb, "--tenant", tenant, "connect", "--dev")
            assert kjson(sb, "--tenant", tenant, "push")["pushed"] >= 1
    except BaseException:
        sb.shutdown()
        raise
    yield sb
    sb.shutdown()


def _in_step(sb, tenant: str) -> None:
    assert kjson(sb, "--tenant", tenant, "push", "--dry-run")["epochs"] == []


def test_a_deleted_shared_store_comes_back_for_each_tenant_that_pulls(shared):
    """The first tenant's pull remakes the file; the second's used to find it there, none of
    its rows in it, and say "already at the chain head" (its next push would have anchored
    the deletion of every row). Each restores its own from the first epoch; a row the second
    wrote into the remade store before its pull stays, unanchored."""
    sb, mine = shared, shared.tenant
    delete_store(sb.sibyl_db)

    first = kjson(sb, "--tenant", mine, "pull")
    assert first["applied"] and first["store_root_matches"] is True, first
    assert names(sb.sibyl_db, mine) == {"mine-one": "first of mine", "mine-two": "second"}
    assert names(sb.sibyl_db, OTHER) == {}

    write(sb.sibyl_db, OTHER, **{"since": "written after the store was remade"})
    second = kjson(sb, "--tenant", OTHER, "pull")
    assert second["applied"], second
    assert second["message"].startswith("restored "), second
    assert second["store_root_matches"] is False  # the row written since is not anchored
    assert names(sb.sibyl_db, OTHER) == {"theirs": "the other tenant's rule",
                                         "since": "written after the store was remade"}
    assert names(sb.sibyl_db, mine) == {"mine-one": "first of mine", "mine-two": "second"}
    _in_step(sb, mine)
    dry = kjson(sb, "--tenant", OTHER, "push", "--dry-run")
    assert [(e["rows"], e["deleted"]) for e in dry["epochs"]] == [(1, 0)], dry
    assert kjson(sb, "--tenant", OTHER, "push")["deleted_rows"] == 0
    _in_step(sb, OTHER)


def test_the_watcher_holds_over_a_store_another_tenants_pull_remade(shared):
    """The other tenant's kint-server runs while the store is deleted and this tenant's pull
    remakes it: the watcher sees a store that holds none of the other tenant's anchored rows
    and holds its push (it would anchor the deletion of every one), naming the plain pull
    that restores them; that pull, from the agent, ends the hold."""
    sb, mine = shared, shared.tenant
    head = kjson(sb, "--tenant", OTHER, "status")["head"]["seq"]
    log_path = sb.kint_home / "supervisor.log"
    holds = log_path.read_text().count("push HELD (watcher)")
    agent = AgentProcess({**sb.env, "KINT_TENANT": OTHER}).start()
    try:
        assert agent.call("memory_recall", category="rules", name="theirs")["ok"] is True
        delete_store(sb.sibyl_db)
        assert kjson(sb, "--tenant", mine, "pull")["applied"]
        sb.wait_for(lambda: log_path.read_text().count("push HELD (watcher)") > holds,
                    what="the watcher's push to be held", timeout=60, interval=0.25)
        held = agent.call("memory_status")["held"]
        assert held["reason"] == "watcher", held
        assert held["message"].startswith("refusing to anchor: the store holds none of the "), held
        assert "`kint pull` restores them" in held["message"]
        refused = agent.call("memory_push")
        assert refused["ok"] is False and refused["error"] == "HELD", refused
        # Nothing was refused here: the hold's hint names the pull that restores the rows
        # (it said "memory_verify still refuses the row", a hold's over a refused value), the
        # human's to choose, as every HELD is (a pull would undo a deletion that was meant).
        assert refused["hint"].startswith("stop and tell the human: the store lost every "
                                          "anchored row"), refused
        assert "memory_pull (or `kint pull`) restores them" in refused["hint"], refused
        assert kjson(sb, "--tenant", OTHER, "status")["chain_head"]["seq"] == head

        pulled = agent.call("memory_pull")
        assert pulled["ok"] is True and pulled["applied"], pulled
        assert agent.call("memory_status")["held"] is None
        assert agent.call("memory_verify", query="other tenant rule")["decision"] == "proceed"
    finally:
        agent.close()
    assert kjson(sb, "--tenant", OTHER, "status")["chain_head"]["seq"] == head
    _in_step(sb, OTHER)
    _in_step(sb, mine)


def test_a_lost_stores_restore_never_overwrites_a_row_written_since(shared, tmp_path):
    """A row written into the new store under a key an epoch to apply writes or deletes (here
    a rule anchored, then deleted) would be overwritten, then deleted, by the restore: the
    pull refuses FORK before writing anything, and the row stays as written."""
    sb, tenant = shared, "kint-shared-third"
    db = tmp_path / "third.db"
    write(db, tenant, **{"kept": "anchored and kept", "gone": "anchored, then deleted"})
    kjson(sb, "--tenant", tenant, "--db", str(db), "connect", "--dev")
    kjson(sb, "--tenant", tenant, "--db", str(db), "push")
    client = sibyl_client(db, tenant)
    client.delete_entity("rules", "gone")
    client.storage.close()
    assert kjson(sb, "--tenant", tenant, "--db", str(db), "push")["deleted_rows"] == 1
    delete_store(db)
    write(db, tenant, **{"gone": "written again after the store was lost"})

    out = sb.kint("--tenant", tenant, "--db", str(db), "pull")
    assert out.returncode == CHAIN_MOVED and "[FORK]" in out.stderr, \
        out.stdout + out.stderr
    assert "holds none of this tenant's anchored rows" in out.stderr
    assert "overwrite or delete 1 of them (entity rules/gone)" in out.stderr
    assert names(db, tenant) == {"gone": "written again after the store was lost"}


def test_a_store_whose_rows_were_forgotten_is_not_lost(shared, tmp_path):
    """Every anchored row forgotten through Sibyl (memory_forget archives an entity) also
    leaves a store holding none of them; its archive tells it from a lost one, so the pull
    does not bring them back and the push anchors the deletions."""
    sb, tenant = shared, "kint-shared-forgets"
    db = anchored_then_forgotten(sb, tmp_path, tenant)

    # verify says so before the pull and the push below bear it out (test_dogfood35.py).
    refused = kjson(sb, "--tenant", tenant, "--db", str(db), "verify", "anchored")
    assert refused["decision"] == "refuse" and refused["reason"].endswith(
        "; 1 row(s) anchored for this tenant were forgotten here (the next `kint push` "
        "anchors their deletion)"), refused
    pulled = kjson(sb, "--tenant", tenant, "--db", str(db), "pull")
    assert pulled["applied"] == [] and pulled["message"].startswith("already at the chain head")
    assert names(db, tenant) == {}
    assert kjson(sb, "--tenant", tenant, "--db", str(db), "push")["deleted_rows"] == 1
