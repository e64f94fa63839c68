"""`kint`: the command line. A thin client: it resolves the space in the caller's own
environment, sends one request to the supervisor (starting it when needed), and prints
the answer. No engine code runs here.

Errors print as two lines, what happened and what to do, with no traceback unless
`--debug`. Exit codes are kint v0.3.0's (kint.commands.exit_codes has them all): 0 done,
1 verify refused or a degraded state, 2 an error, 3-6 push's and pull's refusals (3 also
no supervisor running, for `kint supervisor status` and `reload`), 130 Ctrl-C.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, NoReturn

import click
from click.exceptions import NoArgsIsHelpError, NoSuchOption

from kint import __version__
from kint.commands.common import (Ctx, help_hint, refuse, refuse_blank_space_options,
                                  refuse_interrupted, usage_error)
from kint.paths import home_refusal, kint_home
from kint.pid_file_lock import FOREIGN_FILE_HINT, NotOwnFile
from kint.protocol import ErrorCode

# Every command but `demo`, by name: the module that defines it and its name there. A
# command's module is imported only when that command runs (`kint --help` reads the short
# helps from the modules' source: kint.commands.listing): `kint supervisor status` must not
# pay ~2 s on a busy box for web3 and eth_account, which only the chain and key commands use.
COMMANDS: dict[str, tuple[str, str]] = {
    "status": ("kint.commands.memory", "status_cmd"),
    "verify": ("kint.commands.memory", "verify_cmd"),
    "history": ("kint.commands.memory", "history_cmd"),
    "canonical-payload": ("kint.commands.canonical_payload", "canonical_payload_cmd"),
    "connect": ("kint.commands.connect", "connect_cmd"),
    "push": ("kint.commands.chain", "push_cmd"),
    "pull": ("kint.commands.chain", "pull_cmd"),
    "compact": ("kint.commands.chain", "compact_cmd"),
    "rekey": ("kint.commands.chain", "rekey_cmd"),
    "recovery-code": ("kint.commands.chain", "recovery_code_cmd"),
    "doctor": ("kint.commands.doctor", "doctor_cmd"),
    "session-key": ("kint.commands.session_key", "session_key_group"),
    "authorize": ("kint.commands.authorize", "authorize_group"),
    "supervisor": ("kint.commands.supervisor", "supervisor_group"),
    "devchain": ("kint.commands.devchain", "devchain_group"),
    "join": ("kint.commands.join", "join_cmd"),
    "export": ("kint.commands.export", "export_cmd"),
    "config": ("kint.commands.config", "config_group"),
    "setup": ("kint.commands.setup", "setup_cmd"),
}


# The global options, which go before the command (`kint --tenant T status`), as in v0.3.0.
GLOBAL_OPTIONS = ("--tenant", "--db", "--debug")


def _usage_refused(err: click.UsageError) -> NoReturn:
    """Click's refusal of a command line (an unknown flag, a value out of range, a missing
    argument) printed as kint's own usage errors are (`usage_error`), not as click's usage
    block: a code, one line, a hint. A global option given after a command that does not
    take it is the usual slip: the hint says where it goes."""
    message = err.format_message().strip().removesuffix(".")
    name = getattr(err, "option_name", None)
    if isinstance(err, NoSuchOption) and name in GLOBAL_OPTIONS and err.ctx is not None:
        command = err.ctx.command_path.removeprefix(f"{err.ctx.find_root().info_name} ")
        usage_error(message, f"{name} is a global option: give it before the command, "
                             f"`kint {name}{'' if name == '--debug' else ' ...'} {command}`")
    usage_error(message, help_hint(err.ctx))


class LazyGroup(click.Group):
    """A group whose commands in COMMANDS are imported when asked for by name, and whose
    command lines click refuses are refused as kint refuses bad input."""

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except NoArgsIsHelpError:
            raise  # a bare group: its help, as click shows it
        except click.UsageError as err:
            _usage_refused(err)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NoArgsIsHelpError:
            raise
        except click.UsageError as err:
            _usage_refused(err)
        except NotOwnFile as err:
            # A link or a stranger's file where a command keeps one of kint's (the nonce
            # book's lock under `kint authorize submit`, ...): named, never followed.
            refuse(ErrorCode.CORRUPT_STATE, str(err), FOREIGN_FILE_HINT)
        except KeyboardInterrupt:
            # Ctrl-C anywhere a command has no word of its own for it (a prompt, a local
            # step): a refusal with its code and exit 130, where click says `Aborted!`. On
            # a line of its own, as click's: a prompt's line is still open.
            click.echo("", err=True)
            refuse_interrupted()

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Click's list of commands, each with its short help, from the commands' source
        rather than their modules (which would load web3: ~0.6 s of `kint --help`). The
        reader (and `ast`) loads here: a command that runs does not need it."""
        from kint.commands.listing import listed_commands

        listed = listed_commands({name: where for name, where in COMMANDS.items()
                                  if where[0] not in sys.modules})
        rows = [(name, listed.get(name) or self.get_command(ctx, name))
                for name in self.list_commands(ctx)]
        shown = [(name, command) for name, command in rows
                 if command is not None and not command.hidden]
        if shown:
            limit = formatter.width - 6 - max(len(name) for name, _ in shown)
            with formatter.section("Commands"):
                formatter.write_dl([(name, command.get_short_help_str(limit))
                                    for name, command in shown])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS:
            module, attribute = COMMANDS[cmd_name]
            command = getattr(importlib.import_module(module), attribute)
            if command.name != cmd_name:
                raise RuntimeError(f"{module}.{attribute} is `{command.name}`, not `{cmd_name}`")
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
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

    A command on a space (status, verify, history, connect, join, push, compact, pull,
    rekey, recovery-code, config show) goes to the supervisor of KINT_HOME (default
    ~/.kint), which runs one worker process per tenant space and is started on demand
    (`doctor` asks one that runs, and starts none).
    """
    refuse_blank_space_options(tenant, db)
    # Every command but `demo` (a sandbox with a KINT_HOME of its own) keeps its files
    # there: a KINT_HOME that cannot be one is said once, here. Help touches no file, and
    # a subcommand's --help is only read after this runs, so it is looked for in argv.
    home = kint_home()
    exempt = ctx.invoked_subcommand == "demo" or "--help" in sys.argv[1:]
    refusal = None if exempt else home_refusal(home)
    if refusal is not None:
        click.echo(refusal, err=True)
        sys.exit(2)
    ctx.obj = Ctx(tenant, db, debug)


@main.command("demo")
@click.option("--keep", is_flag=True, help="Keep the sandbox folder afterwards.")
def demo_cmd(keep: bool) -> None:
    """Run kint end to end in a throwaway sandbox (its own HOME and KINT_HOME)."""
    from kint.demo import run_demo

    sys.exit(run_demo(keep=keep))


if __name__ == "__main__":
    main()
