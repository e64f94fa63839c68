"""docs/quickstart.md's devchain steps as a new user meets them: `kint connect --dev` on a
machine whose Sibyl store does not exist yet (Sibyl creates it on the first write), then
`kint status`, `kint doctor` and `kint push` before any row, then a row, the push and the
verify the page shows. A store that goes missing under anchored rows is refused, never
anchored as the deletion of every row (a real anvil, supervisor, workers and Sibyl store).

The tests run in file order on one machine."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from chain_machines import RULE_1, devchain_anchor, devchain_web3, kjson, new_machine, ok
from conftest import sibyl_client
from machines_together import side_by_side


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    sb = new_machine(tmp_path_factory.mktemp("quickstart"), chain_home)
    try:
        yield sb
    finally:
        sb.shutdown()


def _line(text: str, start: str) -> str:
    found = [line for line in text.splitlines() if line.startswith(start)]
    assert len(found) == 1, (start, text)
    return found[0]


def _dev_balance_said() -> int:
    """The session key's balance, in wei, that the page says `--dev` sets with
    anvil_setBalance (it said "funds the session key from anvil's own accounts", a transfer
    the code never sends)."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "quickstart.md").read_text()
    said = re.search(r"sets the session key's devchain balance to (\d+) ETH[^`]*`anvil_setBalance`",
                     " ".join(page.split()))
    assert said, "quickstart.md no longer says what --dev sets the session key's balance to"
    return int(said.group(1)) * 10**18


def test_before_the_first_row_status_doctor_and_push_say_what_is_there(machine, chain_home):
    assert not machine.sibyl_db.exists()
    connected = ok(machine.kint("connect", "--dev")).stdout.splitlines()
    assert not machine.sibyl_db.exists()  # connect makes no store
    # kint v0.3.0's lines on a fresh vault (02-quickstart.md), in its order.
    answer = kjson(machine, "status")
    # The page's amount is what the fresh key holds before any push: set, not sent.
    held = devchain_web3(chain_home).eth.get_balance(answer["session"])
    assert held == _dev_balance_said(), held
    space16 = answer["space"][:16]
    assert connected[0].startswith("connected: owner 0x"), connected
    assert re.fullmatch(rf"space {space16}  key tag [0-9a-f]{{8}}  data key from fresh vault",
                        connected[1]), connected
    assert connected[2:] == [
        f"fresh vault: recovery code written to {machine.kint_home / f'RECOVERY-{space16}.txt'}",
        "copy that code somewhere that is not this machine; push refuses until the file exists",
        f"session key: {answer['session']}"], connected

    # What reads (status, doctor) and what verifies (a store with no row: nothing to write)
    # run in two lanes side by side, each checked below; the pushes come after them.
    (status, cap, doctor), (verify, verified) = side_by_side(
        lambda: [ok(machine.kint("status")).stdout, kjson(machine, "status")["cap"],
                 ok(machine.kint("doctor")).stdout],
        lambda: [machine.kint("verify", "release rule"),
                 kjson(machine, "verify", "release rule")])
    assert "None" not in status, status
    # kint v0.3.0's cap accounting (02-quickstart.md, "Check it"), the cap in its words, as
    # the last four lines, sizes below 1 MiB in KB (15-sibyl.md, "One client, one cap").
    assert cap["sibyl_bytes"] == 0 and 0 < cap["kint_bytes"] < 1048576, cap
    assert status.splitlines()[-4:] == [
        "cap accounting (the same 5 MiB free cap Sibyl enforces):",
        "  sibyl stores      0.0 KB",
        f"  kint state        {cap['kint_bytes'] / 1024:.1f} KB   (mirror, epoch cache, "
        f"keys; volunteered)",
        f"  enforced total    {cap['volunteered_total'] / 1024:.1f} KB of 5.00 MB"], status
    # kint v0.3.0's lines (03-new-machine.md, "Check it").
    assert _line(status, "last anchored on this machine:") == (
        "last anchored on this machine: seq 0 block 0 rows 0")
    contract = answer["contract"]
    assert _line(status, "chain head:") == (f"chain head: seq 0 digest {'0' * 16} block 0 "
                                            f"(in step)  contract {contract}")
    assert _line(status, "unanchored:") == ("unanchored: none: the store is not created yet "
                                            "(Sibyl creates it on the first write)")

    assert "None" not in doctor, doctor
    # v0.3.0's row: a store not created yet warns (and a warning passes: exit 0).
    assert f"[WARN] sibyl store: {machine.sibyl_db} (not created yet)" in doctor.splitlines()

    # v0.3.0's push of a store with nothing to anchor, never an internal error (exit 5).
    for args in (("push",), ("push", "--dry-run")):
        out = ok(machine.kint(*args))
        assert out.stdout.strip() == "nothing to push: the store matches the last anchored epoch"
    assert kjson(machine, "push")["pushed"] == 0
    # A store with no row is a refusal, kint v0.3.0's exit statuses (1; 0 with --json,
    # whose `decision` says it) under Sibyl's own verdict for it, never an error (exit 2):
    # v0.3.0's verify opened the store and searched it.
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert verify.stdout.splitlines() == [
        "query: release rule", "sibyl verdict: empty_store  hits: 0",
        f"DECISION: REFUSE: no ranked candidate to act on: Sibyl's verdict is empty_store: "
        f"the store {machine.sibyl_db} does not exist yet (Sibyl creates it on the first "
        f"write, the agent's memory_remember through kint-server; if it should exist, check "
        f"--db or SIBYL_MEMORY_DB)"], verify.stdout
    answer = verified  # exit 0 with --json
    assert (answer["decision"], answer["verdict"]["code"], answer["verdict"]["recovery"]) == (
        "refuse", "empty_store", "write_first")
    assert answer["hits"] == answer["checks"] == [] and answer["refusal_entity"] is None
    assert not machine.sibyl_db.exists()  # and neither push nor verify makes one


def test_the_first_row_is_anchored_and_verified(machine, chain_home):
    client = sibyl_client(machine.sibyl_db, machine.tenant)
    client.set_entity("rules", "release-gate", {"rule": RULE_1})
    client.storage.close()
    # 02-quickstart.md, "The first write": on a fresh vault every row in the store counts.
    assert _line(ok(machine.kint("status")).stdout, "unanchored:") == (
        "unanchored: 1 changed, 0 deleted")
    # kint v0.3.0's lines (02-quickstart.md, "The first push"): what the epoch carries, the
    # head, where it landed and what it cost.
    lines = ok(machine.kint("push")).stdout.splitlines()
    assert len(lines) == 3, lines
    carried = re.fullmatch(r"push: epoch 1, 1 rows, 0 deletions, bucket (\d+) B, (\d+) B "
                           r"calldata", lines[0])
    assert carried, lines
    assert lines[1] == "anchored 1 epoch(s); head seq 1"
    landed = re.fullmatch(rf"  epoch 1: tx (0x[0-9a-f]{{64}}) block (\d+) bucket "
                          rf"{carried[1]} B rows 1 del 0 cost (\d+\.\d+) ETH", lines[2])
    assert landed, lines
    # The calldata is the transaction's own, as the chain holds it (what gas is paid on).
    sent = devchain_anchor(chain_home).w3.eth.get_transaction(landed[1])["input"]
    assert len(bytes(sent)) == int(carried[2])
    out = ok(machine.kint("verify", "release rule"))
    assert "DECISION: PROCEED" in out.stdout
    status = ok(machine.kint("status")).stdout
    block = int(landed[2])
    assert _line(status, "last anchored on this machine:") == (
        f"last anchored on this machine: seq 1 block {block} rows 1")
    answer = kjson(machine, "status")
    digest, contract = answer["chain_head"]["digest"], answer["contract"]
    assert _line(status, "chain head:") == (f"chain head: seq 1 digest {digest[:16]} block "
                                            f"{block} (in step)  contract {contract}")


def test_a_store_gone_under_anchored_rows_is_refused_then_restored(machine):
    # The store's files only: Sibyl's credentials beside them name the tenant.
    aside = machine.root / "store-aside"
    aside.mkdir()
    for name in ("memory.db", "memory.db-wal", "memory.db-shm"):
        if (machine.sibyl_db.parent / name).exists():
            shutil.move(machine.sibyl_db.parent / name, aside / name)
    try:
        status = ok(machine.kint("status")).stdout
        assert _line(status, "unanchored:") == ("unanchored: not counted: the store does not "
                                                "exist; `kint pull` restores the anchored rows")
        for args in (("push",), ("compact",)):
            out = machine.kint(*args)
            assert out.returncode == 5, out.stdout + out.stderr
            assert out.stderr.startswith(
                f"kint: error: the store {machine.sibyl_db} does not exist, and 1 row(s) "
                f"anchored from this space's store are on chain: a push would anchor the "
                f"deletion of every one; nothing was anchored [BAD_REQUEST]"), out.stderr
            assert "`kint pull` restores the anchored rows into a new store" in out.stderr
        assert kjson(machine, "status")["chain_head"]["seq"] == 1  # nothing was sent
        out = machine.kint("verify", "release rule")
        assert out.returncode == 1, out.stdout + out.stderr
        assert out.stdout.splitlines()[-1].startswith(
            f"DECISION: REFUSE: no ranked candidate to act on: Sibyl's verdict is empty_store: "
            f"the store {machine.sibyl_db} does not exist, and 1 row(s) anchored from it are "
            f"on chain"), out.stdout
        assert "`kint pull` restores the anchored rows into a new store" in out.stdout

        # A plain pull restores it: nothing local to weigh against the chain. (It used to
        # say "already at the chain head" and leave the store missing.)
        pulled = kjson(machine, "pull")
        assert pulled["applied"] == [1] and pulled["backups"] == [], pulled
        assert "DECISION: PROCEED" in ok(machine.kint("verify", "release rule")).stdout
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def test_status_names_the_session_key_this_machine_holds_after_a_rotate(machine):
    """Quickstart step 3 reads the session key's line of `kint status`: after `kint
    session-key rotate` it named the key the connect recorded, with the new key's balance
    and authorization beside it (0 ETH, authorized False), as though the old key had lost
    both. It names the key in session.key now, the one its facts are of. (Last in this
    file: the new key is neither funded nor authorized.)"""
    before = kjson(machine, "status")
    assert before["session"] == before["session_key"]["address"]
    old, new = ok(machine.kint("session-key", "rotate")).stdout.strip().removeprefix(
        "rotated: ").split(" -> ")
    assert old == before["session"] and new != old
    after = kjson(machine, "status")
    assert after["session"] == after["session_key"]["address"] == new, after
    assert _line(ok(machine.kint("status")).stdout, "session key ") == (
        f"session key {new} balance 0 ETH authorized False")
