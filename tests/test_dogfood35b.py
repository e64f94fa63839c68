"""What a developer using kint from the command line on the devchain found (session 35's
dogfood round, lane b). The cases that need a machine share one on the session's devchain,
connected by its own owner wallet (an EOA whose signature the test makes, as `cast wallet
sign` would) and one row anchored: a space owned by another owner than a `--dev` one.

- A `kint connect --dev` refused because the space is connected to another owner left a
  fresh devchain owner key (`KINT_HOME/devchain/owner-0x....key`) behind: the key was made
  before the owner was checked. A refused connect leaves no new file.
- A config.toml that is not TOML at all refused the chain work as "KINT_RPC_URL in
  .../config.toml (rpc_url): the file is refused ...", naming a key the file did not have;
  it now says the file does not parse, and where (tomllib's line and column).
- `kint supervisor start --json` printed the same object for a start and for a supervisor
  found running: `started` tells them apart.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eth_account import Account

from chain_machines import authorize_machine, connect_with_wallet, new_machine, ok
from conftest import make_sandbox, write_rules, write_store
from kint.supervisor.pidlock import running_pid

RULE = "every deploy waits for the staging smoke test"
# What tomllib says of BROKEN, word for word: the line and column of the fault.
BROKEN = "quiet_seconds = 30\nrpc_timeout = 5 5\n"
WHERE = ("is not valid TOML: Expected newline or end of document after a statement (at line 2, "
         "column 17)")


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    sb = new_machine(tmp_path_factory.mktemp("dogfood35b"), chain_home)
    try:
        wallet = Account.create()
        connected = connect_with_wallet(sb, wallet)
        authorize_machine(chain_home, wallet, connected["session"])
        write_rules(sb.sibyl_db, sb.tenant, deploys=RULE)
        sb.call("push", sb.sibyl_db, timeout_s=300)
        yield sb
    finally:
        sb.shutdown()


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_a_refused_dev_connect_leaves_no_owner_key(machine):
    devchain = machine.kint_home / "devchain"
    before = files_under(devchain)
    assert not [name for name in before if name.startswith("owner-")], before
    refused = machine.kint("connect", "--dev")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "[BAD_REQUEST]" in refused.stderr and "this space is connected to owner" in \
        refused.stderr, refused.stderr
    assert files_under(devchain) == before  # no owner-0x....key made for the refused attempt


def test_a_config_file_that_does_not_parse_is_said_so_by_every_command(machine):
    path = machine.kint_home / "config.toml"
    said = (f"kint: error: {path} {WHERE}, so which chain it names is unknown; kint uses no "
            f"other chain or contract in its place [CONFIG_INVALID]")
    try:
        path.write_text(BROKEN)
        path.chmod(0o600)
        for command, code in ((("push", "--dry-run"), 5), (("push",), 5), (("verify", RULE), 2)):
            out = machine.kint(*command)
            assert out.returncode == code, (command, out.stdout + out.stderr)
            assert said in out.stderr.splitlines(), (command, out.stderr)
            assert "(rpc_url)" not in out.stderr and "KINT_RPC_URL in" not in out.stderr, \
                (command, out.stderr)
            assert "names the key it refuses, or where it does not parse" in out.stderr
        shown = json.loads(machine.kint("config", "show", "--json").stdout)
        entries = {e["name"]: e for e in shown["settings"]}
        for name in ("KINT_RPC_URL", "KINT_RPC_URL_2", "KINT_CONTRACT"):
            assert entries[name]["refused"] == (f"{path} {WHERE}, so which chain it names is "
                                                f"unknown"), entries[name]
        check = machine.kint("config", "check")
        assert check.returncode == 2 and f"{path}: {WHERE}" in check.stderr, check.stderr
    finally:
        path.unlink(missing_ok=True)
    assert ok(machine.kint("push", "--dry-run"))


def test_supervisor_start_json_says_whether_it_started_one(tmp_path):
    sb = make_sandbox(tmp_path / "starts")
    write_store(sb.sibyl_db)
    try:
        first = json.loads(ok(sb.kint("supervisor", "start", "--json")).stdout)
        pid = running_pid(sb.kint_home)
        assert first == {"pid": pid, "kint_home": str(sb.kint_home), "started": True}, first
        again = json.loads(ok(sb.kint("supervisor", "start", "--json")).stdout)
        assert again == {"pid": pid, "kint_home": str(sb.kint_home), "started": False}, again
    finally:
        sb.shutdown()
