"""`kint devchain start|stop|status`: the embedded local chain (anvil on 127.0.0.1)."""

from __future__ import annotations

import sys

import click

from kint.chain import devchain
from kint.commands.common import echo_json
from kint.paths import kint_home


@click.group("devchain")
def devchain_group() -> None:
    """Run the local chain: anvil from the pinned npm package, state under KINT_HOME."""


@devchain_group.command("start")
def devchain_start() -> None:
    """Start anvil on 127.0.0.1 (chain id 31337) and deploy EpochAnchor on a fresh chain."""
    try:
        record = devchain.start(kint_home())
    except devchain.DevchainError as err:
        click.echo(f"kint: error: {err}", err=True)
        sys.exit(2)
    click.echo(f"devchain running at {record['rpc_url']} (pid {record['pid']}), EpochAnchor "
               f"{record['anchor']}")


@devchain_group.command("stop")
def devchain_stop() -> None:
    """Stop anvil; its state stays under KINT_HOME/devchain for the next start."""
    click.echo("devchain stopped" if devchain.stop(kint_home()) else "no devchain was running")


@devchain_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
def devchain_status(as_json: bool) -> None:
    """Whether the devchain runs, where, and EpochAnchor's address. Exit 3 when it does not."""
    record = devchain.status(kint_home())
    if as_json:
        echo_json(record)
    elif record is None:
        click.echo("no devchain is running")
    else:
        click.echo(f"devchain running at {record['rpc_url']} (pid {record['pid']}), "
                   f"EpochAnchor {record['anchor']}")
    sys.exit(0 if record is not None else 3)
