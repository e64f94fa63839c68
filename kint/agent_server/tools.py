"""kint's six MCP tools, forwarded to the space's worker (docs/harnesses.md, "What the
agent sees"): memory_status, memory_connect, memory_pull, memory_push, memory_verify,
memory_history. Each is a `KintTool`: its description, its argument model
(kint.agent_server.tool_args) and what it runs; kint.agent_server.surface serves them.
A run returns its result or raises KintError; the surface turns either into `ok`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from mcp import types
from pydantic import BaseModel

from kint.agent_server import results, tool_args
from kint.agent_server.restore_wait import (RESTORE_RUNNING, RESTORE_RUNNING_HINT,
                                            RestoreUnderWay)
from kint.agent_server.session import AgentSession
from kint.agent_server.wrapped_client import STORE_GONE_HINT, SharedClient
from kint.client_bound import bounded
from kint.client_errors import KintError
from kint.custody.ids import address_problem
from kint.protocol.hints import CHECKSUM_HINT

# The longest a kint tool waits for the space's worker (a status waits 30 s, a history
# 60 s). Inside the 120 s Hermes gives a tool call by default and the 180 s `kint setup`
# gives Codex's: past it the supervisor answers TIMEOUT and the worker goes on with the push,
# pull or connect, so the agent gets an answer it can act on (call memory_status later)
# rather than a client-side timeout, while the next tool call, which waits for this one
# (kint.agent_server.one_call), is held no longer. A pull with `discard_local` (a restore)
# keeps it too: past it the answer is RESTORE_RUNNING, and the store this server closed for
# the restore stays closed until the worker ends it (kint.agent_server.restore_wait). Each
# is the tool call's whole wait (kint.client_bound.bounded): a tool that asks the worker twice
# (connect's status then its connect, a refusal worded from a status) answers within it too.
TOOL_WAIT_S = 100.0
STATUS_WAIT_S = 30.0
HISTORY_WAIT_S = 60.0


@dataclass(frozen=True)
class KintTool:
    name: str
    title: str
    description: str
    args: type[BaseModel]
    run: Callable[[Any], dict[str, Any]]
    annotations: types.ToolAnnotations


def human_steps(owner: str | None) -> list[str]:
    who = owner or "0x..."
    return [
        f"EOA wallet (Ledger, MetaMask, Rabby, keystore): kint canonical-payload --owner {who} "
        f"> kint-canonical.json && cast wallet sign --data --from-file kint-canonical.json "
        f"--ledger | kint connect --owner {who} --signature -",
        f"Base Account / smart wallet owner: kint connect --owner {who} --smart-account "
        f"--passphrase-stdin",
        f"Lost both? kint connect --owner {who} --recovery-code-stdin",
    ]


# Why `dev` (kint's own argument; v0.3.0's 08-tools.md has no such parameter) cannot take
# each of the others: it makes or finds its own EOA owner and derives the key from that
# owner's signature on every connect, as `kint connect --dev` does (kint.commands.connect,
# DEV_REFUSALS). A secret or an owner the agent passed would otherwise be dropped without a
# word. The CLI's one extra with --dev, --add-passphrase, is typed at a prompt only; a tool
# has none, and a `passphrase` here is the key of a smart account's vault, not an extra wrap.
DEV_TOOL_REFUSALS = {
    "owner": ("dev makes its own throwaway owner", "drop owner, or drop dev to connect a "
              "wallet's vault"),
    "passphrase": ("dev opens its vault with its own owner's signature, not a smart "
                   "account's vault passphrase",
                   "drop passphrase and call memory_connect again; a passphrase wrap on a "
                   "devchain vault is the human's to add: tell the human `kint connect --dev "
                   "--add-passphrase` in their terminal adds one"),
    "recovery_code": ("dev opens its vault with its own owner's signature; a recovery code is "
                      "for a machine without the owner's key",
                      "drop dev, and give owner with recovery_code"),
}


def refuse_dev_conflicts(given: dict[str, bool]) -> None:
    """Refuse the first argument `dev` cannot take (DEV_TOOL_REFUSALS), naming it and why,
    before anything reaches the worker: an argument is honoured or refused, never ignored."""
    for arg, present in given.items():
        if present:
            why, hint = DEV_TOOL_REFUSALS[arg]
            raise KintError("BAD_REQUEST", f"{arg} cannot be given with dev: {why}", hint)


def connect_tool(session: AgentSession, passphrase: str | None, recovery_code: str | None,
                 owner: str | None, dev: bool) -> dict[str, Any]:
    """memory_connect as v0.3.0's 08-tools.md gives it, plus kint's `dev`. An `owner`
    whose mixed case is not its EIP-55 checksum is refused here, as the worker refuses it:
    `human_steps` naming it would send the human to commands that refuse it."""
    if dev:
        refuse_dev_conflicts({"owner": owner is not None, "passphrase": passphrase is not None,
                              "recovery_code": recovery_code is not None})
    if owner is not None and address_problem(owner) is not None:
        raise KintError("BAD_REQUEST", f"memory_connect: argument 'owner' {owner!r} "
                        f"{address_problem(owner)}", CHECKSUM_HINT)
    if recovery_code is None and passphrase is None and not dev:
        status = session.call("status", {"keys": True}, timeout_s=STATUS_WAIT_S)
        known = status.get("owner") or owner
        # The lines about settings of the call that were not used, as every tool has them.
        noted = {"notices": status["notices"]} if status.get("notices") else {}
        if status.get("data_key_cached") and status.get("owner"):
            return {"connected": True, "owner": status["owner"], **noted}
        return {"connected": False, "owner": known, "human_steps": human_steps(known), **noted}
    args: dict[str, Any] = {}
    if dev:
        args["dev"] = True
    else:
        known = owner or session.call("status", {"keys": True},
                                      timeout_s=STATUS_WAIT_S).get("owner")
        if not known:
            raise KintError("OWNER_REQUIRED", "no owner was passed and none is enrolled",
                            "pass owner=0x... (the owner wallet's address)")
        args["owner"] = known
        if recovery_code is not None:
            args["recovery_code"] = recovery_code
        else:
            args["passphrase"] = passphrase
    result = session.call("connect", args, timeout_s=TOOL_WAIT_S)
    out = {"connected": True, "owner": result["owner"], "space": session.ref.space_id,
           "kek_tag8": result.get("key_tag") or "none", "fresh_vault": result["fresh_vault"],
           "dek_source": result["source"]}
    if result.get("recovery_file"):
        out["recovery_code_file"] = result["recovery_file"]
        out["note"] = ("a fresh vault: copy the recovery code in that file somewhere that is "
                       "not this machine")
    # What the worker says besides v0.3.0's fields: a chain head it could not read (the key
    # came from this machine's wraps), a space moved to the chain in force or to another
    # owner (one whose vault this machine held no epoch of), and the lines about settings
    # of the call that were not used.
    out.update({key: result[key] for key in ("chain_unreadable", "chain_moved",
                                             "owner_changed", "notices") if result.get(key)})
    return out


def restore_grace(bound_s: float) -> float:
    """How much of the call's bound is kept after the restore's wait, for wording the
    refusal it ended with (a status, kint.agent_server.results.pull_error)."""
    return min(1.0, bound_s / 8)


def restore_running_message(bound_s: float) -> str:
    """A restore that outlasts its call, said as what goes on: the worker still restores."""
    return (f"the restore did not end within this call's {bound_s:g} s; the restore goes on "
            f"in the space's worker, and this server opens the store again when it ends")


def kint_tools(session: AgentSession, shared: SharedClient) -> list[KintTool]:
    def owner_known() -> bool:
        """Whether this machine is enrolled: asked only after a NOT_CONNECTED, and a status
        that fails too leaves the refusal as the worker gave it."""
        try:
            return bool(session.call("status", {"keys": True},
                                     timeout_s=STATUS_WAIT_S).get("owner"))
        except KintError:
            return False

    def status(_args: tool_args.StatusArgs) -> dict[str, Any]:
        # The worker's status and the supervisor's row in one bound: a status that used it
        # up leaves the row unread (null), not read past it.
        with bounded(STATUS_WAIT_S):
            worker = session.call("status", {"chain": True}, timeout_s=STATUS_WAIT_S)
            # The supervisor's: requests waiting for the last replies of the space's worker
            # that exited ([] when none; null when its status could not be read).
            parked = session.parked()
        out = results.status_result(worker)
        # kint's own: whether the worker counts this session (its watcher on, its exit push
        # asked for); false while a start whose attach failed is still retrying.
        out["attached"] = session.attached
        out["parked"] = parked
        if shared.gone is not None:
            out["store_gone"] = {"message": shared.gone, "hint": STORE_GONE_HINT}
        # kint's own: a restore memory_pull stopped waiting for, still running (the call's
        # before_call looked), or null.
        out["restore_running"] = (shared.restore.message() if shared.restore is not None
                                  else None)
        # kint's own: how the last restore that outlasted its call ended, or null.
        last = shared.last_restore
        out["restore_outcome"] = last.outcome() if last is not None else None
        return out

    def connect(a: tool_args.ConnectArgs) -> dict[str, Any]:
        with bounded(TOOL_WAIT_S):  # its status and its connect, in all
            return connect_tool(session, a.passphrase, a.recovery_code, a.owner, a.dev)

    def pull(a: tool_args.PullArgs) -> dict[str, Any]:
        if a.discard_local:
            return restore(a)
        with bounded(TOOL_WAIT_S):  # the pull, and the status a refusal may ask for
            try:
                result = session.call("pull", {"full": a.full}, timeout_s=TOOL_WAIT_S)
            except KintError as err:
                raise results.pull_error(err, owner_known) from None
            finally:
                shared.refresh()  # a pull may have replaced the store (a lost one's restore)
        return results.pull_result(result)

    def restore(a: tool_args.PullArgs) -> dict[str, Any]:
        """A pull with `discard_local`, sent and waited for by its own thread
        (kint.agent_server.restore_wait): this call waits for it up to its bound, then
        answers RESTORE_RUNNING and leaves the rest, opening the store included, to it."""
        if shared.restore is not None:  # one restore at a time, and this one is followed
            raise KintError(RESTORE_RUNNING, shared.restore.message(), shared.restore.hint())
        with bounded(TOOL_WAIT_S):  # the restore's wait, and the status a refusal may ask for
            follower = RestoreUnderWay(
                shared.home, session.ref.space16,
                lambda client, timeout_s: session.call_on(
                    client, "pull", {"full": a.full, "discard_local": True}, timeout_s),
                shared.restore_ended, session.attach_if_new)
            shared.follow(follower)
            follower.start()
            if not follower.wait(TOOL_WAIT_S - restore_grace(TOOL_WAIT_S)):
                raise KintError(RESTORE_RUNNING, restore_running_message(TOOL_WAIT_S),
                                RESTORE_RUNNING_HINT)
            shared.restore_ended(follower)
            if follower.error is not None:
                raise results.pull_error(follower.error, owner_known) from None
        return results.pull_result(follower.result or {})
    def push(a: tool_args.PushArgs) -> dict[str, Any]:
        with bounded(TOOL_WAIT_S):  # the push, and the status a refusal may ask for
            try:
                result = session.call("push", {"snapshot": a.snapshot, "hold_reason": "tool"},
                                      timeout_s=TOOL_WAIT_S)
            except KintError as err:
                raise results.push_error(err, owner_known) from None
        return results.push_result(result, "tool")

    def verify(a: tool_args.VerifyArgs) -> dict[str, Any]:
        return session.call("verify", {"query": a.query, "limit": a.limit, "write": True},
                            timeout_s=TOOL_WAIT_S)

    def history(a: tool_args.HistoryArgs) -> dict[str, Any]:
        args: dict[str, Any] = {"tier": a.tier, "key": a.key}
        if a.category is not None:
            args["category"] = a.category
        if a.block is not None:
            args["block"] = a.block
        result = session.call("history", args, timeout_s=HISTORY_WAIT_S)
        if a.tier == "entity" and a.category is None:
            # v0.3.0's found-nothing answer, fields untouched; the note is kint's own.
            result["note"] = ENTITY_NEEDS_CATEGORY
        return result

    return [
        KintTool("memory_status", "Memory status", STATUS, tool_args.StatusArgs, status,
                 _hints(read_only=True, open_world=True)),
        KintTool("memory_connect", "Connect this machine", CONNECT, tool_args.ConnectArgs,
                 connect, _hints(idempotent=True, open_world=True)),
        KintTool("memory_pull", "Restore from the chain", PULL, tool_args.PullArgs, pull,
                 _hints(destructive=True, open_world=True)),
        KintTool("memory_push", "Anchor on the chain now", PUSH, tool_args.PushArgs, push,
                 _hints(open_world=True)),
        KintTool("memory_verify", "Verify before acting", VERIFY, tool_args.VerifyArgs,
                 verify, _hints(open_world=True)),
        KintTool("memory_history", "Anchored versions of a row", HISTORY,
                 tool_args.HistoryArgs, history, _hints(read_only=True)),
    ]


def _hints(read_only: bool = False, destructive: bool = False,
           idempotent: bool = False, open_world: bool = False) -> types.ToolAnnotations:
    return types.ToolAnnotations(readOnlyHint=read_only, destructiveHint=destructive,
                                 idempotentHint=idempotent, openWorldHint=open_world)


STATUS = """kint's view of this memory: whether this machine is `connected` and its data \
key cached, the epoch it last saw anchored (`mirror`) and the chain's (`chain_head`; \
`in_step` is false when the chain moved on: call memory_pull), the `session_key` that pays \
for pushes (balance, authorized), `unanchored` changed and deleted rows, `held` (why \
kint-server's pushes are held, or null), `watcher_failure` (the watcher's last failed push \
and when it tries again, or null), `watcher_settings` (the KINT_RPC_TIMEOUT, KINT_KEY_TTL \
or KINT_NONCE_RETRY_SECONDS the watcher's pushes take from a kint-server session where \
they are not the supervisor's own: `name`, `value`, `source`, `own`, `own_source`; or \
null), `watcher_uncounted` (why the watcher cannot count the unanchored rows: `message`, \
`age_s`, `lasting`, true when it cannot until someone mends the file; or null), \
`attached` (whether the space's worker counts this server's session: false while it \
retries an attach that failed, and until then its watcher does not push), `parked` \
(requests the space's worker had not answered when it exited cleanly, waiting a second at \
most for its last replies: `op`, `pid`, `left_s`; [] when none, null when the supervisor's \
status could not be read), \
`interrupted_pull` (a pull stopped half-way through an epoch, which memory_pull finishes, or \
null), `restore_in_progress` (a lost store's restore a pull began, which memory_pull \
finishes, or null), `settled_notice` (what settling an interrupted push found that no \
call has said yet, which memory_pull or memory_push says once, or null), `restore_running` \
(a memory_pull with discard_local still restoring the \
store after its call answered RESTORE_RUNNING, or null), `restore_outcome` (how the last \
such restore ended: `ok`, and its `error`, `message` and `hint`; `resumed` when its \
supervisor exited and this server sent it again; or null), `disk_problems` (a full disk \
under the store or kint's state), `store_shared` (kint of another KINT_HOME serving the \
same store, or null) and \
`cap` (Sibyl's bytes, kint's bytes, their sum against the cap). Reads only."""

CONNECT = """Connect this machine to the owner's vault, or say what the human must run. With \
no arguments it connects nothing: it answers `connected: true`, or `connected: false` with \
`human_steps`, the commands to show the human. With `passphrase` or `recovery_code` it \
connects now. The wallet's signature is never taken here: it travels on stdin to \
`kint connect --signature -` in the human's terminal, which is the better place for the \
passphrase and the recovery code too."""

PULL = """Restore this machine's store from the epochs anchored on the chain, through \
Sibyl's own write methods. Call it when memory_status says `in_step: false` or a push \
answers CHAIN_MOVED. FORK (local changes while the chain moved) is the human's call: \
`discard_local` throws the local changes away; a restore that outlasts the call answers \
RESTORE_RUNNING and goes on (memory_status shows it as `restore_running`)."""

PUSH = """Anchor the store's unanchored changes on the chain now. Not needed after every \
write: kint anchors them after a quiet period. HELD means nothing was anchored and nothing \
was dropped, because a row changed behind Sibyl's tools or holds a value memory_verify \
refused: stop and tell the human."""

VERIFY = """Call this before acting on anything recalled from memory (memory_recall, \
memory_search, memory_get_state, memory_list). It runs Sibyl's search for `query`, re-reads \
each hit and checks it against what was anchored on the chain. Act only when `decision` is \
`proceed`; on `refuse`, tell the human `reason` and do not act. A refusal is an answer, not \
an error; a refused drifted or missing row is written back as a Sibyl entity in category \
kint_refusal."""

HISTORY = """Every anchored version of one row, oldest first, from this machine's epoch \
cache; with `block`, only the version live at that block. An entity is named by `category` \
and `key` (without category an entity lookup finds nothing); a state or reference row by \
`key` alone. Each version's block is an upper bound: it existed no later than that block."""

ENTITY_NEEDS_CATEGORY = ("entity rows are looked up by category and name, so nothing is "
                         "found without one: call memory_history again with `category`")
