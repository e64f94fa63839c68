"""kint.pid_file_lock: the one way the supervisor's `run/supervisor.pid` and setup's
`setup.lock` are taken (a 0600 file, never through a link, an exclusive flock, the holder's
pid written in it). A starting supervisor tries a lock a reader's look holds for a few
seconds, and refuses one another process holds as its own at once; a second setup refuses
at once, naming the holder's pid; the supervisor's start lock and a space's head lock wait
for their flock, whoever holds it, until their deadline (flock_by). Those refusals, as users
see them, are in test_supervisor_lifecycle.py, test_pid_lock_loser.py and
test_setup_failures.py."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from types import SimpleNamespace

import pytest

from kint import pid_file_lock
from kint.harnesses.failures import SetupError
from kint.harnesses.setup_lock import LOCK_NAME, setup_lock
from kint.paths import run_dir
from kint.pid_file_lock import PidFileHeld, flock_by, hold_pid_file
from kint.supervisor.pidlock import PID_FILE, hold_pid_lock


def held_by_another(path, pid: bytes = b"4242\n") -> int:
    """The file open and flock'ed on a descriptor of its own, as another process holds it
    (flock locks belong to the open file, so this conflicts within one process too)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.pwrite(fd, pid, 0)
    return fd


def test_a_held_lock_is_refused_at_once_with_its_holders_pid_or_a_look_waited_for(
        tmp_path, monkeypatch):
    """Held as another's own (exclusive), the lock is refused at once, with a wait too: a
    starting supervisor that waited for a running one to let go took the home from a
    `kint supervisor stop` of it (test_pid_lock_loser.py). Held by a reader's look
    (shared, as a client's status check holds the pid file), it is waited for."""
    path = tmp_path / "x.lock"
    other = held_by_another(path)

    def no_pause(seconds: float) -> None:
        raise AssertionError("waited for a holder that holds the lock as its own")

    try:  # the module's clock kept, its pause refused: a wait would be a retry
        monkeypatch.setattr(pid_file_lock, "time",
                            SimpleNamespace(monotonic=time.monotonic, sleep=no_pause))
        for wait_s in (0.0, 60.0):
            with pytest.raises(PidFileHeld) as held:
                hold_pid_file(path, wait_s=wait_s)
            assert held.value.pid == 4242
        monkeypatch.undo()
    finally:
        os.close(other)
    other = os.open(path, os.O_RDONLY)
    fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a look, held
    try:
        got: list[int] = []
        waiter = threading.Thread(target=lambda: got.append(hold_pid_file(path, wait_s=60)))
        waiter.start()
        assert waiter.is_alive()  # still trying: the look holds it
    finally:
        os.close(other)
    waiter.join(timeout=60)
    assert got, "the lock was not taken once it was let go"
    try:
        assert path.read_text() == f"{os.getpid()}\n"
        assert oct(path.stat().st_mode & 0o777) == "0o600"
    finally:
        os.close(got[0])


def test_both_locks_write_the_pid_and_refuse_a_link(tmp_path):
    """The supervisor's pid file and the setup lock are the same kind of file: the pid and
    a newline, and neither is taken through a link (a file elsewhere would be truncated
    and written; the supervisor's used to follow one)."""
    home = tmp_path / "home"
    run = run_dir(home)
    run.mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    fd = hold_pid_lock(home)
    try:
        assert (run / PID_FILE).read_text() == f"{os.getpid()}\n"
    finally:
        os.close(fd)
    with setup_lock(home):
        assert (home / LOCK_NAME).read_text() == f"{os.getpid()}\n"

    elsewhere = tmp_path / "someone-elses-file"
    elsewhere.write_text("keep me")
    for link in (run / PID_FILE, home / LOCK_NAME):
        link.unlink()
        link.symlink_to(elsewhere)
    with pytest.raises(OSError):
        hold_pid_lock(home)
    with pytest.raises(SetupError) as refused:
        with setup_lock(home):
            pass
    assert refused.value.code == "CORRUPT_STATE"
    assert str(refused.value).endswith(f"{home / LOCK_NAME} is a symlink")
    assert elsewhere.read_text() == "keep me"


def test_a_flock_is_waited_for_only_while_it_is_held(tmp_path):
    """flock_by (the pid file, the start lock and the head lock) tries again only while
    another holder has the lock: a flock that fails otherwise (here a closed descriptor)
    raises at once, where the start lock and the head lock tried it until their deadline
    and then blamed another kint process for holding it."""
    path = tmp_path / "some.lock"
    held = held_by_another(path)
    fd = os.open(path, os.O_RDWR)
    try:
        assert flock_by(fd, 0.0, 0.01) is False
        fcntl.flock(held, fcntl.LOCK_UN)
        assert flock_by(fd, 0.0, 0.01) is True
    finally:
        os.close(fd)
        os.close(held)
    with pytest.raises(OSError):  # not held: no False once the deadline has passed
        flock_by(fd, time.monotonic() + 2.0, 0.01)


def test_what_runs_before_the_file_names_its_holder_runs_with_the_lock_held(tmp_path):
    """A starting supervisor removes what a killed one left of its closed front door
    (kint.front_closed.clear_left_behind) with the lock held and before the file names it:
    a client that finds the file naming the new pid (in a container, often the dead one's)
    never reads the old note as the new supervisor's. (test_front_door's end-to-end test
    polled that window; on a loaded box it once saw the note between the pid write and the
    removal.) The file names nobody meanwhile: not the new holder, nor the dead one, whose
    line is emptied as the lock is taken (kept, it was read as the new holder's last words
    were that one killed in the step: tests/test_pid_lock_stale.py). A failing step lets
    the lock go."""
    path = run_dir(tmp_path) / PID_FILE
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_text("4242\n")  # the dead holder's line
    seen: list[tuple[str, bool]] = []

    def look() -> None:
        probe = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
            held = False
        except BlockingIOError:
            held = True
        finally:
            os.close(probe)
        seen.append((path.read_text(), held))

    fd = hold_pid_lock(tmp_path, before_named=look)
    try:
        assert seen == [("", True)], seen
        assert path.read_text() == f"{os.getpid()}\n"
    finally:
        os.close(fd)

    def fail() -> None:
        raise OSError("the step failed")

    with pytest.raises(OSError):
        hold_pid_file(path, before_named=fail)
    os.close(held_by_another(path))  # let go: taken again at once
