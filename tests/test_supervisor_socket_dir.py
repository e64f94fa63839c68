"""Other users cannot block or intercept the sockets (issue 14, item 9, the supervisor's
part).

When KINT_HOME is too long for a unix socket path, the sockets go to a short folder under
the system temp folder, at a name anyone can predict. Planted there first, by this user
through a symlink or by another user as a folder of their own with a listener in it, it
is refused: the supervisor binds in a fresh private folder, records it in run/socket-dir,
and the CLI talks to it there; nothing reaches the planted folder.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import SYSTEM_TMPDIR, make_sandbox
from kint.socket_paths import socket_dir
from other_user import SYSTEM_PYTHON

NOBODY = 65534


@pytest.fixture(autouse=True)
def _system_tmp(monkeypatch):
    """The short folder where the system's temp folder is, which every user can enter:
    the run's own temp folder (tests/conftest.py) is this user's alone."""
    monkeypatch.setattr(tempfile, "tempdir", SYSTEM_TMPDIR)


def _long_sandbox(tmp_path: Path):
    sb = make_sandbox(tmp_path / ("d" * 60) / ("e" * 60), TMPDIR=SYSTEM_TMPDIR)
    assert len(str(sb.kint_home / "run" / "workers.sock")) > 107
    return sb


def _assert_private(folder: Path) -> None:
    st = folder.lstat()
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid(), folder
    assert stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)


def _served_from_a_private_folder(sb, planted: Path) -> Path:
    out = sb.kint("supervisor", "start")  # a CLI call that finds no supervisor starts one
    assert out.returncode == 0, out.stdout + out.stderr
    assert sb.kint("supervisor", "status").returncode == 0
    used = socket_dir(sb.kint_home)
    assert used != planted
    _assert_private(used)
    assert (used / "kint.sock").exists()
    assert (sb.kint_home / "run" / "socket-dir").read_text().strip() == str(used)
    return used


def test_a_symlink_planted_at_the_short_socket_folder_is_not_followed(tmp_path):
    sb = _long_sandbox(tmp_path)
    planted = socket_dir(sb.kint_home)  # where the sockets would go: predictable
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o777)
    planted.symlink_to(target)
    used = None
    try:
        used = _served_from_a_private_folder(sb, planted)
        assert list(target.iterdir()) == []
    finally:
        sb.shutdown()
        planted.unlink()
        if used is not None:
            shutil.rmtree(used, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0 or SYSTEM_PYTHON is None,
                    reason="needs root (to act as another user) and a system python3")
def test_a_short_socket_folder_another_user_made_first_is_refused(tmp_path):
    sb = _long_sandbox(tmp_path)
    planted = socket_dir(sb.kint_home)
    planted.mkdir(mode=0o777)
    os.chown(planted, NOBODY, NOBODY)
    # The other user listens where kint.sock would be, and reports any connection.
    listener = ("import socket,sys\n"
                "s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)\n"
                "print('LISTENING', flush=True)\n"
                "while True:\n"
                "    c, _ = s.accept(); print('CONNECTED', flush=True)\n")
    spy = subprocess.Popen([SYSTEM_PYTHON, "-c", listener, str(planted / "kint.sock")],
                           user=NOBODY, stdout=subprocess.PIPE, text=True)
    used = None
    try:
        assert spy.stdout.readline().strip() == "LISTENING"
        used = _served_from_a_private_folder(sb, planted)
        # Time let pass on purpose, as what is checked is that nothing happens: a connection
        # made to the planted socket during the calls above is accepted and reported by the
        # spy in its own time, which it gets before it is killed.
        time.sleep(0.5)
    finally:
        spy.kill()
        heard = spy.communicate(timeout=10)[0]
        sb.shutdown()
        shutil.rmtree(planted, ignore_errors=True)
        if used is not None:
            shutil.rmtree(used, ignore_errors=True)
    assert "CONNECTED" not in heard, "a kint process connected to another user's socket"


def test_a_short_socket_folder_of_our_own_left_open_is_not_used(tmp_path):
    sb = _long_sandbox(tmp_path)
    planted = socket_dir(sb.kint_home)
    planted.mkdir(mode=0o700)
    os.chmod(planted, 0o777)  # anyone could have put anything in it meanwhile
    used = None
    try:
        used = _served_from_a_private_folder(sb, planted)
        assert list(planted.iterdir()) == []
    finally:
        sb.shutdown()
        shutil.rmtree(planted, ignore_errors=True)
        if used is not None:
            shutil.rmtree(used, ignore_errors=True)


# Connects to the socket named in argv[1] (relative to the folder it runs in), sends a ZMTP 3
# greeting, and says whether a ZeroMQ peer greeted back or the connection was closed on it.
_KNOCK = (
    "import socket,sys\n"
    "s=socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])\n"
    "try:\n"
    "    s.sendall(b'\\xff'+bytes(8)+b'\\x7f\\x03\\x00'+b'NULL'+bytes(16)+b'\\x00'+bytes(31))\n"
    "    got = s.recv(64)\n"
    "except (BrokenPipeError, ConnectionResetError, socket.timeout):\n"
    "    got = b''\n"
    "print('GREETED' if got[:1] == b'\\xff' else 'CLOSED', flush=True)\n")


@pytest.mark.skipif(os.geteuid() != 0 or SYSTEM_PYTHON is None,
                    reason="needs root (to act as another user) and a system python3")
def test_another_user_is_turned_away_even_where_the_folder_was_loosened(tmp_path):
    """The socket folder's 0700 keeps other users out; a folder loosened under a running
    supervisor (a `chmod -R` of the home) must not let them in: the supervisor has ZeroMQ
    close every connection whose peer the kernel says is another user, on both sockets."""
    from kint.socket_paths import BACK_SOCKET, FRONT_SOCKET

    sb = make_sandbox(tmp_path / "machine")
    try:
        sb.start()
        folder = socket_dir(sb.kint_home)
        for name in (FRONT_SOCKET, BACK_SOCKET):
            os.chmod(folder / name, 0o777)
            # This user is greeted: what the check below reads is ZeroMQ's answer.
            ours = subprocess.run([SYSTEM_PYTHON, "-c", _KNOCK, name], cwd=folder,
                                  capture_output=True, text=True, timeout=30)
            assert ours.stdout.strip() == "GREETED", ours
            assert _knocked_as_another_user(folder, name) == "CLOSED", name
        os.chmod(folder, 0o700)  # the client talks only through a private folder
        assert sb.call("status", sb.sibyl_db)["worker"]["pid"] > 0  # this user is served
    finally:
        sb.shutdown()


def _knocked_as_another_user(folder: Path, name: str) -> str:
    """What another user's knock on `name` hears with `folder` loosened to 0711. The
    supervisor makes its own folder private again within a second (its housekeeping), and
    a knock that comes after that is refused by the folder itself (EACCES), which is not
    the check this test is about: such a knock is made again with the folder loosened
    anew, a few times, so that a slow box still reaches ZeroMQ's answer. `cwd` is entered
    before the user is changed: the folders above it stay shut."""
    for _ in range(10):
        os.chmod(folder, 0o711)
        theirs = subprocess.run([SYSTEM_PYTHON, "-c", _KNOCK, name], cwd=folder,
                                user=NOBODY, capture_output=True, text=True, timeout=30)
        if "PermissionError" not in theirs.stderr:
            return theirs.stdout.strip() or theirs.stderr
    raise AssertionError(f"the folder was made private again before every knock on {name}")


def _socket_fds() -> dict[int, int]:
    """This process's socket descriptors, each with its open flags (/proc's fdinfo)."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            with open(f"/proc/self/fdinfo/{name}") as fh:
                flags = next(line for line in fh if line.startswith("flags:"))
        except OSError:
            continue
        out[int(name)] = int(flags.split()[1], 8)
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self/fdinfo"), reason="reads /proc's fdinfo")
def test_a_connection_once_accepted_is_not_inherited_by_a_program_a_client_runs(tmp_path):
    """The peer checks are made as a connection is accepted (the kernel's credentials are
    those of the process that connected). What keeps an accepted connection from reaching
    another program afterwards is that ZeroMQ opens every descriptor close-on-exec: a
    kint-server, or any client, that runs a program (a harness, a hook) hands it none, so
    only a process of this user that passes its descriptor on on purpose could; see
    kint/supervisor/peer.py."""
    import zmq

    folder = tmp_path / "s"
    folder.mkdir(mode=0o700)
    before = set(_socket_fds())
    ctx = zmq.Context()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    try:
        router.bind(f"ipc://{folder / 'kint.sock'}")
        dealer.connect(f"ipc://{folder / 'kint.sock'}")
        dealer.send(b"hello")
        assert router.poll(20_000) and router.recv_multipart()[1] == b"hello"
        opened = {fd: flags for fd, flags in _socket_fds().items() if fd not in before}
        assert len(opened) >= 3, opened  # the listener, and both ends of the connection
        assert all(flags & os.O_CLOEXEC for flags in opened.values()), opened
    finally:
        router.close(linger=0)
        dealer.close(linger=0)
        ctx.term()
