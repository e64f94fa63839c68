"""kint's six tools answer in kint v0.3.0's published shapes (its docs/site/08-tools.md):
memory_status's fields, memory_push's and memory_pull's, their error codes and the hints
that name the agent's next call, memory_pull's `force_scan`, memory_verify's and
memory_history's fields, and a refused argument under the same codes Sibyl's own guard
uses. Driven through the official MCP client over stdio against the real kint-server, a
real supervisor and worker, on the session's real anvil. The tests run in file order: the
first ones see a machine that never connected."""

from __future__ import annotations

import re
import sqlite3

import pytest

from conftest import wait_until
from mcp_session import AgentProcess, quiet_agent

HEX64 = re.compile(r"^[0-9a-f]{64}$")
# A transaction hash as the CLI's --json gives it (kint/tx_text.py); the tools gave the bare
# digits, so the same hash came in two forms to an agent and to a script.
TX = re.compile(r"^0x[0-9a-f]{64}$")
LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?P<pid>\d+) "
                        r"(?P<logger>kint(\.\w+)*) "
                        r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<message>.+)$")
V030_EPOCH = {"seq", "tx", "block", "digest", "bucket", "rows", "deleted", "snapshot",
              "cost_wei", "gas_used", "l1_fee"}
V030_CAP = {"sibyl_bytes", "kint_bytes", "volunteered_total", "cap_bytes", "db_path"}


@pytest.fixture(scope="module")
def agent(tmp_path_factory, chain_home):
    yield from quiet_agent(tmp_path_factory.mktemp("v030"), chain_home)


def test_status_of_a_machine_that_never_connected(agent):
    status = agent.call("memory_status")
    assert status["ok"] is True
    assert status["owner"] is None and status["connected"] is False
    assert status["data_key_cached"] is False and status["held"] is None
    assert HEX64.match(status["space"]), status["space"]  # the space id, not its prefix
    assert status["db_path"] == str(agent.box.sibyl_db)
    assert status["tenant"] == agent.box.tenant
    assert set(status["cap"]) == V030_CAP
    assert status["mirror"] is None
    assert set(status["unanchored"]) == {"error"}
    # Read only when an owner is known.
    assert not {"chain_head", "in_step", "session_key"} & set(status)


def _log_has(box, line: str) -> bool:
    log = box.kint_home / "kint.log"
    return wait_until(lambda: log.exists() and line in log.read_text(), timeout=30)


def test_the_log_says_why_nothing_was_pulled_at_start_in_v030s_lines(agent):
    # v0.3.0's lines (10-configuration.md, "Logs"): why no start-up pull, then what it serves.
    box = agent.box
    assert _log_has(box, "bootstrap: not connected (no enrolment); serving anyway, "
                         "memory_connect explains")
    assert _log_has(box, f"kint-server: serving Sibyl's tools plus kint's on stdio (tenant "
                         f"{box.tenant}, db {box.sibyl_db})")
    # v0.3.0's record is `TIME LEVEL MESSAGE`; this kint's adds the pid and the logger
    # between them (docs/protocol.md: several sessions write the one file). Each record
    # starts at the margin (a traceback's lines are indented).
    records = [line for line in (box.kint_home / "kint.log").read_text().splitlines()
               if not line.startswith(" ")]
    assert records and all(LOG_RECORD.match(line) for line in records), records
    served = next(line for line in records if "kint-server: serving" in line)
    assert LOG_RECORD.match(served).group("level") == "INFO"


def test_the_instructions_send_an_agent_without_a_data_key_to_memory_connect(agent):
    # v0.3.0's "which tool, when": a machine enrolled whose key cache lapsed is not ready.
    assert "when connected or data_key_cached is false, call memory_connect" in \
        agent.initialized.instructions


def test_push_and_pull_before_connecting_say_call_memory_connect(agent):
    for tool in ("memory_push", "memory_pull"):
        refused = agent.failed(tool)
        assert (refused["error"], refused["hint"]) == ("NOT_CONNECTED", "call memory_connect")


# 08-tools.md, "memory_connect": the three commands a human runs, verbatim, `0x...` standing
# for the owner while none is known.
V030_HUMAN_STEPS = [
    "EOA wallet (Ledger, MetaMask, Rabby, keystore): kint canonical-payload --owner 0x... > "
    "kint-canonical.json && cast wallet sign --data --from-file kint-canonical.json --ledger "
    "| kint connect --owner 0x... --signature -",
    "Base Account / smart wallet owner: kint connect --owner 0x... --smart-account "
    "--passphrase-stdin",
    "Lost both? kint connect --owner 0x... --recovery-code-stdin",
]


def test_connect_without_a_secret_or_an_owner_says_what_the_human_runs(agent):
    """08-tools.md, "memory_connect": with neither `passphrase` nor `recovery_code` nothing
    is connected and the answer is v0.3.0's JSON; with a secret but no owner, on a machine
    that enrolled none, the error is OWNER_REQUIRED (with a message and a hint here,
    docs/harnesses.md) and nothing is connected either."""
    assert agent.call("memory_connect") == {"ok": True, "connected": False, "owner": None,
                                            "human_steps": V030_HUMAN_STEPS}
    for secret in ({"passphrase": "a passphrase"}, {"recovery_code": "a code"}):
        refused = agent.failed("memory_connect", **secret)
        assert refused["error"] == "OWNER_REQUIRED", refused
        assert refused["message"] and refused["hint"], refused
        assert "a passphrase" not in str(refused) and "a code" not in str(refused)
    assert agent.call("memory_status")["owner"] is None


def test_status_once_connected_reads_the_chain_head_and_the_session_key(agent):
    connected = agent.call("memory_connect", dev=True)
    assert connected["ok"] is True and connected["fresh_vault"] is True
    assert agent.call("memory_remember", category="rules", name="release-gate",
                      body={"rule": "never ship on a Friday"})["ok"] is True
    status = agent.call("memory_status")
    assert status["space"] == connected["space"]
    assert status["connected"] is True and status["owner"] == connected["owner"]
    assert status["data_key_cached"] is True
    assert set(status["mirror"]) == {"seq", "digest", "block", "rows"}
    assert (status["mirror"]["seq"], status["mirror"]["rows"]) == (0, 0)
    assert status["unanchored"] == {"changed": 1, "deleted": 0}
    head = status["chain_head"]
    assert set(head) == {"seq", "digest", "block", "contract"}
    assert head["contract"].startswith("0x") and head["seq"] == 0
    assert status["in_step"] is True
    key = status["session_key"]
    assert {"address", "path", "exists", "balance_wei", "balance_eth", "authorized",
            "expiry"} <= set(key)
    assert key["exists"] is True and key["authorized"] is True and key["expiry"] > 0
    assert key["balance_wei"] > 0 and float(key["balance_eth"]) > 0
    assert "error" not in key


def test_push_counts_epochs_and_names_the_head_after_it(agent):
    pushed = agent.call("memory_push")
    assert pushed["ok"] is True, pushed
    assert pushed["reason"] == "tool"
    assert pushed["pushed"] == len(pushed["epochs"]) == 1  # epochs anchored, not rows
    assert (pushed["changed_rows"], pushed["deleted_rows"]) == (1, 0)
    epoch = pushed["epochs"][0]
    assert V030_EPOCH <= set(epoch), set(epoch)
    assert epoch["snapshot"] is False and epoch["gas_used"] > 0
    assert TX.match(epoch["tx"]), epoch
    assert (pushed["head_seq"], pushed["head_digest"]) == (epoch["seq"], epoch["digest"])

    nothing = agent.call("memory_push")
    assert nothing["message"] == "nothing to push: the store matches the last anchored epoch"
    assert (nothing["pushed"], nothing["changed_rows"], nothing["deleted_rows"]) == (0, 0, 0)
    assert (nothing["head_seq"], nothing["head_digest"]) == (epoch["seq"], epoch["digest"])

    snap = agent.call("memory_push", snapshot=True)
    assert snap["pushed"] == 1 and snap["epochs"][0]["snapshot"] is True
    assert snap["changed_rows"] == 1  # a snapshot carries every row
    status = agent.call("memory_status")
    assert status["mirror"]["seq"] == snap["head_seq"] and status["mirror"]["rows"] == 1
    assert status["unanchored"] == {"changed": 0, "deleted": 0}


def test_pull_names_the_head_and_takes_force_scan(agent):
    pulled = agent.call("memory_pull", force_scan=True)
    assert pulled["ok"] is True, pulled
    head = agent.call("memory_status")["chain_head"]
    assert (pulled["head_seq"], pulled["head_digest"], pulled["head_block"]) == (
        head["seq"], head["digest"], head["block"])
    assert pulled["root_ok"] is None  # the store was already up to date
    assert pulled["unopenable"] == [] and pulled["skipped"] == []
    assert pulled["rpcs_agreed"] is None and pulled["rows_total"] == 1
    assert pulled["message"] == f"already at the chain head (epoch {head['seq']})"
    # 08-tools.md's `applied` and `backfilled`: nothing to apply, and `full` finds nothing
    # to cache, since every epoch here was pushed from this machine, which kept it.
    assert pulled["applied"] == [] and pulled["backfilled"] == []
    full = agent.call("memory_pull", full=True)
    assert full["ok"] is True and (full["applied"], full["backfilled"]) == ([], []), full
    assert full["head_seq"] == head["seq"]


V030_CHECK = {"tier", "key", "category", "status", "local_leaf", "anchored_leaf",
              "anchored_seq", "anchored_block", "anchored_tx", "head_seq", "head_block",
              "rows_root", "proof", "proof_ok", "reason"}


def test_verify_answers_with_v030s_fields(agent):
    # 08-tools.md, "memory_verify": the decision, its reason, the verdict, each hit and its
    # check, the refusal entity (none on proceed) and the head read for this check.
    verified = agent.call("memory_verify", query="release rule")
    assert verified["ok"] is True and verified["decision"] == "proceed", verified
    assert verified["query"] == "release rule" and verified["reason"]
    assert {"code", "returned", "recovery", "tokens", "explain"} <= set(verified["verdict"])
    assert verified["verdict"]["code"] == "ok"
    assert [set(h) for h in verified["hits"]] == [
        {"tier", "key", "category", "snippet", "rank", "ts"}]
    [check] = verified["checks"]
    assert V030_CHECK <= set(check), set(check)
    assert (check["status"], check["proof_ok"]) == ("verified", True)
    assert TX.match(check["anchored_tx"]), check
    assert verified["refusal_entity"] is None
    head = agent.call("memory_status")["chain_head"]
    assert verified["chain_head"] == {k: head[k] for k in ("seq", "digest", "block")}


def test_history_lists_versions_and_answers_at_a_block_in_v030s_shapes(agent):
    # 08-tools.md, "memory_history": {ok, versions, count}, oldest first, a deletion as
    # {seq, block, tx, deleted: true}; with `block`, {ok, at_block, version} (null before
    # the first version). A snapshot that re-anchors an unchanged row adds no version.
    assert agent.call("memory_remember", category="rules", name="gone",
                      body={"rule": "to be forgotten"})["ok"] is True
    added = agent.call("memory_push")
    assert agent.call("memory_forget", category="rules", name="gone")["ok"] is True
    removed = agent.call("memory_push")
    assert added["pushed"] == removed["pushed"] == 1, (added, removed)
    history = agent.call("memory_history", tier="entity", key="gone", category="rules")
    assert set(history) == {"ok", "versions", "count"} and history["count"] == 2, history
    kept, deletion = history["versions"]
    assert {"seq", "block", "tx", "leaf", "body", "status"} <= set(kept)
    assert kept["deleted"] is False and "snapshot" not in kept
    assert kept["seq"] == added["head_seq"] and "to be forgotten" in str(kept["body"])
    assert TX.match(kept["tx"]) and kept["tx"] == added["epochs"][0]["tx"], (kept, added)
    assert deletion == {"seq": removed["head_seq"], "block": deletion["block"],
                        "tx": removed["epochs"][0]["tx"], "deleted": True}

    at = agent.call("memory_history", tier="entity", key="gone", category="rules",
                    block=kept["block"])
    assert at == {"ok": True, "at_block": kept["block"], "version": kept}
    before = agent.call("memory_history", tier="entity", key="gone", category="rules",
                        block=kept["block"] - 1)
    assert before == {"ok": True, "at_block": kept["block"] - 1, "version": None}
    # The row the earlier snapshot re-anchored unchanged: its first version only.
    gate = agent.call("memory_history", tier="entity", key="release-gate", category="rules")
    assert gate["count"] == 1 and "snapshot" not in gate["versions"][0], gate


def test_a_refused_argument_answers_as_sibyls_guard_does(agent):
    ours = agent.failed("memory_verify", query=5)
    sibyls = agent.failed("memory_search", query=5)
    for payload in (ours, sibyls):
        assert (payload["code"], payload["error"]) == ("VALIDATION_ERROR", "ValidationError")
    assert ours["message"] == "memory_verify: argument 'query' must be a valid string"


def _replace(path, data: bytes) -> None:
    """`data` put at `path` as a new file (0600), as a key rotation renames one over it."""
    import os

    spare = path.with_name(path.name + ".swap")
    spare.write_bytes(data)
    spare.chmod(0o600)
    os.replace(spare, path)


def test_a_session_key_the_local_passphrase_does_not_open_is_the_humans(agent):
    """A keystore sealed under another local passphrase than the worker's: its refusal's
    hint (the passphrase to give back) was the worker's own, for a terminal, which
    kint-server did not know; the agent is told to stop and hand it to the human."""
    import os

    from kint.custody.session_key import encrypt_keystore

    keystore = agent.box.kint_home / "session.key"
    kept = keystore.read_bytes()
    locked, _ = encrypt_keystore(os.urandom(32), "another-local-passphrase", scrypt_n=2**4)
    assert agent.call("memory_remember", category="rules", name="locked-key",
                      body={"rule": "waits for the key"})["ok"] is True
    try:
        _replace(keystore, locked)
        refused = agent.failed("memory_push")
        assert refused["error"] == "KeyError_", refused
        assert refused["hint"].startswith("stop and tell the human: give back the local "
                                          "passphrase the key was sealed with"), refused
    finally:
        _replace(keystore, kept)
    assert agent.call("memory_push")["pushed"] == 1  # the key that opens: the row anchored


def test_a_missing_data_key_is_key_expired(agent):
    # The cached data key gone (expired, or removed): v0.3.0's KEY_EXPIRED, nothing dropped.
    box = agent.box
    space16 = agent.call("memory_status")["space"][:16]
    (box.kint_home / f"vault-{space16}.aes").unlink()
    assert agent.call("memory_remember", category="rules", name="late",
                      body={"rule": "kept"})["ok"] is True
    refused = agent.failed("memory_push")
    assert refused["error"] == "KEY_EXPIRED", refused
    assert refused["message"].startswith("the data key on this machine has expired or is missing")
    assert refused["hint"] == "call memory_connect", refused  # 14-agents.md, the recipe's 1.
    status = agent.call("memory_status")
    assert status["data_key_cached"] is False and status["unanchored"]["changed"] == 1
    # 16-limits.md, "Keys and what leaks": without the key, verify and history still work.
    verified = agent.call("memory_verify", query="release rule")
    assert verified["ok"] is True and verified["decision"] == "proceed", verified
    history = agent.call("memory_history", tier="entity", key="release-gate",
                         category="rules")
    assert history["ok"] is True and history["count"] >= 1, history
    # A server that starts now has no key to pull with, and says so in v0.3.0's line.
    again = AgentProcess(box.env).start()
    try:
        assert _log_has(box, "bootstrap: data key not cached; serving without pull, "
                             "memory_connect explains")
    finally:
        again.close()


@pytest.mark.parametrize("tool, code, owner, want_code, want_hint", [
    ("push", "CHAIN_MOVED", True, "CHAIN_MOVED", "call memory_pull first"),
    ("push", "BUSY", True, "BUSY", "a push is already running"),
    ("push", "GAP", True, "PUSH_FAILED", "ours"),
    ("push", "BAD_REQUEST", True, "PUSH_FAILED", "ours"),
    ("push", "NOT_CONNECTED", True, "PUSH_FAILED", "ours"),  # enrolled, cannot write
    ("push", "HELD", True, "HELD", "ours"),
    ("push", "RPC_UNAVAILABLE", True, "RPC_UNAVAILABLE", "ours"),  # this kint's own code
    ("pull", "STALE_RPC", True, "NOT_FRESH", "ours"),
    ("pull", "NO_DATA_KEY", True, "PULL_FAILED", "ours"),
    ("pull", "FORK", True, "FORK", "ours"),
    # A pull's BUSY is no push running (v0.3.0's hint is push's): a running pull, connect,
    # or a store another process holds, whose hint says what to stop.
    ("pull", "BUSY", True, "BUSY", "ours"),
    ("pull", "NOT_CONNECTED", False, "NOT_CONNECTED", "call memory_connect"),
])
def test_the_worker_codes_a_live_test_cannot_cheaply_meet_map_to_v030s(
        tool, code, owner, want_code, want_hint):
    """The same table for the refusals that need a second machine, a race or a broken RPC
    to meet live (KEY_EXPIRED and NOT_CONNECTED are met live above)."""
    from kint.agent_server import results
    from kint.client import KintError

    mapped = {"push": results.push_error, "pull": results.pull_error}[tool](
        KintError(code, "what went wrong", "ours"), lambda: owner)
    assert (mapped.code, mapped.message, mapped.hint) == (want_code, "what went wrong",
                                                          want_hint)


def test_unanchored_of_a_connected_machine_without_its_store_names_the_store():
    """With an anchored epoch here (a mirror) but the store gone, nothing is counted because
    there is nothing to diff: the error says so, never 'no anchored epoch on this machine
    yet: connect or pull first' (false of a machine that holds one). The worker's status for
    that case, as status._chain_status gives it."""
    from kint.agent_server import results

    worker = {"owner": "0x" + "1" * 40, "space_id": "a" * 64, "tenant": "t",
              "store": {"path": "/gone/memory.db", "exists": False, "size_bytes": 0},
              "head": {"seq": 3, "digest": "b" * 64, "block": 9}, "mirror_rows": 4,
              "unanchored": None, "unanchored_changes": None, "chain_head": None,
              "chain_head_unavailable": "KINT_OFFLINE=1"}
    out = results.status_result(worker)
    assert out["unanchored"] == {
        "error": "the store /gone/memory.db does not exist: nothing to count against the "
                 "anchored epoch"}
    assert out["mirror"]["rows"] == 4
    never = results.status_result({**worker, "head": None, "mirror_rows": None})
    assert "no anchored epoch" in never["unanchored"]["error"]


def test_a_hold_no_push_has_met_yet_is_shown_under_the_reason_status(agent):
    """08-tools.md, "memory_status": `held` is recomputed on every call, and its `reason` is
    `status` when no push was tried since the row changed behind Sibyl's tools (this
    agent's watcher waits an hour of quiet, and nothing else pushes here)."""
    box = agent.box
    assert agent.call("memory_status")["held"] is None
    conn = sqlite3.connect(box.sibyl_db)
    conn.execute("update entities set body = replace(body, 'never', 'rarely') "
                 "where name = 'release-gate'")
    conn.commit()
    conn.close()
    held = agent.call("memory_status")["held"]
    assert held is not None and held["reason"] == "status", held
    assert held["at"].endswith("Z") and held["message"].startswith(
        "refusing to anchor: 1 row(s) changed behind Sibyl's tools"), held
