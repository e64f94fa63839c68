"""`kint`: the command line. A thin client: it resolves the space in the caller's own
environment, sends one request to the supervisor (starting it when needed), and prints
the answer. No engine code runs here.

Errors print as two lines, what happened and what to do, with no traceback unless
`--debug`. Exit codes: 0 success, 1 a refusal or a degraded state, 2 an error, 3 no
supervisor running (for `kint supervisor status`).
"""

from __future__ import annotations

import sys

import click

from kint import __version__
from kint.commands.authorize import authorize_group
from kint.commands.canonical_payload import canonical_payload_cmd
from kint.commands.chain import compact_cmd, pull_cmd, push_cmd, recovery_code_cmd, rekey_cmd
from kint.commands.connect import connect_cmd
from kint.commands.common import Ctx
from kint.commands.config import config_group
from kint.commands.devchain import devchain_group
from kint.commands.doctor import doctor_cmd
from kint.commands.export import export_cmd
from kint.commands.join import join_cmd
from kint.commands.memory import history_cmd, status_cmd, verify_cmd
from kint.commands.session_key import session_key_group
from kint.commands.setup import setup_cmd
from kint.commands.supervisor import supervisor_group


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
    for name, value in (("--tenant", tenant), ("--db", db)):
        if value is not None and not value.strip():
            click.echo(f"kint: {name} is empty: give a value or leave the option out", err=True)
            sys.exit(2)
    ctx.obj = Ctx(tenant, db, debug)


@main.command("demo")
@click.option("--keep", is_flag=True, help="Keep the sandbox folder afterwards.")
def demo_cmd(keep: bool) -> None:
    """Run kint end to end in a throwaway sandbox (its own HOME and KINT_HOME)."""
    from kint.demo import run_demo

    sys.exit(run_demo(keep=keep))


for command in (status_cmd, verify_cmd, history_cmd, canonical_payload_cmd, connect_cmd, push_cmd, pull_cmd,
                compact_cmd, rekey_cmd, recovery_code_cmd, doctor_cmd, session_key_group, authorize_group,
                supervisor_group, devchain_group, join_cmd, export_cmd):
    main.add_command(command)
main.add_command(config_group)
main.add_command(setup_cmd)


if __name__ == "__main__":
    main()
