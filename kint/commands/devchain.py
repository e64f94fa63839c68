"""`kint devchain start|stop|status`: the embedded local chain (anvil on 127.0.0.1).

kint.chain.devchain (requests, eth_utils: ~0.15 s) loads when an action runs, not for
`kint devchain --help`.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import click

from kint.commands.common import echo_json, json_option, refuse
from kint.commands.exit_codes import NO_DEVCHAIN
from kint.paths import kint_home
from kint.protocol.errors import ErrorCode

NONE_RUNNING_HINT = "`kint devchain start` starts one"


def _or_exit(action: Callable[[ModuleType], Any]) -> Any:
    """Run `action` on kint.chain.devchain; a DevchainError is refused as every command
    refuses (its code, what happened, what to do; the JSON error object under --json),
    exit 2."""
    from kint.chain import devchain

    try:
        return action(devchain)
    except devchain.DevchainError as err:
        hint = err.hint or ("`kint devchain status` tells whether it runs; anvil's own log "
                            "is KINT_HOME/devchain/anvil.log")
        refuse(err.code, str(err), hint)


@click.group("devchain")
def devchain_group() -> None:
    """Run the local chain (anvil), its state under KINT_HOME/devchain.

    anvil is KINT_ANVIL when set; else, in kint's source checkout, the pinned npm package
    (`make node`); else `anvil` on PATH; else ~/.foundry/bin/anvil. To install one:
    `npm install -g @foundry-rs/anvil@<the pinned version>` or Foundry's `foundryup`.
    """


@devchain_group.command("start")
def devchain_start() -> None:
    """Start anvil on 127.0.0.1 (chain id 31337) and deploy EpochAnchor on a fresh chain."""
    record = _or_exit(lambda devchain: devchain.start(kint_home()))
    click.echo(f"devchain running at {record['rpc_url']} (pid {record['pid']}), EpochAnchor "
               f"{record['anchor']}")


@devchain_group.command("stop")
def devchain_stop() -> None:
    """Stop this KINT_HOME's anvil; its state stays under KINT_HOME/devchain for the next
    start. Nothing else is ever signalled: not running is not an error."""
    home = kint_home()
    outcome = _or_exit(lambda devchain: devchain.stop(home))
    if outcome == "stopped":
        click.echo("devchain stopped")
    elif outcome == "elsewhere":
        record = _or_exit(lambda devchain: devchain.read_record(home)) or {}
        click.echo(f"no devchain of this KINT_HOME is running; the one recorded here (pid "
                   f"{record.get('pid')}, state {record.get('state')}) was started from another "
                   f"KINT_HOME: stop it there")
    else:
        click.echo("no devchain was running")


@devchain_group.command("status")
@json_option("Print the record as JSON.")
def devchain_status(as_json: bool) -> None:
    """Whether the devchain runs, where, and EpochAnchor's address. Exit 3 when it does not."""
    home = kint_home()
    record = _or_exit(lambda devchain: devchain.status(home))
    if record is None:
        # Refused as `kint supervisor status` refuses with none running: the code on
        # stderr (the JSON error object under --json) and what starts one, exit 3.
        refuse(ErrorCode.RPC_UNAVAILABLE, f"no devchain is running for {home}",
               NONE_RUNNING_HINT, NO_DEVCHAIN)
    if as_json:
        echo_json(record)
    else:
        click.echo(f"devchain running at {record['rpc_url']} (pid {record['pid']}), "
                   f"EpochAnchor {record['anchor']}")
