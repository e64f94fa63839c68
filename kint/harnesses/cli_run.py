"""Running a harness's own CLI (`claude mcp add-json`, `hermes config get`, ...) for
`kint setup`: bounded by a timeout, its output captured, and a failure named by the
command's leading words only, never the JSON or environment it was given (which may hold
the user's values).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from kint.harnesses.failures import RERUN, HarnessFailure
from kint.protocol.errors import ErrorCode

def env_command() -> str:
    """`env`, to start the server with PYTHONPATH unset (and, for harnesses that take no
    environment of their own, with kint's variables)."""
    return "/usr/bin/env" if Path("/usr/bin/env").exists() else (shutil.which("env") or "env")


def which(cli: str) -> str | None:
    return shutil.which(cli)


COMMAND_WORD = re.compile(r"^-{0,2}[A-Za-z][-A-Za-z0-9_]*$")


def shown_command(argv: list[str]) -> str:
    """The harness command as a failure line names it: the CLI's name and its leading
    words (`claude mcp add-json --scope user kint`), never the JSON or env it was given."""
    words = [Path(argv[0]).name]
    for word in argv[1:]:
        if not COMMAND_WORD.match(word) or len(words) == 7:
            break
        words.append(word)
    return " ".join(words)


def run_cli(argv: list[str], *, timeout: float, stdin: str | None = None,
            shown: str | None = None, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    """A harness's CLI, its output captured, in this process's environment or `env`. One
    that does not finish within `timeout` (stuck, or waiting on a question setup did not
    answer) or cannot be started (a broken script) fails the harness with a line naming the
    command (`shown`, when its arguments travel on stdin), not an exception's repr carrying
    its whole argv."""
    shown = shown or shown_command(argv)
    try:
        return subprocess.run(argv, input=stdin if stdin is not None else "", text=True,
                              capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise HarnessFailure(f"`{shown}` did not finish within {timeout:g} s",
                             f"run `{shown}` yourself to see what it waits "
                             f"for, then {RERUN}", ErrorCode.TIMEOUT) from None
    except OSError as err:
        raise HarnessFailure(f"cannot run {argv[0]}: {err.strerror or err}",
                             f"check that `{Path(argv[0]).name} --version` runs, then "
                             f"{RERUN}", ErrorCode.HARNESS_ERROR) from None


def help_mentions(argv: list[str], word: str, *, timeout: float) -> bool:
    """Whether the help `argv` prints (`claude mcp add-json --help`) names `word`: how setup
    tells whether a harness's CLI takes a form it added in a later version (its JSON on
    stdin), asked only once that form failed. Its stdout and stderr are both read, whatever
    its exit status: a CLI may print its help on either, or exit non-zero after it. One that
    hangs or cannot be started fails the harness, as any run of it does (`run_cli`)."""
    helped = run_cli(argv, timeout=timeout)
    return word in helped.stdout + helped.stderr


def tail(proc: subprocess.CompletedProcess[str], lines: int = 3, noise: str = "") -> str:
    """The last `lines` lines a harness's CLI printed, for a failure's line; lines that
    contain `noise` (a plugin's chatter) are left out."""
    text = "\n".join(x for x in (proc.stdout + "\n" + proc.stderr).splitlines()
                     if x.strip() and not (noise and noise in x.lower()))
    last = text.splitlines()[-lines:]
    return " | ".join(s.strip() for s in last) or f"exit status {proc.returncode}"
