"""A test's supervisor stopped for good, even one held (SIGSTOP) or wedged: a sandbox's own
stop (`stop_supervisor`, Sandbox.shutdown's), and the run's last sweep of every supervisor
still running under its own temporary folders (`stop_left_under`, the controller's, at the
end of the session).

An xdist worker that died mid-way (no fixture's clean-up run), or a test that made a
sandbox outside a fixture or a `finally` and then failed or timed out, left its supervisor
running, and a held one stayed held: nothing of the run stopped it, and it outlived the
run with its workers. A held supervisor also never answers `sup.stop`, so a sandbox's stop
waited the call's whole bound, then killed the supervisor alone and left its workers.

Only a home's own supervisor is ever signalled: the process holding the lock on the home's
pid file (kint.supervisor.pidlock) whose command line or environment names that KINT_HOME
(read from /proc: a test's helper holding the lock with a pid file that names another
process is left alone, by a sandbox's stop as by the sweep). The sweep looks only at homes
under the run's own folders (a --basetemp given is the run's alone: a second run given it
while the first runs is refused as it starts, support/basetemp_lock.py), and where there
is no /proc signals nothing; a sandbox's stop there kills the pid alone, as it always did.
Its process group is signalled only when it leads one (started in a session of its own, as
the suite's and `kint supervisor start`'s supervisors are): a supervisor a test runs in
the foreground, in the test's own group, is signalled alone. A developer's real
supervisor has its KINT_HOME outside these folders, and is never looked at.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from kint.client import Client, KintError
from kint.paths import run_dir
from kint.supervisor.pidlock import PID_FILE, running_pid

# How long the run's last sweep waits for a left supervisor's normal stop: it has nothing
# left to finish for a test (a sandbox's own stop waits what Sandbox.shutdown always did).
SWEEP_CALL_S = 10.0
# How long a stop waits for the pid lock to be let go after `sup.stop`, and for the
# supervisor's group to be gone after its SIGKILL.
LET_GO_S = 10.0
_PROC = Path("/proc")


def stop_supervisor(home: Path, call_s: float = 60.0, let_go_s: float = LET_GO_S) -> None:
    """Stop the supervisor of `home` as `kint supervisor stop` does (`sup.stop`, which
    answers once every worker has stopped, then its pid lock let go), having continued it
    and its workers first (a held process answers nothing); if it has not ended within
    `let_go_s` after the call, SIGKILL to its group (`_kill_group`). A supervisor that
    leads its group is waited for until the whole group is gone (where /proc tells a zombie
    apart): its lock is let go before the process has ended, and its forkserver after.

    Only the home's own supervisor is signalled: one whose process names `home`
    (`_names`, as the sweep's `left_under` asks). The pid its pid file says is whatever
    the lock's holder wrote, and a test's helper may hold the lock and name another
    process: one that is not the home's gets the call alone, never a signal. Where there
    is no /proc to tell, the pid alone is killed if it keeps the lock, as Sandbox.shutdown
    always did."""
    pid = running_pid(home)
    if pid is None:
        return
    proc = _PROC.is_dir()
    ours = proc and pid > 0 and _names(pid, home)
    group = ours and _leads_group(pid)  # asked while it holds the lock: this home's
    if ours:
        _signal_group(pid, signal.SIGCONT)
    try:
        with Client(home, autostart=False) as client:
            client.call("sup.stop", timeout_s=call_s)
    except KintError:
        pass  # gone already, or wedged: the lock below settles it
    deadline = time.monotonic() + let_go_s
    while running_pid(home) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    still = running_pid(home)
    if still is not None and still > 0:  # still holding its lock: alive
        if not proc:
            _signal_group(still, signal.SIGKILL, group=False)
        elif _names(still, home):
            _kill_group(still)
    elif group:  # its id is not another's while one of it lives; a zombie (the test's
        # own child, unreaped) is told apart from the living in /proc
        deadline = time.monotonic() + let_go_s
        while group_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if group_alive(pid):
            _kill_group(pid, group=True)


def left_under(root: Path) -> list[tuple[Path, int]]:
    """(KINT_HOME, pid) of every supervisor running under `root` whose process names that
    KINT_HOME: folders' symlinks are not followed, so no home outside `root` is reached (a
    `supervisor.pid` that is a symlink is read where it points: the process it names is
    still one naming the home under `root`). Empty where there is no /proc to read a
    process's own words from (the identity check)."""
    if not _PROC.is_dir() or not root.is_dir():
        return []
    found = []
    for folder, _dirs, files in os.walk(root):
        here = Path(folder)
        if PID_FILE not in files or here != run_dir(here.parent):
            continue
        home = here.parent
        try:
            pid = running_pid(home)
        except OSError:  # a pid file no supervisor could have made (a symlink loop): none
            continue
        if pid is not None and pid > 0 and _names(pid, home):
            found.append((home, pid))
    return found


def stop_left_under(*roots: Path, call_s: float = SWEEP_CALL_S) -> list[int]:
    """Stop every supervisor of this run still running under `roots` (`left_under`; a
    root inside another is walked once), and its workers, whatever state a test left
    them in. Returns the pids it found and asked to stop (`stop_supervisor`)."""
    walked = sorted({root.absolute() for root in roots}, key=lambda root: len(root.parts))
    outer = [root for i, root in enumerate(walked)
             if not any(root.is_relative_to(other) for other in walked[:i])]
    stopped = []
    for root in outer:
        for home, pid in left_under(root):
            stop_supervisor(home, call_s=call_s)
            stopped.append(pid)
    return stopped


def alive(pid: int) -> bool:
    """Whether `pid` is a process not yet ended (a zombie, ended and not yet reaped by the
    test that started it, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    state = _stat(pid)
    return state is None or state[0] != "Z"


def _names(pid: int, home: Path) -> bool:
    """Whether process `pid`'s command line (a word, or `--home=` it) or environment
    (KINT_HOME) names `home`. A relative path is read against the process's own folder
    (/proc/PID/cwd), as the process itself reads it: a test's supervisor started in its
    machine's folder with `--home kint` (tests/support/run_supervisor.py takes one) names
    that home, and the same word said in another folder names that folder's."""
    here = _PROC / str(pid)
    try:
        said = (here / "cmdline").read_bytes().split(b"\0") + \
            (here / "environ").read_bytes().split(b"\0")
    except OSError:
        return False
    try:
        cwd = os.readlink(here / "cwd")
    except OSError:  # its folder unread: only a whole path names a home
        cwd = None
    paths = {os.path.normpath(path) for path in (home, home.absolute(), home.resolve())}
    for word in said:
        for prefix in (b"", b"--home=", b"KINT_HOME="):
            if word.startswith(prefix) and len(word) > len(prefix):
                path = os.fsdecode(word[len(prefix):])
                if os.path.isabs(path) or cwd is not None:
                    if os.path.normpath(os.path.join(cwd or "/", path)) in paths:
                        return True
    return False


def _leads_group(pid: int) -> bool:
    """Whether `pid` leads its process group, so that the group (its forkserver and
    workers) is its own to signal, never the test's that started it."""
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def _signal_group(pid: int, sig: signal.Signals, group: bool | None = None) -> None:
    """`sig` to `pid`'s group when it leads one (`group`: known already, its leader maybe
    ended), else to `pid` alone."""
    try:
        if _leads_group(pid) if group is None else group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _kill_group(pid: int, group: bool | None = None) -> None:
    """SIGCONT then SIGKILL to the supervisor `pid`'s group (its forkserver and workers
    with it), and wait up to LET_GO_S for every one of them to be gone."""
    group = _leads_group(pid) if group is None else group
    _signal_group(pid, signal.SIGCONT, group)
    _signal_group(pid, signal.SIGKILL, group)
    deadline = time.monotonic() + LET_GO_S
    while time.monotonic() < deadline and (group_alive(pid) if group else alive(pid)):
        time.sleep(0.05)


def group_alive(pgid: int) -> bool:
    """Whether any process not yet ended is in group `pgid` (where there is no /proc,
    whether the group can still be signalled)."""
    if not _PROC.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    return bool(group_members(pgid))


def group_members(pgid: int) -> list[int]:
    """The processes not yet ended in group `pgid`, read from /proc."""
    members = []
    for entry in os.listdir(_PROC):
        if entry.isdigit():
            state = _stat(int(entry))
            if state is not None and state[1] == pgid and state[0] != "Z":
                members.append(int(entry))
    return members


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of `pid` from /proc/PID/stat, or None where unread. Read as
    bytes: the command's name is any bytes a process gave itself (one cut mid-character
    is not UTF-8), and a sandbox's shutdown reads every process on the box."""
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2:].split()  # after the command's name, whatever it is
    return fields[0].decode("ascii"), int(fields[2])
