"""A devchain record copied from a second host whose KINT_HOME has the same path as this one's
(`~/.kint` of the same user name on both): the copy names this home's own state file, so
its state path cannot tell it from this home's record, and its pid says nothing here. It is
told by the id of the KINT_HOME that started its anvil, which `kint devchain start` keeps
(random, 0600, in KINT_HOME/devchain/home.id) and records. Judged by the path alone, status
deleted such a copy as a dead anvil's and start began an anvil of this home's beside it.
The session's devchain (a real anvil, started by `kint devchain start`) is the first host.

The id is a file, lost or copied with the rest of KINT_HOME, so the record's own facts come
first (kint.chain.devchain.whose): this home's anvil running under the recorded pid makes
the record this home's own though home.id is gone, and an endpoint answering with the
genesis the record names, while no anvil runs here, makes it a devchain running elsewhere
though the id is this home's (the whole KINT_HOME copied).
"""

from __future__ import annotations

import json
import signal
import stat
import subprocess

import orjson
import requests

from conftest import make_sandbox
from kint.chain.config import devchain_record
from kint.chain.devchain.errors import STOPPED_HINT
from kint.chain.devchain.records import home_id_path, own_home_id, state_path
from kint.paths import devchain_dir
from rpc_proxy import (LoopbackServer, answer_json, answer_status, closed_port_url,
                       json_post_handler)
from test_devchain import FAKE_ANVIL, _reap, _start_fake, stop_silent_hint


def _write_record(sb, record: dict) -> None:
    devchain_dir(sb.kint_home).mkdir(parents=True, exist_ok=True, mode=0o700)
    sb.kint_home.chmod(0o700)
    devchain_record(sb.kint_home).write_bytes(orjson.dumps(record))


def _gone_pid() -> int:
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


def _assert_kept_by_each_command(sb, record: dict, copy: dict) -> None:
    """status, start, stop and status again each exit 0 over `copy` (a record of the first
    host's devchain, `record`, copied here), status and start saying it runs elsewhere, and
    each leaves the copy as it was."""
    line = (f"devchain running at {record['rpc_url']} (started from another KINT_HOME, state "
            f"{copy['state']}), EpochAnchor {record['anchor']}")
    for command in ("status", "start", "stop", "status"):
        out = sb.kint("devchain", command)
        assert out.returncode == 0, (command, out.stdout + out.stderr)
        if command != "stop":
            assert out.stdout.strip() == line, (command, out.stdout)
        assert json.loads(devchain_record(sb.kint_home).read_text()) == copy, command


def test_a_copy_naming_this_homes_own_state_path_is_kept_and_starts_nothing(tmp_path,
                                                                           chain_home):
    record = json.loads(devchain_record(chain_home).read_text())
    kept = home_id_path(chain_home)
    assert record["home"] == kept.read_text().strip()  # what the first host's start recorded
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    # KINT_ANVIL names nothing: a start that began an anvil here would fail on it.
    sb = make_sandbox(tmp_path / "machine-b", KINT_ANVIL=str(tmp_path / "no-anvil"))
    copy = {**record, "state": str(state_path(sb.kint_home)), "pid": _gone_pid()}
    _write_record(sb, copy)
    _assert_kept_by_each_command(sb, record, copy)
    assert not home_id_path(sb.kint_home).exists()  # no start here made one


def test_this_homes_own_record_whose_anvil_is_gone_is_still_forgotten(tmp_path, chain_home):
    """The id tells copies only: a record this home's start wrote (its id, its state path)
    whose anvil is gone (exited, or the box rebooted: another boot's start time) is removed
    as before, and an id this home keeps is kept as it is."""
    record = json.loads(devchain_record(chain_home).read_text())
    sb = make_sandbox(tmp_path / "machine")
    _write_record(sb, {})
    own = own_home_id(sb.kint_home)
    assert own != record["home"] and own_home_id(sb.kint_home) == own
    # Its port answers nothing, as a gone anvil's does (one that answers with the chain the
    # record names is a devchain running elsewhere: the test after the next).
    mine = {**record, "state": str(state_path(sb.kint_home)), "home": own,
            "rpc_url": closed_port_url()}
    for gone in ({**mine, "pid": _gone_pid()},
                 {**mine, "identity": {**record["identity"], "started": "another-boot:1"}}):
        _write_record(sb, gone)
        out = sb.kint("devchain", "status")
        assert out.returncode == 3 and "no devchain is running" in out.stderr, out.stderr
        assert not devchain_record(sb.kint_home).exists()
    assert home_id_path(sb.kint_home).read_text() == own


def test_this_homes_running_anvil_with_its_id_deleted_is_still_its_own(tmp_path):
    """devchain/home.id deleted while this home's anvil runs: the record names an id this
    home no longer keeps, and was taken for a copy's, so `stop` left the anvil running
    ("started from another KINT_HOME") and nothing here could stop it. The process under
    the recorded pid is the anvil this home started (its command line, this home's state
    file, its start time, this home's anvil.log): the record is this home's own, and its id
    is written back, by status, start and stop alike."""
    anvil = tmp_path / "bin" / "anvil"
    anvil.parent.mkdir()
    anvil.write_text(FAKE_ANVIL)
    anvil.chmod(0o755)
    sb = make_sandbox(tmp_path / "machine")
    # Its stdout on this home's anvil.log, as a real start gives its anvil.
    proc, record = _start_fake(sb, anvil, log=devchain_dir(sb.kint_home) / "anvil.log")
    try:
        _write_record(sb, {})
        mine = {**record, "home": own_home_id(sb.kint_home)}  # as this home's start wrote it
        _write_record(sb, mine)
        for _ in range(2):  # status writes the id back; stop, with it deleted again, too
            home_id_path(sb.kint_home).unlink()
            out = sb.kint("devchain", "status")
            assert out.returncode == 0, out.stdout + out.stderr
            assert out.stdout.strip() == (f"devchain running at {record['rpc_url']} (pid "
                                          f"{proc.pid}), EpochAnchor {record['anchor']}")
            assert home_id_path(sb.kint_home).read_text() == mine["home"]
            assert stat.S_IMODE(home_id_path(sb.kint_home).stat().st_mode) == 0o600
        # start finds it running (starts nothing: KINT_ANVIL is no anvil) and writes it back
        home_id_path(sb.kint_home).unlink()
        out = sb.kint("devchain", "start", env={"KINT_ANVIL": str(tmp_path / "no-anvil")})
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"(pid {proc.pid})" in out.stdout, out.stdout
        assert home_id_path(sb.kint_home).read_text() == mine["home"]
        assert json.loads(devchain_record(sb.kint_home).read_text()) == mine
        home_id_path(sb.kint_home).unlink()
        out = sb.kint("devchain", "stop")
        assert out.returncode == 0 and out.stdout.strip() == "devchain stopped", out.stdout
        assert proc.wait(timeout=10) == -signal.SIGTERM
        assert not devchain_record(sb.kint_home).exists()
        assert home_id_path(sb.kint_home).read_text() == mine["home"]  # the next start's
    finally:
        _reap(proc)


def test_another_homes_anvil_at_this_homes_path_is_never_signalled(tmp_path):
    """A home at this home's path seen through another mount namespace that shares the pid
    namespace (a container run with --pid=host, a sandbox): the first home's anvil runs
    under the recorded pid with the very command line and start time the copied record
    names, this home's state path in it. The record's id is not this home's (none kept
    here) and the anvil writes to another home's anvil.log: a copy. Taken for this home's
    own by its command line, `stop` SIGTERMed the first home's anvil and wrote its id here.
    With the whole KINT_HOME copied (the first's id and an anvil.log of its own here), the
    anvil.log still tells it: left alone too. Here the other namespace's home is another
    folder whose anvil.log the fake writes to."""
    anvil = tmp_path / "bin" / "anvil"
    anvil.parent.mkdir()
    anvil.write_text(FAKE_ANVIL)
    anvil.chmod(0o755)
    sb = make_sandbox(tmp_path / "machine-b")
    first = devchain_dir(tmp_path / "first-namespace" / "kint") / "anvil.log"
    proc, record = _start_fake(sb, anvil, log=first)
    try:
        copy = {**record, "home": "the-first-homes-id"}
        _write_record(sb, copy)
        said = ("no devchain of this KINT_HOME is running; the one recorded here by another "
                "KINT_HOME, or by this one before its devchain/home.id was removed (state "
                f"{copy['state']}),")
        for command in ("status", "stop", "start", "stop"):
            out = sb.kint("devchain", command)
            if command == "stop":
                assert said in out.stdout + out.stderr, out.stdout + out.stderr
            assert proc.poll() is None, f"{command} signalled another home's anvil"
            assert json.loads(devchain_record(sb.kint_home).read_text()) == copy, command
            assert not home_id_path(sb.kint_home).exists(), command
        # The whole KINT_HOME copied: the first home's id kept here, an anvil.log here.
        home_id_path(sb.kint_home).write_text(copy["home"])
        home_id_path(sb.kint_home).chmod(0o600)
        (devchain_dir(sb.kint_home) / "anvil.log").write_text("the first home's log, copied\n")
        out = sb.kint("devchain", "stop")
        assert said in out.stdout + out.stderr, out.stdout + out.stderr
        assert proc.poll() is None, "stop signalled another home's anvil"
        assert json.loads(devchain_record(sb.kint_home).read_text()) == copy
    finally:
        _reap(proc)


def test_a_whole_kint_home_copied_to_another_host_keeps_the_devchain_it_names(tmp_path,
                                                                            chain_home):
    """The first host's whole KINT_HOME copied to a second one with the same path: home.id
    came with it, so the record's id is this home's and its state path too, and status
    forgot it as a stopped anvil's while its devchain answered (through a forward; here
    the same host), and start began a fork of that chain from the copied state. No anvil
    runs here under the recorded pid (another boot's), but the endpoint answers with the
    genesis the record names: it runs elsewhere, kept, and nothing starts beside it. The
    same record naming another genesis (another chain on its port) is this home's own
    stopped one, forgotten; a copy's endpoint answering for another chain is not its
    devchain running."""
    record = json.loads(devchain_record(chain_home).read_text())
    genesis = requests.post(record["rpc_url"], json={
        "jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByNumber", "params": ["0x0", False]},
        timeout=10).json()["result"]["hash"]
    assert record["genesis"] == genesis  # what `kint devchain start` recorded
    sb = make_sandbox(tmp_path / "machine-b", KINT_ANVIL=str(tmp_path / "no-anvil"))
    _write_record(sb, {})
    home_id_path(sb.kint_home).write_text(home_id_path(chain_home).read_text())
    home_id_path(sb.kint_home).chmod(0o600)
    copy = {**record, "state": str(state_path(sb.kint_home)),
            "identity": {**record["identity"], "started": "another-host-boot:1"}}
    _write_record(sb, copy)
    _assert_kept_by_each_command(sb, record, copy)
    other_chain = "0x" + "00" * 32
    _write_record(sb, {**copy, "genesis": other_chain})
    out = sb.kint("devchain", "status")
    assert out.returncode == 3 and "no devchain is running" in out.stderr, out.stderr
    assert not devchain_record(sb.kint_home).exists()
    # A copy from another KINT_HOME (its own state path) whose port answers for another
    # chain is not that devchain running: said not to answer, and kept.
    _write_record(sb, {**record, "genesis": other_chain})
    out = sb.kint("devchain", "status")
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stderr.startswith("kint: error: the devchain recorded here by another "
                                 "KINT_HOME, or by this one before its devchain/home.id was "
                                 "removed"), out.stderr
    assert json.loads(devchain_record(sb.kint_home).read_text())["genesis"] == other_chain


def _this_homes_record(sb, url: str, genesis: str) -> dict:
    """A record as this home's start writes it (its id, its state path, the genesis), its
    anvil gone (a pid that exited, another boot's start time), its endpoint `url`; written
    under `sb`'s KINT_HOME and returned."""
    _write_record(sb, {})
    record = {"pid": _gone_pid(), "rpc_url": url, "chain_id": 31337,
              "anchor": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
              "port": int(url.rsplit(":", 1)[1]), "state": str(state_path(sb.kint_home)),
              "anvil": "anvil", "identity": {"cmdline": ["anvil"], "started": "another-boot:1"},
              "home": own_home_id(sb.kint_home), "genesis": genesis}
    _write_record(sb, record)
    return record


class _AnswersOnce(LoopbackServer):
    """A copy's endpoint that answers for its chain once (its chain id, then its genesis),
    then stops answering (HTTP 500): a devchain stopped, or a forward gone, while a status
    runs."""

    def __init__(self, genesis: str) -> None:
        self.answers = {"eth_chainId": "0x7a69", "eth_getBlockByNumber": {"hash": genesis}}
        self.asked: list[str] = []
        super().__init__(json_post_handler(self._serve))

    def _serve(self, handler, request: dict) -> None:
        self.asked.append(request["method"])
        answer = self.answers.pop(request["method"], None)
        if answer is None:
            answer_status(handler, 500)
            return
        answer_json(handler, json.dumps({"jsonrpc": "2.0", "id": request["id"],
                                         "result": answer}).encode())


def _assert_asks_once(tmp_path, command: str, genesis: str) -> None:
    """`kint devchain <command>` over a whole KINT_HOME's copy (its endpoint answering once
    for `genesis`) exits 0, says the devchain runs elsewhere, asked the endpoint once, and
    left the record as it was."""
    endpoint = _AnswersOnce(genesis)
    try:
        sb = make_sandbox(tmp_path / "machine-b", KINT_ANVIL=str(tmp_path / "no-anvil"))
        copy = _this_homes_record(sb, endpoint.url, genesis)
        out = sb.kint("devchain", command)
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.strip() == (f"devchain running at {endpoint.url} (started from another "
                                      f"KINT_HOME, state {copy['state']}), EpochAnchor "
                                      f"{copy['anchor']}")
        assert endpoint.asked == ["eth_chainId", "eth_getBlockByNumber"]
        assert json.loads(devchain_record(sb.kint_home).read_text()) == copy
    finally:
        endpoint.stop()


def test_status_asks_a_copys_endpoint_once_and_says_what_it_found(tmp_path):
    """A whole KINT_HOME copied (this home's id and state path in the record, no anvil of it
    running here) is told a copy by its endpoint answering for its genesis. status asked
    that endpoint up to three times (whose.copied, then again whether the copy runs, then
    again for the line to print): an endpoint that stopped answering in between gave two
    judgements of one record. It is asked once, and status says what that ask found."""
    _assert_asks_once(tmp_path, "status", "0x" + "ab" * 32)


def test_start_asks_a_copys_endpoint_once_and_says_what_it_found(tmp_path):
    """As status does (the test before), start over a whole KINT_HOME's copy asks its
    endpoint once. It asked up to three times (whose.copied, then whether the copy's
    devchain answers, then the CLI's whose.copied again for its line): an endpoint that
    stopped answering in between had start refuse the devchain it had just judged running
    elsewhere, or name its pid, which means nothing here. It says what its one ask found,
    and starts nothing (KINT_ANVIL is no anvil)."""
    _assert_asks_once(tmp_path, "start", "0x" + "cd" * 32)


def test_stop_of_this_homes_stopped_record_with_its_id_removed_says_what_is_known(tmp_path):
    """This home's own record (its id, its state path) whose anvil is gone, with
    devchain/home.id removed since: no anvil runs under its pid, its endpoint does not
    answer, and the id that told it is gone, so it is kept as a copy is. `stop` said it
    "was started from another KINT_HOME", untrue of it; it says, as status does, that
    another KINT_HOME recorded it, or this one before its home.id was removed."""
    sb = make_sandbox(tmp_path / "machine")
    record = _this_homes_record(sb, closed_port_url(), "0x" + "ef" * 32)
    home_id_path(sb.kint_home).unlink()
    whose = (f"recorded here by another KINT_HOME, or by this one before its devchain/home.id "
             f"was removed (state {record['state']}), does not answer at {record['rpc_url']}; "
             f"the record is kept")
    out = sb.kint("devchain", "stop")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines() == [
        f"no devchain of this KINT_HOME is running; the one {whose}"], out.stdout
    assert out.stderr.splitlines() == [f"hint: {stop_silent_hint(sb)}"], out.stderr
    status = sb.kint("devchain", "status")
    assert status.returncode == 3, status.stdout + status.stderr
    assert status.stderr.startswith(f"kint: error: the devchain {whose} "), status.stderr
    assert f"hint: {STOPPED_HINT}" in status.stderr, status.stderr
    assert json.loads(devchain_record(sb.kint_home).read_text()) == record
    assert not home_id_path(sb.kint_home).exists()


def test_a_copy_by_a_removed_id_alone_that_answers_says_whose_is_not_known(tmp_path,
                                                                        chain_home):
    """This home's own record from a kint before the genesis was recorded (its id, its
    state path, no genesis), its anvil gone, with devchain/home.id removed since: judged a
    copy by the id alone, and its endpoint answers for chain 31337 (here the session's
    devchain: whatever anvil has its port since). status and start said "started from
    another KINT_HOME", untrue of it; they say what is known, as a silent copy's refusal
    does: another KINT_HOME recorded it, or this one before its home.id was removed."""
    session = json.loads(devchain_record(chain_home).read_text())
    sb = make_sandbox(tmp_path / "machine", KINT_ANVIL=str(tmp_path / "no-anvil"))
    _write_record(sb, {})
    record = {key: value for key, value in session.items() if key != "genesis"}
    record = {**record, "state": str(state_path(sb.kint_home)), "pid": _gone_pid(),
              "home": own_home_id(sb.kint_home)}
    _write_record(sb, record)
    home_id_path(sb.kint_home).unlink()
    line = (f"devchain running at {record['rpc_url']} (recorded here by another KINT_HOME, or "
            f"by this one before its devchain/home.id was removed, state {record['state']}), "
            f"EpochAnchor {record['anchor']}")
    for command in ("status", "start"):
        out = sb.kint("devchain", command)
        assert out.returncode == 0, (command, out.stdout + out.stderr)
        assert out.stdout.strip() == line, (command, out.stdout)
        assert json.loads(devchain_record(sb.kint_home).read_text()) == record, command
    assert not home_id_path(sb.kint_home).exists()


def test_this_homes_running_anvil_with_its_id_and_log_removed_says_whose_is_not_known(
        tmp_path):
    """This home's anvil running under the recorded pid (its command line, this home's
    state file, its start time), with devchain/home.id and devchain/anvil.log both removed
    since: whether it writes to this home's anvil.log cannot be asked, so the id decides,
    and none is kept here: a copy, never signalled. status said it was "started from
    another KINT_HOME", untrue of it; it says what is known."""
    anvil = tmp_path / "bin" / "anvil"
    anvil.parent.mkdir()
    anvil.write_text(FAKE_ANVIL)
    anvil.chmod(0o755)
    sb = make_sandbox(tmp_path / "machine")
    log = devchain_dir(sb.kint_home) / "anvil.log"
    proc, record = _start_fake(sb, anvil, log=log)
    try:
        _write_record(sb, {})
        mine = {**record, "home": own_home_id(sb.kint_home)}  # as this home's start wrote it
        _write_record(sb, mine)
        home_id_path(sb.kint_home).unlink()
        log.unlink()  # the anvil writes on to the file it was given, gone from the folder
        out = sb.kint("devchain", "status")
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.strip() == (
            f"devchain running at {record['rpc_url']} (recorded here by another KINT_HOME, or "
            f"by this one before its devchain/home.id was removed, state {record['state']}), "
            f"EpochAnchor {record['anchor']}"), out.stdout
        assert proc.poll() is None
        assert json.loads(devchain_record(sb.kint_home).read_text()) == mine
        assert not home_id_path(sb.kint_home).exists()
    finally:
        _reap(proc)
