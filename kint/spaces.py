"""Which space a store belongs to (README, "How it runs": a space).

A space is one Sibyl store of one tenant: `keccak256("kint-space-v1" || label)`, and files
use its first 16 hex characters. The label is KINT_SPACE when set; else
`<tenant>@hermes:<profile>` for a Hermes profile store, because Hermes profiles share a
tenant but keep separate stores; else the tenant.

Which Hermes profile a store belongs to is read from its path alone, never from the
shell's HERMES_HOME, SIBYL_MEMORY_DB or cwd: `kint --db <store>` must name the same space
from any shell, and a profile store must never take the tenant's own space. Sibyl's Hermes
adapter (sibyl-memory-hermes 0.5.0 under hermes-agent 0.19) keeps the default profile's
store at `<root>/sibyl/memory.db` and profile p's at `<HERMES_HOME>/sibyl/profiles/p/memory.db`,
where Hermes runs profile p with HERMES_HOME = `<root>/profiles/p`: so
`<root>/profiles/p/sibyl/profiles/p/memory.db` (measured by driving the adapter through
Hermes' own plugin loader; `<root>/sibyl/profiles/p/memory.db` when HERMES_HOME was not
passed on to the agent).

The client resolves the label in its own environment (its HOME, credentials) and sends it;
the supervisor only hashes and checks it.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from kint import settings

# Sibyl's default tenant (sibyl_memory_client.client.DEFAULT_TENANT), the last rung of its
# tenant ladder. Copied, not imported, so the CLI does not import the Sibyl SDK to start.
SIBYL_DEFAULT_TENANT = "00000000-0000-0000-0000-000000000001"
SPACE_PREFIX = b"kint-space-v1"
# Hermes' own rule for a profile name (hermes_cli.profiles._PROFILE_ID_RE).
HERMES_PROFILE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
STORE_NAME = "memory.db"
# The first 16 bytes of every SQLite database file (an empty file is one too: SQLite writes
# the header on the first write).
SQLITE_HEADER = b"SQLite format 3\x00"


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
    """The full space id, 64 hex characters. kint.keccak is imported here, not with the
    module: loading pycryptodome would cost a command that computes no space id (`kint
    supervisor status`) a fifth of its time."""
    from kint.keccak import keccak

    return keccak(SPACE_PREFIX + label.encode("utf-8")).hex()


def sibyl_default_db() -> Path:
    raw = settings.value("SIBYL_MEMORY_DB")
    path = Path(raw).expanduser() if raw else Path.home() / ".sibyl-memory" / "memory.db"
    return path.absolute()


def sibyl_credentials_path() -> Path:
    return Path(settings.value("SIBYL_CREDENTIALS")).expanduser()


def hermes_root() -> Path:
    """Hermes' root: HERMES_HOME (its grandparent when it names a profile folder, as it does
    inside `hermes -p <profile>`), else ~/.hermes."""
    home = Path(settings.value("HERMES_HOME")).expanduser().absolute()
    return home.parent.parent if home.parent.name == "profiles" else home


@dataclass(frozen=True)
class TenantOrigin:
    """The tenant and where it came from: `--tenant`, `KINT_TENANT`, `credentials.json`
    (its tenant_id, else account_id), or `Sibyl's default`. `unused` says why Sibyl's credentials
    gave none (a file that is missing where SIBYL_CREDENTIALS points, a symlink, one that
    does not parse or names neither id), or is None: nothing to tell the user."""

    tenant: str
    source: str
    unused: str | None = None


def _credentials_tenant(path: Path) -> tuple[str | None, str | None]:
    """(tenant, why none) from Sibyl's credentials file. A symlink or
    a file that does not parse is treated as absent, as Sibyl's own server does."""
    try:
        if not path.exists() and not path.is_symlink():
            return None, "missing"
        if path.is_symlink():
            return None, f"{path} is a symlink, which Sibyl reads as no credentials"
        creds = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        return None, f"{path} cannot be read ({err.strerror or err}): Sibyl reads no credentials"
    except ValueError:
        return None, f"{path} is not JSON: Sibyl reads it as no credentials"
    if isinstance(creds, dict):
        for key in ("tenant_id", "account_id"):
            value = creds.get(key)
            if isinstance(value, str) and value:
                return value, None
    return None, f"{path} names no tenant_id or account_id"


def tenant_origin(explicit: str | None = None) -> TenantOrigin:
    """The tenant as Sibyl resolves it, and where it came from: `--tenant`, KINT_TENANT,
    the credentials' tenant_id, then account_id, then Sibyl's default tenant."""
    if explicit:
        return TenantOrigin(explicit, "--tenant")
    env = settings.value("KINT_TENANT")
    if env:
        return TenantOrigin(env, "KINT_TENANT")
    path = sibyl_credentials_path()
    tenant, why = _credentials_tenant(path)
    if tenant is not None:
        return TenantOrigin(tenant, "credentials.json")
    if why == "missing":  # no account: Sibyl's default, unless the user named a file
        named = settings.lookup("SIBYL_CREDENTIALS").source != settings.DEFAULT
        why = f"SIBYL_CREDENTIALS names {path}, which does not exist" if named else None
    return TenantOrigin(SIBYL_DEFAULT_TENANT, "Sibyl's default", why)


def resolve_tenant(explicit: str | None = None) -> str:
    """The tenant as Sibyl resolves it (`tenant_origin`)."""
    return tenant_origin(explicit).tenant


def hermes_profile_of(db: Path) -> str | None:
    """The Hermes profile whose store `db` is, from its path alone: `p` for
    `.../sibyl/profiles/<p>/memory.db`, `default` for `.../sibyl/memory.db`, else None."""
    if db.name != STORE_NAME:
        return None
    folder = db.parent
    if folder.name == "sibyl":
        return "default"
    if (folder.parent.name == "profiles" and folder.parent.parent.name == "sibyl"
            and HERMES_PROFILE.match(folder.name)):
        return folder.name
    return None


def space_label(tenant: str, db: Path) -> str:
    explicit = settings.value("KINT_SPACE")
    if explicit:
        return explicit
    profile = hermes_profile_of(db)
    return tenant if profile is None else f"{tenant}@hermes:{profile}"


def resolve(tenant: str | None = None, db: str | os.PathLike[str] | None = None) -> SpaceRef:
    """The space for `--tenant`/`--db` as given (either may be None: use the defaults)."""
    path = Path(db).expanduser().absolute() if db else sibyl_default_db()
    resolved_tenant = resolve_tenant(tenant)
    return SpaceRef(label=space_label(resolved_tenant, path), tenant=resolved_tenant,
                    db=str(path))


# What to do about a store path `store_problem` refuses (the command line, the supervisor).
STORE_HINT = "check --db or SIBYL_MEMORY_DB: give the store file itself (memory.db)"


def store_problem(db: str | os.PathLike[str], *, header: bool = True) -> str | None:
    """Why `db` can never be a Sibyl store (`is a folder, not a regular file`, ...), or None
    when it can. A store that does not exist yet can: Sibyl creates it on the first write.

    A path that never opens must be refused before a request names it: a worker started on
    it fails at every start until its space is quarantined, and a space is bound to the
    store it was asked for (kint.supervisor.bindings), so a mistyped `--db ~/notes` would
    otherwise shut the tenant's real store out. One stat, and 16 bytes read.

    `header=False` skips the read, and a process that holds SQLite connections to the store
    (a worker) must pass it: closing any descriptor of a file drops every POSIX lock the
    process holds on it, SQLite's own included, and a reader that lost its lock may see
    the WAL reset under it."""
    try:
        st = os.lstat(db)
    except FileNotFoundError:
        return None
    except OSError as err:
        return _unless_denied(err)
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink (Sibyl refuses symlinked stores)"
    if stat.S_ISDIR(st.st_mode):
        return "is a folder, not a regular file"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_size == 0 or not header:
        return None
    try:
        with open(db, "rb") as f:
            first_bytes = f.read(len(SQLITE_HEADER))
    except OSError as err:
        return _unless_denied(err)
    return None if first_bytes == SQLITE_HEADER else "is not a SQLite database"


def _unless_denied(err: OSError) -> str | None:
    """store_problem's answer to the OS refusing a look at the store: None when it refused
    this user permission (the store may be perfectly fine, only closed to this user: the
    worker and the commands that open it say so, with how to fix it, kint.store_denied),
    which a refusal here would call a path that can never be a store and send to `--db`.
    None too when the process (or the system) is out of file descriptors: that says
    nothing of the path, and the supervisor refuses a worker it has no room for itself
    (kint.open_files)."""
    if err.errno in (errno.EACCES, errno.EPERM, errno.EMFILE, errno.ENFILE):
        return None
    return f"cannot be read ({err.strerror})"


def hermes_stores(root: Path) -> list[Path]:
    """Every profile store under a Hermes root that exists: the default profile's, each
    profile's in its own folder, and any left under the root's own `sibyl/profiles/`."""
    patterns = ("sibyl/memory.db", "profiles/*/sibyl/profiles/*/memory.db",
                "sibyl/profiles/*/memory.db")
    found: list[Path] = []
    for pattern in patterns:
        try:
            found += sorted(p for p in root.glob(pattern) if hermes_profile_of(p) is not None)
        except OSError:
            pass
    return found


def discover(tenant: str | None = None) -> list[SpaceRef]:
    """Every store this machine's Sibyl paths hold: Sibyl's own, then every Hermes profile
    store under Hermes' root, with the space each one maps to. Only stores that exist."""
    candidates = [sibyl_default_db(), Path.home() / ".sibyl-memory" / STORE_NAME,
                  *hermes_stores(hermes_root())]
    seen: set[Path] = set()
    found: list[SpaceRef] = []
    for path in candidates:
        path = path.absolute()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        found.append(resolve(tenant, path))
    return found
