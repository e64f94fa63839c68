"""The front door (kint/supervisor/front_door.py, kint/front_closed.py) at a supervisor's
stop and start, and the times in its note: review27d's findings on door27.

- a supervisor that steps down (its `run/` removed, another started there) leaves the
  next one's socket file and note alone, one started there as its door closes too;
- under `ulimit -n 50` the start is not refused by its own door while the worker
  forkserver warms up;
- a request whose socket never connected to a stopping supervisor is refused at once,
  and two stops at once both end well;
- the stopping refusal tells an agent to call again, and a `--watch` says it stops;
- a served connection is told from another's on a clock nobody steps.

The tests that need the door closed at one exact moment close it as the door does (its
note written, the socket file moved aside) from the test, the supervisor held (SIGSTOP)
meanwhile: that moment cannot be had from outside otherwise. Each says so.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import SUPPORT, make_sandbox, pid_alive
from kint import render
from kint.agent_server.results import agent_error
from kint.client import KintError
from kint.front_closed import CLOSED_SOCKET, NOTE, STOPPING_HINT, FrontClosed, boot_time
from kint.paths import run_dir
from kint.seconds_text import seconds_text
from kint.socket_paths import FRONT_SOCKET, socket_dir
from kint.supervisor.ownership import file_id
from kint.supervisor.pidlock import PID_FILE, running_pid
from kint.supervisor.settings import STOP_BOUND_S
from support.closed_by_hand import closed_by_hand
from support.limited_box import in_thread, start_limited
from support.successor import start_successor

LIMIT = 64


def _log(sb) -> str:
    return (sb.kint_home / "supervisor.log").read_text()


def test_a_supervisor_that_steps_down_leaves_the_next_ones_socket_alone(tmp_path):
    """Supervisor A held (SIGSTOP), its `run/` removed, B started there; A, continued, sees
    its pid lock gone and steps down. Before, its stop closed "its" door: it moved B's
    socket file aside, and unlinked it as it exited; B bound again, and every client B had
    lost its connection."""
    sb = make_sandbox(tmp_path)
    pid_a = sb.start()
    try:
        os.kill(pid_a, signal.SIGSTOP)
        try:
            shutil.rmtree(sb.kint_home / "run")
            pid_b = sb.start()
            front = socket_dir(sb.kint_home) / FRONT_SOCKET
            socket_b = file_id(front)
            assert pid_b != pid_a and socket_b is not None
        finally:
            os.kill(pid_a, signal.SIGCONT)
        sb.wait_for(lambda: not pid_alive(pid_a), timeout=30, what="A stepped down")
        assert "stepping down" in _log(sb)
        assert file_id(front) == socket_b
        assert not (front.parent / NOTE).exists() and not (front.parent / CLOSED_SOCKET).exists()
        out = sb.kint("supervisor", "status")
        assert out.returncode == 0, out.stdout + out.stderr
        assert running_pid(sb.kint_home) == pid_b
        assert "bound it again" not in _log(sb)
    finally:
        sb.shutdown()


@pytest.mark.parametrize("link", ["links", "fails", "stays"])
def test_a_door_closing_for_the_stop_leaves_a_socket_file_bound_after_its_look(tmp_path, link):
    """Supervisor A steps down (its pid file removed), its door closing for the stop held
    after its look at whose socket file is at the path and before its move (the note
    written: KINT_TEST_HOLD_DOOR, tests/support/run_supervisor.py) while B takes the home
    and binds its own file there. A, going on, leaves B's file where it is. Before, A
    moved B's file aside: B's new clients found no socket until B's check bound it again
    (front_door_stop.py `_move_aside`).
    A's link back of B's file failing (`fails`: ENOSPC, as on a full disk, the fault
    KINT_TEST_FAIL_LINK injects: a full disk cannot be had here), it is put back by a
    rename; that failing too (`stays`), A says so and removes the aside name, and B's
    check binds its socket again. Before, the failure escaped the move: B's file stayed
    aside as a stray `CLOSED_SOCKET`, nothing at the path, and A said it could not close
    its door."""
    door = tmp_path / "hold-door"
    reached = tmp_path / "hold-door.reached"
    faults = {"links": {}, "fails": {"KINT_TEST_FAIL_LINK": "link"},
              "stays": {"KINT_TEST_FAIL_LINK": "link,rename"}}[link]
    sb = make_sandbox(tmp_path / "machine", KINT_TEST_HOLD_DOOR=str(door), **faults)
    pid_a = None
    try:
        sb.start_entitled()
        pid_a = running_pid(sb.kint_home)
        door.touch()
        (run_dir(sb.kint_home) / PID_FILE).unlink()
        sb.wait_for(reached.exists, what="A's door held after its look, its note written")
        front = socket_dir(sb.kint_home) / FRONT_SOCKET
        start_successor(sb, "KINT_TEST_HOLD_DOOR")  # B's own stop not held
        sb.wait_for(lambda: running_pid(sb.kint_home) not in (None, pid_a)
                    and sb.client().ping(0.5), what="B serving")
        pid_b = running_pid(sb.kint_home)
        socket_b = file_id(front)
        assert pid_b != pid_a and socket_b is not None and pid_alive(pid_a)
        door.unlink()
        sb.wait_for(lambda: not pid_alive(pid_a), timeout=30, what="A's stop to end")
        assert not (front.parent / CLOSED_SOCKET).exists()
        log = _log(sb)
        assert "another supervisor's socket file now" in log
        assert "could not close the front socket" not in log
        assert ("could not be linked back" in log) == (link == "fails"), log
        if link == "stays":
            assert "could not be put back" in log, log
            sb.wait_for(lambda: "bound it again" in _log(sb), what="B's socket bound again")
            assert file_id(front) not in (None, socket_b)
        else:
            assert file_id(front) == socket_b
            assert "bound it again" not in log
        with sb.client() as client:
            assert client.ping_answer(5.0)["pid"] == pid_b
    finally:
        door.unlink(missing_ok=True)
        sb.shutdown()
        if pid_a is not None and pid_alive(pid_a):
            os.kill(pid_a, signal.SIGKILL)


def test_a_start_under_ulimit_50_is_not_refused_by_its_own_door(tmp_path):
    """`kint supervisor start` under `ulimit -n 50`. Before, the door's margin held all of
    the forkserver warm-up's descriptors even once the warm-up had opened them: it closed
    on the command's own wait, which was refused BUSY (49 to 52, every time)."""
    sb = make_sandbox(tmp_path)
    try:
        start_limited(sb, 50)  # and its worker forkserver warmed up, the door open
        assert "new clients are refused" not in _log(sb)
    finally:
        sb.shutdown()


def test_a_request_on_a_socket_that_never_connected_to_a_stopping_supervisor_is_refused(
        tmp_path):
    """A client whose socket was made after the stop began (its file moved aside): its
    request can never be delivered. Refused at once, saying it was not sent. Before, it
    was taken for one the supervisor had let in, and waited out the whole stop, or here
    its whole deadline ("no answer"). The stop's door is closed by the test, the
    supervisor held, as its stop closes it."""
    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        folder = socket_dir(sb.kint_home)
        now = time.time()
        with closed_by_hand(pid, folder, FrontClosed(pid, 30, LIMIT, 1, now, now - 5, True)):
            with sb.client() as client, pytest.raises(KintError) as refused:
                client.call("sup.ping", timeout_s=15)
        err = refused.value
        assert err.code == "SUPERVISOR_UNAVAILABLE", err
        assert "is stopping" in err.message and "(sup.ping was not sent)" in err.message, err
    finally:
        sb.shutdown()


@pytest.mark.parametrize("when", ["after", "before"])
def test_a_stop_that_meets_another_stop_ends_well(tmp_path, when):
    """`kint supervisor stop` looked at the supervisor, then another stop began: after its
    ping answered, before its `sup.stop` went out; or before its ping
    (tests/support/stop_begins_after_ping.py times it so). The supervisor stops all the
    same: exit 0. Before, the call was refused (or the supervisor exited before answering
    it), or the ping went unanswered and the stop said "is stopping": exit 2."""
    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        out = subprocess.run([sys.executable, str(SUPPORT / "stop_begins_after_ping.py"),
                              when],
                             env=sb.env, text=True, capture_output=True, timeout=120,
                             stdin=subprocess.DEVNULL)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "supervisor stopped" in out.stdout, out.stdout
        assert not pid_alive(pid) and running_pid(sb.kint_home) is None
    finally:
        sb.shutdown()


def test_the_stopping_refusal_tells_an_agent_to_call_again():
    """A stop ends by itself, and the next call starts a new supervisor. Before, the
    agent was told to stop and tell the human; then (review27g 3) to call again "in a
    moment", for a stop that takes up to 20 s (it said up to a minute)."""
    closed = FrontClosed(4242, 30, LIMIT, 1, time.time(), time.time() - 5, True)
    err = agent_error("memory_push", KintError(
        closed.code, closed.message() + " (push was not sent)", closed.hint))
    assert closed.hint == STOPPING_HINT
    assert err.hint is not None and not err.hint.startswith("stop and tell"), err.hint
    assert "call memory_push again in a minute" in err.hint, err.hint
    # The stop's bound in the words, from the graces that make it (20 s by default).
    assert f"({seconds_text(STOP_BOUND_S)} at most while it runs, its workers first)" in \
        err.hint, err.hint


def test_a_watch_says_the_supervisor_stops_not_a_count_of_its_files():
    """`supervisor status --watch` connected before the stop: its closed note is the
    stop's. Before, it showed "new clients refused: 0 of the supervisor's 0 open files"."""
    closed = FrontClosed(4242, 0, 0, 1, time.time(), time.time() - 5, True)
    text = render.supervisor_status_text({
        "supervisor": {"pid": 4242, "uptime_s": 5, "kint_home": "/h",
                       "front": {"closed": closed._asdict(), "episodes": 0, "clients": 1},
                       "started_with": []},
        "spaces": []})
    assert "stopping: new clients refused until it has stopped" in text, text
    assert "open files" not in text, text


@pytest.mark.skipif(boot_time() == 0.0, reason="no clock since boot here (CLOCK_BOOTTIME)")
def test_a_served_connection_is_told_by_a_clock_nobody_steps(tmp_path):
    """The supervisor's wall clock an hour ahead of the client's (the client's clock
    stepped back since the supervisor took its home): its note's `started` is after the
    client's answer. On the clock since boot the answer came after the start: the client's
    connection is served, its next request waits for its answer. Before, the wall clocks
    were compared and a kint-server the supervisor had served was refused BUSY. The door
    is closed by the test, the supervisor held, as the door closes it."""
    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        started_boot = boot_time()
        folder = socket_dir(sb.kint_home)
        with sb.client() as client:
            client.call("sup.ping", timeout_s=10)
            ahead = time.time() + 3600
            with closed_by_hand(pid, folder, FrontClosed(pid, 60, LIMIT, 40, ahead + 1, ahead,
                                                         False, boot_time(), started_boot)):
                thread, said = in_thread(lambda: client.call("sup.ping", timeout_s=30))
                thread.join(2.5)  # past two liveness looks, with the door closed
                assert not said, said
            thread.join(30)
            assert said.get("answer") is not None, said
    finally:
        sb.shutdown()


@pytest.mark.parametrize("holds_s, exits", [(0.5, True), (30.0, False)])
def test_an_unanswered_supervisor_that_exits_at_once_is_no_silent_one(tmp_path, holds_s, exits):
    """The end of another stop: the supervisor removed its closed-door note and moved
    socket, and holds its pid lock only until its process ends. A stop whose ping that
    door refused, and that then found no note, called it "runs but does not answer" (CI's
    run at 3e1ab11, test_a_stop_that_meets_another_stop_ends_well[before]); it is given
    EXITING_GRACE_S to exit. The holder here is a process of the test's own that takes the
    real pid lock (kint.supervisor.pidlock) and lets it go after `holds_s`: one that keeps
    it is still not taken for gone."""
    from kint.commands.stop_wait import EXITING_GRACE_S, exits_within

    home = tmp_path / "kint"
    (home / "run").mkdir(parents=True, mode=0o700)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
         "from kint.supervisor.pidlock import hold_pid_lock\n"
         "hold_pid_lock(Path(sys.argv[1])); print('held', flush=True)\n"
         "time.sleep(float(sys.argv[2]))", str(home), str(holds_s)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert running_pid(home) == holder.pid
        assert (holds_s < EXITING_GRACE_S) is exits
        assert exits_within(home, holder.pid, EXITING_GRACE_S) is exits
    finally:
        holder.kill()
        holder.wait(30)
