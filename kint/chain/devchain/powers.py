"""Dev-only powers over the devchain: deploying contracts from anvil's first dev account,
funding with `anvil_setBalance` or a transfer from that account, acting as an owner with
`anvil_impersonateAccount`. They live here and nowhere else: on a real chain the owner's
wallet authorizes a machine's session key itself, and a wallet funds it.
"""

from __future__ import annotations

import time
from typing import Any

import requests
from eth_account import Account
from web3 import Web3

from kint.chain.artifact import test_smart_account_artifact
from kint.chain.devchain.anvil import CHAIN_ID
from kint.chain.devchain.errors import STOPPED_HINT, DevchainError, DevchainSilent
from kint.protocol import ErrorCode
from kint.settings.urls import redact_url

# anvil's first dev account: a published test key, funded by anvil at genesis.
DEV_DEPLOYER_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"


# What anvil answers a transaction at a nonce another one took first.
NONCE_TAKEN = ("nonce too low", "already imported", "replacement transaction underpriced")
DEPLOY_TRIES = 5
# One price for every deploy: two sends given the same nonce are then refused (above),
# never one replacing the other, whose sender would wait for a receipt that never comes.
# Above any base fee a devchain of one transaction per block reaches (it falls from 1 gwei).
DEPLOY_GAS_PRICE = 10**10


def send_from_dev_account(url: str, tx: dict[str, Any]) -> str:
    """Send `tx` from anvil's first dev account; its hash. Every deploy and `kint devchain
    fund` on a devchain comes from that one account, and two at once (two machines of one
    devchain, the test suite's two workers) that each read the pending nonce and signed at
    it collided, the loser refused "nonce too low" or "already imported". So it is sent
    unsigned (`eth_sendTransaction`: anvil holds its dev accounts' keys), anvil giving the
    nonce, at DEPLOY_GAS_PRICE, and sent again when refused so: anvil reads the nonce and
    takes the transaction in two steps, so two sends at one instant can still meet
    (review25d saw a few in a hundred at four at once)."""
    deployer = Account.from_key(DEV_DEPLOYER_KEY).address
    attempt = 1
    while True:
        try:
            return str(dev_rpc(url, "eth_sendTransaction",
                               [{"from": deployer, "gasPrice": hex(DEPLOY_GAS_PRICE), **tx}]))
        except DevchainError as err:
            if attempt == DEPLOY_TRIES or not any(said in str(err).lower()
                                                  for said in NONCE_TAKEN):
                raise
        attempt += 1


def deploy_artifact(w3: Web3, art: dict[str, Any], *args: Any) -> str:
    """Deploy `art` with constructor `args` from anvil's first dev account
    (`send_from_dev_account`, which says why it is sent so); its address."""
    data = w3.eth.contract(abi=art["abi"], bytecode=art["bytecode"]).constructor(
        *args).data_in_transaction
    tx_hash = send_from_dev_account(w3.provider.endpoint_uri, {"data": data})
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30)
    if receipt["status"] != 1:
        raise DevchainError(f"deploying {art.get('contractName', 'a contract')} reverted")
    return str(receipt["contractAddress"])


def deploy_test_smart_account(url: str, signer_address: str) -> str:
    """Deploy a TestSmartAccount (a minimal ERC-1271 account, FOR TESTS ONLY) whose
    signatures and calls come from `signer_address`; its address. Lets tests exercise the
    contract's smart-account owner path on the devchain."""
    w3 = Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": 10},
                                exception_retry_configuration=None))
    return deploy_artifact(w3, test_smart_account_artifact(),
                            Web3.to_checksum_address(signer_address))


def dev_rpc(url: str, method: str, params: list[Any]) -> Any:
    """One JSON-RPC call to the devchain; every way it can fail (no answer, an answer that
    is not JSON-RPC, an error) is a DevchainError, so a caller reports it with its code."""
    try:
        r = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                     "params": params}, timeout=10)
        body = r.json()
    except (requests.RequestException, ValueError) as err:
        raise DevchainError(f"{method}: the devchain at {redact_url(url)} did not answer "
                            f"({type(err).__name__})",
                            "`kint devchain status` says whether it runs; `kint devchain "
                            "start` starts it") from None
    if not isinstance(body, dict):
        raise DevchainError(f"{method}: the devchain at {redact_url(url)} answered "
                            f"something that is not JSON-RPC")
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


def transfer_from_dev_account(url: str, address: str, wei: int,
                              timeout_s: float = 30.0) -> dict[str, Any]:
    """Send `wei` to `address` from anvil's first dev account (unlocked by anvil, so no key
    is sent), as `cast send --unlocked` would: a transaction of its own, seen by every
    machine that reads the devchain, where `fund`'s `anvil_setBalance` is a dev power whose
    amount replaces the balance. Refused before anything is sent when `url` does not
    answer (DevchainSilent) or answers for another chain id: anvil's accounts are unlocked
    only on the devchain. Its sender, transaction, block and the balance it left."""
    try:
        chain = int(dev_rpc(url, "eth_chainId", []), 16)
    except DevchainError as err:  # nothing sent: the devchain is stopped, or not there
        raise DevchainSilent(f"{err}; nothing was sent", STOPPED_HINT) from None
    if chain != CHAIN_ID:
        raise DevchainError(f"{redact_url(url)} answers for chain {chain}, not the devchain's "
                            f"{CHAIN_ID}; nothing was sent",
                            hint="`kint devchain status` says where the devchain runs",
                            code=ErrorCode.CONFIG_INVALID)
    sender = Account.from_key(DEV_DEPLOYER_KEY).address
    # The deploys' account: sent as they are, so neither refuses nor replaces the other.
    tx_hash = send_from_dev_account(url, {"to": address, "value": hex(wei)})
    deadline = time.monotonic() + timeout_s
    while True:
        receipt = dev_rpc(url, "eth_getTransactionReceipt", [tx_hash])
        if receipt is not None:
            break
        if time.monotonic() > deadline:
            raise DevchainError(f"no receipt for {tx_hash} within {timeout_s:g}s",
                                hint="`kint devchain status` says whether the devchain runs")
        time.sleep(0.1)
    if int(receipt["status"], 16) != 1:
        raise DevchainError(f"the transfer {tx_hash} from {sender} reverted")
    balance = int(dev_rpc(url, "eth_getBalance", [address, "latest"]), 16)
    return {"from": sender, "tx": tx_hash, "block": int(receipt["blockNumber"], 16),
            "balance_wei": balance}
