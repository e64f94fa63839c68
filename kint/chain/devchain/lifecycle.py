"""The devchain's life: start anvil on 127.0.0.1 (chain id 31337) with its state under
$KINT_HOME/devchain/, deploy EpochAnchor once, report, stop.

`--state` with `--state-interval` makes anvil dump its state every second and on exit, so a
crash loses at most a second of chain, and a restart reloads it: its blocks, transactions
and receipts (logs too) and the latest state, all kint reads (every read of state asks
"latest" or "pending", never a past block). Not anvil's historical states
(`--preserve-historical-states`, a copy of every account at every block): grown with blocks
times accounts, they were 84% of a state file rewritten every second (a devchain of 300
blocks funding an account each: 26 MB against 1.2 MB, and 7% of a core spent dumping it
while idle, against 0.4%). EpochAnchor is deployed once from anvil's first well-known dev
account (from the artifact shipped in the package); its address is kept in
`devchain/anchor.json` for the next start. A recorded anchor whose code is not the current
artifact's (a devchain from before a contract change) is replaced by a fresh deployment. A
start whose deployment fails stops the anvil it began.

`devchain/devchain.json` exists only while its anvil runs: it is written once anvil answers
and EpochAnchor is deployed, and removed by `stop`, or by `status`/`start` on finding that
its anvil is gone. A record copied from another KINT_HOME (a second machine's, as
docs/quickstart.md has it) describes an anvil this home did not start, maybe on another host
or reached through a forward: its pid means nothing here, so none of them removes it (the
user copies it again): `status` and `start` judge it by whether its endpoint answers, and
`stop` leaves it, asking nothing (`kint devchain stop` then says whether it answers). A copy
is told by the record's facts, then by the id of the KINT_HOME that started its anvil, which
each record carries (whose.judged): its state path alone is the same on a second host whose
KINT_HOME has the same path. A start records the chain's genesis block too, so an endpoint
is taken for the record's devchain only when it answers with that chain.

web3 (and eth_account, through the dev powers) is imported by `start` alone, for the
deployment: `status` and `stop` read a record, ask anvil its chain id and signal a process,
and a `kint devchain status` or `stop` paid ~0.5 s of imports (~1 s on a loaded box) for
them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from kint.chain.artifact import epoch_anchor_artifact
from kint.chain.config import devchain_record
from kint.chain.devchain.anvil import CHAIN_ID, INSTALL_HINT, anvil_binary
from kint.chain.devchain.errors import STOPPED_HINT, DevchainError
from kint.chain.devchain.identity import process_identity, recorded_anvil_runs
from kint.chain.devchain.records import (anchor_file, forget, locked, own_home_id,
                                         previous_anchor, read_record, state_path)
from kint.chain.devchain.whose import (Whose, adopt_id, answers, judged, record_answers,
                                       whose_copy)
from kint.paths import atomic_write, devchain_dir
from kint.pid_file_lock import FOREIGN_FILE_HINT, NotOwnFile, open_own_file
from kint.protocol import ErrorCode
from kint.settings.schema import environment_for
from kint.settings.urls import redact_url

if TYPE_CHECKING:
    from web3 import Web3

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _running(home: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None, Whose | None]:
    """`judged_status`'s answer. A record of this home's anvil that is gone (exited, or its
    pid now someone else's) is removed; a copied one (another home's anvil, whose pid says
    nothing here) is kept, and counts as running when its endpoint answers. Call with the
    lock held."""
    record = read_record(home)
    if record is None:
        return None, None, None
    judgement = judged(record, home)
    if judgement.copy:
        answered = (record_answers(record) if judgement.answered is None
                    else judgement.answered)
        return (record if answered else None), record, whose_copy(judgement)
    if not recorded_anvil_runs(record):
        forget(home, record)
        return None, None, None
    adopt_id(record, home)
    return (record if record_answers(record) else None), record, None


def judged_status(home: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None,
                                       Whose | None]:
    """The running devchain's record (None when none runs), the record kept here (that one,
    or a copy's whose endpoint does not answer), and whose a copy is (whose.ANOTHER or
    whose.UNSURE; None for this home's own): one judgement, each endpoint asked once, so
    what `kint devchain status` prints of a record is what it found (asked again, an
    endpoint that stopped answering in between made a copy's line name its pid, which means
    nothing here)."""
    if read_record(home) is None:  # nothing to check, and nothing to create
        return None, None, None
    with locked(home):
        return _running(home)


def status(home: Path) -> dict[str, Any] | None:
    """The running devchain's record, or None when none runs."""
    return judged_status(home)[0]


def _deploy(w3: Web3) -> str:
    """A fresh EpochAnchor (it takes no constructor arguments)."""
    from kint.chain.devchain.powers import deploy_artifact

    return deploy_artifact(w3, epoch_anchor_artifact())


def _is_current_anchor(w3: Web3, address: str) -> bool:
    """True when `address` holds exactly the runtime code of the packaged EpochAnchor."""
    from eth_utils import to_checksum_address

    code = bytes(w3.eth.get_code(to_checksum_address(address)) or b"")
    return code.hex() == epoch_anchor_artifact()["deployedBytecode"].removeprefix("0x")


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def _end(proc: subprocess.Popen[bytes]) -> None:
    """Stop an anvil this process started, and reap it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _copy_in_force(home: Path, record: dict[str, Any], answered: bool | None) -> dict[str, Any]:
    """`start` over a record copied from another KINT_HOME: that devchain when its endpoint
    answers; refused, the record kept, when it does not. A start here would replace the copy
    with an anvil of this home's, a chain of its own where the spaces connected through the
    copy have no epoch, unasked. `answered` is what the judgement found (whose.judged), when
    it asked: the endpoint is not asked again."""
    url = str(record.get("rpc_url"))
    if record_answers(record) if answered is None else answered:
        return record
    hint = (f"{STOPPED_HINT}; or, for a devchain of this KINT_HOME's own, remove "
            f"{devchain_record(home)} first")
    if recorded_anvil_runs(record):
        # Not "remove the record": its anvil runs here, on this home's state file maybe (this
        # home's own, its home.id removed), and a start after the removal began a second
        # anvil on that file beside it.
        hint = (f"its anvil runs on this machine (pid {record.get('pid')}) without answering: "
                f"`kint devchain stop` says what stops it; remove {devchain_record(home)} only "
                f"once it is stopped, or a start here begins a second anvil beside it")
    raise DevchainError(f"the devchain recorded here by another KINT_HOME, or by this one "
                        f"before its devchain/home.id was removed (state "
                        f"{record.get('state')}), does not answer at {redact_url(url)}; "
                        f"nothing was started", hint=hint)


def start(home: Path) -> dict[str, Any]:
    """Start anvil (or return the running one), deploying EpochAnchor on a fresh chain."""
    return judged_start(home)[0]


def judged_start(home: Path) -> tuple[dict[str, Any], Whose | None]:
    """`start`'s record, and whose a copy's it is (another KINT_HOME's devchain, in force
    here, as `judged_status` says it; None for this home's own): one judgement, a copy's
    endpoint asked once, as `judged_status` does, so `kint devchain start`'s line says what
    the start found (judged again, an endpoint that stopped answering in between made a
    copy's line name its pid, which means nothing here)."""
    with locked(home):
        previous = read_record(home)
        judgement = judged(previous, home) if previous is not None else None
        if previous is not None and judgement is not None and judgement.copy:
            return (_copy_in_force(home, previous, judgement.answered),
                    whose_copy(judgement))
        if previous is not None and recorded_anvil_runs(previous):
            adopt_id(previous, home)
            url = str(previous.get("rpc_url"))
            if record_answers(previous):
                return previous, None
            raise DevchainError(f"the devchain's anvil (pid {previous['pid']}) runs but does not "
                                f"answer at {url}",
                                hint="run `kint devchain stop`, then `kint devchain start`")
        if previous is not None:
            forget(home, previous)
        binary = anvil_binary()
        folder = devchain_dir(home)
        state = state_path(home)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        argv = [str(binary), "--host", "127.0.0.1", "--port", str(port), "--chain-id",
                str(CHAIN_ID), "--state", str(state), "--state-interval", "1"]
        log_path = folder / "anvil.log"
        try:  # never through a link, nor into another user's file
            log = open_own_file(log_path)
        except NotOwnFile as err:
            raise DevchainError(str(err), hint=FOREIGN_FILE_HINT,
                                code=ErrorCode.CORRUPT_STATE) from None
        fcntl.fcntl(log, fcntl.F_SETFL, fcntl.fcntl(log, fcntl.F_GETFL) | os.O_APPEND)
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                env=environment_for(None, os.environ),  # none of kint's secrets: it outlives us
                preexec_fn=lambda: os.umask(0o077))  # its state file is ours alone, 0600
        except OSError as err:
            raise DevchainError(f"could not run {binary}: {err}", hint=INSTALL_HINT,
                                code=ErrorCode.CONFIG_INVALID) from None
        finally:
            os.close(log)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not answers(url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = _log_tail(log_path)
                    raise DevchainError(
                        f"anvil ({binary}) did not start" + (f":\n{tail}" if tail else ""),
                        hint=f"see {log_path}")
                time.sleep(0.1)
            identity = process_identity(proc.pid)
            if identity is None:
                raise DevchainError(f"anvil ({binary}) exited right after starting",
                                    hint=f"see {log_path}")
            from web3 import Web3

            w3 = Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": 10},
                                        exception_retry_configuration=None))
            anchor = previous_anchor(home, previous)
            try:
                if not anchor or not _is_current_anchor(w3, anchor):
                    anchor = _deploy(w3)
            except Exception as err:  # noqa: BLE001 - any failure: stop the anvil begun here
                what = (str(err) if isinstance(err, DevchainError)
                        else f"{type(err).__name__}: {err}")
                raise DevchainError(f"deploying EpochAnchor failed: {what}",
                                    hint=f"the anvil this start began is stopped; see "
                                         f"{log_path}") from None
            genesis = "0x" + bytes(w3.eth.get_block(0)["hash"]).hex()
            atomic_write(anchor_file(home), orjson.dumps({"anchor": anchor}))
            record = {"pid": proc.pid, "rpc_url": url, "chain_id": CHAIN_ID, "anchor": anchor,
                      "port": port, "state": str(state), "anvil": str(binary),
                      "identity": identity, "home": own_home_id(home), "genesis": genesis}
            atomic_write(devchain_record(home), orjson.dumps(record, option=orjson.OPT_INDENT_2))
        except BaseException:
            _end(proc)
            with contextlib.suppress(FileNotFoundError):
                devchain_record(home).unlink()
            raise
        return record, None


class Left(NamedTuple):
    """A copied record `stop` left, as it judged it under the lock: whose copy it is
    (whose.ANOTHER or whose.UNSURE), whether its endpoint answered when that was asked to
    judge it (None: not asked), and whether its anvil runs on this machine (under the
    recorded pid, as it was started), which decides what `kint devchain stop` may advise:
    never removing a record whose anvil runs here."""

    record: dict[str, Any]
    whose: Whose
    answered: bool | None
    runs_here: bool


def stop(home: Path, timeout_s: float = STOP_TIMEOUT_S) -> str:
    """Stop this KINT_HOME's anvil (it dumps its state on the way out) and remove its
    record. Returns "stopped"; "not running" when no anvil of this home runs (a stale record
    of this home is removed); or "elsewhere" when the record is a copy naming another
    KINT_HOME's anvil, which is left alone (and so is the record, running or not: whether
    that anvil runs is for its own home to say)."""
    return judged_stop(home, timeout_s)[0]


def judged_stop(home: Path, timeout_s: float = STOP_TIMEOUT_S) -> tuple[str, Left | None]:
    """`stop`'s outcome, and for "elsewhere" the copy it left (`Left`): one judgement under
    the lock, which `kint devchain stop` words as it is, where it read the record again
    after the stop and asked nothing of whose it is."""
    if read_record(home) is None:
        return "not running", None
    with locked(home):
        record = read_record(home)
        if record is None:
            return "not running", None
        judgement = judged(record, home)
        whose = whose_copy(judgement)
        if whose is not None:
            return "elsewhere", Left(record, whose, judgement.answered,
                                     recorded_anvil_runs(record))
        if not recorded_anvil_runs(record):
            forget(home, record)
            return "not running", None
        adopt_id(record, home)
        pid = int(record["pid"])
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while recorded_anvil_runs(record) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # our own child only when started in-process
            time.sleep(0.05)
        if recorded_anvil_runs(record):  # still the same process: it ignored SIGTERM
            os.kill(pid, signal.SIGKILL)
            while recorded_anvil_runs(record) and time.monotonic() < deadline + 5:
                time.sleep(0.05)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        forget(home, record)
        return "stopped", None
