"""The closed set of error codes a kint reply can carry, and the one exception that holds one.

Codes are arranged by what went wrong, so a caller can decide what to do from the code
alone: the request itself (fix the call), capacity and time (wait or retry), the chain
(pull, or check the endpoint), the space's worker (look at `kint supervisor status`).
Every code has a default hint; a handler that knows more passes its own (the named ones,
word for word, in kint.protocol.hints; the endpoint checks and their hints here, beside
RPC_UNAVAILABLE's default).
"""

from __future__ import annotations

from enum import Enum

# What a refused push or a held one leaves as it was, in the words every layer says it in
# (custody too, which may not import this layer: kint.outcomes imports nothing).
from kint.outcomes import NOTHING_ANCHORED_OR_DROPPED, NOTHING_DROPPED


class ErrorCode(str, Enum):
    # The request itself is wrong: fix the call.
    BAD_REQUEST = "BAD_REQUEST"
    UNSUPPORTED_VERSION = "UNSUPPORTED_VERSION"
    TOO_LARGE = "TOO_LARGE"
    UNKNOWN_OP = "UNKNOWN_OP"
    SPACE_CONFLICT = "SPACE_CONFLICT"
    # Capacity and time: the work may still be going on, or may go through later.
    TIMEOUT = "TIMEOUT"
    BUSY = "BUSY"
    # The chain and the memory's state: pull, push from a terminal, or check the endpoint.
    HELD = "HELD"
    CHAIN_MOVED = "CHAIN_MOVED"
    FORK = "FORK"
    STALE_RPC = "STALE_RPC"
    GAP = "GAP"
    NOT_CONNECTED = "NOT_CONNECTED"
    NO_DATA_KEY = "NO_DATA_KEY"
    NO_SESSION_KEY = "NO_SESSION_KEY"
    WRONG_KEY = "WRONG_KEY"
    RPC_UNAVAILABLE = "RPC_UNAVAILABLE"
    # rekey's own refusal before it sends anything: the vault's newest readable header could
    # not be read (the RPC failed, or served calldata the Epoch event does not vouch for).
    CHAIN_UNREADABLE = "CHAIN_UNREADABLE"
    # $KINT_HOME/config.toml refused (file and key named); the last good one serves. Also a
    # chain setting that does not parse, wherever it was set: its chain work is refused. And
    # for `kint setup`, a harness's own config file it cannot read, parse or write.
    CONFIG_INVALID = "CONFIG_INVALID"
    # A state file under KINT_HOME that cannot be trusted (named in the message).
    CORRUPT_STATE = "CORRUPT_STATE"
    # The disk under KINT_HOME or the store is full.
    DISK_FULL = "DISK_FULL"
    # The space's worker process.
    WORKER_DOWN = "WORKER_DOWN"
    QUARANTINED = "QUARANTINED"
    # Sibyl refused (its account gate, its cap, a store it cannot read): its words, its hint.
    SIBYL_ERROR = "SIBYL_ERROR"
    # A harness's own CLI (claude, hermes, openclaw) failed or did not save what `kint setup`
    # gave it: its words, and the command to run by hand.
    HARNESS_ERROR = "HARNESS_ERROR"
    # A fault in kint itself.
    INTERNAL = "INTERNAL"


# What to check when an endpoint did not answer, by what set it: the generic settings, the
# endpoints a space was given when it connected, the devchain's record. The worker names
# the one in force (kint.tenant_worker.rpc_hint) in RPC_UNAVAILABLE's hint and in
# UNSETTLED_HINT alike: a hint that sends the user to a setting not in force is a wrong
# next step. `{rpc}`: KINT_RPC_URL, named where it was set where the machine's settings
# set the endpoint (the supervisor's environment, the Keychain: kint.chain.endpoint_source).
RPC_CHECK_AT = "check {rpc} and KINT_RPC_URL_2 and the endpoint"
RPC_CHECK = RPC_CHECK_AT.format(rpc="KINT_RPC_URL")
SPACE_RPC_CHECK = ("check the endpoints this space was given by `kint connect --rpc-urls` "
                   "and that they answer")
DEVCHAIN_RPC_CHECK = ("check that the devchain runs (`kint devchain status`; `kint devchain "
                      "start` starts it)")
# The tail of every RPC_UNAVAILABLE hint that sends the user to check an endpoint and try
# the command again (the generic one, a space's, one a config file sets: rpc_hint), by
# which kint-server knows them all, whatever endpoint they name.
RETRY_THEN = ", then try again"
FILE_RPC_CHECK = "check the endpoints set in {where} and that they answer"
# STALE_RPC's reason, after the check of the endpoints in force (the generic settings, a
# space's kept ones, a config file's, the devchain's: kint.tenant_worker.rpc_hint).
STALE_HEAD = ": the endpoint answered with an old or different head"
# STALE_RPC's own check, `{rpc}` as RPC_CHECK_AT's.
STALE_CHECK_AT = "check {rpc} and KINT_RPC_URL_2"

# CHAIN_UNREADABLE's own hint, a template as kint.protocol.hints' `_AT`s are: {endpoint}
# names where the space's endpoints in force are set (rpc_hint.name_the_endpoint).
CHAIN_UNREADABLE_AT = ("that is a transport failure, never a verdict on the vault: nothing was "
                       "sent or changed; try again, or change the RPC ({endpoint})")

DEFAULT_HINTS: dict[ErrorCode, str] = {
    ErrorCode.BAD_REQUEST: "fix the value named above (`kint COMMAND --help` lists what each "
    "command takes)",
    ErrorCode.UNSUPPORTED_VERSION: "the client and the supervisor speak different protocol "
    "versions; run `kint supervisor restart` after upgrading kint",
    ErrorCode.TOO_LARGE: "send a smaller request",
    ErrorCode.UNKNOWN_OP: "run `kint --help` for the operations this kint knows",
    ErrorCode.SPACE_CONFLICT: "set KINT_SPACE to give this store a space of its own",
    ErrorCode.TIMEOUT: "the work goes on in the worker; see `kint supervisor status`",
    ErrorCode.BUSY: "wait for the running work to finish, then try again",
    ErrorCode.HELD: NOTHING_ANCHORED_OR_DROPPED,
    ErrorCode.CHAIN_MOVED: "run `kint pull` first",
    ErrorCode.FORK: "run `kint pull --discard-local` to restore the anchored state",
    ErrorCode.STALE_RPC: STALE_CHECK_AT.format(rpc="KINT_RPC_URL") + STALE_HEAD,
    ErrorCode.GAP: "run `kint pull` again",
    ErrorCode.NOT_CONNECTED: "run `kint connect` first",
    ErrorCode.NO_DATA_KEY: NOTHING_DROPPED,
    # Said where kint cannot tell which is missing (the key file, or the local passphrase
    # that opens it); a refusal that knows there is no file says SESSION_KEY_MISSING_HINT.
    ErrorCode.NO_SESSION_KEY: "run `kint session-key create` (or check "
    "KINT_SESSION_PASSPHRASE: the session key is sealed under the local passphrase it was "
    "made with)",
    ErrorCode.WRONG_KEY: "the key given does not open this vault; nothing was changed",
    ErrorCode.CONFIG_INVALID: "fix that key (docs/settings.md lists every setting); until then "
    "the last good configuration keeps serving",
    ErrorCode.CORRUPT_STATE: "the file named was left as it is; move it aside and run "
    "`kint pull` (or `kint connect` for a key file)",
    ErrorCode.DISK_FULL: "free some space, then run the command again",
    ErrorCode.RPC_UNAVAILABLE: RPC_CHECK + RETRY_THEN,
    ErrorCode.CHAIN_UNREADABLE: CHAIN_UNREADABLE_AT.format(endpoint="KINT_RPC_URL"),
    ErrorCode.WORKER_DOWN: "the worker is being restarted; try again, and see "
    "`kint supervisor status`",
    ErrorCode.QUARANTINED: "the worker keeps failing to start; fix the cause shown, then "
    "`kint supervisor restart SPACE`",
    ErrorCode.SIBYL_ERROR: "run `sibyl status` to see the state of your Sibyl account and store",
    ErrorCode.HARNESS_ERROR: "run the harness's command named above yourself to see why, then "
    "run `kint setup` again",
    ErrorCode.INTERNAL: "this is a bug in kint; the supervisor log has the details",
}


# An interrupted push's journal kept because the chain could not be read while it was settled
# (kint/tenant_worker/overtaken.py, pending.py): a pull settles it first. Named here, as the
# hints of kint.protocol.hints, so that kint-server gives an agent its own next call for it
# (beside the endpoint checks: kint.tenant_worker.rpc_hint builds it from them). Raised with
# RPC_CHECK; the worker puts the check of the endpoint in force in its place, so an agent's
# hint is recognised by UNSETTLED_THEN, whatever check comes before it.
UNSETTLED_THEN = ", then run `kint pull`: it settles the interrupted push first"
UNSETTLED_HINT = RPC_CHECK + UNSETTLED_THEN


# RPC_UNAVAILABLE's hint where no KINT_RPC_URL sets the endpoint that failed, so that the
# hint names what does (kint.tenant_worker.rpc_hint): the devchain's record, or the
# endpoints a space was given when it connected.
DEVCHAIN_RPC_HINT = ("the devchain's endpoint did not answer: `kint devchain status` says "
                     "whether it runs (`kint devchain start` starts it), then try again")
SPACE_RPC_HINT = SPACE_RPC_CHECK + RETRY_THEN
# STALE_RPC's hint for a space's kept endpoints (an earlier `kint connect --rpc-urls`),
# which replace KINT_RPC_URL and KINT_RPC_URL_2: on the devchain one may now reach another
# anvil (a devchain started again elsewhere, with its EpochAnchor at the same address),
# whose head of this space is seq 0.
SPACE_STALE_HINT = ("check the endpoints this space was given by `kint connect --rpc-urls` "
                    "(a connect given --rpc-urls again replaces them)" + STALE_HEAD)
# ... for endpoints a config file sets: a template, as FILE_RPC_CHECK is, {where} naming it.
FILE_STALE_CHECK = "check the endpoints set in {where}" + STALE_HEAD
# ... and for the devchain's record: KINT_RPC_URL is not in force there, and the likely cause
# is a devchain started again on a fresh state, a chain of its own with EpochAnchor at the
# same address (the same dev account's first deployment) and none of this space's epochs.
DEVCHAIN_STALE_HINT = ("check that the devchain (`kint devchain status`) runs on the chain "
                       "this machine anchored on" + STALE_HEAD + "; one started again on a "
                       "fresh state (its state.json removed) holds none of this space's epochs")


# A reply's error carries one hint string. A refusal also carries the lines about settings
# of the call that were not used (kint.settings.wire, each `kint: ...`): they ride under the
# hint, one a line, and a reader that shows them apart (the CLI's --json) splits them off.
NOTICE_PREFIX = "kint: "


def hint_with_notices(hint: str | None, notices: list[str]) -> str | None:
    """`hint` with `notices` (each starting NOTICE_PREFIX) under it, one a line."""
    return "\n".join([hint, *notices]) if hint else ("\n".join(notices) or None)


def split_notices(hint: str | None) -> tuple[str | None, list[str]]:
    """(the hint, the notices) of a hint `hint_with_notices` made."""
    if not hint:
        return hint, []
    lines = hint.split("\n")
    notices = [line for line in lines if line.startswith(NOTICE_PREFIX)]
    rest = "\n".join(line for line in lines if not line.startswith(NOTICE_PREFIX))
    return rest or None, notices


class ProtocolError(Exception):
    """A refusal with a code, one human line, and a hint: what a reply's error carries.

    `request_id` is set when the failing message had a readable id, so the reply can be
    matched by the client that sent it.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        hint: str | None = None,
        *,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message
        self.hint = hint if hint is not None else DEFAULT_HINTS[self.code]
        self.request_id = request_id

    def __repr__(self) -> str:
        return f"ProtocolError({self.code.value}, {self.message!r})"
