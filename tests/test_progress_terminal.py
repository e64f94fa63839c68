"""The worker's progress on a terminal: `kint push`, `kint pull`, `kint rekey`, `kint connect`
and `kint join` show the line the space's worker reports for their own op (`push: epoch 1
of 1 (3 rows)`, `connect: reading the header of epoch 3 (block 9)`) on stderr
while the call runs, when stderr is a terminal, and clear it before the result; with
stderr a pipe nothing of it is printed (kint.commands.common.call_with_progress).

The commands run for real with stderr on a pseudo-terminal (os.openpty) on one machine of
the session's devchain, behind an RPC proxy (tests/rpc_proxy.py) that holds the chain call
each op waits on until the test has seen what it looks for: a push's or a rekey's receipt
(answered null, `unmined`), a pull's or a connect's epoch log (`delay_methods`,
eth_getLogs). The proxy
then forwards, and the command ends as it would have.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path

import pytest

from chain_machines import kjson, machine_behind_proxy, owner_account, wallet_signature
from conftest import KINT, wait_until, write_rules
from kint.custody.vault_message import canonical_payload

# Cleared before a new line and before the result: carriage return, erase the line.
CLEAR = b"\r\x1b[2K"
# The worker's lines (kint.tenant_worker.push and .epoch_walk), as the terminal shows them.
PUSH_LINE = re.compile(rb"\r\x1b\[2Kpush: epoch \d+ of 1 \(\d+ rows\)")
PULL_LINE = re.compile(rb"\r\x1b\[2Kpull: checking epoch \d+ \(walking back from \d+\)")
# kint.tenant_worker.connect: the head epoch's header, read for its wraps.
CONNECT_LINE = re.compile(rb"\r\x1b\[2Kconnect: reading the header of epoch \d+ \(block \d+\)")
# How long a held chain call waits at most before it goes through anyway (a failing test
# ends); under the RPC timeout the machine runs with, so a held read never times out.
HOLD_S = 40
RPC_TIMEOUT_S = "60"


class OnTerminal:
    """`kint ARGS` with its stderr on a pseudo-terminal (so `sys.stderr.isatty()` holds in
    it) and its stdout a pipe; what reaches the terminal is read as it comes."""

    def __init__(self, sb, *args: str, stdin: Path | None = None) -> None:
        self._master, slave = os.openpty()
        with open(stdin or os.devnull, "rb") as given:
            self.proc = subprocess.Popen([KINT, *args], env=sb.env, stdin=given,
                                         stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)  # the child's is the only one left: its exit ends the reads
        self._screen = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 4096)
            except OSError:  # EIO: the terminal's other side is closed
                return
            if not chunk:
                return
            with self._lock:
                self._screen += chunk

    def screen(self) -> bytes:
        with self._lock:
            return bytes(self._screen)

    def shows(self, pattern: re.Pattern[bytes], timeout: float = HOLD_S) -> bool:
        return bool(wait_until(lambda: pattern.search(self.screen()), timeout=timeout,
                               interval=0.1))

    def finish(self) -> tuple[int, str, bytes]:
        """Exit status, stdout and what reached the terminal, once the command ends."""
        stdout, _ = self.proc.communicate(timeout=120)
        self._reader.join(timeout=10)
        os.close(self._master)
        return self.proc.returncode, stdout.decode(), self.screen()


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    """A connected machine behind the proxy; its watcher never pushes on its own."""
    with machine_behind_proxy(tmp_path_factory.mktemp("progress"), chain_home,
                              KINT_QUIET_SECONDS="3600",
                              KINT_RPC_TIMEOUT=RPC_TIMEOUT_S) as (sb, proxy):
        sb.owner = kjson(sb, "status")["owner"]
        yield sb, proxy


def _held(proxy, terminal: OnTerminal, pattern: re.Pattern[bytes]) -> tuple[bool, int, str,
                                                                            bytes]:
    """Whether `pattern` reached the terminal while the proxy held the op's chain call,
    then the command's end once the proxy forwards again."""
    try:
        shown = terminal.shows(pattern)
    finally:
        proxy.forward()
    return (shown, *terminal.finish())


def _cleared_after(screen: bytes, pattern: re.Pattern[bytes]) -> bool:
    """Whether the last progress line on `screen` was erased after it was drawn."""
    last = list(pattern.finditer(screen))[-1]
    return CLEAR in screen[last.end():]


def test_push_on_a_terminal_shows_its_epoch_then_clears_it(machine):
    sb, proxy = machine
    write_rules(sb.sibyl_db, sb.tenant, release_gate="never ship on a Friday")
    proxy.set_mode("unmined")
    terminal = OnTerminal(sb, "push")
    shown, status, stdout, screen = _held(proxy, terminal, PUSH_LINE)
    assert shown, screen
    assert status == 0, (stdout, screen)
    assert re.search(rb"push: epoch 1 of 1 \([1-9]\d* rows\)", screen), screen
    assert _cleared_after(screen, PUSH_LINE), screen
    assert "anchored 1 epoch(s); head seq 1" in stdout, stdout


def test_push_with_stderr_a_pipe_prints_no_progress(machine):
    """The worker reports the line for long enough that a terminal would have shown it (two
    of the command's once-a-second looks); a pipe gets none of it."""
    sb, proxy = machine
    write_rules(sb.sibyl_db, sb.tenant, deploy="deploy from main")
    proxy.set_mode("unmined")
    push = subprocess.Popen([KINT, "push"], env=sb.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        reported = sb.wait_for(
            lambda: (row := sb.row(sb.sibyl_db)).get("progress_op") == "push"
            and (row.get("progress") or "").startswith("push: epoch ")
            and row["progress_age_s"] >= 3 and row, timeout=HOLD_S,
            what="the push's progress line, reported for 3 s")
    finally:
        proxy.forward()
    stdout, stderr = push.communicate(timeout=120)
    assert push.returncode == 0, (stdout, stderr)
    assert reported["progress"] not in stderr.decode(), stderr
    assert b"\x1b[" not in stderr and b"\r" not in stderr, stderr
    assert b"anchored 1 epoch(s); head seq 2" in stdout, stdout


def test_pull_on_a_terminal_shows_the_epoch_it_checks(machine):
    sb, proxy = machine
    proxy.set_mode("delay_methods", methods=["eth_getLogs"], seconds=HOLD_S)
    terminal = OnTerminal(sb, "pull", "--discard-local")
    shown, status, stdout, screen = _held(proxy, terminal, PULL_LINE)
    assert shown, screen
    assert status == 0, (stdout, screen)
    assert _cleared_after(screen, PULL_LINE), screen


def test_pull_on_a_terminal_shows_its_head_read(machine):
    """A pull's first wait is its head read (on Base a cold start then asks a second RPC),
    before any epoch is walked: a joining machine's restore said nothing through it."""
    sb, proxy = machine
    proxy.set_mode("delay_methods", methods=["eth_call"], seconds=HOLD_S)
    terminal = OnTerminal(sb, "pull")
    line = re.compile(rb"\r\x1b\[2Kpull: reading the chain head")
    shown, status, stdout, screen = _held(proxy, terminal, line)
    assert shown, screen
    assert status == 0, (stdout, screen)
    assert _cleared_after(screen, line), screen


def test_rekey_on_a_terminal_shows_its_snapshot_epoch(machine, tmp_path):
    """rekey's snapshot is a push the worker reports under op `rekey`: shown as push's is.
    (rekey waited without a word before: it did not watch the worker's progress.)"""
    sb, proxy = machine
    payload = canonical_payload(sb.owner).decode()
    signature = tmp_path / "signature"
    signature.write_text(wallet_signature(owner_account(sb, sb.owner), payload) + "\n")
    proxy.set_mode("unmined")
    terminal = OnTerminal(sb, "rekey", "--signature", "-", stdin=signature)
    shown, status, stdout, screen = _held(proxy, terminal, PUSH_LINE)
    assert shown, screen
    assert status == 0, (stdout, screen)
    assert _cleared_after(screen, PUSH_LINE), screen
    assert re.search(r"snapshot epoch 3 tx \S+ block \d+", stdout), stdout


def _signature_file(sb, tmp_path) -> Path:
    """The owner wallet's derive signature, in a file for the command's stdin."""
    payload = canonical_payload(sb.owner).decode()
    signature = tmp_path / "signature"
    signature.write_text(wallet_signature(owner_account(sb, sb.owner), payload) + "\n")
    return signature


def test_connect_on_a_terminal_shows_the_header_it_reads(machine, tmp_path):
    """connect reads the head epoch's header for the vault's wraps: held at that epoch's log,
    it says so. (connect waited without a word before: its worker set no line.)"""
    sb, proxy = machine
    signature = _signature_file(sb, tmp_path)
    proxy.set_mode("delay_methods", methods=["eth_getLogs"], seconds=HOLD_S)
    terminal = OnTerminal(sb, "connect", "--owner", sb.owner, "--signature", "-",
                          stdin=signature)
    shown, status, stdout, screen = _held(proxy, terminal, CONNECT_LINE)
    assert shown, screen
    assert status == 0, (stdout, screen)
    assert _cleared_after(screen, CONNECT_LINE), screen
    assert stdout.startswith(f"connected: owner {sb.owner}\n"), stdout


def test_join_on_a_terminal_shows_its_connect_step(machine, tmp_path):
    """join's connect step is the worker's connect: its line shows as the restore's does."""
    sb, proxy = machine
    signature = _signature_file(sb, tmp_path)
    proxy.set_mode("delay_methods", methods=["eth_getLogs"], seconds=HOLD_S)
    terminal = OnTerminal(sb, "join", "--owner", sb.owner, "--signature", "-", "--no-setup",
                          stdin=signature)
    shown, status, stdout, screen = _held(proxy, terminal, CONNECT_LINE)
    assert shown, screen
    assert status == 0, (stdout, screen)
    assert _cleared_after(screen, CONNECT_LINE), screen
    assert "connected: key tag " in stdout and "restore: up to date" in stdout, stdout
