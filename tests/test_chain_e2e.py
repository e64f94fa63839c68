"""Memory travels the way kint v0.3.0 carries it: an owner's wallet opens the vault on every
machine, epochs go on chain in v0.3.0's envelope, and every machine reads them back
(a real anvil, real supervisors and workers, real Sibyl stores).

The tests of this module are one story on one chain and run in file order: the first
connects machine A with the owner's wallet signature and the others build on what it
anchored. The owner is an EOA the test holds (it plays the wallet: it signs the vault
message and authorizes machines)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from contextlib import closing

import pytest
from eth_account import Account

from chain_machines import (
    RULE_1,
    authorize_machine,
    connect_with_code,
    connect_with_wallet,
    devchain_anchor,
    kjson,
    ok,
    recovery_code,
    wallet_signature,
)
from conftest import sibyl_client
from machines_together import new_machines
from kint.custody.vault_message import canonical_payload

RULE_DRIFT = "never ship on a Friday, except when it is urgent"


# The story's machines: A and B from the first test on, the newcomer, and the fresh machines
# later tests bring in (each stopped at the end of its test).
MACHINES = ("a", "b", "newcomer", "e", "f", "g", "h")


@pytest.fixture(scope="module")
def story(tmp_path_factory, chain_home):
    """Every machine of the story, their supervisors started side by side
    (machines_together.new_machines) rather than one at a time as each test came to it;
    each untouched until its test."""
    made = dict(zip(MACHINES, new_machines(
        [tmp_path_factory.mktemp(f"machine-{name}") for name in MACHINES], chain_home)))
    owner = Account.create()
    box = {"a": made["a"], "b": made["b"], "owner": owner, "chain_home": chain_home,
           "root": tmp_path_factory, "fresh": made}
    yield box
    for machine in made.values():
        machine.shutdown()


@pytest.fixture(scope="module")
def newcomer(story):
    """A machine that has never connected: the wrong signature's test leaves it so (it
    checks that), and the third machine's test then restores the story onto it."""
    return story["fresh"]["newcomer"]


def _query(db, sql: str, args: tuple = ()) -> list[tuple]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(sql, args).fetchall()


def _all_rows(db) -> list[list[tuple]]:
    return [_query(db, "select category, name, status, body from entities "
                       "where category != 'kint_refusal' order by category, name"),
            _query(db, "select document_key, body from state_documents order by document_key"),
            _query(db, "select ts, evaluated, acted, forward, extra from journal_events "
                       "order by ts")]


def test_wallet_signature_on_stdin_then_a_second_machine_restores(story):
    a, b, owner = story["a"], story["b"], story["owner"]
    client = sibyl_client(a.sibyl_db, a.tenant)
    client.set_entity("rules", "release-gate", {"rule": RULE_1})
    client.set_state("focus", {"now": "the release", "note": "ünïcode 🔥"})
    client.write_event(acted=["wrote the release rule"], ts="2026-01-01T00:00:00Z")
    client.storage.close()

    connected = connect_with_wallet(a, owner)
    assert connected["source"] == "fresh vault" and connected["fresh_vault"] is True
    assert connected["owner"] == owner.address
    space = story["space"] = connected["space"]
    code = recovery_code(a, space)
    assert len(code.replace("-", "")) == 55 and len(code.split("-")) == 14
    # Not yet authorized: the push refuses with v0.3.0's words and exit 5, sending nothing.
    refused = a.kint("push")
    assert refused.returncode == 5, refused.stderr
    assert (f"session key {connected['session']} is not authorized for owner "
            f"{owner.address}: authorize it (kint authorize) and fund it") in refused.stderr
    # Its hint is the owner's next step, not NOT_CONNECTED's `kint connect` (it is connected).
    assert refused.stderr.splitlines()[1] == (
        "hint: the owner authorizes this machine's session key with `kint authorize` (direct, "
        "page, or payload then submit) and it needs a little ETH; `kint session-key show` "
        "says which is missing"), refused.stderr
    assert (f"session key {connected['session']} balance 0 ETH authorized False"
            in ok(a.kint("status")).stdout)
    authorize_machine(story["chain_home"], owner, connected["session"])
    pushed = kjson(a, "push")
    assert pushed["pushed"] == 3 and len(pushed["epochs"]) == 1
    assert pushed["epochs"][0]["bucket"] == 4096
    assert kjson(a, "verify", "release rule")["decision"] == "proceed"
    status = ok(a.kint("status")).stdout
    assert "(in step)" in status and connected["session"] in status
    assert f"owner {owner.address}  data key cached" in status  # v0.3.0's line
    # v0.3.0's status facts: the last anchored epoch's rows, the changes since, the session
    # key's balance and authorization.
    assert (f"last anchored on this machine: seq 1 block {pushed['epochs'][0]['block']} rows 3"
            in status)
    assert "\nunanchored: 0 changed, 0 deleted\n" in status
    assert re.search(rf"\nsession key {connected['session']} balance [0-9.]+ ETH authorized "
                     r"True until \d{4}-\d\d-\d\d \d\d:\d\d UTC\n", status), status
    doctor = a.kint("doctor")
    assert "session key" in doctor.stdout and "authorized" in doctor.stdout, doctor.stdout

    joined = connect_with_wallet(b, owner)
    assert joined["source"] == "chain head header"
    assert joined["key_tag"] == connected["key_tag"]
    assert not (b.kint_home / f"RECOVERY-{space}.txt").exists()
    pulled = kjson(b, "pull")
    assert pulled["applied"] == [1] and pulled["store_root_matches"] is True, pulled
    block = pushed["epochs"][0]["block"]
    assert pulled["applied_epochs"] == [{"seq": 1, "block": block, "rows": 3, "deletions": 0}]
    assert pulled["chain_head"] == {"seq": 1, "block": block, "digest": pulled["head"]["digest"]}
    assert pulled["warnings"] == []
    assert _all_rows(a.sibyl_db) == _all_rows(b.sibyl_db)
    assert kjson(b, "verify", "release rule")["decision"] == "proceed"

    # An edit behind Sibyl's back on B is refused by B's verify.
    with closing(sqlite3.connect(b.sibyl_db)) as conn:
        conn.execute("update entities set body = replace(body, 'never', 'always') "
                     "where name = 'release-gate'")
        conn.commit()
    refused = kjson(b, "verify", "release rule", "--no-write")
    assert refused["decision"] == "refuse"
    assert "no longer matches what was anchored" in refused["reason"]


def test_a_wrong_signature_is_refused_with_the_documented_message(story, newcomer):
    owner, d = story["owner"], newcomer
    payload = canonical_payload(owner.address).decode()
    stranger = Account.create()
    out = d.kint("connect", "--owner", owner.address, "--signature", "-",
                 input=wallet_signature(stranger, payload) + "\n")
    assert out.returncode == 2
    assert (f"derive signature recovers to {stranger.address}, expected {owner.address}; "
            f"refusing to derive a key from it") in out.stderr
    # The hint says which wallet signs, not only that the key does not open the vault.
    assert out.stderr.splitlines()[-1] == (
        f"hint: sign the vault message (kint canonical-payload --owner {owner.address}) "
        f"with the owner's own account, {owner.address}, selected in the wallet"), \
        out.stderr
    assert not list(d.kint_home.glob("enrol-*.json"))
    assert not list(d.kint_home.glob("vault-*.aes"))
    # A signature on argv is a path, never the signature itself.
    argv = d.kint("connect", "--owner", owner.address, "--signature", "0x" + "ab" * 65)
    assert argv.returncode == 2 and "never on argv" in argv.stderr
    assert "ab" * 65 not in argv.stderr


def test_a_third_machine_restores_with_the_recovery_code_on_stdin(story, newcomer):
    a, owner, space = story["a"], story["owner"], story["space"]
    c = newcomer
    typo = recovery_code(a, space).replace("-", "")
    typo = ("B" if typo[0] != "B" else "C") + typo[1:]
    out = c.kint("connect", "--owner", owner.address, "--recovery-code-stdin",
                 input=typo + "\n")
    assert out.returncode == 2 and "recovery code checksum failed (typo?)" in out.stderr
    from kint.custody.data_key import new_data_key
    from kint.custody.recovery_code import encode_recovery_code

    other = c.kint("connect", "--owner", owner.address, "--recovery-code-stdin",
                   input=encode_recovery_code(new_data_key()) + "\n")
    assert other.returncode == 2
    assert ("this recovery code does not belong to the vault anchored under this owner"
            in other.stderr)
    # Bound to the vault before it is cached (v0.3.0's judge claim): a code of another
    # data key left no cached key and no wraps behind.
    assert not [*c.kint_home.glob("vault-*"), *c.kint_home.glob("wraps-*")]
    connected = connect_with_code(c, owner.address, recovery_code(a, space))
    assert connected["source"] == "recovery code" and connected["key_tag"] is None
    pulled = kjson(c, "pull")
    assert pulled["store_root_matches"] is True
    assert _all_rows(a.sibyl_db) == _all_rows(c.sibyl_db)
    assert kjson(c, "verify", "release rule")["decision"] == "proceed"


def test_chain_moved_fork_and_discard_local(story, chain_home):
    """B pushes; A's push refuses CHAIN_MOVED (exit 4) and A's verify refuses 'chain moved
    ... pull first'; unanchored changes on A plus a moved chain: pull refuses as a fork;
    --discard-local restores and keeps the backups."""
    a, b, owner = story["a"], story["b"], story["owner"]
    authorize_machine(chain_home, owner, kjson(b, "status")["session"])
    with closing(sqlite3.connect(b.sibyl_db)) as conn:  # undo the edit of the first test
        conn.execute("delete from entities where category = 'kint_refusal'")
        conn.commit()
    lines = ok(b.kint("pull", "--discard-local")).stdout.splitlines()
    assert lines[0].startswith("moved aside: "), lines  # v0.3.0's lines, then the summary
    # v0.3.0's name (09-cli.md, "kint pull"): <name>.kint-backup-<YYYYmmdd-HHMMSS>
    assert re.fullmatch(rf"moved aside: {re.escape(str(b.sibyl_db))}\.kint-backup-"
                        rf"\d{{8}}-\d{{6}}", lines[0]), lines
    applied = [line for line in lines if line.startswith("pull: applied epoch ")]
    assert applied and all(re.fullmatch(r"pull: applied epoch \d+ \(\d+ rows, \d+ deletions\) "
                                        r"from block \d+", line) for line in applied), lines
    assert re.fullmatch(rf"restored {len(applied)} epoch\(s\), \d+ rows; head seq \d+ at block "
                        rf"\d+; store root matches the anchored root", lines[-1]), lines
    cb = sibyl_client(b.sibyl_db, b.tenant)
    cb.set_entity("rules", "deploy-window", {"rule": "deploys only before 3pm"})
    cb.storage.close()
    head = kjson(b, "push")["epochs"][-1]

    ca = sibyl_client(a.sibyl_db, a.tenant)
    ca.set_entity("rules", "local-only", {"rule": "written on A, never anchored"})
    ca.storage.close()
    out = a.kint("push")
    assert out.returncode == 4 and "[CHAIN_MOVED]" in out.stderr
    assert "nothing was dropped" in out.stderr
    # 09-cli.md, "kint status": the chain head, and whether this machine is in step with it.
    behind = ok(a.kint("status")).stdout
    assert (f"chain head: seq {head['seq']} digest {head['digest'][:16]} block "
            f"{head['block']} (NOT in step: pull or push)") in behind, behind
    moved = kjson(a, "verify", "release rule")
    assert moved["decision"] == "refuse"
    assert moved["reason"].startswith(f"chain moved to seq {head['seq']} at block "
                                      f"{head['block']}, pull first")
    # 07-verify.md, "The proof": under KINT_OFFLINE=1 verify reads no head, checks against
    # the mirror alone and says so on stderr; `chain_head` is null.
    offline = a.kint("verify", "release rule", "--json", env={"KINT_OFFLINE": "1"})
    assert offline.returncode == 0, offline.stderr
    alone = json.loads(offline.stdout)
    assert (alone["decision"], alone["chain_head"]) == ("proceed", None), alone
    assert ("kint: chain head unavailable (KINT_OFFLINE=1); verifying against the local "
            "mirror only") in offline.stderr, offline.stderr
    fork = a.kint("pull")
    assert fork.returncode == 4 and "[FORK]" in fork.stderr and "--discard-local" in fork.stderr
    # 03-new-machine.md, "The fork check": the refusal in v0.3.0's words.
    assert re.search(rf"the chain moved to seq {head['seq']} and this store has \d+ changed and "
                     r"\d+ deleted rows that were never anchored: a fork\.", fork.stderr)
    restored = kjson(a, "pull", "--discard-local")
    assert restored["store_root_matches"] is True
    # docs/commands.md, "kint pull": the store goes aside as one file, its WAL folded into
    # it, unless a call of the worker's was reading it at that moment (its recount of the
    # unanchored rows after the fork refusal may be): then its -wal and -shm go aside
    # with it, under its name. Nothing else, never a second store.
    store, *beside = restored["backups"]
    assert re.fullmatch(rf"{re.escape(str(a.sibyl_db))}\.kint-backup-\d{{8}}-\d{{6}}",
                        store), restored["backups"]
    assert beside in ([], [f"{store}-wal", f"{store}-shm"]), restored["backups"]
    assert all(os.path.exists(path) for path in restored["backups"]), restored["backups"]
    assert kjson(a, "verify", "release rule")["decision"] == "proceed"


def test_smart_account_owner_with_a_passphrase(story, chain_home):
    """A Base Account-like owner (an ERC-1271 contract account): the vault passphrase is the
    key (wrap kind 0x02); the account authorizes the session key with an ERC-1271
    signature through setSessionKeyBySig; a second machine opens the vault with the same
    passphrase. The story's two machines, in a space of their own (a profile store named
    `smart` on each: one label, so one space)."""
    from web3 import Web3

    from kint.chain import devchain
    from kint.chain.anchor_abi import authorization_typed_data

    anchor = devchain_anchor(chain_home)
    url = anchor.config.rpc_urls[0]
    signer = Account.create()
    account = devchain.deploy_test_smart_account(url, signer.address)
    m, n = story["a"], story["b"]
    mdb, ndb = m.profile_db("smart"), n.profile_db("smart")
    sibyl_client(mdb, m.tenant).set_entity("rules", "smart", {"rule": "passkeys"})
    connected = json.loads(ok(m.kint("--db", str(mdb), "connect", "--owner", account,
                                     "--smart-account", "--passphrase-stdin", "--json",
                                     input="correct horse battery\n")).stdout)
    assert connected["source"] == "fresh vault"
    session = connected["session"]
    # The account's owner signs the EIP-712 authorization; the session key submits it.
    expiry, deadline = int(time.time()) + 86400, int(time.time()) + 3600
    nonce = anchor.auth_nonce(account)
    typed = authorization_typed_data(anchor.config.chain_id, anchor.address, account,
                                     session, expiry, nonce, deadline)
    signature = Account.sign_typed_data(signer.key, full_message=typed).signature
    devchain.fund(url, session, 10**18)
    funder = Account.create()
    devchain.fund(url, funder.address, 10**18)
    anchor.transact(funder, anchor.encode_set_session_key_by_sig(
        account, session, expiry, deadline, bytes(signature)))
    assert anchor.can_write(account, session)
    assert kjson(m, "--db", str(mdb), "push")["pushed"] == 1

    wrong = n.kint("--db", str(ndb), "connect", "--owner", account, "--smart-account",
                   "--passphrase-stdin", input="wrong horse battery\n")
    assert wrong.returncode == 2
    assert "Wrong wallet, wrong passphrase, or wrong tenant." in wrong.stderr
    joined = json.loads(ok(n.kint("--db", str(ndb), "connect", "--owner", account,
                                  "--smart-account", "--passphrase-stdin", "--json",
                                  input="correct horse battery\n")).stdout)
    assert joined["source"] == "chain head header"
    assert kjson(n, "--db", str(ndb), "pull")["store_root_matches"] is True
    assert _all_rows(mdb) == _all_rows(ndb)
    assert Web3.is_address(account)


def test_compact_then_a_cold_start_stops_at_the_snapshot(story):
    a, owner = story["a"], story["owner"]
    ok(a.kint("pull"))
    compact = kjson(a, "compact")
    snap = compact["epochs"][0]["seq"]
    ca = sibyl_client(a.sibyl_db, a.tenant)
    ca.set_entity("rules", "release-gate", {"rule": "after the snapshot"})
    ca.delete_entity("rules", "deploy-window")
    ca.storage.close()
    after = kjson(a, "push")["epochs"][0]
    e = story["fresh"]["e"]
    try:
        connect_with_wallet(e, owner)
        pulled = kjson(e, "pull")
        assert pulled["applied"] == [snap, snap + 1] and pulled["store_root_matches"] is True
        # Each epoch's own rows and deletions (kint join prints them).
        assert pulled["applied_epochs"][1] == {"seq": snap + 1, "block": after["block"],
                                               "rows": 1, "deletions": 1}, pulled
        assert pulled["applied_epochs"][0]["seq"] == snap
        # v0.3.0's log line (03-new-machine.md, "Snapshots and --full"), in the worker's log.
        assert (f"pull: starting at snapshot epoch {snap}; the epochs before it are not needed "
                f"to restore (`kint pull --full` walks them for the older versions)"
                in (e.kint_home / "supervisor.log").read_text())
        assert pulled["applied_epochs"][0]["block"] == compact["epochs"][0]["block"]
        lines = ok(e.kint("history", "entity", "release-gate", "--category", "rules")).stdout
        assert int(lines.splitlines()[0].split()[1]) == snap
        # The state row `focus` was written long before the snapshot, which carried it
        # unchanged. On a machine that restored from the snapshot, the snapshot is the
        # oldest epoch it holds, and its block is the one a check names (docs/how-it-works.md).
        focus = _focus_check(e)
        assert (focus["anchored_seq"], focus["anchored_block"]) == (
            snap, compact["epochs"][0]["block"]), focus
        full = kjson(e, "pull", "--full")
        assert 1 in full["backfilled"]
        # v0.3.0's summary of a backfill (03-new-machine.md, "Snapshots and --full").
        assert full["message"] == (f"already at the chain head (epoch {snap + 1}); "
                                   f"{len(full['backfilled'])} older epoch(s) cached for "
                                   f"history"), full
        lines = ok(e.kint("history", "entity", "release-gate", "--category", "rules")).stdout
        assert int(lines.splitlines()[0].split()[1]) == 1
        # Once --full has cached the epochs before the snapshot, the block named is the one
        # of the epoch that last changed the row (a snapshot does not move it), as history
        # shows it, not the snapshot's.
        written = kjson(e, "history", "state", "focus")["versions"][-1]
        assert written["seq"] < snap and "snapshot" not in written, written
        focus = _focus_check(e)
        assert (focus["status"], focus["anchored_seq"], focus["anchored_block"],
                focus["anchored_tx"]) == ("verified", written["seq"], written["block"],
                                          written["tx"]), focus
        # A restore that starts at the snapshot again (the store moved aside) names the
        # same epoch: the cache still holds the ones before the snapshot.
        again = kjson(e, "pull", "--discard-local")
        assert again["applied"] == [snap, snap + 1] and again["backups"], again
        assert _focus_check(e)["anchored_seq"] == written["seq"]
        # A damaged older cache file costs that finer provenance, never the restore: the
        # pull goes through and the snapshot, the oldest epoch it could read, is named.
        space16 = kjson(e, "status")["space"]
        (e.kint_home / "epochs" / space16 / f"{written['seq']:08d}.json.gz").write_bytes(
            b"not a gzip member")
        assert kjson(e, "pull", "--discard-local")["applied"] == [snap, snap + 1]
        assert _focus_check(e)["anchored_seq"] == snap
        assert "provenance: kept as applied: kint's state file " in (
            e.kint_home / "supervisor.log").read_text()
    finally:
        e.shutdown()


def _focus_check(machine) -> dict:
    """verify's check of the state row `focus` (the only hit of the query `focus`)."""
    result = kjson(machine, "verify", "focus", "--no-write")
    assert result["decision"] == "proceed", result
    return next(c for c in result["checks"] if (c["tier"], c["key"]) == ("state", "focus"))


def test_over_skipped_past_an_epoch_nobody_can_open(story, chain_home):
    """A leaked session key appends bytes no key opens. A new machine's connect walks back
    to the newest readable header; pulls stop at the bad epoch and push refuses naming
    `kint compact --over-skipped`; the owner's snapshot over it lets every later pull stop
    at the snapshot, and a --full walk reports the bad epoch as superseded."""
    a, b, owner = story["a"], story["b"], story["owner"]
    ok(a.kint("pull"))
    ok(b.kint("pull"))
    anchor = devchain_anchor(chain_home)
    space_id = json.loads((a.kint_home / f"enrol-{story['space']}.json").read_text())["space"]
    leaked = Account.create()
    authorize_machine(chain_home, owner, leaked.address)
    head = anchor.head(owner.address, space_id)
    anchor.transact(leaked, anchor.encode_push(owner.address, space_id, head.digest,
                                               b"\x07 not a kint epoch " * 8))
    bad = head.seq + 1

    f = story["fresh"]["f"]
    try:
        assert connect_with_wallet(f, owner)["source"] == "chain head header"
    finally:
        f.shutdown()
    stopped = kjson(a, "pull")
    assert stopped["gap"] == [bad] and stopped["applied"] == []
    assert "not a kint epoch" in stopped["skipped"][0]["reason"]
    printed = ok(a.kint("pull")).stdout.splitlines()  # 09-cli.md's words, as join prints them
    skipped = stopped["skipped"][0]
    # Last, indented, as 03-new-machine.md ("What it prints", "Gaps") prints it.
    assert printed[-1] == f"  SKIPPED epoch {bad} block {skipped['block']}: {skipped['reason']}"
    # The gap is refused before the diff: a push with nothing to anchor meets it too.
    idle = a.kint("push")
    assert idle.returncode == 5 and "[GAP]" in idle.stderr, idle.stderr
    sibyl_client(a.sibyl_db, a.tenant).set_entity("rules", "after-bad", {"rule": "kept"})
    refused = a.kint("push")
    assert refused.returncode == 5 and "[GAP]" in refused.stderr
    # v0.3.0's words (03-new-machine.md, "Gaps").
    assert (f"this machine could not apply epoch(s) [{bad}] on its last pull, so its picture "
            f"of the memory is incomplete") in refused.stderr, refused.stderr
    assert "kint compact --over-skipped" in refused.stderr
    assert kjson(a, "verify", "release rule")["decision"] == "refuse"

    over = kjson(a, "compact", "--over-skipped")
    snap = over["epochs"][0]["seq"]
    assert snap == bad + 1
    assert over["override"].startswith(  # the line 09-cli.md says --over-skipped prints
        f"push: OVERRIDE, anchoring a snapshot on top of chain head seq {bad} (")
    assert kjson(a, "verify", "release rule")["decision"] == "proceed"
    g = story["fresh"]["g"]
    try:
        connect_with_wallet(g, owner)
        pulled = kjson(g, "pull")
        assert pulled["applied"] == [snap] and pulled["store_root_matches"] is True
    finally:
        g.shutdown()
    walked = kjson(b, "pull", "--full")
    assert [s["seq"] for s in walked["skipped"]] == [bad]
    assert walked["skipped"][0]["superseded_by"] == snap and walked["gap"] == []
    assert kjson(b, "verify", "release rule")["decision"] == "proceed"


def test_rekey_rotates_and_other_machines_follow(story):
    """rekey with the wallet's signature: a snapshot under the new key; B (old key cached)
    stops at it until it connects again with the same wallet, which the header hands the
    new key; the old recovery code no longer opens the vault.

    The gap (v0.3.0's judge claim): B's pull applies the epoch before the rotation, stops at
    the snapshot it cannot open (the diff after it not applied either), keeps its mirror
    at the last applied epoch and refuses to verify; the next pull retries from there."""
    a, b, owner, space = story["a"], story["b"], story["owner"], story["space"]
    ok(a.kint("pull"))
    ok(b.kint("pull"))
    sibyl_client(a.sibyl_db, a.tenant).set_entity("notes", "before-rekey", {"n": 1})
    (before,) = [e["seq"] for e in kjson(a, "push")["epochs"]]
    old_code = recovery_code(a, space)
    payload = canonical_payload(owner.address).decode()
    rekeyed = json.loads(ok(a.kint("rekey", "--signature", "-", "--json",
                                   input=wallet_signature(owner, payload) + "\n")).stdout)
    assert rekeyed["old_dek_id"] != rekeyed["new_dek_id"] and rekeyed["carried"] == 1
    snap = rekeyed["snapshot"][0]["seq"]
    assert snap == before + 1
    assert recovery_code(a, space) != old_code
    assert kjson(a, "verify", "release rule")["decision"] == "proceed"
    sibyl_client(a.sibyl_db, a.tenant).set_entity("notes", "after-rekey", {"n": 2})
    (after,) = [e["seq"] for e in kjson(a, "push")["epochs"]]

    closed = kjson(b, "pull")
    assert (closed["applied"], closed["gap"]) == ([before], [snap, after]), closed
    assert closed["head"]["seq"] == before
    assert "does not hold (rotated)" in closed["skipped"][-1]["reason"]
    refused = kjson(b, "verify", "release rule")["reason"]
    assert "this machine's picture of the memory is not the one the chain vouches for" in \
        refused
    # 03-new-machine.md, "Gaps": a wrong key does not heal on the next pull (connect
    # again). The pull and push say so (verify's reason is the seed's, word for word);
    # push's hint said "run `kint pull`", which stops here again, or `kint compact
    # --over-skipped`, a snapshot sealed under the retired key.
    connect_again = "`kint connect` again with a key that opens the vault now"
    assert connect_again in closed["message"], closed["message"]
    on_b = sibyl_client(b.sibyl_db, b.tenant)
    on_b.set_entity("notes", "on-b", {"n": 3})
    gap = b.kint("push")
    assert gap.returncode == 5 and "[GAP]" in gap.stderr, gap.stderr
    assert f"hint: if the data key was rotated on another machine (`kint rekey`), " \
        f"{connect_again}" in gap.stderr, gap.stderr
    # Not `--over-skipped` as this gap's step: B's snapshot would seal the memory under the
    # retired key. It is named only for what connect may find instead, an epoch no rekey made
    # (a forged wrap under this machine's public tag: connect_key.not_a_rekey).
    this_gap, _, no_rekey = gap.stderr.partition("no rekey made it")
    assert "--over-skipped" not in this_gap and "--over-skipped" in no_rekey, gap.stderr
    on_b.delete_entity("notes", "on-b")
    on_b.storage.close()  # an open store is not moved aside (BUSY): the discard's check
    # A discarding pull would move the store aside and restore none of the chain's rows
    # from the rotation on: refused before the move, saying to connect again first.
    backups = set(b.sibyl_db.parent.glob("*.kint-backup-*"))
    discard = b.kint("pull", "--discard-local")
    assert discard.returncode == 5 and "[GAP]" in discard.stderr, discard.stderr
    assert "sealed under a data key this machine does not hold" in discard.stderr
    assert "nothing was moved" in discard.stderr and "`kint connect` again" in discard.stderr
    assert set(b.sibyl_db.parent.glob("*.kint-backup-*")) == backups and b.sibyl_db.exists()
    # 09-cli.md, "kint recovery-code" and 05-keys.md, "The recovery code": B's cached key is
    # not the one the head epoch was sealed with, so it writes no code (a kint: line, exit 2)
    # and says to connect again.
    stale = b.kint("recovery-code")
    assert stale.returncode == 2 and "[WRONG_KEY]" in stale.stderr, stale.stderr
    assert "not the one the head epoch was sealed with" in stale.stderr
    assert "kint connect" in stale.stderr
    assert not (b.kint_home / f"RECOVERY-{space}.txt").exists() or \
        recovery_code(b, space) != recovery_code(a, space)
    assert connect_with_wallet(b, owner)["source"] == "chain head header"
    pulled = kjson(b, "pull")
    assert pulled["applied"] == [snap, after] and pulled["gap"] == []
    assert pulled["store_root_matches"] is True
    assert _all_rows(b.sibyl_db) == _all_rows(a.sibyl_db)
    h = story["fresh"]["h"]
    try:
        out = h.kint("connect", "--owner", owner.address, "--recovery-code-stdin",
                     input=old_code + "\n")
        assert out.returncode == 2 and "does not belong to the vault" in out.stderr
    finally:
        h.shutdown()


def test_an_expired_key_refuses_push_and_pull_and_drops_nothing(story):
    from kint.custody.vault_cache import cache_data_key, read_cached_key

    a, space = story["a"], story["space"]
    ok(a.kint("pull"))
    sibyl_client(a.sibyl_db, a.tenant).set_entity("rules", "pending-change", {"rule": "kept"})
    space_id = json.loads((a.kint_home / f"enrol-{space}.json").read_text())["space"]
    key = read_cached_key(a.kint_home, space_id).dek
    cache_data_key(a.kint_home, space_id, key, ttl=60, now=time.time() - 86400)
    vault = a.kint_home / f"vault-{space}.aes"
    # Every read says the same: the key expired, and what to do. The first read used to
    # remove the file, and every later one said it was missing, as if this machine had
    # never connected, without the advice about KINT_KEY_TTL.
    said = None
    for op, code in (("push", 3), ("pull", 5), ("push", 3)):
        out = a.kint(op)
        assert out.returncode == code, (op, out.stdout + out.stderr)
        assert "[NO_DATA_KEY]" in out.stderr, out.stderr
        assert " expired at " in out.stderr and "KINT_KEY_TTL=30d" in out.stderr, out.stderr
        assert "nothing was dropped" in out.stderr and "is missing" not in out.stderr
        error = [line for line in out.stderr.splitlines() if line.startswith("kint: error:")]
        assert said is None or error == said, (said, error)
        said = error
        # The expired key is not kept on disk once seen: the file is its tombstone.
        assert read_cached_key(a.kint_home, space_id).reason == "expired"
        assert vault.stat().st_size == 80
    doctor = json.loads(a.kint("doctor", "--json").stdout)
    data_key = next(c for c in doctor["checks"] if c["name"] == "data key")
    assert not data_key["ok"] and " expired at " in data_key["detail"], data_key
    rows = _query(a.sibyl_db, "select body from entities where name = 'pending-change'")
    assert rows == [('{"rule":"kept"}',)]
    cache_data_key(a.kint_home, space_id, key)
    assert kjson(a, "push")["pushed"] >= 1
