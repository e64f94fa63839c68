"""`kint setup all | claude | codex | hermes | openclaw [--env KEY=VALUE]...`: register
kint-server in each harness's own configuration (kint/harnesses/, docs/harnesses.md).

`run_setup(targets, env)` is the same registration for other commands (`kint join`), and
`reports_json` its reports as `--json` gives them.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, NoReturn

import click

from kint.commands.common import Ctx, echo_json, json_option, refuse, usage_error
from kint.commands.exit_codes import REFUSE
from kint.harnesses.env_checks import parse_env, pin_flag
from kint.harnesses.failures import SetupError
from kint.harnesses.plan import TARGETS, Report
from kint.harnesses.run import run_setup
from kint.protocol.errors import ErrorCode
from kint.spaces import HERMES_PROFILE

__all__ = ["SetupError", "refuse_setup", "reports_json", "run_setup", "setup_cmd"]


def reports_json(reports: list[Report]) -> list[dict[str, Any]]:
    """Each harness's report (`target`, `status`: changed, unchanged, skipped or failed,
    and the `lines` the plain form prints), for `--json`."""
    return [dataclasses.asdict(report) for report in reports]


def refuse_setup(err: SetupError) -> NoReturn:
    """Setup that cannot run, refused as every command refuses: a value given on the command
    line is a usage error (BAD_REQUEST), the rest (no kint-server) keeps its own code."""
    if err.code == ErrorCode.BAD_REQUEST.value:
        usage_error(err.message, err.hint or None)
    refuse(err.code, err.message, err.hint or None)


def check_hermes_profiles(target: str, names: tuple[str, ...]) -> None:
    """`--hermes-profile` is for hermes (or all), and names a profile Hermes can have:
    given with another target it would do nothing, and a name Hermes cannot have would be
    reported as missing only once its CLI is found (or never, when it is not)."""
    if not names:
        return
    if target not in ("hermes", "all"):
        raise SetupError(f"--hermes-profile is for hermes (or all), not {target}",
                         f"run `kint setup hermes --hermes-profile {names[0]}` for the profile")
    bad = [name for name in names if not HERMES_PROFILE.match(name)]
    if bad:
        raise SetupError(f"--hermes-profile {bad[0]!r} is not a Hermes profile name",
                         "a profile name is lowercase letters, digits, '-' and '_', "
                         "up to 64 characters (`hermes profile list` shows yours)")


@click.command("setup")
@click.argument("target", type=click.Choice(["all", *TARGETS]), metavar="TARGET")
@click.option("--env", "env_pairs", multiple=True, metavar="KEY=VALUE",
              help="Set in the server's environment; repeatable (for example "
                   "KINT_TENANT=kint-demo). Written into the harness's configuration in "
                   "plain text: never a secret. A kint setting's value is checked as "
                   "config.toml checks it, a path setting's made absolute.")
@click.option("--hermes-profile", "hermes_profiles", multiple=True, metavar="NAME",
              help="Hermes only: register in this profile (repeatable) [default: the "
                   "default profile and every profile under ~/.hermes/profiles].")
@json_option("Print each harness's report as JSON.")
@click.pass_obj
def setup_cmd(obj: Ctx, target: str, env_pairs: tuple[str, ...],
              hermes_profiles: tuple[str, ...], as_json: bool) -> None:
    """Register kint-server in a harness: all, claude, codex, hermes or openclaw.

    all runs claude, codex, hermes and openclaw in that order. Each registration names
    the absolute kint-server (next to kint, else on PATH) and pins KINT_HOME, the store
    (SIBYL_MEMORY_DB), KINT_TENANT when set (or --tenant), and every --env. A file is
    copied to <file>.bak-<unix time> before it changes; a registration that is already
    right is left alone. A harness whose CLI is missing is skipped, named on its own too
    (exit 0, as in kint v0.3.0). For Hermes, each profile also gets kint's memory-provider
    plugin (when Hermes' Python has kint), selected where Sibyl's provider was.

    A harness that fails prints its line with a code and a hint line under it. Exit
    code 1 when a harness failed (the others carry on), 2 when setup could not run
    (another setup running for the same KINT_HOME is refused: BUSY).
    """
    try:
        check_hermes_profiles(target, hermes_profiles)
        env = parse_env(env_pairs)
        pin_flag(env, "KINT_TENANT", "--tenant", obj.tenant)
        pin_flag(env, "SIBYL_MEMORY_DB", "--db", obj.db)
        reports = run_setup([target], env, list(hermes_profiles) or None)
    except SetupError as err:
        refuse_setup(err)
    if as_json:
        echo_json({"target": target, "reports": reports_json(reports)})
    else:
        for report in reports:
            for line in report.lines:
                click.echo(line)
    if any(report.status == "failed" for report in reports):
        sys.exit(REFUSE)
