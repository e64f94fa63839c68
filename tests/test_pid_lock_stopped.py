"""A supervisor stopped by a signal in its start's first moments (a service manager's stop,
a Ctrl-C, a closed terminal), before it hands the stop signals to the supervisor it builds,
with a real process: its pid file says `PID stopped` as it ends, so a start that lost the
pid lock to it reads a stop, not a death in the start, and starts none in its place
(pidlock.let_go_starting; tests/test_pid_lock_loser.py shows that start given each file).
Before, the signal's default action ended it with the file naming its pid alone, read as
"died starting", and a command's on-demand start served the home after `systemctl stop`.
How it ends: as `--foreground` (the signal's own end; through the `kint` command a Ctrl-C
says `interrupted`, exit 130), as the daemon (one line of stderr saying which signal, where
SIGINT left a traceback), and as PID 1 of a pid namespace (a container's: its own
default-action signal dropped, it exits 128 + the signal).

The supervisor is held in that span at an event (tests/support/run_supervisor_start_held.py
prints `held` there and waits for its stdin), never a guessed time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SUPPORT, wait_until
from kint.client_errors import STOPPED_STARTING_HINT
from kint.paths import run_dir
from kint.proc_stat import read_stat
from kint.supervisor.autostart import DAEMON_STDERR, _last_words
from kint.supervisor.pidlock import PID_FILE, holder, let_go_starting
from kint.supervisor.start_refusals import start_ended


STOP_SIGNALS = pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                                       ids=["SIGTERM", "SIGINT", "SIGHUP"])


def _held_start(sandbox, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    """The sandbox's supervisor started held in its start (`args` to the support script),
    its command line after `prefix` (unshare's)."""
    return subprocess.Popen(
        [*prefix, sys.executable, str(SUPPORT / "run_supervisor_start_held.py"), "--home",
         str(sandbox.kint_home), *args],
        env=sandbox.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)


def _stopped_there(proc: subprocess.Popen[str], sig: int, pid: int | None = None,
                   named: int | None = None) -> str:
    """Send `sig` to the held start `proc` (to `pid`, its supervisor's, when that is
    another process), once its pid file names it (`named`: the pid it writes, its own by
    default), and return its stderr once it ended, its file saying it was stopped."""
    named = proc.pid if named is None else named
    assert proc.stdout.readline().strip() == "held", proc.communicate(timeout=60)
    pid_file = run_dir(Path(proc.args[proc.args.index("--home") + 1])) / PID_FILE
    assert pid_file.read_text().split() == [str(named)]  # the premise: named, starting
    os.kill(proc.pid if pid is None else pid, sig)
    _out, err = proc.communicate(timeout=60)
    assert pid_file.read_text() == f"{named} stopped\n", err
    return err


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.communicate(timeout=60)


@STOP_SIGNALS
def test_a_supervisor_stopped_in_its_start_says_so(sandbox, sig):
    """The signal ends the supervisor as its default action does (killed by it), and its
    pid file says it was stopped: no later start takes it for one that died starting."""
    home = sandbox.kint_home
    proc = _held_start(sandbox)
    try:
        err = _stopped_there(proc, sig)
        assert proc.returncode == -sig, (proc.returncode, err)
        # Ctrl-C ends it as before the handler: a KeyboardInterrupt (the CLI's `interrupted
        # (Ctrl-C)`, exit 130; here, with no CLI around it, Python's own end by SIGINT),
        # where the handler's kill of itself ended it with no word.
        assert ("KeyboardInterrupt" in err) == (sig == signal.SIGINT), err
        assert holder(home) is None
        assert not let_go_starting(home)
    finally:
        _stop(proc)


@STOP_SIGNALS
def test_a_daemon_stopped_in_its_start_says_so_in_one_line(sandbox, sig):
    """The daemon (`python -m kint.supervisor`, its own `main`), whose stderr is
    run/supervisor.stderr, says in one line which signal ended it, and ends by it: a
    `kill -INT` left a KeyboardInterrupt traceback there, read as a crash's (and as its
    start's `exited with code -2 before it answered: KeyboardInterrupt`, its last words
    kept in supervisor.stderr.1), and a SIGTERM or SIGHUP said nothing at all.
    The start that spawned it (autostart) says it was stopped as it started, by which
    signal, with the hint to run the command again, where it said `exited with code -2
    before it answered: kint: SIGINT ended the supervisor ...` with the hint to watch a
    `--foreground` start (review37e S2): its refusal read here from the daemon's real pid
    file and exit code, as the start reads them once it is gone."""
    home = sandbox.kint_home
    proc = _held_start(sandbox, "--as", "daemon")
    try:
        err = _stopped_there(proc, sig)
        assert proc.returncode == -sig, (proc.returncode, err)
        assert err == (f"kint: {sig.name} ended the supervisor as it started, before it "
                       "served\n"), err
        assert not let_go_starting(home)
        refused = start_ended(home, proc.pid, proc.returncode)
        assert refused is not None
        assert str(refused) == (f"no supervisor runs for {home}: the one started here (pid "
                                f"{proc.pid}) was stopped by {sig.name} as it started"), refused
        assert refused.hint == STOPPED_STARTING_HINT
        # Its line, read back into a start's refusal, without its own `kint: `.
        (run_dir(home) / DAEMON_STDERR).write_text(err)
        assert _last_words(home) == (f": {sig.name} ended the supervisor as it started, "
                                     "before it served")
    finally:
        _stop(proc)


def test_a_ctrl_c_of_start_foreground_in_its_start_says_interrupted(sandbox):
    """`kint supervisor start --foreground` (the `kint` command's own entry) stopped by a
    Ctrl-C in its start says `interrupted (Ctrl-C)` and exits 130, as docs/commands.md's
    exit table promises every command, its pid file saying it was stopped: what the daemon's
    one line must not take from it (a pin: it held before)."""
    proc = _held_start(sandbox, "--as", "cli")
    try:
        err = _stopped_there(proc, signal.SIGINT)
        assert proc.returncode == 130, (proc.returncode, err)
        assert err.strip().splitlines() == ["kint: error: interrupted (Ctrl-C) [INTERRUPTED]",
                                            "hint: run the command again"], err
    finally:
        _stop(proc)


def _unshare_pid1() -> tuple[str, ...] | None:
    """The command that runs a process as PID 1 of a new pid namespace, as a container's
    init (a user namespace too, so no root is needed), where this box lets a user make one;
    else None."""
    prefix = ("unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc")
    try:
        said = subprocess.run([*prefix, sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return prefix if said.returncode == 0 and said.stdout.strip() == "1" else None


def _child_of(pid: int) -> int | None:
    """The one child of process `pid` (unshare's, which runs as PID 1 inside), or None."""
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := read_stat(int(name))) is not None and stat.ppid == pid:
            return int(name)
    return None


def test_a_supervisor_as_pid_1_stopped_in_its_start_exits(sandbox):
    """As PID 1 of a pid namespace (a container started without an init), the kernel drops
    the signal the handler sends itself with the default action, and the start would go on
    serving after a `docker stop`: it exits 128 + the signal instead (143), its file saying
    it was stopped. The signal comes from outside the namespace, as a container runtime's
    does (a handler is installed, so it is delivered). Skipped where no user may make a
    pid namespace (`unshare`: Linux, unprivileged user namespaces allowed)."""
    prefix = _unshare_pid1()
    if prefix is None:
        pytest.skip("no unprivileged pid namespace here (unshare --user --pid)")
    proc = _held_start(sandbox, prefix=prefix)
    inside = None
    try:
        inside = wait_until(lambda: _child_of(proc.pid), timeout=60)
        assert inside, proc.communicate(timeout=60)
        err = _stopped_there(proc, signal.SIGTERM, pid=inside, named=1)
        assert proc.returncode == 128 + signal.SIGTERM, (proc.returncode, err)
        assert not let_go_starting(sandbox.kint_home)
    finally:
        if inside and proc.poll() is None:  # it went on: never left serving, unshare's
            os.kill(inside, signal.SIGKILL)  # pipes held open by it
        _stop(proc)


# A process that runs a supervisor in itself, as `kint supervisor start --foreground` and
# code that embeds kint do, and says, once it has stopped, which stop signals' handlers it
# did not get back ("-": none; the exit code first).
_RUN_THEN_SAY_SIGNALS = """
import signal, sys
from pathlib import Path
from kint.supervisor.autostart import STOP_SIGNALS, run_foreground

before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
code = run_foreground(Path(sys.argv[1]))
kept = [signal.Signals(sig).name for sig in STOP_SIGNALS if signal.getsignal(sig) != before[sig]]
print(code, " ".join(kept) or "-", flush=True)
"""


def test_a_supervisor_run_in_a_process_gives_its_stop_signals_back(sandbox):
    """run_foreground hands the stop signals to the supervisor it builds (its request_stop)
    and, at its end, gave back only those still at its start's handler: the supervisor's
    stayed, and a Ctrl-C or SIGTERM of the process after it returned (the CLI on its way
    out, code that embeds kint) only asked a supervisor stopped already to stop, and was
    lost. Real parts: the supervisor in the child, stopped by `sup.stop`."""
    proc = subprocess.Popen([sys.executable, "-c", _RUN_THEN_SAY_SIGNALS,
                             str(sandbox.kint_home)], env=sandbox.env, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        sandbox.wait_for(lambda: proc.poll() is not None or sandbox.client().ping(0.5),
                         interval=0.05, what="the supervisor serving")
        assert proc.poll() is None, proc.communicate()
        sandbox.shutdown()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and out == "0 -\n", (proc.returncode, out, err)
    finally:
        _stop(proc)
