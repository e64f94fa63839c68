"""What the authorize tests share: a machine on the session's devchain with a session key,
fresh owners, and the chain read through kint's own binding."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from chain_machines import join_devchain, make_session_key
from conftest import KINT, Sandbox, make_sandbox
from kint.chain import devchain
from kint.chain.anchor import Anchor
from kint.chain.config import ChainConfig, devchain_record
from kint.chain.rpc import RpcTracker

ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")


@dataclass
class Machine:
    sb: Sandbox
    url: str
    anchor: Anchor
    key: str  # this machine's session key address

    def kint(self, *args: str, input: str | None = None, env: dict[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KINT, *args], env={**self.sb.env, **(env or {})}, text=True,
                              input=input, capture_output=True, timeout=timeout)

    def owner(self, wei: int = 10**18) -> LocalAccount:
        """A fresh owner, funded: every test owns its owners, so nothing leaks between them."""
        account = Account.create()
        if wei:
            devchain.fund(self.url, account.address, wei)
        return account

    def fund_key(self, wei: int = 10**17) -> None:
        devchain.fund(self.url, self.key, wei)

    def now(self) -> int:
        return int(self.anchor.w3.eth.get_block("latest")["timestamp"])

    def tx_count(self, address: str) -> int:
        return int(self.anchor.w3.eth.get_transaction_count(address, "latest"))

    def rpc(self, method: str, params: list) -> object:
        return devchain.dev_rpc(self.url, method, params)


def new_machine(root: Path, chain_home: Path, create_key: bool = True) -> Machine:
    sb = make_sandbox(root)
    join_devchain(chain_home, sb)
    record = json.loads(devchain_record(chain_home).read_text())
    config = ChainConfig(rpc_urls=(record["rpc_url"],), chain_id=devchain.CHAIN_ID,
                         anchor=record["anchor"], confirmations=1, rpc_timeout_s=10.0,
                         devchain=True)
    machine = Machine(sb, record["rpc_url"], Anchor(config, RpcTracker()), key="")
    if create_key:  # `kint session-key create` itself: test_session_key_create_show_rotate
        machine.key = make_session_key(sb)
    return machine
