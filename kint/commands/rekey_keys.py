"""`kint rekey` given no key: what the user can give.

Every key that is to keep opening the vault must be given to a rekey (v0.3.0's 09-cli.md:
`--signature`, `--signature-file`, `--smart-account`; it has no flag that signs for the
owner, and neither has this kint). An owner that `kint connect --dev` made has no wallet:
its key is `KINT_HOME/devchain/owner-0x....key`, and no kint command signs the vault message
with it, so "give --signature -" alone sent the user to a wallet that does not exist. The
refusal names the one route there is: sign `kint canonical-payload`'s output with that key
(cast's prompt takes it, never argv) and pipe the signature in, as a wallet owner does.
"""

from __future__ import annotations

from typing import NoReturn

from kint.commands.common import Ctx, usage_error
from kint.commands.owner_address import connected_owner
from kint.paths import devchain_dir, kint_home

NONE_GIVEN = "rekey needs every key that is to keep opening the vault, and none was given"
NONE_GIVEN_HINT = "give --signature -, --signature-file PATH and/or --smart-account"


def dev_owner_key(obj: Ctx) -> tuple[str, str] | None:
    """(the connected owner, the file holding its key) when `kint connect --dev` made that
    owner on this machine, else None."""
    home = kint_home()
    owner = connected_owner(obj.tenant, obj.db, home)
    if owner is None:
        return None
    # kint.tenant_worker.dev_owner.owner_key_path's name, without loading eth_account.
    path = devchain_dir(home) / f"owner-{owner.lower()}.key"
    return (owner, str(path)) if path.is_file() else None


def refuse_no_key(obj: Ctx) -> NoReturn:
    """The refusal of a rekey given no key; for a `--dev` owner, how to sign for it."""
    dev = dev_owner_key(obj)
    if dev is None:
        usage_error(NONE_GIVEN, NONE_GIVEN_HINT)
    owner, path = dev
    usage_error(f"{NONE_GIVEN}: the vault's key is the signature of {owner}, the owner "
                f"`kint connect --dev` made, and no kint command signs with it",
                f"sign with the key in {path}: `kint canonical-payload --owner {owner} > "
                f"kint-canonical.json`, then `cast wallet sign -i --data --from-file "
                f"kint-canonical.json | kint rekey --signature -`, pasting that key at cast's "
                f"prompt (never on argv)")
