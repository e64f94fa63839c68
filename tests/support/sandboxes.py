"""A `Sandbox` is one machine: its own HOME, KINT_HOME and HERMES_HOME, real Sibyl stores,
and a real supervisor started through the real `kint` command (or the test supervisor,
support/run_supervisor.py); and the `kint` command run as a test runs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest
from sibyl_memory_client import testing as sibyl_testing

from kint.client import Client, KintError
from kint.supervisor.pidlock import running_pid
from support.left_supervisors import stop_supervisor
from support.stores import TENANT, write_store

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


SUPPORT = Path(__file__).resolve().parent
# A loopback endpoint nobody listens on (the discard port): a read there fails at once.
CLOSED_PORT_URL = "http://127.0.0.1:9"
# How long `Sandbox.warm_up` waits for a supervisor's worker forkserver (its preload takes
# about a second of CPU, many more on a loaded box), how often it looks, and each look's
# bound: a look is a `sup.status` (under a millisecond of CPU each side), its interval what
# the wait adds to a first request at most.
WARM_UP_WAIT_S = 90.0
WARM_UP_LOOK_S = 0.05
WARM_UP_LOOK_BOUND_S = 10.0


# The commands that go to a space's worker (`kint --help`'s list; `doctor` asks a running
# one; `authorize` and `session-key show` read a connected space's chain from it), and the
# global options that take a value, which come before the command.
SPACE_COMMANDS = frozenset({"status", "verify", "history", "connect", "join", "push",
                            "compact", "pull", "rekey", "recovery-code", "config", "doctor",
                            "authorize", "session-key"})
_VALUED_OPTIONS = frozenset({"--tenant", "--db"})


def on_a_space(argv: tuple[str, ...]) -> bool:
    """Whether `kint *argv` is a command on a space: its first word past the global options
    names one (`supervisor status` is none, `status` is)."""
    words = iter(argv)
    for word in words:
        if word in _VALUED_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            return word in SPACE_COMMANDS
    return False


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
    # Set by a start with `warm`: its supervisor is fresh, its worker forkserver maybe still
    # importing, and the first request for a space waits that out first (`warmed`).
    fresh: bool = False

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
        without it stdin is closed, as in a script. A command on a space (`on_a_space`) to a
        supervisor this started waits for its worker forkserver first, as `call` does
        (`warmed`): a first `kint status` carried the warm-up past its bounds too."""
        if on_a_space(args):
            self.warmed()
        return subprocess.run([KINT, *args], env={**self.env, **(env or {})}, text=True,
                              capture_output=True, timeout=timeout, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL)

    def client(self) -> Client:
        return Client(self.kint_home, autostart=False)

    def call(self, op: str, db: Path | None = None, timeout_s: float = 10, **kw: Any) -> dict:
        if db is not None:
            self.warmed()
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

    def start(self, warm: bool = True) -> int:
        """`kint supervisor start`; its pid. With `warm`, the test's first request for a
        space (`call` with a store) waits for its worker forkserver first (`warmed`)."""
        out = self.kint("supervisor", "start")
        assert out.returncode == 0, out.stderr
        pid = running_pid(self.kint_home)
        assert pid and pid > 0
        self.fresh = warm
        return pid

    def warmed(self) -> None:
        """Before the first request for a space to a supervisor this started (`fresh`): its
        worker forkserver ready (`warm_up`). A fresh supervisor warms it up in the
        background and its first worker's start waits for it, which on a loaded box took a
        test's first request past its 10 s bound (session 38, ~30 such places): waited for
        here, the warm-up is no request's. Not at the start itself: a test that asks for no
        worker stops its supervisor mid-warm-up, which ends the forkserver's imports (half
        a second of CPU each). Best effort: a supervisor that does not answer (stopped, held,
        gone) is the request's to meet. A test whose subject is a request made during the
        warm-up starts with `warm=False`."""
        if not self.fresh:
            return
        self.fresh = False
        try:
            self.warm_up()
        except KintError:
            pass

    def warm_up(self, timeout: float = WARM_UP_WAIT_S) -> None:
        """Wait until the running supervisor's worker forkserver has imported its preload
        (`sup.status`: supervisor.forkserver.ready; it turns true also when the preload
        failed, and the status says so)."""
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while True:
                status = client.call("sup.status", timeout_s=WARM_UP_LOOK_BOUND_S)
                if status["supervisor"]["forkserver"]["ready"]:
                    return
                assert time.monotonic() < deadline, \
                    f"the worker forkserver not ready within {timeout} s: {status['supervisor']}"
                time.sleep(WARM_UP_LOOK_S)

    def start_entitled(self, warm: bool = True) -> str:
        """Start the test supervisor (tests/support/run_supervisor.py): the real one, with
        Sibyl's real account gate in every worker trusting a throwaway `TestSigner` key, and
        an entitled HOME for it. Returns the tenant the sandbox's credentials resolve to.
        With `warm`, the first request for a space waits for its worker forkserver first
        (`warmed`)."""
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
        self.fresh = warm
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
    try:
        sb.start()
        sb.call("status", sb.sibyl_db)
        yield sb
    finally:
        sb.shutdown()


@pytest.fixture
def sandbox(tmp_path):
    sb = make_sandbox(tmp_path / "machine")
    yield sb
    sb.shutdown()
