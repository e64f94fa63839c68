"""`python run_supervisor_start_held.py --home PATH [--at named|lock] [--as AS]`: kint's
own supervisor held in its start, at an event: it prints `held` there and waits
for its stdin to close. A test sends it a signal there, not after a guessed time: where a
service manager's stop or a Ctrl-C lands in a start's first moments, or a kill lands
before the start names itself. For tests/test_pid_lock_stopped.py and
tests/test_pid_lock_stale.py.

`--at named` (the default): once it holds the pid lock and its file names it, and before
it hands the stop signals to the supervisor it built (autostart._serve's tighten_home).
`--at lock`: once it holds the pid lock and before its file names it (the step that
clears what a killed predecessor left, autostart._clear_left_behind).

`--as foreground` (the default): `run_foreground` as `kint supervisor start --foreground`
runs it; `--as daemon`: as `python -m kint.supervisor --home PATH` runs it (its own
`main`); `--as cli`: the `kint` command's own entry, `kint supervisor start --foreground`
(the home from KINT_HOME)."""

import sys
from collections.abc import Iterable
from pathlib import Path

from kint.supervisor import autostart, tighten

_tighten_home = tighten.tighten_home
_clear_left_behind = autostart._clear_left_behind


def _held() -> None:
    print("held", flush=True)
    sys.stdin.read()


def _held_tighten_home(home: Path, stores: Iterable[Path] = ()) -> int:
    """The step of the start just before its signal handlers: held until stdin closes."""
    _held()
    return _tighten_home(home, stores)


def _held_clear_left_behind(home: Path) -> None:
    """The step between the lock taken and the pid written: held until stdin closes."""
    _held()
    _clear_left_behind(home)


def _arg(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


if __name__ == "__main__":
    if _arg("--at", "named") == "lock":
        autostart._clear_left_behind = _held_clear_left_behind
    else:
        tighten.tighten_home = _held_tighten_home
    home = Path(_arg("--home", "")).absolute()
    run_as = _arg("--as", "foreground")
    if run_as == "daemon":
        from kint.supervisor.__main__ import main as daemon_main

        sys.argv = ["kint.supervisor", "--home", str(home)]
        sys.exit(daemon_main())
    if run_as == "cli":
        from kint.entry import main as kint_main

        sys.argv = ["kint", "supervisor", "start", "--foreground"]
        kint_main()
    sys.exit(autostart.run_foreground(home, refuse_beside_running=True))
