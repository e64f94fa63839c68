"""The compiled contracts, shipped inside the package (kint/chain/artifacts/*.json) so a wheel
install carries exactly the bytes the pinned solc made of contracts/*.sol.

`node contracts/compile.mjs` writes them and `--check` (run by the test suite) proves they
are what a fresh compile of the committed source gives. Each artifact holds the abi, the
creation and runtime bytecode, the compiler version, the settings and the source's sha256.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import orjson

EPOCH_ANCHOR = "EpochAnchor"
TEST_SMART_ACCOUNT = "TestSmartAccount"


class ArtifactMissing(Exception):
    """The package was built without its contract artifacts."""


@functools.lru_cache(maxsize=None)
def load_artifact(name: str = EPOCH_ANCHOR) -> dict[str, Any]:
    """The artifact of contract `name`, read through importlib.resources so it is found in
    a source checkout, an editable install and a wheel alike. Cached: it never changes while
    a process runs."""
    ref = resources.files("kint.chain").joinpath("artifacts", f"{name}.json")
    try:
        return orjson.loads(ref.read_bytes())
    except FileNotFoundError:
        raise ArtifactMissing(f"contract artifact {name}.json is missing from "
                              f"kint/chain/artifacts; run `node contracts/compile.mjs`") from None


def epoch_anchor_artifact() -> dict[str, Any]:
    """EpochAnchor, the contract kint anchors epochs on."""
    return load_artifact(EPOCH_ANCHOR)


def test_smart_account_artifact() -> dict[str, Any]:
    """TestSmartAccount, a minimal ERC-1271 account for tests only; never deploy it for use."""
    return load_artifact(TEST_SMART_ACCOUNT)


# Not a test: pytest would otherwise collect the function above if a test imported it by name.
test_smart_account_artifact.__test__ = False  # type: ignore[attr-defined]
