"""Reading a secret the way a terminal user hands it over: from stdin, or from a file that
is deleted after reading. Never argv, never echoed, never logged.

A secret that does not come, or comes empty, is bad input (BAD_REQUEST, exit 2), refused
by `usage_error` as every command refuses its command line; a command that names its own
steps in its refusals (`kint join`: `join stopped at connect: ...`) reads its secrets
under `refusing_secrets_with`, so a secret that fails is refused as that step's."""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import sys
from collections.abc import Iterator
from typing import Any, Callable, NoReturn

import click

from kint.commands.common import usage_error

Refuser = Callable[[str, "str | None"], NoReturn]
_REFUSER: contextvars.ContextVar[Refuser | None] = contextvars.ContextVar(
    "kint_secret_refuser", default=None)


@contextlib.contextmanager
def refusing_secrets_with(refuser: Refuser) -> Iterator[None]:
    """Within the block, a secret that does not come or is empty is refused by `refuser`
    (message, hint) instead of `usage_error`."""
    token = _REFUSER.set(refuser)
    try:
        yield
    finally:
        _REFUSER.reset(token)


def refuse_secret(message: str, hint: str | None = None) -> NoReturn:
    """A secret refused: by the refuser in force (`refusing_secrets_with`), else as bad
    input on the command line."""
    refuser = _REFUSER.get()
    if refuser is not None:
        refuser(" ".join(message.split()), hint)
    usage_error(message, hint)

# A signature is 132 hex characters; a recovery code 55; a passphrase is a line. Anything
# much longer is not what the user meant to pipe.
MAX_SECRET_BYTES = 4096


def read_stdin_line(what: str) -> str:
    """The first line of stdin, surrounding whitespace stripped."""
    if sys.stdin is None or sys.stdin.closed:
        refuse_secret(f"{what} was to come on stdin, and stdin is closed",
                      f"pipe {what} to the command")
    data = sys.stdin.read(MAX_SECRET_BYTES + 1)
    if len(data) > MAX_SECRET_BYTES:
        refuse_secret(f"{what} on stdin is longer than {MAX_SECRET_BYTES} bytes",
                      f"pipe {what} alone, on one line")
    text = data.strip()
    if not text:
        refuse_secret(f"{what} was to come on stdin, and stdin was empty",
                      f"pipe {what} to the command")
    return text.splitlines()[0].strip()


def read_passphrase_stdin() -> str:
    """One passphrase from stdin, leading and trailing whitespace stripped (so a
    passphrase must not start or end with a space: the prompt keeps them)."""
    return read_stdin_line("the passphrase")


PIPE_IT = "run the command in a terminal, or pipe the passphrase with --passphrase-stdin"
# For a passphrase --passphrase-stdin does not carry: piped, it would be taken as another
# one (the salt of the wallet key), so the hint must not send the user there.
TYPE_IT = "run the command in a terminal: this passphrase is only ever typed at its prompt"


def prompt_secret(prompt: str, hint: str = PIPE_IT, allow_empty: bool = False) -> str:
    """A passphrase typed at `prompt`, not echoed. Stdin that ends before a line comes (no
    terminal, nothing piped) is refused as bad input with a code and `hint` (exit 2), not
    click's bare `Aborted!` and exit 1, a status kint keeps for verify's refusal and a
    failed doctor. An empty line is refused here too (no key is ever derived from an empty
    passphrase), before any step runs, unless the prompt offers it (`allow_empty`: the
    extra passphrase wrap, `empty to skip`). With no terminal, getpass reads the line from
    stdin and says so in its own line; Python's warning about it, which names a source
    file, is not printed."""
    import getpass
    import warnings

    name = prompt.strip().rstrip(":")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", getpass.GetPassWarning)
            typed = getpass.getpass(prompt)
    except EOFError:
        click.echo("", err=True)  # the prompt's line is still open
        refuse_secret(f"the passphrase for `{name}` never came: stdin ended at the prompt "
                      f"(no terminal?)", hint)
    if not typed and not allow_empty:
        refuse_secret(f"the passphrase given at `{name}` is empty; kint refuses an empty "
                      f"passphrase", "run the command again and type the passphrase at the "
                      "prompt")
    return typed


# A path that names no file, given as `--signature PATH`: most likely the secret itself.
NOT_THE_SECRET_ITSELF = "--signature takes `-` for stdin or a path, never the signature itself"
# The same, given as `--signature-file PATH`: the flag says it is a file, and kint deletes
# the file once read, so a command run again after a refusal finds it gone.
SIGNATURE_FILE_GONE = ("--signature-file names a file holding the signature, which kint "
                       "deletes once read (a run before this one may have read it): sign "
                       "into the file again, or pipe the signature with --signature -")


def read_secret_file(path: str, what: str, missing_hint: str = NOT_THE_SECRET_ITSELF) -> str:
    """Read `path`, then unlink it: the file held a key and should not outlive its use.
    `missing_hint` says what to do when there is no such file (the flag that named it
    decides)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = fh.read(MAX_SECRET_BYTES + 1)
    except OSError as err:
        if not isinstance(err, FileNotFoundError) and err.errno != errno.ENAMETOOLONG:
            refuse_secret(f"{what} file {path} cannot be read: {err}",
                          "give a file this user can read, or pipe it with `-`")
        # The path is not echoed (nor the OS's error, which holds it): a user who pasted
        # the secret itself would see it again. A name too long for any file is that case
        # most of all: a smart account's signature runs to hundreds of hex digits.
        refuse_secret(f"{what} file given does not exist", missing_hint)
    except UnicodeDecodeError as err:
        refuse_secret(f"{what} file {path} cannot be read: {err}",
                      f"the file must hold {what} as text (hex)")
    try:
        os.unlink(path)
    except OSError as err:
        click.echo(f"kint: warning: could not delete {path} after reading it: {err}", err=True)
    text = data.strip()
    if not text or len(data) > MAX_SECRET_BYTES:
        refuse_secret(f"{what} file {path} does not hold one {what}",
                      f"write {what} alone, on one line, into the file")
    return text.splitlines()[0].strip()


def signature_options(who: str = "") -> Any:
    """`--signature -|PATH` and `--signature-file PATH`, the two ways a derive signature is
    handed over, with the same help on every command that takes one (connect, rekey, join).
    `who` prefixes the help when only some owners use the option (join: "EOA owners: ")."""

    def decorate(func: Any) -> Any:
        func = click.option(
            "--signature-file", default=None, metavar="PATH",
            help=f"{who}{'the' if who else 'The'} derive signature from a file, read then "
                 "unlinked.")(func)
        return click.option(
            "--signature", default=None, metavar="-|PATH",
            help=f"{who}`-` reads the 65-byte hex derive signature from stdin; a path is "
                 "read, then unlinked.")(func)

    return decorate
