"""memory_push's refusal when this machine's session key cannot be loaded is v0.3.0's
`KeyError_` (08-tools.md, "memory_push": an exception class, `KeyError_` for no session key
on this machine), where the worker and the CLI say NO_SESSION_KEY. The agent is still told
that the next step is the human's. In process: the translation is kint.agent_server.results."""

from __future__ import annotations

from kint.agent_server.results import agent_error, pull_error, push_error
from kint.client import KintError
from kint.protocol.errors import DEFAULT_HINTS, ErrorCode, ProtocolError

MESSAGE = "no session key on this machine: run `kint session-key create`"


def _worker_refusal() -> KintError:
    return KintError(ErrorCode.NO_SESSION_KEY.value, MESSAGE,
                     DEFAULT_HINTS[ErrorCode.NO_SESSION_KEY])


def test_memory_push_without_a_session_key_answers_v030s_KeyError_():
    mapped = agent_error("memory_push", push_error(_worker_refusal(), lambda: True))
    assert (mapped.code, mapped.message) == ("KeyError_", MESSAGE)
    assert mapped.hint == ("stop and tell the human: "
                           + DEFAULT_HINTS[ErrorCode.NO_SESSION_KEY])


def test_memory_pull_keeps_its_own_answer():
    """v0.3.0's pull sends nothing, so its table has no session-key refusal to match."""
    assert pull_error(_worker_refusal(), lambda: True).code == "NO_SESSION_KEY"


def test_the_endpoints_the_human_must_change_stop_the_agent():
    """A pull through an endpoint without old history (its archive hint) is the agent's to
    try once more, then the human's; a chain that lost this machine's newest epoch (the
    reorganisation hint) is the human's at once. Their hints are specific, so without a
    mapping of their own the agent was handed the human's steps as its next call."""
    from kint.protocol.hints import ARCHIVE_HINT, REORG_HINT

    walked = agent_error("memory_pull", pull_error(
        KintError(ErrorCode.RPC_UNAVAILABLE.value, "cannot walk back to epoch 4", ARCHIVE_HINT),
        lambda: True))
    assert walked.hint.startswith("call memory_pull again in a minute; if it stops at the "
                                  "same epoch, stop and tell the human"), walked.hint
    # Built with where the space's endpoints are set (kint.chain.endpoint_source).
    reorg = REORG_HINT.format(endpoint="`kint connect --rpc-urls URL` again, which replaces "
                                       "the endpoints the last one kept for this space")
    lost = agent_error("memory_push", push_error(
        KintError(ErrorCode.STALE_RPC.value, "a reorganisation dropped epoch 2", reorg),
        lambda: True))
    assert lost.hint == f"stop and tell the human: {reorg}", lost.hint


def test_no_session_key_file_has_the_agent_make_one_and_hand_the_rest_to_the_human():
    """Without a key file there is no passphrase to check: the worker's refusal (kint.custody's
    SessionKeyMissing, as the worker turns it into a reply) gives the one step, and the agent
    is told which part of it is its own (14-agents.md: it may run `kint session-key create`)
    and which the owner's."""
    from pathlib import Path

    from kint.custody.errors import SessionKeyMissing
    from kint.protocol.hints import SESSION_KEY_MISSING_HINT
    from kint.tenant_worker.custody_errors import as_protocol_error

    err = as_protocol_error(SessionKeyMissing(Path("/home/u/.kint/session.key")))
    assert (err.code, err.hint) == (ErrorCode.NO_SESSION_KEY, SESSION_KEY_MISSING_HINT)
    assert "KINT_SESSION_PASSPHRASE" not in err.hint
    mapped = agent_error("memory_push", push_error(
        KintError(err.code.value, err.message, err.hint), lambda: True))
    assert mapped.code == "KeyError_"
    assert mapped.hint.startswith("this machine has no session key: run `kint session-key "
                                  "create`"), mapped.hint
    assert "stop and tell the human: the owner authorizes that address" in mapped.hint
    assert mapped.hint.endswith("call memory_push again"), mapped.hint


def test_a_hint_naming_a_step_of_the_humans_terminal_stops_the_agent():
    """14-agents.md, "Anti-patterns to avoid": an agent never runs `kint compact
    --over-skipped` (nor rekey's), and never discards the store without the human. The
    worker's hints for a terminal that name one (push's GAP hint, as the worker writes it
    for a rotated key; a header no kint reads; a store that cannot be read) reach the
    agent as the human's step, whole, never as its own next call. The translation is
    kint-server's, in process; the hints are the worker's own."""
    from types import SimpleNamespace

    from kint.tenant_worker.head_header import NO_KINT_HEADER_HINT
    from kint.tenant_worker.push_refusals import gap_hint

    unreadable = ("check the store file (kint only reads it); `kint pull --discard-local` "
                  "moves it aside and restores the anchored values")
    for code, hint in (("GAP", gap_hint(SimpleNamespace(rotated_gap=True, unread_gap=None))),
                       ("RPC_UNAVAILABLE", NO_KINT_HEADER_HINT),
                       ("INTERNAL", unreadable)):
        mapped = agent_error("memory_push", push_error(
            KintError(code, "refused", f"{hint}\nkint: a notice"), lambda: True))
        if code == "GAP":
            # The rotated key's connect is the human's, and the pull after it the
            # agent's own call (agents30): the human's terminal keeps compact's step.
            said = mapped.hint
            assert said.startswith("stop and tell the human: "), said
            assert said.endswith("\nkint: a notice"), said
            assert "after that, call memory_pull" in said, said
            assert "`kint compact --over-skipped`" in said, said
            assert "`kint pull`" not in said, said
            continue
        assert mapped.hint == f"stop and tell the human: {hint}\nkint: a notice", mapped.hint
    # One already in the agent's words is left as it is.
    said = "stop and ask the human: close it, then call memory_pull with discard_local again"
    assert agent_error("memory_pull", KintError("BUSY", "held", said)).hint == said


def _refused(call, *args) -> ProtocolError:
    try:
        call(*args)
    except ProtocolError as err:
        return err
    raise AssertionError(f"{call.__name__} did not refuse")


def test_a_hint_whose_first_step_is_a_pull_gives_the_agent_memory_pull():
    """14-agents.md makes memory_pull the agent's own step. A hint whose first step is a
    pull keeps that, though it names `--discard-local` as the way past a fork the pull may
    meet (that pull's FORK says the human's step when it comes): another machine's push met
    by the watcher (memory_status's watcher_failure) or by memory_push, or by a journal the
    chain passed (PULL_THEN); a gap at an epoch the last pull could not read (it may heal).
    The hints are the worker's own, from its real refusals."""
    from types import SimpleNamespace

    from kint.agent_server.results import status_result, watcher_failure_hint
    from kint.chain.anchor import Head
    from kint.tenant_worker.mirror_file import Mirror
    from kint.tenant_worker.overtaken import PULL_THEN
    from kint.tenant_worker.push_refusals import gap_hint, head_is_the_mirrors, refuse_gap

    moved = _refused(head_is_the_mirrors, Head("ab" * 32, 3, 30),
                     Mirror("cd" * 32, Head("ef" * 32, 2, 20)), False, {})
    assert moved.code == ErrorCode.CHAIN_MOVED and "--discard-local" in moved.hint
    failure = {"code": moved.code.value, "message": moved.message, "hint": moved.hint}
    assert watcher_failure_hint(failure) == "call memory_pull first"
    status = status_result({"owner": None, "watcher_failure": failure})
    assert status["watcher_failure"]["hint"] == "call memory_pull first"
    for hint in (moved.hint, PULL_THEN.format(again="kint push")):
        err = KintError("CHAIN_MOVED", "moved", hint)
        assert agent_error("memory_push", push_error(err, lambda: True)).hint \
            == "call memory_pull first"
        assert agent_error("memory_pull", err).hint == "call memory_pull again"
    unread = Mirror("cd" * 32, Head("ef" * 32, 2, 20), skipped=[3],
                    unread_gap="the endpoint did not serve it")
    gap = _refused(refuse_gap, unread, False)
    assert "--over-skipped" not in gap.hint, gap.hint
    said = agent_error("memory_push", push_error(
        KintError(gap.code.value, gap.message, gap.hint), lambda: True)).hint
    assert said.startswith("call memory_pull again"), said
    # Where the pull read the epoch and could not open it, the pull that applies it if it
    # opens now is the agent's; the snapshot over one that never opens stays the human's.
    never = gap_hint(SimpleNamespace(rotated_gap=False, unread_gap=None))
    assert "--over-skipped" in never
    said = agent_error("memory_push", KintError("GAP", "gap", never)).hint
    assert said.startswith("call memory_pull: it applies the epoch"), said
    agents, _, humans = said.partition("stop and tell the human: ")
    assert "kint" not in agents and "`kint compact --over-skipped` in their terminal" in \
        humans, said
    # A hint that starts with a pull but names a step of the human's (the refusal of
    # `--over-skipped` over an unread epoch) is no CHAIN_MOVED and no named hint: it stops
    # the agent too, its first words never a way past the check (review27j).
    over = _refused(refuse_gap, unread, True)
    assert over.hint.startswith("run `kint pull`") and "--over-skipped" in over.hint
    for hint in ("run `kint rekey` again: its snapshot anchors them", over.hint):
        assert agent_error("memory_push", KintError("GAP", "gap", hint)).hint \
            == f"stop and tell the human: {hint}"


def test_a_session_key_that_does_not_open_stops_the_agent_for_the_human():
    """The worker's refusal of a keystore the local passphrase in force does not open
    (kint.custody's SessionKeyLocked, as the worker turns it into a reply): the passphrase,
    or a new key the owner must authorize, is the human's. Its hint lived in worker code
    kint-server does not import, and reached the agent as the terminal's words."""
    from pathlib import Path

    from kint.custody.errors import SessionKeyLocked
    from kint.tenant_worker.custody_errors import as_protocol_error

    err = as_protocol_error(SessionKeyLocked(Path("/home/u/.kint/session.key"),
                                             "KINT_SESSION_PASSPHRASE"))
    assert err.code == ErrorCode.NO_SESSION_KEY
    for tool in ("memory_push", "memory_pull"):
        refusal = KintError(err.code.value, err.message, f"{err.hint}\nkint: a notice")
        mapped = agent_error(tool, push_error(refusal, lambda: True)
                             if tool == "memory_push" else pull_error(refusal, lambda: True))
        assert mapped.hint == f"stop and tell the human: {err.hint}\nkint: a notice", \
            mapped.hint


def _worker_hints() -> dict[str, str]:
    """Every hint kint.protocol.errors and kint.protocol.hints name for kint-server to tell
    apart, by name, and the ones of shared modules a worker or the supervisor sends that
    name a terminal's step (the open-file limit, a stranger's file, a closed door, a start
    that gave way to a supervisor stopped as it started, or one that served and ended)."""
    from kint.client_errors import SERVED_ENDED_HINT, STOPPED_STARTING_HINT
    from kint.front_closed import CLOSED_HINT
    from kint.open_files import ROOM_HINT, SYSTEM_FILES_HINT, WORKER_ROOM_HINT
    from kint.pid_file_lock import FOREIGN_FILE_HINT
    from kint.protocol import errors, hints

    named = {name: value for module in (errors, hints) for name, value in vars(module).items()
             if name.endswith("_HINT") and isinstance(value, str)}
    return {**named, "CLOSED_HINT": CLOSED_HINT, "ROOM_HINT": ROOM_HINT,
            "WORKER_ROOM_HINT": WORKER_ROOM_HINT, "SYSTEM_FILES_HINT": SYSTEM_FILES_HINT,
            "FOREIGN_FILE_HINT": FOREIGN_FILE_HINT, "STOPPED_STARTING_HINT": STOPPED_STARTING_HINT,
            "SERVED_ENDED_HINT": SERVED_ENDED_HINT}


def test_every_named_hint_reaches_an_agent_as_its_next_call_or_the_humans_step():
    """A hint written for a terminal names `kint ...` steps: handed to an agent as it is,
    the agent runs them (or cannot, and loops). Each named hint reaches it as a tool call of
    its own, or as the human's step after "stop and tell the human", under any code."""
    from kint.tenant_worker.unauthorized_journal import Unauthorized

    hints = _worker_hints()
    for name in ("SESSION_KEY_LOCKED_HINT", "NO_LOCAL_SECRET_HINT", "SESSION_KEY_CORRUPT_HINT",
                 "REKEY_JOURNAL_HINT", "UNAUTHORIZED_HINT", "NOT_CONNECTED_HINT",
                 "NO_DATA_KEY_HINT", "WRAPS_ROTATED_HINT", "SNAPSHOT_TOO_LARGE_HINT"):
        assert name in hints, name  # where kint-server can see it
    # Or as a command 14-agents.md gives the agent itself: the session key made, the
    # recovery code file written again ("What you can do for the user").
    own = ("`kint session-key create`", "`kint recovery-code`")
    opens = ("call ", "stop and ", "nothing was ", "this machine has no session key",
             "run `kint recovery-code`")
    for name, hint in hints.items():
        for code in ("BAD_REQUEST", "CORRUPT_STATE"):
            said = agent_error("memory_status", KintError(code, "refused", hint)).hint
            assert said != hint and said.startswith(opens), (name, said)
            asked, _, _ = said.partition("stop and tell the human")
            for step in own:
                asked = asked.replace(step, "")
            assert "`kint" not in asked, (name, said)
    # A journal its unauthorized key left: the owner's authorization comes first (the
    # human's), then a push, the agent's own memory_push, or a rekey, the human's
    # (the worker's own hints, Unauthorized.hint).
    from kint.protocol.hints import UNAUTHORIZED_HINT

    for kept in (None, "its transaction may still land"):
        journal = Unauthorized(2, "0x" + "ab" * 20, "0x" + "cd" * 20, False, kept=kept)
        hint = journal.hint("kint rekey")  # a kept one's hint names the push for both
        said = agent_error("memory_push", KintError("NOT_CONNECTED", "refused", hint)).hint
        assert kept or said == f"stop and tell the human: {hint}", said
        said = agent_error("memory_push", KintError("NOT_CONNECTED", "refused",
                                                    journal.hint())).hint
        assert said.startswith(f"stop and tell the human: {UNAUTHORIZED_HINT}; after that, "
                               f"call memory_push: it "), said


def test_a_journal_a_rotated_session_key_left_gives_the_agent_its_own_push():
    """A push meeting the journal of an interrupted push that a previous session key left
    (rotated since, no longer authorized) drops it, and refuses saying the next push
    anchors its rows with the current key. The agent's next push is memory_push: it was
    told to run `kint push` in a terminal, from memory_push and from the watcher's failed
    push in memory_status alike. A rekey's refusal of the same journal stays the human's."""
    from kint.agent_server.results import watcher_failure_hint
    from kint.tenant_worker.unauthorized_journal import Unauthorized

    journal = Unauthorized(2, "0x" + "ab" * 20, "0x" + "cd" * 20, True)
    err = journal.refusal()
    assert err.hint.startswith("run `kint push` again"), err.hint  # the CLI's words kept
    refusal = KintError(err.code.value, err.message, f"{err.hint}\nkint: a notice")
    mapped = agent_error("memory_push", push_error(refusal, lambda: True))
    said = ("call memory_push again: it anchors them with this machine's current session "
            "key")
    assert (mapped.code, mapped.hint) == ("PUSH_FAILED", f"{said}\nkint: a notice"), mapped
    assert watcher_failure_hint({"code": err.code.value, "message": err.message,
                                 "hint": err.hint}) == said
    rekey = journal.hint("kint rekey")
    assert agent_error("memory_push", KintError("NOT_CONNECTED", "refused", rekey)).hint \
        == f"stop and tell the human: {rekey}"


def test_the_vaults_maker_without_its_recovery_file_is_told_to_write_it_again_itself():
    """A push on the machine that created the vault refuses while its recovery code file is
    missing (v0.3.0's rule), here as an older worker's hint said it (RECOVERY_FILE_HINT,
    before the path was named: kint raises RECOVERY_FILE_AT now, the next test). Writing
    it again is a step 14-agents.md gives the agent ("Write the recovery-code file again on
    a connected machine: `kint recovery-code`. Tell the human where it is. Do not open
    it"); the agent was told to stop and hand it to the human."""
    from kint.agent_server.results import watcher_failure_hint
    from kint.protocol.hints import RECOVERY_FILE_HINT

    refusal = KintError("NOT_CONNECTED", "this machine created the vault but its recovery "
                        "code file is missing or empty", RECOVERY_FILE_HINT)
    mapped = agent_error("memory_push", push_error(refusal, lambda: True))
    assert mapped.hint.startswith("run `kint recovery-code` to write the file again (do not "
                                  "open it), then tell the human where it is"), mapped.hint
    assert mapped.hint.endswith("call memory_push again"), mapped.hint
    assert not mapped.hint.startswith("stop"), mapped.hint
    failed = {"code": "NOT_CONNECTED", "message": refusal.message, "hint": RECOVERY_FILE_HINT}
    assert watcher_failure_hint(failed).startswith("run `kint recovery-code`"), \
        watcher_failure_hint(failed)


def test_the_recovery_files_hints_name_the_spaces_own_file_to_the_agent():
    """The worker names the space's recovery file in the hint where it knows the space (push:
    the file's path; a recovery code refused: its name under KINT_HOME, on the machine where
    the vault started), and the agent's words carry it: they said the literal
    `KINT_HOME/RECOVERY-<space16>.txt`, a file the agent and the human had to work out."""
    from kint.protocol.hints import RECOVERY_FILE_AT, recovery_code_hint

    path = f"/home/u/.kint/RECOVERY-{'ab' * 8}.txt"
    refusal = KintError("NOT_CONNECTED", "this machine created the vault but its recovery "
                        "code file is missing or empty", RECOVERY_FILE_AT.format(file=path))
    mapped = agent_error("memory_push", push_error(refusal, lambda: True))
    assert mapped.hint == (f"run `kint recovery-code` to write the file again (do not open "
                           f"it), then tell the human where it is ({path}) so they copy it off "
                           f"this machine; after that, call memory_push again"), mapped.hint
    hint = recovery_code_hint("ab" * 8)
    assert f"the last line of KINT_HOME/RECOVERY-{'ab' * 8}.txt, written where" in hint, hint
    mapped = agent_error("memory_connect", KintError("BAD_REQUEST", "not a code", hint))
    assert mapped.hint == (f"nothing was done; ask the human for the recovery code again (the "
                           f"last line of KINT_HOME/RECOVERY-{'ab' * 8}.txt) and call "
                           f"memory_connect again with it"), mapped.hint


def test_a_busy_supervisor_short_of_open_files_is_no_push_running():
    """memory_push's BUSY takes v0.3.0's hint, `a push is already running`; the BUSY of a
    supervisor or worker short of open files (kint.open_files), or of a supervisor that
    closed its front door for want of them (kint.front_closed, as kint.client raises it),
    is no push, and its own hint reaches the agent in the agent's words: the closed door
    and the room the supervisor makes are tried again first, since both open by themselves
    as clients close or idle workers stop. The closed door was answered "a push is already
    running", which sent the agent to wait on a push that was not there."""
    import time

    from kint.front_closed import CLOSED_HINT, FrontClosed
    from kint.open_files import ROOM_HINT, SYSTEM_FILES_HINT, WORKER_ROOM_HINT

    door = FrontClosed(4242, 1000, 1024, 900, time.time(), time.time() - 5, False)
    assert (door.code, door.hint) == ("BUSY", CLOSED_HINT)
    again = "call memory_push again in a minute; if it fails again, stop and tell the human: "
    for hint, message, said in (
            (WORKER_ROOM_HINT, "out of open files", "stop and tell the human: "
             + WORKER_ROOM_HINT),
            (SYSTEM_FILES_HINT, "out of open files", "stop and tell the human: "
             + SYSTEM_FILES_HINT),
            (ROOM_HINT, "out of open files", again + ROOM_HINT),
            (CLOSED_HINT, door.message(), again + CLOSED_HINT)):
        mapped = agent_error("memory_push", push_error(
            KintError("BUSY", message, hint), lambda: True))
        assert (mapped.code, mapped.hint) == ("BUSY", said), mapped.hint
    ran = agent_error("memory_push", push_error(
        KintError("BUSY", "busy", DEFAULT_HINTS[ErrorCode.BUSY]), lambda: True))
    assert ran.hint == "a push is already running", ran.hint


def test_a_wait_behind_a_nonce_held_elsewhere_gives_the_agent_a_pull_after_the_bound():
    """A receipt wait that ran out behind a previous key's nonce waiting at another endpoint
    (former_key_wait.DeferredWait) has its own hint, a step of a terminal (`kint pull` once
    the bound has passed): the agent is given its own pull, and the human's part (passing
    the transaction on), where it was handed the terminal's words as they were."""
    from kint.protocol.hints import DEFERRED_FILL_HINT

    for tool in ("memory_push", "memory_pull"):
        err = KintError(ErrorCode.RPC_UNAVAILABLE.value, "waits behind a nonce",
                        DEFERRED_FILL_HINT)
        mapped = agent_error(tool, push_error(err, lambda: True) if tool == "memory_push"
                             else pull_error(err, lambda: True))
        assert mapped.hint.startswith("call memory_pull once the bound named above has "
                                      "passed"), mapped.hint
        assert "`kint pull`" not in mapped.hint


def test_a_push_the_agent_can_make_again_is_its_own_memory_push():
    """push_refusals' hints whose step is the push again (a send the endpoint refused, its
    nonce given back; a store locked by another writer; a store read that failed other than
    as damaged) reached the agent as "stop and tell the human" (the first names `kint
    connect --rpc-urls`, as where the endpoint is set) or as a terminal's "run the push
    again": memory_push again is the agent's own call, the human's only what stays so. In
    process: the worker's refusal as it builds it, then kint-server's translation."""
    from kint.chain.calls import SEND_REFUSED, ChainRefused
    from kint.protocol.hints import STORE_LOCKED_PUSH_HINT, STORE_READ_FAILED_HINT
    from kint.tenant_worker.push_refusals import refused

    sent = refused(ChainRefused(SEND_REFUSED, "the endpoint refused the transaction: "
                                              "replacement transaction underpriced"))
    mapped = agent_error("memory_push", push_error(
        KintError(sent.code.value, str(sent), f"{sent.hint}\nkint: a notice"), lambda: True))
    assert mapped.hint.startswith("call memory_push again in a minute: the endpoint refused "
                                  "the epoch before it could land"), mapped.hint
    assert "if it is refused the same way, stop and tell the human" in mapped.hint
    assert mapped.hint.endswith("\nkint: a notice"), mapped.hint
    for code, hint, said in (
            ("BUSY", STORE_LOCKED_PUSH_HINT, "call memory_push again in a minute: another "
                                             "process holds the store's lock, and the push "
                                             "runs once it lets go; if it is still locked "
                                             "then, stop and tell the human: a process holds "
                                             "the store open in a write (an agent's MCP "
                                             "server, Hermes, a `sqlite3` shell, a script), "
                                             "and closing it is theirs; after that, call "
                                             "memory_push again"),
            ("INTERNAL", STORE_READ_FAILED_HINT, "call memory_push again: that is not a "
                                                 "damaged store, so nothing is held; if it "
                                                 "fails the same way, stop and tell the "
                                                 "human: the supervisor log has the details")):
        mapped = agent_error("memory_push", push_error(KintError(code, "refused", hint),
                                                       lambda: True))
        assert mapped.hint == said, mapped.hint


def test_a_recovery_code_connect_while_the_chain_is_unread_names_the_endpoints_to_check():
    """The connect refused while the chain could not be read, its endpoints named where
    they are set on the way out of the worker (rpc_hint.readable_named): the agent's own
    connect again first, then the human's check of those endpoints, where it named
    KINT_RPC_URL whatever the space used (a template that matched the machine-wide words
    alone handed the named hint over whole and stopped the agent)."""
    from kint.protocol.hints import CONNECT_WHEN_READABLE_AT
    from kint.tenant_worker.rpc_hint import GIVEN_RPC_CHECK

    then = "the head epoch's header checks the code"
    for check in (GIVEN_RPC_CHECK, "check the endpoints set in /h/.kint/config.toml "
                  "[spaces.\"x\"] and that they answer"):
        hint = CONNECT_WHEN_READABLE_AT.format(check=check, then=then)
        mapped = agent_error("memory_connect", KintError("WRONG_KEY", "refused", hint))
        assert mapped.hint == (f"call memory_connect again in a minute with the same "
                               f"arguments: the chain could not be read, and once it can, "
                               f"{then}; if it fails again, stop and tell the human to "
                               f"{check}"), mapped.hint


def test_a_recovery_code_connect_kept_offline_hands_the_setting_over_then_connects_again():
    """KINT_OFFLINE=1 kept the chain from being read: unsetting it is the human's, where it
    is in force (kint-server's environment, `offline` in config.toml, the supervisor's
    environment: the agent was sent to kint-server's MCP configuration for all three),
    connecting again with the same code the agent's own (tests/test_recovery_code_offline.py
    has the endpoint that is down, and the file's case through a real kint-server)."""
    from kint.protocol.hints import (CONNECT_OFFLINE_DAEMON, CONNECT_OFFLINE_FILE,
                                     CONNECT_UNSET_OFFLINE)

    then = "the head epoch's header checks the code"
    again = f"; after that, call memory_connect again with the same arguments: {then}"
    for hint, said in (
            (CONNECT_UNSET_OFFLINE.format(then=then),
             "stop and tell the human: KINT_OFFLINE=1 in kint-server's environment (the "
             "harness's MCP configuration) keeps the chain from being read; unsetting it "
             "there and starting kint-server again is theirs"),
            (CONNECT_OFFLINE_FILE.format(where="/h/.kint/config.toml", then=then),
             "stop and tell the human: `offline` in /h/.kint/config.toml keeps the chain from "
             "being read; removing it (or setting it to false) is theirs, and applies without "
             "a restart"),
            (CONNECT_OFFLINE_DAEMON.format(then=then),
             "stop and tell the human: the supervisor was started with KINT_OFFLINE=1, which "
             "keeps the chain from being read; starting it again without it is theirs (the "
             "service's environment file, or `kint supervisor stop` and a command from an "
             "environment without it)")):
        mapped = agent_error("memory_connect", KintError("WRONG_KEY", "refused", hint))
        assert mapped.hint == said + again, mapped.hint


def test_the_offline_refusal_names_where_kint_offline_is_in_force(monkeypatch, tmp_path):
    """The worker's refusal itself (recovery_binding._when_readable) names the source of the
    value in force, read through kint.settings' real layers: the call's (a request's
    overlay), config.toml's `offline` (its path), the supervisor's environment. It said
    "unset KINT_OFFLINE" for all three."""
    from kint import settings
    from kint.protocol.hints import (CONNECT_OFFLINE_DAEMON, CONNECT_OFFLINE_FILE,
                                     CONNECT_UNSET_OFFLINE)
    from kint.settings import loader
    from kint.settings.schema import BY_NAME
    from kint.tenant_worker.recovery_binding import _when_readable

    then = "the header checks it"
    monkeypatch.setattr(loader._process, "home", tmp_path)
    monkeypatch.setattr(loader._process, "own_watch", None)
    monkeypatch.delenv("KINT_OFFLINE", raising=False)
    call = {"KINT_OFFLINE": settings.Value(BY_NAME["KINT_OFFLINE"], True, settings.THIS_CALL)}
    with settings.overlay(call):
        assert _when_readable(None, then) == CONNECT_UNSET_OFFLINE.format(then=then)
    (tmp_path / "config.toml").write_text("offline = true\n")
    assert _when_readable(None, then) == CONNECT_OFFLINE_FILE.format(
        where=tmp_path / "config.toml", then=then)
    (tmp_path / "config.toml").unlink()
    monkeypatch.setattr(loader._process, "daemon", True)
    monkeypatch.setenv("KINT_OFFLINE", "1")
    assert _when_readable(None, then) == CONNECT_OFFLINE_DAEMON.format(then=then)
