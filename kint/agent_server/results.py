"""kint's tool results in the shape kint v0.3.0's MCP reference (08-tools.md) gives them.

The worker answers kint's own ops (`status`, `pull`, `push`) for the command line and for
kint-server alike; what an agent reads is v0.3.0's contract: its field names, its counts,
its error codes and the hints that tell the agent its next tool call. This module is that
translation (with kint.agent_server.agent_hints, the hints in an agent's words), the way
kint.commands.exit_codes translates the same error codes into v0.3.0's exit statuses. The
worker's own extra facts stay in the result beside v0.3.0's (docs/harnesses.md, "Where
this differs from v0.3.0").
"""

from __future__ import annotations

from typing import Any, Callable

from kint.agent_server.agent_hints import (CALL_CONNECT, CALL_PULL_FIRST, ROTATED_CONNECT,
                                           agent_error)
from kint.agent_server.agent_notices import agent_notice
from kint.client import KintError
from kint.front_closed import CLOSED_HINT
from kint.open_files import ROOM_HINT, SYSTEM_FILES_HINT, WORKER_ROOM_HINT
from kint.protocol.errors import hint_with_notices, split_notices
from kint.protocol.hints import (ASIDE_THEN, DISCARD_FROM_AGENT, ROTATED_GAP_STEP, SAID_BY_NEXT,
                                 STORE_LOCKED_PUSH_HINT)

# v0.3.0's hints for a push that the space's running work holds up, and for its data key.
PUSH_RUNNING = "a push is already running"
KEY_GONE = "the data key on this machine has expired or is missing"

# The agent's calls that say (and use up) a kept settled notice: memory_status names them
# where the worker names the CLI's commands.
SAID_BY_TOOLS = "the agent's next memory_pull or memory_push"

# A pull that stopped at an epoch sealed under a key rotated on another machine says, for a
# terminal, to connect again and pull (ROTATED_GAP_STEP, the end of its `message`): the
# connect is the human's (the owner's key), the pull after it the agent's own.
ROTATED_GAP_FOR_AGENT = (f"if the data key was rotated on another machine, stop and tell the "
                         f"human: {ROTATED_CONNECT}memory_pull again")

# The worker's codes under v0.3.0's name for the same refusal, per tool. A code not named
# here is this kint's own (docs/harnesses.md lists them) and passes as it is.
# memory_push without a session key that loads answers v0.3.0's exception class for it,
# `KeyError_` (08-tools.md, "memory_push", its errors table).
_PUSH_CODES = {"NO_DATA_KEY": "KEY_EXPIRED", "GAP": "PUSH_FAILED",
               "BAD_REQUEST": "PUSH_FAILED", "TOO_LARGE": "PUSH_FAILED",
               "NO_SESSION_KEY": "KeyError_"}
_PULL_CODES = {"STALE_RPC": "NOT_FRESH", "NO_DATA_KEY": "PULL_FAILED", "GAP": "PULL_FAILED"}
# v0.3.0's hints for memory_push's refusals; memory_pull keeps the worker's (a pull's BUSY
# is a running pull or connect, or a store another process holds, and says what to stop).
_PUSH_HINTS = {"BUSY": PUSH_RUNNING, "CHAIN_MOVED": CALL_PULL_FIRST}
# A BUSY that is no running work of the space's but the supervisor's open files (a worker
# it could not start, or its front door closed to new clients for want of them), or the
# store's lock another process holds: v0.3.0's hint for the code ("a push is already
# running") would send the agent to wait on nothing.
_NO_PUSH_RUNNING_HINTS = frozenset({ROOM_HINT, WORKER_ROOM_HINT, SYSTEM_FILES_HINT,
                                    CLOSED_HINT, STORE_LOCKED_PUSH_HINT})
# A CHAIN_MOVED whose rows a discarding pull moved aside: v0.3.0's hint ("call memory_pull
# first") would drop the write-back step after the pull, which the refusal alone now says.
_MORE_THAN_A_PULL = frozenset({ASIDE_THEN.format(again="kint push")})


def tool_error(err: KintError, codes: dict[str, str], failed: str,
               owner_known: Callable[[], bool], hints: dict[str, str]) -> KintError:
    """`err` under v0.3.0's code and hint. NOT_CONNECTED is v0.3.0's only when no owner is
    enrolled; the worker also says it of a machine that is enrolled but cannot write (its
    session key not authorized, its recovery file gone), which v0.3.0 calls `failed`
    (PUSH_FAILED, PULL_FAILED): `owner_known` tells the two apart."""
    said, notices = split_notices(err.hint)  # kept under the hint that replaces `said`
    code, hint = codes.get(err.code, err.code), hints.get(err.code, said)
    if said in _NO_PUSH_RUNNING_HINTS | _MORE_THAN_A_PULL:  # no push running; or more to do
        hint = said
    if err.code == "NOT_CONNECTED":
        if owner_known():
            code = failed
        else:
            hint = CALL_CONNECT
    return KintError(code, err.message, hint_with_notices(hint, notices))


def push_error(err: KintError, owner_known: Callable[[], bool]) -> KintError:
    """KEY_EXPIRED opens with v0.3.0's message for it (14-agents.md, "Common errors and
    fixes"), then the worker's, which says which of the two it is and which space."""
    mapped = tool_error(err, _PUSH_CODES, "PUSH_FAILED", owner_known, _PUSH_HINTS)
    if mapped.code == "KEY_EXPIRED" and not mapped.message.startswith(KEY_GONE):
        return KintError(mapped.code, f"{KEY_GONE}: {mapped.message}", mapped.hint)
    return mapped


def pull_error(err: KintError, owner_known: Callable[[], bool]) -> KintError:
    mapped = tool_error(err, _PULL_CODES, "PULL_FAILED", owner_known, {})
    said, notices = split_notices(mapped.hint)
    if mapped.code == "BUSY" and said and DISCARD_FROM_AGENT in said:
        # The store another process holds (another agent's kint-server on the same store,
        # say): only the human can close it; the terminal's hint would have the agent call
        # the very tool that was just refused.
        said = (f"stop and ask the human: {said.replace(DISCARD_FROM_AGENT, '')}"
                .removesuffix(", then try again")
                + ", then call memory_pull with discard_local again")
        return KintError(mapped.code, mapped.message, hint_with_notices(said, notices))
    return mapped


def push_result(worker: dict[str, Any], reason: str) -> dict[str, Any]:
    """`pushed` counts epochs (the worker's counts row changes, as `kint push` prints).
    Each epoch's fields are the worker's, `gas_used` among them, as `kint push --json`
    gives them too."""
    epochs = worker.get("epochs") or []
    return {**worker, "reason": reason, "pushed": len(epochs), "epochs": epochs}


def pull_result(worker: dict[str, Any]) -> dict[str, Any]:
    """The head as three fields, `root_ok` (null on a store that was already up to date),
    `unopenable` (epochs sealed under a key this machine lacks) and the warning count in
    `message`."""
    out = {k: v for k, v in worker.items() if k not in ("head", "closed",
                                                         "store_root_matches")}
    head = worker.get("head") or {}
    out.update(head_seq=head.get("seq"), head_digest=head.get("digest"),
               head_block=head.get("block"),
               root_ok=worker.get("store_root_matches") if worker.get("applied") else None,
               unopenable=worker.get("closed") or [])
    message = worker.get("message")
    if isinstance(message, str) and message.endswith(ROTATED_GAP_STEP):
        out["message"] = message.removesuffix(ROTATED_GAP_STEP) + ROTATED_GAP_FOR_AGENT
    warnings = worker.get("warnings") or []
    if warnings:
        # A dropped journal's warning names `kint push` for its rows: the agent's own tool.
        out["warnings"] = [agent_notice(w) for w in warnings]
        out["message"] = f"{out.get('message')} ({len(warnings)} warning(s))"
    return out


def _not_counted(worker: dict[str, Any]) -> str:
    """Why the worker counted no unanchored rows: no anchored epoch here yet, or (with one)
    a store that is not there to diff against it."""
    if worker.get("head") is None:
        return "no anchored epoch on this machine yet: connect or pull first"
    store = (worker.get("store") or {}).get("path")
    return f"the store {store} does not exist: nothing to count against the anchored epoch"


def status_result(worker: dict[str, Any]) -> dict[str, Any]:
    """v0.3.0's memory_status: `space` is the full space id, the mirror is what this machine
    last saw anchored (with its row count), `unanchored` splits changed from deleted rows,
    `chain_head` (with the contract, or the reason it could not be read) appears when an
    owner is known, and `in_step` and `session_key` when the head was read. The worker's
    own facts (the store's row counts, kint's files, a half-done pull, the disks) stay."""
    owner = worker.get("owner")
    head = worker.get("head")
    mirror = None if head is None else {"seq": head["seq"], "digest": head["digest"],
                                        "block": head["block"],
                                        "rows": worker.get("mirror_rows")}
    unanchored = worker.get("unanchored_changes")
    if unanchored is None:
        unanchored = {"error": worker.get("state_error") or _not_counted(worker)}
    moved = ("head", "mirror_rows", "unanchored_changes", "chain_head", "in_step",
             "chain_head_unavailable", "session_key", "session", "contract", "space_id",
             "space", "store")
    out: dict[str, Any] = {
        "owner": owner, "tenant": worker.get("tenant"), "space": worker.get("space_id"),
        "db_path": (worker.get("store") or {}).get("path"),
        "connected": owner is not None,
        "data_key_cached": bool(worker.get("data_key_cached")),
        "held": worker.get("held"), "cap": worker.get("cap"), "mirror": mirror,
        "unanchored": unanchored,
        **{k: v for k, v in worker.items() if k not in moved and k not in (
            "owner", "tenant", "connected", "data_key_cached", "held", "cap", "unanchored")},
    }
    if owner is not None:
        chain_head = worker.get("chain_head")
        if chain_head is None:
            out["chain_head"] = {"error": worker.get("chain_head_unavailable") or "unread"}
        else:
            out["chain_head"] = {**chain_head, "contract": worker.get("contract")}
            out["in_step"] = bool(worker.get("in_step"))
            out["session_key"] = worker.get("session_key")
    if isinstance(out.get("settled_notice"), str):  # the commands that say it: the tools
        out["settled_notice"] = out["settled_notice"].replace(SAID_BY_NEXT, SAID_BY_TOOLS)
    failure = out.get("watcher_failure")
    if isinstance(failure, dict) and failure.get("hint"):
        out["watcher_failure"] = {**failure, "hint": watcher_failure_hint(failure)}
    return out


def watcher_failure_hint(failure: dict[str, Any]) -> str | None:
    """The watcher's failed push's hint in an agent's words, as a memory_push refusal's
    would be (push_error's hints by code, then agent_error): the worker's is written for a
    terminal. The watcher pushes only on an enrolled machine, so the owner is known."""
    err = KintError(failure["code"], failure.get("message") or "", failure["hint"])
    return agent_error("memory_push", push_error(err, lambda: True)).hint
