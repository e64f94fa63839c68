"""Which chain this machine anchors on, read once per use (DESIGN §7; v0.3.0's
10-configuration.md, "Base: chain, RPCs and contract").

Base mainnet is the default: chain 8453, the deployed EpochAnchor
`0xa22E03f7a4145Bf4909a83595C90a38E14d79600` (`KINT_CONTRACT`), the primary endpoint
`KINT_RPC_URL` (else `https://mainnet.base.org`) and an independent second opinion for a
cold start, `KINT_RPC_URL_2` (else `https://base-rpc.publicnode.com` when the primary is
`https://mainnet.base.org`, else `https://mainnet.base.org`).

A devchain running under KINT_HOME (`kint devchain start`) overrides the defaults: its
record names the endpoint and the contract it deployed. An explicit `KINT_RPC_URL` beats
the devchain, so a machine can point at Base while a devchain runs.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import orjson
from eth_utils import is_address, to_checksum_address

from kint.envsettings import env_float

BASE_CHAIN_ID = 8453
DEFAULT_CONTRACT = "0xa22E03f7a4145Bf4909a83595C90a38E14d79600"
BASE_PUBLIC_RPC = "https://mainnet.base.org"
BASE_SECOND_RPC = "https://base-rpc.publicnode.com"
DEFAULT_CONFIRMATIONS = 2
DEFAULT_RPC_TIMEOUT_S = 10.0


class ChainConfigError(Exception):
    """The chain settings are malformed (a contract that is not an address, a garbled
    devchain record)."""


@dataclass(frozen=True)
class ChainConfig:
    """`rpc_urls[0]` is the primary endpoint, `rpc_urls[1]` the second opinion.
    `chain_id` is what transactions are signed for: 8453 on Base, the devchain's own id
    locally. (The epoch AAD and the vault message use 8453 whatever this says.)"""

    rpc_urls: tuple[str, ...]
    chain_id: int
    anchor: str
    confirmations: int
    rpc_timeout_s: float
    devchain: bool = False

    @property
    def single_rpc_ok(self) -> bool:
        """A cold-start pull needs two independent endpoints that agree, unless
        KINT_ALLOW_SINGLE_RPC=1; the devchain is one local process, so a second endpoint
        could only repeat it."""
        return self.devchain or os.environ.get("KINT_ALLOW_SINGLE_RPC") == "1"

    @property
    def second_is_same_endpoint(self) -> bool:
        return len(self.rpc_urls) < 2 or same_endpoint(self.rpc_urls[0], self.rpc_urls[1])


def _env(name: str) -> str | None:
    """An empty value counts as unset (10-configuration.md)."""
    value = os.environ.get(name)
    return value if value else None


def same_endpoint(a: str, b: str) -> bool:
    """Two URLs are the same endpoint when host, port and path match; a trailing slash is
    ignored."""
    pa, pb = urllib.parse.urlsplit(a), urllib.parse.urlsplit(b)

    def key(p: urllib.parse.SplitResult) -> tuple[str, int | None, str]:
        port = p.port or {"https": 443, "http": 80}.get(p.scheme)
        return ((p.hostname or "").lower(), port, p.path.rstrip("/"))

    return key(pa) == key(pb)


def second_rpc(primary: str) -> str:
    explicit = _env("KINT_RPC_URL_2")
    if explicit:
        return explicit
    return BASE_SECOND_RPC if same_endpoint(primary, BASE_PUBLIC_RPC) else BASE_PUBLIC_RPC


def redact_url(url: str) -> str:
    """Scheme, host and port only: an API key in a path or query never reaches a log line,
    a status table or an error."""
    p = urllib.parse.urlsplit(url)
    host = p.hostname or ""
    netloc = f"{host}:{p.port}" if p.port else host
    rest = "/<redacted>" if (p.path.strip("/") or p.query) else ""
    return f"{p.scheme}://{netloc}{rest}"


def devchain_record(home: Path) -> Path:
    return home / "devchain" / "devchain.json"


def contract_address() -> str:
    value = _env("KINT_CONTRACT") or DEFAULT_CONTRACT
    if not is_address(value):
        raise ChainConfigError(f"KINT_CONTRACT={value!r} is not an address")
    return to_checksum_address(value)


def load_chain_config(home: Path) -> ChainConfig:
    timeout = env_float("KINT_RPC_TIMEOUT", DEFAULT_RPC_TIMEOUT_S, minimum=0.1)
    primary = _env("KINT_RPC_URL")
    record = devchain_record(home)
    if primary is None and record.exists():
        try:
            data = orjson.loads(record.read_bytes())
            return ChainConfig((data["rpc_url"],), int(data["chain_id"]),
                               to_checksum_address(data["anchor"]), 1, timeout, devchain=True)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            raise ChainConfigError(f"{record} is corrupt; run `kint devchain stop` and "
                                   f"`kint devchain start`") from None
    primary = primary or BASE_PUBLIC_RPC
    return ChainConfig((primary, second_rpc(primary)), BASE_CHAIN_ID, contract_address(),
                       DEFAULT_CONFIRMATIONS, timeout)
