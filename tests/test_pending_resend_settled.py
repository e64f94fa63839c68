"""What the settlement of a killed push's journal meets when it sends the journal's signed
transaction again (kint/tenant_worker/pending.py, `resolve_pending`): a key the owner has
revoked since it signed, and a receipt that does not come within the wait.

One machine for the module on the session's devchain, with the crash points and the
settlement hold of tests/support/kint_test_faults.py preloaded, and its receipt-wait
knob (`KINT_TEST_RECEIPT_WAIT`), so a wait that runs out does so in seconds, not kint's
60. Each test has a space of its own (`Space`, shared with tests/test_pending_rotated.py);
the machine's session key is the one the tests revoke and authorize again. A transaction
is held back with a nonce of the key the nonce book holds for this live process and that
nothing sends (`Space.hole`), not by stopping anvil's mining: nothing else on the chain
waits for it. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from web3 import Web3

from chain_machines import (authorize_machine, devchain_anchor, jdb, kdb, new_machine,
                            owner_account, wallet_signature)
from kint.chain.artifact import load_artifact
from kint.chain.config import devchain_record
from kint.client import KintError
from kint.commands.exit_codes import KEY_EXPIRED, PUSH_PULL_REFUSED
from kint.custody.vault_message import canonical_payload
from kint.tenant_worker.unauthorized_journal import Unauthorized
from mcp_session import AgentProcess
from rpc_proxy import RpcProxy
from test_pending_rotated import Space


@pytest.fixture(scope="module")
def box(tmp_path_factory, chain_home):
    root = tmp_path_factory.mktemp("resend-settled")
    flag, hold, wait = root / "crash.flag", root / "hold-settlement", root / "receipt-wait"
    record = json.loads(devchain_record(chain_home).read_text())
    w3 = Web3(Web3.HTTPProvider(record["rpc_url"], request_kwargs={"timeout": 10}))
    contract = w3.eth.contract(address=Web3.to_checksum_address(record["anchor"]),
                               abi=load_artifact()["abi"])
    a = new_machine(root / "a", chain_home, KINT_TEST_CRASH_FLAG=str(flag),
                    KINT_TEST_HOLD_SETTLE=str(hold), KINT_TEST_RECEIPT_WAIT=str(wait),
                    KINT_NONCE_RETRY_SECONDS="1")
    try:
        yield {"a": a, "flag": flag, "hold": hold, "wait": wait, "home": chain_home,
               "w3": w3, "contract": contract, "root": root}
    finally:
        hold.unlink(missing_ok=True)
        wait.unlink(missing_ok=True)
        a.shutdown()


def test_a_journal_whose_key_was_revoked_is_not_sent_again(box):
    """The owner revoked the machine's session key after the push signed its epoch and was
    killed: the settlement does not send the transaction (it would revert NotAuthorized
    and spend the key's gas), drops the journal, gives the nonce back, and the push names
    the key and what to do. Authorized again, the next push anchors the rows the journal
    carried. Before, the transaction was sent and reverted: one nonce of the revoked key
    spent, its gas with it."""
    s = Space(box, "revoked-key")
    journal = s.kill("before_send")
    owner = owner_account(s.a, s.owner)
    anchor = devchain_anchor(box["home"])
    anchor.transact(owner, anchor.encode_revoke_session_key(s.old))
    assert not anchor.can_write(owner.address, s.old)
    assert s.w3.eth.get_transaction_count(s.old, "pending") == journal["nonce"]
    try:
        out = kdb(s.a, s.db, "push")
        assert out.returncode == PUSH_PULL_REFUSED and "[NOT_CONNECTED]" in out.stderr, \
            out.stdout + out.stderr
        # Nothing of the revoked key was mined, or waits at the endpoint, since the revoke.
        assert s.w3.eth.get_transaction_count(s.old, "pending") == journal["nonce"]
        assert (f"the interrupted push of epoch 2 was not sent again: session key {s.old} "
                f"is not authorized for owner {s.owner}") in out.stderr, out.stderr
        assert "its journal is dropped" in out.stderr, out.stderr
        assert "hint: the owner authorizes this machine's session key with `kint " \
            "authorize`" in out.stderr, out.stderr
        assert not s.pending.exists()
    finally:  # the machine's key authorized again for the module's other tests, come what may
        authorize_machine(box["home"], owner, s.old)
        s.release()
    pushed = jdb(s.a, s.db, "push")["epochs"]
    assert [e["seq"] for e in pushed] == [2]
    sent = s.w3.eth.get_transaction(pushed[0]["tx"])
    assert (sent["from"], sent["nonce"]) == (s.old, journal["nonce"])  # the nonce given back
    assert s.chain_head()[:2] == s.mirror_head()
    assert s.anchored() == {"first", "second"}


def test_a_rekey_that_drops_a_revoked_keys_journal_itself_says_so_in_its_own_words(box):
    """The same journal settled by `kint rekey` itself (no rekey journal beside it: its
    snapshot's push settles it): refused naming the key, its hint saying what applies to a
    rekey (the owner authorizes the key, then `kint rekey` again, whose snapshot anchors
    the rows), and the rekey journal it wrote is dropped. It was told to run `kint push`."""
    s = Space(box, "revoked-rekey-itself")
    s.kill("before_send")
    owner = owner_account(s.a, s.owner)
    signature = wallet_signature(owner, canonical_payload(s.owner).decode()) + "\n"
    anchor = devchain_anchor(box["home"])
    anchor.transact(owner, anchor.encode_revoke_session_key(s.old))
    try:
        out = kdb(s.a, s.db, "rekey", "--signature", "-", input=signature)
        assert out.returncode != 0 and "[NOT_CONNECTED]" in out.stderr, \
            out.stdout + out.stderr
        assert (f"the interrupted push of epoch 2 was not sent again: session key {s.old} "
                f"is not authorized") in out.stderr, out.stderr
        hint = out.stderr.split("hint:", 1)[1]
        assert "then `kint rekey` again: its snapshot anchors them" in hint, out.stderr
        assert "`kint push`" not in hint, out.stderr
        assert not s.pending.exists()
        assert not list(s.a.kint_home.glob(f"rekey-{s.space16}*")), \
            list(s.a.kint_home.iterdir())
    finally:  # the machine's key authorized again for the module's other tests, come what may
        authorize_machine(box["home"], owner, s.old)
        s.release()


def test_a_pull_that_drops_a_revoked_keys_journal_goes_on(box):
    """The same journal settled by a pull: dropped unsent as for a push, and the pull goes
    on, saying so in its warnings (as after a journal the chain passed) with what to do, as
    the push's hint says it, where it refused before for a journal it had already dropped.
    Authorized again, the next push anchors
    the rows the journal carried."""
    s = Space(box, "revoked-pull")
    s.kill("before_send")
    owner = owner_account(s.a, s.owner)
    anchor = devchain_anchor(box["home"])
    anchor.transact(owner, anchor.encode_revoke_session_key(s.old))
    try:
        pulled = jdb(s.a, s.db, "pull")
        said = [w for w in pulled["warnings"]
                if w.startswith("the interrupted push of epoch 2 was not sent again")]
        assert len(said) == 1 and "its journal is dropped" in said[0], pulled
        # What to do, as a push's refusal hints it: before, the warning said none.
        assert said[0].endswith("; the owner authorizes this machine's session key with "
                                "`kint authorize` (direct, page, or payload then submit) and "
                                "it needs a little ETH; `kint session-key show` says which is "
                                "missing; then `kint push` anchors them"), said
        assert not s.pending.exists()
    finally:  # the machine's key authorized again for the module's other tests, come what may
        authorize_machine(box["home"], owner, s.old)
        s.release()
    assert [e["seq"] for e in jdb(s.a, s.db, "push")["epochs"]] == [2]
    assert s.anchored() == {"first", "second"}


def test_what_kint_servers_start_up_pull_drops_is_kept_for_the_agent(box):
    """The same journal settled by kint-server's start-up pull (the restarted worker's own
    settlement still held), which goes on past it: its answer reaches kint.log only, so
    the notice stays kept; the agent's memory_status shows it and its memory_pull says it,
    once. Used up by the start-up pull, the agent heard nothing of the dropped push."""
    s = Space(box, "revoked-start-up")
    s.kill("before_send")
    owner = owner_account(s.a, s.owner)
    anchor = devchain_anchor(box["home"])
    anchor.transact(owner, anchor.encode_revoke_session_key(s.old))
    env = {**s.a.env, "SIBYL_MEMORY_DB": str(s.db), "KINT_BOOTSTRAP_SECONDS": "60"}
    try:
        agent = AgentProcess(env).start()  # the start-up pull is done by the handshake
        try:
            assert not s.pending.exists()  # settled by that pull: the worker's is held
            kept = agent.call("memory_status")["settled_notice"]
            pulled = agent.call("memory_pull")
            again = agent.call("memory_pull")
        finally:
            agent.close()
    finally:  # the machine's key authorized again for the module's other tests, come what may
        authorize_machine(box["home"], owner, s.old)
        s.release()
    dropped = "the interrupted push of epoch 2 was not sent again"
    assert kept and dropped in kept, kept
    assert [w for w in pulled.get("warnings", []) if dropped in w], pulled
    assert not [w for w in again.get("warnings", []) if dropped in w], again


def test_a_resent_journal_whose_receipt_does_not_come_is_kept(box):
    """The journal's transaction sent again waits at the endpoint behind a nonce nothing
    sends, and the receipt wait runs out: the push refuses RPC_UNAVAILABLE in the words a
    push's own receipt timeout says (the epoch may still land, the next push or pull
    settles it), and the journal is kept; once the nonce below is spent, the settlement
    records the epoch. Before, the wait's failure escaped as the endpoint's bare words."""
    s = Space(box, "receipt-wait")
    hole, entry = s.hole(s.old)
    journal = s.kill("before_send")
    assert journal["nonce"] == hole + 1
    box["wait"].write_text("2")
    try:
        out = kdb(s.a, s.db, "push")
        assert out.returncode == PUSH_PULL_REFUSED and "[RPC_UNAVAILABLE]" in out.stderr, \
            out.stdout + out.stderr
        sent = Web3.keccak(hexstr=journal["raw_tx"]).to_0x_hex()
        assert (f"no confirmed receipt for {sent[2:]} within 2s; epoch 2 was signed and may "
                f"still land: the next push or pull settles it") in out.stderr, out.stderr
        assert s.pending.exists()
        assert s.w3.eth.get_transaction(sent)["blockNumber"] is None
    finally:
        box["wait"].unlink(missing_ok=True)
    entry.unlink()
    s.transfer(s.key(), hole)
    s.settled()
    assert s.chain_head()[:2] == s.mirror_head() and s.mirror_head()[0] == 2
    assert "0x" + s.meta(2)["tx"] == sent
    assert s.anchored() == {"first", "second"}


def test_a_revoked_keys_journal_mined_and_reverted_is_said_once(box):
    """The journal's transaction left this machine (killed after its send, waiting at the
    endpoint behind a nonce nothing sends), the owner revoked the key, then the nonce below
    was spent: the journal's transaction was mined and reverted NotAuthorized. A pull
    settles it as a spent nonce with the chain still at its prev, drops the journal and
    says once, among its warnings, that the key may not write, as for a journal not sent;
    the next pull says nothing of it. Before, the drop was one line in the log."""
    s = Space(box, "revoked-reverted")
    hole, entry = s.hole(s.old)
    journal = s.kill("after_send")
    assert journal["nonce"] == hole + 1
    owner = owner_account(s.a, s.owner)
    anchor = devchain_anchor(box["home"])
    try:
        anchor.transact(owner, anchor.encode_revoke_session_key(s.old))
        entry.unlink()
        s.transfer(s.key(), hole)
        sent = Web3.keccak(hexstr=journal["raw_tx"]).to_0x_hex()
        assert s.w3.eth.wait_for_transaction_receipt(sent, timeout=30)["status"] == 0
        pulled = jdb(s.a, s.db, "pull")
        said = [w for w in pulled["warnings"]
                if w.startswith("the interrupted push of epoch 2 did not land: session key "
                                f"{s.old} is not authorized for owner {s.owner}")]
        assert len(said) == 1 and "its journal is dropped" in said[0], pulled
        assert not s.pending.exists()
        again = jdb(s.a, s.db, "pull")
        assert not any("interrupted push" in w for w in again["warnings"]), again
    finally:  # the machine's key authorized again for the module's other tests, come what may
        authorize_machine(box["home"], owner, s.old)
        s.release()
    assert [e["seq"] for e in jdb(s.a, s.db, "push")["epochs"]] == [2]
    assert s.anchored() == {"first", "second"}


def test_a_dry_run_leaves_a_journal_for_the_next_push_and_sends_nothing(box):
    """docs/commands.md: a dry run sends nothing. Over a killed push's journal it settled
    the journal all the same (its signed transaction sent again, under a session key it
    loaded for that), and with the key moved away it was refused NO_SESSION_KEY. Now it
    says the journal is the next push's to settle, exits 0, and the key's nonce and the
    journal stay as they were; the settlement after it sends the journal again."""
    s = Space(box, "dry-run-journal")
    journal = s.kill("before_send")
    keystore = s.a.kint_home / "session.key"
    said = "an interrupted push of epoch 2 is settled by the next push"
    try:
        keystore.rename(s.a.kint_home / "session.key.away")
        out = kdb(s.a, s.db, "push", "--dry-run")
        assert out.returncode == 0, out.stdout + out.stderr
        assert said in out.stderr, out.stderr
        assert "would first settle the interrupted push of epoch 2" in out.stdout, out.stdout
    finally:
        (s.a.kint_home / "session.key.away").rename(keystore)
    preview = jdb(s.a, s.db, "push", "--dry-run")  # the key there: still nothing sent
    assert preview["dry_run"] is True and preview["epochs"] == [], preview
    assert preview["interrupted_push"] == 2, preview
    assert any(said in n for n in preview["notices"]), preview
    assert s.w3.eth.get_transaction_count(s.old, "pending") == journal["nonce"]
    assert json.loads(s.pending.read_text()) == journal
    s.settled()  # the held start settlement sends it again, as the next push would
    assert s.chain_head()[:2] == s.mirror_head() and s.mirror_head()[0] == 2
    assert s.anchored() == {"first", "second"}


def test_a_pull_over_a_journal_with_the_session_key_gone_exits_3(box):
    """A pull settles an interrupted push's journal before it restores, and the settlement
    loads the session key: with `session.key` moved away the pull is refused
    NO_SESSION_KEY, exit 3 (the exit table's words, docs/commands.md), and the journal and
    the key's nonce stay as they were; with the key back the same pull settles it. With no
    journal waiting, a pull with the key gone restores and exits 0
    (tests/test_v030_pull_keyless.py)."""
    s = Space(box, "pull-keyless-journal")
    journal = s.kill("before_send")
    keystore, away = s.a.kint_home / "session.key", s.a.kint_home / "session.key.away"
    try:
        keystore.rename(away)
        out = kdb(s.a, s.db, "pull")
        assert out.returncode == KEY_EXPIRED, out.stdout + out.stderr
        assert "[NO_SESSION_KEY]" in out.stderr, out.stderr
        assert json.loads(s.pending.read_text()) == journal
        assert s.w3.eth.get_transaction_count(s.old, "pending") == journal["nonce"]
    finally:
        away.rename(keystore)
    jdb(s.a, s.db, "pull")  # this pull settles it: the worker's own settlement is held
    assert not s.pending.exists()
    s.release()
    assert s.chain_head()[:2] == s.mirror_head() and s.mirror_head()[0] == 2


def test_an_agent_told_of_a_journal_kept_unsettled_is_sent_to_memory_pull(box, chain_home):
    """An agent's memory_pull meets a journal the settlement keeps because the endpoint did
    not answer (here: the key revoked, and the endpoint, a loopback proxy in front of the
    session's anvil, answering the lookup of the journal's transaction with an error
    object, so whether it waits there is not known). Through the real kint-server, the
    hint is the agent's next call, memory_pull, and what to tell the human if it fails
    again. It was the terminal's `kint pull`, a command the agent does not have. The
    space was connected with `--rpc-urls`: the terminal's hint and the agent's name those
    endpoints, where both sent the human to KINT_RPC_URL and KINT_RPC_URL_2, which are
    not in force for it."""
    record = json.loads(devchain_record(chain_home).read_text())
    proxy = RpcProxy(record["rpc_url"]).start()
    agent = None
    s = Space(box, "unsettled-agent", "--rpc-urls", proxy.url)
    s.kill("before_send")
    owner = owner_account(s.a, s.owner)
    anchor = devchain_anchor(box["home"])
    try:
        anchor.transact(owner, anchor.encode_revoke_session_key(s.old))
        proxy.set_mode("error_methods", methods=["eth_getTransactionByHash"],
                       message="the lookup is down")
        check = ("check the endpoints this space was given by `kint connect --rpc-urls` "
                 "and that they answer")
        out = kdb(s.a, s.db, "pull")
        assert out.returncode == PUSH_PULL_REFUSED and "[RPC_UNAVAILABLE]" in out.stderr, \
            out.stdout + out.stderr
        assert (f"hint: {check}, then run `kint pull`: it settles the interrupted push "
                f"first") in out.stderr, out.stderr
        assert "KINT_RPC_URL" not in out.stderr, out.stderr
        agent = AgentProcess({**s.a.env, "SIBYL_MEMORY_DB": str(s.db),
                              "KINT_QUIET_SECONDS": "3600"}).start()
        refused = agent.failed("memory_pull")
        assert refused["error"] == "RPC_UNAVAILABLE", refused
        assert "its journal is kept" in refused["message"], refused
        assert refused["hint"] == (
            f"call memory_pull in a minute: it settles the interrupted push first; if it "
            f"fails again, stop and tell the human to {check}"), refused
        assert s.pending.exists()
    finally:
        if agent is not None:
            agent.close()
        proxy.forward()
        authorize_machine(box["home"], owner, s.old)
        s.release()
        try:  # settled once the key may write again (the proxy forwards every call)
            s.a.wait_for(lambda: not s.pending.exists(), timeout=60, what="the settlement")
        finally:
            proxy.stop()


def _revoke(s: Space, box: dict):
    """The owner revokes the machine's session key (after the kill): the owner's account."""
    owner = owner_account(s.a, s.owner)
    anchor = devchain_anchor(box["home"])
    anchor.transact(owner, anchor.encode_revoke_session_key(s.old))
    return owner


def test_a_pull_discarding_the_store_says_a_dropped_journals_rows_are_in_the_backup(box):
    """A revoked key's journal dropped by `kint pull --discard-local`: its warning says the
    rows the journal carried are in the backup of the store the pull moved aside, naming
    it, and to write back from it what is still wanted. It said they were "still in the
    store", for `kint push` to anchor, the store moved aside."""
    s = Space(box, "revoked-discard")
    s.kill("before_send")
    owner = _revoke(s, box)
    try:
        pulled = jdb(s.a, s.db, "pull", "--discard-local")
        said = [w for w in pulled["warnings"]
                if w.startswith("the interrupted push of epoch 2 was not sent again")]
        assert len(said) == 1, pulled
        backup = pulled["backups"][0]
        assert (f"its journal is dropped, and the changes it carried are in the store this "
                f"pull moved aside ({backup}), not anchored; write back from it what is "
                f"still wanted") in said[0], said
        assert "still in the store" not in said[0], said
        assert said[0].endswith("`kint push` anchors them"), said
        assert not s.pending.exists()
    finally:  # the machine's key authorized again for the module's other tests, come what may
        authorize_machine(box["home"], owner, s.old)
        s.release()


@pytest.mark.parametrize("rotated", [False, True])
def test_a_rekey_refused_by_the_spent_key_path_is_told_to_run_rekey(rotated):
    """A journal dropped for its spent nonce, its key not authorized (`spent`), met by a
    rekey: the hint names `kint rekey` again, not `kint push`; a push's is unchanged."""
    found = Unauthorized(2, "0x" + "ab" * 20, "0x" + "cd" * 20, rotated, spent=True)
    rekey, push = found.refusal("kint rekey").hint, found.refusal().hint
    assert "`kint rekey` again: its snapshot anchors them" in rekey and "kint push" \
        not in rekey, rekey
    assert "`kint push`" in push and "kint rekey" not in push, push


@contextmanager
def _started_settlement(s: Space, box: dict) -> Iterator[Path]:
    """The usual order: A's push killed before its send, the machine's key revoked after
    the kill, then the restarted worker's own settlement released at once, with no command
    waiting, dropping the journal. Yields the file that keeps what it found, once kept; the
    key is authorized again afterwards for the module's other tests, come what may. A
    command run while the settlement still holds the space is refused BUSY: `_unheld` runs
    one once it is done."""
    s.kill("before_send")
    owner = None
    try:
        owner = _revoke(s, box)
        s.release()
        s.a.wait_for(lambda: not s.pending.exists(), timeout=60, what="the start settlement")
        kept = s.a.kint_home / f"settled-{s.space16}.json"
        s.a.wait_for(kept.exists, timeout=60, what="the notice kept")
        yield kept
    finally:
        authorize_machine(box["home"], owner or owner_account(s.a, s.owner), s.old)
        s.release()


def _pull_says_once(s: Space, kept: Path) -> str:
    """The next `kint pull` says the dropped journal once among its warnings, uses the
    notice up, and the pull after says nothing of it: that warning."""
    out = _unheld(s, "pull", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    pulled = json.loads(out.stdout)
    said = [w for w in pulled["warnings"]
            if w.startswith("the interrupted push of epoch 2 was not sent again")]
    assert len(said) == 1 and "its journal is dropped" in said[0], pulled
    assert not kept.exists()
    again = jdb(s.a, s.db, "pull")
    assert not any("interrupted push" in w for w in again["warnings"]), again
    return said[0]


def _unheld(s: Space, *args: str, input: str | None = None):
    """`kint ARGS` on the space, once no settlement holds it."""
    found: list = []

    def attempt() -> bool:
        found.append(kdb(s.a, s.db, *args, input=input))
        return "[BUSY]" not in found[-1].stderr and '"BUSY"' not in found[-1].stdout

    s.a.wait_for(attempt, timeout=60, interval=0.2, what="a command no settlement holds")
    return found[-1]


def _unheld_op(s: Space, op: str, args: dict) -> str:
    """What the worker's `op` on the space says (its message, or its refusal's), once no
    settlement holds it."""
    found: list[str] = []

    def attempt() -> bool:
        try:
            found.append(s.a.call(op, db=s.db, args=args, timeout_s=120).get("message", ""))
        except KintError as err:
            if err.code == "BUSY":
                return False
            found.append(f"[{err.code}] {err.message}")
        return True

    s.a.wait_for(attempt, timeout=60, interval=0.2, what="an op no settlement holds")
    return found[-1]


def test_what_the_start_settlement_dropped_the_next_pull_says_once(box):
    """A revoked key's journal dropped by the restarted worker's own settlement, with no
    command waiting (the usual order): the next `kint pull` says it once among its
    warnings, with the hint's words, and the pull after says nothing of it. Before, the
    start settlement only logged it, and the pull found nothing to settle and said
    nothing."""
    s = Space(box, "revoked-started")
    with _started_settlement(s, box) as kept:
        _status_and_doctor_name(s, kept)
        said = _pull_says_once(s, kept)
        assert said.endswith("then `kint push` anchors them"), said
        assert jdb(s.a, s.db, "status")["settled_notice"] is None


def _status_and_doctor_name(s: Space, kept: Path) -> None:
    """`kint status` (a `settled:` line, `settled_notice` in --json) and `kint doctor` (its
    `interrupted push` row, a warning) name the kept notice and what it holds, and leave it
    for the command that says it. Before, neither showed an outcome waiting."""
    told = (f"{kept.name} keeps what settling an interrupted push found, said by no command "
            f"yet: the interrupted push of epoch 2 was not sent again")
    status = jdb(s.a, s.db, "status")
    assert (status["settled_notice"] or "").startswith(told), status
    text = kdb(s.a, s.db, "status").stdout
    assert f"settled: {told}" in text, text
    doctor = json.loads(kdb(s.a, s.db, "doctor", "--json").stdout)
    row = next(c for c in doctor["checks"] if c["name"] == "interrupted push")
    assert row.get("warn") and told in row["detail"], row
    assert kept.exists()


def test_what_the_start_settlement_dropped_a_rekey_says_in_its_own_words(box):
    """The same journal, dropped by the start settlement, met first by `kint rekey`: it is
    refused once, naming the key, its hint saying what applies to a rekey (the owner
    authorizes the key, then `kint rekey` again, whose snapshot anchors the rows); run
    again once the key may write, the rekey goes through, its snapshot holding them.
    Before, the rekey said nothing of it, and a rekey that did was told to run `kint push`."""
    s = Space(box, "revoked-rekey")
    signature = _signature(s)
    with _started_settlement(s, box) as kept:
        out = _unheld(s, "rekey", "--signature", "-", input=signature)
        assert out.returncode != 0 and "[NOT_CONNECTED]" in out.stderr, out.stderr
        assert (f"the interrupted push of epoch 2 was not sent again: session key {s.old} "
                f"is not authorized") in out.stderr, out.stderr
        assert "then `kint rekey` again: its snapshot anchors them" in out.stderr, out.stderr
        assert "`kint push`" not in out.stderr.split("hint:", 1)[1], out.stderr
        assert not kept.exists()
    rekeyed = jdb(s.a, s.db, "rekey", "--signature", "-", input=signature)
    assert [e["seq"] for e in rekeyed["snapshot"]] == [2], rekeyed
    assert s.anchored() == {"first", "second"}


@pytest.mark.parametrize("op,args", [("exit_push", {}), ("push", {"hold_reason": "watcher"})],
                         ids=["exit-push", "watcher-push"])
def test_what_the_start_settlement_dropped_outlives_a_push_nobody_reads(box, op, args):
    """The journal dropped by the start settlement, then a push whose refusal reaches
    nobody: the exit push of a closing kint-server (the real `exit_push` op) or the store
    watcher's (its hold reason). It neither refuses on the kept notice nor uses it up: the
    next `kint pull` says it once among its warnings, the pull after says nothing. Before,
    that push refused with the notice's words and removed it, and the user's next command
    said nothing of the dropped journal."""
    s = Space(box, f"revoked-unread-{op}")
    with _started_settlement(s, box) as kept:
        said = _unheld_op(s, op, args)  # the revoked key's refusal, or nothing to push...
        assert "interrupted push" not in said, said  # ...not the notice's words
        assert kept.exists()
        _pull_says_once(s, kept)


@contextmanager
def _anchored_since(s: Space, box: dict) -> Iterator[Path]:
    """`_started_settlement`, then the key authorized again and the store watcher's push
    anchoring the rows the dropped journal carried, the notice still kept: yields it."""
    with _started_settlement(s, box) as kept:
        authorize_machine(box["home"], owner_account(s.a, s.owner), s.old)
        assert "nothing to push" not in _unheld_op(s, "push", {"hold_reason": "watcher"})
        assert s.anchored() == {"first", "second"} and kept.exists()
        yield kept


def _signature(s: Space) -> str:
    """The owner's derive signature, as `kint rekey --signature -` reads it."""
    return wallet_signature(owner_account(s.a, s.owner),
                            canonical_payload(s.owner).decode()) + "\n"


def test_what_the_start_settlement_dropped_and_the_watcher_anchored_since_is_said_so(box):
    """The journal dropped by the start settlement (the key revoked), then the key is
    authorized again and the store watcher's push anchors the rows the journal carried,
    leaving the notice kept. The next `kint push` says the dropped journal once, as what
    holds now: nothing of it is left to anchor, and it goes on (nothing to push, exit 0).
    It refused NOT_CONNECTED, hint "`kint push` anchors them", which found nothing."""
    s = Space(box, "revoked-anchored-since")
    with _anchored_since(s, box) as kept:
        out = _unheld(s, "push")
        assert out.returncode == 0, out.stdout + out.stderr
        assert "nothing to push" in out.stdout, out.stdout
        assert ("its journal is dropped, and the store holds no unanchored change now: a "
                "later push from this machine (its store watcher's, or kint-server's as it "
                "closed) anchored the changes it carried") in out.stderr, out.stderr
        assert "anchors them" not in out.stderr, out.stderr
        assert not kept.exists()


def test_what_the_start_settlement_dropped_and_the_watcher_anchored_since_a_rekey_says(box):
    """The same kept notice, the rows anchored since by the watcher's push, met by `kint
    rekey`: it owes nothing, so the rekey goes through, its snapshot's push saying it once
    on stderr (the store holds no unanchored change now), the notice used up. A rekey refused
    NOT_CONNECTED on it, saying to run `kint rekey` again, for which the user gave the
    signature again."""
    s = Space(box, "revoked-anchored-rekey")
    signature = _signature(s)
    with _anchored_since(s, box) as kept:
        out = _unheld(s, "rekey", "--signature", "-", input=signature)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "snapshot epoch 3" in out.stdout, out.stdout
        assert out.stderr.count("the interrupted push of epoch 2 was not sent again") == 1, \
            out.stderr
        assert ("its journal is dropped, and the store holds no unanchored change now"
                in out.stderr), out.stderr
        assert "anchors them" not in out.stderr, out.stderr
        assert not kept.exists()


def test_a_rekey_whose_snapshot_fails_after_the_settlement_keeps_the_notice(box):
    """The same kept notice (owing nothing) met by `kint rekey`, whose snapshot's push then
    fails in a way its refusal carries no notices on: the space's watermark garbled (a real
    file, read as the snapshot is recorded), CORRUPT_STATE. The notice is kept, and said
    by the next command once the file is put right. The snapshot's settlement used it up
    as it read it, and the failure lost it unsaid."""
    s = Space(box, "revoked-anchored-rekey-fails")
    signature = _signature(s)
    with _anchored_since(s, box) as kept:
        watermark = s.a.kint_home / f"watermark-{s.space16}.json"
        good = watermark.read_bytes()
        watermark.write_bytes(b"{not json")
        out = _unheld(s, "rekey", "--signature", "-", input=signature)
        assert out.returncode != 0 and "[CORRUPT_STATE]" in out.stderr, \
            out.stdout + out.stderr
        assert "the interrupted push of epoch 2" not in out.stderr, out.stderr
        assert kept.exists()
        watermark.write_bytes(good)
        pulled = jdb(s.a, s.db, "pull")
        said = [w for w in pulled["warnings"]
                if w.startswith("the interrupted push of epoch 2 was not sent again")]
        assert len(said) == 1 and "holds no unanchored change now" in said[0], pulled
        assert not kept.exists()


def test_a_rekey_that_fails_after_its_snapshot_landed_keeps_the_notice(box):
    """The same kept notice (owing nothing) met by `kint rekey`, whose snapshot's push goes
    through, saying it among its notices, and whose own end then fails: the recovery file
    cannot be written (a directory stands at its path), INTERNAL. The push's result goes
    back to the rekey, not the user, so the notice is kept; once the path is free, the next
    `kint pull` finishes the rekey and says it once. The push used it up as it returned,
    and the rekey's failure lost it unsaid."""
    s = Space(box, "revoked-anchored-rekey-ends")
    signature = _signature(s)
    with _anchored_since(s, box) as kept:
        recovery = s.a.kint_home / f"RECOVERY-{s.space16}.txt"
        recovery.unlink(missing_ok=True)
        recovery.mkdir()
        try:
            out = _unheld(s, "rekey", "--signature", "-", input=signature)
        finally:
            recovery.rmdir()
        assert out.returncode != 0 and "[INTERNAL]" in out.stderr, out.stdout + out.stderr
        assert "the interrupted push of epoch 2" not in out.stderr, out.stderr
        assert kept.exists()
        pulled = jdb(s.a, s.db, "pull")
        said = [w for w in pulled["warnings"]
                if w.startswith("the interrupted push of epoch 2 was not sent again")]
        assert len(said) == 1 and "holds no unanchored change now" in said[0], pulled
        assert not kept.exists() and recovery.is_file()


def test_what_the_start_settlement_dropped_an_agents_memory_push_says(box):
    """The same kept notice met by an agent's memory_push (the push op with the "tool"
    hold reason, as kint-server sends it): its refusal reaches the agent, so it says the
    dropped journal and uses the notice up, as a `kint push` does."""
    s = Space(box, "revoked-tool-push")
    with _started_settlement(s, box) as kept:
        said = _unheld_op(s, "push", {"hold_reason": "tool"})
        assert said.startswith("[NOT_CONNECTED] the interrupted push of epoch 2 was not sent "
                               "again"), said
        assert not kept.exists()


def test_what_the_start_settlement_dropped_a_compact_says(box):
    """The kept notice met by `kint compact` (a push of a snapshot): refused once in the
    push's words, the notice used up, as docs/commands.md says of compact."""
    s = Space(box, "revoked-compact")
    with _started_settlement(s, box) as kept:
        out = _unheld(s, "compact")
        assert out.returncode == PUSH_PULL_REFUSED and "[NOT_CONNECTED]" in out.stderr, \
            out.stdout + out.stderr
        assert "the interrupted push of epoch 2 was not sent again" in out.stderr, out.stderr
        assert not kept.exists()


def test_a_notice_kept_for_the_vault_the_space_left_is_not_said_for_the_next(box):
    """End to end, the notice's vault check (tests/test_settled_notice.py has its file): the
    space's first push killed, its key revoked, the start settlement drops the journal and
    keeps the notice; nothing of the vault is seen here, so `kint connect` moves the space
    to another owner. The new vault's pull says nothing of the old vault's journal and
    drops the notice; the old vault's words were said for the new one."""
    from types import SimpleNamespace

    from conftest import write_rules
    from kint.custody.session_key import session_address

    a = box["a"]
    db = a.profile_db("notice-moved")
    write_rules(db, a.tenant, first="in the first push, killed")
    connected = jdb(a, db, "connect", "--dev")
    space16, owner = connected["space"], owner_account(a, connected["owner"])
    pending = a.kint_home / f"pending-{space16}.json"
    kept = a.kint_home / f"settled-{space16}.json"
    key = session_address(a.kint_home)
    box["hold"].write_text("held")
    box["flag"].write_text(f"before_send {space16}")
    out = kdb(a, db, "push")
    assert out.returncode == PUSH_PULL_REFUSED and "[WORKER_DOWN]" in out.stderr, out.stderr
    anchor = devchain_anchor(box["home"])
    anchor.transact(owner, anchor.encode_revoke_session_key(key))
    try:
        box["hold"].unlink()
        a.wait_for(lambda: not pending.exists() and kept.exists(), timeout=60,
                   what="the start settlement keeping its notice")
        space = SimpleNamespace(a=a, db=db)
        other = "0x" + "5a" * 20
        moved = _unheld(space, "connect", "--owner", other, "--smart-account",
                        "--passphrase-stdin", "--json", input="another vault's passphrase\n")
        assert moved.returncode == 0, moved.stdout + moved.stderr
        assert json.loads(moved.stdout)["owner_changed"], moved.stdout
        pulled = _unheld(space, "pull", "--json")
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        assert "interrupted push" not in pulled.stdout + pulled.stderr, pulled.stdout
        assert not kept.exists()
    finally:  # the machine's key authorized again for the module's other tests, come what may
        authorize_machine(box["home"], owner, key)
        box["hold"].unlink(missing_ok=True)
