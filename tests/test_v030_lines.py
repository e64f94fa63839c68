"""kint v0.3.0's lines a script may match on: a cold start's summary, printed from a
result as the worker returns it (the devchain cannot give one that asks a second RPC: it
has one local endpoint, and its chain id is not Base's), `kint recovery-code` on a machine
that never connected, and a pull over a store with rows and no mirror. The lines the
devchain can produce are checked end to end in test_chain_e2e.py, test_verify.py and
test_join.py."""

from __future__ import annotations

import json

import pytest

from chain_machines import kjson, on
from conftest import write_store
from machines_together import machines_started

from kint import render_pull

DIGEST = "b64dcde033b03249" + "0" * 48


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    """(`machine`, the machine that loses its local secret), their supervisors started side
    by side (machines_together.machines_started)."""
    with machines_started([tmp_path_factory.mktemp("v030-lines"),
                           tmp_path_factory.mktemp("v030-lines-secret")], chain_home) as made:
        yield made


@pytest.fixture(scope="module")
def machine(machines):
    """One machine on the devchain for the tests that each connect a space of their own (a
    profile store, `Sandbox.profile_db`): what they take away (a space's key cache, mirror or
    recovery file) is that space's alone, so none needs a machine started for it."""
    return machines[0]


def test_a_cold_start_pull_ends_with_v030s_summary_and_its_second_opinion_line():
    result = {
        "applied": [1], "backups": [], "skipped": [], "closed": [], "warnings": [], "gap": [],
        "rows_total": 5, "rpcs_agreed": True, "single_rpc": None,
        "message": "restored 1 epoch(s), 5 rows; head seq 1 at block 51082012; store root "
                   "matches the anchored root",
        "applied_epochs": [{"seq": 1, "block": 51082012, "rows": 5, "deletions": 0}],
        "head": {"seq": 1, "block": 51082012, "digest": DIGEST},
        "chain_head": {"seq": 1, "block": 51082012, "digest": DIGEST},
    }
    # 03-new-machine.md, "What it prints".
    assert render_pull.pull_lines(result) + render_pull.pull_summary_lines(result) == [
        "pull: cold start, both RPCs agree: head seq 1, digest b64dcde033b03249, block 51082012",
        "pull: applied epoch 1 (5 rows, 0 deletions) from block 51082012",
        "restored 1 epoch(s), 5 rows; head seq 1 at block 51082012; store root matches the "
        "anchored root",
        "cold start: two RPCs agreed on the head: True",
    ]


def test_a_row_that_did_not_come_back_is_a_pull_warning_line_naming_its_epoch():
    # 03-new-machine.md, "What every epoch must pass": `pull: WARNING epoch N: ...`.
    warning = "epoch 2: entity notes/x: stored text differs from the anchored leaf after replay"
    assert render_pull.pull_lines({"applied_epochs": [], "warnings": [warning]}) == [
        f"pull: WARNING {warning}"]


def test_a_pull_without_a_second_opinion_ends_with_its_summary():
    for agreed in (None, False):
        assert render_pull.pull_summary_lines({"message": "already at the chain head (epoch 3)",
                                          "rpcs_agreed": agreed}) == [
            "already at the chain head (epoch 3)"]


def test_recovery_code_on_a_machine_that_never_connected_refuses_in_v030s_words(sandbox):
    # 09-cli.md, "kint recovery-code": no data key cached, whatever the reason (a real
    # supervisor and worker, a machine that never connected).
    out = sandbox.kint("recovery-code")
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.splitlines()[0] == ("kint: error: no data key cached on this machine: kint "
                                          "connect first [NO_DATA_KEY]"), out.stderr
    out = sandbox.kint("recovery-code", "--json")  # the same refusal, as one object on stdout
    assert out.returncode == 2 and out.stderr == "", out.stdout + out.stderr
    assert json.loads(out.stdout) == {"error": "NO_DATA_KEY", "message": "no data key cached on "
                                      "this machine: kint connect first",
                                      "hint": "run `kint connect --owner ADDRESS` first"}
    assert not list(sandbox.kint_home.glob("RECOVERY-*"))


def test_without_the_cached_key_recovery_code_and_pull_refuse_in_v030s_words(machine):
    # The recovery-code words on a connected machine whose key cache is gone; the hint says
    # what brings the key back (it gave NO_DATA_KEY's default, about changes awaiting a push).
    sb, db = machine, machine.profile_db("keyless")
    space16 = kjson(sb, *on(db, "connect", "--dev"))["space"][:16]
    (sb.kint_home / f"vault-{space16}.aes").unlink()
    out = sb.kint(*on(db, "recovery-code"))
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.splitlines() == [
        "kint: error: no data key cached on this machine: kint connect first [NO_DATA_KEY]",
        "hint: run `kint connect --owner ADDRESS` again (the wallet's signature or the vault "
        "passphrase) to cache the data key, then `kint recovery-code`"], out.stderr
    # 03-new-machine.md, "Pull": "no data key on this machine: run `kint connect` ...
    # first", exit 5 (09-cli.md: a pull with no cached data key lands there), and the
    # --json refusal in the same words.
    out = sb.kint(*on(db, "pull"))
    assert out.returncode == 5, out.stdout + out.stderr
    first = out.stderr.splitlines()[0]
    assert first.startswith("kint: error: no data key on this machine: run `kint connect` "
                            f"for space {space16} first"), out.stderr
    assert first.endswith("[NO_DATA_KEY]"), out.stderr
    out = sb.kint(*on(db, "pull", "--json"))
    assert out.returncode == 5, out.stdout + out.stderr
    assert json.loads(out.stdout)["message"].startswith(
        "no data key on this machine: run `kint connect`")


def test_a_store_with_rows_and_no_mirror_is_refused_in_v030s_words(machine):
    # 03-new-machine.md, "The fork check": rows and no mirror at all, a fork (exit 4).
    sb, db = machine, machine.profile_db("mirrorless")
    space16 = kjson(sb, *on(db, "connect", "--dev"))["space"][:16]
    write_store(db, tenant=sb.tenant)
    mirror = sb.kint_home / f"mirror-{space16}.json.gz"
    mirror.unlink()
    out = sb.kint(*on(db, "pull"))
    assert out.returncode == 4, out.stdout + out.stderr
    assert "Refusing to merge blindly [FORK]" in out.stderr, out.stderr
    assert (f"the local store already holds 2 rows for tenant {sb.tenant} and this machine "
            "has no record of what the chain last saw.") in out.stderr  # 14-agents.md
    assert not mirror.exists() and db.exists()  # nothing written, nothing moved


def test_with_no_local_passphrase_push_and_pull_refuse_in_v030s_words_exit_3(machines):
    """05-keys.md: with no local passphrase the session key cannot be loaded, `no local
    passphrase: set KINT_SESSION_PASSPHRASE`; 09-cli.md: exit 3 for that, `pull` too. The
    same secret seals the key cache, and pull said so as a missing data key, exit 5."""
    from conftest import sibyl_client

    sb = machines[1]  # its own: the local secret it loses is the machine's, every space's
    try:
        write_store(sb.sibyl_db, tenant=sb.tenant)
        kjson(sb, "connect", "--dev")
        kjson(sb, "push")
        sb.shutdown()  # a worker that unlocked the keys holds them: the next one cannot
        (sb.kint_home / "local.secret").unlink()
        sb.start_entitled()
        sibyl_client(sb.sibyl_db, sb.tenant).set_entity("rules", "later", {"rule": "kept"})
        for command in ("pull", "push"):
            out = sb.kint(command)
            assert out.returncode == 3, (command, out.stdout, out.stderr)
            # v0.3.0's words alone: not "then run kint connect", which the hint below
            # contradicts (a connect cannot unlock the session key sealed under the secret).
            lines = out.stderr.splitlines()
            assert lines[0] == ("kint: error: no local passphrase: set "
                                "KINT_SESSION_PASSPHRASE [NO_SESSION_KEY]"), out.stderr
            assert lines[1].startswith("hint: this machine's session key and key cache are "
                                       "sealed under its local passphrase"), out.stderr
    finally:
        sb.shutdown()


def test_the_machine_that_made_the_vault_refuses_to_push_without_its_recovery_file(machine):
    """09-cli.md, "kint push" and "kint recovery-code": on the machine that created the
    vault, push refuses while `RECOVERY-<space16>.txt` is missing or empty (any other push
    refusal: exit 5), nothing anchored and nothing dropped; `kint recovery-code` writes it
    again (0600) from the cached key, and the push goes through."""
    from conftest import sibyl_client

    sb, db = machine, machine.profile_db("recovery")
    write_store(db, tenant=sb.tenant)
    space16 = kjson(sb, *on(db, "connect", "--dev"))["space"][:16]
    recovery = sb.kint_home / f"RECOVERY-{space16}.txt"
    code = recovery.read_text()
    kjson(sb, *on(db, "push"))
    head = kjson(sb, *on(db, "status"))["head"]["seq"]
    sibyl_client(db, sb.tenant).set_entity("rules", "later", {"rule": "kept"})
    for gone in (lambda: recovery.unlink(), lambda: recovery.write_text("")):
        gone()
        out = sb.kint(*on(db, "push"))
        assert out.returncode == 5, (out.stdout, out.stderr)
        assert "created the vault but its recovery code file" in out.stderr, out.stderr
        # The hint names the file's path, which kint-server carries to an agent (it said
        # "write it again", and the agent's words a KINT_HOME/RECOVERY-<space16>.txt).
        assert (f"hint: run `kint recovery-code` to write {recovery} again and copy it off "
                f"the machine") in out.stderr, out.stderr
        assert out.stderr.count(str(recovery)) == 1, out.stderr  # the hint's, not twice
        status = kjson(sb, *on(db, "status"))
        assert status["head"]["seq"] == head, status
        assert status["unanchored_changes"] == {"changed": 1, "deleted": 0}, status
    written = sb.kint(*on(db, "recovery-code"))
    assert written.returncode == 0, written.stderr
    assert recovery.read_text() == code and (recovery.stat().st_mode & 0o777) == 0o600
    assert kjson(sb, *on(db, "push"))["pushed"] == 1


def test_a_push_of_two_epochs_prints_v030s_lines_in_its_order():
    # 02-quickstart.md, "The first push": what each epoch carries (before it is sent, in
    # v0.3.0), the head, then where each landed. The calldata is push(owner, space, prev,
    # ct)'s: selector, four words, the length word, the envelope in whole words.
    from kint.commands.chain import anchored_lines

    epochs = [{"seq": 3, "rows": 80, "deleted": 2, "bucket": 16384, "bytes": 16544,
               "tx": "ab" * 32, "block": 51081900, "cost_wei": 2_102_000_000_000},
              {"seq": 4, "rows": 1, "deleted": 0, "bucket": 4096, "bytes": 4257,
               "tx": "0x" + "cd" * 32, "block": 51081901, "cost_wei": None}]
    assert anchored_lines({"epochs": epochs, "head_seq": 4}) == [
        "push: epoch 3, 80 rows, 2 deletions, bucket 16384 B, 16708 B calldata",
        "push: epoch 4, 1 rows, 0 deletions, bucket 4096 B, 4452 B calldata",
        "anchored 2 epoch(s); head seq 4",
        f"  epoch 3: tx 0x{'ab' * 32} block 51081900 bucket 16384 B rows 80 del 2 cost "
        f"0.000002102 ETH",
        f"  epoch 4: tx 0x{'cd' * 32} block 51081901 bucket 4096 B rows 1 del 0",
    ]
