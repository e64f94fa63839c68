"""One live worker per space of a KINT_HOME (kint.tenant_worker.worker_lock).

A worker outlives a supervisor that died until it notices (ORPHAN_EXIT_S), and for good
while it is stopped. The next supervisor of the home, started by the next `kint` command,
used to start a worker for the same space at once beside it: two workers on one store,
mirror and journal. Now each worker holds an exclusive flock on `worker-<space16>.lock`
for its life, and a new one that finds it held waits for it, then refuses its start naming
the holder and the way out, which the supervisor answers the space's requests with.

The lock itself with real processes standing in for the holder; then the whole of it with
the real supervisor and workers: the supervisor SIGKILLed while its worker is SIGSTOPped,
and `kint status` autostarting the next one.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import signal
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import let_go_on, make_sandbox, pid_alive, wait_until, write_store
from lock_holders import end as _end, holding
from support.lifecycle_host import LifecycleHost
from support.limited_box import in_thread
from kint.paths import worker_lock_path
from kint import open_files as open_files_module
from kint.open_files import SYSTEM_FILES_HINT, WORKER_ROOM_HINT
from kint.protocol import worker_wire
from kint.protocol.worker_wire import EXIT_NO_FILES, EXIT_NO_SYSTEM_FILES, EXIT_REFUSED
from kint.supervisor.exits import ExitWatch
from kint.supervisor.settings import Settings
from kint.supervisor.timed import TimedWork
from kint.supervisor.workers import Pending, StartRefusal, WorkerHandle
from kint.supervisor.pidlock import running_pid
from kint.tenant_worker import worker_lock
from kint.tenant_worker.stop_grace import ORPHAN_EXIT_S
from kint.proc_stat import process_stopped
from kint.tenant_worker.store_sharers import worker_start
from kint.tenant_worker.worker_lock import WorkerLockHeld, hold_worker_lock

SPACE16 = "c4594b48e156226b"


def _holder(path: Path, content: str, stop: bool = False) -> subprocess.Popen:
    """A real process holding the flock on `path`, `content` written in it."""
    return holding([(path, content)], stop)


def test_the_lock_is_taken_with_the_pids_written_and_private(tmp_path):
    path = worker_lock_path(tmp_path, SPACE16)
    fd = hold_worker_lock(path, SPACE16, 4242)
    try:
        assert path.read_text() == f"{os.getpid()} 4242\n"
        assert path.stat().st_mode & 0o777 == 0o600
        assert worker_lock.read_holder(fd) == (os.getpid(), 4242)
    finally:
        os.close(fd)


def test_the_wait_ends_before_the_supervisor_would_judge_the_start_hung():
    """A worker waits for the lock before its hello: the wait (an old worker's orphan exit)
    must end, refused or served, before the supervisor's start timeout takes it for hung
    and restarts it in a loop."""
    from kint.supervisor.settings import Settings

    assert worker_lock.WAIT_S == ORPHAN_EXIT_S
    assert worker_lock.WAIT_S + 2 * worker_lock.STOPPED_FOR_S < Settings().start_timeout_s


def test_a_successor_waits_for_a_predecessor_that_is_exiting(tmp_path):
    """A recycled or restarted worker's successor may find the lock held a moment by the
    predecessor on its way out: it waits and takes it, never refused."""
    path = worker_lock_path(tmp_path, SPACE16)
    proc = _holder(path, "1 2\n")
    try:
        threading.Timer(0.5, proc.kill).start()  # its exit, a moment after the start
        fd = hold_worker_lock(path, SPACE16, 4242, wait_s=20)
        os.close(fd)
    finally:
        _end(proc)


def test_a_stopped_holder_is_refused_by_name_without_waiting_out_the_bound(tmp_path):
    path = worker_lock_path(tmp_path, SPACE16)
    proc = _holder(path, "{pid} 4243\n", stop=True)  # as a worker writes it
    try:
        began = time.monotonic()
        with pytest.raises(WorkerLockHeld) as held:
            hold_worker_lock(path, SPACE16, 4242, wait_s=60)
        assert time.monotonic() - began < 30  # not the bound: it is stopped
        assert held.value.holder == (proc.pid, 4243) and held.value.stopped
        message = str(held.value)
        assert f"another worker of space {SPACE16} still runs (pid {proc.pid})" in message
        assert "it is stopped" in message, message
        assert held.value.hint.startswith(f"`kill -CONT {proc.pid}` if it is stopped")
        # Stuck rather than stopped, it already had its SIGTERM when its supervisor died
        # (the parent-death signal): only a SIGKILL ends it.
        assert f"`kill -KILL {proc.pid}` if it is stuck" in held.value.hint
        assert path.read_text() == f"{proc.pid} 4243\n"  # the holder's words left alone
    finally:
        _end(proc)


@pytest.fixture(params=["kernel's table", "no table"])
def lock_table(request, monkeypatch):
    """Whether the kernel's table of locks names the holder (Linux's /proc/locks), or
    there is none to read, as on macOS: the lock file's own words are all there is."""
    from kint import lock_table as table

    if request.param == "no table":  # nor the lock lines of a process's open files
        monkeypatch.setattr(table, "LOCKS_TABLE", "/nonexistent/locks")
        monkeypatch.setattr(table, "PROC", "/nonexistent")
    elif not os.path.isfile(table.LOCKS_TABLE):
        pytest.skip("no kernel table of locks here")
    return request.param


def test_a_holder_the_file_does_not_name_is_refused_past_the_bound(tmp_path, lock_table):
    """A holder that wrote no pid (one that took the lock an instant ago) is waited for
    its whole bound, then refused: named by the kernel's table where there is one, else
    saying its pid is unknown, with the lsof hint."""
    path = worker_lock_path(tmp_path, SPACE16)
    proc = _holder(path, "")
    try:
        with pytest.raises(WorkerLockHeld) as held:
            hold_worker_lock(path, SPACE16, 4242, wait_s=0.3)
        assert not held.value.stopped and "did not let go within" in str(held.value)
        if lock_table == "no table":
            assert held.value.holder == (None, None)
            assert "a process whose pid the lock file does not name" in str(held.value)
            assert f"lsof {path}" in held.value.hint
        else:
            assert held.value.holder == (proc.pid, None)
            assert f"still runs (pid {proc.pid})" in str(held.value), held.value
            assert f"`kill -KILL {proc.pid}` if it is stuck" in held.value.hint
    finally:
        _end(proc)


@pytest.fixture(params=["dead", "stopped stranger"])
def stale_pid(request):
    """A pid the lock file may still name once its holder changed: a process gone since,
    or one of another program that took the pid, stopped (`sleep`, SIGSTOPped)."""
    proc = subprocess.Popen(["sleep", "120"])
    if request.param == "dead":
        _end(proc)
    else:
        os.kill(proc.pid, signal.SIGSTOP)
    try:
        yield proc.pid
    finally:
        if request.param != "dead":
            _end(proc)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="tells a kint worker by /proc")
def test_a_pid_the_lock_file_names_is_believed_only_when_a_kint_worker_has_it(
        tmp_path, stale_pid, lock_table):
    """A real worker holds the lock, its file still naming the holder before it (it took
    the lock a moment ago and has not written yet), whose pid is now no kint worker's.
    The stranger is never judged stopped nor told to `kill -KILL`. Where the kernel lists
    its locks, the holder is named by it, its supervisor unknown (the line is the holder
    before's): the refusal names it, and so does the look of kint-server
    (kint.agent_server.old_worker), counting it as old even under the supervisor the stale
    line names as the one serving. It gave the lsof hint, naming nobody, as it still does
    where there is no such table."""
    from kint.agent_server.old_worker import old_worker

    path = worker_lock_path(tmp_path, SPACE16)
    proc = _holder(path, f"{stale_pid} 4243\n")
    try:
        with pytest.raises(WorkerLockHeld) as held:
            hold_worker_lock(path, SPACE16, 4242, wait_s=1.5)
        assert not held.value.stopped
        assert f"pid {stale_pid}" not in str(held.value), held.value
        assert f"{stale_pid}`" not in held.value.hint, held.value.hint
        named = (None, None) if lock_table == "no table" else (proc.pid, None)
        assert held.value.holder == named
        if lock_table == "no table":
            assert f"lsof {path}" in held.value.hint
        else:
            assert f"`kill -KILL {proc.pid}` if it is stuck" in held.value.hint
        assert old_worker(tmp_path, SPACE16, lambda: 4243) == named
    finally:
        _end(proc)


def test_a_holder_the_kernel_names_keeps_its_own_line(tmp_path):
    """The kernel's word takes nothing from a file that names the holder itself: its
    supervisor's pid is read as before."""
    from kint.lock_table import flock_holder

    path = worker_lock_path(tmp_path, SPACE16)
    proc = _holder(path, "{pid} 4243\n")
    try:
        fd = worker_lock.open_to_look(path)
        assert fd is not None
        if os.path.isfile("/proc/locks"):
            assert flock_holder(fd) == proc.pid
        assert worker_lock.holder_closing(fd) == (proc.pid, 4243)
    finally:
        _end(proc)


@pytest.fixture
def table_reads(monkeypatch) -> list[int]:
    """Each read of the kernel's whole table of locks, counted by a spy around the real
    one (Linux, with the lock lines of a process's open files: /proc/PID/fdinfo)."""
    from kint import lock_table as table

    if not os.path.isfile(table.LOCKS_TABLE) or not os.path.isdir("/proc/self/fdinfo"):
        pytest.skip("no kernel table of locks here")
    reads: list[int] = []
    real = table.flock_holder

    def counted(fd: int) -> int | None:
        reads.append(fd)
        return real(fd)

    monkeypatch.setattr(table, "flock_holder", counted)
    return reads


def test_a_holder_its_own_line_names_is_found_without_the_whole_table(tmp_path, table_reads):
    """The kernel's table lists every lock of the box (~1 ms a read with none, 200-300 ms
    at 50,000), and each look read it whole: the supervisor's for each `starting` row of
    each status, a starting worker's ten times a second. A starting worker that has its
    own lock (the common case) is now told by its line alone, and a holder its line names
    by its own open files' lock lines: no read of the table."""
    path = worker_lock_path(tmp_path, SPACE16)
    proc = _holder(path, "{pid} 4243\n")
    try:
        assert worker_lock.waited_for(path, proc.pid) is None  # the starting worker's own
        assert worker_lock.waited_for(path, os.getpid()) == (proc.pid, 4243)
        fd = worker_lock.open_to_look(path)
        assert fd is not None and worker_lock.holder_closing(fd) == (proc.pid, 4243)
    finally:
        _end(proc)
    assert table_reads == []


def test_a_wait_for_a_holder_its_line_does_not_name_reads_the_table_once_a_second(
        tmp_path, table_reads):
    """A holder that has not written its line yet is named by the kernel's table only:
    a starting worker waiting for it read the table at each of its ten tries a second, for
    up to 13 s. Now once a second at most, the holder still named."""
    from kint.lock_table import TABLE_EVERY_S

    path = worker_lock_path(tmp_path, SPACE16)
    proc = _holder(path, "")
    try:
        began = time.monotonic()
        with pytest.raises(WorkerLockHeld) as held:
            hold_worker_lock(path, SPACE16, 4242, wait_s=2.5)
        waited = time.monotonic() - began
        assert held.value.holder == (proc.pid, None), held.value.holder
    finally:
        _end(proc)
    assert 1 <= len(table_reads) <= waited / TABLE_EVERY_S + 1, (len(table_reads), waited)


def test_a_holder_the_table_lists_as_pid_0_is_nobody(tmp_path, monkeypatch):
    """The kernel's table gives pid 0 for a holder in another pid namespace (another
    container's): no process here, never named (a refusal said `kill -KILL 0`, which
    signals the whole process group of whoever runs it). The table is a file in the
    kernel's format, written here: such a holder cannot be had in a test."""
    from kint import lock_table

    path = tmp_path / "lock"
    path.write_text("")
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        table = tmp_path / "locks"
        table.write_text(f"1: FLOCK  ADVISORY  WRITE 0 {where} 0 EOF\n")
        monkeypatch.setattr(lock_table, "LOCKS_TABLE", str(table))
        assert lock_table.flock_holder(fd) is None
        table.write_text(f"1: FLOCK  ADVISORY  WRITE 4242 {where} 0 EOF\n")
        assert lock_table.flock_holder(fd) == 4242  # the format read as the kernel's
    finally:
        os.close(fd)



def test_a_holder_of_a_lock_file_with_the_same_inode_elsewhere_is_not_named(
        tmp_path, monkeypatch):
    """The pid the lock file names, taken since by a worker of another KINT_HOME whose lock
    file, on another file system, has the same inode number: its lock line names that
    inode, and matched by it alone, that worker was named the holder, with a `kill -KILL`
    hint. Now its open file must be this lock file (device and inode, through
    /proc/PID/fd/N). Such a file cannot be made here (it takes mounting a file system), so
    that process's /proc entries are written in the kernel's format: its fdinfo's line
    naming this lock file's inode, its fd a link to another file."""
    from kint import lock_table

    path = tmp_path / "worker.lock"
    other = tmp_path / "other-home" / "worker.lock"
    other.parent.mkdir()
    path.write_text("")
    other.write_text("")
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        proc = tmp_path / "proc" / "4242"
        (proc / "fd").mkdir(parents=True)
        (proc / "fdinfo").mkdir()
        (proc / "fdinfo" / "3").write_text(
            f"pos:\t0\nflags:\t02\nmnt_id:\t1\nino:\t{st.st_ino}\n"
            f"lock:\t1: FLOCK  ADVISORY  WRITE 4242 fe:01:{st.st_ino} 0 EOF\n")
        (proc / "fd" / "3").symlink_to(other)
        monkeypatch.setattr(lock_table, "PROC", str(tmp_path / "proc"))
        assert not lock_table.holds_flock(4242, fd)
        (proc / "fd" / "3").unlink()
        (proc / "fd" / "3").symlink_to(path)
        assert lock_table.holds_flock(4242, fd)  # the same file: the line read as the kernel's
    finally:
        os.close(fd)

class _RefusalHost(LifecycleHost):
    """The supervisor's worker lifecycle (the real one) with the parts `_on_exit` reads;
    its answers are recorded. The forkserver is never ready: a restart, were one asked
    for, would only leave the space `starting`."""

    def __init__(self, home: Path) -> None:
        super().__init__(Settings())
        self.home = home
        self.exits: ExitWatch[WorkerHandle] = ExitWatch()
        self.spawner = SimpleNamespace(ready=False)
        self._awaiting_forkserver: dict = {}
        self.answered: list[tuple[str, object]] = []

    def _answer(self, handle, pending, reply) -> None:  # noqa: ANN001
        handle.pending.pop(pending.internal_id, None)
        self.answered.append((pending.internal_id, reply))


def _handle() -> WorkerHandle:
    return WorkerHandle(space_id="c4" * 32, label="t@hermes:p1", tenant="t", db="/p1.db")


def _exits_refused(host: _RefusalHost, handle: WorkerHandle, code: int = EXIT_REFUSED) -> None:
    """The space's worker, a real process, exits `code` (EXIT_REFUSED, or a start short of
    open files) with no message read, and the host handles its exit: at once, or, held
    for the worker's reason (its route open: exit_hold.py), at the hold's end."""
    proc = multiprocessing.get_context("spawn").Process(target=os._exit, args=(code,))
    proc.start()
    try:
        handle.process, handle.pid, handle.state = proc, proc.pid, "starting"
        host.exits.watch(proc.sentinel, handle)
        proc.join(30)
        host._on_exit(handle)
        if handle.held_until is not None:  # its grace over, no reason read
            host._release(handle)
    finally:
        host.exits.close()


def test_a_refusal_whose_message_is_not_read_yet_is_still_no_crash(tmp_path):
    """A worker refused its start (the lock held) and exited EXIT_REFUSED; the supervisor
    handles the exit before its `fatal` (still queued behind another worker's beat), so
    it has no message. The exit code says it was refused: the waiting request is answered
    WORKER_DOWN naming the lock file with the lsof hint, nothing restarts, no crash is
    counted. Before, it went to `_crashed`: a restart, counted towards a quarantine, and
    the late `fatal` dropped. The worker is a real process exiting with the code."""
    host, handle = _RefusalHost(tmp_path), _handle()
    handle.pending["1"] = Pending(internal_id="1", client=b"c", client_id="r1", op="status",
                                  deadline=time.monotonic() + 30, timeout_ms=30000,
                                  body=b"{}")
    _exits_refused(host, handle)
    path = worker_lock_path(tmp_path, handle.space16)
    assert handle.restarts == 0 and handle.state == "idle", (handle.restarts, handle.state)
    assert [(i, r.error) for i, r in host.answered] == [("1", "WORKER_DOWN")], host.answered
    reply = host.answered[0][1]
    assert f"another worker of the space holds its worker lock {path}" in reply.message
    assert f"lsof {path}" in reply.hint
    assert handle.last_exit == reply.message


@pytest.mark.parametrize("moved_on", [False, True], ids=["still-idle", "respawned"])
def test_a_refusal_whose_message_comes_after_the_exit_names_its_holder(tmp_path, moved_on):
    """As above, and the worker's `fatal` (which names the holder) is read after the exit
    was handled: its route retired, it was dropped, and the space's row said `held by
    nobody named` for good. With the retired worker's token and pid it now gives the row
    its reason and its holder, once; after a newer spawn of the space (`moved_on`) it is
    only logged, the row that spawn's story. (The token check is `_on_back`'s, before it
    hands a retired route's message here: tests/test_worker_late_fatal.py.)"""
    host, handle = _RefusalHost(tmp_path), _handle()
    token = worker_wire.new_token()
    handle.token, handle.route = token, worker_wire.route_for(token)
    route = handle.route
    _exits_refused(host, handle)
    bare = handle.last_exit
    record = host._retired_routes[route]
    assert record.token == token and record.pid is not None and record.unheard == bare
    if moved_on:
        handle.spawned_at = time.monotonic()  # a newer worker was started since
    late = {"kind": "fatal", "pid": record.pid, "token": token.hex(),
            "reason": "space c4c4 is held by worker 4242", "code": "WORKER_DOWN",
            "hint": "let worker 4242 finish, or end it", "holder_pid": 4242}
    host._heard_after(route, record, late, None)
    if moved_on:
        assert handle.last_exit == bare and handle.start_refused.holder_pid is None
        return
    assert handle.last_exit == late["reason"], handle.last_exit
    assert handle.start_refused == StartRefusal("WORKER_DOWN", late["hint"], 4242)
    host._heard_after(route, record, {**late, "reason": "a second copy"}, None)
    assert handle.last_exit == late["reason"]  # once


@pytest.mark.parametrize("code, hint, cause", [
    (EXIT_NO_FILES, WORKER_ROOM_HINT, "the limit it inherited, ulimit -n"),
    (EXIT_NO_SYSTEM_FILES, SYSTEM_FILES_HINT, "the system's table of them is full")],
    ids=["its-limit", "system-table"])
def test_a_start_short_of_open_files_is_busy_and_no_crash(tmp_path, code, hint, cause):
    """The worker began short of open files, its own limit's (EXIT_NO_FILES) or the
    system's table's (EXIT_NO_SYSTEM_FILES, ENFILE): the waiting request is answered BUSY
    with the hint for that cause, nothing restarts, and the space is idle with the
    refusal in its row until the next spawn. The worker is a real process exiting with
    the code."""
    host, handle = _RefusalHost(tmp_path), _handle()
    handle.pending["1"] = Pending(internal_id="1", client=b"c", client_id="r1", op="status",
                                  deadline=time.monotonic() + 30, timeout_ms=30000,
                                  body=b"{}")
    _exits_refused(host, handle, code)
    assert handle.restarts == 0 and handle.state == "idle", (handle.restarts, handle.state)
    assert [(i, r.error) for i, r in host.answered] == [("1", "BUSY")], host.answered
    reply = host.answered[0][1]
    assert reply.hint == hint and cause in reply.message, reply
    assert handle.start_refused is not None and handle.start_refused.hint == hint
    assert handle.last_exit == reply.message


def test_a_start_short_of_the_systems_files_is_forgotten_once_the_table_has_room(
        tmp_path, monkeypatch):
    """ENFILE is often brief: a refusal for it kept until the space's next request left a
    space nobody asked for again degraded (`kint supervisor status` exit 1) for the
    supervisor's life. The sweep forgets it once the system's table has room; while it is
    full, it stands. The table cannot be filled here for real (it is the whole box's): the
    sweep reads a file in /proc/sys/fs/file-nr's form instead."""
    file_nr = tmp_path / "file-nr"
    monkeypatch.setattr(open_files_module, "FILE_NR", str(file_nr))
    host, handle = _RefusalHost(tmp_path), _handle()
    host.handles = {handle.space_id: handle}
    _exits_refused(host, handle, EXIT_NO_SYSTEM_FILES)
    file_nr.write_text("1000\t0\t1010\n")  # full
    host._room_sweep()
    assert handle.start_refused is not None and handle.start_refused.hint == SYSTEM_FILES_HINT
    file_nr.write_text("1000\t0\t800000\n")
    host._room_sweep()
    assert handle.start_refused is None and handle.state == "idle"
    assert "system's table of them is full" in handle.last_exit  # the story kept


@pytest.mark.skipif(resource.getrlimit(resource.RLIMIT_NOFILE)[0] == resource.RLIM_INFINITY
                    or not os.path.isdir("/proc/self/fd"),
                    reason="no open-file limit to raise, or no /proc to count them in")
def test_a_start_short_of_files_under_its_limit_is_forgotten_once_the_limit_rose(tmp_path):
    """The worker inherited the supervisor's limit and ran out under it: the refusal
    stands while that limit does, and goes once it rose (set for real on this process,
    and put back), without a request for the space."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    host, handle = _RefusalHost(tmp_path), _handle()
    host.handles = {handle.space_id: handle}
    lowered = min(soft - 1, len(os.listdir("/proc/self/fd")) + 128)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
    try:
        _exits_refused(host, handle, EXIT_NO_FILES)
        host._room_sweep()
        assert handle.start_refused is not None and handle.start_refused.limit == lowered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    host._room_sweep()
    assert handle.start_refused is None and handle.state == "idle"


def test_a_refusal_at_a_quarantines_retry_keeps_the_quarantine_as_it_was(tmp_path):
    """The space was quarantined (crashes) and its retry's worker is refused the lock. The
    quarantine stands, its backoff neither lifted (every request then started a worker at
    once, the crashes it is for never known to be mended) nor doubled (a refusal is no
    crash): the next retry is one backoff from the refusal."""
    host, handle = _RefusalHost(tmp_path), _handle()
    before = time.monotonic()
    handle.backoff_s, handle.retry_started_at = 4.0, before  # the quarantine's retry
    _exits_refused(host, handle)
    assert handle.state == "quarantined" and handle.backoff_s == 4.0, handle
    assert handle.quarantined_until is not None and handle.quarantined_until >= before + 4.0
    assert handle.restarts == 0


def _workers_of(home: Path) -> list[int]:
    """Pids of the kint workers (named kint.proc_name.WORKER) of `home`, from /proc."""
    mine = f"KINT_HOME={home}".encode()
    found = []
    for pid in (int(name) for name in os.listdir("/proc") if name.isdigit()):
        if worker_start(pid) is None:  # not a kint worker, or gone
            continue
        try:
            if mine in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                found.append(pid)
        except OSError:
            continue
    return sorted(found)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts workers in /proc")
def test_a_new_supervisor_starts_no_worker_beside_a_stopped_one_its_predecessor_left(
        tmp_path):
    """The supervisor is SIGKILLed while its worker is SIGSTOPped. `kint status` starts a
    new supervisor and asks for the space: refused WORKER_DOWN naming the old worker and
    how to end it, no second worker of the space running, the refusal as the space's last
    exit in `kint supervisor status`. Continued, the old worker exits by itself (its
    supervisor gone), and the next request is served by a new one. Before, the new
    supervisor's worker served beside the stopped one."""
    sb = make_sandbox(tmp_path / "machine")
    write_store(sb.sibyl_db)
    sb.start()
    old = None
    try:
        old = sb.call("status", sb.sibyl_db)["worker"]["pid"]
        os.kill(old, signal.SIGSTOP)
        killed = running_pid(sb.kint_home)
        os.kill(killed, signal.SIGKILL)
        sb.wait_for(lambda: not pid_alive(killed), what="the killed supervisor's end")

        out = sb.kint("status")
        assert out.returncode != 0, out.stdout
        said = out.stdout + out.stderr
        assert "WORKER_DOWN" in said, said
        assert f"another worker of space {sb.row(sb.sibyl_db)['space']}" in said, said
        assert f"still runs (pid {old})" in said and "it is stopped" in said, said
        assert f"kill -CONT {old}" in said, said
        new_supervisor = running_pid(sb.kint_home)
        assert new_supervisor not in (None, killed)
        assert _workers_of(sb.kint_home) == [old]  # no second worker of the space
        status = json.loads(sb.kint("supervisor", "status", "--json").stdout)
        row = next(r for r in status["spaces"] if r["store"] == str(sb.sibyl_db))
        assert row["pid"] is None and f"(pid {old})" in row["last_exit"], row
        assert row["restarts"] == 0, row  # not a crash: nothing restarted in a loop
        # Yet the space serves nothing: degraded, the refusal and its holder in its row,
        # where it once read a plain "idle" and the command exited 0.
        assert row["start_refused"] == {"code": "WORKER_DOWN", "holder_pid": old,
                                        "hint": row["start_refused"]["hint"]}, row
        assert f"kill -CONT {old}" in row["start_refused"]["hint"], row
        assert status["degraded"] is True
        text = sb.kint("supervisor", "status")
        assert text.returncode == 1, text.stdout + text.stderr
        assert f"idle (held by pid {old})" in text.stdout, text.stdout
        assert f"kill -CONT {old}" in text.stdout, text.stdout

        os.kill(old, signal.SIGCONT)
        assert wait_until(lambda: not pid_alive(old), timeout=30), "the old worker stays"
        # Gone, it is no longer named, nor the space degraded, before any request: the
        # supervisor's sweep finds the lock free (its pid may be another process's soon).
        def refusal_gone() -> bool:
            row = next(r for r in sb.sup_status()["spaces"] if r["store"] == str(sb.sibyl_db))
            return row["start_refused"] is None
        assert wait_until(refusal_gone, timeout=10), sb.sup_status()
        assert json.loads(sb.kint("supervisor", "status", "--json").stdout)["degraded"] is False
        served = sb.call("status", sb.sibyl_db, timeout_s=30)
        assert served["worker"]["pid"] not in (None, old)
        assert _workers_of(sb.kint_home) == [served["worker"]["pid"]]
    finally:
        let_go_on(old)
        sb.shutdown()


def test_the_holder_a_starting_worker_waits_for_is_read_from_the_lock(tmp_path):
    """What the supervisor reads for a request timed out while its worker starts: the
    holder, unless the lock is free or the starting worker's own; a stopped holder is said
    stopped, with the 1 s after which the start is refused."""
    path = worker_lock_path(tmp_path, SPACE16)
    assert worker_lock.waited_for(path, os.getpid()) is None  # no file: nobody waits
    proc = _holder(path, "{pid} 4243\n", stop=True)
    try:
        assert worker_lock.waited_for(path, proc.pid) is None  # the worker's own lock
        holder = worker_lock.waited_for(path, os.getpid())
        assert holder == (proc.pid, 4243), holder
        assert wait_until(lambda: process_stopped(proc.pid), timeout=10)  # SIGSTOP landed
        said, hint = worker_lock.waiting_words(path, holder, 0.5)
        assert f"(pid {proc.pid}) holds and is stopped" in said, said
        assert "refused once it has been seen stopped for 1s" in said, said
        assert hint.startswith(f"`kill -CONT {proc.pid}`"), hint  # at once, stopped
        assert "kill -KILL" not in hint, hint
    finally:
        _end(proc)
    assert worker_lock.waited_for(path, os.getpid()) is None  # let go


def test_a_request_timed_out_while_the_worker_waits_for_the_lock_names_the_holder(tmp_path):
    """An old worker of the space (a real process holding the lock as one does, neither
    stopped nor gone) keeps the new worker waiting up to WAIT_S before its refusal names
    it. A request whose deadline comes first was answered TIMEOUT "the worker is
    starting", naming nobody; now it names the lock, the holder's pid and the refusal's
    way out. `kint supervisor status` showed the space only `starting` meanwhile; its row
    names the holder too (STATE `starting (waits for pid N)`, `--json`'s `waits_for`).
    Once the holder is gone, the waiting worker takes the lock and serves."""
    from kint.client import KintError
    from kint.spaces import space_id

    sb = make_sandbox(tmp_path / "machine")
    write_store(sb.sibyl_db)
    # The first request waits out the forkserver's warm-up (Sandbox.warmed): the worker is
    # spawned, not held back by its imports.
    sb.start()
    path = worker_lock_path(sb.kint_home, space_id(sb.label(sb.sibyl_db))[:16])
    holder = _holder(path, "{pid} 4243\n")
    started = None
    try:
        # The worker started by a first request, the one with the short deadline is sent
        # once the worker waits for the lock (its row names the holder, for WAIT_S): sent
        # first, a loaded box's start (a fork, the worker's own setup before the lock) could
        # eat its 2 s, and its TIMEOUT said "the worker is starting", rightly, naming nobody.
        started, _ = in_thread(lambda: sb.call("status", sb.sibyl_db, timeout_s=60))
        sb.wait_for(lambda: any(row["waits_for"] for row in sb.sup_status()["spaces"]),
                    timeout=30, what="the new worker waiting for the lock")
        with pytest.raises(KintError) as err:
            # 3 s: the supervisor's TIMEOUT comes 0.75 s before the client gives up
            # (client_bound.request_ms), where 2 s's 0.5 s was missed once by a like request
            # on a loaded box; the rest below still fits in WAIT_S.
            sb.call("status", sb.sibyl_db, timeout_s=3)
        assert err.value.code == "TIMEOUT", err.value
        message, hint = err.value.message, err.value.hint or ""
        assert f"it waits for the space's worker lock {path}" in message, message
        assert f"another worker of the space (pid {holder.pid}) holds" in message, message
        assert "refused if it has not let go within 13s of the worker's start" in message
        # Most likely finishing its op within its grace: not told to be killed (that is the
        # refusal's word, once the wait is out), but when to try again.
        assert "it should exit within " in hint and "run the command again then" in hint, hint
        assert "kill -KILL" not in hint, hint
        row = sb.row(sb.sibyl_db)
        assert row["state"] == "starting", row  # well inside WAIT_S (13 s)
        assert row["waits_for"] == {"pid": holder.pid, "supervisor_pid": 4243}, row
        shown = sb.kint("supervisor", "status").stdout
        assert f" starting (waits for pid {holder.pid}) " in shown, shown
        _end(holder)
        served = sb.call("status", sb.sibyl_db, timeout_s=30)
        assert served["worker"]["pid"] not in (None, holder.pid), served
        row = sb.row(sb.sibyl_db)
        assert row["restarts"] == 0 and row["waits_for"] is None, row
    finally:
        _end(holder)
        if started is not None:
            started.join(60)
        sb.shutdown()


def test_the_way_out_while_the_holder_may_still_be_finishing_its_op(tmp_path):
    """An old worker not stopped is most likely finishing its op within its grace (it exits
    within ORPHAN_EXIT_S of its supervisor): the TIMEOUT's hint says within how long, and
    to run the command again then; past that bound, `kill -KILL` as the refusal says."""
    path = worker_lock_path(tmp_path, SPACE16)
    holder = worker_lock.Holder(os.getpid(), 4243)  # this process: live, not stopped
    _, hint = worker_lock.waiting_words(path, holder, 3.2)
    assert hint.startswith(f"it should exit within {int(ORPHAN_EXIT_S - 3)}s"), hint
    assert "run the command again then" in hint and "kill -KILL" not in hint, hint
    _, hint = worker_lock.waiting_words(path, holder, ORPHAN_EXIT_S + 1)
    assert f"`kill -KILL {os.getpid()}` if it is stuck" in hint, hint
    _, hint = worker_lock.waiting_words(path, worker_lock.Holder(None, None), 1.0)
    assert hint == worker_lock.unnamed_holder_hint(path), hint


def test_a_fifo_at_the_lock_path_is_refused_without_blocking_the_look(tmp_path):
    """A FIFO where a worker lock goes (nothing of kint's makes one) blocked every look's
    open until a writer came: the supervisor looks from its loop (a request's TIMEOUT while
    its worker starts, the sweep over a refused start), kint-server before it sends a
    restore again. Now the look opens without blocking and refuses what is not a regular
    file: unknown to the supervisor, CORRUPT_STATE naming it to kint-server."""
    from kint.agent_server.old_worker import old_worker
    from kint.client import KintError

    path = worker_lock_path(tmp_path, SPACE16)
    os.mkfifo(path, 0o600)
    said: dict = {}

    def look() -> None:
        said["held_at"] = worker_lock.held_at(path)
        said["waited_for"] = worker_lock.waited_for(path, os.getpid())
        try:
            old_worker(tmp_path, SPACE16, lambda: None)
        except KintError as err:
            said["old_worker"] = err

    thread = threading.Thread(target=look, daemon=True)
    thread.start()
    thread.join(10)
    blocked = thread.is_alive()
    for _ in range(100):  # a blocked open lets go once a writer comes: one each look
        if not thread.is_alive():
            break
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # no reader yet (ENXIO)
            pass
        thread.join(0.1)
    assert not blocked, "a look at the lock blocked on the FIFO"
    assert said["held_at"] is None and said["waited_for"] is None, said
    refused = said["old_worker"]
    assert refused.code == "CORRUPT_STATE", refused
    assert f"{path} cannot be opened (is not a regular file)" in refused.message, refused


def test_requests_timed_out_together_cost_one_look_at_the_lock(tmp_path, monkeypatch):
    """A burst of requests for a space whose worker waits for the lock, timed out in one
    turn, each named the holder after a look of its own (an open, a flock try, a /proc
    read, on the supervisor's loop): now one look a space a turn, the same words for each.
    A real holder; the supervisor's own part (`TimedWork._expire`) on a stand-in host, the
    look counted by a spy around the real one."""
    from kint.supervisor import timed

    looks: list[Path] = []

    def counted(path: Path, pid: int):  # noqa: ANN202
        looks.append(path)
        return worker_lock.waited_for(path, pid)

    monkeypatch.setattr(timed, "waited_for", counted)
    handle = WorkerHandle(space_id=SPACE16 * 4, label="t", tenant="t", db="d",
                          state="starting", pid=os.getpid(), spawned_at=time.monotonic())
    host = _ExpireHost(tmp_path, handle)
    now = time.monotonic()
    for n in range(3):
        pending = Pending(f"r{n}", b"c", f"c{n}", "status", now - 1, 2000, b"{}")
        handle.pending[pending.internal_id] = pending
        host._deadlines.append((now - 1, handle.space_id, pending.internal_id))
    path = worker_lock_path(tmp_path, SPACE16)
    holder = _holder(path, "{pid} 4243\n")
    try:
        host._expire(now)
    finally:
        _end(holder)
    assert looks == [path], looks
    assert len(host.answered) == 3 and not handle.pending
    for reply in host.answered:
        assert f"(pid {holder.pid}) holds" in reply.message, reply


class _ExpireHost(TimedWork):
    """What `TimedWork._expire` reads of the supervisor: its home, handles, deadlines and
    room queue; a reply read off the back socket (none here) and an answer, recorded."""

    def __init__(self, home: Path, handle: WorkerHandle) -> None:
        self.home = home
        self.handles = {handle.space_id: handle}
        self._deadlines: list = []
        self._room_wanted: list = []
        self._evicting: set = set()
        self.back = None
        self._on_back = None
        self.answered: list = []

    def _drain(self, sock, on) -> None:  # noqa: ANN001
        pass

    def _answer(self, handle: WorkerHandle, pending: Pending, reply) -> None:  # noqa: ANN001
        handle.pending.pop(pending.internal_id)
        self.answered.append(reply)
