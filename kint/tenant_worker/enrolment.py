"""`enrol-<space16>.json`: who owns this space on chain and how this machine opens it. Its
presence is what "this machine is connected" means for a space.

v0.3.0's file holds the owner, tenant, space, account kind, the kek tags of the current
wraps and the contract (10-configuration.md); this kint adds what its supervisor needs to
route machine-wide commands to each space (the store and the space label) and the space's
own RPC endpoints, an extension (`kint connect --rpc-urls`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import orjson
from eth_utils import is_address

from kint.chain.config import BASE_CHAIN_ID
from kint.chain.devchain.anvil import CHAIN_ID as DEVCHAIN_ID
from kint.paths import atomic_write
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.state_format import CorruptStateFile

if TYPE_CHECKING:
    from kint.chain.config import ChainConfig

ENROL_VERSION = 2
# A space with no enrolment here: what push, pull and rekey refuse with (NOT_CONNECTED).
NOT_CONNECTED_MESSAGE = "this machine is not connected for this space"
NOT_CONNECTED_HINT = "run `kint connect --owner ADDRESS` first"
AccountKind = Literal["eoa", "smart"]


@dataclass
class Enrolment:
    space: str
    tenant: str
    owner: str
    account: AccountKind
    contract: str
    chain_id: int
    key_tags: list[str] = field(default_factory=list)
    session_address: str | None = None
    # True on the machine that made the vault: it must keep RECOVERY-<space16>.txt.
    vault_created: bool = False
    rpc_urls: list[str] | None = None
    db: str | None = None
    label: str | None = None
    v: int = ENROL_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def load_enrolment(path: Path) -> Enrolment | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise CorruptStateFile(path, "is not valid JSON (truncated or garbled)") from None
    if not isinstance(obj, dict):
        raise CorruptStateFile(path, "is not an enrolment file")
    if obj.get("v") != ENROL_VERSION:
        raise CorruptStateFile(path, f"is from another kint (version {obj.get('v')!r}); run "
                                     f"`kint connect` again")
    try:
        enrolment = Enrolment(**obj)
    except TypeError:
        raise CorruptStateFile(path, "does not have the fields of an enrolment") from None
    if (not isinstance(enrolment.owner, str) or not is_address(enrolment.owner)
            or enrolment.account not in ("eoa", "smart")):
        raise CorruptStateFile(path, "names no owner address or account kind")
    urls = enrolment.rpc_urls
    if urls is not None and not (isinstance(urls, list) and urls
                                 and all(isinstance(u, str) and u for u in urls)):
        raise CorruptStateFile(path, "has rpc_urls that are not a list of endpoints")
    return enrolment


def save_enrolment(path: Path, enrolment: Enrolment) -> None:
    atomic_write(path, orjson.dumps(enrolment.to_json(), option=orjson.OPT_INDENT_2))


def _chain_name(chain_id: int) -> str:
    return {BASE_CHAIN_ID: "Base", DEVCHAIN_ID: "the devchain"}.get(chain_id, f"chain {chain_id}")


def other_chain(enrolment: Enrolment, chain: ChainConfig) -> ProtocolError | None:
    """The refusal to read a head for a space connected on another chain than the one in
    force, else None. Its epochs, mirror and watermark are that chain's: the usual case is
    `kint devchain stop` after trying kint on the devchain (kint then reads Base, where
    the space has no epochs), or a devchain started on a machine connected on Base. Without
    this, status and doctor said only that Base did not answer, or that the chain was not
    in step, with no word of the chain the space lives on."""
    if enrolment.chain_id == chain.chain_id:
        return None
    was, now = _chain_name(enrolment.chain_id), _chain_name(chain.chain_id)
    if enrolment.chain_id == DEVCHAIN_ID:
        hint = ("read the devchain again: `kint devchain start` (its state is kept), with "
                "KINT_RPC_URL unset or naming its endpoint")
    elif chain.devchain:
        hint = (f"stop the devchain (`kint devchain stop`), or set KINT_RPC_URL to an "
                f"endpoint of {was}, to read {was} again")
    else:
        hint = f"point kint at {was} again (KINT_RPC_URL, or rpc_url in the config file)"
    return ProtocolError(ErrorCode.CONFIG_INVALID,
                         f"this space was connected on {was} (chain id {enrolment.chain_id}) "
                         f"and its epochs are there; kint now reads {now} (chain id "
                         f"{chain.chain_id})", hint)
