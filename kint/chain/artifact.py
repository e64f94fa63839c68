"""The compiled EpochAnchor: abi and bytecode, committed beside the source in contracts/
and checked against a fresh compile by the test suite."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import orjson

CONTRACTS_DIR = Path(__file__).resolve().parent.parent.parent / "contracts"
ARTIFACT = CONTRACTS_DIR / "EpochAnchor.json"


@functools.lru_cache(maxsize=1)
def load_artifact() -> dict[str, Any]:
    return orjson.loads(ARTIFACT.read_bytes())
