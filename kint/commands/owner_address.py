"""The owner a chain command acts for: an address a flag gives, checksummed, and the owner
this machine's enrolment names for the caller's space.

Apart from `kint.commands.onchain` (which loads web3 and the chain code): `--owner` on
`push`, `pull`, `compact`, `rekey` and `doctor` is checked here before the command goes to
its worker, and a refusal (a malformed address, another owner) should not wait ~0.5 s for
web3 to load first. kint.custody.ids' address helpers are all it needs (eth_utils' own,
with pydantic under them, cost ~0.1 s of CPU more).

A malformed address is a usage error (BAD_REQUEST, a hint, exit 2); an enrolment that
cannot be read is CORRUPT_STATE, refused as every command refuses (`common.refuse`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kint import spaces
from kint.commands.common import refuse, usage_error
from kint.custody.ids import NOT_ITS_CHECKSUM, address_problem, checksum_address
from kint.paths import space_files
from kint.protocol import ErrorCode
from kint.protocol.hints import CHECKSUM_HINT

if TYPE_CHECKING:
    from kint.tenant_worker.enrolment import Enrolment

# kint v0.3.0's refusal of a chain command with no owner to act for (14-agents.md, "Common
# errors and fixes"); docs/commands.md quotes it.
NO_OWNER = "no owner known on this machine: pass --owner 0x... or run kint connect"


def checked_address(value: str, flag: str = "--owner") -> str:
    """`value` checksummed, or a refusal naming the flag."""
    problem = address_problem(value)
    if problem is not None:
        usage_error(f"{flag} {value!r} {problem}",
                    CHECKSUM_HINT if problem == NOT_ITS_CHECKSUM else None)
    return checksum_address(value)


def connected_owner(tenant: str | None, db: str | None, home: Path,
                    owner_given: bool = False) -> str | None:
    """The owner this machine is connected to for the caller's space: the `owner` field of
    `enrol-<space16>.json`, or None when this space is not connected here. A file that
    names none is refused; `owner_given` (the caller passed --owner, which is checked
    against it) leaves `pass --owner` out of what to do."""
    todo = ("run kint connect again" if owner_given
            else "pass --owner 0x... or run kint connect again")
    found = enrolment(spaces.resolve(tenant, db), home, todo)
    return None if found is None else checksum_address(found.owner)


def connected_account_kind(owner: str, tenant: str | None, db: str | None,
                           home: Path) -> str | None:
    """How `owner` opened the caller's space on this machine: "smart" (a Base Account,
    connected with `--smart-account`, its vault key a passphrase) or "eoa"; None when the
    space is not connected here, or is connected to another owner (then nothing here says
    what kind of account `owner` is)."""
    found = enrolment(spaces.resolve(tenant, db), home,
                      "run kint connect again, or pass --tenant for a space that is "
                      "connected here")
    if found is None or checksum_address(found.owner) != checksum_address(owner):
        return None
    return found.account


def enrolment(ref: "spaces.SpaceRef", home: Path, todo: str) -> "Enrolment | None":
    """The enrolment of `ref`'s space, or None when it is not connected here; one that
    cannot be trusted is refused (CORRUPT_STATE, naming the file and why), `todo` saying
    what to do. The worker's own reader (kint.tenant_worker.enrolment), so the command
    line and the worker refuse the same files."""
    from kint.tenant_worker.enrolment import load_enrolment
    from kint.tenant_worker.state_format import CorruptStateFile

    try:
        return load_enrolment(space_files(home, ref.space16)["enrol"])
    except CorruptStateFile as err:
        refuse(ErrorCode.CORRUPT_STATE, str(err), todo)


def resolve_owner(explicit: str | None, tenant: str | None, db: str | None,
                  home: Path) -> str:
    """`--owner` when given, else the connected owner; a refusal when there is neither."""
    if explicit:
        return checked_address(explicit)
    owner = connected_owner(tenant, db, home)
    if owner is None:
        ref = spaces.resolve(tenant, db)
        refuse(ErrorCode.NOT_CONNECTED, NO_OWNER,  # the space in the hint is ours
               f"pass --owner 0x... (the owner wallet), or run kint connect for space "
               f"{ref.space16} (tenant {ref.tenant}) first")
    return owner
