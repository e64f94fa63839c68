"""`kint supervisor ...`: run and inspect the supervisor and its per-space workers."""

from __future__ import annotations

import sys

import click

from kint import render
from kint.client import KintError, SupervisorUnavailable
from kint.commands.common import (Ctx, echo_json, fail, json_option, print_notices, refuse,
                                  usage_error)
from kint.commands.exit_codes import NO_SUPERVISOR
from kint.commands.supervisor_status import HELP as STATUS_HELP
from kint.paths import kint_home


@click.group("supervisor")
def supervisor_group() -> None:
    """Run and inspect the supervisor and its per-space workers."""


@supervisor_group.command("start")
@click.option("--foreground", is_flag=True,
              help="Run in this process (for systemd and launchd) instead of as a daemon; "
                   "exit 2 if one is already running.")
@json_option("Print the running supervisor's pid and home as JSON, and whether this start "
             "started it.")
@click.pass_obj
def supervisor_start(obj: Ctx, foreground: bool, as_json: bool) -> None:
    """Start the supervisor of KINT_HOME with this environment's settings, kept for its life,
    the call-scope settings it reads too (KINT_OFFLINE, KINT_RPC_TIMEOUT, ...: a start on
    demand by another command leaves those out). Beside a running one it starts nothing,
    applies none of them, and names those that differ from its own."""
    home = kint_home()
    if foreground and as_json:
        usage_error("--json and --foreground both given: --foreground runs the supervisor in "
                    "this process, which prints no result", "give one of them")
    if foreground:
        from kint.supervisor.autostart import run_foreground

        sys.exit(run_foreground(home, refuse_beside_running=True))
    from kint.commands.start_beside import answering_pid, not_applied, ping_with_settings

    client = obj.client()
    try:
        # Under --json stderr stays quiet, as print_notices keeps it: a script that reads
        # both streams as one gets the object alone (docs/commands.md).
        # Its lines of a running supervisor slow to answer, and its refusal of a stuck one.
        answering_pid(home, lambda line: None if as_json else click.echo(line, err=True))
        # The environment given: the service's.
        spawned = client.ensure_running(on_demand=False)  # autostart.START_WAIT_S
        info = ping_with_settings(client)
    except KintError as err:
        fail(err, obj.debug)
    # Whether the supervisor answering is the one this start spawned, with this
    # environment: not "none answered as it looked", which is also true of one another
    # process (an on-demand start, a service manager) was starting meanwhile, and was
    # said `started: true`, its settings applied, when none were.
    started = spawned is not None and spawned == info["pid"]
    print_notices({"notices": not_applied(started, info)})
    if as_json:
        # Without `started` a script could not tell its start from one that changed nothing.
        echo_json({"pid": info["pid"], "kint_home": str(home), "started": started})
        return
    # The text says which, as `started` does: a start beside a running supervisor said the
    # same line as one that started it, so a user could not tell whether this environment's
    # settings were taken.
    said = "started" if started else "already running"
    click.echo(f"supervisor {said}, pid {info['pid']} ({home})")


@supervisor_group.command("stop")
@json_option("Print whether a supervisor was stopped as JSON.")
@click.pass_obj
def supervisor_stop(obj: Ctx, as_json: bool) -> None:
    """Stop every worker cleanly, then the supervisor."""
    # Loaded here: `kint supervisor status` loads this module and keeps to the client's.
    from kint.commands.supervisor_stop import run

    run(obj, as_json)


@supervisor_group.command("reload")
@json_option("Print what the file gives as JSON (the fields of `kint config check --json`).")
@click.pass_obj
def supervisor_reload(obj: Ctx, as_json: bool) -> None:
    """Read $KINT_HOME/config.toml again now (it is also read whenever it changes). A value
    the file gets wrong is named with its key, and the last good configuration keeps
    serving (exit 2). Exit 3 when no supervisor runs (the next one reads the file as it
    starts), 2 when one runs and does not answer (stopped or stuck)."""
    from kint.commands.supervisor_stop import refuse_if_silent

    client = obj.client(autostart=False)
    if not client.ping(1.0):
        refuse_if_silent(obj)
        refuse(SupervisorUnavailable.CODE, f"no supervisor is running for {kint_home()}",
               "the next one reads the config file when it starts", NO_SUPERVISOR)
    try:
        result = client.call("sup.reload", timeout_s=10)
    except KintError as err:
        fail(err, obj.debug)
    if as_json:
        echo_json(result)
        return
    if not result["exists"]:
        click.echo(f"configuration read: {result['config_file']} is absent (defaults and the "
                   f"supervisor's environment)")
        return
    click.echo(f"configuration read: {result['config_file']} ({len(result['machine'])} "
               f"machine setting(s), {len(result['spaces'])} space table(s))")


@supervisor_group.command("status", help=STATUS_HELP)
@json_option("Print the rows as JSON.")
@click.option("--watch", is_flag=True, help="Refresh every second until Ctrl-C.")
@click.pass_obj
def supervisor_status(obj: Ctx, as_json: bool, watch: bool) -> None:
    # Its help is kint.commands.supervisor_status.HELP: the plain form runs without click,
    # and the exit status is stated where `run` returns it.
    from kint.commands.supervisor_status import run

    sys.exit(run(as_json=as_json, watch=watch, debug=obj.debug))


@supervisor_group.command("restart")
@click.argument("target")
@json_option("Print the spaces restarted as JSON.")
@click.pass_obj
def supervisor_restart(obj: Ctx, target: str, as_json: bool) -> None:
    """Restart the worker of TARGET: a space id, a space label or a tenant.

    A quarantined space is released and tried again at once. Agent sessions attached
    (kint-servers), their store watcher and drift baseline go on in the new worker.
    """
    try:
        with obj.client() as client:
            result = client.call("sup.restart", args={"target": target}, timeout_s=30)
    except KintError as err:
        fail(err, obj.debug)
    if as_json:
        echo_json({"restarted": result["restarted"]})
        return
    click.echo("restarted: " + ", ".join(result["restarted"]))


@supervisor_group.command("discover")
@json_option("Print the stores as JSON.")
@click.pass_obj
def supervisor_discover(obj: Ctx, as_json: bool) -> None:
    """Every Sibyl store on this machine (Sibyl's own, every Hermes profile's under Hermes'
    root) with its space."""
    from kint import spaces

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
