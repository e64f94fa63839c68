"""What a day of using kint as an agent found (session 20's dogfood lane): kint-server
driven over MCP, several Hermes profiles on one supervisor, the supervisor stopped or
killed under a call, and the devchain as the chain. The cases that need a machine share
one on the session's devchain, connected with `--dev` and one row anchored.

- `kint supervisor status` and `reload` with no supervisor running refuse as every command
  refuses (`kint: error: ... [SUPERVISOR_UNAVAILABLE]` and a hint), where they printed a
  plain line without the code `--json` carries.
- RPC_UNAVAILABLE's hint names what set the endpoint that failed (the devchain's record,
  a space's `connect --rpc-urls`, a config file), not KINT_RPC_URL, which was not in force
  there (`kint doctor`'s rpc primary check too); kint-server tells the agent to stop and
  tell the human when the devchain is down.
- `kint connect --dev` (and memory_connect's `dev`) with the devchain down refuses
  RPC_UNAVAILABLE, where the session key's authorization check raised INTERNAL ("a bug
  in kint").
- A call held by a supervisor stopped (SIGSTOP) is refused naming it, with how to resume
  it, after 10 s, as a command's start names one, where it waited out the call's whole
  deadline (100 s for an agent's tool call) and said only that no answer came.
- A verified row's reason stays v0.3.0's sentence ("... anchored on Base") on the
  devchain, and docs/commands.md says why.
- Connecting a space to another owner than its own is refused with a hint an agent can
  pass on (KINT_TENANT in kint-server's configuration), not the command line's `--tenant`
  alone.
- A push whose endpoint fails after its epoch was signed (the send or the receipt times
  out) says the epoch may still land and that the next push or pull settles it, not only
  that the endpoint did not answer.
- kint-server stopped by SIGTERM (or SIGHUP) exits once its goodbye is sent, where its
  interpreter then waited for good on a thread the event loop left behind: the harness
  found it still running.
- A call of a tool kint-server does not have is refused with a code and a hint naming
  the tools it serves, where the SDK answered a bare `Unknown tool: NAME` line.
- memory_connect's answers carry `notices` (settings of the call not used) as every
  other tool's do, and `chain_unreadable` when the key came from this machine's wraps
  because the chain could not be read, which `kint connect` now prints too.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from chain_machines import anchored, new_machine, ok
from conftest import let_go_on, make_sandbox, write_rules
from kint.chain.config import devchain_record
from kint.client import KintError
from kint.supervisor.pidlock import running_pid

DOCS = Path(__file__).resolve().parent.parent / "docs"
RULE = "never ship on a Friday; every release needs a green deadlift test"
# 07-verify.md, "Four statuses per hit": the reason of a verified hit, word for word.
V030_VERIFIED = "stored text matches the leaf anchored on Base"


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    with anchored(new_machine(tmp_path_factory.mktemp("dogfood20"), chain_home),
                  **{"release-gate": RULE}) as sb:
        yield sb


@contextmanager
def devchain_down(sb) -> Iterator[None]:
    """The machine's devchain record pointed at a port nothing listens on (the discard
    port), as when the devchain it names has stopped; the record is put back after."""
    record = devchain_record(sb.kint_home)
    kept = record.read_text()
    data = json.loads(kept)
    record.write_text(json.dumps({**data, "rpc_url": "http://127.0.0.1:9"}))
    try:
        yield
    finally:
        record.write_text(kept)


def test_supervisor_status_and_reload_with_none_running_refuse_with_the_code(tmp_path):
    sb = make_sandbox(tmp_path / "nothing-runs")
    for command, hint in ((("supervisor", "status"), "`kint supervisor start` starts one"),
                          (("--debug", "supervisor", "status"), "`kint supervisor start`"),
                          (("supervisor", "reload"), "the next one reads the config file")):
        out = sb.kint(*command)
        assert out.returncode == 3, (command, out.stderr)
        first, second = out.stderr.splitlines()
        assert first == (f"kint: error: no supervisor is running for {sb.kint_home} "
                         f"[SUPERVISOR_UNAVAILABLE]"), (command, out.stderr)
        assert second.startswith(f"hint: {hint}"), (command, out.stderr)
        as_json = sb.kint(*command, "--json")
        assert as_json.returncode == 3
        assert json.loads(as_json.stdout)["error"] == "SUPERVISOR_UNAVAILABLE"


def test_the_verified_reason_is_v030s_sentence_on_the_devchain_and_the_docs_say_why(machine):
    out = ok(machine.kint("verify", "release rule"))
    assert f"  verified   entity rules/release-gate: {V030_VERIFIED}\n" in out.stdout, out.stdout
    commands = " ".join((DOCS / "commands.md").read_text().split())
    assert ("A verified row's reason is v0.3.0's fixed sentence on every chain, the "
            "devchain's too (07-verify.md, \"Four statuses per hit\"") in commands


def test_a_devchain_that_does_not_answer_is_named_in_the_hint(machine):
    write_rules(machine.sibyl_db, machine.tenant, second="a rule written after the push")
    with devchain_down(machine):
        for command in (("push",), ("pull",)):
            out = machine.kint(*command)
            assert "[RPC_UNAVAILABLE]" in out.stderr, (command, out.stderr)
            assert ("hint: the devchain's endpoint did not answer: `kint devchain status` "
                    "says whether it runs") in out.stderr, (command, out.stderr)
            assert "KINT_RPC_URL" not in out.stderr, (command, out.stderr)
        doctor = machine.kint("doctor").stdout.splitlines()
        primary = next(i for i, line in enumerate(doctor) if "rpc primary" in line)
        assert doctor[primary].startswith("[FAIL] rpc primary: http://127.0.0.1:9"), doctor
        assert "hint: the devchain's endpoint did not answer" in doctor[primary + 1], doctor
        # The dev connect's last step (the session key's authorization) reads the chain too.
        again = machine.kint("connect", "--dev")
        assert again.returncode == 2, again.stderr
        assert "[RPC_UNAVAILABLE]" in again.stderr and "INTERNAL" not in again.stderr, \
            again.stderr
        assert "the data key is kept" in again.stderr, again.stderr
    ok(machine.kint("connect", "--dev"))  # once the devchain answers, the same connect ends
    ok(machine.kint("push"))


def test_the_endpoint_hint_names_where_the_endpoint_was_set():
    from kint.chain.config import DEVCHAIN_SOURCE, SPACE_URLS_SOURCE, ChainConfig
    from kint.protocol.errors import DEFAULT_HINTS, SPACE_RPC_HINT, ErrorCode
    from kint.tenant_worker.rpc_hint import endpoint_hint

    def chain(source: str, where: str | None = None) -> ChainConfig:
        return ChainConfig(("http://127.0.0.1:9",), 31337, "0x" + "11" * 20, 1, 10.0,
                           rpc_source=source, rpc_where=where)

    assert "kint devchain start" in endpoint_hint(chain(DEVCHAIN_SOURCE, "/k/devchain.json"))
    assert endpoint_hint(chain(SPACE_URLS_SOURCE)) == SPACE_RPC_HINT  # kint connect --rpc-urls
    assert "kint connect --rpc-urls" in SPACE_RPC_HINT
    assert "/k/config.toml [spaces" in endpoint_hint(chain("file", '/k/config.toml [spaces."t"]'))
    assert endpoint_hint(chain("default")) == DEFAULT_HINTS[ErrorCode.RPC_UNAVAILABLE]
    # Named where it was set (fix39b): a KINT_RPC_URL the supervisor was started with is not
    # the one a user's shell sets, nor is a command's own.
    for source, where in (("daemon environment", "in the supervisor's environment"),
                          ("this call", "in this command's environment")):
        assert endpoint_hint(chain(source)).startswith(f"check KINT_RPC_URL {where} and ")


def test_kint_server_tells_the_agent_to_stop_for_a_devchain_or_a_stopped_supervisor():
    from kint.agent_server.results import agent_error
    from kint.protocol.errors import DEVCHAIN_RPC_HINT, SPACE_RPC_HINT

    down = agent_error("memory_push", KintError("RPC_UNAVAILABLE", "x", DEVCHAIN_RPC_HINT))
    assert down.hint == f"stop and tell the human: {DEVCHAIN_RPC_HINT}"
    space = agent_error("memory_pull", KintError("RPC_UNAVAILABLE", "x", SPACE_RPC_HINT))
    assert space.hint.startswith("call memory_pull again in a minute; if it fails again, "
                                 "stop and tell the human to check the endpoints")
    stopped = agent_error("memory_status", KintError(
        "SUPERVISOR_UNAVAILABLE", "the supervisor (pid 7) runs but does not answer",
        "see /k/supervisor.log; `kill 7` lets the next command start a new one"))
    assert stopped.hint == ("stop and tell the human: see /k/supervisor.log; `kill 7` lets "
                            "the next command start a new one")


def test_a_call_held_by_a_stopped_supervisor_is_refused_naming_it(machine, monkeypatch):
    # The call runs in this process: its bound is autostart's (10 s), read at each check,
    # lowered here as KINT_TEST_UNREACHABLE_AFTER_S lowers it for a command. A second: the
    # supervisor is stopped, so no wait is long enough for it to answer.
    from kint.supervisor import autostart

    monkeypatch.setattr(autostart, "UNREACHABLE_AFTER_S", 1.0)
    machine.call("status", machine.sibyl_db)  # the space's worker is up
    pid = running_pid(machine.kint_home)
    os.kill(pid, signal.SIGSTOP)
    try:
        sent = time.monotonic()
        with pytest.raises(KintError) as refused:
            machine.call("status", machine.sibyl_db, timeout_s=90)
        took = time.monotonic() - sent
    finally:
        let_go_on(pid)
    err = refused.value
    assert err.code == "SUPERVISOR_UNAVAILABLE", err
    assert f"(it is stopped: `kill -CONT {pid}` resumes it)" in err.message, err.message
    assert "it holds status, and whether status ran is unknown" in err.message, err.message
    assert took < 60, f"refused after {took:.1f}s, not within the call's 92 s"
    assert machine.call("status", machine.sibyl_db)["worker"]["pid"] > 0  # it serves again


def test_memory_connect_says_what_the_other_tools_say(machine):
    """memory_connect's answers carry the lines about settings the call did not use (as
    every other tool's do), and a connect from this machine's wraps while the chain could
    not be read says so, to the agent and on the command line, instead of a plain
    `connected`. The same server refuses a tool it does not have with a code and a hint."""
    from mcp_session import AgentProcess

    owner, passphrase = "0x" + "20" * 20, "a vault passphrase for dogfood20"
    other = machine.home / "other" / "memory.db"  # a space of its own: another tenant's
    env = {**machine.env, "SIBYL_MEMORY_DB": str(other), "KINT_TENANT": "dogfood20-other",
           "KINT_QUIET_SECONDS": "5m"}
    unused = "KINT_QUIET_SECONDS='5m' in this environment is not a number"
    agent = AgentProcess(env).start()
    try:
        made = agent.call("memory_connect", owner=owner, passphrase=passphrase)
        assert made["ok"] is True and made["dek_source"] == "fresh vault", made
        assert any(unused in line for line in made["notices"]), made
        assert "chain_unreadable" not in made, made
        with devchain_down(machine):
            again = agent.call("memory_connect", owner=owner, passphrase=passphrase)
            assert again["ok"] is True and again["dek_source"] == "local wraps", again
            assert "could not be reached" in again["chain_unreadable"], again
            by_hand = machine.kint("--db", str(other), "--tenant", "dogfood20-other",
                                   "connect", "--owner", owner,
                                   "--smart-account", "--passphrase-stdin",
                                   input=passphrase + "\n")
            assert by_hand.returncode == 0, by_hand.stderr
            assert "\nchain: not read (" in by_hand.stdout, by_hand.stdout
        unknown = agent.call("memory_nope", query="x")
        assert unknown["isError"] is True and unknown["code"] == "VALIDATION_ERROR", unknown
        assert unknown["message"] == "kint-server has no tool 'memory_nope'", unknown
        assert unknown["hint"].startswith("nothing was done; call one of the tools "
                                          "tools/list gives: memory_remember"), unknown
        assert "memory_verify" in unknown["hint"], unknown
        plain = agent.call("memory_connect")
        assert plain["connected"] is True and plain["owner"] == owner, plain
        assert any(unused in line for line in plain["notices"]), plain
        # Nothing of the first owner's vault was anchored: the right owner takes the space.
        right = "0x" + "21" * 20
        moved = agent.call("memory_connect", owner=right, passphrase=passphrase)
        assert moved["ok"] is True and moved["owner"] == right, moved
        assert moved["owner_changed"].startswith(f"this space was connected to owner {owner}"), \
            moved
    finally:
        agent.close()


def test_another_owner_is_refused_with_where_the_tenant_is_set(machine):
    """The worker's refusal, which memory_connect passes on as it is (the command line's
    is checked: no kint-server start for the same words)."""
    stranger = "0x" + "ab" * 20
    out = machine.kint("connect", "--owner", stranger, "--smart-account", "--passphrase-stdin",
                       input="any passphrase\n")
    assert out.returncode == 2 and "[BAD_REQUEST]" in out.stderr, out.stderr
    assert "KINT_TENANT in kint-server's MCP configuration" in out.stderr, out.stderr


def test_a_push_whose_send_times_out_says_the_epoch_may_still_land(machine, chain_home):
    from conftest import sibyl_client
    from rpc_proxy import RpcProxy

    record = json.loads(devchain_record(chain_home).read_text())
    store, tenant = machine.home / "slow" / "memory.db", "dogfood20-slow"
    on_store = ("--db", str(store), "--tenant", tenant)
    proxy = RpcProxy(record["rpc_url"], max_hang_s=30).start()
    try:
        ok(machine.kint(*on_store, "connect", "--dev", "--rpc-urls", proxy.url))
        sibyl_client(store, tenant).set_entity("rules", "slow", {"rule": "sent late"})
        # The send is held until the test lets it through (forward(), below), when it lands:
        # it times out on any bound, so the bound can be long enough that the push's reads
        # before it, each on the same bound, are answered within it on a loaded box.
        proxy.set_mode("delay_methods", methods=["eth_sendRawTransaction"], seconds=60)
        late = machine.kint(*on_store, "push", env={"KINT_RPC_TIMEOUT": "5"})
        assert late.returncode == 5 and "[RPC_UNAVAILABLE]" in late.stderr, late.stderr
        assert ("sending a transaction: the endpoint did not answer within KINT_RPC_TIMEOUT"
                in late.stderr), late.stderr
        assert ("epoch 1 was signed and may still land: the next push or pull settles it "
                "against the chain before anything else") in late.stderr, late.stderr
        proxy.forward()
        settled = machine.wait_for(
            lambda: (out := machine.kint(*on_store, "push")).returncode == 0 and out,
            timeout=60, interval=1, what="the journal settled by the next push")
        status = json.loads(ok(machine.kint(*on_store, "status", "--json")).stdout)
        assert status["head"]["seq"] == 1 and status["unanchored"] == 0, (status, settled)
    finally:
        proxy.forward()
        proxy.stop()


def _server_pid(sb) -> int:
    """The pid of the test's kint-server of `sb` (its launcher, with sb's KINT_HOME)."""
    for proc in Path("/proc").iterdir():
        try:
            if (proc.name.isdigit() and b"run_kint_server.py" in (proc / "cmdline").read_bytes()
                    and str(sb.kint_home).encode() in (proc / "environ").read_bytes()):
                return int(proc.name)
        except OSError:
            continue
    raise AssertionError("no kint-server found")


# The worker's one line for each exit push it was asked for, made or not
# (tenant_worker/sessions.py's exit_push: "exit push: ..." or "exit push not made (...)"),
# never its "exit push waits for ..." line (push.py's _turn_wait), said before a push that
# waits its turn, nor the words "exit push" inside a push's message.
EXIT_PUSH_ENDED = re.compile(r": exit push(?:: | not made \()")


def _exit_pushes(log: Path) -> int:
    """How many exit pushes the worker logged the end of in `log`."""
    return sum(1 for line in log.read_text(errors="replace").splitlines()
               if EXIT_PUSH_ENDED.search(line))


def test_kint_server_exits_on_sigterm_after_asking_for_its_exit_push(machine):
    from conftest import pid_alive
    from mcp_session import AgentProcess

    log = machine.kint_home / "supervisor.log"
    asked_before = _exit_pushes(log)
    agent = AgentProcess(machine.env).start()
    try:
        assert agent.call("memory_remember", category="rules", name="before-sigterm",
                          body={"rule": "written just before the harness stops the server"}
                          )["ok"] is True
        pid = _server_pid(machine)
        os.kill(pid, signal.SIGTERM)
        machine.wait_for(lambda: not pid_alive(pid), timeout=20, interval=0.1,
                         what="kint-server gone after SIGTERM")
    finally:
        agent.close(timeout=5)
    machine.wait_for(lambda: _exit_pushes(log) > asked_before, timeout=60,
                     what="the worker's exit push")
