"""One session key, many spaces: a stuck transaction of one space must not hold back
another space's push beyond a retry interval (docs/faults.md, the nonce rows).

Two Hermes profile stores on one machine are two spaces with two workers, and the machine's
one session key sends for both, so they share one nonce sequence. Space P1's transaction
gets stuck for real in two ways: its endpoint (a loopback proxy in front of the devchain)
swallows `eth_sendRawTransaction` and never answers, or its worker is SIGKILLed after
signing and before the broadcast. Either way P2's push, at the next nonce, is not mined
until P1's nonce is; P2's worker re-broadcasts P1's signed transaction from the machine's
nonce book through its own endpoint, both land, and P1 records its epoch afterwards from
its pending file.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from chain_machines import devchain_anchor, kjson, new_machine, ok
from conftest import KINT, sibyl_client
from rpc_proxy import LoopbackServer, answer_json, post_json
from kint.spaces import space_id


class SendSwallower(LoopbackServer):
    """Forwards JSON-RPC to the devchain, except that once armed it reads
    `eth_sendRawTransaction` and never answers it (until released or stopped)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.armed = threading.Event()
        self.released = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if proxy.armed.is_set() and b"eth_sendRawTransaction" in body:
                    proxy.released.wait(120)
                    return  # the connection closes with no answer
                answer = post_json(proxy.upstream.hostname, proxy.upstream.port, body,
                                   proxy.upstream.path)
                answer_json(self, answer)

            def log_message(self, fmt: str, *args: object) -> None:
                pass

        super().__init__(Handler)

    def stop(self) -> None:
        self.released.set()
        super().stop()


def _signed_entry(kint_home: Path, space16: str, timeout: float = 60) -> dict:
    """The nonce-book entry of `space16` once its transaction is signed (or mined)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in (kint_home / "nonces").glob("*.json"):
            try:
                entry = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            # Signed, or already mined: a killed worker's successor may send its pending
            # epoch and see it mined (the signed bytes dropped) between two looks here.
            if entry.get("space16") == space16 and (entry.get("raw") or entry.get("mined")):
                return entry
        time.sleep(0.1)
    raise AssertionError(f"space {space16} never signed a transaction")


def _two_profiles(sb) -> tuple[Path, Path]:
    dbs = (sb.profile_db("p1"), sb.profile_db("p2"))
    for i, db in enumerate(dbs, 1):
        db.parent.mkdir(parents=True, exist_ok=True)
        client = sibyl_client(db, sb.tenant)
        client.set_entity("rules", f"rule-{i}", {"rule": f"profile {i}'s rule"})
        client.storage.close()
    return dbs


@pytest.mark.parametrize("stuck_by", ["hung_rpc", "killed_worker"])
def test_a_stuck_space_does_not_hold_back_another(stuck_by, tmp_path, chain_home):
    anchor = devchain_anchor(chain_home)
    swallower = SendSwallower(anchor.config.rpc_urls[0])
    flag = tmp_path / "crash-flag"
    sb = new_machine(tmp_path / "machine", chain_home, KINT_NONCE_RETRY_SECONDS="1",
                     KINT_RPC_TIMEOUT="60", KINT_TEST_CRASH_FLAG=str(flag))
    p1, p2 = _two_profiles(sb)
    space1 = space_id(sb.label(p1))
    try:
        extra = ["--rpc-urls", swallower.url] if stuck_by == "hung_rpc" else []
        c1 = kjson(sb, "--db", str(p1), "connect", "--dev", *extra)
        c2 = kjson(sb, "--db", str(p2), "connect", "--dev")
        assert c1["session"] == c2["session"]  # one session key for the machine
        if stuck_by == "hung_rpc":
            swallower.armed.set()
        else:
            flag.write_text(f"before_send {space1[:16]}")
        first = subprocess.Popen([KINT, "--db", str(p1), "push"], env=sb.env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        stuck = _signed_entry(sb.kint_home, space1[:16])
        if stuck_by == "killed_worker":
            first.wait(timeout=60)  # the worker died: the CLI got WORKER_DOWN
            assert first.returncode != 0

        # P2's push lands while P1's transaction is stuck: its worker pushed P1's through.
        pushed = kjson(sb, "--db", str(p2), "push")
        assert pushed["pushed"] == 1
        assert anchor.head(c1["owner"], space1).seq == 1
        assert anchor.w3.eth.get_transaction_count(c1["session"]) > stuck["nonce"]

        # P1 finds its epoch landed and records it (from its pending file).
        swallower.released.set()
        if first.poll() is None:
            first.wait(timeout=120)
        status = kjson(sb, "--db", str(p1), "status")
        if not status["in_step"]:
            ok(sb.kint("--db", str(p1), "pull"))
            status = kjson(sb, "--db", str(p1), "status")
        assert status["in_step"] is True and status["head"]["seq"] == 1
        assert not (sb.kint_home / f"pending-{space1[:16]}.json").exists()
        verdict = kjson(sb, "--db", str(p1), "verify", "profile 1's rule")
        assert verdict["decision"] == "proceed", verdict
        text = (sb.kint_home / "supervisor.log").read_text(errors="replace")
        if stuck_by == "hung_rpc":  # only P2's worker could push P1's transaction through
            assert "pushed them through" in text, text[-3000:]
        else:  # P2's worker, or P1's restarted worker from its pending file, whichever first
            assert ("pushed them through" in text
                    or "re-sent and recorded pending epoch 1" in text), text[-3000:]
    finally:
        swallower.stop()
        sb.shutdown()


def test_a_mined_nonce_keeps_no_signed_transaction(tmp_path):
    """A push's signed transaction is a whole epoch's calldata (~200 KB of hex at a full
    bucket) under KINT_HOME, which Sibyl's cap counts (issue 15): once mined it is dropped,
    the entry kept as the nonce's placeholder, and an endpoint a block behind never gets it
    re-broadcast or filled."""
    from kint.chain.nonces import NonceBook, unstick

    book = NonceBook(tmp_path)
    address = "0x" + "ab" * 20
    first = book.allocate(address, chain_count=7, space16="a" * 16)
    book.record(first, b"\x01" * 100_000)
    second = book.allocate(address, chain_count=7, space16="b" * 16)
    book.record(second, b"\x02" * 10)
    assert (first, second) == (7, 8)
    book.landed(first)
    entry = json.loads((tmp_path / "nonces" / f"{first:012d}.json").read_text())
    assert entry["raw"] is None and entry["mined"] is True
    assert (tmp_path / "nonces" / f"{first:012d}.json").stat().st_size < 300
    sent: list[bytes] = []
    acted = unstick(book, address, own_nonce=9, chain_count=7, send_raw=sent.append,
                    fill=lambda n: pytest.fail(f"filled mined nonce {n}"))
    assert acted == [second] and sent == [b"\x02" * 10]
    assert book.allocate(address, chain_count=7, space16="a" * 16) == 9  # still counted


def _sign_then_die_estimating(home: str, key: bytes) -> None:
    """A worker's `sign` whose gas estimate is where it is SIGKILLed (run in a child)."""
    import os
    import signal

    from eth_account import Account

    from kint.chain.nonces import NonceBook
    from kint.tenant_worker.session_sender import SessionSender

    def die(*_args: object, **_kwargs: object) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    eth = type("Eth", (), {"get_transaction_count": staticmethod(lambda *_: 7)})()
    anchor = type("DiesEstimating", (), {
        "w3": type("W3", (), {"eth": eth})(), "prepare": die, "build": die,
        "config": type("Config", (), {"chain_id": 31337})()})()
    SessionSender(anchor, Account.from_key(key), NonceBook(Path(home)),  # type: ignore[arg-type]
                  "a" * 16).sign(b"calldata", "nothing was dropped")


def test_a_push_killed_before_it_signs_takes_no_nonce(tmp_path):
    """A push killed between taking its nonce and signing (its gas estimate or balance
    read, both chain calls) left the nonce in the book with no transaction: the next
    transaction above it waited KINT_NONCE_RETRY_SECONDS, then filled it with a 21,000-gas
    transfer to self. The nonce is now taken, and the transaction signed and written, in
    one step after every chain call: killed at its estimate, the push leaves nothing in the
    book, and the next transaction takes that nonce."""
    import multiprocessing

    from eth_account import Account

    from kint.chain.nonces import NonceBook

    account = Account.create()
    child = multiprocessing.get_context("fork").Process(
        target=_sign_then_die_estimating, args=(str(tmp_path), bytes(account.key)))
    child.start()
    child.join(60)
    assert child.exitcode == -9, child.exitcode
    book = NonceBook(tmp_path)
    assert book.blocking(account.address, chain_count=7, below=100) == []
    assert book.allocate(account.address, chain_count=7, space16="b" * 16) == 7


# The receipt wait here (KINT_TEST_RECEIPT_WAIT), and a retry setting longer than it: the
# shape of kint's 60 s wait beside KINT_NONCE_RETRY_SECONDS=60 or more, in seconds.
SHORT_WAIT_S = 8
LONGER_RETRY_S = "20"


def test_a_retry_setting_past_the_receipt_wait_still_pushes_the_stuck_one_through(
        tmp_path, chain_home):
    """With KINT_NONCE_RETRY_SECONDS at the receipt wait (kint's 60 s) or more, the wait's
    unstick never ran: P2's push timed out "may still land" behind P1's stuck transaction,
    and so did every later one. It now runs by half the wait at the latest, as a former
    key's does. The wait is shortened by the test's knob (tests/support/kint_test_faults.py)
    rather than waited out for a minute; P1's send is swallowed by its endpoint."""
    anchor = devchain_anchor(chain_home)
    swallower = SendSwallower(anchor.config.rpc_urls[0])
    wait = tmp_path / "receipt-wait"
    sb = new_machine(tmp_path / "machine", chain_home, KINT_NONCE_RETRY_SECONDS=LONGER_RETRY_S,
                     KINT_RPC_TIMEOUT="60", KINT_TEST_RECEIPT_WAIT=str(wait))
    p1, p2 = _two_profiles(sb)
    space1 = space_id(sb.label(p1))
    first = None
    try:
        c1 = kjson(sb, "--db", str(p1), "connect", "--dev", "--rpc-urls", swallower.url)
        kjson(sb, "--db", str(p2), "connect", "--dev")
        swallower.armed.set()
        first = subprocess.Popen([KINT, "--db", str(p1), "push"], env=sb.env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        stuck = _signed_entry(sb.kint_home, space1[:16])
        wait.write_text(str(SHORT_WAIT_S))
        pushed = kjson(sb, "--db", str(p2), "push")
        assert pushed["pushed"] == 1, pushed
        assert anchor.w3.eth.get_transaction_count(c1["session"]) > stuck["nonce"]
        text = (sb.kint_home / "supervisor.log").read_text(errors="replace")
        assert "pushed them through" in text, text[-3000:]
    finally:
        swallower.stop()
        if first is not None and first.poll() is None:
            first.wait(timeout=120)
        sb.shutdown()
