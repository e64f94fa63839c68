"""What a day of using kint from the command line found (session 19's dogfood lane), each
case on the one machine this module shares: a real supervisor started by `kint
supervisor start`, a real Sibyl store, and a second process that holds SQLite's lock on
that store when a test needs a request of the worker's to stay in flight (the worker's
read waits out SQLite's busy timeout, 2 s, then answers BUSY).

- Ctrl-C while a command waits on its worker: a refusal with its code (`INTERRUPTED`),
  a hint and exit 130, saying that the worker goes on with the request (a push goes on
  anchoring), where click printed a bare `Aborted!` and exited 1, the status of verify's
  refusal; under `--json`, the refusal object on stdout.
- `kint supervisor stop` while a worker runs a request: the worker finishes it before it
  exits (a push it was anchoring lands), so its client gets the worker's answer, not
  "the supervisor is stopping", which told a `kint push` whose epoch had landed that it
  failed, with a hint that the worker was being restarted.
- A refusal of Sibyl's (SIBYL_ERROR: its account gate, its cap) carries the lines about
  settings of the call that were not used, as kint's own refusals do.
- A supervisor that runs and does not answer (SIGSTOP) is named, with its pid and how to
  resume or end it, by `supervisor status`, `reload`, `stop` and doctor, none of which
  calls it absent any more.
- An RPC that fails on the way (silent, unreachable) is said in words, naming the setting
  that bounds the wait, not only by the library's class name.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import KINT
from kint.client import KintError

# Takes SQLite's exclusive lock on the store (argv[1]) with a write, says so, and keeps it
# until its stdin closes (as tests/test_locked_store.py holds it). The write changes the
# file each time, so the worker reads the store again rather than answer from its counts.
_LOCKER = ("import sqlite3, sys\n"
           "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
           "c.execute('PRAGMA locking_mode=EXCLUSIVE')\n"
           "c.execute('BEGIN EXCLUSIVE')\n"
           "c.execute('CREATE TABLE IF NOT EXISTS kint_test_lock (x)')\n"
           "c.execute('INSERT INTO kint_test_lock VALUES (1)')\n"
           "c.execute('COMMIT')\n"
           "print('locked', flush=True)\n"
           "sys.stdin.read()\n")


class Locked:
    """`db` held locked by another process until `release`."""

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _LOCKER, str(db)], text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "locked\n"

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    from conftest import make_sandbox, write_store

    sb = make_sandbox(tmp_path_factory.mktemp("dogfood19"))
    write_store(sb.sibyl_db)
    sb.start()
    yield sb
    sb.shutdown()


def _op_in_flight(sb, op: str, since: float) -> bool:
    """Whether the space's worker runs `op`, begun since `since` (time.monotonic()): not
    the one an earlier test left running, which its worker finishes after its client went
    away."""
    rows = [r for r in sb.sup_status()["spaces"] if r["store"] == str(sb.sibyl_db)]
    running = (rows[0].get("op") or {}) if rows else {}
    return running.get("name") == op and running["age_s"] <= time.monotonic() - since


# How many times the Ctrl-C test sends its status again when the worker's read answered
# BUSY (its 2 s wait on the lock over) before the test saw the op in flight and signalled:
# a box loaded enough to delay the beat that shows it past that wait, not a finding.
CTRL_C_TRIES = 4


def _interrupted_status(sb, as_json: bool) -> tuple[subprocess.Popen, str, str]:
    """A `kint status` sent while the store is locked, Ctrl-C'd once its worker runs it:
    the process, its stdout and stderr. Sent again when the window closed first (the
    command ended on its own with the store's BUSY before the signal): only then."""
    for _ in range(CTRL_C_TRIES):
        sent = time.monotonic()
        proc = subprocess.Popen([KINT, "status", *(["--json"] if as_json else [])],
                                env=sb.env, text=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        sb.wait_for(lambda: proc.poll() is not None or _op_in_flight(sb, "status", sent),
                    interval=0.02, what="the status op in flight")
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        if proc.returncode == 130 or "is locked by another process" not in out + err:
            return proc, out, err
    raise AssertionError(f"the status answered BUSY before its Ctrl-C {CTRL_C_TRIES} times")


@pytest.mark.parametrize("as_json", [False, True], ids=["plain", "json"])
def test_ctrl_c_while_waiting_on_the_worker_says_it_goes_on_and_exits_130(machine, as_json):
    sb = machine
    lock = Locked(sb.sibyl_db)  # `kint status` waits on the store's lock in the worker
    try:
        proc, out, err = _interrupted_status(sb, as_json)
    finally:
        lock.release()
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert "Aborted" not in out + err and "Traceback" not in err, (out, err)
    said = "this command stopped waiting, not the status it sent"
    if as_json:
        refusal = json.loads(out)
        assert refusal["error"] == "INTERRUPTED" and said in refusal["message"], refusal
        assert "kint supervisor status" in refusal["hint"], refusal
        assert err == "", err
    else:
        message, hint = err.splitlines()
        assert message.startswith("kint: error: interrupted (Ctrl-C): " + said), err
        assert message.endswith(" [INTERRUPTED]") and hint.startswith("hint: "), err


def test_a_stop_lets_the_request_its_worker_runs_answer(machine):
    sb = machine
    if not _alive(sb):
        sb.start()
    sb.call("status", db=sb.sibyl_db)  # the space's worker runs, ready
    lock = Locked(sb.sibyl_db)
    box: dict[str, Any] = {}

    def status() -> None:
        try:
            # With the chain's lines (as `kint status` asks): on the worker's pool, so its
            # beat shows it in flight; the plain status runs on the thread that beats.
            box["result"] = sb.call("status", db=sb.sibyl_db, timeout_s=60,
                                    args={"chain": True})
        except KintError as err:
            box["error"] = err

    try:
        asking = threading.Thread(target=status)
        sent = time.monotonic()
        asking.start()
        sb.wait_for(lambda: _op_in_flight(sb, "status", sent), interval=0.02,
                    what="the status op in flight")
        sb.call("sup.stop", timeout_s=60)
        asking.join(60)
    finally:
        lock.release()
    err = box.get("error")
    # The worker's own answer: the store is locked (BUSY), which a user can act on; before,
    # the supervisor answered WORKER_DOWN "the supervisor is stopping" at once, whatever
    # the worker then did.
    assert err is not None and err.code == "BUSY", (box, getattr(err, "message", None))
    assert "is locked by another process" in err.message, err.message


def _alive(sb) -> bool:
    from kint.supervisor.pidlock import running_pid

    return running_pid(sb.kint_home) is not None


@pytest.mark.parametrize("as_json", [False, True], ids=["plain", "json"])
def test_a_refusal_of_sibyls_carries_the_notices_of_the_call(machine, as_json):
    """A setting of the command's environment that the call does not use is said on every
    answer, a refusal's too (docs/commands.md: `notices`); Sibyl's own refusals (here its
    account gate: the machine has no Sibyl account) lost them."""
    out = machine.kint("verify", "release rule", *(["--json"] if as_json else []),
                       env={"KINT_QUIET_SECONDS": "later"})
    notice = "kint: KINT_QUIET_SECONDS='later' in this environment is not a number"
    if as_json:
        refusal = json.loads(out.stdout)
        assert refusal["error"] == "SIBYL_ERROR", refusal
        assert any(line.startswith(notice) for line in refusal.get("notices", [])), refusal
    else:
        assert "[SIBYL_ERROR]" in out.stderr, out.stderr
        assert notice in out.stderr, out.stderr
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)


def test_a_stopped_supervisor_is_named_not_called_absent(machine):
    """A supervisor stopped with SIGSTOP (or stuck) holds its pid lock and says it serves:
    `supervisor status` said "no supervisor is running" (exit 3), which sends the user to
    start one; `reload` the same; doctor said to `kint supervisor start`; `stop` waited its
    whole minute for an answer. Each now names the pid and how to resume or end it."""
    from conftest import SUPPORT
    from kint.supervisor.pidlock import running_pid

    sb = machine
    if not _alive(sb):
        sb.start()
    pid = running_pid(sb.kint_home)
    said = f"the supervisor (pid {pid}) runs but does not answer"
    resume = f"`kill -CONT {pid}` resumes it"
    os.kill(pid, signal.SIGSTOP)
    try:
        # All at once: each waits a second or two on the silent socket. `run_kint.py` cuts
        # the stop's 10 s of silence before it says so to 1 s.
        running = {name: subprocess.Popen(argv, env={**sb.env,
                                                     "KINT_TEST_UNREACHABLE_AFTER_S": "1"},
                                          text=True, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                   for name, argv in {
                       "status": [KINT, "supervisor", "status"],
                       "json": [KINT, "supervisor", "status", "--json"],
                       "reload": [KINT, "supervisor", "reload"],
                       "doctor": [KINT, "doctor", "--json"],
                       "stop": [sys.executable, str(SUPPORT / "run_kint.py"), "supervisor",
                                "stop"]}.items()}
        done = {name: (proc.communicate(timeout=60), proc.returncode)
                for name, proc in running.items()}
    finally:
        os.kill(pid, signal.SIGCONT)
    outs = {name: subprocess.CompletedProcess([], code, out, err)
            for name, ((out, err), code) in done.items()}
    status, as_json, reload, doctor, stop = (outs[n] for n in ("status", "json", "reload",
                                                               "doctor", "stop"))
    assert status.returncode == 1, (status.returncode, status.stderr)
    assert said in status.stderr and resume in status.stderr, status.stderr
    assert "[SUPERVISOR_UNAVAILABLE]" in status.stderr, status.stderr
    refusal = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and said in refusal["message"], as_json
    assert reload.returncode == 2 and said in reload.stderr, reload
    reachable = next(c for c in json.loads(doctor.stdout)["checks"]
                     if c["name"] == "supervisor reachable")
    assert not reachable["ok"] and said in reachable["detail"], reachable
    # Stopped, a plain `kill PID` (SIGTERM) would pend until it is continued.
    way_out = f"`kill -CONT {pid}` resumes it; `kill -KILL {pid}` ends it now"
    assert reachable["hint"].startswith(way_out), reachable
    assert way_out in status.stderr and f"`kill {pid}`" not in status.stderr, status.stderr
    assert stop.returncode == 2 and said in stop.stderr, (stop.returncode, stop.stderr)
    assert running_pid(sb.kint_home) == pid  # resumed, it serves on
    assert sb.call("sup.ping")["pid"] == pid


@pytest.mark.parametrize("raised,said", [
    ("ReadTimeout", "the endpoint did not answer within KINT_RPC_TIMEOUT (ReadTimeout)"),
    ("ConnectionError", "the endpoint could not be reached (ConnectionError)"),
], ids=["silent", "unreachable"])
def test_an_endpoint_that_fails_is_said_in_words(raised, said):
    """`kint pull` over a silent RPC said `reading the head: ReadTimeout`: the library's
    class name, not what happened or which setting bounds the wait."""
    import requests

    from kint.chain.calls import bounded
    from kint.chain.rpc import RpcUnavailable

    def call() -> None:
        raise getattr(requests.exceptions, raised)("from the transport")

    with pytest.raises(RpcUnavailable) as refused:
        bounded(call, "reading the head")
    assert str(refused.value) == f"reading the head: {said}"
