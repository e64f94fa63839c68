"""How `kint join` says what it did and how it stops: each step's lines as it goes (or one
JSON object at the end), and the one refusal line, `join stopped at <step>: ...`, that a
refused step, a refused worker call and Ctrl-C all end with. The steps are in join_steps.py,
the command in join.py (whose docstring says the whole flow).
"""

from __future__ import annotations

from typing import Any, Callable, NoReturn

import click

from kint.client import KintError
from kint.commands.common import Ctx, json_refusals, refuse, worker_hint
from kint.commands.exit_codes import (ERROR, INTERRUPTED, INTERRUPTED_CODE, exit_code_for,
                                      interrupted_words)
from kint.protocol.errors import ErrorCode, split_notices

STEP_SESSION_KEY = "session key"
STEP_VAULT = "vault"
STEP_CONNECT = "connect"
STEP_RESTORE = "restore"
STEP_HARNESSES = "harnesses"
STEP_REPORT = "report"


class Said:
    """What join says: each step's lines as it goes, or with `--json` nothing until the one
    object at the end (`result`, which each step fills under its name)."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.result: dict[str, Any] = {}

    def lines(self, *lines: str) -> None:
        if not self.as_json:
            for line in lines:
                click.echo(line)

    def step(self, name: str, value: Any, *lines: str) -> None:
        self.result[name] = value
        self.lines(*lines)


def stop(step: str, code: ErrorCode | str, message: str, hint: str | None = None,
         status: int = ERROR) -> NoReturn:
    """`join stopped at <step>: <message> [CODE]` and what to do on stderr, then exit
    `status`; with `--json` the refusal object, naming the step. The code ends the line
    whichever step refused, as it ends every other refusal line."""
    value = code.value if isinstance(code, ErrorCode) else code
    if json_refusals():
        refuse(value, message, hint, status, step=step)
    click.echo(f"join stopped at {step}: {message} [{value}]", err=True)
    hint, notices = split_notices(hint)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    for line in notices:
        click.echo(line, err=True)
    raise SystemExit(status)


def stopper(step: str, obj: Ctx) -> Any:
    """The `on_error` for a worker call: steps before the restore exit 2, the restore with
    pull's status for the refusal's code."""

    def on_error(err: KintError) -> NoReturn:
        if obj.debug:
            import traceback

            traceback.print_exc()
        status = exit_code_for("join", err.code) if step == STEP_RESTORE else ERROR
        stop(step, err.code, err.message, worker_hint(err), status)

    return on_error


def interrupted(step: str) -> Callable[..., NoReturn]:
    """Ctrl-C at `step`: join's own refusal naming the step (under `--json`, `step` in the
    object, as every refusal of join's carries it), exit 130 as every command's Ctrl-C.
    `op` is the worker request the step was waiting on, which goes on to its end there."""

    def on_interrupt(op: str | None = None) -> NoReturn:
        message, hint = interrupted_words(op)
        stop(step, INTERRUPTED_CODE, message, hint, INTERRUPTED)

    return on_interrupt


def secret_refused(message: str, hint: str | None) -> NoReturn:
    """A secret that did not come, or came empty: the connect step's, which it is for, named
    as Ctrl-C at its prompt is (before the first step runs)."""
    stop(STEP_CONNECT, ErrorCode.BAD_REQUEST, message, hint)
