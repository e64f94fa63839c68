"""The test process made hermetic as the suite starts, on this module's import (conftest
imports it before anything imports Sibyl): the run's folder (KINT_TESTS_RUN_ROOT, made by
the first process, the controller, and inherited by the xdist workers), every temporary
folder under it, a temporary HOME and KINT_HOME, SIBYL_MEMORY_TELEMETRY=0, never the real
OS keyring, and none of the caller's Sibyl, Hermes or kint space variables.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from support.run_folders import hold_run_lock, remove_abandoned_runs

# The worker's name under pytest-xdist ("gw0", ...); None in the controller or a plain run.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")

if "KINT_TESTS_RUN_ROOT" not in os.environ:
    os.environ["KINT_TESTS_RUN_ROOT"] = tempfile.mkdtemp(prefix="kt-")
    _RUN_LOCK_FD = hold_run_lock(Path(os.environ["KINT_TESTS_RUN_ROOT"]))
    remove_abandoned_runs(Path(os.environ["KINT_TESTS_RUN_ROOT"]))
RUN_ROOT = Path(os.environ["KINT_TESTS_RUN_ROOT"])
# The system's own temp folder, for the tests of what another user can do there.
SYSTEM_TMPDIR = str(RUN_ROOT.parent)
# Every temporary folder of the run goes under its folder, removed with it: a supervisor
# a test kills leaves its multiprocessing folder (pymp-*) and a long home's fallback
# socket folder (kint-<uid>-*) behind, which in the system's /tmp outlived the run.
# Short enough for the socket paths (kint.socket_paths.MAX_SOCKET_PATH_BYTES).
_RUN_TMP = RUN_ROOT / "tmp"
_RUN_TMP.mkdir(mode=0o700, exist_ok=True)
os.environ["TMPDIR"] = str(_RUN_TMP)
tempfile.tempdir = str(_RUN_TMP)
SESSION_ROOT = Path(tempfile.mkdtemp(prefix="kint-tests-"))
os.environ["HOME"] = str(SESSION_ROOT / "home")
os.environ["KINT_HOME"] = str(SESSION_ROOT / "kint-home-unused")
os.environ["SIBYL_MEMORY_TELEMETRY"] = "0"
# Never the real OS keyring: kint's machine secret falls back to local.secret in tests.
os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
for _var in ("SIBYL_MEMORY_DB", "SIBYL_CREDENTIALS", "HERMES_HOME", "KINT_SPACE", "KINT_TENANT"):
    os.environ.pop(_var, None)
(SESSION_ROOT / "home").mkdir()
