"""The run's last sweep of the supervisors a test left (tests/support/left_supervisors.py,
run by the controller's pytest_sessionfinish over the run's folders): a supervisor held
with its workers (SIGSTOP to its group, as a test that crashed mid-way leaves it) is gone
after it, workers and all, and a supervisor outside the folder swept is not touched. A run
killed before its end never swept: the next run stops what is left under its folder
before removing it (conftest.remove_abandoned_runs). A process holding a home's pid lock
that does not name the home is never signalled, by the sweep or by a sandbox's stop
(`stop_supervisor`).

Real parts: `kint supervisor start`'s supervisor in a sandbox of its own, its forkserver
and a space's worker serving a real Sibyl store, the processes read from /proc. The sweep
is given this test's own folder, never the run's: the supervisors of the tests running
beside it are not its to stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import RUN_LOCK, make_sandbox, remove_abandoned_runs, wait_until, write_store
from kint.supervisor.pidlock import running_pid
from support.basetemp_lock import CODE
from support.left_supervisors import (alive, group_alive, group_members, left_under,
                                      stop_left_under, stop_supervisor)

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="the sweep reads /proc")


def test_a_held_supervisor_and_its_workers_are_gone_after_the_sweep(tmp_path):
    left = make_sandbox(tmp_path / "swept" / "machine")
    beside = make_sandbox(tmp_path / "beside")
    write_store(left.sibyl_db)
    try:
        held = left.start()
        left.call("status", left.sibyl_db)  # a space's worker running under it
        kept = beside.start()
        group = group_members(held)
        assert held in group and len(group) >= 3, group  # with its forkserver and worker
        os.killpg(held, signal.SIGSTOP)

        assert stop_left_under(tmp_path / "swept") == [held]
        assert not group_alive(held), group_members(held)
        # Continued before its stop (SIGCONT), it stopped itself: a held one never answers
        # sup.stop, and is killed without this line (kint/supervisor/daemon.py).
        log = (left.kint_home / "supervisor.log").read_text(errors="replace")
        assert f"supervisor {held} stopped" in log, log[-2000:]
        assert running_pid(left.kint_home) is None
        # Outside the folder swept: running and answering, as it was.
        assert running_pid(beside.kint_home) == kept
        assert beside.call("sup.ping")["pid"] == kept
    finally:  # a held group is continued first (Sandbox.shutdown)
        left.shutdown()
        beside.shutdown()


def test_a_run_killed_before_its_end_leaves_no_supervisor_past_the_next_runs_start(tmp_path):
    """A run's folder whose run lock is free (its run killed, the controller's sweep never
    reached), a supervisor still running held under it: the next run's start stops it,
    workers and all, before the folder goes. The folders are this test's (kt-* beside a
    stand-in for this run's own), never the system's temporary folder's."""
    abandoned = tmp_path / "kt-abandoned"
    left = make_sandbox(abandoned / "t" / "m")
    write_store(left.sibyl_db)
    (abandoned / RUN_LOCK).touch()  # its run's lock, held by nobody now
    (tmp_path / "kt-own").mkdir()
    held = None
    try:
        held = left.start()
        left.call("status", left.sibyl_db)
        os.killpg(held, signal.SIGSTOP)

        remove_abandoned_runs(tmp_path / "kt-own")
        assert not abandoned.exists()
        assert not group_alive(held), group_members(held)
    finally:
        if held is not None and group_alive(held):  # not swept: it must not outlive the test
            os.killpg(held, signal.SIGCONT)
            os.killpg(held, signal.SIGKILL)


# A process of the test's own that takes the real pid lock of a home and keeps it (a
# supervisor that cannot answer sup.stop), in a session of its own with a child: the home
# read from stdin, and on its command line only when `named`.
_HOLDER = """import subprocess, sys, time
from pathlib import Path
from kint.supervisor.pidlock import hold_pid_lock
home = Path(sys.stdin.readline().strip())
child = subprocess.Popen(["sleep", "300"])
hold_pid_lock(home)
print(child.pid, flush=True)
time.sleep(300)
"""


def _lock_holder(home: Path, named: bool | list[str], cwd: Path | None = None,
                 env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], int]:
    """The holder of `home`'s pid lock (`_HOLDER`) and its child's pid, once it holds it:
    `home` on its command line when `named` (a list: those words, as given), run in
    `cwd` with `env` added to this process's environment."""
    (home / "run").mkdir(parents=True, mode=0o700)
    said = named if isinstance(named, list) else [str(home)] if named else []
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, *said], cwd=cwd, env={**os.environ, **(env or {})},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    holder.stdin.write(f"{home}\n")
    holder.stdin.close()
    child = int(holder.stdout.readline())
    assert running_pid(home) == holder.pid
    return holder, child


def _end(holder: subprocess.Popen[str]) -> None:
    if group_alive(holder.pid):
        os.killpg(holder.pid, signal.SIGKILL)
    holder.wait(30)


def test_a_supervisor_whose_stop_does_not_end_is_killed_with_its_group(tmp_path):
    """The home's lock held by a process that names the home and answers nothing: after
    the call's bound and the let-go's, it is killed with its group, its child too (a
    supervisor's forkserver and workers), not the supervisor alone."""
    home = tmp_path / "kint"
    holder, child = _lock_holder(home, named=True)
    try:
        stop_supervisor(home, call_s=2, let_go_s=2)  # bounds meant to run out
        assert not alive(holder.pid)
        assert not alive(child)
        assert running_pid(home) is None
    finally:
        _end(holder)


def test_a_pid_file_naming_a_process_not_the_homes_is_never_signalled(tmp_path):
    """The home's lock held by a process that does not name the home (a test's helper,
    or a pid the file names that the box has given to another process): neither a
    sandbox's stop nor the sweep signals it or its group, however long it keeps the
    lock."""
    home = tmp_path / "swept" / "kint"
    holder, child = _lock_holder(home, named=False)
    try:
        stop_supervisor(home, call_s=2, let_go_s=2)
        assert stop_left_under(tmp_path / "swept") == []
        assert alive(holder.pid) and alive(child)
        assert running_pid(home) == holder.pid
    finally:
        _end(holder)


@pytest.mark.parametrize("how", ["--home", "--home=", "KINT_HOME"])
def test_a_supervisor_naming_its_home_relative_to_its_folder_is_its_homes(tmp_path, how):
    """A supervisor started in its machine's folder with its home given relative to it
    (tests/support/run_supervisor.py takes `--home kint`; an environment's KINT_HOME=kint)
    names that home as surely as one given the whole path: read against the process's own
    folder (/proc/PID/cwd), the sweep finds it and a sandbox's stop kills it with its group
    when it answers nothing. Compared as written, it was no home's: left running, held."""
    root = tmp_path / "swept"
    home = root / "kint"
    named = {"--home": ["--home", "kint"], "--home=": ["--home=kint"], "KINT_HOME": False}[how]
    env = {"KINT_HOME": "kint"} if how == "KINT_HOME" else {"KINT_HOME": str(tmp_path / "x")}
    holder, child = _lock_holder(home, named=named, cwd=root, env=env)
    try:
        assert [found for found, _pid in left_under(root)] == [home]
        stop_supervisor(home, call_s=2, let_go_s=2)  # bounds meant to run out
        assert not alive(holder.pid) and not alive(child)
        assert running_pid(home) is None
    finally:
        _end(holder)


def test_a_relative_word_of_another_folder_names_no_home(tmp_path):
    """The same relative word, said by a process in another folder, is that folder's: a
    holder of the home's lock run elsewhere with `kint` on its command line is never
    signalled."""
    home = tmp_path / "swept" / "kint"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "kint").mkdir(parents=True)
    holder, child = _lock_holder(home, named=["--home", "kint"], cwd=elsewhere,
                                 env={"KINT_HOME": str(elsewhere / "kint")})
    try:
        assert left_under(tmp_path / "swept") == []
        stop_supervisor(home, call_s=2, let_go_s=2)
        assert alive(holder.pid) and alive(child)
    finally:
        _end(holder)


# A run's one test: it says it runs, then waits for the test beside it to let it end.
_WAITING_RUN = """import os, time
from pathlib import Path

def test_waits(tmp_path):
    gate = Path(os.environ["KINT_TEST_BASETEMP_GATE"])
    (gate / "running").touch()
    deadline = time.monotonic() + 120
    while not (gate / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (gate / "go").exists()
"""


def _inner_run(tmp_path: Path, *args: str) -> list[str]:
    """A pytest session of its own on `_WAITING_RUN`, with the suite's conftest loaded as a
    plugin (as test_checkout_watch.py runs one), its folders under tmp_path/tmp."""
    return [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider",
            "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), "-q", *args,
            str(tmp_path / "test_waiting.py")]


def test_a_run_given_the_basetemp_of_a_running_run_is_refused(tmp_path):
    """Two runs given one --basetemp: the second is refused as it starts (collecting only
    is enough to be refused), with a code and a hint, before it could empty the folder or
    sweep the first run's supervisors under it at its end; the first goes on and passes.
    Real parts: two pytest sessions with the suite's conftest. Without the lock the second
    ran (and its sweep, over the folder, would have stopped every supervisor of the
    first)."""
    (tmp_path / "test_waiting.py").write_text(_WAITING_RUN)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    gate, runs_tmp, shared = tmp_path / "gate", tmp_path / "tmp", tmp_path / "shared"
    gate.mkdir()
    runs_tmp.mkdir()
    tests = Path(__file__).resolve().parent
    env = {name: value for name, value in os.environ.items()
           if name != "KINT_TESTS_RUN_ROOT" and not name.startswith("PYTEST_")}
    env.update(KINT_TEST_BASETEMP_GATE=str(gate), TMPDIR=str(runs_tmp),
               PYTHONPATH=os.pathsep.join([str(tests), env.get("PYTHONPATH", "")]))
    first = subprocess.Popen(_inner_run(tmp_path, "--basetemp", str(shared)), env=env,
                             cwd=tmp_path, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: (gate / "running").exists() or first.poll() is not None,
                          timeout=120)
        assert first.poll() is None, first.communicate()[0]
        second = subprocess.run(_inner_run(tmp_path, "--collect-only", "--basetemp",
                                           str(shared)), env=env,
                                cwd=tmp_path, text=True, capture_output=True, timeout=120,
                                stdin=subprocess.DEVNULL)
        said = second.stdout + second.stderr
        assert second.returncode == pytest.ExitCode.USAGE_ERROR, said
        assert f"[{CODE}] another test run (pid {first.pid}) is running with --basetemp " \
            f"{shared}:" in said, said
        assert "hint: give each run a --basetemp of its own" in said, said
    finally:
        (gate / "go").touch()
        out = first.communicate(timeout=120)[0]
    assert first.returncode == 0 and "1 passed" in out, out
    assert not list(runs_tmp.glob("kt-*")), list(runs_tmp.iterdir())  # neither run's folder left


def _looped_home(folder: Path) -> None:
    """A home under `folder` whose pid file is a symlink loop (opening it raises ELOOP)."""
    run = folder / "t" / "kint" / "run"
    run.mkdir(parents=True)
    (run / "supervisor.pid").symlink_to("supervisor.pid")


def test_a_pid_file_that_cannot_be_read_keeps_no_run_from_starting(tmp_path):
    """A killed run's folder with a home whose pid file cannot be read: the next run's
    start goes on and removes the folder, where the sweep's error escaped conftest's
    import (and every later run's the same); the sweep itself passes over that home."""
    abandoned = tmp_path / "kt-abandoned"
    _looped_home(abandoned)
    (abandoned / RUN_LOCK).touch()
    (tmp_path / "kt-own").mkdir()
    remove_abandoned_runs(tmp_path / "kt-own")
    assert not abandoned.exists()
    _looped_home(tmp_path / "swept")
    assert stop_left_under(tmp_path / "swept") == []


def test_a_process_whose_name_is_no_utf8_is_read_as_any_other(tmp_path):
    """A sandbox's shutdown reads every process's /proc/PID/stat (`group_members`): a
    process that named itself with bytes that are not UTF-8 (test_stop_reused_pid.py makes
    one, a name cut mid-character) raised UnicodeDecodeError out of the read, failing the
    shutdown of whichever test ran beside it. Real parts: a child process that writes such
    a name to its own /proc/self/comm, in a process group of its own."""
    named = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "open('/proc/self/comm', 'wb').write(b'\\xc3\\xa9' * 7 + b'\\xc3')\n"
         "print('named', flush=True)\ntime.sleep(300)"],
        stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert named.stdout.readline() == b"named\n"
        comm = Path(f"/proc/{named.pid}/comm").read_bytes()
        assert comm.rstrip(b"\n").endswith(b"\xc3"), comm  # the premise: no UTF-8 name
        assert group_members(named.pid) == [named.pid]
    finally:
        named.kill()
        named.wait()
