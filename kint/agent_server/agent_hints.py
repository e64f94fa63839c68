"""kint's hints in an agent's words: what kint-server says where the worker, the supervisor
or the client wrote for a person at a terminal.

A hint that names `kint pull` or `kint connect` sends an agent to a command it has no tool
for, or to a step v0.3.0 keeps for the human (14-agents.md, "What must go back to the
human", "Anti-patterns to avoid"). Here each is turned into the agent's next tool call, or
into "stop and tell the human: " and the human's step. kint-server applies it to every
tool's refusal (kint.agent_server.surface), after v0.3.0's codes and hints
(kint.agent_server.results: push_error, pull_error). The translation is one table of
rules (_RULES), asked in order: the hints named word for word, those built from a
template (kint.agent_server.agent_hint_templates), then the rules known by a code, a start
or a tail (each rule's matcher: kint.agent_server.hint_matchers), and last the human's
steps (their words and commands: kint.agent_server.human_steps). A result's lines (every
tool's notices: a pull's warnings, a push's settled notice, the notices of settings not
used) go through kint.agent_server.agent_notices' agent_notice.
"""

from __future__ import annotations

from kint.agent_server.agent_hint_templates import AGENT_TEMPLATES
from kint.agent_server.hint_matchers import (Matcher, built, endpoint_check, humans, named,
                                             pull_first, unsettled)
from kint.client_errors import (EXITED_HINT, NO_ANSWER_HINT, SERVED_ENDED_HINT,
                                STOPPED_STARTING_HINT, UNREACHED_HINT, KintError)
from kint.front_closed import CLOSED_HINT, STOPPING_HINT
from kint.open_files import ROOM_HINT, SYSTEM_FILES_HINT, WORKER_ROOM_HINT
from kint.pid_file_lock import FOREIGN_FILE_HINT
from kint.protocol.errors import (DEFAULT_HINTS, DEVCHAIN_RPC_HINT, ErrorCode, hint_with_notices,
                                  split_notices)
from kint.protocol.hints import (ASIDE_FIRST, ASIDE_THEN, CHECKSUM_HINT, CORRUPT_FILE_HINT,
                                 CORRUPT_JOURNAL_HINT, DEFERRED_FILL_HINT, DISK_FULL_PULL_TAIL,
                                 DRIFT_HOLD_HINT, GAP_NEVER_OPENS_HINT, NOT_A_REKEY_HINT,
                                 NOT_CONNECTED_HINT, NO_DATA_KEY_HINT, NO_LOCAL_SECRET_HINT,
                                 RECOVERY_FILE_HINT, REKEY_JOURNAL_HINT,
                                 REKEY_JOURNAL_NEWER_HINT, REREAD_HINT, ROTATED_DISCARD_HINT,
                                 ROTATED_GAP_HINT, ROTATED_KEY_PUSH_HINT,
                                 SESSION_KEY_CORRUPT_HINT, SESSION_KEY_LOCKED_HINT,
                                 SESSION_KEY_MISSING_HINT, SNAPSHOT_TOO_LARGE_HINT,
                                 STORE_LOCKED_HINT, STORE_LOCKED_PULL_HINT, STORE_LOCKED_PUSH_HINT,
                                 STORE_LOST_HOLD_HINT, STORE_READ_FAILED_HINT,
                                 STORE_UNCOUNTED_DISCARD_HINT, STORE_UNREADABLE_HINT,
                                 UNAUTHORIZED_HINT, UNAUTHORIZED_KEPT_HINT, UNAUTHORIZED_PUSH_HINT,
                                 WRAPS_ROTATED_HINT)
from kint.sibyl_client import LOCKED_HINT, UNREADABLE_HINT
from kint.seconds_text import seconds_text
from kint.spaces import STORE_HINT
from kint.supervisor.settings import STOP_BOUND_S

# The hints v0.3.0 gives for a space not connected and for a push behind the chain: each
# names the agent's next tool call.
CALL_CONNECT = "call memory_connect"
CALL_PULL_FIRST = "call memory_pull first"


# The human's connect that carries a data key rotated on another machine here, then the
# agent's call (its end): said by a pull's refusal (ROTATED_GAP_HINT) and by a pull's
# result that stopped at such an epoch (results.ROTATED_GAP_FOR_AGENT), one sentence.
ROTATED_CONNECT = ("`kint connect` again in their terminal with a key that opens the vault now "
                   "(the owner's signature, the vault passphrase or the new recovery code) "
                   "carries it here; after that, call ")


# The agent's one retry of a tool that met another process's lock on the store.
_LOCKED_AGAIN = "call {tool} again in a minute: another process holds the store's lock"
# A store's lock that outlasts the agent's one retry: a live process holds a write open (as
# pull_error says of a store another process holds), and only the human can close it.
_STILL_LOCKED = ("; if it is still locked then, stop and tell the human: a process holds the "
                 "store open in a write (an agent's MCP server, Hermes, a `sqlite3` shell, a "
                 "script), and closing it is theirs; after that, call {tool} again")


# The agent's pull, then the human asked, for rows a discarding pull moved aside (ASIDE_FIRST).
_ASIDE_ASK = ("call {pull_first}: it finishes a restore the discarding pull left; then ask "
              "the human what of the store that pull moved aside (named above) is still "
              "wanted")


# The generic hints of the worker's and the supervisor's codes speak to a person at a
# terminal ("run `kint pull` first", "see `kint supervisor status`"); an agent needs its next
# tool call, or to be told that the next step is the human's. Keyed by the generic hint
# itself, so a code another mapping renamed (GAP as PUSH_FAILED) is still recognised, and a
# specific hint (a file, a setting, a process named) is left as the worker gave it.
_AGENT_HINTS = {
    DEFAULT_HINTS[ErrorCode.BAD_REQUEST]: "nothing was done; call {tool} again with the value "
                                          "named above corrected",
    DEFAULT_HINTS[ErrorCode.TIMEOUT]: "the space's worker goes on with it: call memory_status "
                                      "in a minute to see whether it is done (a memory_push or "
                                      "memory_pull meanwhile may answer BUSY)",
    DEFAULT_HINTS[ErrorCode.WORKER_DOWN]: "the space's worker is being restarted: call {tool} "
                                          "again in a few seconds",
    DEFAULT_HINTS[ErrorCode.CHAIN_MOVED]: CALL_PULL_FIRST,
    DEFAULT_HINTS[ErrorCode.GAP]: "call memory_pull again",
    # One at an epoch the pull read and could not open: the pull that applies it if it
    # opens now is the agent's own (14-agents.md: memory_pull); the snapshot over one that
    # never opens is the human's, from their terminal ("Anti-patterns to avoid").
    GAP_NEVER_OPENS_HINT: "call memory_pull: it applies the epoch if it opens now; if the pull "
                          "stops at the same epoch again, stop and tell the human: for an "
                          "epoch that will never open, `kint compact --over-skipped` in their "
                          "terminal anchors this machine's store over it",
    DEFAULT_HINTS[ErrorCode.NOT_CONNECTED]: CALL_CONNECT,
    NOT_CONNECTED_HINT: CALL_CONNECT,
    # 14-agents.md: data_key_cached false sends the agent to memory_connect, no arguments.
    NO_DATA_KEY_HINT: CALL_CONNECT,
    # A rotation elsewhere: memory_connect here says connected, and the key that carries the
    # new data key over is the owner's.
    WRAPS_ROTATED_HINT: "stop and tell the human: the data key was rotated on another "
                        "machine; `kint connect` in their terminal, with the owner's "
                        "signature, the vault passphrase or the new recovery code, carries it "
                        "here; after that, call {tool} again",
    # An epoch sealed under a data key another machine's rekey made: the connect that
    # carries the key here is the human's (the owner's key), the pull after it the agent's.
    ROTATED_GAP_HINT: f"stop and tell the human: if the data key was rotated on another "
                      f"machine, {ROTATED_CONNECT}{{pull}}. If that connect says the head "
                      f"epoch's wrap under the key does not open, no rekey made it: "
                      f"{NOT_A_REKEY_HINT}",
    # The same met by a pull with discard_local before it moved anything: that pull again.
    ROTATED_DISCARD_HINT: "stop and tell the human: `kint connect` again in their terminal, "
                          "with a key that opens the vault in the head epoch (the owner's "
                          "signature, the vault passphrase or its recovery code), takes that "
                          "vault's data key (after a `kint rekey` on another machine, or a "
                          "vault started on two machines before the first push); after that, "
                          "call memory_pull with discard_local again",
    # Only memory_push(snapshot=true) asks for one snapshot: a plain memory_push splits.
    SNAPSHOT_TOO_LARGE_HINT: "nothing was anchored; call memory_push without snapshot: it "
                             "splits the changes across epochs",
    # The authorization and the ETH are the owner's (14-agents.md, "What must go back to the
    # human").
    UNAUTHORIZED_HINT: f"stop and tell the human: {UNAUTHORIZED_HINT}; after that, call "
                       f"{{tool}} again",
    # A killed push's journal whose key may not write: the same, and the push after it,
    # which anchors the rows (or sends the kept transaction again), is the agent's own. Not
    # to authorize that key again is the human's choice, and so is the new key's rotation.
    UNAUTHORIZED_PUSH_HINT: f"stop and tell the human: {UNAUTHORIZED_HINT}; after that, "
                            f"call memory_push: it anchors them",
    UNAUTHORIZED_KEPT_HINT: f"stop and tell the human: {UNAUTHORIZED_HINT}; after that, call "
                            f"memory_push: it sends the kept push again. Should the owner "
                            f"not authorize this key again, `kint session-key rotate` in "
                            f"their terminal makes a new one for the owner to authorize, and "
                            f"memory_push then anchors the rows with it",
    # The same journals' rows in a store a discarding pull moved aside, the pull killed
    # before it said so (ASIDE_FIRST): the pull is the agent's own, what is written back
    # the human's to say, and the push after it the agent's again.
    ASIDE_THEN.format(again="kint push"): f"{_ASIDE_ASK}; once that is written back, call "
                                          f"memory_push",
    f"{ASIDE_FIRST}; {UNAUTHORIZED_PUSH_HINT}": f"{_ASIDE_ASK}, and tell them: "
                                                f"{UNAUTHORIZED_HINT}; once both are done, "
                                                f"call memory_push: it anchors it",
    f"{ASIDE_FIRST}; {ROTATED_KEY_PUSH_HINT}": f"{_ASIDE_ASK}; once that is written back, "
                                               f"call memory_push: it anchors it with this "
                                               f"machine's current session key",
    # The vault's maker without its recovery code file: writing it again is the agent's own
    # step (14-agents.md: run it, tell the human where it is, do not open it); copying it off
    # the machine is the human's. Where the hint names the file, agent_hint_templates' words
    # name it too; this is an older worker's hint (before the path was named), which names
    # none: the path is the one `kint recovery-code` prints.
    RECOVERY_FILE_HINT: "run `kint recovery-code` to write the file again (do not open it), "
                        "then tell the human where it is (the path it prints) so they copy "
                        "it off this machine; after that, call {tool} again",
    # A journal a rotated session key left is dropped: the agent's own push anchors its rows.
    ROTATED_KEY_PUSH_HINT: "call memory_push again: it anchors them with this machine's "
                           "current session key",
    # A state file kint will not replace by itself: moving it aside is the human's, the pull
    # after it the agent's own (a key file's connect is the human's: it takes the secret).
    CORRUPT_FILE_HINT: "stop and tell the human: kint never replaces a corrupt file by "
                       "itself, and moving the file named above aside is theirs; after that, "
                       "call memory_pull (for a key file, `kint connect` in their terminal "
                       "instead)",
    CORRUPT_JOURNAL_HINT: "stop and tell the human: moving the file named above aside is "
                          "theirs; after that, call memory_pull",
    # An epoch that landed with an event that does not match what was sent: a pull re-reads.
    REREAD_HINT: "call memory_pull to re-read it",
    # Room the supervisor makes itself by stopping idle workers, and a door it opens again as
    # soon as some clients close; else its limit, or the processes to end, the human's.
    **{hint: f"call {{tool}} again in a minute; if it fails again, stop and tell the human: "
             f"{hint}" for hint in (ROOM_HINT, CLOSED_HINT)},
    DEFAULT_HINTS[ErrorCode.FORK]: "stop and ask the human: memory_pull with discard_local "
                                   "moves the local changes aside and restores the anchored "
                                   "state",
    DEFAULT_HINTS[ErrorCode.DISK_FULL]: "stop and tell the human: once space is freed, call "
                                        "{tool} again",
    # A pull's: what it applied stays, and the agent's next pull goes on from there.
    DEFAULT_HINTS[ErrorCode.DISK_FULL] + DISK_FULL_PULL_TAIL: (
        "stop and tell the human: once space is freed, call {pull}: it picks up where this "
        "one stopped (nothing to discard)"),
    EXITED_HINT: "call {tool} again: kint-server starts a new supervisor (memory_status says "
                 "whether the call that failed had run)",
    # A start that gave way to a supervisor a signal stopped as it started: the human's
    # stop, maybe (a service manager's), so the agent's next call starts one, said as such.
    STOPPED_STARTING_HINT: "call {tool} again: the supervisor kint-server met was stopped as "
                           "it started (a service manager's stop, a Ctrl-C), and the next "
                           "call starts one; if it is stopped again, stop and tell the human",
    # A start that gave way to a supervisor that served and ended since: maybe the human's
    # stop, so the agent's next call starts one, said as such.
    SERVED_ENDED_HINT: "call {tool} again: the supervisor kint-server met served and ended "
                       "meanwhile (the human may have stopped it), and the next call starts "
                       "one; if it ends again, stop and tell the human",
    # A supervisor whose pid file went (stepping down) before the call surely reached it:
    # the call again goes to the one that holds the home now.
    UNREACHED_HINT: "call {tool} again: kint-server reaches the supervisor that holds the "
                    "home now, or starts one (memory_status says whether the call that "
                    "failed had run)",
    # A supervisor that stops ends by itself, within STOP_BOUND_S while it runs (its workers
    # first; a pause of its own lengthens it): nothing for the human, and a minute is past
    # it. Derived, so a change of the graces changes the words.
    STOPPING_HINT: f"the supervisor is stopping ({seconds_text(STOP_BOUND_S)} at most while "
                   "it runs, its workers first), and this call was not sent: call {tool} "
                   "again in a minute; the next call starts a new supervisor",
    NO_ANSWER_HINT: "call {tool} again in a minute; if it fails again, tell the human (`kint "
                    "supervisor status` shows what the supervisor is doing)",
    LOCKED_HINT: "another process is writing the store: call {tool} again in a minute"
                 + _STILL_LOCKED,
    # A push's own retries (kint.tenant_worker.push_refusals): a store another writer holds
    # locked, a read of it that failed other than as damaged, a transaction the endpoint
    # answered and refused (nothing dropped, its nonce given back). Each is the agent's
    # memory_push again; only what stays so is the human's.
    STORE_LOCKED_PUSH_HINT: _LOCKED_AGAIN + ", and the push runs once it lets go"
                            + _STILL_LOCKED,
    # The same lock met by a pull, or by any other tool's op (state_health.guarded).
    STORE_LOCKED_PULL_HINT: _LOCKED_AGAIN + ", and the pull runs once it lets go"
                            + _STILL_LOCKED,
    STORE_LOCKED_HINT: _LOCKED_AGAIN + _STILL_LOCKED,
    STORE_READ_FAILED_HINT: "call {tool} again: that is not a damaged store, so nothing is "
                            "held; if it fails the same way, stop and tell the human: the "
                            "supervisor log has the details",
    UNREADABLE_HINT: "stop and tell the human: `kint doctor` says what is wrong with the store",
    # A store read that failed other than as a lock (state_health.store_refusal): the file
    # is the human's to look at, as Sibyl's own unreadable store is.
    STORE_UNREADABLE_HINT: "stop and tell the human: the store file cannot be read as kint "
                           "reads it (kint only reads it); `kint doctor` says what is wrong "
                           "with the store",
    # A discard that could not count the store's tenants (discard.refuse_if_shared): the
    # file is the human's to look at, or to move aside by hand.
    STORE_UNCOUNTED_DISCARD_HINT: "stop and tell the human: the store was not moved, as kint "
                                  "cannot count whose rows it holds, and the error says "
                                  "why; with no table of Sibyl's tenant_id, or a schema "
                                  "kint does not read, it is another tool's file or a "
                                  "newer Sibyl's store: the human checks SIBYL_MEMORY_DB "
                                  "in kint-server's MCP configuration, or moves the store "
                                  "aside, then call {pull}; any other SQLite error is the "
                                  "human's to put right before you call {pull} again",
    STORE_HINT: "stop and tell the human: SIBYL_MEMORY_DB in kint-server's MCP configuration "
                "must name Sibyl's store file (`kint doctor` checks it)",
    # A server-side push held (kint.tenant_worker.drift): rows changed with no session's note
    # are the human's to judge (14-agents.md: on HELD, stop and ask the human); so is a store
    # that lost every anchored row: only the human knows whether the deletion was meant, and
    # a pull made first would undo it.
    DRIFT_HOLD_HINT: f"stop and tell the human: {DRIFT_HOLD_HINT}",
    STORE_LOST_HOLD_HINT: "stop and tell the human: the store lost every anchored row "
                          "(nothing was anchored and nothing was dropped); {pull} (or `kint "
                          "pull`) restores them, or `kint push` in their terminal anchors "
                          "their deletion, if it is meant",
    # The local passphrase, a key file kint will not rewrite, a rekey journal a newer kint
    # wrote, the open-file limit the supervisor started with (its workers inherit it), the
    # system's table of open files, a stranger's file in KINT_HOME: the human's, at a
    # terminal.
    **{hint: f"stop and tell the human: {hint}" for hint in (
        SESSION_KEY_LOCKED_HINT, NO_LOCAL_SECRET_HINT, SESSION_KEY_CORRUPT_HINT,
        REKEY_JOURNAL_HINT, REKEY_JOURNAL_NEWER_HINT, WORKER_ROOM_HINT, SYSTEM_FILES_HINT,
        FOREIGN_FILE_HINT)},
    # The owner's address came from the human (as a recovery code did: agent_hint_templates):
    # a mixed case that is not its checksum is a mistyped one.
    CHECKSUM_HINT: "nothing was done; ask the human for the owner's address again, as their "
                   "wallet shows it, and call {tool} again with it",
    # A push waiting behind a previous key's nonce held at another endpoint: the wait ends
    # by itself at the bound, and the transaction is the human's to pass on sooner.
    DEFERRED_FILL_HINT: "call memory_pull once the bound named above has passed: the nonce "
                        "is then filled, or what to do is named; sooner only if the human "
                        "sends that transaction through the endpoint this space sends "
                        "through",
    # A devchain that stopped does not come back by itself: the human starts it.
    DEVCHAIN_RPC_HINT: f"stop and tell the human: {DEVCHAIN_RPC_HINT}",
    # 14-agents.md, "What you can do for the user": the agent may make the key; authorizing
    # and funding it are the owner's.
    SESSION_KEY_MISSING_HINT: "this machine has no session key: run `kint session-key create` "
                              "(it prints the new address), then stop and tell the human: the "
                              "owner authorizes that address (`kint authorize`) and funds it "
                              "with a little ETH; after that, call {tool} again",
}



# Codes whose next step only the human can take (a setting, a key, a file, the endpoint):
# the agent is told to stop, with what the human is to do.
_AGENT_HINTS.update({DEFAULT_HINTS[code]: f"stop and tell the human: {DEFAULT_HINTS[code]}"
                     for code in (ErrorCode.STALE_RPC, ErrorCode.NO_SESSION_KEY,
                                  ErrorCode.CONFIG_INVALID, ErrorCode.CORRUPT_STATE,
                                  ErrorCode.QUARANTINED, ErrorCode.SPACE_CONFLICT,
                                  ErrorCode.UNSUPPORTED_VERSION, ErrorCode.SIBYL_ERROR,
                                  ErrorCode.INTERNAL)})


# The rules, in the order they are asked, each (matcher, the agent's words): the first
# whose matcher answers gives the words, filled with its values, `{tool}` (the tool
# called), `{pull}` (`memory_pull`, or `memory_pull again` from memory_pull) and
# `{pull_first}` (`memory_pull first`, v0.3.0's CHAIN_MOVED hint, or `memory_pull again`).
# A hint no rule answers is left as it is. The named hints and the templates come first:
# a hint whose first step is a pull is mapped before any word it holds could make it a
# stop (the last rule).
_RULES: tuple[tuple[Matcher, str], ...] = (
    *((named(hint), words) for hint, words in _AGENT_HINTS.items()),
    *((built(template), words) for template, words in AGENT_TEMPLATES),
    (pull_first, "call {pull_first}"),
    # memory_pull settles it first, whichever tool met it; the endpoint, if it stays so,
    # is the human's.
    (unsettled, "call memory_pull in a minute: it settles the interrupted push first; if it "
                 "fails again, stop and tell the human to {check}"),
    # A passing fault heals; the setting is the human's.
    (endpoint_check, "call {tool} again in a minute; if it fails again, stop and tell the "
                      "human to {said}"),
    (humans, "stop and tell the human: {said}"),
)


def agent_error(tool: str, err: KintError) -> KintError:
    """`err` with its generic hint in an agent's words (its next call); any other as it is.
    The lines about settings of the call that ride under a hint stay under it."""
    said, notices = split_notices(err.hint)
    hint = _agent_words(tool, err.code, said) if said else None
    if hint is None:
        return err
    return KintError(err.code, err.message, hint_with_notices(hint, notices))


def _agent_words(tool: str, code: str, said: str) -> str | None:
    """The agent's words for hint `said` of a refusal with `code` to `tool`, by the first of
    _RULES that answers for it, or None to leave it as it is. The values go in as they
    are: a brace in one is never read as a field of the words."""
    again = tool == "memory_pull"
    pull = "memory_pull again" if again else "memory_pull"
    first = "memory_pull again" if again else CALL_PULL_FIRST.removeprefix("call ")
    for matches, words in _RULES:
        values = matches(code, said)
        if values is not None:
            return words.format(**values, tool=tool, pull=pull, pull_first=first)
    return None
