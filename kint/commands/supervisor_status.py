"""`kint supervisor status`, without click: what the command does, and the plain forms the
console script runs without loading the command line at all.

People run this command in a loop to watch a busy or stuck box (bench/README.md's
`bench_cli_start.py` wants it under 100 ms from a fresh process, two thirds of which is
Python starting and importing). click (with `inspect`, which it loads) is ~12 ms of that,
orjson and `dataclasses` ~13 ms more. So `kint.entry` hands `kint supervisor status` and
`kint supervisor status --json`, exactly those words, to `run` here, which loads the
client, the renderer and nothing else; every other form (`--watch`, `--help`, a global
option such as `--debug`) goes through click, whose command (`kint.commands.supervisor`)
calls the same `run`. One function, so the two ways cannot print or exit differently.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, TextIO

from kint import render
from kint.client import Client, KintError, SupervisorUnavailable
from kint.commands.exit_codes import (ERROR, INTERRUPTED, INTERRUPTED_CODE, NO_SUPERVISOR,
                                      REFUSE as DEGRADED, interrupted_words)
from kint.paths import home_refusal, kint_home

_PLAIN_FORMS = {("supervisor", "status"): False, ("supervisor", "status", "--json"): True}
_CLEAR_SCREEN = "\033[2J\033[1;1H"
NONE_RUNNING_HINT = "`kint supervisor start` starts one (so does any command that needs it)"
# The command's --help (kint.commands.supervisor takes it from here), so the exit status it
# states and the one `run` returns are written down once, beside the code that returns it.
HELP = """One row per space: worker state, op in flight, RPC, head, restarts.

Exit code 0 when every space is ready, busy, starting or idle; 1 when any is hung,
restarting or quarantined, or was refused a worker for want of open files, or its worker
refused to start (an older worker of the space holds it, or it began short of open
files), or when the supervisor runs and does not answer (stopped or stuck) or takes no new
clients for want of open files or as it stops; 2 when the supervisor refuses the call; 3
when no supervisor runs."""


def plain_form(argv: list[str]) -> bool | None:
    """For the console script: whether `argv` (without the program name) is one of the
    plain forms, and then whether it asks for JSON; None for anything else."""
    return _PLAIN_FORMS.get(tuple(argv))


def _write(stream: TextIO | None, text: str) -> None:
    """`text` and a newline on `stream`; nothing when the stream is closed (`>&-` makes
    it None), as click.echo does, so the exit status is still the command's own."""
    if stream is None:
        return
    stream.write(text + "\n")
    stream.flush()


def _out(text: str) -> None:
    _write(sys.stdout, text)


def _err(text: str) -> None:
    _write(sys.stderr, text)


def _refusal_json(code: str, message: str, hint: str | None) -> None:
    """A refusal under --json, as `common.refuse` prints one for every other command."""
    _out(json.dumps({"error": code, "message": message, "hint": hint}, indent=2,
                    ensure_ascii=False))


def _show(status: dict[str, Any], as_json: bool, watch: bool) -> None:
    if as_json:
        _out(json.dumps(status, indent=2, ensure_ascii=False))
        return
    if watch and sys.stdout is not None and sys.stdout.isatty():
        sys.stdout.write(_CLEAR_SCREEN)
    _out(render.supervisor_status_text(status))


def run(*, as_json: bool = False, watch: bool = False, debug: bool = False) -> int:
    """One row per space, and the exit status HELP states. With `watch`, again every
    second until Ctrl-C (which ends it with 0)."""
    home = kint_home()
    client = Client(home, autostart=False)
    told: set[str] = set()
    while True:
        # A watch keeps its connection: one the supervisor answered on is served still
        # when it takes no new clients (kint/front_closed.py), and shows that it does not.
        if not client.ping(1.0) and not (watch and client.answered_by(client.serving_pid())):
            refusal = home_refusal(home)  # asked only here: the answered call needs none
            if refusal is not None:  # as the command line says it for every other command
                _err(refusal)
                return ERROR
            from kint.front_closed import read_note
            from kint.socket_paths import socket_dir
            from kint.supervisor.start_refusals import unanswering_supervisor

            serving = client.serving_pid()
            closed = (read_note(socket_dir(home), serving) if serving is not None
                      else client.stepped_down_note())
            if closed is not None:  # it runs, short of open files or stopping: and why
                said = closed.refusal()  # stopped too: said so, and how to resume it
                if as_json:
                    _refusal_json(*said)
                else:
                    _err(render.refusal_text(*said))
                return DEGRADED
            silent = unanswering_supervisor(home)
            if silent is not None:  # one runs (stopped, stuck): the most degraded of all
                if as_json:
                    _refusal_json(SupervisorUnavailable.CODE, str(silent), silent.hint)
                else:
                    _err(render.refusal_text(SupervisorUnavailable.CODE, str(silent),
                                             silent.hint))
                return DEGRADED
            # The same refusal either way, its code and hint with it: a script that reads
            # stderr finds the code the JSON object carries.
            message = f"no supervisor is running for {home}"
            if as_json:  # a script reads one object whichever way the command ends
                _refusal_json(SupervisorUnavailable.CODE, message, NONE_RUNNING_HINT)
            else:
                _err(render.refusal_text(SupervisorUnavailable.CODE, message,
                                         NONE_RUNNING_HINT))
            return NO_SUPERVISOR
        try:
            status = status_with_proof(client)
        except KintError as err:
            if debug:
                import traceback

                traceback.print_exc()
            if as_json:
                _refusal_json(err.code, err.message, err.hint)
            else:
                _err(render.refusal_text(err.code, err.message, err.hint))
            return ERROR
        for line in status.pop("notices", None) or []:
            if line not in told:  # once, however long --watch runs
                told.add(line)
                _err(line)
        _show(status, as_json, watch)
        if not watch:
            return DEGRADED if status["degraded"] else 0
        try:
            time.sleep(1.0)
        except KeyboardInterrupt:
            return 0


def status_with_proof(client: Client) -> dict[str, Any]:
    """`sup.status`, with the proof of this environment's KINT_SESSION_PASSPHRASE when it
    has one (kint.settings.secret_proof), so that the answer says whether the supervisor
    runs with another. A supervisor older than that argument (one an upgrade is about to
    replace) refuses it as unknown: asked again without it. `kint session-key create` and
    `rotate` ask the same (kint.commands.key_passphrase)."""
    from kint.settings.environ import environ_value

    secret = environ_value("KINT_SESSION_PASSPHRASE")
    if secret is None:
        return client.call("sup.status", timeout_s=5)
    from kint.settings.secret_proof import proof

    try:
        return client.call("sup.status", args={"passphrase": proof(secret)}, timeout_s=5)
    except KintError as err:
        if err.code != "BAD_REQUEST" or "unknown argument 'passphrase'" not in err.message:
            raise
    return client.call("sup.status", timeout_s=5)


def run_plain(as_json: bool) -> int:
    """`run` for the console script, with what the command line does at the edges: Ctrl-C
    ends it as every command's (`INTERRUPTED`, exit 130), a closed pipe (`| head`)
    quietly with 1, as click does."""
    try:
        return run(as_json=as_json)
    except KeyboardInterrupt:
        message, hint = interrupted_words(None)
        if as_json:
            _refusal_json(INTERRUPTED_CODE, message, hint)
        else:
            _err("\n" + render.refusal_text(INTERRUPTED_CODE, message, hint))
        return INTERRUPTED
    except BrokenPipeError:
        # Nothing more reaches a closed pipe; the flush at exit goes to /dev/null instead.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
