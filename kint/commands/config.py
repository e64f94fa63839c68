"""`kint config show` and `kint config check`: the settings in force, and the config file
checked. docs/settings.md lists every setting and where it may be set."""

from __future__ import annotations

import os

import click

from kint import render, settings
from kint.commands.common import Ctx, echo_json, json_option, refuse, space_call
from kint.protocol.errors import ErrorCode
from kint.settings import loader, report
from kint.settings.schema import SETTINGS


@click.group("config")
def config_group() -> None:
    """The settings kint runs with ($KINT_HOME/config.toml, the environment, defaults)."""


def _local_entries() -> list[dict]:
    """The settings only this process reads, as it reads them (its environment is the
    call's)."""
    out = []
    for s in SETTINGS:
        if s.sent:
            continue
        v = settings.lookup(s.name)
        if s.name == "KINT_HOME":
            from kint.paths import kint_home

            v = settings.Value(s, str(kint_home()), v.source)
        elif s.kind == "path" and isinstance(v.value, str):
            v = settings.Value(s, os.path.expanduser(v.value), v.source, v.where)
        out.append(report.entry(v))
    return out


@config_group.command("show")
@json_option("Print the settings as JSON.")
@click.pass_obj
def config_show(obj: Ctx, as_json: bool) -> None:
    """Every setting, its value and where it comes from: `default`, `file` (config.toml),
    `daemon environment` (the supervisor's), or `this call` (this command's environment).
    The daemon's settings are this space's; a push setting's row also names the value the
    watcher's pushes take from a kint-server session, where it is not the row's, and a
    watcher timing's or push setting's, while no watcher runs, the value a KINT_NO_WATCHER=1
    session gave, which no watcher takes. Secrets show only as set or unset."""
    daemon = space_call(obj, "config", {}, timeout_s=30)
    found = {e["name"]: e for e in daemon["settings"]}
    found.update({e["name"]: e for e in _local_entries()})
    result = {"schema_version": report.SCHEMA_VERSION, "config_file": daemon["config_file"],
              "config_exists": daemon["config_exists"],
              "config_error": daemon["config_error"], "space": daemon["space"],
              "label": daemon["label"], "settings": report.ordered(found)}
    if as_json:
        echo_json(result)
        return
    state = ("refused: " + result["config_error"] if result["config_error"] else
             "read" if result["config_exists"] else "absent: no value comes from a file")
    click.echo(f"config file: {result['config_file']} ({state})")
    click.echo(f"space: {render.printable(result['label'])} ({result['space']})")
    for line in report.text_lines(result["settings"]):
        click.echo(line)


@config_group.command("check")
@json_option("Print what the file gives as JSON.")
def config_check(as_json: bool) -> None:
    """Check $KINT_HOME/config.toml as the supervisor will read it; exit 2 naming the
    file and the key when a value is refused (CONFIG_INVALID)."""
    from kint.settings.reload import config_path
    from kint.settings.tomlfile import ConfigError, read_config

    path = config_path(loader.home())
    try:
        found = read_config(path)
    except ConfigError as err:
        refuse(ErrorCode.CONFIG_INVALID.value, str(err),
               f"fix {'that key' if err.key else 'the file'}; until then the supervisor keeps "
               f"serving the last good configuration")
    if as_json:  # the fields of `kint supervisor reload --json`
        echo_json({"config_file": str(path), "exists": found.exists,
                   "machine": sorted(found.machine), "spaces": sorted(found.spaces)})
    elif not found.exists:
        click.echo(f"{path}: absent (every setting has its default or its environment value)")
    else:
        click.echo(f"{path}: ok ({len(found.machine)} machine setting(s), "
                   f"{len(found.spaces)} space table(s))")
