"""What a developer using kint from the command line on the devchain found (session 35's
dogfood round, lane b). The cases that need a machine share one on the session's devchain,
connected by its own owner wallet (an EOA whose signature the test makes, as `cast wallet
sign` would) and one row anchored: a space owned by another owner than a `--dev` one.

- A `kint connect --dev` refused because the space is connected to another owner left a
  fresh devchain owner key (`KINT_HOME/devchain/owner-0x....key`) behind: the key was made
  before the owner was checked. A refused connect leaves no new file.
- A config.toml that is not TOML at all refused the chain work as "KINT_RPC_URL in
  .../config.toml (rpc_url): the file is refused ...", naming a key the file did not have;
  it now says the file does not parse, and where (tomllib's line and column), and which
  setting it refuses: beside a last good `rpc_url` that serves, that is the contract.
- `kint supervisor start --json` printed the same object for a start and for a supervisor
  found running: `started` tells them apart. It is true only of the supervisor this start
  spawned: one another process started while it looked was said `started: true`, with no
  notice of the settings it did not apply.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from pathlib import Path

import pytest
from eth_account import Account

from chain_machines import authorize_machine, connect_with_wallet, new_machine, ok
from conftest import KINT, make_sandbox, wait_until, write_rules, write_store
from kint.paths import devchain_dir, ensure_private_dir, run_dir
from kint.pid_file_lock import open_own_file
from kint.settings.loader import refusal, resolve
from kint.settings.reload import ConfigWatch
from kint.settings.schema import BY_NAME
from kint.supervisor.autostart import START_LOCK
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
    devchain = devchain_dir(machine.kint_home)
    before = files_under(devchain)
    assert not [name for name in before if name.startswith("owner-")], before
    refused = machine.kint("connect", "--dev")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "[BAD_REQUEST]" in refused.stderr and "this space is connected to owner" in \
        refused.stderr, refused.stderr
    assert files_under(devchain) == before  # no owner-0x....key made for the refused attempt


def test_a_config_file_that_does_not_parse_is_said_so_by_every_command(machine):
    path = machine.kint_home / "config.toml"
    said = (f"kint: error: {path} {WHERE}, so which KINT_RPC_URL it sets, if any, is "
            f"unknown; kint uses no other chain or contract in its place [CONFIG_INVALID]")
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
            assert entries[name]["refused"] == (f"{path} {WHERE}, so which {name} it sets, "
                                                f"if any, is unknown"), entries[name]
        check = machine.kint("config", "check")
        assert check.returncode == 2 and f"{path}: {WHERE}" in check.stderr, check.stderr
    finally:
        path.unlink(missing_ok=True)
    assert ok(machine.kint("push", "--dry-run"))


def test_a_file_that_does_not_parse_beside_a_last_good_rpc_url_names_the_contract(tmp_path):
    """The last good copy's `rpc_url` serves while the file does not parse, so the chain
    work is refused for the contract (which the file may name): the line says so, where one
    naming no setting left the user to think the chain itself unknown."""
    home = tmp_path / "kint"
    ensure_private_dir(home)
    path = home / "config.toml"
    path.write_text('rpc_url = "http://127.0.0.1:8545"\n')
    path.chmod(0o600)
    watch = ConfigWatch(home)
    assert watch.current()[1] is None
    path.write_text(BROKEN)
    cfg, err = watch.current()
    assert err is not None and cfg.unparsed, err
    rpc = resolve(BY_NAME["KINT_RPC_URL"], cfg, environ={})
    assert rpc.refused is None and rpc.value == "http://127.0.0.1:8545", rpc
    line, hint = refusal(resolve(BY_NAME["KINT_CONTRACT"], cfg, environ={}))
    assert line == (f"{path} {WHERE}, so which KINT_CONTRACT it sets, if any, is unknown; kint "
                    f"uses no other chain or contract in its place"), line
    assert hint.startswith(f"fix {path} "), hint


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


def _has_open(pid: int, path: Path) -> bool:
    """Whether process `pid` has `path` open (Linux's /proc/PID/fd)."""
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(fds / fd) == str(path) for fd in os.listdir(fds))
    except OSError:  # it exited, or a descriptor closed as it was read
        return False


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/PID/fd")
def test_supervisor_start_json_of_one_another_process_started_meanwhile(tmp_path):
    """A start that found none answering, then one started by another process while it
    waited for the start lock (a `--foreground` one here, as a service manager's), started
    nothing: `started: false`, and the settings it gives are named as not applied. Held
    where it is, with no sleep: the test takes the start lock first, and starts the other
    supervisor once the start has the lock file open (past its look, waiting on the lock)."""
    sb = make_sandbox(tmp_path / "meanwhile")
    home = sb.kint_home
    ensure_private_dir(home)
    ensure_private_dir(run_dir(home))
    lock_path = run_dir(home) / START_LOCK
    lock = open_own_file(lock_path)
    start = other = None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        start = subprocess.Popen([KINT, "supervisor", "start", "--json"],
                                 env={**sb.env, "KINT_OFFLINE": "1"}, text=True,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        assert wait_until(lambda: _has_open(start.pid, os.path.realpath(lock_path)), 60), \
            "the start never reached the start lock"
        other = subprocess.Popen([KINT, "supervisor", "start", "--foreground"], env=sb.env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        with sb.client() as client:
            assert wait_until(lambda: client.ping(1.0), 60), "the other one never answered"
        os.close(lock)
        lock = None
        out, err = start.communicate(timeout=90)
        assert start.returncode == 0, err
        line = (f"kint: a supervisor was already running (pid {other.pid}): this start applied "
                f"none of this environment's settings that differ from its own "
                f"(KINT_OFFLINE); it keeps the ones it was started with (`kint supervisor "
                f"status` lists them). To run it with these, `kint supervisor stop`, then "
                f"`kint supervisor start` again")
        assert json.loads(out) == {"pid": other.pid, "kint_home": str(home), "started": False,
                                   "notices": [line]}, out
    finally:
        if lock is not None:
            os.close(lock)
        if start is not None and start.poll() is None:
            start.kill()
            start.wait()
        sb.shutdown()
        if other is not None:
            other.wait(timeout=60)
