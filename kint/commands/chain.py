"""`kint connect`, `kint push`, `kint pull`, `kint compact`: enrol this machine, anchor the
store's changes, restore the chain's epochs. All run in the space's worker."""

from __future__ import annotations

import click

from kint.commands.common import Ctx, call_with_progress, echo_json, space_call


@click.command("connect")
@click.option("--dev", is_flag=True, help="On the devchain: make and fund a fresh owner.")
@click.option("--recovery-code", default=None, metavar="CODE",
              help="Restore on a new machine with the space's recovery code.")
@click.option("--owner", default=None, metavar="ADDRESS",
              help="The owner's address (with --recovery-code, or on a real chain).")
@click.option("--rpc-urls", default=None, metavar="URL[,URL]",
              help="This space's own JSON-RPC endpoints (default: the machine's chain).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def connect_cmd(obj: Ctx, dev: bool, recovery_code: str | None, owner: str | None,
                rpc_urls: str | None, as_json: bool) -> None:
    """Enrol this machine in its space: a fresh vault (first machine), or the recovery code
    (a new machine). Writes the recovery code to RECOVERY-<space>.txt for a fresh vault."""
    args: dict = {"dev": dev}
    if recovery_code is not None:
        args["recovery_code"] = recovery_code
    if owner is not None:
        args["owner"] = owner
    if rpc_urls is not None:
        args["rpc_urls"] = rpc_urls
    result = space_call(obj, "connect", args, timeout_s=300)
    if as_json:
        echo_json(result)
        return
    if result.get("already"):
        click.echo(f"already connected: space {result['space']}, owner {result['owner']}")
        return
    click.echo(f"connected: space {result['space']}, owner {result['owner']}")
    click.echo(f"session key {result['session']}, writer {result['writer']}")
    if result.get("recovery_file"):
        click.echo(f"recovery code written to {result['recovery_file']}: keep it safe, it is "
                   f"the only way to restore this memory on a new machine")


def _push(obj: Ctx, snapshot: bool, as_json: bool) -> None:
    result = call_with_progress(obj, "push", {"snapshot": snapshot}, timeout_s=900)
    if as_json:
        echo_json(result)
        return
    for epoch in result["epochs"]:
        click.echo(f"epoch {epoch['seq']} block {epoch['block']}: {epoch['rows']} row(s), "
                   f"{epoch['bytes']} bytes, {epoch['gas']} gas, tx {epoch['tx']}")
    click.echo(result["message"])


@click.command("push")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def push_cmd(obj: Ctx, as_json: bool) -> None:
    """Anchor the store's changes on chain, in encrypted epochs. Never held: from a
    terminal, push anchors what the store holds."""
    _push(obj, False, as_json)


@click.command("compact")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def compact_cmd(obj: Ctx, as_json: bool) -> None:
    """Anchor a snapshot: every row in one epoch, so a new machine's pull stops there."""
    _push(obj, True, as_json)


@click.command("pull")
@click.option("--full", is_flag=True,
              help="Walk past snapshots and cache every epoch this machine has not decrypted.")
@click.option("--discard-local", is_flag=True,
              help="Move the store aside (.kint-backup-<time>) and restore from the chain.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def pull_cmd(obj: Ctx, full: bool, discard_local: bool, as_json: bool) -> None:
    """Restore the chain's epochs into the store through Sibyl's own write methods."""
    result = call_with_progress(obj, "pull", {"full": full, "discard_local": discard_local},
                                timeout_s=1800)
    if as_json:
        echo_json(result)
        return
    for path in result["backups"]:
        click.echo(f"moved aside: {path}")
    for warning in result["warnings"]:
        click.echo(f"warning: {warning}", err=True)
    click.echo(result["message"])


@click.command("rekey")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def rekey_cmd(obj: Ctx, as_json: bool) -> None:
    """A new data key and recovery code, new wraps, and a snapshot under the new key.
    Epochs under the old key stay readable only where the old key is held."""
    result = space_call(obj, "rekey", {}, timeout_s=900)
    if as_json:
        echo_json(result)
        return
    click.echo(f"new data key {result['key_id']}; snapshot epoch "
               f"{result['snapshot'][0]['seq']} sealed under it")
    click.echo(f"new recovery code written to {result['recovery_file']}: other machines need "
               f"it (`kint connect --recovery-code`) to read epochs from here on")


@click.command("recovery-code")
@click.pass_obj
def recovery_code_cmd(obj: Ctx) -> None:
    """Issue a new recovery code for this space's data key and write it to
    RECOVERY-<space>.txt (the old code stops working)."""
    result = space_call(obj, "recovery_code", {}, timeout_s=300)
    click.echo(f"new recovery code written to {result['recovery_file']}")
