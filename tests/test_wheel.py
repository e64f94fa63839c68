"""kint as a user installs it: the wheel, built from the project's files, installed into a
fresh venv outside the checkout, and run from a folder outside it with a HOME and KINT_HOME
of its own.

- The wheel and the fresh venv are built as tests/wheel_build.py says: in the background
  from the moment the session collected this file, with the venv's pinned setuptools, and
  installed with pip resolving the wheel's own declared dependencies at the lock's
  versions, offline, from the lock's wheelhouse (tests/wheelhouse.py). The fresh venv sees
  no site-packages but its own, and nothing of the checkout is on its path.
- The installed `kint` finds anvil on PATH (the checkout's npm package, as `npm install`
  leaves it: node_modules/.bin) or through KINT_ANVIL, and names how to install it when it
  finds none.

Each test that starts an anvil stops it through the installed kint and, whatever happened,
makes sure it is gone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import pytest
from sibyl_memory_client import testing as sibyl_testing

from conftest import SUPPORT, pid_alive, sibyl_client, wheel_build
from kint.chain import devchain
from kint.chain.config import devchain_record
from kint.chain.devchain.records import state_path

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
RULE = "never ship on a Friday; every release needs a green deadlift test and a second reviewer"


def _run(argv: list[str], timeout: float = 600, **kw) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(argv, text=True, capture_output=True, timeout=timeout,
                         stdin=subprocess.DEVNULL, **kw)
    assert out.returncode == 0, f"{argv}\n{out.stdout}\n{out.stderr}"
    return out


def _pinned(name: str) -> str:
    return next(line.split("==")[1] for line in LOCK.read_text().splitlines()
                if line.lower().startswith(f"{name}=="))


@pytest.fixture(scope="module")
def wheel() -> Path:
    from importlib.metadata import version

    assert version("setuptools") == _pinned("setuptools"), (
        "this venv's setuptools is not the one requirements.lock pins: run `make venv`")
    return wheel_build().wheel()


@pytest.fixture(scope="module")
def venv(wheel) -> Path:
    """A fresh venv (no system site-packages) with the wheel and its dependencies."""
    return wheel_build().venv()


def test_the_wheel_carries_every_file_kint_needs(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {p.relative_to(ROOT).as_posix() for p in (ROOT / "kint").rglob("*")
              if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    assert wanted - names == set(), "files under kint/ the wheel does not carry"
    for needed in ("kint/chain/artifacts/EpochAnchor.json", "kint/hermes_plugin/plugin.yaml",
                   "kint/hermes_plugin/__init__.py"):
        assert needed in names
    assert not [n for n in names if n.startswith(("tests/", "contracts/", "node_modules/"))]


def _machine(tmp_path: Path, venv: Path, path_extra: list[Path] = (), **env: str) -> dict:
    """The environment of a user's shell: the venv's bin on PATH, a HOME and KINT_HOME of its
    own, nothing of the checkout on any path."""
    (tmp_path / "home").mkdir()
    (tmp_path / "cwd").mkdir()
    path = [str(venv / "bin"), *map(str, path_extra), "/usr/local/bin", "/usr/bin", "/bin"]
    base = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TMPDIR")}
    return {**base, "PATH": os.pathsep.join(path), "HOME": str(tmp_path / "home"),
            "KINT_HOME": str(tmp_path / "kint"), "HERMES_HOME": str(tmp_path / "home" / ".hermes"),
            "SIBYL_MEMORY_TELEMETRY": "0",
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", **env}


def _kint(venv: Path, env: dict, cwd: Path, *args: str, group: subprocess.Popen | None = None,
          timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "kint"), *args], env=env, cwd=cwd, text=True,
                          capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          process_group=group.pid if group is not None else None)


def _no_anvil_on(path: str) -> bool:
    return shutil.which("anvil", path=path) is None


def _stop_for_sure(venv: Path, env: dict, cwd: Path, record: dict | None) -> None:
    """Teardown: stop through kint, then make sure the anvil this test started is gone."""
    _kint(venv, env, cwd, "devchain", "stop")
    if record and devchain.recorded_anvil_runs(record):
        os.kill(record["pid"], 9)


def test_installed_kint_runs_outside_the_checkout(tmp_path, venv):
    env = _machine(tmp_path, venv)
    cwd = tmp_path / "cwd"
    code = ("import json, sys, kint, kint.hermes_plugin as p\n"
            "from importlib import resources\n"
            "print(json.dumps({'kint': kint.__file__, 'path': sys.path, 'plugin': "
            "resources.files(p).joinpath('plugin.yaml').read_text()}))")
    out = json.loads(_run([str(venv / "bin" / "python"), "-c", code], env=env, cwd=cwd).stdout)
    assert Path(out["kint"]).is_relative_to(venv), out["kint"]
    assert not [p for p in out["path"] if p and Path(p).resolve().is_relative_to(ROOT)]
    assert "name: kint-sibyl" in out["plugin"]
    assert _kint(venv, env, cwd, "--version").returncode == 0
    assert (venv / "bin" / "kint-server").exists()


def test_installed_devchain_start_status_stop_twice(tmp_path, venv):
    """No anvil anywhere: an error naming how to install it. anvil on PATH (the npm
    package's shim, followed to its binary): start, status, and stop twice from a process
    group that survives; the record goes with the anvil."""
    cwd = tmp_path / "cwd"
    bare = _machine(tmp_path, venv)
    assert _no_anvil_on(bare["PATH"]), "this machine has an anvil on PATH outside the checkout"
    out = _kint(venv, bare, cwd, "devchain", "start")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert "kint: error: anvil was not found" in out.stderr
    assert f"npm install -g @foundry-rs/anvil@{devchain.ANVIL_VERSION}" in out.stderr
    assert "foundryup" in out.stderr and "KINT_ANVIL" in out.stderr
    kint_home = Path(bare["KINT_HOME"])
    assert not devchain_record(kint_home).exists()

    npm_bin = ROOT / "node_modules" / ".bin"
    assert (npm_bin / "anvil").exists(), "run `make node`"
    env = {**bare, "PATH": f"{bare['PATH']}{os.pathsep}{npm_bin}"}
    record = None
    sentinel = subprocess.Popen(["sleep", "300"], process_group=0)
    try:
        out = _kint(venv, env, cwd, "devchain", "start")
        assert out.returncode == 0, out.stdout + out.stderr
        status = _kint(venv, env, cwd, "devchain", "status", "--json")
        assert status.returncode == 0, status.stderr
        record = json.loads(status.stdout)
        package = devchain.anvil.platform_package()
        binary = ROOT / "node_modules" / "@foundry-rs" / package / "bin" / "anvil"
        assert record["anvil"] == str(binary)  # the binary itself, not node running the shim
        assert record["identity"]["cmdline"][0] == str(binary)
        assert record["state"] == str(state_path(kint_home))

        first = _kint(venv, env, cwd, "devchain", "stop", group=sentinel)
        assert first.returncode == 0 and first.stdout.strip() == "devchain stopped", first.stderr
        deadline = time.monotonic() + 10
        while pid_alive(record["pid"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pid_alive(record["pid"])
        assert not devchain_record(kint_home).exists()
        second = _kint(venv, env, cwd, "devchain", "stop", group=sentinel)
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip() == "no devchain was running"
        assert "Traceback" not in second.stderr
        status = _kint(venv, env, cwd, "devchain", "status", group=sentinel)
        assert status.returncode == 3 and "no devchain is running" in status.stderr
        assert sentinel.poll() is None, "kint devchain stop killed its caller's process group"
    finally:
        sentinel.kill()
        sentinel.wait()
        _stop_for_sure(venv, env, cwd, record)


def _start_supervisor(venv: Path, env: dict, root: Path) -> subprocess.Popen:
    """The test suite's supervisor (tests/support/run_supervisor.py: kint's own supervisor
    with Sibyl's real account gate trusting a test key), run by the fresh venv's Python from
    a copy of the support folder, so every line of kint it runs is the wheel's."""
    support = root / "support"
    shutil.copytree(SUPPORT, support, ignore=shutil.ignore_patterns("__pycache__"))
    log = open(root / "supervisor.err", "ab")
    proc = subprocess.Popen([str(venv / "bin" / "python"), str(support / "run_supervisor.py"),
                             "--home", env["KINT_HOME"]], env={**env, "PYTHONPATH": str(support)},
                            cwd=root / "cwd", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=log, start_new_session=True)
    log.close()
    return proc


def test_installed_kint_connects_pushes_and_verifies_on_its_own_devchain(tmp_path, venv):
    """`kint devchain start`, `kint connect --dev`, `kint push`, `kint verify`, and `kint
    devchain stop` twice, all through the installed kint, anvil given by KINT_ANVIL."""
    package = devchain.anvil.platform_package()
    anvil = ROOT / "node_modules" / "@foundry-rs" / package / "bin" / "anvil"
    assert anvil.exists(), "run `make node`"
    signer = sibyl_testing.TestSigner()
    env = _machine(tmp_path, venv, KINT_ANVIL=str(anvil),
                   KINT_TEST_TRUSTED_KEY=f"{signer.kid}:{signer.public_raw.hex()}")
    assert _no_anvil_on(env["PATH"])
    cwd = tmp_path / "cwd"
    home = Path(env["HOME"])
    kint_home = Path(env["KINT_HOME"])
    sibyl_testing.install_entitled_home(home, signer)
    client = sibyl_client(home / ".sibyl-memory" / "memory.db", sibyl_testing.TEST_ACCOUNT_ID)
    client.set_entity("rules", "release-gate", {"rule": RULE})
    client.write_event(acted=["wrote the release rule"], ts="2026-01-01T00:00:00Z")
    client.storage.close()

    record = None
    supervisor = None
    sentinel = subprocess.Popen(["sleep", "300"], process_group=0)
    try:
        out = _kint(venv, env, cwd, "devchain", "start")
        assert out.returncode == 0, out.stdout + out.stderr
        record = json.loads(_kint(venv, env, cwd, "devchain", "status", "--json").stdout)
        assert record["anvil"] == str(anvil)

        kint_home.chmod(0o700)
        supervisor = _start_supervisor(venv, env, tmp_path)
        deadline = time.monotonic() + 60
        while _kint(venv, env, cwd, "supervisor", "status").returncode != 0:
            assert supervisor.poll() is None, (tmp_path / "supervisor.err").read_text()
            assert time.monotonic() < deadline, "the supervisor did not start"
            time.sleep(0.2)

        connected = _kint(venv, env, cwd, "connect", "--dev", "--json")
        assert connected.returncode == 0, connected.stdout + connected.stderr
        pushed = _kint(venv, env, cwd, "push", "--json")
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr
        assert json.loads(pushed.stdout)["pushed"] >= 1
        verified = _kint(venv, env, cwd, "verify", "release rule", "--json")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert json.loads(verified.stdout)["decision"] == "proceed"
        plain = _kint(venv, env, cwd, "verify", "release rule")
        assert plain.returncode == 0, plain.stdout + plain.stderr

        stopped = _kint(venv, env, cwd, "supervisor", "stop")
        assert stopped.returncode == 0, stopped.stderr
        first = _kint(venv, env, cwd, "devchain", "stop", group=sentinel)
        assert first.returncode == 0 and first.stdout.strip() == "devchain stopped", first.stderr
        second = _kint(venv, env, cwd, "devchain", "stop", group=sentinel)
        assert second.returncode == 0 and second.stdout.strip() == "no devchain was running"
        assert sentinel.poll() is None, "kint devchain stop killed its caller's process group"
        assert not devchain_record(kint_home).exists()
    finally:
        sentinel.kill()
        sentinel.wait()
        if supervisor is not None:
            if supervisor.poll() is None:
                _kint(venv, env, cwd, "supervisor", "stop")
            if supervisor.poll() is None:
                supervisor.kill()
            supervisor.wait(timeout=30)
        _stop_for_sure(venv, env, cwd, record)
