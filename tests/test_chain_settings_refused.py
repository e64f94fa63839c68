"""A chain setting that does not parse refuses the chain work that would use it (lane
chainenv10): KINT_CONTRACT, KINT_RPC_URL and KINT_RPC_URL_2 choose which chain and which
contract kint reads and writes, and the layer below a bad one is Base mainnet's EpochAnchor
(here, the devchain's record), so a typo must never send a push there or verify against it.

Through the real CLI on the session's devchain, for each place a value can be set: the
command's environment (sent with the call), config.toml, and the supervisor's own
environment. Each push asserts the refusal (its code, the setting, its source) and that no
transaction left the machine: the session key's nonce, the devchain's block and the space's
head are as they were (before this change every one of these pushes landed on the
devchain's contract). Commands that read no chain (status, export, config show) keep
answering and say the value is refused.
"""

from __future__ import annotations

import json

import pytest

from chain_machines import devchain_anchor, kjson, new_machine, ok
from conftest import sibyl_client
from machines_together import side_by_side
from kint.chain.config import devchain_record


# Reads the devchain's newest block as unchanged by a refused command: alone on it.
pytestmark = pytest.mark.chain_exclusive

BAD_CONTRACT = "0x123"
# A URL that is not one, with what could be an API key in it: never printed whole.
BAD_URL = "htps//base.example/v2/SECRETKEY123"


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    """A machine connected on the devchain, one row anchored and one more waiting."""
    sb = new_machine(tmp_path_factory.mktemp("chain-settings-refused"), chain_home)
    connected = kjson(sb, "connect", "--dev")
    sb.session = connected["session"]
    client = sibyl_client(sb.sibyl_db, sb.tenant)
    client.set_entity("rules", "anchored", {"rule": "first"})
    ok(sb.kint("push"))
    client.set_entity("rules", "waiting", {"rule": "not anchored yet"})
    yield sb
    sb.shutdown()


def chain_state(sb, chain_home) -> tuple[int, int, int]:
    """The session key's nonce, the devchain's newest block and the space's anchored head,
    read straight from the devchain (never through the machine's settings)."""
    anchor = devchain_anchor(chain_home)
    head = kjson(sb, "status")["head"]["seq"]
    return (anchor.w3.eth.get_transaction_count(sb.session), anchor.w3.eth.block_number, head)


def refused(out, code: int, *lines: str) -> None:
    assert out.returncode == code, out.stdout + out.stderr
    for line in lines:
        assert line in out.stderr, out.stderr
    assert "SECRETKEY123" not in out.stdout + out.stderr


def config_entry(sb, name: str, env: dict[str, str] | None = None) -> dict:
    shown = json.loads(ok(sb.kint("config", "show", "--json", env=env)).stdout)
    return next(e for e in shown["settings"] if e["name"] == name)


def test_a_bad_contract_in_the_commands_environment(machine, chain_home):
    env = {"KINT_CONTRACT": BAD_CONTRACT}
    before = chain_state(machine, chain_home)
    line = ("kint: error: KINT_CONTRACT='0x123' in the environment of this call is not an "
            "address (0x and 40 hex characters); kint uses no other chain or contract in its "
            "place [CONFIG_INVALID]")
    hint = ("hint: correct KINT_CONTRACT in this command's environment (or kint-server's MCP "
            "configuration), or unset it")
    # None of these commands writes or sends (the chain state is compared after them all):
    # they run in two lanes side by side, each checked after.
    (push, as_json, verify, pull, payload), (status, export, shown, text, doctor) = side_by_side(
        lambda: [machine.kint(*argv, env=env) for argv in (
            ("push",), ("push", "--json"), ("verify", "rule"), ("pull",),
            ("authorize", "payload"))],
        lambda: [machine.kint(*argv, env=env) for argv in (
            ("status", "--json"), ("export",), ("config", "show", "--json"),
            ("config", "show"), ("doctor", "--json"))])
    refused(push, 5, line, hint)
    # The refusal is the setting's own: its two lines, not a third `kint:` line under the
    # hint restating it (the hint's JSON form held that line too).
    assert push.stderr.splitlines() == [line, hint], push.stderr
    assert as_json.returncode == 5 and as_json.stderr == "", as_json.stderr
    assert json.loads(as_json.stdout)["hint"] == hint.removeprefix("hint: "), as_json.stdout
    refused(verify, 2, line)
    refused(pull, 5, line)
    # A chain read the command does itself (not through the supervisor) refuses the same.
    refused(payload, 2,
            "kint: error: KINT_CONTRACT='0x123' in the environment of this call is not an "
            "address", hint)
    assert chain_state(machine, chain_home) == before

    # What reads no chain answers, and says so.
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["chain_head_unavailable"].startswith(
        "KINT_CONTRACT='0x123' in the environment of this call is not an address")
    said = ("kint: KINT_CONTRACT='0x123' in this environment is not an address (0x and 40 hex "
            "characters), so this call's chain work is refused")  # --json: in its notices
    assert said in json.loads(status.stdout)["notices"] and said not in status.stderr, status
    assert ok(export).stdout.count("\n") >= 2
    entry = next(e for e in json.loads(ok(shown).stdout)["settings"]
                 if e["name"] == "KINT_CONTRACT")
    assert (entry["value"], entry["source"]) == (None, "this call")
    assert entry["refused"].startswith("KINT_CONTRACT='0x123' in the environment of this call")
    text = ok(text).stdout
    assert any(row.startswith("KINT_CONTRACT") and " refused " in row
               for row in text.splitlines()), text
    # Doctor: one failing `chain settings` check in place of the chain's, and the space's
    # local checks as ever (a typo must not hide a full disk or a broken state file).
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["chain settings"]["ok"] is False
    assert checks["chain settings"]["detail"].startswith(
        "KINT_CONTRACT='0x123' in the environment of this call is not an address")
    for local in ("enrolment", "data key", "recovery file", "state files", "disk space", "pull",
                  "unanchored changes"):
        assert local in checks, (local, sorted(checks))
    assert checks["unanchored changes"]["detail"].startswith("1 changed"), checks
    assert not {"rpc primary", "contract", "session key", "head"} & set(checks), checks


def test_a_bad_url_in_the_commands_environment_is_never_shown_whole(machine, chain_home):
    before = chain_state(machine, chain_home)
    for name in ("KINT_RPC_URL", "KINT_RPC_URL_2"):
        out = machine.kint("push", env={name: BAD_URL})
        refused(out, 5, f"kint: error: {name}=':///<redacted>' in the environment of this "
                        f"call is not an http(s) URL", "[CONFIG_INVALID]")
    assert chain_state(machine, chain_home) == before


def test_a_bad_contract_in_config_toml(machine, chain_home):
    path = machine.kint_home / "config.toml"
    before = chain_state(machine, chain_home)
    line = (f"kint: error: KINT_CONTRACT in {path} (contract): '0x1234' is not an address (0x "
            f"and 40 hex characters); kint uses no other chain or contract in its place "
            f"[CONFIG_INVALID]")
    try:
        path.write_text('contract = "0x1234"\n')
        refused(machine.kint("push"), 5, line, f"hint: fix {path} (read again when it changes")
        refused(machine.kint("verify", "rule"), 2, line)
        # A good contract in a file refused for another key is not in force either: the
        # last good configuration (none here: the default) must not stand in for it.
        anchor = json.loads(devchain_record(chain_home).read_text())["anchor"]
        path.write_text(f'contract = "{anchor}"\nquiet_seconds = "later"\n')
        refused(machine.kint("push"), 5, f"kint: error: KINT_CONTRACT in {path} (contract): "
                f"{anchor} is not in force: the file is refused ({path}: quiet_seconds: "
                f"'later' is not a number), and no last good configuration sets it")
        # In a space's table, the table is named.
        label = machine.label(machine.sibyl_db)
        path.write_text(f'[spaces."{label}"]\ncontract = "0x1234"\n')
        refused(machine.kint("push"), 5, f"kint: error: KINT_CONTRACT in {path} "
                f"(spaces.\"{label}\".contract): '0x1234' is not an address")
        # Nor one the file cannot even be read for.
        path.write_text('contract = "0x12\n')
        refused(machine.kint("push"), 5, "so which KINT_RPC_URL it sets, if any, is unknown")
        assert chain_state(machine, chain_home) == before
        entry = config_entry(machine, "KINT_CONTRACT")
        assert (entry["source"], entry["where"]) == ("file", str(path)) and entry["refused"]
    finally:
        path.unlink(missing_ok=True)
    # Fixed: the chain work goes ahead.
    assert kjson(machine, "push")["pushed"] == 1
    assert chain_state(machine, chain_home)[2] == before[2] + 1
    sibyl_client(machine.sibyl_db, machine.tenant).set_entity("rules", "waiting",
                                                              {"rule": "waiting again"})


def test_a_bad_contract_in_the_supervisors_environment(machine, chain_home):
    """The supervisor was started with the typo; the commands that follow come from a
    clean environment, and the space refuses its chain work all the same."""
    machine.shutdown()
    machine.env["KINT_CONTRACT"] = BAD_CONTRACT
    try:
        machine.start_entitled()
    finally:
        del machine.env["KINT_CONTRACT"]
    try:
        before = chain_state(machine, chain_home)
        line = ("kint: error: KINT_CONTRACT='0x123' in the supervisor's environment is not an "
                "address (0x and 40 hex characters); kint uses no other chain or contract in "
                "its place [CONFIG_INVALID]")
        hint = ("hint: the supervisor was started with it: correct KINT_CONTRACT in the "
                "service's environment file and restart the service, or `kint supervisor "
                "stop`")
        refused(machine.kint("push"), 5, line, hint)
        refused(machine.kint("verify", "rule"), 2, line)
        # A good value in the command's environment does not stand in for the space's.
        anchor = json.loads(devchain_record(chain_home).read_text())["anchor"]
        refused(machine.kint("push", env={"KINT_CONTRACT": anchor}), 5, line,
                f"kint: KINT_CONTRACT={anchor} in this environment is not used: space "
                f"{machine.label(machine.sibyl_db)} has its own refused (KINT_CONTRACT='0x123' "
                f"in the supervisor's environment")
        assert chain_state(machine, chain_home) == before
        doctor = machine.kint("doctor", "--json")
        checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
        assert checks["chain settings"]["ok"] is False
        assert "in the supervisor's environment is not an address" in (
            checks["chain settings"]["detail"])
        entry = config_entry(machine, "KINT_CONTRACT")
        assert (entry["value"], entry["source"]) == (None, "daemon environment")
        log = (machine.kint_home / "supervisor.log").read_text(errors="replace")
        assert "KINT_CONTRACT='0x123' is not an address" in log
        assert "using 0x" not in log
    finally:
        machine.shutdown()
        machine.start_entitled()
