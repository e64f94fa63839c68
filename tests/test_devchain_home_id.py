"""A devchain record copied from a second host whose KINT_HOME has the same path as this one's
(`~/.kint` of the same user name on both): the copy names this home's own state file, so
its state path cannot tell it from this home's record, and its pid says nothing here. It is
told by the id of the KINT_HOME that started its anvil, which `kint devchain start` keeps
(random, 0600, in KINT_HOME/devchain/home.id) and records. Judged by the path alone, status
deleted such a copy as a dead anvil's and start began an anvil of this home's beside it.
The session's devchain (a real anvil, started by `kint devchain start`) is the first host.
"""

from __future__ import annotations

import json
import stat
import subprocess

import orjson

from conftest import make_sandbox
from kint.chain.config import devchain_record
from kint.chain.devchain.records import home_id_path, own_home_id, state_path
from kint.paths import devchain_dir


def _write_record(sb, record: dict) -> None:
    devchain_dir(sb.kint_home).mkdir(parents=True, exist_ok=True, mode=0o700)
    sb.kint_home.chmod(0o700)
    devchain_record(sb.kint_home).write_bytes(orjson.dumps(record))


def _gone_pid() -> int:
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


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
    line = (f"devchain running at {record['rpc_url']} (started from another KINT_HOME, state "
            f"{copy['state']}), EpochAnchor {record['anchor']}")
    for command in ("status", "start", "stop", "status"):
        out = sb.kint("devchain", command)
        assert out.returncode == 0, (command, out.stdout + out.stderr)
        if command != "stop":
            assert out.stdout.strip() == line, (command, out.stdout)
        assert json.loads(devchain_record(sb.kint_home).read_text()) == copy, command
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
    mine = {**record, "state": str(state_path(sb.kint_home)), "home": own}
    for gone in ({**mine, "pid": _gone_pid()},
                 {**mine, "identity": {**record["identity"], "started": "another-boot:1"}}):
        _write_record(sb, gone)
        out = sb.kint("devchain", "status")
        assert out.returncode == 3 and "no devchain is running" in out.stderr, out.stderr
        assert not devchain_record(sb.kint_home).exists()
    assert home_id_path(sb.kint_home).read_text() == own
