"""`kint devchain stop` and `start` over a record judged a copy whose anvil runs on this
machine (under the recorded pid, as it was started): what they advise must never orphan
that anvil. Removing the record while it runs, then starting, began a second anvil beside
it, on this home's state file when the first was this home's own.

This home's own anvil is judged a copy once devchain/home.id and devchain/anvil.log are both
removed (whether it writes to this home's anvil.log cannot be asked, and no id is kept): stop
said "stop it there" of it and gave no way out, or, with it not answering, advised removing
the record. A small fake anvil (tests/test_devchain.py's) stands in; SIGSTOPped, it does
not answer while its process runs, as a hung anvil or one on a loaded box.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
from pathlib import Path

from conftest import make_sandbox, wait_until
from kint.chain.config import devchain_record
from kint.chain.devchain.records import home_id_path, own_home_id
from kint.paths import devchain_dir
from test_devchain import FAKE_ANVIL, _reap, _start_fake
from test_devchain_home_id import _write_record


def _fake_anvil(tmp_path: Path) -> Path:
    anvil = tmp_path / "bin" / "anvil"
    anvil.parent.mkdir()
    anvil.write_text(FAKE_ANVIL)
    anvil.chmod(0o755)
    return anvil


def _held(proc: subprocess.Popen) -> None:
    """SIGSTOP `proc` and wait until it is stopped (state T, a state that lasts until a
    SIGCONT): its port still takes connections and answers none."""
    proc.send_signal(signal.SIGSTOP)
    stat = Path(f"/proc/{proc.pid}/stat")
    assert wait_until(lambda: stat.read_text().rsplit(")", 1)[1].split()[0] == "T", 10)


def _said(record: dict) -> str:
    return (f"no devchain of this KINT_HOME is running; the one recorded here by another "
            f"KINT_HOME, or by this one before its devchain/home.id was removed (state "
            f"{record['state']}),")


def _start_refusal_hint(sb, pid: int) -> str:
    return (f"hint: its anvil runs on this machine (pid {pid}) without answering: `kint "
            f"devchain stop` says what stops it; remove {devchain_record(sb.kint_home)} only "
            f"once it is stopped, or a start here begins a second anvil beside it")


def test_stop_over_this_homes_anvil_with_its_id_and_log_removed_names_the_way_to_stop_it(
        tmp_path):
    """This home's anvil running, devchain/home.id and anvil.log removed: judged a copy by
    the id alone (unsure whose). Not answering, stop advised removing the record and start
    removing it first: followed, status said no devchain runs and the next start began a
    second anvil on the same state file. Answering, stop said "stop it there", exit 0, no
    hint. Both name its pid and the step after which stop stops it (the record's id back
    in devchain/home.id), and following that step stops it."""
    sb = make_sandbox(tmp_path / "machine", KINT_ANVIL=str(tmp_path / "no-anvil"))
    log = devchain_dir(sb.kint_home) / "anvil.log"
    proc, record = _start_fake(sb, _fake_anvil(tmp_path), log=log)
    try:
        _write_record(sb, {})
        mine = {**record, "home": own_home_id(sb.kint_home)}  # as this home's start wrote it
        _write_record(sb, mine)
        home_id_path(sb.kint_home).unlink()
        log.unlink()
        path = home_id_path(sb.kint_home)
        step = f"printf %s {shlex.quote(mine['home'])} > {shlex.quote(str(path))}"
        hint = (f"hint: nothing was stopped: pid {proc.pid} runs an anvil on this KINT_HOME's "
                f"state file, and whose it is cannot be told (no devchain/home.id here, and "
                f"whether it writes to this KINT_HOME's devchain/anvil.log cannot be read); if "
                f"it is this KINT_HOME's own, write the id its record names to {path} (`{step}`) "
                f"and `kint devchain stop` stops it; if another KINT_HOME started it, `kint "
                f"devchain stop` there does")
        _held(proc)
        out = sb.kint("devchain", "stop")
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.splitlines() == [
            f"{_said(mine)} does not answer at {mine['rpc_url']}; the record is kept"]
        assert out.stderr.splitlines() == [hint], out.stderr
        out = sb.kint("devchain", "start")
        assert out.returncode == 2, out.stdout + out.stderr
        assert out.stderr.splitlines()[-1] == _start_refusal_hint(sb, proc.pid), out.stderr
        proc.send_signal(signal.SIGCONT)
        out = sb.kint("devchain", "stop")
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.splitlines() == [
            f"{_said(mine)} answers at {mine['rpc_url']}; the record is kept"], out.stdout
        assert out.stderr.splitlines() == [hint], out.stderr
        assert proc.poll() is None
        assert json.loads(devchain_record(sb.kint_home).read_text()) == mine
        assert not path.exists()
        subprocess.run(["sh", "-c", step], check=True)  # the hint's step, as given
        out = sb.kint("devchain", "stop")
        assert out.returncode == 0 and out.stdout.strip() == "devchain stopped", out.stdout
        assert proc.wait(timeout=10) == -signal.SIGTERM
        assert not devchain_record(sb.kint_home).exists()
    finally:
        _reap(proc)


def test_stop_over_another_homes_silent_anvil_running_here_never_advises_removing_it(
        tmp_path):
    """Another home's anvil at this home's path (a home in another mount namespace sharing
    the pids: it writes to that home's anvil.log, not to the one here), running here and not
    answering: stop advised removing the record, after which a start here began a second
    anvil beside it. It names the pid and who stops it, and that stop here says how to
    forget the record once it is stopped; start's refusal likewise. Nothing is signalled.
    (With no anvil.log here, whose it is cannot be told: the test before's hint.)"""
    sb = make_sandbox(tmp_path / "machine-b", KINT_ANVIL=str(tmp_path / "no-anvil"))
    first = devchain_dir(tmp_path / "first-namespace" / "kint") / "anvil.log"
    proc, record = _start_fake(sb, _fake_anvil(tmp_path), log=first)
    try:
        copy = {**record, "home": "the-first-homes-id"}
        _write_record(sb, copy)
        (devchain_dir(sb.kint_home) / "anvil.log").write_text("this home's own log\n")
        _held(proc)
        out = sb.kint("devchain", "stop")
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.splitlines() == [
            f"{_said(copy)} does not answer at {copy['rpc_url']}; the record is kept"]
        assert out.stderr.splitlines() == [
            f"hint: nothing was stopped: its anvil runs on this machine (pid {proc.pid}), "
            f"another KINT_HOME's, and is stopped by `kint devchain stop` where it was "
            f"started; once it is, `kint devchain stop` here says how to forget the "
            f"record"], out.stderr
        out = sb.kint("devchain", "start")
        assert out.returncode == 2, out.stdout + out.stderr
        assert out.stderr.splitlines()[-1] == _start_refusal_hint(sb, proc.pid), out.stderr
        assert proc.poll() is None
        assert json.loads(devchain_record(sb.kint_home).read_text()) == copy
        assert not home_id_path(sb.kint_home).exists()
    finally:
        _reap(proc)
