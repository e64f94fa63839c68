"""The run's devchain: one anvil for every worker of the run (conftest's docstring), the
`chain_home` fixture that starts it, and the turn each test of it takes (`_chain_turn`).
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

from kint.chain.config import devchain_record
from support.run_env import RUN_ROOT
from support.run_folders import DEVCHAIN_KINT_HOME
from support.sandboxes import make_sandbox

# The run's devchain: one anvil for every worker of the run (conftest's docstring), and
# the record `kint devchain start` writes once it runs.
DEVCHAIN_ROOT = RUN_ROOT / DEVCHAIN_KINT_HOME.parent
DEVCHAIN_RECORD = devchain_record(RUN_ROOT / DEVCHAIN_KINT_HOME)


@pytest.fixture(scope="session")
def chain_home():
    """One devchain (a real anvil) for the whole test run, in a KINT_HOME of its own,
    started by the first worker that needs it (the others find its record) and stopped by
    the controller once every test has ended (`pytest_sessionfinish`). Machines join it
    with a copy of its record (chain_machines.join_devchain); every `connect --dev` makes a
    fresh owner, so the modules' spaces never meet."""
    sb = make_sandbox(DEVCHAIN_ROOT)
    fd = os.open(RUN_ROOT / "devchain-start.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not DEVCHAIN_RECORD.exists():
            out = sb.kint("devchain", "start")
            assert out.returncode == 0, out.stdout + out.stderr
    finally:
        os.close(fd)
    return sb.kint_home


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """A test of the devchain runs in its turn (`_chain_turn`), set-up and tear-down
    included (a module's machines are made in its first test's set-up)."""
    if "chain_home" not in getattr(item, "fixturenames", ()):
        return (yield)
    with _chain_turn(exclusive=item.get_closest_marker("chain_exclusive") is not None):
        return (yield)


@contextmanager
def _chain_turn(exclusive: bool) -> Iterator[None]:
    """The chain's reader-writer lock across the run's workers: every test of the devchain
    holds it shared, one marked `chain_exclusive` alone. A flock on a file of the run's
    shared folder: let go by the kernel when a worker dies.

    The kernel frees the lock of a worker that died inside an exclusive test, but not the
    anvil that test changed: one that turned automine off (test_reanchor_resume.py) and
    never reached its `finally` would leave every later chain test of both workers waiting
    out its receipt timeouts. So an exclusive turn puts automine back on as it starts and
    as it ends, and leaves a mark for its length: a turn that finds the mark while it holds
    the lock (none can hold it beside an exclusive one) knows that turn's worker died, and
    puts automine back on itself (`_automine_on`) and takes the mark away."""
    fd = os.open(RUN_ROOT / "chain-turn.lock", os.O_RDWR | os.O_CREAT, 0o600)
    mark = RUN_ROOT / "chain-turn.exclusive"
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        if exclusive or mark.exists():
            _automine_on()
            mark.unlink(missing_ok=True)
        if exclusive:
            mark.touch()
        try:
            yield
        finally:
            if exclusive:
                _automine_on()
                mark.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _automine_on() -> None:
    """The run's anvil mines each transaction as it comes again (`evm_setAutomine` true),
    one call; nothing when no devchain runs yet (no test has needed one)."""
    from chain_machines import devchain_web3

    if not DEVCHAIN_RECORD.exists():
        return
    answer = devchain_web3(DEVCHAIN_ROOT / "kint").provider.make_request(
        "evm_setAutomine", [True])
    assert "error" not in answer, answer
