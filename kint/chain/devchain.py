"""The embedded local chain: anvil on 127.0.0.1, chain id 31337, its state kept under
$KINT_HOME/devchain/ (DESIGN §7).

Which anvil: `KINT_ANVIL` when set; else, when kint runs from its source checkout, the pinned
npm package there (`node_modules/@foundry-rs/anvil-<os>-<arch>/bin/anvil`, installed by
`make node`); else `anvil` on PATH (an `npm install -g @foundry-rs/anvil@<pin>` shim is
followed to the binary it runs); else Foundry's `~/.foundry/bin/anvil`. None of them: an
error that names how to install one.

`--state` with `--state-interval` makes anvil dump its state every second and on exit, so a
crash loses at most a second of chain, and a restart reloads it. EpochAnchor is deployed
once from anvil's first well-known dev account (from the artifact shipped in the package);
its address is kept in `devchain/anchor.json` for the next start. A recorded anchor whose
code is not the current artifact's (a devchain from before a contract change) is replaced by
a fresh deployment. A start whose deployment fails stops the anvil it began.

`devchain/devchain.json` is how the rest of kint finds the devchain, so it exists only while
its anvil runs: it is written once anvil answers and EpochAnchor is deployed, and removed by
`stop`, or by `status`/`start` on finding that its anvil is gone. It records the anvil's
identity (its command line and start time, read from the OS right after the start), and
nothing is ever signalled unless the process under the recorded pid still has exactly that
identity: a pid of 0 or below, a reused pid, or a copied record pointing at another
KINT_HOME's anvil is never signalled.

Dev-only powers (funding with `anvil_setBalance`, acting as an owner with
`anvil_impersonateAccount`) live here and nowhere else: on a real chain the owner's wallet
authorizes a machine's session key itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import requests
from eth_account import Account
from web3 import Web3

from kint.chain.artifact import epoch_anchor_artifact, test_smart_account_artifact
from kint.chain.config import devchain_record
from kint.paths import UnsafePathError, atomic_write, ensure_private_dir

CHAIN_ID = 31337
# anvil's first dev account: a published test key, funded by anvil at genesis.
DEV_DEPLOYER_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
# The @foundry-rs/anvil version package.json pins (tests/test_devchain.py keeps them equal).
ANVIL_VERSION = "1.7.1"
INSTALL_WAYS = (f"`npm install -g @foundry-rs/anvil@{ANVIL_VERSION}` (the version kint pins) "
                f"or Foundry's `foundryup` (https://getfoundry.sh)")
INSTALL_HINT = f"install anvil with {INSTALL_WAYS}, or set KINT_ANVIL to an anvil binary"
PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0


class DevchainError(Exception):
    """What went wrong, and (`hint`) what to do about it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


# --- which anvil ----------------------------------------------------------------------------

def _platform_package() -> str | None:
    """The npm package holding this platform's anvil binary, e.g. `anvil-linux-amd64`."""
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    system = {"linux": "linux", "darwin": "darwin"}.get(platform.system().lower())
    return f"anvil-{system}-{arch}" if arch and system else None


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def checkout_root() -> Path | None:
    """The source checkout kint runs from (editable install or `python -m kint.cli` there),
    or None when kint runs from an installed wheel."""
    if (PROJECT_ROOT / "package.json").is_file() and (PROJECT_ROOT / "pyproject.toml").is_file():
        return PROJECT_ROOT
    return None


def _npm_binary(node_modules: Path) -> Path | None:
    package = _platform_package()
    if package is None:
        return None
    path = node_modules / "@foundry-rs" / package / "bin" / "anvil"
    return path if _executable(path) else None


def _through_npm_shim(path: Path) -> Path:
    """`npm install -g @foundry-rs/anvil` puts a node script on PATH that runs the platform
    package's binary as its child: use that binary itself, so the pid kint records is
    anvil's. Anything else is used as found."""
    real = path.resolve()
    shim = ("bin.mjs", "anvil", "@foundry-rs")
    if (real.name, real.parent.name, real.parent.parent.name) != shim:
        return path
    package_dir = real.parent
    for node_modules in (package_dir / "node_modules", package_dir.parent.parent):
        binary = _npm_binary(node_modules)
        if binary is not None:
            return binary
    return path


def anvil_binary() -> Path:
    """The anvil to run: KINT_ANVIL, the checkout's pinned npm package, PATH, ~/.foundry."""
    from kint import settings

    explicit = settings.value("KINT_ANVIL")
    if explicit:
        path = Path(explicit).expanduser()
        if not _executable(path):
            raise DevchainError(f"KINT_ANVIL={explicit} is not an executable file",
                                hint=f"point KINT_ANVIL at an anvil binary or unset it; to get "
                                     f"one, install it with {INSTALL_WAYS}")
        return path
    root = checkout_root()
    if root is not None:
        binary = _npm_binary(root / "node_modules")
        if binary is not None:
            return binary
    found = shutil.which("anvil")
    if found:
        return _through_npm_shim(Path(found))
    foundry = Path.home() / ".foundry" / "bin" / "anvil"
    if _executable(foundry):
        return foundry
    if root is None:
        raise DevchainError("anvil was not found (KINT_ANVIL is unset, and no anvil is on PATH "
                            "or in ~/.foundry/bin)", hint=INSTALL_HINT)
    raise DevchainError(f"anvil was not found (KINT_ANVIL is unset, {root}/node_modules has no "
                        f"@foundry-rs/{_platform_package() or 'anvil'}, and no anvil is on PATH "
                        f"or in ~/.foundry/bin)",
                        hint=f"run `make node` in {root}, or {INSTALL_HINT}")


# --- the recorded anvil's identity ------------------------------------------------------------

def _linux_identity(pid: int) -> dict[str, Any] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
        state, starttime = fields[0], fields[19]
    except (OSError, IndexError):
        return None
    if state in (b"Z", b"X"):  # exited; a zombie is no anvil
        return None
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    cmdline = [part.decode(errors="surrogateescape") for part in raw.split(b"\0")[:-1]]
    # Field 22 (starttime, clock ticks since boot) is fields[19] counted after the name.
    return {"cmdline": cmdline, "started": f"{boot}:{starttime.decode()}"}


def _ps_identity(pid: int) -> dict[str, Any] | None:
    env = {**os.environ, "LC_ALL": "C"}
    try:
        command = subprocess.run(["ps", "-ww", "-o", "command=", "-p", str(pid)], env=env,
                                 capture_output=True, text=True, timeout=10)
        started = subprocess.run(["ps", "-o", "lstart=", "-p", str(pid)], env=env,
                                 capture_output=True, text=True, timeout=10)
        state = subprocess.run(["ps", "-o", "state=", "-p", str(pid)], env=env,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if command.returncode != 0 or not command.stdout.strip():
        return None
    if state.stdout.strip().startswith("Z"):  # exited; a zombie is no anvil
        return None
    return {"cmdline": command.stdout.strip(), "started": " ".join(started.stdout.split())}


def process_identity(pid: Any) -> dict[str, Any] | None:
    """What runs under `pid`: its command line and its start time, or None when nothing
    (alive) does. Never a signal: a pid that is not a positive int is simply nothing."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return None
    if Path("/proc/self/stat").exists():
        return _linux_identity(pid)
    return _ps_identity(pid)


def _same_cmdline(recorded: Any, current: Any) -> bool:
    if isinstance(recorded, list) and isinstance(current, str):  # ps gives one string
        return " ".join(recorded) == current
    return recorded == current


def _legacy_match(record: dict[str, Any], current: dict[str, Any]) -> bool:
    """A record written before identities were recorded: an anvil serving this record's
    port and state file."""
    argv = current["cmdline"]
    argv = argv.split() if isinstance(argv, str) else argv
    if not any(Path(arg).name.startswith("anvil") for arg in argv[:2]):  # [interpreter,] anvil
        return False
    pairs = dict(zip(argv, argv[1:]))
    return (pairs.get("--state") == record.get("state")
            and pairs.get("--port") == str(record.get("port")))


def recorded_anvil_runs(record: dict[str, Any]) -> bool:
    """True when the process under the record's pid is the anvil the record describes: the
    same command line and the same start time as when it was started."""
    current = process_identity(record.get("pid"))
    if current is None:
        return False
    identity = record.get("identity")
    if not isinstance(identity, dict):
        return _legacy_match(record, current)
    return (_same_cmdline(identity.get("cmdline"), current["cmdline"])
            and identity.get("started") == current["started"])


def _state_path(home: Path) -> Path:
    return home / "devchain" / "state.json"


def started_here(record: dict[str, Any], home: Path) -> bool:
    """The record's anvil keeps its state under this KINT_HOME (not a record copied from
    another machine's home, which points at that home's anvil)."""
    state = record.get("state")
    return isinstance(state, str) and os.path.realpath(state) == os.path.realpath(_state_path(home))


# --- the record -----------------------------------------------------------------------------

def _anchor_file(home: Path) -> Path:
    return home / "devchain" / "anchor.json"


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    """One start, stop or clean-up at a time per KINT_HOME."""
    try:
        folder = ensure_private_dir(ensure_private_dir(home) / "devchain")
    except UnsafePathError as err:
        raise DevchainError(str(err), hint="KINT_HOME and its devchain/ folder must be plain "
                                           "folders of this user") from None
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_record(home: Path) -> dict[str, Any] | None:
    path = devchain_record(home)
    try:
        record = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except orjson.JSONDecodeError:
        record = None
    if not isinstance(record, dict):
        raise DevchainError(f"{path} is corrupt",
                            hint="remove it and run `kint devchain start`")
    return record


def _forget(home: Path, record: dict[str, Any]) -> None:
    """Remove the record of an anvil that no longer runs, keeping its anchor's address for
    the next start (the state file still holds that contract)."""
    anchor = record.get("anchor")
    if isinstance(anchor, str) and anchor and not _anchor_file(home).exists():
        atomic_write(_anchor_file(home), orjson.dumps({"anchor": anchor}))
    with contextlib.suppress(FileNotFoundError):
        devchain_record(home).unlink()


def _previous_anchor(home: Path, record: dict[str, Any] | None) -> str | None:
    try:
        anchor = orjson.loads(_anchor_file(home).read_bytes()).get("anchor")
    except (FileNotFoundError, orjson.JSONDecodeError, AttributeError):
        anchor = None
    if not anchor and record:
        anchor = record.get("anchor")
    return anchor if isinstance(anchor, str) and anchor else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        r = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId",
                                     "params": []}, timeout=1.0)
        return r.ok and int(r.json()["result"], 16) == CHAIN_ID
    except (requests.RequestException, ValueError, KeyError, TypeError):
        return False


def _running(home: Path) -> dict[str, Any] | None:
    """The record of a running devchain, or None. A record whose anvil is gone (exited, or
    its pid now someone else's) is removed. Call with the lock held."""
    record = read_record(home)
    if record is None:
        return None
    if not recorded_anvil_runs(record):
        _forget(home, record)
        return None
    url = record.get("rpc_url")
    return record if isinstance(url, str) and _answers(url) else None


def status(home: Path) -> dict[str, Any] | None:
    """The running devchain's record, or None when none runs."""
    if read_record(home) is None:  # nothing to check, and nothing to create
        return None
    with _locked(home):
        return _running(home)


def _deploy_artifact(w3: Web3, art: dict[str, Any], *args: Any) -> str:
    """Deploy `art` with constructor `args` from anvil's first dev account; its address."""
    deployer = Account.from_key(DEV_DEPLOYER_KEY)
    factory = w3.eth.contract(abi=art["abi"], bytecode=art["bytecode"])
    tx = factory.constructor(*args).build_transaction({
        "from": deployer.address, "chainId": CHAIN_ID,
        "nonce": w3.eth.get_transaction_count(deployer.address, "pending")})
    tx_hash = w3.eth.send_raw_transaction(deployer.sign_transaction(tx).raw_transaction)
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30)
    if receipt["status"] != 1:
        raise DevchainError(f"deploying {art.get('contractName', 'a contract')} reverted")
    return str(receipt["contractAddress"])


def _deploy(w3: Web3) -> str:
    """A fresh EpochAnchor (it takes no constructor arguments)."""
    return _deploy_artifact(w3, epoch_anchor_artifact())


def _is_current_anchor(w3: Web3, address: str) -> bool:
    """True when `address` holds exactly the runtime code of the packaged EpochAnchor."""
    code = bytes(w3.eth.get_code(Web3.to_checksum_address(address)) or b"")
    return code.hex() == epoch_anchor_artifact()["deployedBytecode"].removeprefix("0x")


def deploy_test_smart_account(url: str, signer_address: str) -> str:
    """Deploy a TestSmartAccount (a minimal ERC-1271 account, FOR TESTS ONLY) whose
    signatures and calls come from `signer_address`; its address. Lets tests exercise the
    contract's smart-account owner path on the devchain."""
    w3 = Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": 10},
                                exception_retry_configuration=None))
    return _deploy_artifact(w3, test_smart_account_artifact(),
                            Web3.to_checksum_address(signer_address))


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


def start(home: Path) -> dict[str, Any]:
    """Start anvil (or return the running one), deploying EpochAnchor on a fresh chain."""
    with _locked(home):
        previous = read_record(home)
        if previous is not None and recorded_anvil_runs(previous):
            url = str(previous.get("rpc_url"))
            if _answers(url):
                return previous
            hint = ("run `kint devchain stop`, then `kint devchain start`"
                    if started_here(previous, home) else
                    "it was started from another KINT_HOME: see to it there")
            raise DevchainError(f"the devchain's anvil (pid {previous['pid']}) runs but does not "
                                f"answer at {url}", hint=hint)
        if previous is not None:
            _forget(home, previous)
        binary = anvil_binary()
        folder = home / "devchain"
        state = _state_path(home)
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        argv = [str(binary), "--host", "127.0.0.1", "--port", str(port), "--chain-id",
                str(CHAIN_ID), "--state", str(state), "--state-interval", "1",
                "--preserve-historical-states"]
        log_path = folder / "anvil.log"
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                preexec_fn=lambda: os.umask(0o077))  # its state file is ours alone, 0600
        except OSError as err:
            raise DevchainError(f"could not run {binary}: {err}", hint=INSTALL_HINT) from None
        finally:
            os.close(log)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not _answers(url):
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
            w3 = Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": 10},
                                        exception_retry_configuration=None))
            anchor = _previous_anchor(home, previous)
            try:
                if not anchor or not _is_current_anchor(w3, anchor):
                    anchor = _deploy(w3)
            except Exception as err:  # noqa: BLE001 - any failure: stop the anvil begun here
                what = (str(err) if isinstance(err, DevchainError)
                        else f"{type(err).__name__}: {err}")
                raise DevchainError(f"deploying EpochAnchor failed: {what}",
                                    hint=f"the anvil this start began is stopped; see "
                                         f"{log_path}") from None
            atomic_write(_anchor_file(home), orjson.dumps({"anchor": anchor}))
            record = {"pid": proc.pid, "rpc_url": url, "chain_id": CHAIN_ID, "anchor": anchor,
                      "port": port, "state": str(state), "anvil": str(binary),
                      "identity": identity}
            atomic_write(devchain_record(home), orjson.dumps(record, option=orjson.OPT_INDENT_2))
        except BaseException:
            _end(proc)
            with contextlib.suppress(FileNotFoundError):
                devchain_record(home).unlink()
            raise
        return record


def stop(home: Path, timeout_s: float = STOP_TIMEOUT_S) -> str:
    """Stop this KINT_HOME's anvil (it dumps its state on the way out) and remove its
    record. Returns "stopped"; "not running" when no anvil of this home runs (a stale record
    is removed); or "elsewhere" when the record is a copy naming another KINT_HOME's
    running anvil, which is left alone (and so is the record)."""
    if read_record(home) is None:
        return "not running"
    with _locked(home):
        record = read_record(home)
        if record is None:
            return "not running"
        if not recorded_anvil_runs(record):
            _forget(home, record)
            return "not running"
        if not started_here(record, home):
            return "elsewhere"
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
        _forget(home, record)
        return "stopped"


def dev_rpc(url: str, method: str, params: list[Any]) -> Any:
    r = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                      timeout=10)
    body = r.json()
    if "error" in body:
        raise DevchainError(f"{method}: {body['error']}")
    return body.get("result")


def fund(url: str, address: str, wei: int) -> None:
    dev_rpc(url, "anvil_setBalance", [address, hex(wei)])


def send_as(url: str, sender: str, to: str, data: str, timeout_s: float = 30.0) -> None:
    """Send a transaction from `sender` without its key (anvil impersonation)."""
    dev_rpc(url, "anvil_impersonateAccount", [sender])
    try:
        fund(url, sender, 10**18)
        tx_hash = dev_rpc(url, "eth_sendTransaction", [{"from": sender, "to": to, "data": data}])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            receipt = dev_rpc(url, "eth_getTransactionReceipt", [tx_hash])
            if receipt is not None:
                if int(receipt["status"], 16) != 1:
                    raise DevchainError(f"transaction from {sender} reverted")
                return
            time.sleep(0.1)
        raise DevchainError(f"no receipt for {tx_hash}")
    finally:
        dev_rpc(url, "anvil_stopImpersonatingAccount", [sender])
