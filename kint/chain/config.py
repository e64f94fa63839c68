"""Which chain this machine anchors on, read once per use from the environment or from the
devchain's record (DESIGN §7).

Real use: `KINT_RPC_URLS` (comma-separated), `KINT_CHAIN_ID`, `KINT_ANCHOR_ADDRESS`,
`KINT_CONFIRMATIONS` (default 2). Without them, a running devchain under KINT_HOME
(`kint devchain start`) is used. Without either, the machine is not connected to a chain.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson

from kint.envsettings import env_float

DEFAULT_CONFIRMATIONS = 2
DEFAULT_RPC_TIMEOUT_S = 10.0


class ChainConfigError(Exception):
    """The chain settings are incomplete or malformed."""


@dataclass(frozen=True)
class ChainConfig:
    rpc_urls: tuple[str, ...]
    chain_id: int
    anchor: str
    confirmations: int
    rpc_timeout_s: float
    devchain: bool = False

    @property
    def single_rpc_ok(self) -> bool:
        """A cold-start pull needs two endpoints that agree, unless allowed otherwise; the
        devchain is one local process, so a second endpoint could only repeat it."""
        return self.devchain or os.environ.get("KINT_ALLOW_SINGLE_RPC") == "1"


def devchain_record(home: Path) -> Path:
    return home / "devchain" / "devchain.json"


def load_chain_config(home: Path) -> ChainConfig | None:
    timeout = env_float("KINT_RPC_TIMEOUT", DEFAULT_RPC_TIMEOUT_S, minimum=0.1)
    urls = os.environ.get("KINT_RPC_URLS")
    if urls:
        rpc = tuple(u.strip() for u in urls.split(",") if u.strip())
        try:
            chain_id = int(os.environ["KINT_CHAIN_ID"])
            anchor = os.environ["KINT_ANCHOR_ADDRESS"]
        except (KeyError, ValueError):
            raise ChainConfigError(
                "KINT_RPC_URLS is set but KINT_CHAIN_ID or KINT_ANCHOR_ADDRESS is missing or "
                "not valid") from None
        try:
            confirmations = int(os.environ.get("KINT_CONFIRMATIONS", DEFAULT_CONFIRMATIONS))
        except ValueError:
            confirmations = DEFAULT_CONFIRMATIONS
        return ChainConfig(rpc, chain_id, anchor, max(1, confirmations), timeout)
    record = devchain_record(home)
    if record.exists():
        try:
            data = orjson.loads(record.read_bytes())
            return ChainConfig((data["rpc_url"],), int(data["chain_id"]), data["anchor"], 1,
                               timeout, devchain=True)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            raise ChainConfigError(f"{record} is corrupt; run `kint devchain stop` and "
                                   f"`kint devchain start`") from None
    return None
