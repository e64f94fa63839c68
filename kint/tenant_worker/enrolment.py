"""`enrol-<space>.json`: who owns this space on chain, which chain, which keys this machine
holds for it. Its presence is what "this machine is connected" means for a space."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from kint.paths import atomic_write
from kint.tenant_worker.statefiles import CorruptStateFile

ENROL_VERSION = 1


@dataclass
class Enrolment:
    space: str
    tenant: str
    owner: str
    chain_id: int
    anchor: str
    session_address: str
    writer: str
    key_ids: list[str] = field(default_factory=list)
    # True on the machine that made the vault: it must keep RECOVERY-<space>.txt.
    vault_created: bool = False
    # This space's own endpoints (`kint connect --rpc-urls`), so one tenant's endpoint,
    # hung or not, is never another's. None: the machine's chain settings.
    rpc_urls: list[str] | None = None
    # The store and space label this enrolment was made for (machine-wide commands such
    # as `kint session-key rotate` route to each space with them).
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
        if obj.get("v") != ENROL_VERSION:
            raise CorruptStateFile(path, f"has unknown version {obj.get('v')!r}")
        return Enrolment(**obj)
    except (orjson.JSONDecodeError, TypeError, AttributeError):
        raise CorruptStateFile(path, "is not a valid enrolment file") from None


def save_enrolment(path: Path, enrolment: Enrolment) -> None:
    atomic_write(path, orjson.dumps(enrolment.to_json(), option=orjson.OPT_INDENT_2))
