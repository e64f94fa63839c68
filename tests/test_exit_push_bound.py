"""A closing kint-server's exit push had no bound of its own past its wait for the space's
turn: the push it made went on, epoch after epoch, past the supervisor's deadline for it
(which answered TIMEOUT and dropped its reply, the push going on unseen), and a stop of
the worker cut it wherever its grace ended. Its bound is now read once as it begins and
carried with the work (kint/tenant_worker/exit_bound.py): it starts no epoch past it, nor
once the worker's stop began, and says once, in its log line, what it anchored and that
the other rows stay in the store for the next push.

Real parts: the devchain's anvil behind a loopback RPC proxy (tests/rpc_proxy.py) that
holds the exit push's first transaction (`delay_methods`, let go by the test), the test
supervisor and the space's worker, a real kint-server over stdio (tests/mcp_session.py)
that writes through its tool and closes, rows of random bytes (two epochs' worth at the
split) written through Sibyl's own client. The worker's bound is shortened through the
environment (tests/support/kint_test_timings.py: KINT_TEST_EXIT_BOUND_S, and the room for an
epoch, KINT_TEST_EXIT_EPOCH_ROOM_S) so a test waits a minute, not 900 s.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from chain_machines import machine_behind_proxy
from conftest import write_store
from mcp_session import AgentProcess, a_session_writes_and_closes, exit_push_said

WAIT = {"timeout": 90, "interval": 0.1}
HOLD = {"methods": ["eth_sendRawTransaction"], "seconds": 120}
BOUND_S = 60
# The room kept for an epoch (under half the bound, so it is the room, not the cap): the
# first epoch's send is held until less than this is left of the bound, then let go, so it
# lands inside the bound, its receipt wait ending at it (AnchorWrites.wait's `until`), and
# no second starts.
ROOM_S = 25
# What is left of the cached data key as the exit push begins: far less than the 24 h a
# push's renewal gives it (KINT_KEY_TTL's default).
KEY_LEFT_S = 3600
SHORT = {"KINT_RPC_TIMEOUT": "60", "KINT_TEST_EXIT_BOUND_S": str(BOUND_S),
         "KINT_TEST_EXIT_EPOCH_ROOM_S": str(ROOM_S)}
CUT = re.compile(r"exit push: anchored (\d+) row change\(s\) in 1 of (\d+) epoch\(s\), head "
                 r"epoch 1 at block \d+; stopped before the next: (.*); the other (\d+) row "
                 r"change\(s\) stay in the store, unanchored, for the next push")


@contextmanager
def _exit_push_held_at_its_first_epoch(sb, proxy) -> Iterator[tuple[Path, float]]:
    """Four rows of random bytes (more than one epoch holds) in the store before a
    kint-server with no watcher attaches; a row written through it; the cached data key
    given an hour left (`KEY_LEFT_S`); its close asks for the exit push, whose first
    transaction the proxy holds. Yields the supervisor's log and when (monotonic) the held
    send was seen, after the exit push began; the hold is let go at the end."""
    db = sb.sibyl_db
    write_store(db, {f"blob-{i}": {"hex": os.urandom(40_000).hex()} for i in range(4)},
                tenant=sb.tenant)
    closing = AgentProcess({**sb.env, "KINT_NO_WATCHER": "1"}).start()
    try:
        sb.wait_for(lambda: closing.call("memory_pull")["ok"],
                    what="the server's start-up pull ended", **WAIT)
        assert closing.call("memory_remember", category="notes", name="exit-push",
                            body={"text": "written by the closing session"})["ok"] is True
        _key_left(sb, KEY_LEFT_S)
        proxy.set_mode("delay_methods", **HOLD)
        seen = len(proxy.calls)
    finally:
        closing.close()  # asks the worker for its exit push
    try:
        sb.wait_for(lambda: "eth_sendRawTransaction" in proxy.calls[seen:],
                    what="the exit push's first epoch at its send", **WAIT)
        yield sb.kint_home / "supervisor.log", time.monotonic()
    finally:
        proxy.forward()


def _space_id(sb) -> str:
    (enrolment,) = sb.kint_home.glob("enrol-*.json")
    return json.loads(enrolment.read_text())["space"]


def _key_left(sb, seconds: float) -> None:
    """The space's cached data key sealed again with `seconds` left of it."""
    from kint.custody.vault_cache import cache_data_key, read_cached_key

    space = _space_id(sb)
    cache_data_key(sb.kint_home, space, read_cached_key(sb.kint_home, space).dek,
                   ttl=seconds)


def _key_expires_at(sb) -> float:
    from kint.custody.vault_cache import read_cached_key

    return read_cached_key(sb.kint_home, _space_id(sb)).expires_at


def _unanchored(sb) -> dict:
    return sb.call("status", sb.sibyl_db, args={"chain": True},
                   timeout_s=60)["unanchored_changes"]


def test_the_exit_push_starts_no_epoch_past_its_bound_and_leaves_the_rest_said(
        tmp_path, chain_home):
    """The exit push's first epoch is held at its send until less of the push's bound is
    left than the room kept for an epoch: let go, it lands and is recorded, and the push
    stops before its second, its line saying what it anchored, why it stopped and how many
    rows stay in the store, which still counts them unanchored; the data key it anchored
    with is renewed, as a whole push's is, for the rows it left. Without the bound it sent
    the second epoch too; without the renewal the key kept its hour, and could lapse before
    the next push came. (Held past the bound itself, the epoch's receipt wait now ends at
    once, its journal left to the next settlement: tests/test_exit_push_deadline.py.)"""
    with machine_behind_proxy(tmp_path / "m", chain_home, **SHORT) as (sb, proxy):
        db = sb.sibyl_db
        with _exit_push_held_at_its_first_epoch(sb, proxy) as (log_path, seen_at):
            # The bound began before the send was seen, so less than the room is left of it
            # by then: the clock read against the event, not a guess at how long a step
            # takes. What is left is the landing's (a box that took more than that to
            # reach the send cuts the epoch's wait: the premise, not the fix, failed).
            sb.wait_for(lambda: time.monotonic() >= seen_at + BOUND_S - ROOM_S,
                        what="less than the room left of the exit push's bound",
                        timeout=BOUND_S + 30)
        text = sb.wait_for(lambda: "exit push" in (t := log_path.read_text()) and
                           ("exit push: anchored" in t or "exit push not" in t) and t,
                           what="the exit push's line", **WAIT)
        line = CUT.search(text)
        assert line is not None, text[-3000:]
        assert int(line.group(2)) >= 2
        assert line.group(3) == (f"too little is left of its bound ({BOUND_S} s) for another "
                                 f"epoch, which may take {ROOM_S} s at KINT_RPC_TIMEOUT=60s")
        sb.wait_for(lambda: (sb.row(db)["head"] or {}).get("seq") == 1,
                    what="epoch 1 the head", **WAIT)
        left = _unanchored(sb)
        assert left["changed"] + left["deleted"] == int(line.group(4)) > 0, left
        assert text.count("stopped before") == 1, text[-3000:]
        assert _key_expires_at(sb) > time.time() + 2 * KEY_LEFT_S


def test_a_restart_during_the_exit_push_stops_it_before_its_next_epoch_said(
        tmp_path, chain_home):
    """`kint supervisor restart` while the exit push's first epoch is held at its send: the
    send let go in the stop's grace, that epoch lands and is recorded, and the push starts
    no second one in the stopping worker, its line naming the stop and the rows left in
    the store for the next push. Without it the stopping worker signed and sent the second
    epoch, which the grace's end could cut between its send and its receipt, unsaid."""
    # A stop grace long enough that the landed epoch is recorded in it on a loaded box: the
    # push's own stop, not the grace's end, is what is shown.
    # A KINT_RPC_TIMEOUT of 60 s, the held send's bound: the room kept for an epoch is then
    # half the exit push's bound (exit_bound.kept_room), so its first epoch starts.
    with machine_behind_proxy(tmp_path / "m", chain_home, KINT_RPC_TIMEOUT="60",
                              KINT_TEST_STOP_GRACE_S="30") as (sb, proxy):
        db = sb.sibyl_db
        space = sb.row(db)["space"]
        restarted: dict = {}
        with _exit_push_held_at_its_first_epoch(sb, proxy) as (log_path, _):
            restart = threading.Thread(target=lambda: restarted.update(
                out=sb.kint("supervisor", "restart", space, timeout=120)))
            restart.start()
            # The worker stops the space's turn before it logs this line (process.py).
            sb.wait_for(lambda: "stop requested (restart)" in log_path.read_text(),
                        what="the worker's stop begun", **WAIT)
        restart.join(180)
        assert restarted["out"].returncode == 0, restarted["out"].stderr
        text = exit_push_said(sb, **WAIT)
        line = CUT.search(text)
        assert line is not None, text[-3000:]
        assert line.group(3) == "the worker is stopping (restart)"
        sb.wait_for(lambda: (sb.row(db)["head"] or {}).get("seq") == 1,
                    what="epoch 1 the head", **WAIT)
        left = _unanchored(sb)
        assert left["changed"] + left["deleted"] == int(line.group(4)) > 0, left


def _chain(rpc_timeout_s: float):
    """A chain's settings as a worker loads them, with the session's KINT_RPC_TIMEOUT."""
    from kint.chain.config import ChainConfig

    return ChainConfig(rpc_urls=("http://127.0.0.1:8545",), chain_id=31337,
                       anchor="0x" + "11" * 20, confirmations=1, rpc_timeout_s=rpc_timeout_s)


def test_the_room_for_an_epoch_is_the_calls_own_rpc_timeout(tmp_path, chain_home):
    """The room the exit push keeps for an epoch before its bound follows the push's own
    KINT_RPC_TIMEOUT while it is under half the bound: at 10 s (a worst case of 300 s) an
    epoch still starts with 340 s left and none with 260 s left, the line naming the room
    and the timeout (a fixed room, or always the half, fails one of the two). And a
    kint-server whose KINT_RPC_TIMEOUT is 40 s, where one epoch may at worst take more than
    the whole 900 s bound, still has the first half of it: its exit push sends its epoch,
    and no row is left. With the room uncapped, that push started none, a regression for
    the users with slow endpoints; at the cap, the cut line says an epoch begun late may
    end past the bound."""
    from kint.tenant_worker.exit_bound import ExitBound, late

    def left(seconds: float) -> ExitBound:
        now = time.monotonic()
        return ExitBound(turn_by=now, ends=now + seconds, seconds=900)

    assert late(left(340), _chain(10)) is None
    assert late(left(260), _chain(10)) == ("too little is left of its bound (900 s) for "
                                          "another epoch, which may take 300 s at "
                                          "KINT_RPC_TIMEOUT=10s")
    assert late(left(600), _chain(40)) is None
    assert late(left(400), _chain(40)) == (
        "too little is left of its bound (900 s) for another epoch: half of it (450 s) is "
        "kept for one, which may take up to 960 s at KINT_RPC_TIMEOUT=40s (every call "
        "timing out thrice), so one begun late may end past the bound, after the "
        "supervisor's TIMEOUT, said only here")
    with machine_behind_proxy(tmp_path / "m", chain_home) as (sb, _):
        db = sb.sibyl_db
        a_session_writes_and_closes(sb, {**sb.env, "KINT_NO_WATCHER": "1",
                                         "KINT_RPC_TIMEOUT": "40"}, **WAIT)
        text = exit_push_said(sb, **WAIT)
        assert "exit push: anchored 1 row change(s) in 1 epoch(s), head epoch 1" in text, \
            text[-3000:]
        sb.wait_for(lambda: (sb.row(db)["head"] or {}).get("seq") == 1,
                    what="epoch 1 the head", **WAIT)
        left_rows = _unanchored(sb)
        assert left_rows["changed"] + left_rows["deleted"] == 0, left_rows
