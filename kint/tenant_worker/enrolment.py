"""`enrol-<space16>.json`: who owns this space on chain and how this machine opens it. Its
presence is what "this machine is connected" means for a space.

v0.3.0's file holds the owner, tenant, space, account kind, the kek tags of the current
wraps and the contract (10-configuration.md); this kint adds what its supervisor needs to
route machine-wide commands to each space (the store and the space label) and the space's
own RPC endpoints, an extension (`kint connect --rpc-urls`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from kint.custody.ids import is_address_text as is_address  # the CLI reads it: no eth_utils
from kint.paths import atomic_write
from kint.tenant_worker.state_format import CorruptStateFile, load_json

ENROL_VERSION = 2
# A space with no enrolment here: what push, pull and rekey refuse with (NOT_CONNECTED, its
# hint kint.protocol.hints.NOT_CONNECTED_HINT).
NOT_CONNECTED_MESSAGE = "this machine is not connected for this space"
AccountKind = Literal["eoa", "smart"]
# A kek tag as connect writes it: 16 bytes (kint.custody.wraps.TAG_LEN, not imported: the
# CLI reads this file without the custody modules), in hex.
_KEK_TAG = re.compile(r"[0-9a-fA-F]{32}")


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
    """The space's enrolment, None when this machine is not connected to it; a file that
    cannot be read or trusted is a CorruptStateFile naming it (state_format's reader, as
    every state file: one this user cannot read, or a directory, was an OSError that the
    worker answered INTERNAL and the command line as a traceback)."""
    try:
        obj = load_json(path)
    except FileNotFoundError:
        return None
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
    # Which chain and contract hold its epochs: what a command compares with the ones in
    # force before it reads the head (enrolled_chain.py).
    if (not isinstance(enrolment.contract, str) or not is_address(enrolment.contract)
            or type(enrolment.chain_id) is not int):
        raise CorruptStateFile(path, "names no contract address or chain id")
    urls = enrolment.rpc_urls
    if urls is not None and not (isinstance(urls, list) and urls
                                 and all(isinstance(u, str) and u for u in urls)):
        raise CorruptStateFile(path, "has rpc_urls that are not a list of endpoints")
    # The kek tags of the current wraps, which tell a rotation's epoch from a leaked key's
    # (data_key.key_tags_here): a value that is not a list of tags would fail there as a
    # bug (TypeError) rather than as this file, named.
    tags = enrolment.key_tags
    if not (isinstance(tags, list) and all(isinstance(t, str) and _KEK_TAG.fullmatch(t)
                                           for t in tags)):
        raise CorruptStateFile(path, "has key_tags that are not a list of kek tags")
    return enrolment


def save_enrolment(path: Path, enrolment: Enrolment) -> None:
    atomic_write(path, orjson.dumps(enrolment.to_json(), option=orjson.OPT_INDENT_2))

