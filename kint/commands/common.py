"""What every command shares: the context, error printing, JSON output, and the call that
sends a request for the caller's space."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click
import orjson

from kint import spaces
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


def space_call(obj: Ctx, op: str, args: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    ref = spaces.resolve(obj.tenant, obj.db)
    try:
        with obj.client() as client:
            return client.call(op, tenant=ref.tenant, db=ref.db, space=ref.label, args=args,
                               timeout_s=timeout_s)
    except KintError as err:
        fail(err, obj.debug)
