"""`kint devchain`: which anvil it runs, what a failed start leaves behind (nothing), and the
one rule of `stop` and `status`: nothing is ever signalled but the anvil this KINT_HOME
started, checked by what runs under the recorded pid (its command line and start time).

Real anvils are started only by the session's devchain (conftest's `chain_home`) and by
tests/test_wheel.py; here a small fake anvil (a Python JSON-RPC server that answers
`eth_chainId` and refuses everything else) stands in, through KINT_ANVIL, wherever a process
must be started, failed or stopped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
import requests

from chain_machines import make_session_key
from conftest import KINT, kint_loading, make_sandbox, pid_alive, wait_until
from kint.chain import devchain
from kint.chain.config import devchain_record
from kint.chain.devchain.records import anchor_file, state_path
from kint.paths import devchain_dir
from rpc_proxy import closed_port_url

ROOT = Path(__file__).resolve().parent.parent

FAKE_ANVIL = f"""#!{sys.executable}
# A stand-in for anvil: serves eth_chainId (31337) on --port, refuses every other method,
# writes its pid to $FAKE_ANVIL_PIDFILE and its environment to $FAKE_ANVIL_ENVFILE (JSON).
# FAKE_ANVIL_MODE=exit: exits at once instead.
import http.server, json, os, sys
if os.environ.get("FAKE_ANVIL_ENVFILE"):
    open(os.environ["FAKE_ANVIL_ENVFILE"], "w").write(json.dumps(dict(os.environ)))
if os.environ.get("FAKE_ANVIL_MODE") == "exit":
    print("fake anvil: refusing to start", file=sys.stderr)
    sys.exit(1)
port = int(sys.argv[sys.argv.index("--port") + 1])
if os.environ.get("FAKE_ANVIL_PIDFILE"):
    open(os.environ["FAKE_ANVIL_PIDFILE"], "w").write(str(os.getpid()))

class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if req.get("method") == "eth_chainId":
            body = {{"jsonrpc": "2.0", "id": req.get("id"), "result": "0x7a69"}}
        else:
            body = {{"jsonrpc": "2.0", "id": req.get("id"),
                    "error": {{"code": -32601, "message": "fake anvil: no such method"}}}}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass

http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


@pytest.fixture
def fake_anvil(tmp_path) -> Path:
    path = tmp_path / "bin" / "anvil"
    path.parent.mkdir()
    path.write_text(FAKE_ANVIL)
    path.chmod(0o755)
    return path


@pytest.fixture
def sentinel():
    """A process group of our own: a `sleep` leads it, and `kint` runs inside it. If kint
    signalled pid 0 (its own group) or the group, the sleep would die with it."""
    proc = subprocess.Popen(["sleep", "300"], process_group=0)  # same session, own group
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _kint_in(sb, group: subprocess.Popen | None, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KINT, *args], env=sb.env, text=True, capture_output=True, timeout=90,
                          stdin=subprocess.DEVNULL,
                          process_group=group.pid if group is not None else None)


def _record(sb) -> Path:
    return devchain_record(sb.kint_home)


def _write_record(sb, record: dict) -> None:
    folder = devchain_dir(sb.kint_home)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    sb.kint_home.chmod(0o700)
    _record(sb).write_bytes(orjson.dumps(record))


def _wait_gone(pid: int, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


# --- which anvil ------------------------------------------------------------------------------

def test_the_pinned_anvil_is_the_one_package_json_pins():
    pins = json.loads((ROOT / "package.json").read_text())["dependencies"]
    assert pins["@foundry-rs/anvil"] == devchain.ANVIL_VERSION
    assert f"@foundry-rs/anvil@{devchain.ANVIL_VERSION}" in devchain.INSTALL_HINT


def test_anvil_lookup_order(tmp_path, monkeypatch, fake_anvil):
    """KINT_ANVIL, then the checkout's npm package, then PATH (an npm shim followed to its
    binary), then ~/.foundry/bin; none of them: the hint names how to install one."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("KINT_ANVIL", str(fake_anvil))
    assert devchain.anvil_binary() == fake_anvil
    monkeypatch.setenv("KINT_ANVIL", str(tmp_path / "nowhere" / "anvil"))
    with pytest.raises(devchain.DevchainError) as err:
        devchain.anvil_binary()
    assert "is not an executable file" in str(err.value)
    assert f"npm install -g @foundry-rs/anvil@{devchain.ANVIL_VERSION}" in err.value.hint
    monkeypatch.delenv("KINT_ANVIL")

    # In this checkout: the pinned npm package that `make node` installed.
    package = devchain.anvil.platform_package()
    pinned = ROOT / "node_modules" / "@foundry-rs" / package / "bin" / "anvil"
    assert pinned.exists(), "run `make node`"
    assert devchain.anvil_binary() == pinned

    # Installed from a wheel: no checkout around it.
    monkeypatch.setattr(devchain.anvil, "PROJECT_ROOT", tmp_path / "site-packages")
    with pytest.raises(devchain.DevchainError) as err:
        devchain.anvil_binary()
    assert "anvil was not found" in str(err.value)
    assert f"npm install -g @foundry-rs/anvil@{devchain.ANVIL_VERSION}" in err.value.hint
    assert "foundryup" in err.value.hint and "KINT_ANVIL" in err.value.hint

    # ~/.foundry/bin/anvil, as foundryup leaves it.
    foundry = tmp_path / "home" / ".foundry" / "bin" / "anvil"
    foundry.parent.mkdir(parents=True)
    shutil.copy(fake_anvil, foundry)
    assert devchain.anvil_binary() == foundry

    # On PATH: `npm install -g @foundry-rs/anvil` links a node shim; kint runs the binary
    # the shim would run, so the pid it records is anvil's own.
    prefix = tmp_path / "npm-global"
    shim_dir = prefix / "lib" / "node_modules" / "@foundry-rs" / "anvil"
    binary = shim_dir / "node_modules" / "@foundry-rs" / package / "bin" / "anvil"
    binary.parent.mkdir(parents=True)
    shutil.copy(fake_anvil, binary)
    (shim_dir / "bin.mjs").write_text("#!/usr/bin/env node\n")
    (shim_dir / "bin.mjs").chmod(0o755)
    (prefix / "bin").mkdir()
    (prefix / "bin" / "anvil").symlink_to(shim_dir / "bin.mjs")
    monkeypatch.setenv("PATH", str(prefix / "bin"))
    assert devchain.anvil_binary() == binary
    # Any other anvil on PATH is used as it is.
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(fake_anvil, plain / "anvil")
    monkeypatch.setenv("PATH", str(plain))
    assert devchain.anvil_binary() == plain / "anvil"


# --- a start that fails leaves nothing -------------------------------------------------------

def test_a_failed_deploy_stops_the_anvil_it_started(tmp_path, fake_anvil):
    sb = make_sandbox(tmp_path / "machine", KINT_ANVIL=str(fake_anvil),
                      FAKE_ANVIL_PIDFILE=str(tmp_path / "anvil.pid"))
    out = sb.kint("devchain", "start")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "kint: error: deploying EpochAnchor failed" in out.stderr
    assert out.stderr.splitlines()[-2].endswith(" [RPC_UNAVAILABLE]"), out.stderr
    assert "hint: the anvil this start began is stopped" in out.stderr
    assert "Traceback" not in out.stderr
    pid = int((tmp_path / "anvil.pid").read_text())
    assert _wait_gone(pid, timeout=1), "the fake anvil outlived the failed start"
    assert not _record(sb).exists()
    status = sb.kint("devchain", "status")
    assert status.returncode == 3 and "no devchain is running" in status.stderr
    stop = sb.kint("devchain", "stop")
    assert stop.returncode == 0 and "no devchain was running" in stop.stdout


def test_an_anvil_that_does_not_start_leaves_no_record(tmp_path, fake_anvil):
    sb = make_sandbox(tmp_path / "machine", KINT_ANVIL=str(fake_anvil), FAKE_ANVIL_MODE="exit")
    out = sb.kint("devchain", "start")
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"anvil ({fake_anvil}) did not start" in out.stderr
    assert "fake anvil: refusing to start" in out.stderr  # the log's tail
    assert "Traceback" not in out.stderr
    assert not _record(sb).exists()


def test_the_anvil_gets_none_of_kints_secrets(tmp_path, fake_anvil):
    """anvil outlives the command that starts it, with the environment it was given
    (/proc/<pid>/environ): the owner's key or the session passphrase exported in the shell
    stayed there for the devchain's whole life. It gets the command's environment less
    every secret setting of kint's."""
    seen = tmp_path / "anvil-env.json"
    sb = make_sandbox(tmp_path / "machine", KINT_ANVIL=str(fake_anvil), FAKE_ANVIL_MODE="exit",
                      FAKE_ANVIL_ENVFILE=str(seen), KINT_OWNER_KEY="0x" + "5e" * 32,
                      KINT_SESSION_PASSPHRASE="a local passphrase")
    out = sb.kint("devchain", "start")
    assert out.returncode == 2, out.stdout + out.stderr  # the fake exits once it has looked
    env = json.loads(seen.read_text())
    assert "KINT_OWNER_KEY" not in env and "KINT_SESSION_PASSPHRASE" not in env, sorted(env)
    assert env["KINT_HOME"] == str(sb.kint_home)


def test_a_devchain_that_does_not_answer_is_a_devchain_error_with_its_code():
    """`connect --dev` funds the session key through anvil's own calls: a devchain that
    is gone (nothing listens on its port) is a DevchainError (RPC_UNAVAILABLE, a hint),
    which the worker reports with its code, not a `requests` exception (INTERNAL)."""
    import socket

    from kint.protocol import ErrorCode

    with socket.socket() as s:  # a loopback port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(devchain.DevchainError) as gone:
        devchain.fund(f"http://127.0.0.1:{port}", "0x" + "11" * 20, 1)
    assert gone.value.code is ErrorCode.RPC_UNAVAILABLE
    assert "anvil_setBalance: the devchain at http://127.0.0.1:" in str(gone.value)
    assert "kint devchain status" in (gone.value.hint or "")


def test_a_missing_kint_anvil_is_an_error_with_a_hint(tmp_path):
    sb = make_sandbox(tmp_path / "machine", KINT_ANVIL=str(tmp_path / "no-such-anvil"))
    out = sb.kint("devchain", "start")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    message, hint = out.stderr.splitlines()
    assert message == (f"kint: error: KINT_ANVIL={tmp_path / 'no-such-anvil'} is not an "
                       f"executable file [CONFIG_INVALID]")
    assert hint.startswith("hint: point KINT_ANVIL at an anvil binary or unset it")
    assert f"npm install -g @foundry-rs/anvil@{devchain.ANVIL_VERSION}" in hint
    assert not _record(sb).exists()


def test_a_corrupt_record_is_refused_with_a_code_and_under_json_as_json(tmp_path):
    """`kint devchain status` over a record that does not parse: what happened with its code
    and what to do; under --json the JSON error object on stdout, for a script."""
    sb = make_sandbox(tmp_path / "machine")
    folder = devchain_dir(sb.kint_home)
    folder.mkdir(parents=True, mode=0o700)
    sb.kint_home.chmod(0o700)
    _record(sb).write_text("{not json")
    out = sb.kint("devchain", "status")
    assert out.returncode == 2 and out.stdout == "", out.stdout + out.stderr
    assert out.stderr.splitlines() == [
        f"kint: error: {_record(sb)} is corrupt [CORRUPT_STATE]",
        "hint: remove it and run `kint devchain start`"], out.stderr
    out = sb.kint("devchain", "status", "--json")
    assert out.returncode == 2 and out.stderr == "", out.stdout + out.stderr
    assert orjson.loads(out.stdout) == {"error": "CORRUPT_STATE",
                                        "message": f"{_record(sb)} is corrupt",
                                        "hint": "remove it and run `kint devchain start`"}
    # The commands that read it as their chain configuration say the same, with the same
    # way out: they said BAD_REQUEST and to run `kint devchain stop`, which refuses the
    # record too.
    make_session_key(sb)  # `session-key create` itself: test_authorize_cli.py
    out = sb.kint("authorize", "payload", "--owner",
                  "0x000000000000000000000000000000000000dEaD")
    assert out.returncode == 2 and out.stdout == "", out.stdout + out.stderr
    assert out.stderr.splitlines() == [
        f"kint: error: {_record(sb)} is corrupt [CORRUPT_STATE]",
        "hint: remove it and run `kint devchain start`"], out.stderr


# --- stop and status signal nothing but their own anvil ----------------------------------------

def _start_fake(sb, fake_anvil: Path, home: Path | None = None,
                log: Path | None = None) -> tuple[subprocess.Popen, dict]:
    """A fake anvil running as `kint devchain start` would run it for `home`, and the record
    start would have written for it; its stdout and stderr on `log` when given (a real start
    gives its anvil `devchain/anvil.log`)."""
    home = home or sb.kint_home
    port = devchain.lifecycle.free_port()
    state = state_path(home)
    argv = [str(fake_anvil), "--host", "127.0.0.1", "--port", str(port), "--chain-id", "31337",
            "--state", str(state), "--state-interval", "1"]
    out = None
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        out = open(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")
    try:
        proc = subprocess.Popen(argv, env=sb.env, start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    finally:
        if out is not None:
            out.close()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while not devchain.lifecycle.answers(url):
            assert proc.poll() is None and time.monotonic() < deadline, "the fake did not start"
            time.sleep(0.05)
        identity = devchain.process_identity(proc.pid)
        # The kernel's command line: the script's interpreter, then what was run.
        assert identity is not None and identity["cmdline"][-len(argv):] == argv
    except BaseException:
        _reap(proc)
        raise
    record = {"pid": proc.pid, "rpc_url": url, "chain_id": 31337,
              "anchor": "0x5FbDB2315678afecb367f032d93F642f64180aa3", "port": port,
              "state": str(state), "anvil": str(fake_anvil), "identity": identity}
    return proc, record


def _reap(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_status_with_none_running_refuses_as_supervisor_status_does(tmp_path):
    """One rule for the two status commands of this kint's own (09-cli.md has neither):
    with nothing running, `kint supervisor status` refuses with its code and a hint, exit
    3, and so does `kint devchain status`, where it printed a plain line on stdout (and
    `null` under --json) that a script could not tell from a record by its code."""
    sb = make_sandbox(tmp_path / "machine")
    out = sb.kint("devchain", "status")
    assert out.returncode == 3 and out.stdout == "", out.stdout
    assert out.stderr.splitlines() == [
        f"kint: error: no devchain is running for {sb.kint_home} [RPC_UNAVAILABLE]",
        "hint: `kint devchain start` starts one"], out.stderr
    as_json = sb.kint("devchain", "status", "--json")
    assert as_json.returncode == 3 and as_json.stderr == "", as_json.stderr
    assert orjson.loads(as_json.stdout) == {
        "error": "RPC_UNAVAILABLE", "message": f"no devchain is running for {sb.kint_home}",
        "hint": "`kint devchain start` starts one"}
    supervisor = sb.kint("supervisor", "status", "--json")  # the rule it follows
    assert supervisor.returncode == 3 and set(orjson.loads(supervisor.stdout)) == {
        "error", "message", "hint"}, supervisor.stdout


def test_stop_twice_stops_the_anvil_once_and_the_callers_group_survives(
        tmp_path, fake_anvil, sentinel):
    sb = make_sandbox(tmp_path / "machine")
    proc, record = _start_fake(sb, fake_anvil)
    try:
        _write_record(sb, record)
        status = _kint_in(sb, sentinel, "devchain", "status", "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["pid"] == proc.pid

        first = _kint_in(sb, sentinel, "devchain", "stop")
        assert first.returncode == 0 and first.stdout.strip() == "devchain stopped", first.stderr
        assert proc.wait(timeout=5) == -signal.SIGTERM  # asked to stop, and it did
        assert not _record(sb).exists(), "the record outlived its anvil"
        kept = orjson.loads(anchor_file(sb.kint_home).read_bytes())
        assert kept["anchor"] == record["anchor"]  # for the next start

        second = _kint_in(sb, sentinel, "devchain", "stop")
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip() == "no devchain was running"
        assert "Traceback" not in second.stderr
        status = _kint_in(sb, sentinel, "devchain", "status")
        assert status.returncode == 3 and "no devchain is running" in status.stderr
        assert sentinel.poll() is None, "kint devchain stop killed its caller's process group"
    finally:
        _reap(proc)


@pytest.mark.parametrize("pid", [0, -1, "0", None, True])
def test_a_record_with_no_real_pid_is_never_signalled(tmp_path, monkeypatch, pid):
    """A record saying pid 0 (what an old `stop` left), a negative or a garbled pid: status
    says not running, stop says so and removes the record; os.kill is never called."""
    home = tmp_path / "kint"
    devchain_dir(home).mkdir(parents=True)
    home.chmod(0o700)
    devchain_dir(home).chmod(0o700)
    anchor = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
    record = {"pid": pid, "rpc_url": "http://127.0.0.1:9", "chain_id": 31337, "anchor": anchor,
              "stopped": True}
    killed = []
    monkeypatch.setattr(os, "kill", lambda *a: killed.append(a))
    for action in (devchain.status, devchain.stop):
        devchain_record(home).write_bytes(orjson.dumps(record))
        result = action(home)
        assert result in (None, "not running")
        assert not devchain_record(home).exists()
    assert killed == []
    assert orjson.loads(anchor_file(home).read_bytes())["anchor"] == anchor


def test_the_old_stopped_record_with_pid_0_through_the_cli(tmp_path, sentinel):
    """What issue 13 saw: a record with `"pid": 0` and a second stop that took the caller's
    process group down."""
    sb = make_sandbox(tmp_path / "machine")
    _write_record(sb, {"pid": 0, "rpc_url": "http://127.0.0.1:9", "chain_id": 31337,
                       "anchor": "0x5FbDB2315678afecb367f032d93F642f64180aa3", "stopped": True})
    for _ in range(2):
        out = _kint_in(sb, sentinel, "devchain", "stop")
        assert out.returncode == 0 and out.stdout.strip() == "no devchain was running", out.stderr
    out = _kint_in(sb, sentinel, "devchain", "status")
    assert out.returncode == 3
    assert sentinel.poll() is None, "kint devchain stop killed its caller's process group"


def test_a_pid_that_is_not_the_recorded_anvil_is_never_signalled(tmp_path, fake_anvil):
    """The recorded pid now runs something else (a reused pid): another program, or the
    same command line started at another time. Neither is signalled; the record, which
    outlived its anvil, goes."""
    sb = make_sandbox(tmp_path / "machine")
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    proc, record = _start_fake(sb, fake_anvil)
    try:
        cases = [
            # another program under the pid
            {**record, "pid": stranger.pid},
            # the same program and arguments, started at another time
            {**record, "identity": {**record["identity"], "started": "another-boot:12345"}},
            # a record from before identities were kept, whose pid runs a non-anvil
            {k: v for k, v in record.items() if k != "identity"} | {"pid": stranger.pid},
        ]
        for case in cases:
            for command, code, text in (("status", 3, "no devchain is running"),
                                        ("stop", 0, "no devchain was running")):
                _write_record(sb, case)
                out = sb.kint("devchain", command)
                said = out.stdout if command == "stop" else out.stderr.split(" for ")[0]
                assert out.returncode == code and text in said, (case, out.stderr)
                assert not _record(sb).exists()
            assert stranger.poll() is None and proc.poll() is None
    finally:
        _reap(stranger)
        _reap(proc)


def test_a_record_of_an_older_kint_still_stops_its_anvil(tmp_path, fake_anvil):
    """A devchain started by kint before identities were recorded: its anvil (this home's
    state file and the recorded port on its command line) is still stopped."""
    sb = make_sandbox(tmp_path / "machine")
    proc, record = _start_fake(sb, fake_anvil)
    try:
        _write_record(sb, {k: v for k, v in record.items() if k not in ("identity", "anvil")})
        out = sb.kint("devchain", "stop")
        assert out.returncode == 0 and out.stdout.strip() == "devchain stopped", out.stderr
        assert proc.wait(timeout=5) == -signal.SIGTERM
    finally:
        _reap(proc)


def test_a_copied_record_never_stops_another_homes_anvil(tmp_path, chain_home):
    """A second machine joins the session's devchain with a copy of its record: its status
    sees the chain, its stop leaves that anvil (and the record) alone. Neither loads web3 or
    eth_account, which only `start`'s deployment uses."""
    record = json.loads(devchain_record(chain_home).read_text())
    sb = make_sandbox(tmp_path / "machine-b")
    _write_record(sb, record)
    out, loaded = kint_loading(sb.env, "devchain", "stop")
    assert out.returncode == 0, out.stderr
    assert _chain_libraries(loaded) == [], loaded
    assert out.stdout.splitlines()[:-1] == [  # the modules' line follows
        f"no devchain of this KINT_HOME is running; the one recorded here by another "
        f"KINT_HOME, or by this one before its devchain/home.id was removed (state "
        f"{record['state']}), answers at "
        f"{record['rpc_url']}: stop it there"], out.stdout
    assert _record(sb).exists()
    assert requests.post(record["rpc_url"], json={"jsonrpc": "2.0", "id": 1,
                                                  "method": "eth_chainId", "params": []},
                         timeout=5).json()["result"] == "0x7a69"
    status, loaded = kint_loading(sb.env, "devchain", "status", "--json")
    shown = json.loads(status.stdout.rsplit("\n", 2)[0])  # the modules' line follows
    assert status.returncode == 0 and shown["pid"] == record["pid"], status.stdout
    assert _chain_libraries(loaded) == [] and "requests" in loaded, loaded  # the list is real


def test_a_copied_record_whose_pid_means_nothing_here_is_judged_by_its_endpoint(tmp_path,
                                                                                chain_home):
    """A second machine's copy of the session devchain's record, its anvil reached by URL
    while its pid says nothing here (another host's process: a pid that exited here, or
    the same pid started in another boot). Status deleted such a copy, so the next command
    signed for Base; it now says the devchain runs, and keeps the copy. A copy whose
    endpoint does not answer is said to be that, the record kept, and stop leaves it."""
    record = json.loads(devchain_record(chain_home).read_text())
    sb = make_sandbox(tmp_path / "machine-b")
    gone = subprocess.Popen(["true"])
    gone.wait()
    elsewhere = [{**record, "pid": gone.pid},
                 {**record, "identity": {**record["identity"], "started": "other-boot:1"}}]
    for copy in elsewhere:
        _write_record(sb, copy)
        out = sb.kint("devchain", "status")
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.strip() == (
            f"devchain running at {record['rpc_url']} (started from another KINT_HOME, state "
            f"{record['state']}), EpochAnchor {record['anchor']}")
        assert json.loads(_record(sb).read_text()) == copy
    silent = {**elsewhere[0], "rpc_url": closed_port_url()}
    _write_record(sb, silent)
    out = sb.kint("devchain", "status")
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stderr.splitlines()[:2] == [
        f"kint: error: the devchain recorded here by another KINT_HOME, or by this one before "
        f"its devchain/home.id was removed (state "
        f"{record['state']}), does not answer at {silent['rpc_url']}; the record is kept "
        f"[RPC_UNAVAILABLE]",
        "hint: on the machine that started it, `kint devchain status` says whether it runs "
        "and `kint devchain start` starts it again; a machine with a copy of its record then "
        "copies the new KINT_HOME/devchain/devchain.json (a start takes a new port)"], out.stderr
    stopped = sb.kint("devchain", "stop")  # no pid (another host's), nor "stop it there"
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert stopped.stdout.splitlines() == [
        f"no devchain of this KINT_HOME is running; the one recorded here by another "
        f"KINT_HOME, or by this one before its devchain/home.id was removed (state "
        f"{record['state']}), does not answer at "
        f"{silent['rpc_url']}; the record is kept"], stopped.stdout
    assert stopped.stderr.splitlines() == [f"hint: {stop_silent_hint(sb)}"], stopped.stderr
    assert json.loads(_record(sb).read_text()) == silent


def stop_silent_hint(sb) -> str:
    """`kint devchain stop`'s hint over a copy whose endpoint does not answer, under `sb`'s
    KINT_HOME. It gave status's (STOPPED_HINT: start it again on its machine and copy the
    record again), no answer to a stop that stopped nothing: stop's own says who stops that
    devchain and what forgets the record here."""
    return (f"nothing was stopped: a devchain another KINT_HOME started is stopped by `kint "
            f"devchain stop` where it was started; to forget this record (this KINT_HOME's own "
            f"from before its devchain/home.id was removed, or a copy no longer wanted), remove "
            f"{devchain_record(sb.kint_home)}")


def test_start_over_a_copied_record_starts_nothing_here(tmp_path, fake_anvil):
    """`kint devchain start` on a second machine holding a copy of the first's record (its
    pid meaning nothing here): start forgot the copy and began an anvil of this home's, a
    chain where the spaces connected through the copy have no epoch. It now says the
    copy's devchain runs while its endpoint answers, and refuses once it does not, the copy
    kept, nothing started either way."""
    first = make_sandbox(tmp_path / "first")
    proc, record = _start_fake(first, fake_anvil)
    gone = subprocess.Popen(["true"])
    gone.wait()
    copy = {**record, "pid": gone.pid}
    sb = make_sandbox(tmp_path / "second", KINT_ANVIL=str(fake_anvil),
                      FAKE_ANVIL_PIDFILE=str(tmp_path / "second.pid"))
    _write_record(sb, copy)
    try:
        out = sb.kint("devchain", "start")
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.strip() == (
            f"devchain running at {record['rpc_url']} (started from another KINT_HOME, state "
            f"{record['state']}), EpochAnchor {record['anchor']}")
    finally:
        _reap(proc)
    out = sb.kint("devchain", "start")
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.splitlines()[:2] == [
        f"kint: error: the devchain recorded here by another KINT_HOME, or by this one before "
        f"its devchain/home.id was removed (state "
        f"{record['state']}), does not answer at {record['rpc_url']}; nothing was started "
        f"[RPC_UNAVAILABLE]",
        "hint: on the machine that started it, `kint devchain status` says whether it runs "
        "and `kint devchain start` starts it again; a machine with a copy of its record then "
        "copies the new KINT_HOME/devchain/devchain.json (a start takes a new port); or, for a "
        f"devchain of this KINT_HOME's own, remove {_record(sb)} first"], out.stderr
    assert not (tmp_path / "second.pid").exists()  # no anvil was begun here
    assert json.loads(_record(sb).read_text()) == copy


def _chain_libraries(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in ("web3", "eth_account")]


def test_status_removes_the_record_of_an_anvil_that_died(tmp_path, fake_anvil):
    sb = make_sandbox(tmp_path / "machine")
    proc, record = _start_fake(sb, fake_anvil)
    _write_record(sb, record)
    proc.kill()
    proc.wait()
    out = sb.kint("devchain", "status")
    assert out.returncode == 3 and "no devchain is running" in out.stderr
    assert not _record(sb).exists()
    assert anchor_file(sb.kint_home).exists()


def test_process_identity_of_nothing_is_none():
    for pid in (0, -1, -os.getpgid(0), None, "1", 1.0, True):
        assert devchain.process_identity(pid) is None
    me = devchain.process_identity(os.getpid())
    assert me is not None and me["started"]


def test_start_never_runs_a_second_anvil_beside_a_hung_one(tmp_path, fake_anvil):
    """The recorded anvil still runs but does not answer: start says so and starts nothing
    beside it (two anvils on one state file would fight over it)."""
    sb = make_sandbox(tmp_path / "machine", KINT_ANVIL=str(fake_anvil),
                      FAKE_ANVIL_PIDFILE=str(tmp_path / "second.pid"))
    hung = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        # Popen returns once the child's exec began, but the kernel shows the new command
        # line only once the exec has set it up: read before that, the identity has an
        # empty command line, which the running `sleep` never matches again, so start
        # rightly took the record for a dead anvil's (seen once in a loaded run).
        identity = wait_until(lambda: (i := devchain.process_identity(hung.pid))
                              and i["cmdline"] == ["sleep", "300"] and i)
        assert identity, identity
        state = state_path(sb.kint_home)
        _write_record(sb, {"pid": hung.pid, "rpc_url": "http://127.0.0.1:9", "chain_id": 31337,
                           "anchor": "0x5FbDB2315678afecb367f032d93F642f64180aa3", "port": 9,
                           "state": str(state), "identity": identity})
        out = sb.kint("devchain", "start")
        assert out.returncode == 2, out.stdout + out.stderr
        assert f"the devchain's anvil (pid {hung.pid}) runs but does not answer" in out.stderr
        assert "hint: run `kint devchain stop`, then `kint devchain start`" in out.stderr
        assert not (tmp_path / "second.pid").exists() and hung.poll() is None
        assert _record(sb).exists()
    finally:
        _reap(hung)


def test_connect_dev_keeps_a_devchain_errors_own_code(tmp_path, chain_home):
    """`kint connect --dev` funds and authorizes through the devchain's own calls (anvil's
    anvil_setBalance): when one fails, the refusal carries the devchain error's code (the
    local chain did not answer as an endpoint: RPC_UNAVAILABLE), not NOT_CONNECTED."""
    from chain_machines import new_machine
    from rpc_proxy import RpcProxy

    record = json.loads(devchain_record(chain_home).read_text())
    sb = new_machine(tmp_path / "machine", chain_home)
    try:
        with RpcProxy(record["rpc_url"]) as proxy:
            proxy.set_mode("error_methods", methods=["anvil_setBalance"], message="no powers")
            out = sb.kint("connect", "--dev", "--rpc-urls", proxy.url, "--json")
            assert out.returncode == 2, out.stdout + out.stderr
            refusal = orjson.loads(out.stdout)
            assert refusal["error"] == "RPC_UNAVAILABLE", refusal
            assert refusal["message"].startswith("anvil_setBalance: "), refusal
            assert "no powers" in refusal["message"], refusal
    finally:
        sb.shutdown()


def _all_at_once(actions: list) -> None:
    """Each of `actions` on a thread of its own, all let go at one barrier (as two machines'
    deploys meet on one devchain); asserts none raised."""
    import threading

    start = threading.Barrier(len(actions))
    failed: list[BaseException] = []

    def run(action) -> None:  # noqa: ANN001 - a thunk
        start.wait()
        try:
            action()
        except BaseException as err:  # noqa: BLE001 - the assertion below shows it
            failed.append(err)

    threads = [threading.Thread(target=run, args=(a,)) for a in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failed, failed


def test_deploys_at_once_from_the_one_dev_account_all_land(chain_home):
    """Every deploy on a devchain comes from anvil's first dev account: several at once
    (two machines of one devchain, the suite's two workers) read the same pending nonce,
    and the ones that lost were refused "nonce too low" or "already imported" (a reviewer
    saw one fail in each of 20 rounds of two). Each is signed again at the nonce read anew:
    every deploy lands, at an address of its own."""
    from chain_machines import devchain_web3
    from kint.chain.artifact import test_smart_account_artifact
    from kint.chain.devchain.powers import deploy_artifact

    w3 = devchain_web3(chain_home)
    art = test_smart_account_artifact()
    owner = "0x" + "11" * 20
    landed: list[str] = []
    _all_at_once([lambda: landed.append(deploy_artifact(w3, art, owner))] * 4)
    assert len(set(landed)) == 4 and all(w3.eth.get_code(a) for a in landed), landed


def test_funds_and_deploys_at_once_from_the_one_dev_account_all_land(chain_home):
    """`kint devchain fund`'s transfer comes from the deploys' account: it was sent at
    anvil's own gas price with no retry, so beside a deploy (the suite's other workers',
    or a `kint devchain start` on the same chain) it could be refused "nonce too low", or
    replace a deploy of a lower price. It goes through the deploys' sender now: at their one
    price (so a collision is refused, never a replacement), sent again when refused so.
    Two transfers and two deploys at once all land, each transfer at DEPLOY_GAS_PRICE."""
    from chain_machines import devchain_web3
    from kint.chain.artifact import test_smart_account_artifact
    from kint.chain.devchain.powers import (DEPLOY_GAS_PRICE, deploy_artifact,
                                            transfer_from_dev_account)

    w3 = devchain_web3(chain_home)
    url = json.loads(devchain_record(chain_home).read_text())["rpc_url"]
    art = test_smart_account_artifact()
    targets = ["0x" + f"{n:02x}" * 20 for n in (0x5a, 0x5b)]
    sent: list[dict] = []
    landed: list[str] = []
    actions = [lambda t=t: sent.append(transfer_from_dev_account(url, t, 10**15))
               for t in targets]
    actions += [lambda: landed.append(deploy_artifact(w3, art, "0x" + "12" * 20))] * 2
    _all_at_once(actions)
    assert len(set(landed)) == 2 and all(w3.eth.get_code(a) for a in landed), landed
    assert len(sent) == 2 and all(s["balance_wei"] >= 10**15 for s in sent), sent
    prices = [w3.eth.get_transaction(s["tx"])["gasPrice"] for s in sent]
    assert prices == [DEPLOY_GAS_PRICE] * 2, prices
