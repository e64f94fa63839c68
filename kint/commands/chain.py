"""`kint push`, `kint compact`, `kint pull`, `kint rekey`, `kint recovery-code`: anchor the
store's changes, restore the chain's epochs, rotate the data key. All run in the space's
worker; exit statuses as 09-cli.md gives them (kint.commands.exit_codes)."""

from __future__ import annotations

import os

import click

from kint import render_pull
from kint.commands.common import (Ctx, call_with_progress, echo_json, json_option,
                                  space_call, usage_error, Whole)
from kint.commands.connect import (VAULT_PROMPT, extra_passphrase, read_signature,
                                   signature_passphrases)
from kint.commands.owner_flag import check_owner, owner_option, refuse_unconnected
from kint.commands.rekey_keys import refuse_no_key
from kint.commands.secrets import prompt_secret, read_passphrase_stdin, signature_options
from kint.tx_text import tx_0x, with_tx_0x

CONFIRMATIONS_HELP = ("Blocks to wait for after each transaction [default: 2; the devchain "
                      "uses 1].")


def push_calldata_size(envelope: int) -> int:
    """The bytes of `push(address owner, bytes32 space, bytes32 prev, bytes ct)`'s calldata
    for an envelope of `envelope` bytes, as the ABI lays it out: the selector, three static
    words and the offset word, the length word, the envelope padded to whole words. What
    the transaction's gas is charged on (about 40 gas a byte, the EIP-7623 floor)."""
    return 4 + 5 * 32 + -(-envelope // 32) * 32


def anchored_lines(result: dict) -> list[str]:
    """A push's lines in kint v0.3.0's form (02-quickstart.md): per epoch what it carried,
    then the head, then per epoch where it landed and what it cost."""
    from kint.chain.units import eth_text  # here: `push --help` and a dry run skip decimal

    epochs = result["epochs"]
    lines = [f"push: epoch {e['seq']}, {e['rows']} rows, {e['deleted']} deletions, bucket "
             f"{e['bucket']} B"
             + (f", {push_calldata_size(e['bytes'])} B calldata" if e.get("bytes") is not None
                else "") for e in epochs]
    lines.append(f"anchored {len(epochs)} epoch(s); head seq {result['head_seq']}")
    for e in epochs:
        tx = tx_0x(e["tx"])
        cost = e.get("cost_wei")
        lines.append(f"  epoch {e['seq']}: tx {tx} block {e['block']} bucket {e['bucket']} B "
                     f"rows {e['rows']} del {e['deleted']}"
                     + (f" cost {eth_text(cost, places=9)} ETH" if cost is not None else ""))
    return lines


def _push(obj: Ctx, command: str, args: dict, as_json: bool) -> None:
    result = call_with_progress(obj, "push", args, timeout_s=900, command=command)
    if as_json:
        echo_json(with_tx_0x(result))
        return
    if result.get("override"):
        click.echo(result["override"])
    for epoch in result.get("reanchored") or []:
        tx = tx_0x(epoch["tx"])
        click.echo(f"push: epoch {epoch['seq']} anchored again (the chain had lost it): "
                   f"tx {tx} block {epoch['block']}" if not result.get("dry_run") else
                   f"would anchor epoch {epoch['seq']} again (the chain lost it)")
    if result.get("dry_run"):
        for epoch in result["epochs"]:
            click.echo(f"would anchor epoch {epoch['seq']}: {epoch['rows']} row(s), "
                       f"{epoch['deleted']} deletion(s), ~{epoch['bytes']} bytes compressed")
    elif result["epochs"]:
        for line in anchored_lines(result):
            click.echo(line)
        return
    click.echo(result["message"])


@click.command("push")
@owner_option()
@click.option("--confirmations", type=Whole(1, 64), default=None,
              help=CONFIRMATIONS_HELP)
@click.option("--dry-run", is_flag=True,
              help="Read the chain head and report what would be anchored; send nothing.")
@click.option("--reanchor", is_flag=True,
              help="First send again, byte for byte from this machine's epoch cache, the "
                   "epochs a reorganisation of the chain dropped (the refusal names them), "
                   "then push as usual.")
@json_option("Print the result as JSON.")
@click.pass_obj
def push_cmd(obj: Ctx, owner: str | None, confirmations: int | None, dry_run: bool,
             reanchor: bool, as_json: bool) -> None:
    """Anchor the store's changes on Base: one transaction per epoch from this machine's
    session key. Never held: from a terminal, push anchors what the store holds."""
    check_owner(obj, owner)
    _push(obj, "push", {"dry_run": dry_run, "confirmations": confirmations,
                        **({"reanchor": True} if reanchor else {})}, as_json)


@click.command("compact")
@owner_option()
@click.option("--confirmations", type=Whole(1, 64), default=None,
              help=CONFIRMATIONS_HELP)
@click.option("--over-skipped", is_flag=True,
              help="Anchor the snapshot on the chain head even though the last pull stopped "
                   "at an epoch this machine could not apply (one it read and cannot open; "
                   "not one the RPC would not serve or served altered).")
@click.option("--dry-run", is_flag=True, help="Report what would be anchored; send nothing.")
@json_option("Print the result as JSON.")
@click.pass_obj
def compact_cmd(obj: Ctx, owner: str | None, confirmations: int | None, over_skipped: bool,
                dry_run: bool, as_json: bool) -> None:
    """Anchor one snapshot epoch carrying the whole state, even when nothing changed: a cold
    start stops at the newest snapshot."""
    check_owner(obj, owner)
    _push(obj, "compact", {"snapshot": True, "over_skipped": over_skipped, "dry_run": dry_run,
                           "confirmations": confirmations}, as_json)


@click.command("pull")
@owner_option()
@click.option("--full", is_flag=True,
              help="Walk past snapshot epochs to the first epoch, and cache every epoch this "
                   "machine has not decrypted, for history; a drift then names the epoch "
                   "that wrote the value, not the snapshot. An older epoch it cannot read "
                   "stops that walk, not the pull (a NOTICE line; the next --full tries "
                   "again).")
@click.option("--discard-local", is_flag=True,
              help="Move the store aside (.kint-backup-<time>) and restore from the chain; the "
                   "move waits until every epoch is fetched and checked. A store this user "
                   "may not open is never moved (SIBYL_ERROR).")
@click.option("--force-scan", is_flag=True,
              help="Taken for kint v0.3.0's scripts, and does nothing (v0.3.0's pull never "
                   "read it either).")
@json_option("Print the result as JSON.")
@click.pass_obj
def pull_cmd(obj: Ctx, owner: str | None, full: bool, discard_local: bool, force_scan: bool,
             as_json: bool) -> None:
    """Restore or refresh the store from Base, through Sibyl's own write methods."""
    check_owner(obj, owner)
    result = call_with_progress(obj, "pull", {"full": full, "discard_local": discard_local},
                                timeout_s=1800, command="pull")
    if as_json:
        echo_json(with_tx_0x(result))
        return
    click.echo("\n".join(render_pull.pull_output_lines(result)))


@click.command("rekey")
@owner_option()
@click.option("--confirmations", type=Whole(1, 64), default=None,
              help=CONFIRMATIONS_HELP)
@signature_options()
@click.option("--smart-account", is_flag=True,
              help="Carry over the vault passphrase wrap (prompted); combine with a signature "
                   "to carry both.")
@click.option("--passphrase-stdin", is_flag=True,
              help="One passphrase from stdin: the salt when a signature is given, otherwise "
                   "the vault passphrase.")
@click.option("--passphrase-prompt", is_flag=True,
              help="EOA mode: the passphrase that salts the wallet key, prompted.")
@click.option("--add-passphrase", is_flag=True,
              help="Also carry over the extra passphrase wrap, prompted.")
@click.option("--drop-missing", is_flag=True,
              help="Rotate even though a key that opens the vault today was not supplied.")
@click.option("--over-skipped", is_flag=True,
              help="Rotate even though the last pull stopped at an epoch this machine could "
                   "not apply (one it read and cannot open): the new snapshot chains on the "
                   "chain head.")
@json_option("Print the result as JSON.")
@click.pass_obj
def rekey_cmd(obj: Ctx, owner: str | None, signature: str | None, signature_file: str | None,
              smart_account: bool, passphrase_stdin: bool, passphrase_prompt: bool,
              add_passphrase: bool,
              drop_missing: bool, over_skipped: bool, confirmations: int | None,
              as_json: bool) -> None:
    """Rotate the data key: a new key wrapped under every key supplied, one snapshot epoch
    sealed under it, and a new recovery code. Nothing on this machine changes until the
    snapshot is on Base. CLI only: no MCP tool rotates the key."""
    check_owner(obj, owner)
    refuse_unconnected(obj)
    if passphrase_stdin and signature == "-":
        usage_error("--passphrase-stdin and --signature - cannot share stdin",
                    "use --passphrase-prompt or --signature-file")
    args: dict = {"drop_missing": drop_missing, "over_skipped": over_skipped,
                  "confirmations": confirmations}
    # A signature file is unlinked once read: its passphrases are asked for first, so one
    # refused (empty, never typed) leaves the file for the next try instead of sending the
    # owner back to the wallet. A signature on stdin still comes first, as it is piped.
    path = signature_file if signature_file is not None else signature
    file_last = path not in (None, "-") and os.path.lexists(path)
    if file_last:
        signature_passphrases(args, passphrase_stdin, passphrase_prompt, add_passphrase,
                              smart_account)
    sig = read_signature(signature, signature_file, "kint rekey")
    if sig is not None:
        args["signature"] = sig
        if not file_last:
            signature_passphrases(args, passphrase_stdin, passphrase_prompt, add_passphrase,
                                  smart_account)
    else:
        if smart_account or passphrase_stdin:
            args["passphrase"] = (read_passphrase_stdin() if passphrase_stdin
                                  else prompt_secret(VAULT_PROMPT))
        if add_passphrase:
            extra_passphrase(args)
    if not any(k in args for k in ("signature", "passphrase", "extra_passphrase")):
        refuse_no_key(obj)  # a --dev owner's: how to sign for it (kint.commands.rekey_keys)
    result = call_with_progress(obj, "rekey", args, timeout_s=900, command="rekey")
    if as_json:
        echo_json(with_tx_0x(result))
        return
    snap = result["snapshot"][0]
    click.echo(f"data key {result['old_dek_id']} -> {result['new_dek_id']}")
    click.echo(f"snapshot epoch {snap['seq']} tx {tx_0x(snap['tx'])} block {snap['block']}")
    click.echo(f"keys carried over: {result['carried']}; dropped: "
               f"{', '.join(result['dropped']) or 'none'}")
    click.echo(f"recovery code written to {result['recovery_file']}")
    click.echo(result["note"])


@click.command("recovery-code")
@json_option("Print the file written as JSON (its path, and any warning about an interrupted "
             "push it settled: the code stays in the file).")
@click.pass_obj
def recovery_code_cmd(obj: Ctx, as_json: bool) -> None:
    """Write RECOVERY-<space16>.txt (mode 0600) again from the cached data key: the fix when
    push refuses because the machine that created the vault lost its recovery file."""
    result = space_call(obj, "recovery_code", {}, timeout_s=300,
                        command="recovery-code")
    # An interrupted push's journal its settlement passed or dropped: said, the code written.
    warnings = result.get("warnings") or []
    if as_json:
        echo_json({"recovery_file": result["recovery_file"],
                   **({"warnings": warnings} if warnings else {})})
        return
    for warning in warnings:
        click.echo(f"recovery-code: WARNING {warning}", err=True)
    click.echo(f"recovery code written to {result['recovery_file']}")
