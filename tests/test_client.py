"""The client's cheap looks at its supervisor (issue 15, item 4): the pid file kept open
between calls (`HolderWatch`), the socket folder resolved once per supervisor, and the
wait done as a receive with a timeout. What they must keep: the answer is about the pid
file a supervisor holds now, a supervisor that dies between two calls of one client is
replaced by the next call, and one that never answers is given up on at the deadline.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from bare_worker import bound_router
from conftest import pid_alive, write_store
from kint.client import Client, SupervisorUnavailable
from kint.client_bound import CLIENT_GRACE_S, bounded
from kint.paths import ensure_private_dir, run_dir
from kint.socket_paths import FRONT_SOCKET, prepare_socket_dir, socket_dir
from kint.supervisor.pidlock import PID_FILE, HolderWatch, running_pid


def _hold(path: Path, words: str) -> int:
    """A stand-in supervisor's claim: the pid file opened, locked and written, as
    `run_foreground` does (flock is per open file, so this process's other descriptors
    see it held)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.ftruncate(fd, 0)
    os.write(fd, f"{words}\n".encode())
    return fd


def test_the_kept_pid_file_follows_a_replaced_one(tmp_path):
    home = tmp_path / "kint"
    ensure_private_dir(run_dir(home))
    path = run_dir(home) / PID_FILE
    watch = HolderWatch(home)
    try:
        assert watch.pid() is None  # no file yet
        first = _hold(path, "111 serving")
        assert watch.pid() == 111 == running_pid(home)
        # `run/` cleaned under a running supervisor, and a second one claims the home: the
        # file at the path is a new one, and only its holder counts.
        path.unlink()
        second = _hold(path, "222 serving")
        assert watch.pid() == 222 == running_pid(home)
        os.close(first)
        assert watch.pid() == 222
        os.close(second)  # the second one exits: its lock goes with it
        assert watch.pid() is None and running_pid(home) is None
        path.unlink()
        assert watch.pid() is None
        third = _hold(path, "333")  # starting, not serving yet: still the holder
        assert watch.pid() == 333
        os.close(third)
    finally:
        watch.close()


def test_the_kept_pid_file_is_read_again_when_its_holder_rewrites_it(tmp_path):
    """The watch parses the file again only when its bytes change: a supervisor that
    took the same file (same inode) over from one that exited is named, not the last."""
    home = tmp_path / "kint"
    ensure_private_dir(run_dir(home))
    path = run_dir(home) / PID_FILE
    watch = HolderWatch(home)
    try:
        first = _hold(path, "111")
        assert watch.pid() == 111
        os.pwrite(first, b"111 serving\n", 0)
        assert watch.pid() == 111
        os.close(first)
        assert watch.pid() is None
        second = _hold(path, "222 serving")  # the same file, truncated and written again
        assert watch.pid() == 222 == running_pid(home)
        os.ftruncate(second, 0)
        os.pwrite(second, b"junk\n", 0)
        assert watch.pid() == -1  # held, unreadable
        os.close(second)
    finally:
        watch.close()


def test_one_client_outlives_its_supervisor_and_the_next_call_starts_another(sandbox,
                                                                             monkeypatch):
    """The same autostarting client, across a supervisor killed between two calls: the
    next call finds nobody holding the (kept) pid file and starts a new supervisor.
    `sent_to` names, after each call, the real supervisor its request went to: the one
    the call itself started (no pid was there before it), and the one that held a request
    it never answered (stopped), which is what a memory_pull's restore watches."""
    for name in ("HOME", "KINT_HOME", "HERMES_HOME"):
        monkeypatch.setenv(name, sandbox.env[name])
    # The supervisors it starts never recycle a worker for its memory: the last calls ask
    # that the same worker answers, and a recycle between them is a stop this test does not
    # test (its status-only worker holds ~7.4 MiB of its own, under the 22 MiB default:
    # this keeps the premise should that grow).
    monkeypatch.setenv("KINT_WORKER_RECYCLE_MIB", "0")
    db = str(write_store(sandbox.sibyl_db))
    where = {"tenant": sandbox.tenant, "db": db, "space": sandbox.label(sandbox.sibyl_db)}
    with Client(sandbox.kint_home, autostart=True) as client:
        assert client.sent_to is None and running_pid(sandbox.kint_home) is None
        first_worker = client.call("status", **where, timeout_s=30)["worker"]["pid"]
        first = running_pid(sandbox.kint_home)
        assert first and first > 0
        assert client.sent_to == first
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while pid_alive(first) or running_pid(sandbox.kint_home) == first:
            assert time.monotonic() < deadline, "the killed supervisor still holds its lock"
            time.sleep(0.05)
        answer = client.call("status", **where, timeout_s=30)
        second = running_pid(sandbox.kint_home)
        assert second and second not in (first, -1)
        assert client.sent_to == second
        assert answer["worker"]["pid"] != first_worker
        # And it keeps answering on the new one.
        assert client.call("status", **where, timeout_s=30)["worker"]["pid"] == \
            answer["worker"]["pid"]
        os.kill(second, signal.SIGSTOP)
        try:
            with pytest.raises(SupervisorUnavailable):
                client.call("status", **where, timeout_s=0.3)
            assert client.sent_to == second
        finally:
            os.kill(second, signal.SIGCONT)


def test_a_new_socket_of_the_same_client_gets_its_receive_timeout(tmp_path):
    """The client sets its socket's receive timeout only when a wait needs another than
    the one already set. A socket made again (after `close`, or for a supervisor bound in
    another folder) has none: it must be set there too, or the wait would be a receive
    that blocks past every deadline and every liveness look. Here the first call is
    answered (its wait set the usual one-second timeout), then the socket is made again
    and the next call is not answered: it must still give up at its deadline."""
    from kint.protocol.envelope import ok_reply
    from kint.protocol.server_codec import decode_request, encode_reply

    home = tmp_path / "kint"
    holder = _hold(ensure_private_dir(run_dir(home)) / PID_FILE, f"{os.getpid()} serving")
    folder, _ = prepare_socket_dir(home)
    front = bound_router(f"ipc://{folder / FRONT_SOCKET}")
    done = threading.Event()

    def answer_the_first_only() -> None:
        answered = False
        while not done.is_set():
            if front.poll(100):
                identity, body = front.recv_multipart()
                if not answered:
                    rid = decode_request(body).id
                    front.send_multipart([identity, encode_reply(ok_reply(rid, {}))])
                    answered = True

    outcomes: list[BaseException | None] = []

    def call(client: Client) -> None:
        try:
            client.call("sup.ping", timeout_s=1.0)
            outcomes.append(None)
        except BaseException as err:  # noqa: BLE001 - recorded for the assertion
            outcomes.append(err)

    listener = threading.Thread(target=answer_the_first_only, daemon=True)
    listener.start()
    try:
        with Client(home, autostart=False) as client:
            for _ in range(2):  # the second call is on a socket made again
                caller = threading.Thread(target=call, args=(client,), daemon=True)
                caller.start()
                caller.join(30)
                assert not caller.is_alive(), "the call did not give up at its deadline"
                client.close()
        assert outcomes[0] is None
        assert isinstance(outcomes[1], SupervisorUnavailable), outcomes
    finally:
        done.set()
        listener.join(5)
        front.close()
        os.close(holder)


# A bound on a wait that ends at its 3 s deadline, generous for a loaded 2-core box: what
# it tells apart is a wait that never ends.
SILENT_WAIT_MAX_S = 30


@contextmanager
def _silent_supervisor(tmp_path: Path) -> Iterator[tuple[Path, list[bytes]]]:
    """A socket that takes requests and never answers, held by a live 'supervisor' (this
    process): the home, and the requests it heard."""
    home = tmp_path / "kint"
    holder = _hold(ensure_private_dir(run_dir(home)) / PID_FILE, f"{os.getpid()} serving")
    folder, _ = prepare_socket_dir(home)
    silent = bound_router(f"ipc://{folder / FRONT_SOCKET}")
    heard: list[bytes] = []
    done = threading.Event()

    def listen() -> None:
        while not done.is_set():
            if silent.poll(100):
                heard.append(silent.recv_multipart()[-1])

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    try:
        yield home, heard
    finally:
        done.set()
        listener.join(5)
        silent.close()
        os.close(holder)


def test_a_silent_supervisor_is_given_up_on_at_the_bound_the_refusal_names(tmp_path):
    """The client waits out the call's bound, not forever, and checks liveness once a
    second meanwhile without mistaking the live holder for a dead one. The bound is one
    deadline taken as the call begins: the refusal names the bound the caller gave, where it
    named (and waited) the request's own plus a 2 s grace, and the request asks the
    supervisor to answer TIMEOUT a grace sooner, so its answer comes first."""
    with _silent_supervisor(tmp_path) as (home, heard):
        with Client(home, autostart=False) as client:
            started = time.monotonic()
            with pytest.raises(SupervisorUnavailable) as caught:
                client.call("sup.ping", timeout_s=1.0)
            took = time.monotonic() - started
    # The deadline ended the wait (a dead holder is reported in other words), not before
    # it, and not forever: SILENT_WAIT_MAX_S is far past it.
    assert caught.value.message == "no answer from the supervisor within 1s"
    assert 1.0 <= took < SILENT_WAIT_MAX_S, took
    assert len(heard) == 1
    sent = json.loads(heard[0])["timeout_ms"]
    # What was left of the bound when it went out, less a quarter of it (CLIENT_GRACE_S is
    # the most a longer bound keeps back).
    assert 0 < sent <= 1000 - 1000 * min(CLIENT_GRACE_S, 0.25), sent


def test_a_request_leaves_by_pyzmqs_own_send_as_the_same_bytes(tmp_path, monkeypatch):
    """Every call sends one frame: the client hands it to the backend's send, without the
    checks `zmq.Socket.send` adds for DRAFT sockets (0.6 against 2.5 us hot a call). A
    call and a cast still reach the supervisor whole, as their requests encode."""
    import zmq

    from kint.protocol.server_codec import decode_request

    sugar: list[object] = []
    original = zmq.Socket.send

    def recording(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        sugar.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(zmq.Socket, "send", recording)
    with _silent_supervisor(tmp_path) as (home, heard):
        with Client(home, autostart=False) as client:
            with pytest.raises(SupervisorUnavailable):
                client.call("sup.ping", timeout_s=1.0)
            client.cast("status", tenant="t", db="/m.db", args={"chain": True})
            deadline = time.monotonic() + SILENT_WAIT_MAX_S
            while len(heard) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
    assert [decode_request(b).op for b in heard] == ["sup.ping", "status"]
    assert decode_request(heard[1]).cast and decode_request(heard[1]).args == {"chain": True}
    assert sugar == []


def test_a_bounded_block_is_one_deadline_for_every_call_in_it(tmp_path):
    """A tool call that asks twice (kint-server's connect: a status, then the connect)
    waits its bound in all: the second call gets what the first left, and says the
    block's bound."""
    with _silent_supervisor(tmp_path) as (home, heard):
        with Client(home, autostart=False) as client, bounded(1.5):
            with pytest.raises(SupervisorUnavailable) as first:
                client.call("sup.ping", timeout_s=1.0)
            with pytest.raises(SupervisorUnavailable) as second:
                client.call("sup.ping", timeout_s=30.0)
    assert first.value.message == "no answer from the supervisor within 1s"
    assert second.value.message.startswith("no answer from the supervisor within 1.5s"), \
        second.value.message
    asked = [json.loads(frame)["timeout_ms"] for frame in heard]
    assert len(asked) in (1, 2) and 0 < asked[0] <= 750, asked
    assert all(ms < 500 for ms in asked[1:]), asked  # what was left, never 30 s


def test_a_client_follows_its_supervisor_to_a_new_socket_folder(tmp_path):
    """A long KINT_HOME: the sockets live in a short folder under the temp folder. When
    the next supervisor finds that folder open to others and binds in a fresh one, a
    client that talked to the first one connects again in the new folder: its next call
    is answered there, not waited out on the old path (where anyone could now listen)."""
    from test_supervisor_socket_dir import _long_sandbox

    sb = _long_sandbox(tmp_path)
    db = str(write_store(sb.sibyl_db))
    where = {"tenant": sb.tenant, "db": db, "space": sb.label(sb.sibyl_db)}
    first_folder = second_folder = None
    try:
        assert sb.kint("supervisor", "start").returncode == 0
        first_folder = socket_dir(sb.kint_home)
        with Client(sb.kint_home, autostart=False) as client:
            assert client.call("status", **where, timeout_s=30)["label"] == where["space"]
            assert sb.kint("supervisor", "stop").returncode == 0
            os.chmod(first_folder, 0o777)  # anyone could put a socket there now
            assert sb.kint("supervisor", "start").returncode == 0
            second_folder = socket_dir(sb.kint_home)
            assert second_folder != first_folder
            answer = client.call("status", **where, timeout_s=10)
            assert answer["label"] == where["space"]
            assert running_pid(sb.kint_home) not in (None, -1)
    finally:
        sb.shutdown()
        for folder in (first_folder, second_folder):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)


def test_starting_a_supervisor_waits_no_longer_than_the_calls_bound(tmp_path, monkeypatch):
    """The start counts against the call's bound (`bounded`, `timeout_s`): a call with a
    short bound hands the start only what is left of it, rather than the start's own 30 s
    and a refusal after them; a call with a longer bound hands it no more than the start's
    own wait (autostart.START_WAIT_S, read at the call)."""
    import kint.supervisor.autostart as autostart

    asked: list[float] = []

    def no_supervisor(home, ping, wait_s=30.0, *, on_demand=True):
        assert on_demand  # a call's start is on demand: it leaves out the call's switches
        asked.append(wait_s)
        raise autostart.SupervisorNotReachable("did not answer", "start it")

    monkeypatch.setattr(autostart, "ensure_running", no_supervisor)
    home = tmp_path / "kint"
    ensure_private_dir(run_dir(home))
    with Client(home) as client:
        with pytest.raises(SupervisorUnavailable):
            client.call("sup.ping", timeout_s=1.5)
        with bounded(0.5), pytest.raises(SupervisorUnavailable):
            client.call("sup.ping", timeout_s=20.0)
        monkeypatch.setattr(autostart, "START_WAIT_S", 1.0)
        with pytest.raises(SupervisorUnavailable):
            client.call("sup.ping", timeout_s=20.0)
    assert len(asked) == 3 and 0 < asked[0] <= 1.5 and 0 < asked[1] <= 0.5, asked
    assert 0 < asked[2] <= 1.0, asked


def test_every_look_for_a_supervisor_ends_by_the_waits_deadline(tmp_path):
    """`ensure_running` is handed what is left of a call's bound. Its first look asked the
    socket for a fixed half second, and the wait's deadline was taken only after it, so a
    call with 0.3 s left waited 0.5 s on its first look alone and then the whole 0.3 s
    again: its refusal came past the bound it names. Each look now waits at most what is
    left of the one deadline."""
    import kint.supervisor.autostart as autostart

    wait_s = 0.3
    looks: list[float] = []

    def unanswered(timeout_s: float) -> bool:  # a supervisor that never answers
        looks.append(timeout_s)
        return False

    with _silent_supervisor(tmp_path) as (home, _heard):
        with pytest.raises(autostart.SupervisorNotReachable):
            autostart.ensure_running(home, unanswered, wait_s=wait_s)
    assert looks and all(0 <= look <= wait_s for look in looks), looks
