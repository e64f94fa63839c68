"""`kint session-key rotate`: a new session key for this machine, the old one kept."""

from __future__ import annotations

import sys

import click
import orjson

from kint.client import KintError
from kint.commands.common import Ctx
from kint.paths import kint_home


@click.group("session-key")
def session_key_group() -> None:
    """This machine's session key (session.key, a V3 scrypt keystore)."""


@session_key_group.command("rotate")
@click.pass_obj
def rotate_cmd(obj: Ctx) -> None:
    """Make a new session key (the old one is kept as session.key.old) and move every
    connected space on this machine to it: authorized by the owner (on the devchain, done
    here), a new writer delegated and funded, the data key's machine wrap made again."""
    from kint.tenant_worker import keys

    home = kint_home()
    try:
        old, new = keys.rotate_session_key(home)
    except keys.KeysError as err:
        click.echo(f"kint: error: {err}", err=True)
        sys.exit(2)
    click.echo(f"session key rotated: {old} -> {new} (the old one is in session.key.old)")
    failed = False
    with obj.client() as client:
        for enrol in sorted(home.glob("enrol-*.json")):
            info = orjson.loads(enrol.read_bytes())
            if not info.get("db") or not info.get("label"):
                failed = True
                click.echo(f"space {enrol.stem[6:]}: its enrolment predates this kint; run "
                           f"`kint connect` for its store again", err=True)
                continue
            try:
                result = client.call("reenrol", tenant=info["tenant"], db=info["db"],
                                     space=info["label"], args={}, timeout_s=300)
            except KintError as err:
                failed = True
                click.echo(f"space {enrol.stem[6:]}: {err.message}", err=True)
                if err.hint:
                    click.echo(f"hint: {err.hint}", err=True)
                continue
            click.echo(f"space {result['space']}: writer {result.get('writer', '-')}")
    sys.exit(1 if failed else 0)
