"""`kint`: the command line. A thin client: it resolves the space in the caller's own
environment, sends one request to the supervisor (starting it when needed), and prints
the answer. No engine code runs here.

Errors print as two lines, what happened and what to do, with no traceback unless
`--debug`. Exit codes: 0 success, 1 a refusal or a degraded state, 2 an error, 3 no
supervisor running (for `kint supervisor status`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click
import orjson

from kint import __version__, render, spaces
from kint.client import Client, KintError
from kint.paths import kint_home

EXIT_ERROR = 2
EXIT_NO_SUPERVISOR = 3


class Ctx:
    def __init__(self, tenant: str | None, db: str | None, debug: bool) -> None:
        self.tenant = tenant
        self.db = db
        self.debug = debug

    def client(self, autostart: bool = True) -> Client:
        return Client(kint_home(), autostart=autostart)


def fail(err: KintError, debug: bool = False) -> NoReturn:
    if debug:
        import traceback

        traceback.print_exc()
    click.echo(f"kint: error: {err.message} [{err.code}]", err=True)
    if err.hint:
        click.echo(f"hint: {err.hint}", err=True)
    sys.exit(EXIT_ERROR)


def echo_json(obj: Any) -> None:
    click.echo(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--tenant", default=None, metavar="TENANT",
              help="Sibyl tenant [default: KINT_TENANT, then credentials.json, then "
                   "Sibyl's default].")
@click.option("--db", default=None, metavar="PATH",
              help="Sibyl store [default: $SIBYL_MEMORY_DB or ~/.sibyl-memory/memory.db].")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(__version__, prog_name="kint")
@click.pass_context
def main(ctx: click.Context, tenant: str | None, db: str | None, debug: bool) -> None:
    """Check a remembered Sibyl fact against the chain before acting on it.

    Every command goes to the supervisor of KINT_HOME (default ~/.kint), which runs one
    worker process per tenant space; it is started on demand.
    """
    ctx.obj = Ctx(tenant, db, debug)


@main.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def status_cmd(obj: Ctx, as_json: bool) -> None:
    """The space of this store: tenant, store, row counts per tier, kint's files."""
    result = _space_call(obj, "status", {}, timeout_s=30)
    if as_json:
        echo_json(result)
    else:
        click.echo(render.space_status_text(result))


def _space_call(obj: Ctx, op: str, args: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    ref = spaces.resolve(obj.tenant, obj.db)
    try:
        with obj.client() as client:
            return client.call(op, tenant=ref.tenant, db=ref.db, space=ref.label, args=args,
                               timeout_s=timeout_s)
    except KintError as err:
        fail(err, obj.debug)


@main.command("verify")
@click.argument("query")
@click.option("--limit", default=5, show_default=True, type=click.IntRange(1, 100),
              help="How many hits Sibyl returns and kint checks.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the whole result as JSON (exit 0 either way: read `decision`).")
@click.option("--no-write", is_flag=True, help="Do not write a refusal entity.")
@click.pass_obj
def verify_cmd(obj: Ctx, query: str, limit: int, as_json: bool, no_write: bool) -> None:
    """Check what Sibyl recalls for QUERY against what was anchored: proceed or refuse.

    Exit code 0 on proceed, 1 on refuse (always 0 with --json).
    """
    result = _space_call(obj, "verify", {"query": query, "limit": limit,
                                         "write": not no_write}, timeout_s=120)
    if result.get("head_unavailable"):
        click.echo(f"kint: chain head unavailable ({result['head_unavailable']}); verifying "
                   f"against the local mirror only", err=True)
    if as_json:
        echo_json(result)
        return
    click.echo("\n".join(render.verify_lines(result)))
    sys.exit(0 if result["decision"] == "proceed" else 1)


@main.command("history")
@click.argument("tier", type=click.Choice(["entity", "state", "reference"]))
@click.argument("key")
@click.option("--category", default=None,
              help="The entity's category (part of its identity; required for entities).")
@click.option("--block", default=None, type=click.IntRange(min=0),
              help="Print the version live at this block as JSON, or null.")
@click.pass_obj
def history_cmd(obj: Ctx, tier: str, key: str, category: str | None, block: int | None) -> None:
    """Every anchored version of one row, oldest first, from this machine's epoch cache.

    Each block is an upper bound: the version existed no later than that block.
    """
    args: dict[str, Any] = {"tier": tier, "key": key}
    if category is not None:
        args["category"] = category
    if block is not None:
        args["block"] = block
    result = _space_call(obj, "history", args, timeout_s=60)
    if block is not None:
        echo_json(result["version"])
        return
    for line in render.history_lines(result):
        click.echo(line)


@main.group("supervisor")
def supervisor_group() -> None:
    """Run and inspect the supervisor and its per-space workers."""


@supervisor_group.command("start")
@click.option("--foreground", is_flag=True,
              help="Run in this process (for systemd and launchd) instead of as a daemon.")
@click.pass_obj
def supervisor_start(obj: Ctx, foreground: bool) -> None:
    """Start the supervisor of KINT_HOME (nothing happens if one is running)."""
    home = kint_home()
    if foreground:
        from kint.supervisor.autostart import run_foreground

        sys.exit(run_foreground(home))
    client = obj.client()
    try:
        client.ensure_running()
        info = client.call("sup.ping", timeout_s=5)
    except KintError as err:
        fail(err, obj.debug)
    click.echo(f"supervisor running, pid {info['pid']} ({home})")


@supervisor_group.command("stop")
@click.pass_obj
def supervisor_stop(obj: Ctx) -> None:
    """Stop every worker cleanly, then the supervisor."""
    from kint.supervisor.autostart import running_pid

    home = kint_home()
    client = obj.client(autostart=False)
    if running_pid(home) is None and not client.ping(0.5):
        click.echo(f"no supervisor is running for {home}")
        return
    try:
        client.call("sup.stop", timeout_s=60)
    except KintError as err:
        fail(err, obj.debug)
    deadline = time.monotonic() + 10
    while running_pid(home) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    click.echo("supervisor stopped")


@supervisor_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@click.option("--watch", is_flag=True, help="Refresh every second until Ctrl-C.")
@click.pass_obj
def supervisor_status(obj: Ctx, as_json: bool, watch: bool) -> None:
    """One row per space: worker state, op in flight, RPC, head, restarts.

    Exit code 0 when every space is ready, busy, starting or idle; 1 when any is hung,
    restarting or quarantined; 3 when no supervisor runs.
    """
    client = obj.client(autostart=False)
    while True:
        if not client.ping(1.0):
            click.echo(f"kint: no supervisor is running for {kint_home()}", err=True)
            sys.exit(EXIT_NO_SUPERVISOR)
        try:
            status = client.call("sup.status", timeout_s=5)
        except KintError as err:
            fail(err, obj.debug)
        if as_json:
            echo_json(status)
        else:
            if watch:
                click.clear()
            click.echo(render.supervisor_status_text(status))
        if not watch:
            sys.exit(1 if status["degraded"] else 0)
        try:
            time.sleep(1.0)
        except KeyboardInterrupt:
            return


@supervisor_group.command("restart")
@click.argument("target")
@click.pass_obj
def supervisor_restart(obj: Ctx, target: str) -> None:
    """Restart the worker of TARGET: a space id, a space label or a tenant.

    A quarantined space is released and tried again at once.
    """
    try:
        with obj.client() as client:
            result = client.call("sup.restart", args={"target": target}, timeout_s=30)
    except KintError as err:
        fail(err, obj.debug)
    click.echo("restarted: " + ", ".join(result["restarted"]))


@supervisor_group.command("discover")
@click.option("--json", "as_json", is_flag=True, help="Print the stores as JSON.")
@click.pass_obj
def supervisor_discover(obj: Ctx, as_json: bool) -> None:
    """Every Sibyl store on this machine (Sibyl's own, Hermes profiles) with its space."""
    found = spaces.discover(obj.tenant)
    rows = [{"space": ref.space16, "space_id": ref.space_id, "label": ref.label,
             "tenant": ref.tenant, "store": ref.db} for ref in found]
    if as_json:
        echo_json({"stores": rows})
        return
    if not rows:
        click.echo("no Sibyl stores found")
        return
    click.echo(render.table(["SPACE", "LABEL", "STORE"],
                            [[r["space"], r["label"], r["store"]] for r in rows]))


@main.command("demo")
@click.option("--keep", is_flag=True, help="Keep the sandbox folder afterwards.")
def demo_cmd(keep: bool) -> None:
    """Run kint end to end in a throwaway sandbox (its own HOME and KINT_HOME)."""
    from kint.demo import run_demo

    sys.exit(run_demo(keep=keep))


if __name__ == "__main__":
    main()
