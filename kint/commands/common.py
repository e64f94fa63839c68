"""What every command shares: the context, error printing, JSON output, and the call that
sends a request for the caller's space.

Every command imports this module, so it imports only what `kint supervisor status` needs
(the client, click, orjson): resolving a space (`kint.spaces`, which loads the settings)
is imported by the calls that resolve one."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, NoReturn

import click
import orjson

from kint import render
from kint.client import Client, KintError
from kint.paths import kint_home
from kint.protocol.errors import DEFAULT_HINTS, ErrorCode, hint_with_notices, split_notices

from kint.commands.exit_codes import (ERROR as EXIT_ERROR, INTERRUPTED, INTERRUPTED_CODE,
                                      exit_code_for, interrupted_words)

if TYPE_CHECKING:
    from kint.spaces import SpaceRef


class Whole(click.IntRange):
    """A whole number within bounds (`--limit`, `--block`, `--confirmations`). Click names
    its IntRange "integer range", so `--limit abc` was refused as "'abc' is not a valid
    integer range", which reads as if a range (1-5) were asked for; named "integer", it
    says what `--days abc` says: "'abc' is not a valid integer"."""

    name = "integer"


class Ctx:
    def __init__(self, tenant: str | None, db: str | None, debug: bool) -> None:
        self.tenant = tenant
        self.db = db
        self.debug = debug

    def client(self, autostart: bool = True) -> Client:
        return Client(kint_home(), autostart=autostart)


def fail(err: KintError, debug: bool = False, command: str | None = None) -> NoReturn:
    """Print the refusal (what happened, what to do) and exit with the status the CLI
    reference gives `command` for it (2 when no command is named), with the hint
    `worker_hint` gives."""
    if debug:
        import traceback

        traceback.print_exc()
    refuse(err.code, err.message, worker_hint(err),
           exit_code_for(command, err.code) if command else EXIT_ERROR)


def worker_hint(err: KintError) -> str | None:
    """`err`'s hint as the running command prints it: a bad-input refusal that carries
    only the protocol's generic hint (`kint COMMAND --help`: the worker does not know the
    command) names the running command's --help instead; the notices under it stay."""
    said, notices = split_notices(err.hint)  # the notices under it are not what to do
    if err.code == ErrorCode.BAD_REQUEST and said == DEFAULT_HINTS[ErrorCode.BAD_REQUEST]:
        return hint_with_notices(help_hint(), notices)
    return err.hint


# Set in the click context's `meta` by `json_option` when --json is given: the command's
# refusals are then a JSON object on stdout.
_JSON_REFUSALS = "kint.json_refusals"
# In the click context's `meta`: the worker's lines about settings this command printed
# (`print_notices`), in order, for its --json object (`echo_json`).
_NOTICES = "kint.notices"


def json_option(help_text: str = "Print the result as JSON.") -> Callable[[Any], Any]:
    """`--json` (the parameter `as_json`): the result as one JSON object on stdout, and a
    refusal as one too (`refuse`), with the exit status the plain form has, so a script
    reads one object whichever way the command ends. A command line click cannot parse at
    all (an unknown flag) is refused before `--json` is seen: plain text on stderr."""

    def remember(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
        if value:
            ctx.meta[_JSON_REFUSALS] = True
        return value

    # Eager: read before the other options, so a refusal of one of them (a bad --owner,
    # a value out of range) is already printed the way --json asks.
    return click.option("--json", "as_json", is_flag=True, help=help_text, callback=remember,
                        is_eager=True)


def json_refusals() -> bool:
    """Whether the running command was given `--json` through `json_option`."""
    ctx = click.get_current_context(silent=True)
    return ctx is not None and bool(ctx.meta.get(_JSON_REFUSALS))


def refuse(code: str, message: str, hint: str | None, status: int = EXIT_ERROR,
           **extra: Any) -> NoReturn:
    """Every refusal a command prints, then exit `status`: `kint: error: MESSAGE [CODE]` and
    `hint: HINT` on stderr, or with `--json` (`json_option`) the object `{"error": CODE,
    "message", "hint", **extra}` on stdout (`extra` is what only the JSON form carries,
    such as the step `kint join` stopped at). The worker's lines about settings of the call
    it did not use (carried under its hint) follow on stderr, or in the object's `notices`.
    `code` is an ErrorCode or, for the client's own refusals (no supervisor), a code of its
    own: printed as its name either way."""
    code = getattr(code, "value", code)
    hint, notices = split_notices(hint)  # a worker's lines about settings it did not use
    if json_refusals():
        echo_json({"error": code, "message": message, "hint": hint,
                   **({"notices": notices} if notices else {}), **extra})
    else:
        click.echo("\n".join([render.refusal_text(code, message, hint), *notices]), err=True)
    sys.exit(status)


def refuse_interrupted(op: str | None = None) -> NoReturn:
    """Ctrl-C, printed as a refusal (a JSON object under `--json`) and exit 130, not click's
    bare `Aborted!` and 1, the status of verify's refusal. `op`: the request the command
    was waiting on, which goes on in the worker."""
    message, hint = interrupted_words(op)
    refuse(INTERRUPTED_CODE, message, hint, INTERRUPTED)


def help_hint(ctx: click.Context | None = None) -> str:
    """What to do about bad input: the command's own --help (the one running, by default)."""
    ctx = ctx or click.get_current_context(silent=True)
    return f"`{ctx.command_path if ctx is not None else 'kint'} --help` lists what it takes"


def usage_error(message: str, hint: str | None = None) -> NoReturn:
    """Bad input on the command line (a flag's value, a missing or conflicting flag, a
    secret that is not one), refused before anything is sent: printed as every refusal is,
    code BAD_REQUEST, one line, a hint (the command's --help when there is no better one),
    exit 2 (a JSON object on stdout under `--json`, `refuse`). Click's own refusals (an
    unknown flag, a value out of range) print the same way (kint.cli)."""
    refuse("BAD_REQUEST", " ".join(message.split()), hint or help_hint())


def refuse_blank_space_options(tenant: str | None, db: str | None) -> None:
    """`--tenant` and `--db` (the global ones, or a command's own that stand for them) given
    empty are refused: an empty value read as "not given" would pick another space than the
    one asked for."""
    for name, value in (("--tenant", tenant), ("--db", db)):
        if value is not None and not value.strip():
            usage_error(f"{name} is empty", "give a value or leave the option out")


def echo_json(obj: Any, *, notices: bool = True) -> None:
    """Print `obj` as the command's JSON. An object gets `notices`, the worker's lines
    about settings of the command's calls that were not used, when there were any
    (`print_notices` keeps them, and under --json says them nowhere else): a script
    reading stdout alone, as --json is for, is told them there. `notices=False` for an
    object whose shape is a record's, not a result's (`kint history --block` prints the
    row version v0.3.0 printed): its lines go on stderr."""
    said = _said_notices()
    if not notices:  # a record carries none: they go on stderr, held back till now
        for line in said:
            _say(line)
        said = []
    if isinstance(obj, dict) and said:
        own = list(obj.get("notices") or [])
        obj = {**obj, "notices": own + [line for line in said if line not in own]}
    click.echo(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode())


def _said_notices() -> list[str]:
    """The running command's list of the worker's lines it printed (kept in its click
    context, so that commands run in one process each have their own)."""
    ctx = click.get_current_context(silent=True)
    return [] if ctx is None else ctx.meta.setdefault(_NOTICES, [])


def sent_settings(args: dict[str, Any]) -> dict[str, Any]:
    """`args` with the settings this caller's environment gives (kint.settings.wire): the
    worker applies the call's own, and reports the others it does not use."""
    from kint.settings.wire import outgoing

    sent = outgoing()
    return {**args, "settings": sent} if sent else args


def print_notices(result: dict[str, Any]) -> dict[str, Any]:
    """Print, on stderr, the worker's lines about settings it did not use (one each, once
    per command: `kint join` asks its space's worker several times, and each answer says
    the same of the same environment). Under --json they go in the command's object
    instead (`echo_json`, a refusal's too), and stderr stays quiet of them, as it does of a
    refusal's: a script reads the one object, and one that reads stdout and stderr as one
    stream (`2>&1`) gets JSON it can parse."""
    said = _said_notices()
    for line in result.pop("notices", None) or []:
        if not json_refusals():
            _say(line)
        if line not in said:
            said.append(line)
    return result


def _say(line: str) -> None:
    """`line` on stderr, unless this command printed it already."""
    from kint.settings.complaints import printed

    if line not in printed:
        printed.add(line)
        click.echo(line, err=True)


def resolve_space(obj: Ctx) -> "SpaceRef":
    """The caller's space (`--tenant`, `--db` and the environment), refused (exit 2) when its
    store can never be one: a folder, a symlink, a file that is not SQLite. Such a store is
    never sent to the supervisor, whose worker would fail on it at every start."""
    from kint import spaces

    ref = spaces.resolve(obj.tenant, obj.db)
    problem = spaces.store_problem(ref.db)
    if problem is not None:
        fail(KintError("BAD_REQUEST", f"store {ref.db} {problem}", spaces.STORE_HINT),
             obj.debug)
    return ref


def explained(err: KintError, ref: "SpaceRef") -> KintError:
    """`err`, with a hint that fits what the caller asked for. A space bound to another
    store refuses a store that does not exist: that is a mistyped `--db` or a relative
    SIBYL_MEMORY_DB far more often than a second store wanting a space of its own."""
    import os

    if err.code == "SPACE_CONFLICT" and not os.path.exists(ref.db):
        err.hint = (f"{ref.db} does not exist: check --db or SIBYL_MEMORY_DB (KINT_SPACE "
                    "gives a new store a space of its own)")
    return err


# A caller's own way to report a refused call (`kint join` names the step); it must exit.
OnError = Callable[[KintError], NoReturn]
# A caller's own way to report Ctrl-C while it waits on the worker, given the op it sent
# (`kint join` names the step); it must exit. Default: `refuse_interrupted`.
OnInterrupt = Callable[[str], NoReturn]


def call_with_progress(obj: Ctx, op: str, args: dict[str, Any], timeout_s: float,
                       command: str | None = None, *, on_error: OnError | None = None,
                       on_interrupt: OnInterrupt | None = None) -> dict[str, Any]:
    """`space_call`, showing the worker's progress on stderr when it is a terminal: the
    call runs in a thread while this one reads the space's heartbeat once a second, and
    shows a line only when it is this call's (its op, begun since the call was sent)."""
    import threading
    import time

    if not sys.stderr.isatty():
        return space_call(obj, op, args, timeout_s, command, on_error=on_error,
                          on_interrupt=on_interrupt)
    ref = resolve_space(obj)
    args = sent_settings(args)
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            with obj.client() as client:
                box["result"] = client.call(op, tenant=ref.tenant, db=ref.db, space=ref.label,
                                            args=args, timeout_s=timeout_s)
        except KintError as err:
            box["error"] = explained(err, ref)

    worker = threading.Thread(target=run, daemon=True)
    sent_at = time.monotonic()
    worker.start()
    shown = ""
    try:
        with obj.client(autostart=False) as watcher:
            while worker.is_alive():
                worker.join(1.0)
                line = watcher.progress_line(ref.space16, op, sent_at)
                if line and line != shown:
                    click.echo(f"\r\x1b[2K{line}", err=True, nl=False)
                    shown = line
    except KeyboardInterrupt:
        click.echo("\r\x1b[2K", err=True, nl=False)  # the progress line, and the ^C
        (on_interrupt or refuse_interrupted)(op)
    if shown:
        click.echo("\r\x1b[2K", err=True, nl=False)
    if "error" in box:
        if on_error is not None:
            on_error(box["error"])
        fail(box["error"], obj.debug, command)
    return print_notices(box["result"])


def space_call(obj: Ctx, op: str, args: dict[str, Any], timeout_s: float,
               command: str | None = None, *, on_error: OnError | None = None,
               on_interrupt: OnInterrupt | None = None) -> dict[str, Any]:
    ref = resolve_space(obj)
    try:
        with obj.client() as client:
            return print_notices(client.call(op, tenant=ref.tenant, db=ref.db,
                                             space=ref.label, args=sent_settings(args),
                                             timeout_s=timeout_s))
    except KeyboardInterrupt:
        (on_interrupt or refuse_interrupted)(op)
    except KintError as err:
        err = explained(err, ref)
        if on_error is not None:
            on_error(err)
        fail(err, obj.debug, command)
