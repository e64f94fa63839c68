"""kint's wheel and a fresh venv with it installed, built in the background for
tests/test_wheel.py from the moment a session has collected it.

Building the wheel and installing it with its dependencies into a fresh venv is ~8 s of
pip's work (~7 s of it CPU), all of it before test_wheel's first test, which runs last of
the suite's files. Started when collection ends (support/run_hooks.py's `pytest_collection_finish`),
under `nice`, it runs in the time the other tests spend waiting for their processes, and
yields the cores to them when they want them; test_wheel's fixtures wait for what is not
finished yet. What is built is what test_wheel built itself before: the same commands on a
copy of the checkout taken when the build starts.

- The wheel is built with the venv's pinned setuptools (`pip wheel --no-deps
  --no-build-isolation --no-index`), from a copy of pyproject.toml, README.md and kint/.
- It is installed with `pip install --no-index --find-links <wheelhouse> -c requirements.lock`:
  pip resolves the wheel's own declared dependencies, at the lock's versions, from the
  lock's wheelhouse (tests/wheelhouse.py). The fresh venv is made without pip of its own
  (this venv's pip installs into it with `pip --python`) and without compiling every module
  up front, since kint's runs compile what they import.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

from wheelhouse import wheelhouse

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
# Below every test's processes: the build takes what they leave.
NICE = ["nice", "-n", "10"] if shutil.which("nice") else []


class WheelBuild:
    """One background build in `work`: `wheel()` and `venv()` wait for their step and
    return its path, or raise with pip's own words when it failed."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self._wheel: Path | None = None
        self._venv: Path | None = None
        self._error: str | None = None
        self._wheel_done = threading.Event()
        self._done = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._stopped = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._build, name="wheel-build", daemon=True)

    def start(self) -> "WheelBuild":
        self._thread.start()
        return self

    def _run(self, argv: list[str], cwd: Path) -> None:
        with self._lock:
            if self._stopped:
                raise RuntimeError("the session ended before the build")
            self._proc = subprocess.Popen([*NICE, *argv], cwd=cwd, text=True,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE)
        out, err = self._proc.communicate(timeout=600)
        if self._proc.returncode != 0:
            raise RuntimeError(f"{argv}\n{out}\n{err}")

    def _build(self) -> None:
        try:
            src = self.work / "src"
            src.mkdir(parents=True)
            for path in (ROOT / "pyproject.toml", ROOT / "README.md", *ROOT.glob("LICENSE*")):
                shutil.copy2(path, src / path.name)
            shutil.copytree(ROOT / "kint", src / "kint",
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            self._run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                       "--no-build-isolation", "--no-index", "-w", str(self.work / "dist"),
                       str(src)], cwd=self.work)
            (self._wheel,) = (self.work / "dist").glob("kint-*.whl")
            self._wheel_done.set()
            venv = self.work / "venv"
            self._run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=self.work)
            self._run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                       "install", "--quiet", "--no-compile", "--no-index", "--find-links",
                       str(wheelhouse()), "-c", str(LOCK), str(self._wheel)], cwd=self.work)
            self._venv = venv
        except Exception as err:  # noqa: BLE001 - handed to the fixture that waits
            self._error = f"building kint's wheel and its venv failed: {err}"
        finally:
            self._wheel_done.set()
            self._done.set()

    def wheel(self) -> Path:
        self._wheel_done.wait()
        if self._wheel is None:
            raise AssertionError(self._error)
        return self._wheel

    def venv(self) -> Path:
        self._done.wait()
        if self._venv is None:
            raise AssertionError(self._error)
        return self._venv

    def stop(self) -> None:
        """At the session's end: a build still running is stopped, not left behind."""
        with self._lock:
            self._stopped = True
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()
        self._thread.join(timeout=30)
