"""`kint rekey` given no key: what the user can give.

Every key that is to keep opening the vault must be given to a rekey (v0.3.0's 09-cli.md:
`--signature`, `--signature-file`, `--smart-account`; it has no flag that signs for the
owner, and neither has this kint). An owner that `kint connect --dev` made has no wallet:
its key is `KINT_HOME/devchain/owner-0x....key`, and no kint command signs the vault message
with it, so "give --signature -" alone sent the user to a wallet that does not exist. The
refusal names the one route there is: sign `kint canonical-payload`'s output with that key
(cast's prompt takes it, never argv) and pipe the signature in, as a wallet owner does. The
rekey it names is the refused one as it was given (`again`): a bare `kint rekey` after `kint
--tenant X rekey` would rekey the default space, whose owner may differ.
"""

from __future__ import annotations

import shlex
from typing import NoReturn

import click

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


def again(obj: Ctx) -> str:
    """The refused rekey's command line, its signature to come on stdin: the flags that pick
    the space (`--tenant`, `--db`) and the rekey's own that supply no key, as given, so that
    the rekey the hint names is the one that was asked for. Its passphrase flags are left
    out: with no signature they gave no key, and one read from stdin cannot share it."""
    params = click.get_current_context().params
    words = ["kint"]
    for flag, value in (("--tenant", obj.tenant), ("--db", obj.db)):
        if value is not None:
            words += [flag, value]
    words.append("rekey")
    if params.get("owner") is not None:
        words += ["--owner", params["owner"]]
    words += [flag for flag, name in (("--drop-missing", "drop_missing"),
                                      ("--over-skipped", "over_skipped")) if params.get(name)]
    if params.get("confirmations") is not None:
        words += ["--confirmations", str(params["confirmations"])]
    if params.get("as_json"):
        words.append("--json")
    return shlex.join([*words, "--signature", "-"])


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
                f"kint-canonical.json | {again(obj)}`, pasting that key at cast's prompt "
                f"(never on argv)")
