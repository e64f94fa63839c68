"""Shared test set-up: every test runs hermetic. Each concern is a module of tests/support/;
this file orders them (the process made hermetic before anything imports Sibyl), registers
their fixtures and hooks, and names the helpers the tests import from it.

- The test process itself gets a temporary HOME and KINT_HOME before anything imports
  Sibyl, and SIBYL_MEMORY_TELEMETRY=0 (support/run_env.py; the run's folder and the
  clean-up of a killed run's, support/run_folders.py).
- Sibyl's own network guard is on for every test, and a test that tried to leave
  127.0.0.1 fails even if it swallowed the refusal (support/hermetic.py).
- A `Sandbox` is one machine: its own HOME, KINT_HOME and HERMES_HOME, real Sibyl stores,
  and a real supervisor started through the real `kint` command (support/sandboxes.py;
  the stores, support/stores.py).
- What kint.settings holds for the whole process (whether it is the daemon's, its
  KINT_HOME, its space) is put back after each test: a Supervisor built in-process says
  it is the daemon's (tests/support/settings_kept.py).
- A failed test says so when kint's own files changed since the session started, which
  stops every supervisor the tests started (tests/checkout_watch.py; the session's hooks,
  support/run_hooks.py).
- `make test` runs the suite in two pytest-xdist workers (`--dist loadfile`: a file's tests
  in one worker, its module fixtures made once; the longest files first,
  support/file_order.py). They share one devchain, the run's one
  anvil, started by the first worker that needs it and stopped by the controller at the
  end. A test that moves the chain under everyone (a reorganisation, automine off, time
  moved on) or reads it as still (no block mined meanwhile) is marked `chain_exclusive`
  and runs while no other test of the chain runs (support/devchain_turn.py).
"""

from __future__ import annotations

import os
import sys

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

# The modules that were this file's have their asserts rewritten as its own were, so a
# failed set-up (a supervisor that did not start) says what it found.
pytest.register_assert_rewrite("support.run_folders", "support.run_env", "support.stores",
                               "support.sandboxes", "support.devchain_turn",
                               "support.run_hooks", "support.hermetic")

# The process made hermetic before anything imports Sibyl (support/run_env.py's import).
from support.run_env import SYSTEM_TMPDIR, XDIST_WORKER  # noqa: E402

from support.devchain_turn import chain_home, pytest_runtest_protocol  # noqa: E402
from support.file_order import pytest_collection_modifyitems  # noqa: E402
from support.hermetic import (network_guard, real_home_untouched,  # noqa: E402
                              settings_process_kept)
from support.procs import let_go_on, pid_alive  # noqa: E402
from support.run_folders import (DEVCHAIN_KINT_HOME, RUN_LOCK, hold_run_lock,  # noqa: E402
                                 remove_abandoned_runs)
from support.run_hooks import (checkout, pytest_collection_finish,  # noqa: E402
                               pytest_configure, pytest_runtest_makereport,
                               pytest_sessionfinish, pytest_terminal_summary, wheel_build)
from support.sandboxes import (CLOSED_PORT_URL, KINT, SUPPORT, Sandbox,  # noqa: E402
                               kint_copy, kint_loading, make_sandbox, sandbox, serving,
                               support_first)
from support.stores import TENANT, dated_back, sibyl_client, write_rules, write_store  # noqa: E402
from support.waiting import wait_until  # noqa: E402

# What the tests import from here, and the fixtures and hooks pytest finds here.
__all__ = [
    "SYSTEM_TMPDIR", "XDIST_WORKER",
    "chain_home", "pytest_runtest_protocol", "pytest_collection_modifyitems",
    "network_guard", "real_home_untouched", "settings_process_kept",
    "let_go_on", "pid_alive",
    "DEVCHAIN_KINT_HOME", "RUN_LOCK", "hold_run_lock", "remove_abandoned_runs",
    "checkout", "pytest_collection_finish", "pytest_configure", "pytest_runtest_makereport",
    "pytest_sessionfinish", "pytest_terminal_summary", "wheel_build",
    "CLOSED_PORT_URL", "KINT", "SUPPORT", "Sandbox", "kint_copy", "kint_loading",
    "make_sandbox", "sandbox", "serving", "support_first",
    "TENANT", "dated_back", "sibyl_client", "write_rules", "write_store",
    "wait_until",
]
