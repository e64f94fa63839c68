"""`kint status`, `kint verify`, `kint history`: a space's facts, and verify before acting."""

from __future__ import annotations

import shlex
import sys
from typing import Any

import click

from kint import render_space, render_verify
from kint.commands.common import (Ctx, Whole, echo_json, json_option, space_call,
                                  usage_error)
from kint.tx_text import with_tx_0x
from kint.rows.canon import VERSIONED_TIERS, row_label
from kint.space_row import read_parked


@click.command("status")
@json_option("Print the result as JSON.")
@click.pass_obj
def status_cmd(obj: Ctx, as_json: bool) -> None:
    """The space of this store: tenant, store, row counts per tier, kint's files; once
    connected, the owner, the data key, the last epoch anchored here, unanchored changes,
    the chain head (in step or not) and the session key; the push settings the space's
    watcher takes from a kint-server session; the requests waiting for the last replies of
    its worker that exited; then its worker and the storage cap Sibyl enforces."""
    result = space_call(obj, "status", {"chain": True}, timeout_s=30)
    # The supervisor's, not the worker's: the worker that answered is not the one they
    # wait for. Read after its answer, as the supervisor holds them then.
    with obj.client(autostart=False) as client:
        result["parked"] = read_parked(client, result["space"])
    if as_json:
        echo_json(with_tx_0x(result))
    else:
        click.echo(render_space.space_status_text(result))


@click.command("verify")
@click.argument("query")
@click.option("--limit", default=5, show_default=True, type=Whole(1, 100),
              help="How many hits Sibyl returns and kint checks.")
@json_option("Print the whole result as JSON (exit 0 either way: read `decision`).")
@click.option("--no-write", is_flag=True, help="Do not write a refusal entity.")
@click.pass_obj
def verify_cmd(obj: Ctx, query: str, limit: int, as_json: bool, no_write: bool) -> None:
    """Check what Sibyl recalls for QUERY against what was anchored: proceed or refuse.

    Exit code 0 on proceed, 1 on refuse (always 0 with --json).
    """
    result = space_call(obj, "verify", {"query": query, "limit": limit,
                                         "write": not no_write}, timeout_s=120)
    if result.get("head_unavailable"):
        click.echo(f"kint: chain head unavailable ({result['head_unavailable']}); verifying "
                   f"against the local mirror only", err=True)
    if as_json:
        echo_json(with_tx_0x(result))
        return
    click.echo("\n".join(render_verify.verify_lines(result)))
    sys.exit(0 if result["decision"] == "proceed" else 1)


@click.command("history")
@click.argument("tier", type=click.Choice(VERSIONED_TIERS))
@click.argument("key")
@click.option("--category", default=None,
              help="The entity's category: part of its identity, so an entity is found only "
                   "with it (without it, nothing is).")
@click.option("--block", default=None, type=Whole(0, 2**63 - 1),
              help="Print the version live at this block as JSON, or null.")
@json_option("Print every version as JSON (`checked`: its rows were checked against "
             "what was anchored).")
@click.pass_obj
def history_cmd(obj: Ctx, tier: str, key: str, category: str | None, block: int | None,
                as_json: bool) -> None:
    """Every anchored version of one row, oldest first, from this machine's epoch cache.

    Each block is an upper bound: the version existed no later than that block.
    """
    # Only entities have a category (Sibyl keys them by category and name): one given for
    # another tier could never match a row, and is refused.
    if tier != "entity" and category is not None:
        usage_error(f"--category is for entities only: a {tier} row is keyed by its key alone",
                    f"leave --category out: kint history {tier} KEY")
    args: dict[str, Any] = {"tier": tier, "key": key}
    if category is not None:
        args["category"] = category
    if block is not None:
        args["block"] = block
    result = space_call(obj, "history", args, timeout_s=60)
    # A lookup that finds nothing is an answer, not a refusal: v0.3.0 (09-cli.md, "kint
    # history") prints no line and exits 0, as `--json` (a count of 0) and `--block` (null)
    # do here. An entity asked for without its category is one (09-cli.md: the flag is
    # optional; 08-tools.md: that lookup finds nothing), and whatever the output, a person
    # is told on stderr what was missing; a listing that found nothing says where older
    # versions come from. stdout and the exit status are v0.3.0's.
    if tier == "entity" and category is None:
        click.echo(f"kint: entity rows are looked up by category and name, so nothing is "
                   f"found without one: kint history entity {shlex.quote(key)} --category "
                   f"CATEGORY", err=True)
    elif block is None and not as_json and not result["versions"]:
        click.echo(f"kint: no anchored version of {row_label(tier, category, key)} in this "
                   f"machine's epoch cache (`kint pull --full` fills in older epochs)", err=True)
    if block is not None:
        # The record, as v0.3.0 printed it; its hash as every command gives one.
        echo_json(with_tx_0x(result["version"]), notices=False)
        return
    if as_json:
        echo_json(with_tx_0x(result))
        return
    for line in render_verify.history_lines(result):
        click.echo(line)
