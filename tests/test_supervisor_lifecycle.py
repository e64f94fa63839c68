"""Starting and stopping: on demand exactly once, a clean stop that records no crash,
workers that die with a killed supervisor, idle workers that leave and come back."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import KINT, SUPPORT, pid_alive, wait_until, write_store
from kint.supervisor.pidlock import running_pid
from test_start_beside_silent import _beside_running

ORPHAN_EXIT_MAX_S = 30
# How long `kint supervisor stop` waits for the stopped supervisor to exit, here (10 s for a
# user): through the test launcher's knob (tests/support/kint_test_timings.py). The test that
# uses it holds the supervisor on its log until the stop has answered, so any wait is outlived.
STOP_EXIT_WAIT_S = 0.5


def _supervisors_of(home: Path) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"kint.supervisor" in cmd and str(home).encode() in cmd and pid_alive(int(entry)):
            found.append(int(entry))
    return found


def test_stop_is_clean_and_status_then_reports_no_supervisor(sandbox):
    write_store(sandbox.sibyl_db)
    write_store(sandbox.profile_db("work"))
    sandbox.start()
    pids = [sandbox.call("status", db)["worker"]["pid"]
            for db in (sandbox.sibyl_db, sandbox.profile_db("work"))]
    out = sandbox.kint("supervisor", "stop")
    assert out.returncode == 0 and "stopped" in out.stdout
    assert not any(pid_alive(pid) for pid in pids)
    assert running_pid(sandbox.kint_home) is None
    log = (sandbox.kint_home / "supervisor.log").read_text()
    assert log.count("(commanded: stop)") == 2
    assert "quarantined" not in log and "hung" not in log
    status = sandbox.kint("supervisor", "status")
    assert status.returncode == 3 and "no supervisor is running" in status.stderr
    again = sandbox.kint("supervisor", "stop")
    assert again.returncode == 0 and "no supervisor is running" in again.stdout


# Linux's fcntl for a pipe's capacity (F_GETPIPE_SZ; Python names it from 3.10 on Linux).
F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)


def _drain(fd: int) -> bytes:
    """What a non-blocking pipe holds now."""
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


def test_stop_says_timeout_when_the_supervisor_answers_but_does_not_exit(sandbox):
    """`kint supervisor stop` when the supervisor answers the stop and then outlives it:
    exit 2 with the TIMEOUT line naming its pid, the log and `kill -KILL PID` (it is stopping
    already: a plain kill only asks that again). Made for real: the
    supervisor's log becomes a FIFO (a log on a pipe or a hung network filesystem blocks a
    writer the same way) whose buffer has room for exactly the one line a stop logs before
    it answers ("supervisor stopping 0 worker(s)": no space is served, so no worker logs).
    Its next line, once it has answered, blocks: it holds its pid lock until the test reads
    the pipe. Linux only (the pipe's capacity is read with F_GETPIPE_SZ). The command is the
    test launcher's, its wait STOP_EXIT_WAIT_S rather than a user's 10 s."""
    sup = sandbox.start()
    log = sandbox.kint_home / "supervisor.log"
    log.rename(log.with_name("supervisor.log.before"))
    os.mkfifo(log, 0o600)
    reader = os.open(log, os.O_RDONLY | os.O_NONBLOCK)
    filler = os.open(log, os.O_WRONLY | os.O_NONBLOCK)
    try:
        # The line's length: its time ("2026-12-04 17:06:21,123") is 23 characters always.
        line = f"{'T' * 23} {sup} kint.supervisor INFO supervisor stopping 0 worker(s)\n"
        room = fcntl.fcntl(filler, F_GETPIPE_SZ) - len(line.encode())
        while room:  # whole pages first, then the last page but the line's room
            room -= os.write(filler, b"#" * min(room, 4096))
        os.close(filler)
        filler = -1

        env = {**sandbox.env, "KINT_TEST_STOP_EXIT_WAIT_S": str(STOP_EXIT_WAIT_S)}
        out = subprocess.run([sys.executable, str(SUPPORT / "run_kint.py"), "supervisor", "stop"],
                             env=env, text=True, capture_output=True, timeout=120,
                             stdin=subprocess.DEVNULL)
        assert out.returncode == 2, out.stdout + out.stderr
        assert out.stdout == ""
        assert out.stderr == (
            f"kint: error: the supervisor (pid {sup}) stopped its workers but has not exited "
            f"{STOP_EXIT_WAIT_S}s later [TIMEOUT]\nhint: see {log}; it is stopping already, "
            f"which a plain `kill` only asks again: `kill -KILL {sup}` ends it now (its "
            f"workers with it), and the next command starts a new one\n"), out.stderr
        assert running_pid(sandbox.kint_home) == sup  # it did outlive the stop

        # Its log read, it goes on with its exit and lets the pid lock go.
        written = b""
        deadline = time.monotonic() + 30
        while running_pid(sandbox.kint_home) is not None and time.monotonic() < deadline:
            written += _drain(reader)
            time.sleep(0.05)
        written += _drain(reader)
        assert running_pid(sandbox.kint_home) is None
        lines = written.decode().lstrip("#").splitlines()
        assert lines[0].endswith("supervisor stopping 0 worker(s)"), lines
        assert lines[1].endswith(f"supervisor {sup} stopped"), lines
    finally:
        if filler >= 0:
            os.close(filler)
        os.close(reader)


def test_workers_exit_when_the_supervisor_is_killed_and_the_next_call_restarts_it(sandbox):
    write_store(sandbox.sibyl_db)
    write_store(sandbox.profile_db("a"))
    sup = sandbox.start()
    workers = [sandbox.call("status", db)["worker"]["pid"]
               for db in (sandbox.sibyl_db, sandbox.profile_db("a"))]
    os.kill(sup, signal.SIGKILL)
    # A worker told by the kernel (PDEATHSIG) or its next beat's look goes within seconds;
    # the bound only tells that from one that stays, and is generous for a loaded box.
    deadline = time.monotonic() + ORPHAN_EXIT_MAX_S
    while any(pid_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(pid_alive(pid) for pid in workers), "workers outlived their supervisor"

    out = sandbox.kint("--db", str(sandbox.sibyl_db), "status", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["worker"]["pid"] not in workers
    new_sup = running_pid(sandbox.kint_home)
    assert new_sup and new_sup != sup


def test_ten_racing_calls_start_exactly_one_supervisor(sandbox):
    write_store(sandbox.sibyl_db)
    procs = [subprocess.Popen([KINT, "status", "--json"], env=sandbox.env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(10)]
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=90)
        assert proc.returncode == 0, stderr
        results.append(json.loads(stdout))
    assert len({r["worker"]["pid"] for r in results}) == 1
    assert len(_supervisors_of(sandbox.kint_home)) == 1
    status = json.loads(sandbox.kint("supervisor", "status", "--json").stdout)
    assert len(status["spaces"]) == 1 and status["spaces"][0]["restarts"] == 0


def test_an_idle_worker_exits_without_counting_as_a_crash_and_comes_back(tmp_path):
    from conftest import make_sandbox

    sb = make_sandbox(tmp_path / "idle", KINT_WORKER_IDLE_SECONDS="1")
    try:
        write_store(sb.sibyl_db)
        sb.start()
        first = sb.call("status", sb.sibyl_db)["worker"]["pid"]
        row = sb.wait_for(lambda: (r := sb.row(sb.sibyl_db))["state"] == "idle" and r,
                          timeout=15, what="the worker going idle")
        assert row["pid"] is None and row["restarts"] == 0 and row["last_exit"] is None
        assert not pid_alive(first)
        assert sb.kint("supervisor", "status").returncode == 0
        second = sb.call("status", sb.sibyl_db)["worker"]["pid"]
        assert second != first
    finally:
        sb.shutdown()


def test_a_supervisor_started_twice_keeps_one(sandbox):
    """`start --foreground` beside a running supervisor exits 2 naming it, never 0: under
    a service manager 0 is a clean end, so the unit was neither restarted once the other
    supervisor went nor shown failed. A plain `start` still finds it running and says so,
    in other words than the start that started it (both said `supervisor running`)."""
    fresh = sandbox.kint("supervisor", "start")
    assert fresh.returncode == 0, fresh.stderr
    first = running_pid(sandbox.kint_home)
    assert fresh.stdout == f"supervisor started, pid {first} ({sandbox.kint_home})\n"
    out = subprocess.run([sys.executable, str(SUPPORT / "run_kint.py"), "supervisor", "start",
                          "--foreground"],
                         env=sandbox.env,  # refused at once: tests/test_pid_lock_loser.py
                         text=True, capture_output=True, timeout=30)
    assert out.returncode == 2, out.stderr
    refused, hint = out.stderr.splitlines()
    assert refused == (f"kint: error: a supervisor is already running for {sandbox.kint_home} "
                       f"(pid {first}); this one exits [BUSY]"), out.stderr  # named, not guessed
    assert hint.startswith("hint: ") and "kint supervisor stop" in hint, out.stderr
    assert running_pid(sandbox.kint_home) == first
    plain = sandbox.kint("supervisor", "start")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == f"supervisor already running, pid {first} ({sandbox.kint_home})\n"
    # Its environment gives no setting the supervisor reads. Here and below a loaded box may
    # add the line of a running supervisor slow to answer (over 4 s): nothing else.
    assert _beside_running(plain.stderr.splitlines()) == [], plain.stderr
    # Settings given to a start that starts nothing are not applied, and it says so (by
    # name only: a value may be a secret or hold an endpoint's key).
    given = {"KINT_OFFLINE": "1", "KINT_RPC_URL": "http://127.0.0.1:9/secret-key"}
    line = (f"kint: a supervisor was already running (pid {first}): this start applied none "
            f"of this environment's settings that differ from its own (KINT_RPC_URL, "
            f"KINT_OFFLINE); it keeps the ones "
            f"it was started with (`kint supervisor status` lists them). To run it with "
            f"these, `kint supervisor stop`, then `kint supervisor start` again")
    told = sandbox.kint("supervisor", "start", env=given)
    assert told.returncode == 0, told.stderr
    assert _beside_running(told.stderr.splitlines()) == [line], told.stderr
    told = sandbox.kint("supervisor", "start", "--json", env=given)
    assert json.loads(told.stdout) == {"pid": first, "kint_home": str(sandbox.kint_home),
                                       "started": False, "notices": [line]}, told.stdout
    assert told.stderr == "" and "secret-key" not in told.stdout
    # Only the settings that differ from the running one's are named: KINT_KEY_TTL given
    # as its default (24 h, as seconds) is the one it runs with.
    told = sandbox.kint("supervisor", "start", env={**given, "KINT_KEY_TTL": "86400"})
    assert _beside_running(told.stderr.splitlines()) == [line], told.stderr
    told = sandbox.kint("supervisor", "start", env={"KINT_KEY_TTL": "86400"})
    assert told.returncode == 0, told.stderr
    assert _beside_running(told.stderr.splitlines()) == [], told.stderr


def test_a_start_beside_a_supervisor_older_than_the_comparison_names_every_setting():
    """A supervisor from before `sup.ping` took the caller's settings refuses the argument
    (BAD_REQUEST, `unknown argument`): the start asks it plainly and names every setting
    its environment gives, rather than failing beside it. No older supervisor is installed
    here: a stub client answers as its `sup.ping` does."""
    from kint.client import KintError
    from kint.commands.start_beside import not_applied, ping_with_settings

    class Older:
        def call(self, op, *, args=None, timeout_s=None):  # noqa: ANN001, ANN202
            if args:
                raise KintError("BAD_REQUEST", f"{op}: unknown argument 'settings'")
            return {"pid": 4242}

    answer = ping_with_settings(Older())  # type: ignore[arg-type]
    assert answer == {"pid": 4242}
    (line,) = not_applied(False, answer, {"KINT_OFFLINE": "1", "KINT_KEY_TTL": "24h"})
    assert "none of this environment's settings (KINT_OFFLINE, KINT_KEY_TTL);" in line, line


def test_a_start_beside_one_with_the_same_passphrase_says_nothing_of_it(sandbox):
    """KINT_SESSION_PASSPHRASE exported for the supervisor and every command, as
    settings.md says it must be: `kint supervisor start` beside the running supervisor said
    on every start that it applied none of this environment's settings, naming it, and to
    stop and start again. The same passphrase is the supervisor's own (its proof checked,
    the passphrase never sent); another one is named."""
    assert sandbox.kint("supervisor", "start",
                        env={"KINT_SESSION_PASSPHRASE": "correct horse"}).returncode == 0
    first = running_pid(sandbox.kint_home)
    told = sandbox.kint("supervisor", "start", env={"KINT_SESSION_PASSPHRASE": "correct horse"})
    assert told.returncode == 0, told.stderr
    assert _beside_running(told.stderr.splitlines()) == [], told.stderr
    told = sandbox.kint("supervisor", "start", env={"KINT_SESSION_PASSPHRASE": "other horse"})
    assert told.returncode == 0, told.stderr
    assert (f"(pid {first}): this start applied none of this environment's settings that "
            f"differ from its own (KINT_SESSION_PASSPHRASE)") in told.stderr, told.stderr
    assert "horse" not in told.stderr + told.stdout


def test_a_space_stays_bound_to_its_store_across_a_restart(sandbox):
    """The binding outlives the supervisor (run/bindings.json, 0600): after a stop, another
    store asking for the same space is still refused; once the bound store is gone, the
    binding gives way."""
    write_store(sandbox.sibyl_db)
    other = write_store(sandbox.profile_db("alpha"))
    space = {"KINT_SPACE": "one-space"}
    first = sandbox.kint("status", "--json", env=space)
    assert first.returncode == 0, first.stderr
    assert sandbox.kint("supervisor", "stop").returncode == 0
    saved = sandbox.kint_home / "run" / "bindings.json"
    assert (saved.stat().st_mode & 0o777) == 0o600
    assert [b["db"] for b in json.loads(saved.read_text()).values()] == [str(sandbox.sibyl_db)]

    refused = sandbox.kint("--db", str(other), "status", env=space)  # a new supervisor
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "[SPACE_CONFLICT]" in refused.stderr and str(sandbox.sibyl_db) in refused.stderr

    assert sandbox.kint("supervisor", "stop").returncode == 0
    for suffix in ("", "-wal", "-shm"):
        Path(f"{sandbox.sibyl_db}{suffix}").unlink(missing_ok=True)
    moved_on = sandbox.kint("--db", str(other), "status", "--json", env=space)
    assert moved_on.returncode == 0, moved_on.stderr
    assert json.loads(moved_on.stdout)["store"]["path"] == str(other)


def _libraries(pid: int) -> set[str]:
    """The file names of the compiled libraries process `pid` has mapped (Linux /proc)."""
    with open(f"/proc/{pid}/maps") as fh:
        return {line.split()[-1].rsplit("/", 1)[-1] for line in fh if ".so" in line}


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    """A supervisor started by `kint supervisor start`, with the default store's worker:
    the two tests below only look at their processes."""
    from conftest import make_sandbox

    sb = make_sandbox(tmp_path_factory.mktemp("running") / "machine")
    try:
        write_store(sb.sibyl_db)
        supervisor = sb.start()
        worker = sb.call("status", sb.sibyl_db)["worker"]["pid"]
        yield sb, supervisor, worker
    finally:
        sb.shutdown()


def test_the_supervisor_spawns_workers_without_loading_what_they_run(running):
    """The supervisor names its workers' code for the forkserver, which has it loaded; it
    never loads it itself: web3, eth_account and Sibyl in the supervisor cost ~50 MiB of
    its own and stalled its loop for their import at its first spawn (seconds on a loaded
    box). Seen in what the processes mapped: pydantic's core and the KZG library come with
    web3 and eth_account; the worker maps them, the supervisor that started it does not."""
    web3_libraries = ("_pydantic_core", "ckzg")
    _, supervisor, worker = running

    def mapped(pid: int) -> list[str]:
        return sorted(lib for lib in _libraries(pid) if lib.startswith(web3_libraries))

    assert len(mapped(worker)) == len(web3_libraries), mapped(worker)  # the check is real
    assert mapped(supervisor) == []


def _comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def test_kints_processes_name_themselves(running):
    """`ps` and `top` (and a discard's refusal, which names a store's holders) tell the
    supervisor, its forkserver and a worker apart from every other `python` on the box;
    their command lines stay as they were (tests find the supervisor by its own)."""
    sandbox, supervisor, worker = running
    assert _comm(supervisor) == "kint-supervisor"
    assert _comm(worker) == "kint-worker"
    forkserver = int(Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert forkserver != supervisor
    assert _comm(forkserver) == "kint-forkserver"
    assert supervisor in _supervisors_of(sandbox.kint_home)


def test_start_restart_stop_and_reload_say_json_with_json(sandbox):
    """`--json`: one object on stdout for what each did, and a refusal as the JSON error
    object on stdout with the plain form's exit status."""
    write_store(sandbox.sibyl_db)
    started = sandbox.kint("supervisor", "start", "--json")
    assert started.returncode == 0, started.stderr
    pid = running_pid(sandbox.kint_home)
    assert json.loads(started.stdout) == {"pid": pid, "kint_home": str(sandbox.kint_home),
                                          "started": True}
    sandbox.warm_up()  # the first worker's start is not what is tested here
    space16 = sandbox.call("status", sandbox.sibyl_db)["space"]
    restarted = sandbox.kint("supervisor", "restart", space16, "--json")
    assert restarted.returncode == 0, restarted.stderr
    assert json.loads(restarted.stdout) == {"restarted": [space16]}
    unknown = sandbox.kint("supervisor", "restart", "no-such-space", "--json")
    assert unknown.returncode == 2 and unknown.stderr == "", unknown.stderr
    assert json.loads(unknown.stdout) == {"error": "BAD_REQUEST",
                                          "message": "no space matches 'no-such-space'",
                                          "hint": "`kint supervisor status` lists the spaces"}
    both = sandbox.kint("supervisor", "start", "--foreground", "--json")
    assert both.returncode == 2 and json.loads(both.stdout)["error"] == "BAD_REQUEST"

    stopped = sandbox.kint("supervisor", "stop", "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout) == {"stopped": True, "pid": pid,
                                          "kint_home": str(sandbox.kint_home),
                                          "kint_home_exists": True, "started_since": None}
    assert running_pid(sandbox.kint_home) is None
    again = sandbox.kint("supervisor", "stop", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["stopped"] is False
    reload = sandbox.kint("supervisor", "reload", "--json")
    assert reload.returncode == 3, reload.stdout + reload.stderr
    assert json.loads(reload.stdout)["error"] == "SUPERVISOR_UNAVAILABLE"
    # `supervisor status` runs without click (kint.entry), and says it the same way.
    status = sandbox.kint("supervisor", "status", "--json")
    assert status.returncode == 3 and status.stderr == "", status.stdout + status.stderr
    assert json.loads(status.stdout)["error"] == "SUPERVISOR_UNAVAILABLE"


# Takes the pid lock once it is free (a try every 250 ms), writes its pid as a
# supervisor does (kint.supervisor.pidlock.hold_pid_lock), and holds it until stdin closes.
NEXT_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
print("waiting", flush=True)
while True:  # a real supervisor starting tries every 20 ms; slower here, as on a busy box
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        break
    except BlockingIOError:
        time.sleep(0.25)
os.ftruncate(fd, 0)
os.write(fd, f"{os.getpid()}\\n".encode())
sys.stdin.read()
"""


def test_stop_names_a_supervisor_started_meanwhile_and_is_no_timeout(sandbox):
    """A supervisor started while `stop` waits (a kint-server's call, a command's autostart)
    takes the pid lock as the stopped one lets go. `stop` compares the holder's pid with the
    one it stopped: the stopped one is gone, and the new one is named, not reported as a
    stopped supervisor that "has not exited" (TIMEOUT, after 10 s).

    The next holder is a stand-in for a supervisor starting meanwhile on a busy box: it
    tries the lock every 250 ms (a real one every 20 ms, when it gets a core), so a look of
    `stop`'s (every 50 ms) finds nobody between the two; `stop` looks again for a successor
    before it answers (commands/stop_wait.py `wait_gone`), which is what names it."""
    from kint.paths import run_dir
    from kint.supervisor.pidlock import PID_FILE

    sandbox.start()
    stopping = running_pid(sandbox.kint_home)
    nxt = subprocess.Popen([sys.executable, "-c", NEXT_HOLDER,
                            str(run_dir(sandbox.kint_home) / PID_FILE)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert nxt.stdout.readline().strip() == "waiting"
        stopped = sandbox.kint("supervisor", "stop", "--json")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert json.loads(stopped.stdout) == {"stopped": True, "pid": stopping,
                                              "kint_home": str(sandbox.kint_home),
                                              "kint_home_exists": True,
                                              "started_since": nxt.pid}
        # It let go of the lock; its interpreter's exit follows within moments.
        assert wait_until(lambda: not pid_alive(stopping), timeout=30)
        assert running_pid(sandbox.kint_home) == nxt.pid
    finally:
        nxt.stdin.close()
        nxt.wait(timeout=30)
    assert running_pid(sandbox.kint_home) is None
