"""`kint status`, `kint verify`, `kint history`: a space's facts, and verify before acting."""

from __future__ import annotations

import sys
from typing import Any

import click

from kint import render
from kint.commands.common import Ctx, echo_json, json_option, space_call, usage_error
from kint.rows.canon import VERSIONED_TIERS


@click.command("status")
@json_option("Print the result as JSON.")
@click.pass_obj
def status_cmd(obj: Ctx, as_json: bool) -> None:
    """The space of this store: tenant, store, row counts per tier, kint's files."""
    result = space_call(obj, "status", {"chain": True}, timeout_s=30)
    if as_json:
        echo_json(result)
    else:
        click.echo(render.space_status_text(result))


@click.command("verify")
@click.argument("query")
@click.option("--limit", default=5, show_default=True, type=click.IntRange(1, 100),
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
        echo_json(result)
        return
    click.echo("\n".join(render.verify_lines(result)))
    sys.exit(0 if result["decision"] == "proceed" else 1)


@click.command("history")
@click.argument("tier", type=click.Choice(VERSIONED_TIERS))
@click.argument("key")
@click.option("--category", default=None,
              help="The entity's category (part of its identity; required for entities).")
@click.option("--block", default=None, type=click.IntRange(0, 2**63 - 1),
              help="Print the version live at this block as JSON, or null.")
@json_option("Print every version as JSON (`checked`: its rows were checked against "
             "what was anchored).")
@click.pass_obj
def history_cmd(obj: Ctx, tier: str, key: str, category: str | None, block: int | None,
                as_json: bool) -> None:
    """Every anchored version of one row, oldest first, from this machine's epoch cache.

    Each block is an upper bound: the version existed no later than that block.
    """
    # Only entities have a category (Sibyl keys them by category and name): a history
    # asked for without it, or with one for another tier, could never match a row.
    if tier == "entity" and category is None:
        usage_error("--category is required for an entity (Sibyl keys entities by category "
                    "and name)", "give the entity's category: kint history entity KEY "
                    "--category CATEGORY")
    if tier != "entity" and category is not None:
        usage_error(f"--category is for entities only: a {tier} row is keyed by its key alone",
                    f"leave --category out: kint history {tier} KEY")
    args: dict[str, Any] = {"tier": tier, "key": key}
    if category is not None:
        args["category"] = category
    if block is not None:
        args["block"] = block
    result = space_call(obj, "history", args, timeout_s=60)
    if block is not None:
        echo_json(result["version"])
        return
    if as_json:
        echo_json(result)
        return
    if not result["versions"]:
        # An answer, not a refusal: v0.3.0 (09-cli.md, "kint history") prints no line and
        # exits 0, as `--json` (a count of 0) and `--block` (null) do here. A person is
        # told why nothing printed on stderr, in words that say what to do; a script's
        # exit status is v0.3.0's.
        label = f"{tier} {category}/{key}" if category is not None else f"{tier} {key}"
        click.echo(f"kint: no anchored version of {label} in this machine's epoch cache "
                   f"(`kint pull --full` fills in older epochs)", err=True)
        return
    for line in render.history_lines(result):
        click.echo(line)
