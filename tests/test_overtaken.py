"""A push or rekey killed on machine A, and machine B pushing on the same space before A's
restarted worker settles the journal (overtaken.py): (a) A's epoch landed and B pushed on
top of it; (b) A's transaction never landed and B's epoch took its seq. Either way the
space must not stay stuck refusing every push and pull: (a) A records its epoch and pulls
on from it; (b) A drops the journal (its prev is spent) and the pull's fork rules decide
about the rows it carried; a push that meets either case says which it was.

One anvil for the session, two machines on one owner (A with the crash points and the
settlement hold of tests/support/kint_test_faults.py preloaded), a profile store (a space)
per test, shared by both machines. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import time
from pathlib import Path
from unittest import mock

import pytest
from web3 import Web3
from web3.exceptions import TransactionNotFound

from chain_machines import (authorize_machine, jdb, kdb, new_machine, ok, owner_account,
                            wallet_signature)
from conftest import sibyl_client, write_rules as write
from rpc_proxy import RpcProxy
from kint.chain.artifact import load_artifact
from kint.chain.config import devchain_record
from kint.commands.exit_codes import CHAIN_MOVED as CHAIN_MOVED_EXIT
from kint.commands.exit_codes import PUSH_PULL_REFUSED
from kint.custody.session_key import session_address, unlock_session_key
from kint.custody.vault_message import canonical_payload
from kint.epochs.envelope import parse_header
from kint.rows.export import connect_ro, export_rows
from kint.spaces import space_id as space_id_of
from kint.supervisor.pidlock import running_pid
from kint.tenant_worker.overtaken import PULLED_SINCE


@pytest.fixture(scope="module")
def box(tmp_path_factory, chain_home):
    root = tmp_path_factory.mktemp("overtaken")
    flag, hold = root / "crash.flag", root / "hold-settlement"
    record = json.loads(devchain_record(chain_home).read_text())
    proxy = RpcProxy(record["rpc_url"], max_hang_s=30).start()
    w3 = Web3(Web3.HTTPProvider(record["rpc_url"], request_kwargs={"timeout": 10}))
    contract = w3.eth.contract(address=Web3.to_checksum_address(record["anchor"]),
                               abi=load_artifact()["abi"])
    a = new_machine(root / "a", chain_home, KINT_TEST_CRASH_FLAG=str(flag),
                    KINT_TEST_HOLD_SETTLE=str(hold), KINT_NONCE_RETRY_SECONDS="1")
    b = new_machine(root / "b", chain_home)
    started = {"a": running_pid(a.kint_home), "b": running_pid(b.kint_home)}
    try:
        yield {"a": a, "b": b, "flag": flag, "hold": hold, "home": chain_home,
               "contract": contract, "proxy": proxy, "supervisors": started}
    finally:
        hold.unlink(missing_ok=True)
        proxy.forward()
        a.shutdown()
        b.shutdown()
        proxy.stop()


def same_supervisors(box: dict) -> None:
    """Each machine's supervisor is still the test one the module started. One that stopped
    (an edit of kint/ under the editable install, tests/checkout_watch.py; a crash, an OOM
    kill) is replaced by the next `kint` command with a production supervisor, without the
    suite's preloads: the module's tests then failed one after another with Sibyl's "sign-in
    file damaged or belongs to another computer", the cause unnamed."""
    for name, pid in box["supervisors"].items():
        now = running_pid(box[name].kint_home)
        runs = f"pid {now} runs now" if now else "none runs"
        assert now == pid, (
            f"machine {name}'s test supervisor (pid {pid}) is gone ({runs}): the module's "
            f"machines no longer run the suite's preloads; was kint/ edited during the run "
            f"(tests/checkout_watch.py), or did the supervisor crash?")


class Space:
    """One space both machines connect (the same profile name: the same label)."""

    def __init__(self, box: dict, profile: str, *connect_args: str) -> None:
        same_supervisors(box)
        self.box, self.a, self.b = box, box["a"], box["b"]
        self.dba, self.dbb = self.a.profile_db(profile), self.b.profile_db(profile)
        write(self.dba, self.a.tenant, first="anchored before the kill")
        connected = jdb(self.a, self.dba, "connect", "--dev", *connect_args)
        self.space16, self.owner = connected["space"], connected["owner"]
        self.sid = space_id_of(self.a.label(self.dba))
        assert space_id_of(self.b.label(self.dbb)) == self.sid
        assert jdb(self.a, self.dba, "push")["epochs"][-1]["seq"] == 1
        self.connect_b()
        # B's session key, read from its keystore (what `kint status` names, without a
        # command started for it).
        authorize_machine(box["home"], owner_account(self.a, self.owner),
                          session_address(self.b.kint_home))
        assert jdb(self.b, self.dbb, "pull")["applied"] == [1]
        self.pending = self.a.kint_home / f"pending-{self.space16}.json"
        self.rekey_journal = self.a.kint_home / f"rekey-{self.space16}.json"

    def signature(self) -> str:
        """The owner's wallet (A's devchain key) signing the vault message, as a rekey or
        a connect reads it on stdin. The message is `kint canonical-payload`'s, made in
        this process (it depends on the owner alone): no command started for it."""
        payload = canonical_payload(self.owner).decode()
        return wallet_signature(owner_account(self.a, self.owner), payload) + "\n"

    def connect_b(self) -> dict:
        return jdb(self.b, self.dbb, "connect", "--owner", self.owner, "--signature", "-",
                   input=self.signature())

    def kill_a(self, step: str, *args: str, input: str | None = None) -> None:
        """Run `kint ARGS` on A with its worker killed at `step`, the restarted worker's
        settlement held until `release`."""
        self.box["hold"].write_text("held")
        self.box["flag"].write_text(f"{step} {self.space16}")
        out = kdb(self.a, self.dba, *args, input=input)
        assert out.returncode == PUSH_PULL_REFUSED and "[WORKER_DOWN]" in out.stderr, \
            out.stdout + out.stderr
        assert not self.box["flag"].exists(), "the worker did not reach the step"
        assert self.pending.exists()

    def release(self) -> None:
        self.box["hold"].unlink(missing_ok=True)

    def b_pushes(self, name: str) -> dict:
        ok(kdb(self.b, self.dbb, "pull"))
        write(self.dbb, self.b.tenant, **{name: "anchored by machine B"})
        return jdb(self.b, self.dbb, "push")["epochs"][-1]

    def chain_head(self) -> tuple[int, str]:
        digest, seq, _ = self.box["contract"].functions.head(
            Web3.to_checksum_address(self.owner), bytes.fromhex(self.sid)).call()
        return int(seq), bytes(digest).hex()

    def mirror_head(self) -> tuple[int, str]:
        held = json.loads(gzip.decompress(
            (self.a.kint_home / f"mirror-{self.space16}.json.gz").read_bytes()))
        return held["head"]["seq"], held["head"]["digest"]

    def meta(self, seq: int) -> dict:
        return json.loads((self.a.kint_home / "epochs" / self.space16 /
                           f"{seq:08d}.meta.json").read_text())

    def dek_id(self, seq: int) -> str:
        return parse_header(bytes.fromhex(self.meta(seq)["header"])).dek_id.hex()

    def names(self, db: Path | str) -> set[str]:
        return {r.canonical_id.split("\x00")[2] for r in export_rows(connect_ro(str(db)),
                                                                     self.a.tenant)
                if r.canonical_id.startswith("entity\x00")}

    def unheld_a(self, *command: str) -> subprocess.CompletedProcess[str]:
        """`kint COMMAND` on A, once no settlement in A's worker holds the space (BUSY
        meanwhile, in text or in `--json`)."""
        found: list[subprocess.CompletedProcess[str]] = []

        def attempt() -> bool:
            found.append(kdb(self.a, self.dba, *command))
            out = found[-1]
            return "[BUSY]" not in out.stderr and '"BUSY"' not in out.stdout

        self.a.wait_for(attempt, timeout=60, interval=0.2,
                        what="a command no settlement holds")
        return found[-1]

    def pull_a(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A's pull, once no settlement in A's worker holds the space."""
        return self.unheld_a("pull", *args)

    def chain_moved_a(self, *command: str, input: str | None = None) -> str:
        """`kint COMMAND` on A, refused as the chain moved on (its exit and its code): the
        refusal's stderr, for what it says of the interrupted push."""
        out = kdb(self.a, self.dba, *command, input=input)
        assert out.returncode == CHAIN_MOVED_EXIT and "[CHAIN_MOVED]" in out.stderr, out.stderr
        return out.stderr


def test_a_killed_push_that_landed_below_the_head_is_recorded_and_pulled_on_from(box):
    """(a) A's epoch 2 landed, B pulled it and pushed 3, then A's push settles the journal:
    it records epoch 2 as landed and says so (CHAIN_MOVED, pull then push); the pull goes
    on from it. Before, push and pull both refused CHAIN_MOVED for ever."""
    s = Space(box, "landed-push")
    write(s.dba, s.a.tenant, second="in the push killed after its send")
    s.kill_a("after_send", "push")
    assert s.chain_head()[0] == 2
    assert s.b_pushes("third")["seq"] == 3
    try:
        said = s.chain_moved_a("push")
        assert ("an interrupted push of epoch 2 had landed and is recorded now; another "
                "machine has since pushed up to seq 3") in said, said
        assert "hint: run `kint pull`, then `kint push`" in said, said
        assert not s.pending.exists()
        assert s.mirror_head()[0] == 2 and s.meta(2)["prev"] == s.meta(1)["digest"]
    finally:
        s.release()
    pulled = json.loads(ok(s.pull_a("--json")).stdout)
    assert pulled["applied"] == [3] and pulled["store_root_matches"] is True, pulled
    assert s.mirror_head() == s.chain_head()
    assert s.meta(3)["prev"] == s.meta(2)["digest"]
    assert s.names(s.dba) == {"first", "second", "third"}
    write(s.dba, s.a.tenant, fourth="written on A after the settlement")
    assert [e["seq"] for e in jdb(s.a, s.dba, "push")["epochs"]] == [4]


def test_a_killed_push_whose_seq_another_machine_took_is_dropped_and_nothing_is_lost(box):
    """(b) A was killed before its send and B took seq 2: A's transaction (prev = seq 1)
    can never land, so A's push drops the journal and says so; the pull then meets A's
    unanchored row as any fork, and --discard-local keeps it in the backup. The dropped
    transaction's nonce is given back, so A's next push takes it: it used to wait
    KINT_NONCE_RETRY_SECONDS for it, then re-broadcast the dropped push, which reverted
    (StaleHead) and spent an epoch's gas."""
    s = Space(box, "lost-push")
    write(s.dba, s.a.tenant, second="in the push killed before its send")
    s.kill_a("before_send", "push")
    dropped = "0x" + json.loads(s.pending.read_text())["raw_tx"]
    w3, key = box["contract"].w3, session_address(s.a.kint_home)
    assert s.chain_head()[0] == 1
    assert s.b_pushes("other")["seq"] == 2
    try:
        said = s.chain_moved_a("push")
        assert ("an interrupted push of epoch 2 never landed and never can: another "
                "machine's epoch holds seq 2") in said, said
        assert not s.pending.exists()
        assert s.mirror_head()[0] == 1
    finally:
        s.release()
    fork = s.pull_a()
    assert fork.returncode == CHAIN_MOVED_EXIT and "[FORK]" in fork.stderr, fork.stderr
    assert "--discard-local" in fork.stderr
    restored = json.loads(ok(s.pull_a("--discard-local", "--json")).stdout)
    assert restored["store_root_matches"] is True and restored["backups"], restored
    assert s.mirror_head() == s.chain_head()
    assert s.names(s.dba) == {"first", "other"}
    assert "second" in s.names(restored["backups"][0])  # the store moved aside, whole
    write(s.dba, s.a.tenant, third="written on A after the settlement")
    sent_before = w3.eth.get_transaction_count(key)
    assert [e["seq"] for e in jdb(s.a, s.dba, "push")["epochs"]] == [3]
    assert w3.eth.get_transaction_count(key) == sent_before + 1  # the push, nothing else
    with pytest.raises(TransactionNotFound):  # the dropped push was never re-broadcast
        w3.eth.get_transaction(Web3.keccak(hexstr=dropped))


def test_a_pull_that_drops_a_journal_another_machine_passed_says_what_to_do(box):
    """(b) settled by a `pull --discard-local` rather than a push: the journal is dropped,
    the pull goes on (the store moved aside, the row the journal carried with it), and its
    warning says where those changes are and what brings them to the chain. The warning
    said only what happened before; then it said the changes were "still in the store",
    the restored one that does not hold them: it names the store moved aside."""
    s = Space(box, "lost-push-pulled")
    write(s.dba, s.a.tenant, second="in the push killed before its send")
    s.kill_a("before_send", "push")
    assert s.b_pushes("other")["seq"] == 2
    try:
        pulled = jdb(s.a, s.dba, "pull", "--discard-local")
    finally:
        s.release()
    assert not s.pending.exists() and s.mirror_head() == s.chain_head()
    said, moved = pulled["warnings"][0], pulled["backups"][0]
    assert said.startswith("an interrupted push of epoch 2 never landed and never can"), said
    assert said.endswith(f"its journal was dropped, and the changes it carried are in the "
                         f"store this pull moved aside ({moved}), not anchored; write back "
                         f"from it what is still wanted, then `kint push`"), said
    assert "still in the store" not in said, said
    assert "second" in s.names(moved)


def _discard_killed_after_the_move(box: dict, profile: str,
                                   step: str = "after_set_entity") -> Space:
    """A space whose push A's worker was killed in, B pushing over it, then A's `pull
    --discard-local` killed after it moved the store aside: mid-replay, or (`step`
    after_discard) at once, before it wrote the copy into the kept notice."""
    s = Space(box, profile)
    write(s.dba, s.a.tenant, second="in the push killed before its send")
    s.kill_a("before_send", "push")
    assert s.b_pushes("other")["seq"] == 2
    try:
        box["flag"].write_text(f"{step} {s.space16}")
        killed = kdb(s.a, s.dba, "pull", "--discard-local")
        assert killed.returncode != 0, killed.stdout  # the worker died under the request
        assert not box["flag"].exists(), f"the pull did not reach {step}"
    finally:
        s.release()
    return s


def _copies(s: Space) -> list[Path]:
    """The stores A's discarding pulls moved aside (their -wal and -shm left out)."""
    return [p for p in s.dba.parent.glob(f"{s.dba.name}.kint-backup-*")
            if not p.name.endswith(("-wal", "-shm"))]


@pytest.mark.parametrize("step", ["after_set_entity", "after_discard"],
                         ids=["mid-replay", "right-after-the-rename"])
def test_a_discarding_pull_killed_after_the_move_leaves_the_copy_named(box, step):
    """(b) settled by a `pull --discard-local` killed after it moved the store aside and
    before it said what it found: mid-replay, or between the store's rename and its rewrite
    of the kept notice (the crash point after_discard). The kept notice said the journal's
    rows were "still in the store", the restored one that does not hold them, in `kint
    status` and in the pull that finishes the restore. Both name the store moved aside
    (named before the rename too, as the copy the store is moving to, taken as where the
    rows are once it exists)."""
    s = _discard_killed_after_the_move(box, f"lost-push-discard-{step.replace('_', '-')}",
                                       step)
    moved = _copies(s)
    assert len(moved) == 1 and "second" in s.names(moved[0]), moved
    where = f"a discarding pull moved aside ({moved[0]}), not anchored"
    kept = jdb(s.a, s.dba, "status")["settled_notice"]
    assert where in kept and "still in the store" not in kept, kept
    pulled = json.loads(ok(s.pull_a("--json")).stdout)
    assert where in pulled["warnings"][0] and "still in the store" not in pulled["warnings"][0]


def test_a_push_after_a_discarding_pull_killed_after_the_move_says_to_write_back(box):
    """(b) the same killed `pull --discard-local`, then `kint push` first: it refuses on the
    kept notice and uses it up, and said "run `kint pull`, then `kint push`", so the
    write-back from the copy was never said (the pull after it had no notice left). The
    refusal names the copy and the write-back step after the pull."""
    s = _discard_killed_after_the_move(box, "lost-push-discard-killed-push")
    pushed = kdb(s.a, s.dba, "push")
    said = pushed.stdout + pushed.stderr
    assert pushed.returncode == CHAIN_MOVED_EXIT, said
    assert "a discarding pull moved aside (" in said, said
    assert ("run `kint pull` (it finishes a restore the discarding pull left), then write "
            "back from the store that pull moved aside (named above) what is still wanted, "
            "then `kint push`") in said, said


def test_an_agents_restore_that_drops_a_journal_names_its_own_tools_for_the_rows(box):
    """(b) settled by an agent's memory_pull with discard_local, through a real kint-server
    started before the kill (its start-up pull would meet the journal first): the pull's
    warning said what to do with the rows for a terminal ("write back ..., then `kint
    push`"); the agent is given its own tool for them, the human what is still wanted."""
    from mcp_session import AgentProcess

    s = Space(box, "lost-push-agent")
    agent = AgentProcess({**s.a.env, "SIBYL_MEMORY_DB": str(s.dba)}).start()
    try:
        write(s.dba, s.a.tenant, second="in the push killed before its send")
        s.kill_a("before_send", "push")
        assert s.b_pushes("other")["seq"] == 2
        pulled = agent.call("memory_pull", discard_local=True)
    finally:
        agent.close()
        s.release()
    said = (pulled.get("warnings") or [repr(pulled)])[0]
    assert said.startswith("an interrupted push of epoch 2 never landed and never can"), said
    assert said.endswith("not anchored; ask the human what of it is still wanted; once "
                         "that is written back, memory_push anchors it"), said
    assert "`kint push`" not in said, said


def test_what_kint_servers_start_up_pull_settled_is_said_to_the_agent(box):
    """(b) met first by kint-server's own start-up pull, which refuses it as a fork (the
    rows the journal carried are unanchored and the chain moved) and says so only in
    kint.log: what the settlement found was used up there, and the agent's memory_status
    and memory_pull said nothing of it. The start-up pull leaves it kept; the agent's
    memory_pull says it among its warnings."""
    from mcp_session import AgentProcess

    s = Space(box, "lost-push-start-up")
    write(s.dba, s.a.tenant, second="in the push killed before its send")
    s.kill_a("before_send", "push")
    assert s.b_pushes("other")["seq"] == 2
    s.release()
    agent = AgentProcess({**s.a.env, "SIBYL_MEMORY_DB": str(s.dba)}).start()
    try:
        s.a.wait_for(lambda: not s.pending.exists(), timeout=60, what="the settlement")
        kept = agent.call("memory_status")["settled_notice"]
        pulled = agent.call("memory_pull", discard_local=True)
    finally:
        agent.close()
    assert kept and "an interrupted push of epoch 2 never landed" in kept, kept
    said = (pulled.get("warnings") or [repr(pulled)])[0]
    assert said.startswith("an interrupted push of epoch 2 never landed and never can"), said


def test_a_notice_the_start_up_pull_went_past_is_said_by_the_push_not_refused_on(box):
    """(a) met first by kint-server's start-up pull: it records A's epoch 2, pulls B's 3 on
    top and keeps the notice for the agent. The agent's first memory_push says it among
    its notices and anchors what the agent wrote; it refused CHAIN_MOVED ("call
    memory_pull first") with nothing left to pull, as if the store were still behind."""
    from mcp_session import AgentProcess

    s = Space(box, "landed-start-up")
    write(s.dba, s.a.tenant, second="in the push killed after its send")
    s.kill_a("after_send", "push")
    assert s.b_pushes("third")["seq"] == 3
    s.release()
    env = {**s.a.env, "SIBYL_MEMORY_DB": str(s.dba), "KINT_BOOTSTRAP_SECONDS": "60"}
    agent = AgentProcess(env).start()
    try:
        s.a.wait_for(lambda: s.mirror_head() == s.chain_head(), timeout=60,
                     what="the start-up pull")
        kept = agent.call("memory_status")["settled_notice"]
        write(s.dba, s.a.tenant, fourth="written by the agent after the start-up")
        pushed = agent.call("memory_push")
        after = agent.call("memory_status")["settled_notice"]
    finally:
        agent.close()
    landed = ("an interrupted push of epoch 2 had landed and is recorded now; another "
              "machine has since pushed up to seq 3")
    assert kept and landed in kept, kept
    assert "error" not in pushed and pushed["pushed"] == 1, pushed
    assert any(landed in n for n in pushed.get("notices", [])), pushed
    assert after is None, after  # said once
    assert s.names(s.dba) == {"first", "second", "third", "fourth"}


def test_a_pulled_since_notice_naming_a_copy_ends_in_the_agents_tools(box):
    """(b) a `pull --discard-local` killed mid-replay, its notice kept naming the store it
    moved aside; kint-server's start-up pull finishes the restore and leaves it kept. The
    agent's memory_push says it among its notices (the store pulled since), with the copy's
    write-back step: it ended in "then `kint push`", a terminal's command, where a pull's
    warning of the same notice gives the agent its own tool and the human what is wanted."""
    from mcp_session import AgentProcess

    s = _discard_killed_after_the_move(box, "lost-push-discard-agent-push")
    moved = _copies(s)
    env = {**s.a.env, "SIBYL_MEMORY_DB": str(s.dba), "KINT_BOOTSTRAP_SECONDS": "60"}
    agent = AgentProcess(env).start()
    try:
        s.a.wait_for(lambda: s.mirror_head() == s.chain_head(), timeout=60,
                     what="the start-up pull")
        pushed = agent.call("memory_push")
    finally:
        agent.close()
    assert "error" not in pushed and pushed["pushed"] == 0, pushed
    said = [n for n in pushed.get("notices", []) if "never landed" in n]
    assert len(said) == 1 and len(moved) == 1, pushed
    assert f"a discarding pull moved aside ({moved[0]}), not anchored" in said[0], said
    assert said[0].endswith("ask the human what of it is still wanted; once that is "
                            "written back, memory_push anchors it"), said
    assert "`kint push`" not in said[0], said


def test_a_dropped_notice_the_start_up_pull_went_past_is_said_true_in_the_agents_words(box):
    """(b) met first by kint-server's start-up pull, which goes on past it: the row the
    dropped journal carried was deleted from A's store, so no unanchored change forks the
    pull. The agent's memory_push said among its notices that the changes were "still in
    the store, not anchored", and that "`kint status` counts them, and `kint push` anchors
    them": a terminal's commands, in the answer of the very push that anchors what the
    store holds. It says what the pull since means for them, and names no command."""
    from mcp_session import AgentProcess

    s = Space(box, "lost-push-start-up-past")
    write(s.dba, s.a.tenant, second="in the push killed before its send")
    s.kill_a("before_send", "push")
    assert s.b_pushes("other")["seq"] == 2
    client = sibyl_client(s.dba, s.a.tenant)
    try:
        assert client.delete_entity("rules", "second")
    finally:
        client.storage.close()
    s.release()
    env = {**s.a.env, "SIBYL_MEMORY_DB": str(s.dba), "KINT_BOOTSTRAP_SECONDS": "60"}
    agent = AgentProcess(env).start()
    try:
        s.a.wait_for(lambda: not s.pending.exists() and s.mirror_head() == s.chain_head(),
                     timeout=60, what="the start-up pull")
        write(s.dba, s.a.tenant, fourth="written by the agent after the start-up")
        pushed = agent.call("memory_push")
        after = agent.call("memory_status")["settled_notice"]
    finally:
        agent.close()
    assert "error" not in pushed and pushed["pushed"] == 1, pushed
    said = [n for n in pushed.get("notices", []) if "epoch 2 never landed" in n]
    assert len(said) == 1, pushed
    assert said[0].startswith("an interrupted push of epoch 2 never landed and never can: "
                              "another machine's epoch holds seq 2"), said
    assert said[0].endswith(f"its journal was dropped; {PULLED_SINCE}"), said
    assert "still in the store" not in said[0] and "`kint " not in said[0], said
    assert after is None, after  # said once
    assert s.names(s.dba) == {"first", "other", "fourth"}


def test_a_dropped_push_still_waiting_at_the_endpoint_is_replaced_not_left_to_revert(box):
    """(b) with A's transaction sent and still waiting at the endpoint: A's session key has
    a nonce below it that nothing has sent (held in A's nonce book by a live process), so
    the endpoint queues it. B takes seq 2; A's push drops the journal and replaces the
    waiting transaction by a transfer to self at its nonce, saying so. Once the nonce
    below is sent, the transfer is mined in its place: 21,000 gas. It was left to be mined
    after the hole and revert (StaleHead), spending the epoch's calldata gas; nothing
    anchored was lost either way."""
    s = Space(box, "waiting-push")
    w3, key = box["contract"].w3, session_address(s.a.kint_home)
    hole = w3.eth.get_transaction_count(key)
    book = s.a.kint_home / "nonces" / f"{hole:012d}.json"
    book.write_text(json.dumps({"nonce": hole, "address": key.lower(), "space16": "f" * 16,
                                "pid": os.getpid(), "allocated_at": time.monotonic()}))
    write(s.dba, s.a.tenant, second="in the push whose transaction waits")
    s.kill_a("after_send", "push")
    waiting = Web3.keccak(hexstr=json.loads(s.pending.read_text())["raw_tx"])
    assert w3.eth.get_transaction(waiting)["blockNumber"] is None  # queued behind the hole
    assert s.b_pushes("other")["seq"] == 2
    try:
        said = s.chain_moved_a("push")
        assert ("its transaction, still waiting at the endpoint, was replaced by a transfer "
                "to self at its nonce") in said, said
    finally:
        s.release()
        book.unlink(missing_ok=True)
    # The hole is sent (a transfer from A's key, signed here): what waited behind it goes.
    with mock.patch.dict(os.environ, s.a.env, clear=True):
        account = unlock_session_key(s.a.kint_home)
    filler = account.sign_transaction({"to": key, "value": 0, "gas": 21_000, "nonce": hole,
                                       "gasPrice": 2 * w3.eth.gas_price, "chainId": 31337})
    first = w3.eth.block_number  # other tests' machines mine on the same devchain meanwhile
    w3.eth.send_raw_transaction(filler.raw_transaction)
    s.a.wait_for(lambda: w3.eth.get_transaction_count(key) == hole + 2, timeout=30,
                 what="the hole and the nonce after it mined")
    latest = w3.eth.block_number
    (replaced,) = [tx for n in range(first, latest + 1)
                   for tx in w3.eth.get_block(n, full_transactions=True)["transactions"]
                   if tx["from"] == key and tx["nonce"] == hole + 1]
    assert (replaced["to"], replaced["value"], replaced["gas"]) == (key, 0, 21_000)
    assert w3.eth.get_transaction_receipt(replaced["hash"])["status"] == 1
    with pytest.raises(TransactionNotFound):  # the push was never mined
        w3.eth.get_transaction_receipt(waiting)


def test_a_killed_rekey_whose_snapshot_landed_below_the_head_completes(box):
    """(a) for a rekey: its snapshot (epoch 2, the new key) landed, B connected again for
    the new key, pulled it and pushed 3. The restarted worker settles both journals once
    released: the snapshot recorded, the rotation completed, then the pull applies 3.
    Meanwhile doctor names both journals and what to run."""
    s = Space(box, "landed-rekey")
    s.kill_a("after_send", "rekey", "--signature", "-", input=s.signature())
    assert s.rekey_journal.exists()
    s.connect_b()  # the snapshot's header hands B the new key
    assert s.b_pushes("third")["seq"] == 3
    try:
        doctor = kdb(s.a, s.dba, "doctor").stdout
        line = next(ln for ln in doctor.splitlines() if "interrupted push" in ln)
        assert f"pending-{s.space16}.json and rekey-{s.space16}.json" in line, doctor
        assert "run `kint pull`" in doctor
    finally:
        s.release()
    s.a.wait_for(lambda: not s.pending.exists() and not s.rekey_journal.exists(),
                 timeout=30, what="the restarted worker's settlement")
    pulled = json.loads(ok(s.pull_a("--json")).stdout)
    assert pulled["applied"] == [3] and pulled["gap"] == [], pulled
    assert s.mirror_head() == s.chain_head()
    new_id = s.dek_id(2)
    assert s.dek_id(1) != new_id == s.dek_id(3)
    wraps = json.loads((s.a.kint_home / f"wraps-{s.space16}.json").read_text())
    assert wraps["dek_id"] == new_id
    assert "no push or rekey journal waiting" in kdb(s.a, s.dba, "doctor").stdout
    assert s.names(s.dba) == {"first", "third"}


def test_a_killed_rekey_whose_seq_another_machine_took_did_not_happen(box):
    """(b) for a rekey: killed before its snapshot was sent, B took seq 2 under the old
    key. A second `kint rekey` settles it and says so: the push journal dropped, the
    rotation abandoned (the old key stays), CHAIN_MOVED with pull as the way; the pull
    applies B's epoch and a rekey then starts afresh."""
    s = Space(box, "lost-rekey")
    old_id = s.dek_id(1)
    s.kill_a("before_send", "rekey", "--signature", "-", input=s.signature())
    assert s.b_pushes("other")["seq"] == 2
    try:  # the restarted worker's own settlement still held: the rekey's is the one
        said = s.chain_moved_a("rekey", "--signature", "-", input=s.signature())
        assert "an interrupted push of epoch 2 never landed and never can" in said
        assert "hint: run `kint pull`, then `kint rekey`" in said, said
        assert not s.pending.exists() and not s.rekey_journal.exists()
    finally:
        s.release()
    wraps = json.loads((s.a.kint_home / f"wraps-{s.space16}.json").read_text())
    assert wraps["dek_id"] == old_id
    pulled = json.loads(ok(s.pull_a("--json")).stdout)
    assert pulled["applied"] == [2] and pulled["gap"] == [], pulled
    assert s.mirror_head() == s.chain_head() and s.dek_id(2) == old_id
    assert s.names(s.dba) == {"first", "other"}
    rekeyed = jdb(s.a, s.dba, "rekey", "--signature", "-", input=s.signature())
    assert rekeyed["old_dek_id"] == old_id and rekeyed["snapshot"][0]["seq"] == 3


def test_a_killed_rekey_settled_by_recovery_code_says_the_journal_was_dropped(box):
    """(b) for a rekey, settled by `kint recovery-code` (which settles a rekey journal
    first): the code is written from the cached key, which the abandoned rotation left as
    it was (exit 0, done), and the command says on stderr that the interrupted push was
    dropped and why, with the push's hint; `--json` carries it in `warnings`. Before, the
    drop was in the worker's log alone."""
    s = Space(box, "lost-rekey-code")
    old_id = s.dek_id(1)
    s.kill_a("before_send", "rekey", "--signature", "-", input=s.signature())
    assert s.b_pushes("other")["seq"] == 2
    try:  # the restarted worker's own settlement still held: recovery-code's is the one
        out = kdb(s.a, s.dba, "recovery-code")
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.startswith("recovery code written to "), out.stdout
        assert ("recovery-code: WARNING an interrupted push of epoch 2 never landed and "
                "never can") in out.stderr, out.stderr
        assert "its journal was dropped" in out.stderr
        assert "; run `kint pull`, then `kint push`" in out.stderr, out.stderr
        assert not s.pending.exists() and not s.rekey_journal.exists()
    finally:
        s.release()
    wraps = json.loads((s.a.kint_home / f"wraps-{s.space16}.json").read_text())
    assert wraps["dek_id"] == old_id
    again = jdb(s.a, s.dba, "recovery-code")  # nothing left to settle: nothing said
    assert set(again) == {"recovery_file"}, again


def test_what_the_start_settlement_found_is_said_by_the_next_command_once(box):
    """(b) for a rekey in the usual order: the restarted worker's own settlement, released
    at once, drops both journals with no command waiting, and the supervisor and its
    worker stop before any command comes (an idle exit, a restart). The next `kint
    recovery-code` still says on stderr that the interrupted push was dropped, and the one
    after says nothing: what the settlement found waits in settled-<space16>.json (0600)
    until a command has said it. Before, the start settlement only logged it, and every
    command after found nothing to settle and said nothing. The worker goes by `kint
    supervisor restart` (`sup.restart`), which leaves the test supervisor and its preloads
    in place for the module's other tests."""
    s = Space(box, "lost-rekey-started")
    s.kill_a("before_send", "rekey", "--signature", "-", input=s.signature())
    assert s.b_pushes("other")["seq"] == 2
    kept = s.a.kint_home / f"settled-{s.space16}.json"
    s.release()
    s.a.wait_for(lambda: not s.pending.exists() and not s.rekey_journal.exists(),
                 timeout=60, what="the start settlement")  # the rekey journal goes last
    mode = kept.stat().st_mode & 0o777 if kept.exists() else None
    before = s.a.row(s.dba)["pid"]  # no command between the settlement and the worker's end
    s.a.call("sup.restart", args={"target": s.space16})
    s.a.wait_for(lambda: s.a.row(s.dba)["pid"] not in (None, before), timeout=30,
                 what="the space's next worker")
    out = kdb(s.a, s.dba, "recovery-code")
    assert out.returncode == 0, out.stdout + out.stderr
    assert ("recovery-code: WARNING an interrupted push of epoch 2 never landed and never "
            "can") in out.stderr, out.stderr
    assert "; run `kint pull`, then `kint push`" in out.stderr, out.stderr
    assert mode == 0o600 and not kept.exists()
    again = jdb(s.a, s.dba, "recovery-code")  # said once
    assert set(again) == {"recovery_file"}, again


def test_an_endpoint_that_will_not_serve_or_chain_the_event_settles_nothing(box):
    """(a) behind A's own endpoint (a loopback proxy): while it will not serve the Epoch
    logs, or serves one whose prev does not chain, whether A's epoch landed is not known,
    so the pull refuses and keeps the journal (never taken for "not landed"); once it
    answers truly, the epoch is recorded and the pull goes on."""
    px = box["proxy"]
    s = Space(box, "unread-event", "--rpc-urls", px.url)
    write(s.dba, s.a.tenant, second="in the push killed after its send")
    s.kill_a("after_send", "push")
    top = s.b_pushes("third")
    try:
        px.set_mode("error_methods", methods=["eth_getLogs"], message="logs are pruned")
        out = s.pull_a()
        assert out.returncode != 0 and "[RPC_UNAVAILABLE]" in out.stderr, out.stderr
        assert "whether an interrupted push of epoch 2 landed is not known" in out.stderr
        assert s.pending.exists() and s.mirror_head()[0] == 1
        px.set_mode("broken_prev", tx=top["tx"])  # the CLI's `0x` form
        out = s.pull_a()
        assert out.returncode != 0 and "[STALE_RPC]" in out.stderr, out.stderr
        assert "the endpoint contradicts itself" in out.stderr
        assert s.pending.exists() and s.mirror_head()[0] == 1
        px.forward()
        pulled = json.loads(ok(s.pull_a("--json")).stdout)
    finally:
        px.forward()
        s.release()
    assert pulled["applied"] == [3] and pulled["store_root_matches"] is True, pulled
    assert any("had landed and is recorded now" in w for w in pulled["warnings"]), pulled
    assert not s.pending.exists() and s.mirror_head() == s.chain_head()
    assert s.names(s.dba) == {"first", "second", "third"}


def raced_settlement(s: Space, *command: str) -> subprocess.CompletedProcess[str]:
    """Release A's held settlement with A's endpoint answering its first head read as the
    chain stood just before A's killed transaction was mined (the read raced the block),
    then run `kint COMMAND` on A once no settlement holds the space."""
    px = s.box["proxy"]
    _, _, block = s.box["contract"].functions.head(
        Web3.to_checksum_address(s.owner), bytes.fromhex(s.sid)).call()
    px.set_mode("stale_head", block=int(block) - 1, reads=1)
    try:
        s.release()
        settled = s.unheld_a(*command)
        assert any("head read at block" in lie for lie in px.lies), px.lies
        return settled
    finally:
        px.forward()


def test_a_settlement_whose_head_read_raced_its_own_transaction_records_it(box):
    """A's push killed after its send; the transaction is mined, but the settlement's head
    read still sees seq 1 and its nonce then reads spent. Its own transaction spent it: the
    chain read again says epoch 2 is A's, so it is recorded, not dropped as never landed
    (before, the journal was dropped and the mirror stayed at seq 1)."""
    s = Space(box, "raced-push", "--rpc-urls", box["proxy"].url)
    write(s.dba, s.a.tenant, second="in the push killed after its send")
    s.kill_a("after_send", "push")
    assert s.chain_head()[0] == 2
    ok(raced_settlement(s, "push"))
    assert not s.pending.exists()
    assert s.mirror_head() == s.chain_head()
    assert s.meta(2)["prev"] == s.meta(1)["digest"]
    write(s.dba, s.a.tenant, third="written on A after the settlement")
    assert [e["seq"] for e in jdb(s.a, s.dba, "push")["epochs"]] == [3]


def test_a_rekey_whose_settlement_raced_its_snapshot_completes(box):
    """The same race for a rekey killed after its snapshot's send: the snapshot is on
    chain under the new key, so the rotation completes (before, the push journal was
    dropped and the rekey settled as "did not happen", the old key kept while the head
    is sealed under the new one)."""
    s = Space(box, "raced-rekey", "--rpc-urls", box["proxy"].url)
    old_id = s.dek_id(1)
    s.kill_a("after_send", "rekey", "--signature", "-", input=s.signature())
    assert s.rekey_journal.exists() and s.chain_head()[0] == 2
    ok(raced_settlement(s, "push"))
    assert not s.pending.exists() and not s.rekey_journal.exists()
    assert s.mirror_head() == s.chain_head()
    new_id = s.dek_id(2)
    wraps = json.loads((s.a.kint_home / f"wraps-{s.space16}.json").read_text())
    assert new_id != old_id and wraps["dek_id"] == new_id
    write(s.dba, s.a.tenant, second="written on A after the settlement")
    assert [e["seq"] for e in jdb(s.a, s.dba, "push")["epochs"]] == [3]
    assert s.dek_id(3) == new_id


def test_the_walk_to_the_event_refuses_what_does_not_chain():
    """`epoch_at` without a chain: each step must carry the digest the step above named,
    and a missing event is a refusal, not an answer."""
    from kint.chain.anchor import EpochLog, Head
    from kint.chain.rpc import RpcUnavailable
    from kint.protocol import ErrorCode, ProtocolError
    from kint.tenant_worker.overtaken import epoch_at

    def log(seq: int, digest: str, prev: str, block: int) -> EpochLog:
        return EpochLog(owner="0x" + "11" * 20, space="22" * 32, seq=seq, prev=prev,
                        digest=digest, prev_block=block - 1, writer="0x" + "33" * 20,
                        block=block, tx_hash="44" * 32)

    class Chain:
        def __init__(self, events: dict[tuple[int, int], EpochLog | str]) -> None:
            self.events = events

        def epoch_log(self, owner: str, space: str, seq: int, block: int) -> EpochLog | None:
            found = self.events.get((seq, block))
            if isinstance(found, str):
                raise RpcUnavailable("reading an epoch log: the endpoint refused")
            return found

    d1, d2, d3 = "a1" * 32, "a2" * 32, "a3" * 32
    head = Head(digest=d3, seq=3, block=30)
    e3, e2 = log(3, d3, d2, 30), log(2, d2, d1, 29)
    assert epoch_at(Chain({(3, 30): e3, (2, 29): e2}), "o", "s", head, 2) == e2
    assert epoch_at(Chain({(3, 30): e3}), "o", "s", head, 3) == e3
    for events, code in (({(3, 30): e3}, ErrorCode.RPC_UNAVAILABLE),
                         ({(3, 30): e3, (2, 29): "refused"}, ErrorCode.RPC_UNAVAILABLE),
                         ({(3, 30): e3, (2, 29): log(2, "ee" * 32, d1, 29)},
                          ErrorCode.STALE_RPC),
                         ({(3, 30): log(3, "ee" * 32, d2, 30)}, ErrorCode.STALE_RPC)):
        with pytest.raises(ProtocolError) as refused:
            epoch_at(Chain(events), "o", "s", head, 2)
        assert refused.value.code == code


def test_a_journal_an_endpoint_answers_below_its_prev_names_the_spaces_endpoints(box):
    """A's push killed after its send, A's endpoint (the one its connect kept, a loopback
    proxy) then answering the head as it stood before epoch 1: below the journal's prev, a
    stale or lying endpoint, and the journal is kept (pending._stale_head). Its hint said
    "check KINT_RPC_URL and KINT_RPC_URL_2", settings this space does not use: it names
    the endpoints the connect kept, as STALE_RPC's own hint does (rpc_hint.stale_hint).
    Once the endpoint answers truly, the pull settles the journal (its epoch landed)."""
    px = box["proxy"]
    s = Space(box, "stale-journal", "--rpc-urls", px.url)
    write(s.dba, s.a.tenant, second="in the push killed after its send")
    s.kill_a("after_send", "push")
    px.set_mode("stale_head", block=s.meta(1)["block"] - 1)
    try:
        s.release()
        out = s.pull_a()
        assert out.returncode != 0 and "[STALE_RPC]" in out.stderr, out.stderr
        assert ("is not the seq 1 an interrupted push of epoch 2 was built on: a stale or "
                "lying RPC; the journal is kept") in out.stderr, out.stderr
        assert ("hint: check the endpoints this space was given by `kint connect --rpc-urls` "
                "(a connect given --rpc-urls again replaces them), then run `kint pull`") \
            in out.stderr, out.stderr
        assert "KINT_RPC_URL" not in out.stderr and s.pending.exists()
        px.forward()
        pulled = json.loads(ok(s.pull_a("--json")).stdout)
    finally:
        px.forward()
        s.release()
    assert pulled["head"]["seq"] == 2 and pulled["store_root_matches"] is True, pulled
    assert not s.pending.exists() and s.mirror_head() == s.chain_head()
