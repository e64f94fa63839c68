"""Which space a store belongs to (DESIGN §5).

A space is one Sibyl store of one tenant: `keccak256("kint-space-v1" || label)`, and files
use its first 16 hex characters. The label is KINT_SPACE when set; else the tenant, for
Sibyl's own store; else `<tenant>@hermes:<profile>` for a Hermes profile store, because
Hermes profiles share a tenant but keep separate stores.

The client resolves the label in its own environment (its HOME, HERMES_HOME, credentials)
and sends it; the supervisor only hashes and checks it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from kint import settings

# Sibyl's default tenant (sibyl_memory_client.client.DEFAULT_TENANT), the last rung of its
# tenant ladder. Copied, not imported, so the CLI does not import the Sibyl SDK to start.
SIBYL_DEFAULT_TENANT = "00000000-0000-0000-0000-000000000001"
SPACE_PREFIX = b"kint-space-v1"


@dataclass(frozen=True)
class SpaceRef:
    label: str
    tenant: str
    db: str

    @property
    def space_id(self) -> str:
        return space_id(self.label)

    @property
    def space16(self) -> str:
        return self.space_id[:16]


def space_id(label: str) -> str:
    """The full space id, 64 hex characters. eth_hash is imported here, not with the
    module: finding its backend costs a command that computes no space id (`kint
    supervisor status`) a tenth of a second."""
    from eth_hash.auto import keccak

    return keccak(SPACE_PREFIX + label.encode("utf-8")).hex()


def sibyl_default_db() -> Path:
    raw = settings.value("SIBYL_MEMORY_DB")
    return (Path(raw).expanduser() if raw else Path.home() / ".sibyl-memory" / "memory.db").absolute()


def sibyl_credentials_path() -> Path:
    return Path(settings.value("SIBYL_CREDENTIALS")).expanduser()


def hermes_home() -> Path:
    return Path(settings.value("HERMES_HOME")).expanduser().absolute()


def resolve_tenant(explicit: str | None = None) -> str:
    """The tenant as Sibyl resolves it: KINT_TENANT, then the credentials' tenant_id, then
    account_id, then Sibyl's default tenant. A credentials file that is a symlink or does
    not parse is treated as absent, as Sibyl's own server does."""
    if explicit:
        return explicit
    env = settings.value("KINT_TENANT")
    if env:
        return env
    path = sibyl_credentials_path()
    try:
        if path.exists() and not path.is_symlink():
            creds = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(creds, dict):
                for key in ("tenant_id", "account_id"):
                    value = creds.get(key)
                    if isinstance(value, str) and value:
                        return value
    except (OSError, ValueError):
        pass
    return SIBYL_DEFAULT_TENANT


def hermes_profile_of(db: Path) -> str | None:
    """`default` for `$HERMES_HOME/sibyl/memory.db`, `p` for `.../profiles/p/memory.db`."""
    base = hermes_home() / "sibyl"
    if db == base / "memory.db":
        return "default"
    if db.name == "memory.db" and db.parent.parent == base / "profiles":
        return db.parent.name
    return None


def space_label(tenant: str, db: Path) -> str:
    explicit = settings.value("KINT_SPACE")
    if explicit:
        return explicit
    profile = hermes_profile_of(db)
    if profile is not None and db != sibyl_default_db():
        return f"{tenant}@hermes:{profile}"
    return tenant


def resolve(tenant: str | None = None, db: str | os.PathLike[str] | None = None) -> SpaceRef:
    """The space for `--tenant`/`--db` as given (either may be None: use the defaults)."""
    path = Path(db).expanduser().absolute() if db else sibyl_default_db()
    resolved_tenant = resolve_tenant(tenant)
    return SpaceRef(label=space_label(resolved_tenant, path), tenant=resolved_tenant,
                    db=str(path))


def discover(tenant: str | None = None) -> list[SpaceRef]:
    """Every store this machine's Sibyl paths hold: Sibyl's own, the Hermes default and
    every Hermes profile, with the space each one maps to. Only stores that exist."""
    candidates: list[Path] = [sibyl_default_db(), Path.home() / ".sibyl-memory" / "memory.db",
                              hermes_home() / "sibyl" / "memory.db"]
    profiles = hermes_home() / "sibyl" / "profiles"
    try:
        if profiles.is_dir():
            candidates += [p / "memory.db" for p in sorted(profiles.iterdir())]
    except OSError:
        pass
    seen: set[Path] = set()
    found: list[SpaceRef] = []
    for path in candidates:
        path = path.absolute()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        found.append(resolve(tenant, path))
    return found
