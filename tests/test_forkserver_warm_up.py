"""The worker forkserver imports its preload in the background (kint/supervisor/spawner.py):
the supervisor binds and answers first, and a worker asked for meanwhile starts once the
preload is done, never from a forkserver still importing. A preload module the forkserver
could not import is named in the supervisor's log, its status and `kint doctor`, where
multiprocess' forkserver skips it without a word."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import make_sandbox, pid_alive, support_first, wait_until, write_store
from kint.supervisor.pidlock import running_pid

SUPPORT = Path(__file__).parent / "support"


def _start(sb, *preload: str) -> None:
    # The tree under test stays on the path (a checkout other than the editable install's).
    sb.env["PYTHONPATH"] = support_first(sb.env.get("PYTHONPATH", ""))
    sb.kint_home.mkdir(mode=0o700, exist_ok=True)
    with open(sb.root / "supervisor.err", "ab") as err:
        subprocess.Popen([sys.executable, str(SUPPORT / "run_supervisor_preloading.py"),
                          "--home", str(sb.kint_home), "--preload", ",".join(preload)],
                         env=sb.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=err, start_new_session=True)
    sb.wait_for(lambda: sb.client().ping(0.5), interval=0.02, what="the supervisor")


def _importing(sb, hold: Path) -> tuple[int, int]:
    """`sb`'s supervisor started with its forkserver's preload held until `hold` exists:
    the forkserver's pid, once it reached the held import (its heavier ones first: the
    warm-up's request was sent as it started), and the supervisor's."""
    _start(sb, "held_preload")
    importing = Path(f"{hold}.forkserver")
    forkserver = int(sb.wait_for(lambda: importing.exists() and importing.read_text(),
                                 timeout=60, what="the forkserver importing"))
    supervisor = running_pid(sb.kint_home)
    assert supervisor is not None
    return forkserver, supervisor


@contextmanager
def _preload_held(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    """A sandbox whose supervisor's forkserver will hold its preload until the yielded
    file exists; on the way out the preload is let go and the sandbox shut down."""
    sb = make_sandbox(tmp_path / "machine")
    hold = tmp_path / "let-the-preload-go"
    sb.env["KINT_TEST_PRELOAD_HOLD"] = str(hold)
    try:
        yield sb, hold
    finally:
        hold.touch()
        sb.shutdown()


def _forkserver(sb) -> dict:
    return sb.sup_status()["supervisor"]["forkserver"]


def test_the_supervisor_answers_while_its_forkserver_imports_and_starts_a_worker_after(
        tmp_path):
    with _preload_held(tmp_path) as (sb, hold):
        _start(sb, "held_preload")
        # Answering with the preload held: it was bound before the forkserver was ready.
        assert _forkserver(sb) == {"ready": False, "missing_preload": []}
        answer: dict = {}
        asked = threading.Thread(target=lambda: answer.update(
            sb.call("status", db=sb.sibyl_db, timeout_s=60)))
        asked.start()
        row = wait_until(lambda: next((r for r in sb.sup_status()["spaces"]
                                       if r["waiting"]), None))
        # The request waits for a worker that is not forked yet.
        assert row["state"] == "starting" and row["pid"] is None, row
        assert _forkserver(sb)["ready"] is False
        hold.touch()
        asked.join(60)
        assert answer.get("worker", {}).get("pid"), answer
        assert _forkserver(sb) == {"ready": True, "missing_preload": []}
        assert sb.row(sb.sibyl_db)["pid"] == answer["worker"]["pid"]


def test_a_sandboxes_first_request_for_a_space_waits_for_the_forkserver(tmp_path):
    """A supervisor the suite started (Sandbox.start, start_entitled: `fresh`) is sent the
    test's first request for a space only once its forkserver is ready (Sandbox.warmed), so
    that request never carries the warm-up: a loaded box's warm-up took such requests past
    their 10 s bound (session 38). The wait is the test's, the supervisor is not asked."""
    answer: dict = {}
    with _preload_held(tmp_path) as (sb, hold):
        _importing(sb, hold)
        sb.fresh = True  # as a start leaves it
        asked = threading.Thread(target=lambda: answer.update(
            sb.call("status", db=sb.sibyl_db)), daemon=True)
        asked.start()
        # Held, the forkserver cannot be ready: a call that did not wait for it has sent
        # its request by now (one status later), and its space would be waiting for it.
        asked.join(2)
        assert asked.is_alive() and not answer, answer
        status = sb.sup_status()
        assert status["supervisor"]["forkserver"]["ready"] is False
        assert status["spaces"] == [], status["spaces"]
        hold.touch()
        asked.join(60)
        # Sent once it was ready, the first worker's start a fork within the default bound.
        assert answer.get("worker", {}).get("pid"), answer
        assert sb.fresh is False


def _kint_children() -> list[int]:
    """This process's children running the `kint` command (a `Sandbox.kint`)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue  # not a process, or gone
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and any(arg.endswith(b"/kint") for arg in argv[:2]):
            found.append(int(entry.name))
    return found


def test_a_sandboxes_first_kint_command_on_a_space_waits_for_the_forkserver(tmp_path):
    """The same wait for a first `kint` command on a space (Sandbox.kint, `status` here):
    the command is started only once the forkserver is ready, so that its first request
    never carries the warm-up, which a loaded box took past the command's start bound
    (flake39). A command on no space (`supervisor status`) does not wait."""
    done: dict = {}
    with _preload_held(tmp_path) as (sb, hold):
        write_store(sb.sibyl_db)
        _importing(sb, hold)
        sb.fresh = True  # as a start leaves it
        shown = sb.kint("supervisor", "status")
        assert shown.returncode == 0 and sb.fresh is True, shown.stderr
        asked = threading.Thread(target=lambda: done.update(
            out=sb.kint("status", "--json")), daemon=True)
        asked.start()
        # Held, the forkserver cannot be ready: a command that did not wait for it was
        # started at once (a fork), and runs on, its space waiting for a worker.
        asked.join(2)
        assert asked.is_alive() and not done and not _kint_children(), done
        assert sb.sup_status()["spaces"] == []
        hold.touch()
        asked.join(90)
        out = done["out"]
        assert out.returncode == 0, out.stdout + out.stderr
        assert json.loads(out.stdout)["worker"]["pid"], out.stdout
        assert sb.fresh is False


def test_a_preload_module_the_forkserver_cannot_import_is_named(tmp_path):
    sb = make_sandbox(tmp_path / "machine")
    try:
        _start(sb, "kint_no_such_preload")
        forkserver = wait_until(lambda: (lambda f: f if f["ready"] else None)(_forkserver(sb)))
        assert len(forkserver["missing_preload"]) == 1, forkserver
        assert forkserver["missing_preload"][0].startswith(
            "kint_no_such_preload (ModuleNotFoundError: "), forkserver
        log = (sb.kint_home / "supervisor.log").read_text()
        assert "the worker forkserver could not import kint_no_such_preload" in log, log
        # A worker still starts and serves, without it.
        assert sb.call("status", db=sb.sibyl_db, timeout_s=60)["worker"]["pid"]
        out = sb.kint("doctor", "--json")
        reachable = next(c for c in json.loads(out.stdout)["checks"]
                         if c["name"] == "supervisor reachable")
        assert reachable["ok"] and reachable.get("warn"), reachable
        assert "kint_no_such_preload" in reachable["detail"], reachable
        # kint is not on PyPI: the reinstall names this checkout, never the bare name.
        checkout = Path(__file__).resolve().parent.parent
        assert f"pip install --force-reinstall {checkout}`" in reachable["hint"], reachable
    finally:
        sb.shutdown()


def test_a_supervisor_stopped_while_its_forkserver_imports_ends_it(tmp_path):
    """Stopped while the worker forkserver still imports (a stop right after the start;
    unheld, one time in three): the forkserver is gone with the supervisor, its import
    never let go. Before, it imported on to the end (most of a second of CPU, seconds on
    a loaded box) for no worker, then forked the warm-up's child, long after the stop."""
    sb = make_sandbox(tmp_path / "machine")
    hold = tmp_path / "let-the-preload-go"
    sb.env["KINT_TEST_PRELOAD_HOLD"] = str(hold)
    try:
        forkserver, supervisor = _importing(sb, hold)
        # `sup.stop` alone: the sandbox's own stop kills what is left of the supervisor's
        # process group 10 s after the supervisor is gone, a forkserver still importing
        # with it.
        sb.call("sup.stop", timeout_s=60)
        sb.wait_for(lambda: not pid_alive(supervisor), what="the supervisor gone")
        # The hold is let go only below (held_preload gives up by itself after 60 s): a
        # forkserver still here imports until then.
        sb.wait_for(lambda: not pid_alive(forkserver), timeout=30,
                    what="the forkserver gone, its import still held")
    finally:
        hold.touch()
        sb.shutdown()
    said = (sb.root / "supervisor.err").read_text()
    assert "Traceback" not in said, said


def test_a_supervisor_stopped_while_its_forkserver_imports_leaves_no_traceback(tmp_path):
    """The warm-up's child outlives the supervisor, and its answer meets a closed pipe. In
    life the forkserver had already forked that child as the stop came: the stop's SIGTERM
    ends the forkserver, not the child. Here the forkserver ignores the SIGTERM and forks
    the child once the supervisor is gone: the warm-up's request waits in its socket, and
    the descriptors it carries keep the forkserver from seeing the supervisor gone. That
    child now ends quietly; before, its BrokenPipeError traceback landed on the supervisor's
    raw stderr, which the next start kept as run/supervisor.stderr.1 as if a death's last
    words. The preload is held here until the supervisor is gone."""
    sb = make_sandbox(tmp_path / "machine")
    hold = tmp_path / "let-the-preload-go"
    sb.env["KINT_TEST_PRELOAD_HOLD"] = str(hold)
    sb.env["KINT_TEST_PRELOAD_HOLD_KEEPS_ON"] = "1"
    try:
        forkserver, supervisor = _importing(sb, hold)
        sb.shutdown()
        sb.wait_for(lambda: not pid_alive(supervisor), what="the supervisor gone")
    finally:
        hold.touch()
        sb.shutdown()
    # It forks the warm-up's child, which holds it until that child has ended.
    sb.wait_for(lambda: not pid_alive(forkserver), timeout=60,
                what="the forkserver gone with its first child")
    said = (sb.root / "supervisor.err").read_text()
    assert "Traceback" not in said and "BrokenPipeError" not in said, said
