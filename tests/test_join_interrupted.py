"""`kint join` stopped by Ctrl-C (a real SIGINT) names the step it was at, as every other
refusal of join's does (docs/commands.md, "kint join"): `join stopped at <step>: ...
[INTERRUPTED]` on stderr, or under `--json` the refusal object with `step`, exit 130. A
step that waits on the worker (connect, restore) says the request goes on there.

One machine of the session's devchain with one epoch anchored, behind an RPC proxy
(tests/rpc_proxy.py) that holds the chain call the step waits on until the signal is sent.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import pytest

from chain_machines import kjson, machine_behind_proxy, owner_account, wallet_signature
from conftest import KINT, write_rules
from kint.custody.vault_message import canonical_payload

# How long a held chain call waits at most before it goes through anyway (a failing test
# ends); under the machine's RPC timeout, so a held call never times out.
HOLD_S = 40


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    root = tmp_path_factory.mktemp("join-interrupted")
    with machine_behind_proxy(root, chain_home, KINT_QUIET_SECONDS="3600",
                              KINT_RPC_TIMEOUT="60") as (sb, proxy):
        sb.owner = kjson(sb, "status")["owner"]
        write_rules(sb.sibyl_db, sb.tenant, release_gate="never ship on a Friday")
        assert kjson(sb, "push")["head_seq"] == 1
        payload = canonical_payload(sb.owner).decode()
        sb.signature = root / "signature"
        sb.signature.write_text(wallet_signature(owner_account(sb, sb.owner), payload) + "\n")
        yield sb, proxy


def _join(sb, *extra: str) -> subprocess.Popen[str]:
    with open(sb.signature) as signature:
        return subprocess.Popen([KINT, "join", "--owner", sb.owner, "--signature", "-",
                                 "--no-setup", *extra], env=sb.env, text=True,
                                stdin=signature, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)


def _running(sb, op: str, since: float) -> bool:
    """Whether the space's worker runs `op`, begun since `since` (time.monotonic())."""
    running = sb.row(sb.sibyl_db).get("op") or {}
    return running.get("name") == op and running["age_s"] <= time.monotonic() - since


@contextmanager
def _join_held_at_connect(sb, proxy, *extra: str
                          ) -> Iterator[tuple[subprocess.Popen[str], float]]:
    """`kint join` started with the chain's eth_getLogs held, once the space's worker runs
    its connect (which reads the head epoch's log) and waits there: the join and when it
    was sent. After the block the proxy forwards again and the join is gone."""
    proxy.set_mode("delay_methods", methods=["eth_getLogs"], seconds=HOLD_S)
    join = None
    try:
        sent = time.monotonic()
        join = _join(sb, *extra)
        sb.wait_for(lambda: _running(sb, "connect", sent), timeout=HOLD_S, interval=0.05,
                    what="the worker's connect, held at the head epoch's log")
        yield join, sent
    finally:
        proxy.forward()
        if join is not None:
            join.kill()


def _worker_done(sb, op: str) -> None:
    """Wait until the space's worker runs no op: the one a stopped join sent ended."""
    sb.wait_for(lambda: not (sb.row(sb.sibyl_db).get("op") or {}), timeout=60,
                what=f"the {op}'s end in the worker")


def _interrupted(join: subprocess.Popen[str]) -> tuple[str, str]:
    join.send_signal(signal.SIGINT)
    out, err = join.communicate(timeout=60)
    assert join.returncode == 130, (join.returncode, out, err)
    assert "Traceback" not in err and "Aborted" not in out + err, (out, err)
    return out, err


def test_ctrl_c_in_the_connect_step_names_it_in_the_json_refusal(machine):
    """The worker's connect reads the head epoch's log: held there, join waits on it."""
    with _join_held_at_connect(*machine, "--json") as (join, _):
        out, err = _interrupted(join)
    sb = machine[0]
    refusal = json.loads(out)
    assert refusal["error"] == "INTERRUPTED" and refusal["step"] == "connect", refusal
    assert "not the connect it sent" in refusal["message"], refusal
    assert "kint supervisor status" in refusal["hint"], refusal
    assert err == "", err
    # The connect goes on in the worker, and ends (the next test's join waits on nothing).
    _worker_done(sb, "connect")


def test_a_join_again_while_the_interrupted_connect_runs_names_what_runs(machine):
    """A user who stops join and runs it again at once meets the connect the first one
    sent, still running in the worker: the refusal names it (it said "a push, pull or
    connect", though nobody had sent a push), and a third join, once it ends, resumes."""
    sb = machine[0]
    with _join_held_at_connect(*machine) as (join, _):
        _interrupted(join)
        again = _join(sb)
        out, err = again.communicate(timeout=120)
    assert again.returncode == 2, (out, err)
    stopped, hint = err.splitlines()
    assert re.fullmatch(r"join stopped at connect: a connect is already running for this "
                        r"space \(for \d+ s\) \[BUSY\]", stopped), err
    assert hint == ("hint: wait for it to end (`kint supervisor status` shows it while it "
                    "runs), then try again"), err
    _worker_done(sb, "connect")
    resumed = _join(sb)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, (out, err)
    assert "data key from local wraps" in out, out


def test_ctrl_c_at_the_vault_step_names_it(machine):
    """The vault step's head read (the space's worker's `join_chain`, a read that changes
    nothing wherever it ends): Ctrl-C there names the step, and only says to run join
    again."""
    sb, proxy = machine
    seen = len(proxy.calls)
    proxy.set_mode("delay_methods", methods=["eth_call"], seconds=HOLD_S)
    join = None
    try:
        join = _join(sb)
        sb.wait_for(lambda: "eth_call" in proxy.calls[seen:], timeout=HOLD_S, interval=0.05,
                    what="join's head read")
        out, err = _interrupted(join)
    finally:
        proxy.forward()
        if join is not None:
            join.kill()
    assert out.splitlines()[-1].startswith("session key: "), out  # the step before
    assert err.splitlines() == ["join stopped at vault: interrupted (Ctrl-C) [INTERRUPTED]",
                                "hint: run the command again"], err


def test_ctrl_c_in_the_restore_step_names_it_and_a_second_join_resumes(machine):
    """The restore's pull walks from the head epoch's log: held there, join waits on it.
    The hold is taken twice: first at the connect's header read (so the switch cannot come
    after the pull has passed), then, once the connect is seen waiting, set again, which
    lets the connect's read through and holds the next one, the pull's. Ctrl-C there says
    the pull goes on in the worker; it ends whole, and a second join finds it done."""
    sb, proxy = machine
    with _join_held_at_connect(sb, proxy, "--discard-local") as (join, sent):
        proxy.set_mode("delay_methods", methods=["eth_getLogs"], seconds=HOLD_S)
        sb.wait_for(lambda: _running(sb, "pull", sent), timeout=HOLD_S, interval=0.05,
                    what="the worker's pull, held at the head epoch's log")
        out, err = _interrupted(join)
    assert out.splitlines()[-1].startswith("connected: key tag "), out  # the step before
    assert err.splitlines() == [
        "join stopped at restore: interrupted (Ctrl-C): this command stopped waiting, not "
        "the pull it sent, which the space's worker runs to its end [INTERRUPTED]",
        "hint: `kint supervisor status` shows it while it runs; `kint status` says where the "
        "space stands after"], err
    _worker_done(sb, "pull")
    status = kjson(sb, "status")
    assert status["head"]["seq"] == status["chain_head"]["seq"] == 1, status
    assert status["restore_in_progress"] is None and status["interrupted_pull"] is None, status
    again = _join(sb)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, (out, err)
    assert "data key from local wraps" in out, out
    assert "restore: up to date; head seq 1 " in out, out


@pytest.mark.parametrize("as_json", [False, True], ids=["plain", "json"])
def test_ctrl_c_at_the_secret_prompt_names_the_connect_step(machine, as_json):
    """join asks for the vault passphrase before its first step: Ctrl-C there names the step
    the passphrase is for, as every other stop of join's names one (it was the generic
    refusal, with no step). The command runs in a session of its own, with no terminal:
    getpass then prompts on stderr and reads stdin, which the test keeps open and empty."""
    sb, _proxy = machine
    join = subprocess.Popen([KINT, "join", "--owner", sb.owner, "--base-account", "--no-setup",
                             *(["--json"] if as_json else [])], env=sb.env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    said = bytearray()
    reader = threading.Thread(target=_read_into, args=(join.stderr, said), daemon=True)
    reader.start()
    try:
        sb.wait_for(lambda: b"vault passphrase: " in said, timeout=60, interval=0.05,
                    what="join's passphrase prompt")
        join.send_signal(signal.SIGINT)
        join.wait(timeout=60)
        reader.join(timeout=10)  # stderr is the reader's alone: communicate() would share it
        out = join.stdout.read()
    finally:
        join.kill()
    err = said.decode()
    assert join.returncode == 130, (join.returncode, out, err)
    assert "Traceback" not in err and "Aborted" not in err, err
    if as_json:
        refusal = json.loads(out)
        assert refusal == {"error": "INTERRUPTED", "message": "interrupted (Ctrl-C)",
                           "hint": "run the command again", "step": "connect"}, refusal
    else:
        assert out == b"", out
        assert err.splitlines()[-2:] == [
            "join stopped at connect: interrupted (Ctrl-C) [INTERRUPTED]",
            "hint: run the command again"], err


def _read_into(stream, said: bytearray) -> None:
    while chunk := os.read(stream.fileno(), 4096):
        said += chunk
