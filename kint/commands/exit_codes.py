"""The exit status of every command, as kint v0.3.0's CLI reference (09-cli.md) gives it.

One list, so a script can branch on `$?` the same way against either kint:

- 0: done; `verify` decided proceed
- 1: `verify` refused; `doctor` found a failing check; `setup`: a harness failed;
  `kint supervisor status`: a degraded supervisor; `demo` failed
- 2: an error: bad input, a refusal from `connect`, `authorize`, `rekey`,
  `recovery-code`; `join` stopped before the restore
- 3: `push`, `compact`, `rekey`: the data key expired or is missing, or the session key
  cannot be loaded (`pull` and `join` too, for the session key: its local passphrase
  missing, which seals the key cache too, 05-keys.md, or, while an interrupted push's journal
  waits to be settled, the key itself missing or locked, since the pull settles the
  journal first; with no such journal a pull with only session.key gone restores and
  exits 0, as v0.3.0's pull needs a cached data key and sends nothing)
- 4: `push`, `compact`, `rekey`: the chain moved; `pull`, `join`: a fork
- 5: `push`, `compact`, `rekey`, `pull`, `join`: any other push or pull refusal (a pull
  with no cached data key lands here; so do push, compact and pull on a space never
  connected, NOT_CONNECTED: v0.3.0's push tool tells no owner from no data key)
- 6: `pull`, `join`: a freshness refusal (a stale RPC, two RPCs that disagree on a cold
  start)

(`join` exits with its restore's pull status; docs/commands.md, "Exit status", is this
list as a table for readers.)

And this kint's own: `supervisor status` and `supervisor reload` exit 3 when no
supervisor runs for KINT_HOME, `devchain status` when no devchain runs and `devchain
fund` when none is recorded or it does not answer (v0.3.0 has none of them); `supervisor start
--foreground` exits 2 beside a running supervisor, for a service manager to see; every
command exits 130 on Ctrl-C (`INTERRUPTED`), as v0.3.0 did by its traceback, where click
would say `Aborted!` and exit 1.
"""

from __future__ import annotations

from kint.protocol import ErrorCode

OK = 0
REFUSE = 1
ERROR = 2
KEY_EXPIRED = 3
CHAIN_MOVED = 4
PUSH_PULL_REFUSED = 5
FRESHNESS = 6
# `kint supervisor status` (and `reload`) when no supervisor runs for KINT_HOME.
NO_SUPERVISOR = 3
# `kint devchain status` when no devchain runs for KINT_HOME, `kint devchain fund` when none
# is recorded or it does not answer: the same rule.
NO_DEVCHAIN = 3
# Ctrl-C (SIGINT): the shell's 128 + 2, which v0.3.0's uncaught KeyboardInterrupt also
# exited with; no status above, since the command neither finished nor was refused.
INTERRUPTED = 130
INTERRUPTED_CODE = "INTERRUPTED"


def interrupted_words(op: str | None) -> tuple[str, str]:
    """The refusal line and hint of a command stopped by Ctrl-C. `op` is the request it
    was waiting on, if any: the worker runs it to its end anyway (a push goes on signing
    and anchoring), which the user must hear rather than believe it cancelled."""
    if op is None:
        return "interrupted (Ctrl-C)", "run the command again"
    return (f"interrupted (Ctrl-C): this command stopped waiting, not the {op} it sent, "
            f"which the space's worker runs to its end",
            "`kint supervisor status` shows it while it runs; `kint status` says where the "
            "space stands after")

# `rekey` exits 2 for its own refusals (a key it cannot carry over, BAD_REQUEST or WRONG_KEY;
# a machine with no key wraps to carry, BAD_REQUEST; the head header it could not read,
# CHAIN_UNREADABLE; a space not connected, which the command checks before it sends:
# owner_flag.refuse_unconnected) but shares push's codes for what its
# snapshot push meets (NOT_CONNECTED there is an unfunded or unauthorized session key, 5).
_ANCHORING = frozenset({"push", "compact", "rekey"})
_RESTORING = frozenset({"pull", "join"})


def exit_code_for(command: str, code: ErrorCode | str) -> int:
    """The status `command` exits with when its request failed with `code`."""
    if command not in _ANCHORING | _RESTORING:
        return ERROR
    try:
        code = ErrorCode(code)
    except ValueError:  # the client's own codes (no supervisor): the push or pull failed
        return PUSH_PULL_REFUSED
    if code is ErrorCode.NO_SESSION_KEY:
        return KEY_EXPIRED
    if code in (ErrorCode.CHAIN_MOVED, ErrorCode.FORK):
        return CHAIN_MOVED
    if command in _ANCHORING:
        if code is ErrorCode.NO_DATA_KEY:
            return KEY_EXPIRED
        if command == "rekey" and code in (ErrorCode.BAD_REQUEST, ErrorCode.WRONG_KEY,
                                           ErrorCode.CHAIN_UNREADABLE):
            return ERROR
        return PUSH_PULL_REFUSED
    if code is ErrorCode.STALE_RPC:
        return FRESHNESS
    if command == "join" and code is ErrorCode.BAD_REQUEST:
        return ERROR
    return PUSH_PULL_REFUSED
