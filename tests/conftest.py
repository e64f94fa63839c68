"""Shared test set-up: every test runs hermetic.

- The test process itself gets a temporary HOME and KINT_HOME before anything imports
  Sibyl, and SIBYL_MEMORY_TELEMETRY=0.
- Sibyl's own network guard is on for every test, and a test that tried to leave
  127.0.0.1 fails even if it swallowed the refusal.
- A `Sandbox` is one machine: its own HOME, KINT_HOME and HERMES_HOME, real Sibyl stores,
  and a real supervisor started through the real `kint` command.
- What kint.settings holds for the whole process (whether it is the daemon's, its
  KINT_HOME, its space) is put back after each test: a Supervisor built in-process says
  it is the daemon's (tests/support/settings_kept.py).
- A failed test says so when kint's own files changed since the session started, which
  stops every supervisor the tests started (tests/checkout_watch.py).
- `make test` runs the suite in two pytest-xdist workers (`--dist loadfile`: a file's tests
  in one worker, its module fixtures made once). They share one devchain, the run's one
  anvil, started by the first worker that needs it and stopped by the controller at the
  end. A test that moves the chain under everyone (a reorganisation, automine off, time
  moved on) or reads it as still (no block mined meanwhile) is marked `chain_exclusive`
  and runs while no other test of the chain runs (`_chain_turn`).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

from support.ctrl_c import let_ctrl_c_through

# First: the processes this suite starts take Ctrl-C even where the suite was started with
# it ignored (a background job of a shell without job control).
let_ctrl_c_through()

# Bytecode is cached (in the gitignored __pycache__ folders) even where the suite was started
# with PYTHONDONTWRITEBYTECODE=1: without it pytest rewrote the asserts of every test module
# again in every process that collects them, ~9 s CPU of a collection's ~12 in each xdist
# worker. Set before any test module is imported, in this process and in the environment
# the processes that inherit it get (the xdist workers; a sandbox's own environment is
# built from a short list, without it: make_sandbox).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# The worker's name under pytest-xdist ("gw0", ...); None in the controller or a plain run.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
# What the run's processes share (the devchain, the chain's turn lock): made by the first
# process, the controller (which imports this file before it starts the workers), and
# inherited by the workers through the environment.
RUN_LOCK = "run.lock"


def _hold_run_lock(root: Path) -> int:
    """An exclusive flock on `root`/run.lock, held for this process's life (the fd is kept,
    never inherited): a later run removes a run folder whose lock is free and that is no
    failed run's, the folder of a run killed before its end, which removed nothing. The
    file is locked before it is named, so no later run sees it unlocked while this one
    starts."""
    fd, made = tempfile.mkstemp(dir=root, prefix=".run-lock-")
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.rename(made, root / RUN_LOCK)
    return fd


def _remove_abandoned_runs(own: Path) -> None:
    """Remove this user's run folders beside `own` whose run ended without removing them
    (killed, or its machine stopped): their lock is free. A failed run's folder is kept
    (`_keep_last_failed_runs` keeps the last three); one with no lock yet is a run being
    made, or a folder of an older conftest, and is left alone. A folder's anvil and the
    supervisors still running under it (its run's last sweep never ran) are stopped
    before it is removed."""
    for folder in own.parent.glob("kt-*"):
        try:
            if folder == own or folder.is_symlink() or folder.stat().st_uid != os.getuid() \
                    or (folder / "failed").exists():
                continue
            fd = os.open(folder / RUN_LOCK, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a run going on
            continue
        else:
            _stop_abandoned_anvil(folder)
            _sweep_left(folder)  # under its homes, which the folder's removal forgets
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            os.close(fd)


def _stop_abandoned_anvil(folder: Path) -> None:
    """Stop the devchain's anvil of the abandoned run whose folder is `folder`, if it still
    runs: the controller stops it at the run's end, and a killed run never got there, so
    its anvil (in a session of its own, past any Ctrl-C) outlived it, and removing the
    folder took its record with it. The record `kint devchain start` wrote in the run's
    folder is the anvil's pid and identity (its command line and start time, which
    kint.chain.devchain.identity reads again): `kint devchain stop`'s own code signals the
    pid only while it is still that anvil, never a process that took the pid since. A
    clean-up that fails leaves the anvil, never this run unstarted."""
    from kint.chain.config import devchain_record

    home = folder / _DEVCHAIN_KINT_HOME
    if not devchain_record(home).is_file():
        return
    from kint.chain.devchain.lifecycle import stop

    try:
        stop(home)
    except Exception:  # noqa: BLE001 - a corrupt record, a foreign file: left, as before
        pass


def _sweep_left(*roots: Path) -> None:
    """Stop the supervisors a test left under `roots` (support/left_supervisors.py): a
    sweep that fails is said, and never keeps a run from starting, its anvil from being
    stopped or its folder from being removed."""
    from support.left_supervisors import stop_left_under

    try:
        stop_left_under(*roots)
    except Exception as err:  # noqa: BLE001 - a clean-up's own failure, said and left
        print(f"\nwarning: the sweep of the supervisors left under {', '.join(map(str, roots))}"
              f" failed: {type(err).__name__}: {err}", file=sys.stderr)


# The run's devchain's KINT_HOME, inside its folder (`chain_home`).
_DEVCHAIN_KINT_HOME = Path("devchain") / "kint"

if "KINT_TESTS_RUN_ROOT" not in os.environ:
    os.environ["KINT_TESTS_RUN_ROOT"] = tempfile.mkdtemp(prefix="kt-")
    _RUN_LOCK_FD = _hold_run_lock(Path(os.environ["KINT_TESTS_RUN_ROOT"]))
    _remove_abandoned_runs(Path(os.environ["KINT_TESTS_RUN_ROOT"]))
_RUN_ROOT = Path(os.environ["KINT_TESTS_RUN_ROOT"])
# The system's own temp folder, for the tests of what another user can do there.
SYSTEM_TMPDIR = str(_RUN_ROOT.parent)
# Every temporary folder of the run goes under its folder, removed with it: a supervisor
# a test kills leaves its multiprocessing folder (pymp-*) and a long home's fallback
# socket folder (kint-<uid>-*) behind, which in the system's /tmp outlived the run.
# Short enough for the socket paths (kint.socket_paths.MAX_SOCKET_PATH_BYTES).
_RUN_TMP = _RUN_ROOT / "tmp"
_RUN_TMP.mkdir(mode=0o700, exist_ok=True)
os.environ["TMPDIR"] = str(_RUN_TMP)
tempfile.tempdir = str(_RUN_TMP)
_SESSION_ROOT = Path(tempfile.mkdtemp(prefix="kint-tests-"))
os.environ["HOME"] = str(_SESSION_ROOT / "home")
os.environ["KINT_HOME"] = str(_SESSION_ROOT / "kint-home-unused")
os.environ["SIBYL_MEMORY_TELEMETRY"] = "0"
# Never the real OS keyring: kint's machine secret falls back to local.secret in tests.
os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
for _var in ("SIBYL_MEMORY_DB", "SIBYL_CREDENTIALS", "HERMES_HOME", "KINT_SPACE", "KINT_TENANT"):
    os.environ.pop(_var, None)
(_SESSION_ROOT / "home").mkdir()

from sibyl_memory_client import MemoryClient  # noqa: E402
from sibyl_memory_client import testing as sibyl_testing  # noqa: E402

from checkout_watch import SECTION as CHECKOUT_SECTION  # noqa: E402
from checkout_watch import CheckoutWatch  # noqa: E402
from kint.chain.config import devchain_record  # noqa: E402
from kint.client import Client  # noqa: E402
from kint.spaces import SIBYL_DEFAULT_TENANT  # noqa: E402
from kint.supervisor.pidlock import running_pid  # noqa: E402
from support.basetemp_lock import BasetempShared, hold_basetemp  # noqa: E402
from support.left_supervisors import stop_supervisor  # noqa: E402
from support.settings_kept import settings_kept  # noqa: E402

KINT = str(Path(sys.executable).parent / "kint")

# A `kint` command line in a fresh interpreter that prints, at exit, every module it loaded.
_LOADED_AT_EXIT = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules))))
from kint.cli import main
main(sys.argv[1:], prog_name="kint")
"""


def kint_loading(env: dict[str, str], *argv: str) -> tuple[subprocess.CompletedProcess[str],
                                                          list[str]]:
    """Run `kint *argv` (stdin closed); its outcome, and the modules it had loaded at exit:
    what a refusal cost is mostly what it imported first."""
    import json

    out = subprocess.run([sys.executable, "-c", _LOADED_AT_EXIT, *argv], env=env, text=True,
                         capture_output=True, timeout=90, stdin=subprocess.DEVNULL)
    return out, json.loads(out.stdout.splitlines()[-1])
SUPPORT = Path(__file__).resolve().parent / "support"
# A loopback endpoint nobody listens on (the discard port): a read there fails at once.
CLOSED_PORT_URL = "http://127.0.0.1:9"
TENANT = SIBYL_DEFAULT_TENANT


_wheel_build: Any = None  # tests/wheel_build.py's build, once a session collected test_wheel
_BASETEMP_LOCK_FD: int | None = None  # the controller's, held for the run's life


@pytest.hookimpl(tryfirst=True)  # before the tmp_path plugin reads --basetemp
def pytest_configure(config: pytest.Config) -> None:
    """The tests' folders go under the run's short folder (`_RUN_ROOT`/t; a worker's under
    t/popen-gwN, as xdist names them), unless --basetemp says where: a machine's sockets
    must fit in a socket path's ~100 bytes below its KINT_HOME, or kint binds them in a
    fallback folder (kint.socket_paths.socket_dir), and pytest's own root plus xdist's worker
    folder made them too long for most tests. A --basetemp another running run was given
    is refused (support/basetemp_lock.py): each run's last sweep would stop the other's
    supervisors."""
    global _BASETEMP_LOCK_FD
    if XDIST_WORKER is None and not config.option.basetemp:
        config.option.basetemp = str(_RUN_ROOT / "t")
    elif XDIST_WORKER is None:
        try:
            _BASETEMP_LOCK_FD = hold_basetemp(Path(config.option.basetemp))
        except BasetempShared as err:  # this run made nothing yet but its own folder
            shutil.rmtree(_RUN_ROOT, ignore_errors=True)
            raise pytest.UsageError(str(err)) from None
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
_checkout = CheckoutWatch()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
    """A failed test's report names kint's files changed since the session started."""
    report = yield
    _checkout.annotate(report)
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """And the session's summary says it once more, beside the failures' short lines."""
    stats = terminalreporter.stats
    if stats.get("failed") or stats.get("error"):
        note = _checkout.note()
        if note is not None:
            terminalreporter.write_sep("=", CHECKOUT_SECTION)
            terminalreporter.write_line(note)


@pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down
def pytest_sessionfinish(session: pytest.Session) -> None:
    if _wheel_build is not None:
        _wheel_build.stop()
        shutil.rmtree(_wheel_build.work, ignore_errors=True)
    if XDIST_WORKER is None:  # the controller, or a plain run: every test has ended
        if _DEVCHAIN_RECORD.exists():
            make_sandbox(_DEVCHAIN_ROOT).kint("devchain", "stop")
        # Whatever a crashed or timed-out test left running under the run's folders.
        _sweep_left(_RUN_ROOT, Path(session.config.option.basetemp or _RUN_ROOT))
        if session.testsfailed:  # the failed tests' folders are kept to look at
            print(f"\nthe tests' folders are kept in {session.config.option.basetemp}")
            shutil.rmtree(_DEVCHAIN_ROOT, ignore_errors=True)
            _keep_last_failed_runs(3)
        else:
            shutil.rmtree(_RUN_ROOT, ignore_errors=True)
        # xdist's controller runs no test, so no fixture removed the HOME it made here.
        shutil.rmtree(_SESSION_ROOT, ignore_errors=True)


def _keep_last_failed_runs(kept: int) -> None:
    """Marks this run's folder as a failed run's, and removes all but the `kept` newest
    failed runs' folders of this user, as pytest keeps its last three: a run that failed
    while someone checked that a test fails without its fix leaves nothing for long."""
    (_RUN_ROOT / "failed").touch()
    marks = sorted(_RUN_ROOT.parent.glob("kt-*/failed"),
                   key=lambda mark: mark.stat().st_mtime)
    for mark in marks[:-kept]:
        if mark.stat().st_uid == os.getuid():
            shutil.rmtree(mark.parent, ignore_errors=True)


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
    fd = os.open(_RUN_ROOT / "chain-turn.lock", os.O_RDWR | os.O_CREAT, 0o600)
    mark = _RUN_ROOT / "chain-turn.exclusive"
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

    if not _DEVCHAIN_RECORD.exists():
        return
    answer = devchain_web3(_DEVCHAIN_ROOT / "kint").provider.make_request(
        "evm_setAutomine", [True])
    assert "error" not in answer, answer


@pytest.fixture(scope="session", autouse=True)
def _real_home_untouched():
    before = sibyl_testing.real_home_snapshot()
    yield
    changed = sibyl_testing.real_home_changes(before)
    shutil.rmtree(_SESSION_ROOT, ignore_errors=True)
    assert not changed, f"tests changed the real home: {changed}"


@pytest.fixture(autouse=True)
def _network_guard(monkeypatch):
    sibyl_testing.assert_home_is_not_real()
    sibyl_testing.forbid_external_network(monkeypatch)
    start = len(sibyl_testing.refused_connections())
    yield
    sibyl_testing.assert_no_external_attempts(start)


@pytest.fixture(autouse=True)
def _settings_process_kept():
    """kint.settings' process-wide state (what this process is: a command's or the daemon's)
    as it was before the test: a Supervisor built in-process marked the test process the
    daemon's for every later test of its xdist worker (tests/support/settings_kept.py)."""
    with settings_kept():
        yield


def pid_alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):  # reaped before, or between open and read
        return False


def let_go_on(pid: int | None) -> None:
    """SIGCONT a process the test stopped, unless it is gone (the supervisor may have
    ended it), so that nothing is left stopped past the test."""
    if pid is not None and pid_alive(pid):
        os.kill(pid, signal.SIGCONT)


def sibyl_client(db: Path, tenant: str = TENANT) -> MemoryClient:
    """Sibyl's own client on `db`, as an agent's tools would hold it (NullEntitlementGate:
    Sibyl's test support, passed in code; the test process has no Sibyl account)."""
    return MemoryClient.local(str(db), tenant_id=tenant,
                              entitlement_gate=sibyl_testing.NullEntitlementGate())


def dated_back(db: str | Path, seconds: float = 60.0) -> None:
    """A store's files (the database and what SQLite keeps beside it) dated `seconds` back:
    a worker keeps its counts only for a store whose files are older than a clock tick's
    doubt (kint.tenant_worker.store.SETTLED_AFTER_NS), so a test that means a status
    answered from kept counts dates a store it has just written."""
    for path in (Path(db), Path(f"{db}-wal"), Path(f"{db}-shm")):
        if path.exists():
            then = time.time() - seconds
            os.utime(path, (then, then))


def write_rules(db: Path, tenant: str, **rules: str) -> None:
    """Rules (entities in category `rules`, body {"rule": ...}) written into `db` for
    `tenant` through Sibyl's own client."""
    client = sibyl_client(db, tenant)
    try:
        for name, rule in rules.items():
            client.set_entity("rules", name, {"rule": rule})
    finally:
        client.storage.close()


def wait_until(predicate: Any, timeout: float = 20.0, interval: float = 0.1) -> Any:
    """`predicate()`'s first true value within `timeout` seconds, else its last value (for
    the caller's assert to show)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def write_store(db: Path, rows: dict[str, Any] | None = None, tenant: str = TENANT) -> Path:
    """A real Sibyl store, written through Sibyl's own client. The account gate is Sibyl's
    NullEntitlementGate (its test support, passed in code): these tests are not about the
    account gate, and no credentials exist in the sandbox."""
    client = MemoryClient.local(str(db), tenant_id=tenant,
                                entitlement_gate=sibyl_testing.NullEntitlementGate())
    for name, body in (rows or {"release-gate": {"rule": "never ship on a Friday"}}).items():
        client.set_entity("rules", name, body)
    client.write_event(acted=["wrote the rules"])
    client.storage.close()
    return db


def support_first(pythonpath: str) -> str:
    """`pythonpath` with tests/support first: the worker forkserver imports its preload by
    name and ignores sys.path changes. A folder already there (the tree under test: a lane's
    checkout, a copy of kint from `kint_copy`) stays after it."""
    paths = [path for path in pythonpath.split(os.pathsep) if path and path != str(SUPPORT)]
    return os.pathsep.join([str(SUPPORT)] + paths)


@dataclass
class Sandbox:
    """One machine: HOME, KINT_HOME, HERMES_HOME and the environment its processes get."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)
    tenant: str = TENANT
    signer: Any = None

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def kint_home(self) -> Path:
        return self.root / "kint"

    @property
    def hermes_home(self) -> Path:
        return self.root / "home" / ".hermes"

    @property
    def sibyl_db(self) -> Path:
        return self.home / ".sibyl-memory" / "memory.db"

    def profile_db(self, profile: str) -> Path:
        """Where Sibyl's Hermes adapter keeps profile `profile`'s store under `hermes -p`
        (HERMES_HOME is the profile's folder then; see kint/spaces.py)."""
        return (self.hermes_home / "profiles" / profile / "sibyl" / "profiles" / profile
                / "memory.db")

    def label(self, db: Path, tenant: str | None = None) -> str:
        tenant = tenant or self.tenant
        if db == self.sibyl_db:
            return tenant
        return f"{tenant}@hermes:{db.parent.name}"

    def kint(self, *args: str, timeout: float = 90, env: dict[str, str] | None = None,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run `kint`; `input` goes to its stdin (a signature, a passphrase, a code), and
        without it stdin is closed, as in a script."""
        return subprocess.run([KINT, *args], env={**self.env, **(env or {})}, text=True,
                              capture_output=True, timeout=timeout, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL)

    def client(self) -> Client:
        return Client(self.kint_home, autostart=False)

    def call(self, op: str, db: Path | None = None, timeout_s: float = 10, **kw: Any) -> dict:
        with self.client() as client:
            if db is not None:
                kw.update(tenant=self.tenant, db=str(db), space=self.label(db))
            return client.call(op, timeout_s=timeout_s, **kw)

    def _config_file(self, text: str) -> Path:
        """`text` as this machine's config.toml, 0600 in a 0700 KINT_HOME, as a user keeps
        them."""
        self.kint_home.mkdir(mode=0o700, parents=True, exist_ok=True)
        config = self.kint_home / "config.toml"
        config.write_text(text)
        config.chmod(0o600)
        return config

    @contextmanager
    def supervisor_config(self, text: str) -> Iterator[None]:
        """`text` as this machine's config.toml, read by its running supervisor at once
        (`sup.reload`); the file is gone again afterwards, and read so."""
        config = self._config_file(text)
        self.call("sup.reload")
        try:
            yield
        finally:
            config.unlink()
            self.call("sup.reload")

    @contextmanager
    def chain_out_of_reach(self) -> Iterator[None]:
        """For a test whose command must stop before it reads the chain: both endpoints in
        this machine's config.toml are a closed loopback port, so that should it regress
        and go on, its reads meet that port, never Base's public endpoints (the defaults).
        The space's worker, another process, is outside this process's network guard; it
        reads the file again at once, so a supervisor already running needs no reload. The
        file is gone again afterwards."""
        config = self._config_file(f'rpc_url = "{CLOSED_PORT_URL}"\n'
                                   f'rpc_url_2 = "{CLOSED_PORT_URL}"\n')
        try:
            yield
        finally:
            config.unlink()

    def start(self) -> int:
        out = self.kint("supervisor", "start")
        assert out.returncode == 0, out.stderr
        pid = running_pid(self.kint_home)
        assert pid and pid > 0
        return pid

    def start_entitled(self) -> str:
        """Start the test supervisor (tests/support/run_supervisor.py): the real one, with
        Sibyl's real account gate in every worker trusting a throwaway `TestSigner` key, and
        an entitled HOME for it. Returns the tenant the sandbox's credentials resolve to."""
        signer = sibyl_testing.TestSigner()
        self.signer = signer
        sibyl_testing.install_entitled_home(self.home, signer)
        self.env["KINT_TEST_TRUSTED_KEY"] = f"{signer.kid}:{signer.public_raw.hex()}"
        self.env["PYTHONPATH"] = support_first(self.env.get("PYTHONPATH", ""))
        self.kint_home.mkdir(mode=0o700, exist_ok=True)
        log = open(self.root / "test-supervisor.err", "ab")
        subprocess.Popen([sys.executable, str(SUPPORT / "run_supervisor.py"), "--home",
                          str(self.kint_home)], env=self.env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        log.close()
        # A ping costs ~0.1 ms while nobody listens (no socket yet): looking every 20 ms
        # rather than every 100 ms answers ~40 ms sooner at each of the suite's starts.
        self.wait_for(lambda: self.client().ping(0.5), interval=0.02,
                      what="the test supervisor")
        self.tenant = sibyl_testing.TEST_ACCOUNT_ID
        return self.tenant

    def sup_status(self) -> dict:
        return self.call("sup.status")

    def row(self, db: Path) -> dict:
        rows = [r for r in self.sup_status()["spaces"] if r["store"] == str(db)]
        assert len(rows) == 1, rows
        return rows[0]

    def wait_for(self, predicate, timeout: float = 30, interval: float = 0.1, what: str = ""):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(interval)
        raise AssertionError(f"timed out waiting for {what or predicate}: last={last!r}")

    def shutdown(self) -> None:
        """Stop the supervisor as `kint supervisor stop` does (`sup.stop`, which answers once
        every worker has stopped, then its pid file let go), from this process: a test's
        clean-up, where a `kint` process would cost its start and imports at every test
        (the command itself is tested where it is the subject). One a test left held or
        wedged is continued, then killed with its workers (support/left_supervisors.py)."""
        stop_supervisor(self.kint_home)


def kint_copy(folder: Path) -> Path:
    """A copy of the kint package in `folder` (its bytecode caches too, still valid: the
    copy keeps the sources' times), for a test that moves a file of kint's as an upgrade
    does. A machine given PYTHONPATH=`folder` runs the copy and watches it
    (kint/supervisor/code_watch.py), so neither the checkout nor the supervisors of the
    tests running beside it see the change. Returns the copy's package folder."""
    import kint

    # Not a cache file Python is writing this moment (X.pyc.<id>, renamed when whole): a
    # kint process of the other worker may be compiling a module as the copy lists them.
    shutil.copytree(Path(kint.__file__).parent, folder / "kint",
                    ignore=shutil.ignore_patterns("*.pyc.*"))
    return folder / "kint"


def make_sandbox(root: Path, **env: str) -> Sandbox:
    root.mkdir(parents=True, exist_ok=True)
    sb = Sandbox(root=root)
    sb.home.mkdir(parents=True, exist_ok=True)
    base = {k: v for k, v in os.environ.items()
            if k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "SYSTEMROOT")}
    sb.env = {**base, "HOME": str(sb.home), "KINT_HOME": str(sb.kint_home),
              "HERMES_HOME": str(sb.hermes_home), "SIBYL_MEMORY_TELEMETRY": "0",
              "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
              # Nor the real macOS Keychain, which v0.3.0's Alchemy endpoint is read from
              # with `security` (kint.chain.keychain_rpc), past the keyring package.
              **({"KINT_NO_KEYCHAIN": "1"} if sys.platform == "darwin" else {}), **env}
    return sb


@contextmanager
def serving(root: Path) -> Iterator[Sandbox]:
    """A machine serving its store's space (`kint supervisor start`, a worker running, its
    row in the status table), for a module's tests that only look at what it made or check
    that it goes on: one supervisor and worker (~1 s of CPU) rather than one each."""
    sb = make_sandbox(root)
    write_store(sb.sibyl_db)
    sb.start()
    try:
        sb.call("status", sb.sibyl_db)
        yield sb
    finally:
        sb.shutdown()


# The run's devchain: one anvil for every worker of the run (conftest's docstring), and
# the record `kint devchain start` writes once it runs.
_DEVCHAIN_ROOT = _RUN_ROOT / _DEVCHAIN_KINT_HOME.parent
_DEVCHAIN_RECORD = devchain_record(_RUN_ROOT / _DEVCHAIN_KINT_HOME)


@pytest.fixture(scope="session")
def chain_home():
    """One devchain (a real anvil) for the whole test run, in a KINT_HOME of its own,
    started by the first worker that needs it (the others find its record) and stopped by
    the controller once every test has ended (`pytest_sessionfinish`). Machines join it
    with a copy of its record (chain_machines.join_devchain); every `connect --dev` makes a
    fresh owner, so the modules' spaces never meet."""
    sb = make_sandbox(_DEVCHAIN_ROOT)
    fd = os.open(_RUN_ROOT / "devchain-start.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not _DEVCHAIN_RECORD.exists():
            out = sb.kint("devchain", "start")
            assert out.returncode == 0, out.stdout + out.stderr
    finally:
        os.close(fd)
    return sb.kint_home


@pytest.fixture
def sandbox(tmp_path):
    sb = make_sandbox(tmp_path / "machine")
    yield sb
    sb.shutdown()
