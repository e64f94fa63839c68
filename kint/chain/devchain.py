"""The embedded local chain: anvil from the pinned npm package, on 127.0.0.1, chain id
31337, its state kept under $KINT_HOME/devchain/ (DESIGN §7).

`--state` with `--state-interval` makes anvil dump its state every second and on exit, so a
crash loses at most a second of chain, and a restart reloads it. EpochAnchor is deployed
once from anvil's first well-known dev account (from the artifact shipped in the package);
its address is recorded in `devchain/devchain.json`, which is how the rest of kint finds the
devchain. A recorded anchor whose code is not the current artifact's (a devchain from before
a contract change) is replaced by a fresh deployment.

Dev-only powers (funding with `anvil_setBalance`, acting as an owner with
`anvil_impersonateAccount`) live here and nowhere else: on a real chain the owner's wallet
authorizes a machine's session key itself.
"""

from __future__ import annotations

import os
import platform
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import requests
from eth_account import Account
from web3 import Web3

from kint.chain.artifact import epoch_anchor_artifact, test_smart_account_artifact
from kint.chain.config import devchain_record
from kint.envsettings import pid_alive
from kint.paths import atomic_write, ensure_private_dir

CHAIN_ID = 31337
# anvil's first dev account: a published test key, funded by anvil at genesis.
DEV_DEPLOYER_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent
START_TIMEOUT_S = 20.0


class DevchainError(Exception):
    pass


def anvil_binary() -> Path:
    """The anvil of the pinned npm package (`make` installs it), or KINT_ANVIL."""
    explicit = os.environ.get("KINT_ANVIL")
    if explicit:
        return Path(explicit)
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower())
    system = {"linux": "linux", "darwin": "darwin"}.get(platform.system().lower(), "linux")
    path = PROJECT_ROOT / "node_modules" / "@foundry-rs" / f"anvil-{system}-{arch}" / "bin" / "anvil"
    if not path.exists():
        raise DevchainError(f"anvil is not installed at {path}; run `make node` in {PROJECT_ROOT}")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        r = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId",
                                     "params": []}, timeout=1.0)
        return r.ok and int(r.json()["result"], 16) == CHAIN_ID
    except (requests.RequestException, ValueError, KeyError):
        return False


def read_record(home: Path) -> dict[str, Any] | None:
    path = devchain_record(home)
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except orjson.JSONDecodeError:
        raise DevchainError(f"{path} is corrupt; remove it and run `kint devchain start`") from None


def status(home: Path) -> dict[str, Any] | None:
    """The running devchain's record, or None when none runs."""
    record = read_record(home)
    if record is None or not pid_alive(int(record["pid"])) or not _answers(record["rpc_url"]):
        return None
    return record


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


def start(home: Path) -> dict[str, Any]:
    """Start anvil (or return the running one), deploying EpochAnchor on a fresh chain."""
    running = status(home)
    if running is not None:
        return running
    ensure_private_dir(home)
    folder = ensure_private_dir(home / "devchain")
    state = folder / "state.json"
    previous = read_record(home)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = os.open(folder / "anvil.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(
            [str(anvil_binary()), "--host", "127.0.0.1", "--port", str(port), "--chain-id",
             str(CHAIN_ID), "--state", str(state), "--state-interval", "1",
             "--preserve-historical-states"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            preexec_fn=lambda: os.umask(0o077))  # its state file is ours alone, 0600
    finally:
        os.close(log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _answers(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise DevchainError(f"anvil did not start; see {folder / 'anvil.log'}")
        time.sleep(0.1)
    w3 = Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": 10},
                                exception_retry_configuration=None))
    anchor = previous.get("anchor") if previous else None
    if not anchor or not _is_current_anchor(w3, anchor):
        anchor = _deploy(w3)
    record = {"pid": proc.pid, "rpc_url": url, "chain_id": CHAIN_ID, "anchor": anchor,
              "port": port, "state": str(state)}
    atomic_write(devchain_record(home), orjson.dumps(record, option=orjson.OPT_INDENT_2))
    return record


def stop(home: Path, timeout_s: float = 15.0) -> bool:
    """Stop anvil (it dumps its state on the way out). True if one was running."""
    record = read_record(home)
    if record is None:
        return False
    pid = int(record["pid"])
    was_running = pid_alive(pid)
    if was_running:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while pid_alive(pid) and time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.05)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    # Keep the anchor address for the next start; drop what is no longer true.
    atomic_write(devchain_record(home), orjson.dumps(
        {"pid": 0, "rpc_url": record["rpc_url"], "chain_id": CHAIN_ID,
         "anchor": record["anchor"], "stopped": True}, option=orjson.OPT_INDENT_2))
    return was_running


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
