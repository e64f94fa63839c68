"""kint-server for agents (docs/harnesses.md), driven by a real MCP client from the `mcp` SDK over
stdio, on a real anvil, with real supervisors and workers."""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import time
from importlib import metadata
from pathlib import Path

import pytest

from chain_machines import anchored, connect_with_code, kjson, ok, recovery_code
from kint.chain.config import devchain_record
from kint.commands.exit_codes import PUSH_PULL_REFUSED
from kint.paths import devchain_dir, run_dir
from machines_together import new_machines, side_by_side

from mcp_session import AgentProcess

SIBYL_TOOLS = {"memory_remember", "memory_recall", "memory_search", "memory_list",
               "memory_forget", "memory_set_state", "memory_get_state", "memory_record_event"}
KINT_TOOLS = {"memory_status", "memory_connect", "memory_pull", "memory_push", "memory_verify",
              "memory_history"}
RULE = "never ship on a Friday; every release needs a green deadlift test and a second reviewer"


# A machine whose watcher pushes two seconds after the last write (the tests here wait
# for it), its test supervisor running, not yet connected. The watcher looks every quarter
# second (a poll KINT_TEST_POLL_MINIMUM_S lets under 1 s, tests/support/kint_test_timings.py),
# so a test waiting for its push waits the quiet period and a tick, not up to a second
# more; the fresh box's test lets polls go by on purpose.
AGENT_MACHINE = {"KINT_POLL_SECONDS": "0.25", "KINT_TEST_POLL_MINIMUM_S": "0.25",
                 "KINT_QUIET_SECONDS": "2"}
# The machines of the module, by name, and what each adds to the devchain machine's
# environment: "box" is the shared one (`box`); each other is one test's own, which stops
# it when done. "watcher" has a poll that is not a number, and never pushes by itself.
MACHINES = {
    "box": AGENT_MACHINE,
    "fresh": AGENT_MACHINE,
    "hung": {},
    "over-cap": {},
    "watcher": {"KINT_POLL_SECONDS": "often", "KINT_QUIET_SECONDS": "3600"},
}


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    """Every machine of the module, started together when the first test asks for one
    (their supervisors' starts overlap: machines_together.py), each untouched until its
    test."""
    started = new_machines([tmp_path_factory.mktemp(f"agent-{name}") for name in MACHINES],
                           chain_home, envs=list(MACHINES.values()))
    try:
        yield dict(zip(MACHINES, started))
    finally:
        for sb in started:
            sb.shutdown()


@pytest.fixture
def fresh_box(machines):
    """A machine of its own, never connected: for the test that connects through the agent's
    memory_connect (on the shared box it would find the connection another test made)."""
    sb = machines["fresh"]
    yield sb
    sb.shutdown()


@pytest.fixture(scope="module")
def box(machines):
    """One machine the tests below share, connected and with one row anchored when the first
    of them starts, so that each runs alone as well as after the others (doctor's checks of
    the head, the recovery file and the unanchored rows, the cap test's second machine that
    pulls the anchored rows, the pushes that count from the head)."""
    with anchored(machines["box"], **{"release-gate": RULE}) as sb:
        yield sb


# Chain pushes and the watcher's quiet period are slower than Sandbox.wait_for's defaults.
WAIT = {"timeout": 60, "interval": 0.25}
# A kint-server's check of a locked store (before its client is built, at start and at a
# tool call) waits half a second on the lock, not 2 s (KINT_TEST_LOCK_PROBE_S,
# tests/support/run_kint_server.py): the locks held here outlast any wait.
LOCK_PROBE = {"KINT_TEST_LOCK_PROBE_S": "0.5"}


def _status(sb) -> dict:
    """What `kint status --json` prints (the status op with the chain), asked from this
    process where the command is not what is tested: a command per poll costs its start."""
    return sb.call("status", sb.sibyl_db, args={"chain": True}, timeout_s=30)


def edit_behind_sibyls_back(db, word_from, word_to):
    conn = sqlite3.connect(db)
    conn.execute("update entities set body = replace(body, ?, ?) where name = 'release-gate'",
                 (word_from, word_to))
    conn.commit()
    conn.close()


def test_tools_verify_the_hold_and_the_ways_out(fresh_box):
    agent = AgentProcess(fresh_box.env).start()
    try:
        assert SIBYL_TOOLS | KINT_TOOLS <= set(agent.tools)
        # With nothing to connect with, memory_connect says what the human must run.
        steps = agent.call("memory_connect")
        assert steps["ok"] is True and steps["connected"] is False, steps
        assert len(steps["human_steps"]) == 3 and "--signature -" in steps["human_steps"][0]
        connected = agent.call("memory_connect", dev=True)
        assert connected["ok"] is True and connected["connected"] is True, connected
        assert connected["fresh_vault"] is True and connected["dek_source"] == "fresh vault"
        assert connected["recovery_code_file"].endswith(f"RECOVERY-{connected['space'][:16]}.txt")
        assert agent.call("memory_connect") == {"ok": True, "connected": True,
                                                "owner": connected["owner"]}
        assert agent.call("memory_remember", category="rules", name="release-gate",
                          body={"rule": RULE})["ok"] is True
        pushed = agent.call("memory_push")
        assert pushed["ok"] is True and pushed["pushed"] >= 1, pushed
        verified = agent.call("memory_verify", query="release rule")
        assert verified["ok"] is True and verified["decision"] == "proceed", verified

        edit_behind_sibyls_back(fresh_box.sibyl_db, "never", "always")
        log_path = fresh_box.kint_home / "supervisor.log"
        fresh_box.wait_for(lambda: "push HELD (watcher)" in log_path.read_text(),
                           what="the watcher's push to be held", **WAIT)
        held = agent.call("memory_status")["held"]
        assert held["reason"] == "watcher" and held["at"].endswith("Z")
        assert held["message"].startswith(
            "refusing to anchor: 1 row(s) changed behind Sibyl's tools while this server was "
            "running (entity rules/release-gate). Anchoring would make the chain vouch for a "
            "value kint cannot account for.")
        # Time let pass on purpose: the watcher waits for the next store change instead of
        # retrying, which it would do at its next poll (every quarter second here): four
        # polls go by.
        time.sleep(1.0)
        assert log_path.read_text().count("push HELD (") == 1
        # Before any memory_verify nothing was refused: the push's hint says what holds it,
        # a row changed behind Sibyl's tools, the human's to judge (it said "memory_verify
        # still refuses the row" of every hold).
        behind = agent.call("memory_push")
        assert (behind["error"], behind["hint"]) == (
            "HELD", "stop and tell the human: nothing was anchored and nothing was dropped; "
                    "no write of Sibyl's tools accounts for the rows named: check the store, "
                    "then `kint push` from a terminal anchors it as it is"), behind
        refused = agent.call("memory_verify", query="release rule")
        assert refused["decision"] == "refuse" and refused["refusal_entity"].startswith(
            "kint_refusal/entity-rules-release-gate-")
        # The refusal as the next session reads it with Sibyl's memory_recall: the hash of
        # the refusing check as memory_verify gives it (`0x`), where it was the bare digits.
        category, name = refused["refusal_entity"].split("/", 1)
        recalled = agent.call("memory_recall", category=category, name=name)
        [drifted] = [c for c in refused["checks"] if c["status"] == "drifted"]
        assert recalled["entity"]["body"]["anchored_tx"] == drifted["anchored_tx"], recalled
        assert drifted["anchored_tx"].startswith("0x"), drifted
        tool_push = agent.call("memory_push")
        assert tool_push["ok"] is False and tool_push["error"] == "HELD"
        assert tool_push["hint"] == ("nothing was anchored and nothing was dropped; "
                                     "memory_verify still refuses the row")
        status = _status(fresh_box)
        # nothing anchored
        assert status["head"]["seq"] == status["chain_head"]["seq"], status

        # Way out 1: restore the anchored value from the chain. From a terminal, the move is
        # refused while this server holds the store open (moving it under an open
        # connection loses the restored rows when that connection closes); the agent's own
        # memory_pull lets go of it first.
        busy = fresh_box.kint("pull", "--discard-local")
        assert busy.returncode == PUSH_PULL_REFUSED and "[BUSY]" in busy.stderr, \
            busy.stdout + busy.stderr
        assert any(f"pid {pid} " in busy.stderr
                   for pid in _kint_server_pids(fresh_box)), busy.stderr
        assert "nothing was moved" in busy.stderr
        assert not list(fresh_box.sibyl_db.parent.glob("*.kint-backup-*"))
        restored = agent.call("memory_pull", discard_local=True)
        assert restored["ok"] is True, restored
        assert restored["root_ok"] is True and restored["backups"]
        again = agent.call("memory_verify", query="release rule")
        assert again["decision"] == "proceed", again
        assert agent.call("memory_recall", category="rules", name="release-gate")["ok"]

        # Way out 2: check the store, then anchor it as it is from a terminal.
        edit_behind_sibyls_back(fresh_box.sibyl_db, "never", "rarely")
        fresh_box.wait_for(lambda: agent.call("memory_status")["held"], what="a second hold",
                           **WAIT)
        pushed = kjson(fresh_box, "push")
        assert pushed["pushed"] >= 1
        assert agent.call("memory_status")["held"] is None
        assert agent.call("memory_verify", query="release rule")["decision"] == "proceed"
        history = agent.call("memory_history", tier="entity", key="release-gate",
                             category="rules")
        assert history["ok"] is True and history["count"] >= 2
        assert "rarely" in history["versions"][-1]["body"]
    finally:
        agent.close()


def logged_since(log: Path, mark: os.stat_result) -> bytes:
    """What was written to `log` since `mark` (its stat then). The supervisor renames the
    log to `.1` past KINT_LOG_MAX_BYTES (kint/supervisor/housekeeping.py); the slice of the
    new, smaller file would then be empty or partial and check nothing, so a rotation in
    between fails the test by name. One open file, stat and read, so no rotation falls
    between them."""
    with log.open("rb") as f:
        now = os.fstat(f.fileno())
        assert (now.st_dev, now.st_ino) == (mark.st_dev, mark.st_ino) \
            and now.st_size >= mark.st_size, \
            f"{log} was rotated during the test: the lines since the mark are partly in {log}.1"
        f.seek(mark.st_size)
        return f.read()


def test_logged_since_notices_a_rotated_log(tmp_path):
    from kint.logs import rotate_if_large

    log = tmp_path / "supervisor.log"
    log.write_bytes(b"before\n")
    mark = log.stat()
    with log.open("ab") as f:
        f.write(b"since\n")
    assert logged_since(log, mark) == b"since\n"
    mark = log.stat()
    assert rotate_if_large(log, 0)
    log.write_bytes(b"push HELD in the new file\n")
    with pytest.raises(AssertionError, match="was rotated during the test"):
        logged_since(log, mark)


def test_two_sessions_writing_are_not_held_and_the_watcher_pushes_once(box):
    one, two = AgentProcess(box.env), AgentProcess(box.env)
    log = box.kint_home / "supervisor.log"
    mark = log.stat()  # this test's lines only: another test holds a space of its own
    try:
        side_by_side(one.start, two.start)  # two agents' servers, starting at once
        before = _status(box)["head"]["seq"]
        assert one.call("memory_remember", category="notes", name="from-one",
                        body={"text": "written by session one"})["ok"]
        assert two.call("memory_remember", category="notes", name="from-two",
                        body={"text": "written by session two"})["ok"]
        assert two.call("memory_set_state", key="focus", body={"now": "two sessions"})["ok"]
        status = box.wait_for(lambda: (s := _status(box))["unanchored"] == 0 and s,
                              what="the watcher's push", **WAIT)
        assert status["head"]["seq"] == before + 1  # one push for both sessions
        assert one.call("memory_status")["held"] is None
        assert b"push HELD" not in logged_since(log, mark)
    finally:
        one.close()
        two.close()


def test_the_exit_push_lands_after_the_server_is_killed(box):
    import os
    import signal

    agent = AgentProcess({**box.env, "KINT_QUIET_SECONDS": "3600"}).start()
    before = _status(box)["head"]["seq"]
    assert agent.call("memory_remember", category="notes", name="last-words",
                      body={"text": "written just before the session closed"})["ok"]
    servers = _kint_server_pids(box)
    agent.close(timeout=0.5)
    time.sleep(0.5)
    for pid in servers:  # what Claude Code does half a second after closing a server
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    landed = box.wait_for(lambda: (s := _status(box))["head"]["seq"] > before and s,
                          what="the exit push on chain", **WAIT)
    assert landed["unanchored"] == 0 and landed["in_step"] is True


def _kint_server_pids(sb):
    from support.procs import processes

    home = str(sb.kint_home).encode()
    pids = [pid for pid, argv, env in processes()
            if b"run_kint_server.py" in argv and home in env]
    assert pids, "no kint-server process found"
    return pids


# The start-up pull's budget given to kint-server below, and what its start and the tools'
# listing may take on top on a loaded 2-core box. The slow path stays well past the bound:
# the pull hangs for the proxy's 60 s hold, and a server that ignored the budget would wait
# out the default KINT_BOOTSTRAP_SECONDS (20 s).
BOOTSTRAP_S = 1
BOOTSTRAP_MARGIN_S = 14
assert BOOTSTRAP_S + BOOTSTRAP_MARGIN_S < 20


def test_with_the_rpc_hung_the_tools_are_listed_within_the_bootstrap_budget(
        machines, chain_home):
    from rpc_proxy import RpcProxy

    record = json.loads(devchain_record(chain_home).read_text())
    proxy = RpcProxy(record["rpc_url"], max_hang_s=60).start()
    sb = machines["hung"]
    try:
        ok(sb.kint("connect", "--dev", "--rpc-urls", proxy.url))
        proxy.set_mode("hang")
        started = time.monotonic()
        agent = AgentProcess({**sb.env, "KINT_BOOTSTRAP_SECONDS": str(BOOTSTRAP_S),
                              "KINT_RPC_TIMEOUT": "60"}).start(timeout=60)
        listed_after = time.monotonic() - started
        try:
            assert SIBYL_TOOLS | KINT_TOOLS <= set(agent.tools)
            # Served because the budget ran out while the pull still hung (the log says
            # which), and at that budget rather than the default one.
            log = (sb.kint_home / "kint.log").read_text()
            assert "bootstrap: still running; serving now, the pull finishes in the background" \
                in log
            assert listed_after < BOOTSTRAP_S + BOOTSTRAP_MARGIN_S, \
                f"tools listed after {listed_after:.1f}s"
            # Sibyl's own tools serve the local store meanwhile.
            assert agent.call("memory_remember", category="notes", name="offline",
                              body={"text": "written while the endpoint hangs"})["ok"]
        finally:
            proxy.release()
            proxy.forward()
            agent.close()
    finally:
        proxy.stop()
        sb.shutdown()


def test_doctor_names_each_check(box, tmp_path):
    good = box.kint("doctor", "--json", env={"PYTHONPATH": ""})
    checks = {c["name"]: c for c in json.loads(good.stdout)["checks"]}
    # kint v0.3.0's row names where it has the check (10-configuration.md, "Check it":
    # `sibyl store`, `rpc primary`, `rpc secondary`, `contract`, `python`), kint's own beside.
    assert set(checks) == {"Sibyl packages", "python", "PYTHONPATH", "tenant", "kint home",
                           "kint home placement", "permissions", "supervisor reachable",
                           "sibyl store", "enrolment", "data key", "recovery file",
                           "state files", "interrupted push", "disk space", "pull",
                           "unanchored changes",
                           "rpc primary", "rpc secondary", "contract", "session key",
                           "head"}
    assert good.returncode == 0, good.stdout
    assert all(c["ok"] and not c.get("warn") for c in checks.values()), checks
    pins = {name: version for name, _, version in
            (r.partition("==") for r in metadata.requires("kint")) if name.startswith("sibyl")}
    assert len(pins) == 3 and all(f"{n} {v}" in checks["Sibyl packages"]["detail"]
                                  for n, v in pins.items()), checks["Sibyl packages"]
    assert checks["python"]["detail"].startswith(platform.python_version())
    assert "PYTHONPATH is set" not in checks["python"]["detail"]
    assert checks["PYTHONPATH"]["detail"] == "not set"
    assert checks["kint home"]["detail"] == f"{box.kint_home} (mode 0700)"  # v0.3.0's row

    # A PYTHONPATH that shadows Sibyl's client with another version (here its metadata, as
    # a folder of other packages would hold it): a [WARN] for the variable, a [FAIL] for
    # the packages, and exit 1.
    shadow = tmp_path / "shadow"
    dist_info = shadow / "sibyl_memory_client-0.8.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: sibyl-memory-client\n"
                                        "Version: 0.8.0\n")
    inside = box.home / ".sibyl-memory" / "kint"
    # A home open to others: v0.3.0's `kint home` row warns, naming the mode. The two
    # runs (each on a home of its own, neither the box's) side by side.
    loose = tmp_path / "loose-home"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    bad, opened = side_by_side(
        lambda: box.kint("doctor", env={"KINT_HOME": str(inside), "PYTHONPATH": str(shadow)}),
        lambda: box.kint("doctor", env={"KINT_HOME": str(loose)}))
    assert bad.returncode == 1
    assert ("[FAIL] kint home placement" in bad.stdout
            and "[FAIL] supervisor reachable" in bad.stdout)
    assert "[ok  ] permissions" in bad.stdout  # v0.3.0's line format (09-cli.md)
    shown = opened.stdout.splitlines()
    at = shown.index(f"[WARN] kint home: {loose} (mode 0755)")
    assert shown[at + 1] == f"       hint: chmod 700 {loose}", shown
    lines = bad.stdout.splitlines()
    assert next(line for line in lines if line.startswith("[ok  ] python: ")).endswith(
        " (PYTHONPATH is set: run with env -u PYTHONPATH)"), lines  # v0.3.0's note
    assert (f"[FAIL] Sibyl packages: sibyl-memory-client 0.8.0 installed where kint pins "
            f"{pins['sibyl-memory-client']}") in lines, lines
    warned = lines.index(f"[WARN] PYTHONPATH: set ({shadow}): its packages come before those "
                         f"of kint's environment")
    assert lines[warned + 1] == "       hint: run kint with it unset: env -u PYTHONPATH kint ..."


def test_a_write_over_the_cap_meets_sibyls_gate_pulls_included(box, machines):
    """The cap gate counts Sibyl's stores plus every byte under KINT_HOME. A filler file
    under KINT_HOME (any file there counts) takes the total past the cap: a tool write then
    meets Sibyl's own gate, and so does a pull's replay on a machine over the cap."""
    agent = AgentProcess(box.env).start()
    filler = box.kint_home / "filler.bin"
    try:
        before = agent.call("memory_status")["cap"]
        assert before["volunteered_total"] == before["sibyl_bytes"] + before["kint_bytes"]
        filler.write_bytes(b"\0" * (before["cap_bytes"] + 1))
        filler.chmod(0o600)
        over = agent.call("memory_remember", category="notes", name="over-the-cap",
                          body={"text": "one write too many"})
        assert over.get("ok") is not True, over
        assert "CAP_EXCEEDED" in json.dumps(over), over
        cap = agent.call("memory_status")["cap"]
        assert cap["volunteered_total"] > cap["cap_bytes"]
    finally:
        filler.unlink(missing_ok=True)
        agent.close()

    # A second machine over the cap: its pull's replay meets the same gate.
    space = _status(box)["space"]
    owner = json.loads((box.kint_home / f"enrol-{space}.json").read_text())["owner"]
    other = machines["over-cap"]
    try:
        connect_with_code(other, owner, recovery_code(box, space))
        (other.kint_home / "filler.bin").write_bytes(b"\0" * 5_300_000)
        out = other.kint("pull")
        assert out.returncode == PUSH_PULL_REFUSED and "[SIBYL_ERROR]" in out.stderr, out.stderr
        assert "cap" in out.stderr.lower()
        (other.kint_home / "filler.bin").unlink()
        assert kjson(other, "pull")["store_root_matches"] is True
    finally:
        other.shutdown()


def test_the_watcher_says_what_an_earlier_session_left_and_defaults_bad_settings(machines):
    from conftest import sibyl_client

    sb = machines["watcher"]
    try:
        # The ops `kint connect --dev` and `kint push` send, from this process: set-up.
        sb.call("connect", sb.sibyl_db, args={"dev": True}, timeout_s=300)
        client = sibyl_client(sb.sibyl_db, sb.tenant)
        client.set_entity("notes", "anchored", {"text": "pushed from a terminal"})
        sb.call("push", sb.sibyl_db, timeout_s=120)
        client.set_entity("notes", "left-behind", {"text": "written with no server running"})
        agent = AgentProcess(sb.env).start()
        try:
            log = (sb.kint_home / "supervisor.log").read_text()
            assert ("watcher: 1 changed and 0 deleted row(s) were left unanchored by an "
                    "earlier session; they are pushed at the next quiet period") in log
            assert "KINT_POLL_SECONDS='often' is not a number; using 15.0" in log
        finally:
            agent.close()
    finally:
        sb.shutdown()


def _corrupt_past_the_first_page(db) -> None:
    """Zero every page of the store but the first: SQLite still opens it (its header and
    schema are on page 1), and any read of a row fails as a malformed image."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (page,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    for suffix in ("-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    size = db.stat().st_size
    with open(db, "r+b") as f:
        f.seek(page)
        f.write(bytes(size - page))


def _one_row_anchored(box, tenant: str, db) -> tuple[str, ...]:
    """A store of `tenant` at `db` holding the release rule, connected and pushed on the
    box's devchain; the command-line scope (--tenant, --db) that names it."""
    from conftest import sibyl_client
    from kint.spaces import resolve

    client = sibyl_client(db, tenant)
    client.set_entity("rules", "release-gate", {"rule": RULE})
    client.storage.close()
    # The ops `kint connect --dev` and `kint push` send, from this process: set-up here,
    # not the commands.
    ref = resolve(tenant, db)
    with box.client() as kint:
        kint.call("connect", tenant=ref.tenant, db=ref.db, space=ref.label,
                  args={"dev": True}, timeout_s=300)
        kint.call("push", tenant=ref.tenant, db=ref.db, space=ref.label, timeout_s=120)
    return ("--tenant", tenant, "--db", str(db))


def test_a_store_kint_cannot_read_holds_a_server_side_push(box, tmp_path):
    """docs/how-it-works.md, "When the watcher pushes, and when a push is held": a store kint cannot
    read holds the push, because an unchecked push is what the hold exists to stop. kint-server's
    pushes come back HELD naming the store, anchoring nothing; a push from a terminal is refused
    naming the file, not as a crash inside the worker."""
    from kint.client import Client, KintError
    from kint.spaces import resolve

    tenant, db = "kint-unreadable", tmp_path / "unreadable.db"
    scope = _one_row_anchored(box, tenant, db)
    _corrupt_past_the_first_page(db)

    ref = resolve(tenant, db)
    with Client(box.kint_home, autostart=False) as kint:
        with pytest.raises(KintError) as held:
            kint.call("push", tenant=ref.tenant, db=ref.db, space=ref.label,
                      args={"hold_reason": "tool"}, timeout_s=120)
    assert held.value.code == "HELD", held.value
    assert held.value.message.startswith(
        f"refusing to anchor: kint cannot read the store {db} ("), held.value.message
    assert held.value.hint == "nothing was anchored and nothing was dropped"
    assert f"push HELD (tool): refusing to anchor: kint cannot read the store {db}" in (
        box.kint_home / "supervisor.log").read_text()

    terminal = box.kint(*scope, "push")
    assert terminal.returncode == PUSH_PULL_REFUSED and "[INTERNAL]" in terminal.stderr, \
        terminal.stderr
    assert f"kint: error: store {db} cannot be read: " in terminal.stderr
    assert "nothing was anchored" in terminal.stderr
    assert "failed inside the worker" not in terminal.stderr


def test_a_store_another_process_holds_locked_is_busy_not_held(box, tmp_path):
    """A store another process keeps locked past the read's busy wait (a writer in SQLite's
    exclusive locking mode) is fine, only taken: a push says so (BUSY, try again), neither
    holds kint-server's pushes for a human nor sends anyone to `--discard-local`. Once the
    lock is let go, the push goes through."""
    import subprocess
    import sys

    from kint.client import KintError
    from kint.spaces import resolve

    tenant, db = "kint-locked", tmp_path / "locked.db"
    scope = _one_row_anchored(box, tenant, db)
    # The lock is taken with no worker up: a worker's open read connection keeps an
    # exclusive lock from being taken at all (the WAL's shared memory), as it would in use.
    box.shutdown()
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('PRAGMA locking_mode=EXCLUSIVE')\n"
        "c.execute('BEGIN EXCLUSIVE')\n"
        "c.execute(\"UPDATE entities SET body = body || ' ' WHERE name = 'release-gate'\")\n"
        "c.execute('COMMIT')\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"), str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True)
    ref = resolve(tenant, db)
    try:
        assert writer.stdout.readline() == "locked\n"
        # The box's supervisor again, its workers' reads of the store waiting half a second
        # on the lock (KINT_TEST_STORE_BUSY_WAIT_S, tests/support/kint_test_timings.py)
        # where they would wait 2 s and 5 s at each read: the lock outlasts any wait.
        box.env["KINT_TEST_STORE_BUSY_WAIT_S"] = "0.5"
        box.start_entitled()
        with box.client() as kint:
            with pytest.raises(KintError) as busy:
                kint.call("push", tenant=ref.tenant, db=ref.db, space=ref.label,
                          args={"hold_reason": "tool"}, timeout_s=120)
        assert busy.value.code == "BUSY", busy.value
        assert f"the store {db} is locked by another process" in busy.value.message
        terminal = box.kint(*scope, "push")
        assert terminal.returncode == PUSH_PULL_REFUSED and "[BUSY]" in terminal.stderr, \
            terminal.stderr
        assert "--discard-local" not in terminal.stderr
        # An agent's memory_push (a real kint-server on that store) is given one retry of
        # its own, then the human: it was told "call memory_push again in a minute" at every
        # call, for as long as the holder lived.
        agent = AgentProcess({**box.env, "KINT_TENANT": tenant, "SIBYL_MEMORY_DB": str(db),
                              "KINT_QUIET_SECONDS": "3600", **LOCK_PROBE}).start()
        try:
            refused = agent.failed("memory_push")
        finally:
            agent.close()
        assert refused["error"] == "BUSY", refused
        assert refused["hint"].startswith("call memory_push again in a minute: another "
                                          "process holds the store's lock"), refused
        assert ("; if it is still locked then, stop and tell the human: a process holds the "
                "store open in a write") in refused["hint"], refused
    finally:
        writer.stdin.close()
        writer.wait(timeout=30)
    log = (box.kint_home / "supervisor.log").read_text()  # the box's: other tests' lines too
    assert not [line for line in log.splitlines() if "push HELD" in line and str(db) in line]
    pushed = box.kint(*scope, "push")
    ok(pushed)
    assert "anchored 1 epoch" in pushed.stdout, pushed.stdout


def _files_of(home: Path, db: Path) -> dict[str, bytes]:
    """The store's files and kint's state under KINT_HOME (the mirrors, watermarks, wraps,
    journals, the epoch cache), by path: what a refused pull must leave as it was. The logs,
    the locks (a worker's holds its pid), the supervisor's run/ and the devchain's files
    are no state of a space's."""
    files = {str(p): p.read_bytes() for p in db.parent.glob(db.name + "*") if p.is_file()}
    for path in home.rglob("*"):
        ours = path.relative_to(home).parts[0] not in (run_dir(home).name, devchain_dir(home).name)
        if ours and path.is_file() and not path.name.endswith((".lock", ".log")):
            files[str(path)] = path.read_bytes()
    assert [p for p in files if "mirror-" in p], sorted(files)
    return files


def test_a_pull_over_a_store_another_process_holds_locked_is_busy_and_changes_nothing(
        box, tmp_path):
    """A pull (`kint pull`, `--json`, and kint-server's start-up pull) over a store
    another process keeps locked is refused BUSY in a push's words, naming the store and
    the lock, never INTERNAL ("pull failed inside the worker", a bug in kint); nothing of
    the store or of the space's state under KINT_HOME is changed by it."""
    from support.locked_store import locked

    tenant, db = "kint-locked-pull", tmp_path / "locked.db"
    scope = _one_row_anchored(box, tenant, db)
    box.shutdown()  # the lock is taken with no worker up (the test above says why)
    with locked(db):
        before = _files_of(box.kint_home, db)
        box.env["KINT_TEST_STORE_BUSY_WAIT_S"] = "0.5"
        box.start_entitled()
        pulled = box.kint(*scope, "pull")
        assert pulled.returncode == PUSH_PULL_REFUSED and "[BUSY]" in pulled.stderr, \
            (pulled.returncode, pulled.stderr)
        assert f"the store {db} is locked by another process" in pulled.stderr, pulled.stderr
        assert "INTERNAL" not in pulled.stderr and "--discard-local" not in pulled.stderr
        said = box.kint(*scope, "pull", "--json")
        assert said.returncode == PUSH_PULL_REFUSED, (said.returncode, said.stdout)
        refused = json.loads(said.stdout)
        assert refused["error"] == "BUSY", refused
        assert f"the store {db} is locked by another process" in refused["message"], refused
        assert refused["hint"] == "run the pull again once the other writer lets go of the " \
                                  "store", refused
        log = box.kint_home / "kint.log"
        start = log.stat().st_size if log.exists() else 0
        agent = AgentProcess({**box.env, "KINT_TENANT": tenant, "SIBYL_MEMORY_DB": str(db),
                              "KINT_QUIET_SECONDS": "3600", **LOCK_PROBE}).start()
        try:
            def bootstrap() -> list[str]:
                with log.open("rb") as f:
                    f.seek(start)
                    text = f.read().decode("utf-8", "replace")
                return [line for line in text.splitlines() if " bootstrap: " in line]

            [line] = box.wait_for(bootstrap, timeout=60, interval=0.2,
                                  what="kint-server's bootstrap line")
            pull = agent.failed("memory_pull")
        finally:
            agent.close()
        assert f"bootstrap: no pull (BUSY): the store {db} is locked by another process" \
            in line, line
        assert pull["error"] == "BUSY", pull
        assert pull["hint"].startswith("call memory_pull again in a minute: another process "
                                       "holds the store's lock"), pull
        assert ("; if it is still locked then, stop and tell the human: a process holds the "
                "store open in a write") in pull["hint"], pull
        assert _files_of(box.kint_home, db) == before
