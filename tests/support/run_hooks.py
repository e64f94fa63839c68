"""The session's hooks: where the tests' folders go (--basetemp, refused when another
running run has it), the wheel built in the background, the note of kint's files changed
since the session started under a failure, and the run's end (its devchain stopped, what
the tests left swept, its folder removed or kept).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from checkout_watch import SECTION as CHECKOUT_SECTION
from checkout_watch import CheckoutWatch
from support.basetemp_lock import BasetempShared, hold_basetemp
from support.devchain_turn import DEVCHAIN_RECORD, DEVCHAIN_ROOT
from support.file_order import keep_collected_order
from support.run_env import RUN_ROOT, SESSION_ROOT, XDIST_WORKER
from support.run_folders import sweep_left
from support.sandboxes import make_sandbox

_wheel_build: Any = None  # tests/wheel_build.py's build, once a session collected test_wheel
_BASETEMP_LOCK_FD: int | None = None  # the controller's, held for the run's life


@pytest.hookimpl(tryfirst=True)  # before the tmp_path plugin reads --basetemp
def pytest_configure(config: pytest.Config) -> None:
    """The tests' folders go under the run's short folder (`RUN_ROOT`/t; a worker's under
    t/popen-gwN, as xdist names them), unless --basetemp says where: a machine's sockets
    must fit in a socket path's ~100 bytes below its KINT_HOME, or kint binds them in a
    fallback folder (kint.socket_paths.socket_dir), and pytest's own root plus xdist's worker
    folder made them too long for most tests. A --basetemp another running run was given
    is refused (support/basetemp_lock.py): each run's last sweep would stop the other's
    supervisors."""
    global _BASETEMP_LOCK_FD
    if XDIST_WORKER is None and not config.option.basetemp:
        config.option.basetemp = str(RUN_ROOT / "t")
    elif XDIST_WORKER is None:
        try:
            _BASETEMP_LOCK_FD = hold_basetemp(Path(config.option.basetemp))
        except BasetempShared as err:  # this run made nothing yet but its own folder
            shutil.rmtree(RUN_ROOT, ignore_errors=True)
            raise pytest.UsageError(str(err)) from None
    keep_collected_order(config)  # the long files first (support/file_order.py)
    config.addinivalue_line(
        "markers", "chain_exclusive: runs while no other test uses the session's devchain "
        "(it moves the chain under everyone, or reads it as still)")


def pytest_collection_finish(session: pytest.Session) -> None:
    """A session that runs tests/test_wheel.py starts building its wheel and venv now, in
    the background (tests/wheel_build.py), so that test_wheel finds them built. Not in an
    xdist worker: each collects every test, and only one runs test_wheel, which starts the
    build itself when it gets there."""
    if XDIST_WORKER is None and any(item.path.name == "test_wheel.py"
                                    for item in session.items):
        wheel_build()


def wheel_build() -> Any:
    """The session's background build of kint's wheel and its venv, started if need be."""
    global _wheel_build
    if _wheel_build is None:
        from wheel_build import WheelBuild

        _wheel_build = WheelBuild(Path(tempfile.mkdtemp(prefix="kint-wheel-build-"))).start()
    return _wheel_build


# kint's files as the session found them (tests/checkout_watch.py).
checkout = CheckoutWatch()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
    """A failed test's report names kint's files changed since the session started."""
    report = yield
    checkout.annotate(report)
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """And the session's summary says it once more, beside the failures' short lines."""
    stats = terminalreporter.stats
    if stats.get("failed") or stats.get("error"):
        note = checkout.note()
        if note is not None:
            terminalreporter.write_sep("=", CHECKOUT_SECTION)
            terminalreporter.write_line(note)


@pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down
def pytest_sessionfinish(session: pytest.Session) -> None:
    if _wheel_build is not None:
        _wheel_build.stop()
        shutil.rmtree(_wheel_build.work, ignore_errors=True)
    if XDIST_WORKER is None:  # the controller, or a plain run: every test has ended
        if DEVCHAIN_RECORD.exists():
            make_sandbox(DEVCHAIN_ROOT).kint("devchain", "stop")
        # Whatever a crashed or timed-out test left running under the run's folders.
        sweep_left(RUN_ROOT, Path(session.config.option.basetemp or RUN_ROOT))
        if session.testsfailed:  # the failed tests' folders are kept to look at
            print(f"\nthe tests' folders are kept in {session.config.option.basetemp}")
            shutil.rmtree(DEVCHAIN_ROOT, ignore_errors=True)
            _keep_last_failed_runs(3)
        else:
            shutil.rmtree(RUN_ROOT, ignore_errors=True)
        # xdist's controller runs no test, so no fixture removed the HOME it made here.
        shutil.rmtree(SESSION_ROOT, ignore_errors=True)


def _keep_last_failed_runs(kept: int) -> None:
    """Marks this run's folder as a failed run's, and removes all but the `kept` newest
    failed runs' folders of this user, as pytest keeps its last three: a run that failed
    while someone checked that a test fails without its fix leaves nothing for long."""
    (RUN_ROOT / "failed").touch()
    marks = sorted(RUN_ROOT.parent.glob("kt-*/failed"),
                   key=lambda mark: mark.stat().st_mtime)
    for mark in marks[:-kept]:
        if mark.stat().st_uid == os.getuid():
            shutil.rmtree(mark.parent, ignore_errors=True)
