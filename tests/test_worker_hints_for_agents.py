"""Every hint a worker or the supervisor sends reaches an agent as its own next step or as the
human's: never as a command of a terminal the agent is to run itself.

The worker writes its hints for a person at a terminal (`run kint pull`, `move the file
aside`); kint-server hands them to an agent through kint.agent_server.agent_hints. A hint
that no rule there knew reached the agent as it was, and the agent was sent to run `kint
pull` (or to move a state file aside, the human's). The guard below reads every hint a
refusal under kint/ is written with (their source, by AST; kint/commands, the CLI's own,
excluded) and runs each through memory_push's, memory_pull's and every other tool's
translation. A hint built at run time (an address, a chain, the endpoint in force) is
built here with sample values by the code that builds it, and one a refusal passes on
from another is named with where it comes from: a refusal of either kind the guard does
not know fails it. In process: the translation is plain functions, and the hints are
read where they are written.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Callable, Iterator

import click
import pytest

from kint.agent_server.agent_hints import agent_error
from kint.agent_server.agent_notices import agent_notice
from kint.agent_server.human_steps import AGENT_COMMANDS, KINT_COMMANDS
from kint.agent_server.results import pull_error, push_error
from kint.client import KintError
from kint.protocol.errors import DEFAULT_HINTS, ErrorCode, ProtocolError

KINT = Path(__file__).resolve().parent.parent / "kint"
# 14-agents.md, "What you can do for the user": the agent diagnoses, makes the session key,
# writes the recovery code file again, prints the payloads the human signs and sets up the
# harnesses; every other command of the CLI is the human's, or has a memory_ tool of its own.
AGENT_RUNS = ("kint session-key create", "kint session-key show", "kint doctor",
              "kint status", "kint supervisor status", "kint config show",
              "kint recovery-code", "kint canonical-payload", "kint authorize payload",
              "kint setup")
# What the agent is told before it is handed the human's part.
HANDED_OVER = re.compile(r"(stop and )?(tell|ask) the human")


def _cli_commands() -> list[str]:
    from kint.cli import main

    return main.list_commands(click.Context(main))


def _text(module: ModuleType, node: ast.expr) -> str | None:
    """The hint `node` says, as far as the source says it: a literal, a module's string
    constant, an f-string (its values as `X` where they are not constants) or a sum of
    those; None for one made at run time (another error's hint, a method's)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        value = getattr(module, node.id, None)
        return value if isinstance(value, str) else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):  # spaces.X
        value = getattr(getattr(module, node.value.id, None), node.attr, None)
        return value if isinstance(value, str) else None
    if isinstance(node, ast.JoinedStr):
        parts = [_text(module, part.value) if isinstance(part, ast.FormattedValue)
                 else _text(module, part) for part in node.values]
        return "".join("X" if part is None else part for part in parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(module, node.left), _text(module, node.right)
        return None if left is None or right is None else left + right
    return None


# Folders whose refusals never reach kint-server: the CLI's own (kint-server imports none
# of kint.commands; tests/test_import_graph.py).
NOT_SCANNED = ("commands",)

# Refusals that pass on a hint another refusal was made with (scanned where that one is
# made), or words that are already an agent's: (file, the hint's source) -> where from.
PASSED_ON = {
    ("agent_server/agent_hints.py", "hint_with_notices(hint, notices)"):
        "the translation itself",
    ("agent_server/results.py", "hint_with_notices(hint, notices)"): "the translation itself",
    ("agent_server/results.py", "mapped.hint"): "the translation itself",
    ("agent_server/results.py", "hint_with_notices(said, notices)"): "the translation itself",
    ("agent_server/results.py", "failure['hint']"): "the watcher's push refusal, a worker's",
    ("client.py", "err.hint"): "the reply's",
    ("client.py", "reply.hint"): "the reply's",
    ("client_request.py", "err.hint"): "the request's encoding (a ProtocolError's)",
    ("tenant_worker/connect.py", "err.hint"): "a connect step's own refusal",
    ("tenant_worker/discard.py", "err.hint"): "the discard's own refusal",
    ("tenant_worker/epoch_send.py", "hint"): "DeferredWait's: DEFERRED_FILL_HINT",
    ("tenant_worker/handlers.py", "hint if isinstance(hint, str) and hint else None"):
        "Sibyl's own next step: SIBYL_ERROR, always the human's",
    ("tenant_worker/rekey.py", "err.hint"): "the rekey's own refusal",
    ("tenant_worker/connect_owner.py", "elsewhere.hint"): "enrolled_chain.other_chain's",
    ("tenant_worker/discard.py", "'; '.join(hints) + ', then try again'"):
        "the store's holders: pull_error's own BUSY rule (test_mcp_restore)",
}


def _chains() -> list[SimpleNamespace]:
    """A chain's settings as the hints built from them read them: set by the devchain's
    record, a space's own endpoints, a config file, the environment, the supervisor's
    environment, the macOS Keychain (named where they were set: endpoint_source's
    rpc_setting); the machine's own KINT_RPC_URL (which chooses the chain) unset, set in
    the file, in the environment, or in the supervisor's environment."""
    from kint import settings
    from kint.chain.config import DEVCHAIN_SOURCE, SPACE_URLS_SOURCE
    from kint.chain.keychain_rpc import SERVICE, SOURCE as KEYCHAIN

    return [SimpleNamespace(rpc_source=source, rpc_where=where, chain_id=8453, devchain=dev,
                            rpc_urls=["http://127.0.0.1:1/", "http://127.0.0.1:2/"],
                            anchor="0x" + "12" * 20, contract_source=source,
                            contract_where=where, machine_rpc_source=machine,
                            machine_rpc_where=where)
            for source, where, dev, machine in (
                (DEVCHAIN_SOURCE, None, True, settings.DEFAULT),
                (SPACE_URLS_SOURCE, None, False, settings.DAEMON_ENV),
                (settings.FILE, "/home/u/.kint/config.toml", False, settings.FILE),
                ("env", None, False, "env"),
                (settings.DAEMON_ENV, None, False, settings.DAEMON_ENV),
                (KEYCHAIN, SERVICE, False, settings.DEFAULT))]


def _built_at_run_time() -> dict[tuple[str, str], Callable[[], Iterator[tuple[str, str]]]]:
    """(file, the hint's source) -> the (code, hint) pairs it is built as, by the code that
    builds it, with sample values."""
    from kint.agent_server.tools import DEV_TOOL_REFUSALS
    from kint.chain.calls import INSUFFICIENT_FUNDS, ChainRefused
    from kint.chain.chain_id import (ENDPOINT_NAMES, no_second_hint, on_other_chain,
                                     silent_second_hint)
    from kint.chain.contract_source import contract_check
    from kint.tenant_worker.former_key import FormerKey
    from kint.custody.errors import WrongSigner
    from kint.protocol.errors import UNSETTLED_HINT, ProtocolError as Refused
    from kint.protocol.hints import RECOVERY_FILE_AT, recovery_code_hint
    from kint.tenant_worker import enrolled_chain, recovery_binding, rpc_hint, state_health
    from kint.tenant_worker.connect_key import not_a_rekey
    from kint.tenant_worker.custody_errors import wrong_signer_hint
    from kint.tenant_worker.overtaken import Overtaken
    from kint.tenant_worker.push_refusals import gap_hint
    from kint.tenant_worker.session_sender import fund_hint

    def gaps() -> Iterator[tuple[str, str]]:
        for rotated, unread in ((True, None), (False, "not served"), (False, None)):
            yield "GAP", gap_hint(SimpleNamespace(rotated_gap=rotated, unread_gap=unread))

    def unauthorized() -> Iterator[tuple[str, str]]:
        for found in _unauthorized():
            for again in ("kint push", "kint rekey"):
                refused = found.refusal(again)
                yield refused.code.value, refused.hint

    def endpoints() -> Iterator[tuple[str, str]]:
        for chain in _chains():
            yield "RPC_UNAVAILABLE", rpc_hint.endpoint_hint(chain)
            stale = Refused("STALE_RPC", "an old head")  # the code's own hint, then named
            rpc_hint.name_the_endpoint(SimpleNamespace(chain=lambda c=chain: c), stale)
            yield stale.code.value, stale.hint
            for before in ("", f"fund {ADDRESS} if the refusal says so; "):
                err = Refused("RPC_UNAVAILABLE", "unsettled", before + UNSETTLED_HINT)
                rpc_hint.name_the_endpoint(SimpleNamespace(chain=lambda c=chain: c), err)
                yield err.code.value, err.hint
            # The hints raised in machine-wide words that name another endpoint, or the
            # endpoints to check, where the space's are set (rpc_hint.named_hint).
            for code, hint in _NAMED_ON_THE_WAY_OUT:
                err = Refused(code, "refused", hint)
                rpc_hint.name_the_endpoint(SimpleNamespace(chain=lambda c=chain: c), err)
                # The machine's own settings in force: the words may stay as raised.
                assert err.hint != hint or chain.rpc_source == "env", (chain.rpc_source, hint)
                yield err.code.value, err.hint
        # A connect's failure through the endpoints given to its --rpc-urls names those
        # (rpc_hint.name_the_given), whatever the settings' source.
        for code, hint in [("RPC_UNAVAILABLE", rpc_hint.GENERIC), *_NAMED_ON_THE_WAY_OUT]:
            err = Refused(code, "refused", hint)
            rpc_hint.name_the_given(err)
            yield err.code.value, err.hint

    def other_chains() -> Iterator[tuple[str, str]]:
        for chain in _chains():
            for seen in (0, 3):
                for enrolment in (SimpleNamespace(chain_id=31337, contract=chain.anchor),
                                  SimpleNamespace(chain_id=8453, contract="0x" + "34" * 20)):
                    refused = (enrolled_chain._other_chain_id(enrolment, chain, seen)
                               if enrolment.chain_id != chain.chain_id else
                               enrolled_chain._other_contract(enrolment, chain, seen))
                    yield refused.code.value, refused.hint

    def no_contract() -> Iterator[tuple[str, str]]:
        # A view with no data (chain_refusal.py): its own step, another chain's endpoint
        # to change or the contract and the endpoint to check (kint.chain.anchor).
        from kint.chain.anchor import no_contract_there

        for chain in _chains():
            for answered in (None, 1):
                yield "RPC_UNAVAILABLE", no_contract_there(
                    chain, "reading the head", "http://127.0.0.1:1/", ADDRESS, answered).step

    def unanswered() -> Iterator[tuple[str, str]]:
        # The hints chain_refusal's callers give an endpoint that did not answer: the
        # code's own, named on the way out (`endpoints`), a header read's, join's.
        from kint.protocol.hints import HEADER_TRANSPORT_HINT

        yield "RPC_UNAVAILABLE", HEADER_TRANSPORT_HINT
        yield from endpoints()

    def wrong_chain() -> Iterator[tuple[str, str]]:
        for chain in _chains():
            for endpoints in (1, 2):
                yield "STALE_RPC", on_other_chain(chain, {0: 1, 1: 1}, endpoints)[1]

    def wrong_chain_at_connect() -> Iterator[tuple[str, str]]:
        # connect's and join's check (connect.another_chain_refused): the primary, named by
        # its setting or by `--rpc-urls`.
        for chain in _chains():
            for names in (ENDPOINT_NAMES, ("--rpc-urls",)):
                yield "STALE_RPC", on_other_chain(chain, {0: 1}, 1, names=names)[1]

    def readable() -> Iterator[tuple[str, str]]:
        for chain_error in (None, Refused("RPC_UNAVAILABLE", "down")):
            yield "NOT_CONNECTED", recovery_binding._when_readable(chain_error, "then")
        # Named on the way out: the endpoints in force by where they are set
        # (name_the_endpoint), or a connect's own --rpc-urls (name_the_given).
        raised = recovery_binding._when_readable(Refused("RPC_UNAVAILABLE", "down"), "then")
        for chain in _chains():
            err = Refused("WRONG_KEY", "refused", raised)
            rpc_hint.name_the_endpoint(SimpleNamespace(chain=lambda c=chain: c), err)
            assert err.hint != raised, chain.rpc_source
            yield err.code.value, err.hint
        err = Refused("WRONG_KEY", "refused", raised)
        rpc_hint.name_the_given(err)
        assert err.hint != raised
        yield err.code.value, err.hint

    def disk_full() -> Iterator[tuple[str, str]]:
        for op in ("pull", "push"):
            yield "DISK_FULL", state_health._disk_full("the store", "ENOSPC", op).hint

    def fills() -> Iterator[tuple[str, str]]:
        for chain in _chains():
            key = SimpleNamespace(anchor=SimpleNamespace(config=chain), address=ADDRESS)
            for why in (INSUFFICIENT_FUNDS, "reverted"):
                refused = FormerKey._refused_fill(key, 7, 8, ChainRefused(why, "refused"))
                yield refused.code.value, refused.hint

    def unfillable() -> Iterator[tuple[str, str]]:
        for refused in _unfillable():
            yield refused.code.value, refused.hint

    def chain_settings() -> Iterator[tuple[str, str]]:
        # kint.chain.config's errors, passed on by SpaceContext.chain: a refused chain
        # setting, wherever it was set (kint-server's own environment: its MCP config).
        from kint.chain.config import CorruptDevchainRecord, RefusedChainSetting
        from kint.settings import BY_NAME, FILE
        from kint.settings.loader import DAEMON_ENV, THIS_CALL, Value, refusal

        yield CorruptDevchainRecord.code, CorruptDevchainRecord.hint
        for source in (THIS_CALL, DAEMON_ENV, FILE):
            refused = RefusedChainSetting(*refusal(Value(
                BY_NAME["KINT_CONTRACT"], None, source, "/home/u/.kint/config.toml",
                refused="KINT_CONTRACT=0x12 is not an address")))
            yield refused.code, refused.hint

    def op_arguments() -> Iterator[tuple[str, str]]:
        from kint.settings.secret_proof import malformed

        yield "BAD_REQUEST", malformed("KINT_PASSPHRASE")[1]

    def restores() -> Iterator[tuple[str, str]]:
        from kint.agent_server.restore_wait import RestoreUnderWay

        for stays in (True, False):
            under_way = SimpleNamespace(worker_stays=stays, resumed=False, worker_pid=7)
            yield "RESTORE_RUNNING", RestoreUnderWay.hint(under_way)

    def not_rekeys() -> Iterator[tuple[str, str]]:
        for opened in (False, True):
            refused = not_a_rekey(4, SimpleNamespace(tag=b"\x01" * 8), opened)
            yield refused.code.value, refused.hint

    def held() -> Iterator[tuple[str, str]]:
        # Each hold's own (drift.py): a refused value's, rows changed behind Sibyl's tools,
        # a store that lost its rows, one kint cannot read.
        from kint.outcomes import NOTHING_ANCHORED_OR_DROPPED
        from kint.protocol.hints import DRIFT_HOLD_HINT, STORE_LOST_HOLD_HINT
        from kint.tenant_worker.drift import HOLD_HINT

        for hint in (HOLD_HINT, DRIFT_HOLD_HINT, STORE_LOST_HOLD_HINT,
                     NOTHING_ANCHORED_OR_DROPPED):
            yield "HELD", hint

    def reorganised() -> Iterator[tuple[str, str]]:
        # A reorganisation's refusal asks another endpoint's word where the space's
        # endpoints in force are set (kint.chain.endpoint_source).
        from kint.chain.endpoint_source import other_endpoint
        from kint.protocol.hints import REORG_HINT

        for chain in _chains():
            yield "STALE_RPC", REORG_HINT.format(endpoint=other_endpoint(chain))

    def closed_doors() -> Iterator[tuple[str, str]]:
        # FrontClosed.refusal's: its note's hint, or a stopped supervisor's way out.
        from kint.front_closed import FrontClosed, stopped_hint

        for stopping in (False, True):
            closed = FrontClosed(7, 30, 64, 1, 0.0, stopping=stopping)
            yield closed.code, closed.hint
            yield closed.code, stopped_hint(closed.pid)

    return {
        ("client_closed_door.py", "said.hint"): closed_doors,
        ("tenant_worker/push_refusals.py", "gap_hint(mirror)"): gaps,
        ("tenant_worker/unauthorized_journal.py", "self.hint(again)"): unauthorized,
        ("tenant_worker/chain_refusal.py", "err.step"): no_contract,
        ("tenant_worker/chain_refusal.py", "hint"): unanswered,
        ("tenant_worker/join_chain.py", "contract_check(anchor.config)"): lambda: (
            ("CONFIG_INVALID", contract_check(chain)) for chain in _chains()),
        ("tenant_worker/overtaken.py", "self.hint(again)"): lambda: (
            ("CHAIN_MOVED", Overtaken(3, 5, False, moved_to=moved).refusal(again).hint)
            for again in ("kint push", "kint rekey") for moved in (None, "/s/moved.db")),
        ("tenant_worker/enrolled_chain.py", "hint + _connect_again(seen, now)"): other_chains,
        ("tenant_worker/enrolled_chain.py", "_contract_hint(enrolment, chain) + "
                                            "_connect_again(seen, f'the contract at {now}')"):
            other_chains,
        ("tenant_worker/cold_start.py", "found[1]"): wrong_chain,
        ("tenant_worker/cold_start.py", "no_second_hint(chain)"): lambda: (
            ("STALE_RPC", no_second_hint(chain)) for chain in _chains()),
        ("tenant_worker/cold_start.py", "silent_second_hint(chain)"): lambda: (
            ("STALE_RPC", silent_second_hint(chain)) for chain in _chains()),
        ("tenant_worker/connect.py", "found[1]"): wrong_chain_at_connect,
        ("tenant_worker/connect_key.py", "hint"): not_rekeys,
        ("tenant_worker/custody_errors.py", "wrong_signer_hint(err)"): lambda: iter([(
            "WRONG_KEY", wrong_signer_hint(WrongSigner(ADDRESS, "0x" + "cd" * 20)))]),
        ("tenant_worker/recovery_binding.py", "_when_readable(chain_error, \"the head epoch's "
                                              "header hands them over\")"): readable,
        ("tenant_worker/recovery_binding.py", "_when_readable(chain_error, \"the head epoch's "
                                              "header checks the code\")"): readable,
        ("tenant_worker/former_key.py", "fund + FILL_AGAIN_HINT.format(hole=hole)"): fills,
        ("tenant_worker/former_key.py", "passed + FORMER_KEY_UNFILLABLE.format(hole=hole, "
                                        "address=self.address, space16=self.space16)"):
            unfillable,
        ("tenant_worker/session_sender.py", "fund_hint(self.anchor.config, "
                                            "self.account.address)"): lambda: (
            ("NOT_CONNECTED", fund_hint(chain, ADDRESS)) for chain in _chains()),
        ("agent_server/tools.py", "hint"): lambda: (
            ("BAD_REQUEST", hint) for _, hint in DEV_TOOL_REFUSALS.values()),
        ("tenant_worker/state_health.py", "hint"): disk_full,
        ("tenant_worker/space.py", "err.hint"): chain_settings,
        ("protocol/ops.py", "hint"): op_arguments,
        ("agent_server/tools.py", "shared.restore.hint()"): restores,
        ("tenant_worker/drift.py", "hold.hint"): held,
        ("tenant_worker/behind_head.py", "REORG_HINT.format(endpoint=other_endpoint("
                                         "anchor.config))"): reorganised,
        # A recovery code that is not one, naming the space's file where it is known.
        ("tenant_worker/custody_errors.py", "recovery_code_hint(space16)"): lambda: (
            ("BAD_REQUEST", recovery_code_hint(space16)) for space16 in (None, "ab" * 8)),
        # The vault's maker without its recovery file, naming the file's path.
        ("tenant_worker/push_refusals.py", "RECOVERY_FILE_AT.format(file=state.files["
                                           "'recovery'])"): lambda: iter([(
            "NOT_CONNECTED", RECOVERY_FILE_AT.format(
                file=f"/home/u/.kint/RECOVERY-{'ab' * 8}.txt"))]),
    }


ADDRESS = "0x" + "ab" * 20


def _named_on_the_way_out() -> list[tuple[str, str]]:
    """(code, hint) of each hint the worker raises in machine-wide words and names the
    space's endpoints in on the way out (rpc_hint.name_the_endpoint), as it is raised."""
    from kint.protocol.hints import (ARCHIVE_HINT, HEADER_TRANSPORT_HINT, SEND_REFUSED_HINT,
                                     STALE_JOURNAL_HINT, UNREAD_GAP_HINT,
                                     UNREAD_OVER_SKIPPED_HINT)

    return [("RPC_UNAVAILABLE", ARCHIVE_HINT), ("RPC_UNAVAILABLE", SEND_REFUSED_HINT),
            ("GAP", UNREAD_GAP_HINT),
            ("GAP", UNREAD_OVER_SKIPPED_HINT), ("RPC_UNAVAILABLE", HEADER_TRANSPORT_HINT),
            ("CHAIN_UNREADABLE", HEADER_TRANSPORT_HINT),
            ("CHAIN_UNREADABLE", DEFAULT_HINTS[ErrorCode.CHAIN_UNREADABLE]),
            ("STALE_RPC", STALE_JOURNAL_HINT), ("RPC_UNAVAILABLE", STALE_JOURNAL_HINT)]


_NAMED_ON_THE_WAY_OUT = _named_on_the_way_out()


def _unfillable() -> list:
    """A previous key's nonce nothing here can fill (former_key): never sent, and waiting at
    another endpoint past the bound."""
    from kint.tenant_worker.former_key import FormerKey
    from kint.tenant_worker.former_key_wait import Elsewhere

    key = FormerKey(anchor=None, address=ADDRESS, home=Path("/k"), space16="ab" * 8)
    return [key._unfillable(7, 8, elsewhere) for elsewhere in (
        None, Elsewhere("http://127.0.0.1:2/", 300.0, True))]


def _unauthorized() -> list:
    """A killed push's journal whose key may not write, as each way of it is said."""
    from kint.tenant_worker.unauthorized_journal import Unauthorized

    owner = "0x" + "cd" * 20
    return [Unauthorized(3, ADDRESS, owner, rotated, kept=kept, unread=unread,
                         anchored_since=since, moved_to=moved)
            for rotated in (False, True)
            for kept, unread, since, moved in (
                (None, False, False, None), ("k", False, False, None),
                ("k", True, False, None), (None, False, True, None),
                (None, False, False, "/s/moved.db"))]


def _hint_sources(module: ModuleType, node: ast.expr) -> list[str] | None:
    """The hints `node` gives as the source says them (both ways of a conditional), or
    None for one built at run time."""
    if isinstance(node, ast.IfExp):
        body, orelse = _text(module, node.body), _text(module, node.orelse)
        return None if body is None or orelse is None else [body, orelse]
    said = _text(module, node)
    return None if said is None else [said]


def _worker_hints() -> list[tuple[str, int, str, str]]:
    """(file, line, code, hint) of every ProtocolError and KintError raised under kint/
    (NOT_SCANNED aside) with a hint: the source's, or those a run-time one is built as.
    A run-time hint neither built (_built_at_run_time) nor PASSED_ON fails."""
    found, unknown = [], []
    built = _built_at_run_time()
    for path in sorted(KINT.rglob("*.py")):
        where = path.relative_to(KINT).as_posix()
        if where.split("/")[0] in NOT_SCANNED or path.name == "__main__.py":
            continue
        module = importlib.import_module(
            "kint." + where.removesuffix(".py").replace("/", ".").removesuffix(".__init__"))
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or getattr(
                    node.func, "id", getattr(node.func, "attr", None)) not in (
                    "ProtocolError", "KintError"):
                continue
            hint = node.args[2] if len(node.args) > 2 else next(
                (k.value for k in node.keywords if k.arg == "hint"), None)
            if hint is None or not node.args:
                continue
            said = _hint_sources(module, hint)
            code = ast.unparse(node.args[0]).rpartition(".")[2]
            key = (where, ast.unparse(hint))
            if said is not None:
                found += [(where, node.lineno, code, one) for one in said]
            elif key in built:
                found += [(where, node.lineno, c, one) for c, one in built[key]()]
            elif key not in PASSED_ON:
                unknown.append((where, node.lineno, key[1]))
    assert not unknown, f"hints built at run time the guard does not build: {unknown}"
    return found


def _terminal_steps(said: str) -> list[str]:
    """The commands of kint's CLI `said` names before it hands anything to the human, less
    those the agent runs itself."""
    asked = HANDED_OVER.split(said, maxsplit=1)[0]
    for command in AGENT_RUNS:
        asked = asked.replace(command, "")
    commands = "|".join(map(re.escape, _cli_commands()))
    return re.findall(rf"\bkint (?:{commands})\b", asked)


# The human's steps no command of kint's names (human_steps.HUMAN_ONLY_WORDS): ETH to send,
# a setting to set, unset, check, correct or point at an endpoint (a KINT_ name alone, a
# place or what sets a bound, is no step), a process
# to signal, a file's mode, space on the disk. Held against every hint as said to the agent.
HUMAN_WORDS = re.compile(r"send ETH|MCP configuration|environment file|`kill |`chmod "
                         r"|point kint at|free some space|config\.toml"
                         r"|\b(?:check|correct|point|set|unset|change) KINT_|\bKINT_\w+="
                         r"|config file|\bin (?:this command's|the supervisor's|the service's) "
                         r"environment|macOS Keychain")


# Any KINT_ setting named before the hint hands anything over, broader than the translator's
# verbs (human_steps.HUMAN_SETTING, which the guard's HUMAN_WORDS mirrors): a step with
# another verb ("raise KINT_X", "export KINT_X") passes the translation as it is, and only
# this catches it. Less the contexts known to name no step: KINT_HOME as a place, a
# setting named as what sets a bound.
ANY_SETTING = re.compile(r"\bKINT_[A-Z0-9_]+")
NOT_A_STEP = re.compile(r"\b(?:in|under) KINT_HOME\b|\bKINT_HOME/|\(KINT_[A-Z0-9_]+ sets it\)")


def _human_steps(said: str) -> list[str]:
    """The human's steps without a command that `said` gives before it hands anything to
    the human."""
    asked = HANDED_OVER.split(said, maxsplit=1)[0]
    return HUMAN_WORDS.findall(asked) + ANY_SETTING.findall(NOT_A_STEP.sub("", asked))


def test_the_agents_view_of_the_cli_is_the_clis():
    """The translation knows a terminal's command by the CLI's own list: a command added to
    the CLI and named in a hint would otherwise pass to the agent as its next step."""
    assert sorted(KINT_COMMANDS) == sorted(_cli_commands())
    assert all(f"kint {command}" in AGENT_RUNS for command in AGENT_COMMANDS)


def test_no_worker_hint_hands_an_agent_a_terminals_command():
    hints = _worker_hints()
    assert len(hints) > 150, len(hints)  # the source read, not a folder missed
    bad = []
    for where, line, code, hint in hints:
        for tool, mapped in (("memory_push", push_error), ("memory_pull", pull_error),
                             ("memory_status", None)):
            err = KintError(code, "refused", hint)
            if mapped is not None:
                err = mapped(err, lambda: True)
            said = agent_error(tool, err).hint or ""
            if _terminal_steps(said) or _human_steps(said):
                bad.append((where, line, tool, said))
    assert not bad, "\n".join(map(str, bad))


def test_a_corrupt_state_file_is_the_humans_to_move_and_the_pull_after_it_the_agents():
    """state_health's corrupt file and the pending-epoch journal's (not one, or not hashing
    to its digest): moving a file aside is the human's, where the agent was told to do it
    and run `kint pull`; the pull after it is memory_pull. The CLI keeps its words."""
    from kint.tenant_worker.state_health import corrupt_error
    from kint.tenant_worker.statefiles import CorruptStateFile

    state = corrupt_error(CorruptStateFile(Path("/k/mirror-ab.json"), "is not JSON"))
    assert state.hint.startswith("move the file aside and run `kint pull`"), state.hint
    for tool, mapped in (("memory_push", push_error), ("memory_pull", pull_error)):
        said = agent_error(tool, mapped(KintError(state.code.value, state.message,
                                                  state.hint), lambda: True)).hint
        assert said.startswith("stop and tell the human: kint never replaces a corrupt "
                               "file by itself") and "call memory_pull" in said, said


def test_a_corrupt_pending_journal_is_the_humans_to_move(tmp_path):
    """A pending-epoch file that is not one: the human moves it aside, then a pull."""
    from kint.tenant_worker.pending_journal import PendingEpoch

    journal = tmp_path / "pending-ab.json"
    journal.write_text("{not json")
    with pytest.raises(ProtocolError) as caught:
        PendingEpoch.load(journal)
    refused = caught.value
    assert refused.hint == "move it aside and run `kint pull`"  # the CLI's words kept
    said = agent_error("memory_push", push_error(
        KintError(refused.code.value, refused.message, refused.hint), lambda: True)).hint
    assert said == ("stop and tell the human: moving the file named above aside is theirs; "
                    "after that, call memory_pull"), said


def test_an_epoch_whose_event_does_not_match_is_re_read_by_the_agents_pull():
    """record_landed's and reanchor's INTERNAL for an Epoch event that does not match what
    was sent: a pull re-reads it. The agent was told to run `kint pull`."""
    from kint.protocol.hints import REREAD_HINT

    for tool, mapped in (("memory_push", push_error), ("memory_pull", pull_error)):
        said = agent_error(tool, mapped(KintError("INTERNAL", "epoch 3 landed but ...",
                                                  REREAD_HINT), lambda: True)).hint
        assert said == "call memory_pull to re-read it", said


def _said_to(tool: str, code: str, hint: str) -> str:
    """What `tool` tells the agent of a worker's refusal with `code` and `hint`."""
    mapped = {"memory_push": push_error, "memory_pull": pull_error}.get(tool)
    err = KintError(code, "refused", hint)
    return agent_error(tool, mapped(err, lambda: True) if mapped else err).hint or ""


def test_the_guard_reads_all_of_kint_and_builds_the_run_time_hints():
    """The scan once read kint/tenant_worker and kint/supervisor only, and a hint built at
    run time (gap_hint, Unauthorized.hint, the endpoint in force) was no hint to it."""
    hints = _worker_hints()
    files = {where for where, *_ in hints}
    assert {"sibyl_client.py", "agent_server/tools.py", "open_files.py"} & files, files
    said = {hint for *_, hint in hints}
    from kint.protocol.hints import (GAP_NEVER_OPENS_HINT, UNAUTHORIZED_KEPT_HINT,
                                     UNAUTHORIZED_PUSH_HINT)

    assert {GAP_NEVER_OPENS_HINT, UNAUTHORIZED_PUSH_HINT, UNAUTHORIZED_KEPT_HINT} <= said
    assert any("config.toml and that they answer, then try again" in h for h in said), said


def test_an_endpoint_a_config_file_sets_is_tried_again_then_handed_to_the_human():
    """RPC_UNAVAILABLE's hint names the endpoint in force (kint.tenant_worker.rpc_hint):
    one a config file sets reached the agent as the terminal's "check ..., then try
    again", where the generic one and a space's had the agent's retry first."""
    from kint import settings
    from kint.tenant_worker.rpc_hint import endpoint_hint

    hint = endpoint_hint(SimpleNamespace(rpc_source=settings.FILE,
                                         rpc_where="/home/u/.kint/config.toml"))
    for tool in ("memory_push", "memory_pull"):
        assert _said_to(tool, "RPC_UNAVAILABLE", hint) == (
            f"call {tool} again in a minute; if it fails again, stop and tell the human to "
            f"check the endpoints set in /home/u/.kint/config.toml and that they answer, "
            f"then try again")


def test_a_journal_of_a_key_not_authorized_has_the_agent_push_after_the_owner():
    """Unauthorized.hint: the owner's authorization is the human's, the push after it the
    agent's memory_push, where the agent was told to stop with `then kint push ...`."""
    for found in _unauthorized():
        if found.rotated or found.anchored_since or found.unread or found.moved_to:
            continue
        said = _said_to("memory_push", "NOT_CONNECTED", found.refusal().hint)
        assert said.startswith("stop and tell the human: the owner authorizes"), said
        assert "after that, call memory_push: it " in said, said
        assert "`kint push`" not in said, said


def test_a_refusal_on_rows_a_discarding_pull_moved_aside_says_to_write_them_back():
    """A push or rekey that meets a kept notice naming the store a discarding pull moved
    aside (the pull killed before it said it) uses the notice up: its hint said the push
    anchors the rows (`kint pull`, then `kint push`; the owner's authorization, then `kint
    push`), and "write back from it" was never said to anyone. The hint says the write-back
    step after the pull that finishes the restore, for a terminal and for an agent, whose
    memory_push kept v0.3.0's "call memory_pull first" alone."""
    from kint.tenant_worker.overtaken import Overtaken

    copy = "/s/moved.db"
    found = [Overtaken(3, 5, False, moved_to=copy)]
    found += [f for f in _unauthorized() if f.moved_to is not None]
    for one in found:
        for again in ("kint push", "kint rekey"):
            refused = one.refusal(again)
            assert copy in refused.message, refused.message
            assert refused.hint.startswith("run `kint pull` (it finishes a restore"), \
                refused.hint
            assert "write back from the store that pull moved aside" in refused.hint, \
                refused.hint
        refused = one.refusal()
        said = agent_error("memory_push", push_error(
            KintError(refused.code.value, refused.message, refused.hint), lambda: True)).hint
        assert said.startswith("call memory_pull first: it finishes a restore"), said
        assert "ask the human what of the store that pull moved aside" in said, said
        assert "call memory_push" in said and "`kint pu" not in said, said


def test_a_former_keys_nonce_and_a_stale_journal_are_the_agents_pull():
    """former_key's refused fill ("run `kint pull`: it fills nonce N again") and pending's
    "check KINT_RPC_URL and KINT_RPC_URL_2, then run `kint pull`" stopped the agent where
    its own memory_pull is the step; the ETH and the endpoint settings are the human's."""
    from kint.chain.calls import INSUFFICIENT_FUNDS, ChainRefused
    from kint.protocol.hints import STALE_JOURNAL_HINT
    from kint.tenant_worker.former_key import FormerKey

    key = SimpleNamespace(anchor=SimpleNamespace(config=SimpleNamespace(
        chain_id=8453, devchain=False)), address=ADDRESS)
    plain = FormerKey._refused_fill(key, 7, 8, ChainRefused("reverted", "refused")).hint
    assert _said_to("memory_push", "RPC_UNAVAILABLE", plain).startswith(
        "call memory_pull in a minute: it fills nonce 7 again")
    funds = FormerKey._refused_fill(key, 7, 8, ChainRefused(INSUFFICIENT_FUNDS, "no")).hint
    said = _said_to("memory_pull", "RPC_UNAVAILABLE", funds)
    assert said == (f"stop and tell the human: the previous session key {ADDRESS} needs ETH "
                    f"on chain 8453 to fill nonce 7, and funding it is the owner's; after "
                    f"that, call memory_pull again: it fills nonce 7 again"), said
    # On the devchain the previous key's ETH comes from the human's `kint devchain fund`,
    # as the current key's does (no wallet holds devchain ETH); Base's words above kept.
    dev = SimpleNamespace(anchor=SimpleNamespace(config=SimpleNamespace(
        chain_id=31337, devchain=True)), address=ADDRESS)
    dev_funds = FormerKey._refused_fill(dev, 7, 8, ChainRefused(INSUFFICIENT_FUNDS, "no")).hint
    assert dev_funds.startswith(f"`kint devchain fund {ADDRESS}` gives it devchain ETH, then "
                                f"run `kint pull`"), dev_funds
    said = _said_to("memory_pull", "RPC_UNAVAILABLE", dev_funds)
    assert said == (f"stop and tell the human: the previous session key {ADDRESS} needs "
                    f"devchain ETH to fill nonce 7, which `kint devchain fund {ADDRESS}` in "
                    f"their terminal gives; after that, call memory_pull again: it fills "
                    f"nonce 7 again"), said
    # From memory_pull, the pull is its own call again (`{pull}`, which a template's words
    # could not name: KeyError).
    assert _said_to("memory_pull", "RPC_UNAVAILABLE", plain).startswith(
        "call memory_pull again in a minute: it fills nonce 7 again")
    said = _said_to("memory_push", "STALE_RPC", STALE_JOURNAL_HINT)
    assert said.startswith("call memory_pull in a minute: it settles the interrupted push"), \
        said
    assert ("stop and tell the human: the endpoint answers with an old or different chain, "
            "and theirs is to check KINT_RPC_URL and KINT_RPC_URL_2") in said, said


def test_a_former_keys_unfillable_nonce_and_a_rotated_data_key_end_with_the_agents_pull():
    """A previous key's nonce this machine can no longer fill, and an epoch sealed under a
    data key another machine's rekey made, stopped the agent with the human's steps and
    `kint pull` after them, never the agent's own memory_pull once the human is done."""
    from kint.protocol.hints import ROTATED_DISCARD_HINT
    from kint.tenant_worker.push_refusals import gap_hint

    for refused in _unfillable():
        for tool, pull in (("memory_push", "memory_pull"), ("memory_pull", "memory_pull again")):
            said = _said_to(tool, refused.code.value, refused.hint)
            assert said.startswith("stop and tell the human: "), said
            assert f"; after that, call {pull}: it fills nonce 7 with a transfer to self" \
                in said, said
            assert "`kint pull`" not in said and ADDRESS in said, said
            assert ("http://127.0.0.1:2/" in said) == ("http://127.0.0.1:2/" in refused.hint)
    rotated = gap_hint(SimpleNamespace(rotated_gap=True, unread_gap=None))
    said = _said_to("memory_push", "GAP", rotated)
    assert said.startswith("stop and tell the human: if the data key was rotated on another "
                           "machine, `kint connect` again in their terminal"), said
    assert "; after that, call memory_pull. If that connect says" in said, said
    assert "then `kint pull`" not in said, said
    said = _said_to("memory_pull", "GAP", ROTATED_DISCARD_HINT)
    assert said.endswith("; after that, call memory_pull with discard_local again"), said


def test_a_session_key_short_of_eth_is_the_owners_to_fund():
    """session_sender's "send ETH on chain C to 0x... (`kint status` names it), then try
    again" names no command the catch-all knows, and reached the agent as its step: the
    agent holds no wallet. It stops and tells the human the address. On the devchain, where
    no wallet holds its ETH, the worker names `kint devchain fund ADDRESS` (it said "send
    ETH on chain 31337", as on Base), and the agent hands that command to the human; Base's
    words, the worker's and the agent's, are as they were."""
    from kint.tenant_worker.session_sender import fund_hint

    base = SimpleNamespace(devchain=False, chain_id=8453)
    hint = fund_hint(base, ADDRESS)
    assert hint == (f"send ETH on chain 8453 to {ADDRESS} (`kint status` names it), then try "
                    f"again")
    assert _said_to("memory_push", "NOT_CONNECTED", hint) == (
        f"stop and tell the human: this machine's session key {ADDRESS} needs ETH on chain "
        f"8453, and funding it is the owner's; after that, call memory_push again")
    hint = fund_hint(SimpleNamespace(devchain=True, chain_id=31337), ADDRESS)
    assert hint == f"`kint devchain fund {ADDRESS}` gives it devchain ETH, then try again"
    assert _said_to("memory_push", "NOT_CONNECTED", hint) == (
        f"stop and tell the human: this machine's session key {ADDRESS} needs devchain ETH, "
        f"which `kint devchain fund {ADDRESS}` in their terminal gives; after that, call "
        f"memory_push again")


def test_a_pulls_warnings_name_the_agents_tools_for_the_rows():
    """A pull that went on past a dropped journal says what to do with its rows for a
    terminal (`kint push`, `kint status`): memory_pull's reply gives the agent's tools,
    and the owner's authorization as the human's. Rows in a store the pull moved aside are
    the human's to say what is written back, whichever journal carried them: an unauthorized
    or rotated key's told the agent to write back itself, and that a push anchored rows
    still in that store."""
    from kint.agent_server.results import pull_result
    from kint.tenant_worker.overtaken import Overtaken

    notices = [found.notice(moved) for found in _unauthorized() if found.kept is None
               for moved in (None, "/s/moved.db")]
    notices += [Overtaken(3, 5, False).notice(moved) for moved in (None, "/s/moved.db")]
    for notice in notices:
        said = agent_notice(notice)
        assert not _terminal_steps(said), said
        if "/s/moved.db" in notice:  # what is written back is the human's, for every journal
            assert "write back" not in said and "ask the human what of it is still wanted" \
                in said, said
            assert "memory_push anchors them" not in said, said  # rows still in that store
    shown = pull_result({"message": "pulled", "warnings": notices})["warnings"]
    assert shown[-2].endswith("; memory_status counts them, and memory_push anchors them")
    assert all("`kint push`" not in line for line in shown), shown


def test_a_dropped_journal_the_store_was_pulled_past_names_no_command():
    """A dropped journal whose chain the store was pulled up to since (kint-server's
    start-up pull went past it) is said by the push that goes on (memory_push's `notices`,
    passed as the worker says them) and by a later pull: it said the rows were "still in
    the store, not anchored" and that "`kint push` anchors them", inside the very push that
    anchors what the store holds. It is `describe` alone, with what the pull since means for
    the rows, wherever a pull moved the store since."""
    from kint.agent_server.results import push_result
    from kint.tenant_worker.overtaken import PULLED_SINCE, Overtaken

    past = Overtaken(3, 5, False, pulled_since=True)
    for moved in (None, "/s/moved.db"):
        said = past.notice(moved)
        assert said == past.describe() and said.endswith(f"dropped; {PULLED_SINCE}"), said
        assert "still in the store" not in said and "`kint " not in said, said
        assert agent_notice(said) == said
    assert push_result({"notices": [past.notice()]}, "tool")["notices"] == [past.describe()]


def test_the_archive_hint_sends_every_tool_to_the_pull():
    """ARCHIVE_HINT is a pull's walk's: "call memory_status again" healed nothing."""
    from kint.protocol.hints import ARCHIVE_HINT

    assert _said_to("memory_status", "RPC_UNAVAILABLE", ARCHIVE_HINT).startswith(
        "call memory_pull in a minute; if it stops at the same epoch")
    assert _said_to("memory_pull", "RPC_UNAVAILABLE", ARCHIVE_HINT).startswith(
        "call memory_pull again in a minute; if it stops at the same epoch")


def test_kint_servers_own_refusal_that_hands_a_step_over_is_left_as_it_is():
    """memory_connect with dev and a passphrase: the agent drops the argument and calls
    again; the passphrase wrap is the human's. The catch-all saw `kint connect` anywhere in
    the hint and told the agent to stop and tell the human to drop the passphrase."""
    from kint.agent_server.tools import DEV_TOOL_REFUSALS

    hint = DEV_TOOL_REFUSALS["passphrase"][1]
    assert _said_to("memory_connect", "BAD_REQUEST", hint) == hint
    assert hint.startswith("drop passphrase and call memory_connect again")


def test_the_start_up_pull_asks_an_older_supervisor_the_plain_pull():
    """kint-server's start-up pull asks the worker to keep what a settlement found
    (`unread`); a supervisor of an older kint refuses the argument, and is asked the plain
    pull. A stand-in session (an older kint cannot be had here) checks the arguments as
    this kint's pull op did before `unread` (kint.protocol.ops, the same words). The plain
    pull is waited for within what is left of the start-up budget, not the whole of it
    again: the stand-in's clock, handed to it (patching kint-server's `time.monotonic`
    froze the process's own for every thread), has the refusal take 30 of the 40 s."""
    from dataclasses import replace

    from kint.mcp_server import _start_up_pull
    from kint.protocol.ops import OPS

    older = replace(OPS["pull"], args={name: spec for name, spec in OPS["pull"].args.items()
                                       if name != "unread"})
    sent: list[tuple[dict, float]] = []
    now = [100.0]

    class OlderSupervisor:
        def call(self, op: str, args: dict, timeout_s: float) -> dict:
            sent.append((args, timeout_s))
            try:
                older.validate_args(args, None)
            except ProtocolError as err:
                now[0] += 30
                raise KintError(err.code.value, err.message, err.hint) from None
            return {"message": "pulled"}

    assert _start_up_pull(OlderSupervisor(), 140.0, lambda: now[0]) == {"message": "pulled"}
    assert sent == [({"unread": True}, 40.0), ({}, 10.0)]


def test_a_human_step_no_command_names_is_the_humans():
    """A setting (kint-server's own environment: a bad KINT_CONTRACT in its MCP
    configuration, passed on by SpaceContext.chain), space on a full disk, an endpoint to
    point a setting at: none names a `kint` command, and each reached the agent as its own
    next step. A header the endpoint would not serve, and CHAIN_UNREADABLE's own hint for
    the same transport failure, are tried again first."""
    from kint.chain.chain_id import on_other_chain
    from kint.protocol.errors import DEFAULT_HINTS, ErrorCode
    from kint.protocol.hints import DISK_FULL_PULL_TAIL, HEADER_TRANSPORT_HINT
    from kint.settings import BY_NAME
    from kint.settings.loader import THIS_CALL, Value, refusal

    _, env = refusal(Value(BY_NAME["KINT_CONTRACT"], None, THIS_CALL,
                           refused="KINT_CONTRACT=0x12 in this call is not an address"))
    assert _said_to("memory_push", "CONFIG_INVALID", env) == f"stop and tell the human: {env}"
    full = DEFAULT_HINTS[ErrorCode.DISK_FULL] + DISK_FULL_PULL_TAIL
    assert _said_to("memory_pull", "DISK_FULL", full) == (
        "stop and tell the human: once space is freed, call memory_pull again: it picks up "
        "where this one stopped (nothing to discard)")
    chain = _chains()[3]
    point = on_other_chain(chain, {0: 1, 1: 1}, 2)[1]
    assert _said_to("memory_pull", "STALE_RPC", point) == f"stop and tell the human: {point}"
    assert _said_to("memory_pull", "RPC_UNAVAILABLE", HEADER_TRANSPORT_HINT).startswith(
        "call memory_pull again in a minute: that is a transport failure")
    # CHAIN_UNREADABLE's own hint is the same failure (rekey's today, which kint-server
    # has no tool for): it was a stop, where the header's is tried again first.
    unreadable = DEFAULT_HINTS[ErrorCode.CHAIN_UNREADABLE]
    assert _said_to("memory_push", "CHAIN_UNREADABLE", unreadable) == (
        "call memory_push again in a minute: that is a transport failure, never a verdict on "
        "the vault: nothing was sent or changed; if it fails again, stop and tell the human "
        "to change the RPC (KINT_RPC_URL)")


def test_a_setting_named_only_as_a_place_or_a_bound_is_no_human_step():
    """"KINT_" anywhere in a hint made it a stop: a retry that named KINT_HOME as where a
    file is, or the setting that sets a bound, was handed to the human. A setting to set,
    unset, check, correct or point (in kint-server's environment, which the agent cannot
    change) is still the human's, in the translation and in the guard alike."""
    from kint.agent_server.agent_hints import agent_error

    for retry in ("try again in a minute; the log in KINT_HOME says why it waited",
                  "try again once the bound has passed (KINT_NONCE_RETRY_SECONDS sets it)"):
        assert agent_error("memory_push", KintError("BUSY", "busy", retry)).hint == retry
        assert not _human_steps(retry), retry
    for step in ("set KINT_RPC_URL_2 to another operator's endpoint",
                 "unset KINT_OFFLINE", "check KINT_CONTRACT", "correct KINT_CONTRACT here",
                 "point KINT_RPC_URL at an endpoint of chain 8453",
                 "or KINT_ALLOW_SINGLE_RPC=1 to accept one"):
        said = agent_error("memory_push", KintError("BUSY", "busy", step)).hint
        assert said == f"stop and tell the human: {step}", said
        assert _human_steps(step), step  # the guard still fails a hint that gives it as is
    # A verb the translator does not know passes it as is: the guard, broader, fails it.
    for step in ("raise KINT_RPC_TIMEOUT to 30", "export KINT_OFFLINE=1",
                 "remove KINT_CONTRACT"):
        assert _human_steps(step), step


def _setting_lines() -> list[str]:
    """Every line of a setting not used that names the way to change it, built by the code
    that writes them (kint.settings.wire.report, each way; secret_proof.notice, both)."""
    from kint.settings import BY_NAME
    from kint.settings import secret_proof
    from kint.settings.loader import DAEMON_ENV, DEFAULT, Value
    from kint.settings.wire import report

    lines = []
    for name, source in (("KINT_QUIET_SECONDS", DEFAULT), ("KINT_RPC_URL", DEFAULT),
                         ("KINT_WORKER_IDLE_SECONDS", DAEMON_ENV),
                         ("KINT_WORKER_IDLE_SECONDS", DEFAULT)):
        setting = BY_NAME[name]
        raw = "http://127.0.0.1:9/" if setting.kind == "url" else "5"
        lines.append(report(setting, raw, Value(setting, setting.default, source), "t",
                            "/home/u/.kint/config.toml"))
    proof = secret_proof.proof("mine")
    lines += [secret_proof.notice("KINT_SESSION_PASSPHRASE", proof, running)
              for running in (None, "theirs")]
    return lines


def test_a_settings_way_to_change_it_reaches_the_agent_as_the_humans():
    """The lines about settings of the call not used (`notices`, in every tool's result and
    refusal) name the way to change the value: the harness's MCP configuration, the
    service's environment file, the config file, `kint supervisor stop`. They reached the
    agent as they were, its own next step; the way is handed to the human where it begins,
    in a result and in a refusal alike."""
    from kint.agent_server.surface import call
    from kint.agent_server.tool_args import PushArgs
    from kint.agent_server.tools import KintTool
    from kint.protocol.errors import hint_with_notices

    lines = _setting_lines()
    assert len(lines) == 6 and all(lines), lines

    def answered(_: PushArgs) -> dict:
        return {"notices": lines}

    def refused(_: PushArgs) -> dict:
        raise KintError("BUSY", "busy", hint_with_notices("call memory_push again", lines))

    for run in (answered, refused):
        tool = KintTool("memory_push", "t", "d", PushArgs, run, None)
        said = call(tool, {}).structuredContent["notices"]
        assert len(said) == len(lines), said
        for line, told in zip(lines, said):
            asked = HANDED_OVER.split(told, maxsplit=1)[0]
            assert asked != told, told  # handed over
            for step in ("`kint ", "MCP configuration", "environment file"):
                assert step not in asked, (step, told)
            assert not re.search(r"\bset \w+ (?:under|in) ", asked), told  # a key to set
            assert line.startswith(asked.rpartition(";")[0]), (line, told)  # the fact kept


def test_a_pull_stopped_at_a_rotated_key_gives_the_agent_its_pull_after_the_connect():
    """memory_pull's `message` for a pull that stopped at an epoch sealed under a data key
    another machine's rekey made ended with the terminal's step (`kint connect` again,
    then `kint pull`): the connect is the human's, the pull after it the agent's."""
    from kint.agent_server.results import pull_result
    from kint.protocol.hints import ROTATED_GAP_STEP

    said = "stopped at epoch 3: sealed under another key; the mirror stays at 2; "
    for warnings in ([], ["a warning"]):
        shown = pull_result({"message": said + ROTATED_GAP_STEP, "warnings": warnings})
        message = shown["message"]
        assert message.startswith(said + "if the data key was rotated on another machine, "
                                         "stop and tell the human: `kint connect` again"), message
        assert "; after that, call memory_pull again" in message, message
        assert "then `kint pull`" not in message, message
        assert message.endswith(" (1 warning(s))") == bool(warnings), message
    assert pull_result({"message": said})["message"] == said


def test_a_call_that_may_not_have_reached_a_stepping_down_supervisor_is_the_agents_to_retry():
    """UNREACHED_HINT (the supervisor a call went to no longer holds the home, and the call
    may never have reached it: kint.client_liveness) tells a person to run the command
    again; an agent is told to call the tool again, not to stop and hand it to the human
    (what an unmapped hint falls to)."""
    from kint.client_errors import UNREACHED_HINT

    hint = agent_error("memory_status", KintError("SUPERVISOR_UNAVAILABLE", "x",
                                                  UNREACHED_HINT)).hint
    assert hint is not None and hint.startswith("call memory_status again: "), hint
    assert "stop and tell the human" not in hint


def test_the_place_an_endpoint_hint_names_reaches_the_agent_as_said(monkeypatch):
    """The hints that send the user to another endpoint, or to check the endpoints, name
    where the space's are set (rpc_hint.named_hint): an agent is told that place, the
    same words, in the human's part of its step, never the machine-wide "rpc_url in
    config.toml" or KINT_RPC_URL the worker raised them with; its own call first where the
    pull may heal it. Each of the four places, each hint. Built as a worker builds them (a
    process of the supervisor's): an agent's hints are a worker's, and the Keychain's
    KINT_RPC_URL is named where the supervisor sees it (endpoint_source.keychain_replaced)."""
    from kint.chain.config import DEVCHAIN_SOURCE
    from kint.chain.endpoint_source import endpoint_in_force, other_endpoint, rpc_setting
    from kint.protocol.hints import DEVCHAIN_TRANSPORT
    from kint.settings import loader
    from kint.tenant_worker import rpc_hint

    monkeypatch.setattr(loader._process, "daemon", True)

    for chain in _chains():
        for code, hint in _NAMED_ON_THE_WAY_OUT:
            named = rpc_hint.named_hint(chain, hint)
            assert named is not None and named != hint or chain.rpc_source == "env", named
            transport = rpc_hint.ANOTHER_ENDPOINT.get(hint) in rpc_hint.TRANSPORT
            place = ({rpc_hint.SEND_REFUSED_HINT: endpoint_in_force(chain),
                      rpc_hint.STALE_JOURNAL_HINT: named.removeprefix("check ").removesuffix(
                          ", then run `kint pull`")}.get(hint)
                     or (DEVCHAIN_TRANSPORT if transport and chain.rpc_source == DEVCHAIN_SOURCE
                         else other_endpoint(chain, keyless=hint == rpc_hint.ARCHIVE_HINT)))
            assert place in named, (named, place)
            if transport and chain.rpc_source == DEVCHAIN_SOURCE:
                # A transport failure on the devchain: the devchain is checked, never
                # another RPC given to the space (review38c S1), nor an RPC to change: the
                # devchain's is its own (review38e S1: "change the RPC (on the devchain,
                # none to change: ...)").
                assert "`kint devchain status`" in named and "--rpc-urls" not in named, named
                assert "change the RPC" not in named, named
            elif hint in rpc_hint.ANOTHER_ENDPOINT:
                other = other_endpoint(chain, keyless=hint == rpc_hint.ARCHIVE_HINT)
                assert other in named, (named, other)
            if hint == rpc_hint.ARCHIVE_HINT and "--rpc-urls" in named:
                # An archive endpoint is most often a keyed URL, which connect refuses.
                assert "with a URL that holds no key" in named, named
            said = _said_to("memory_push", code, named)
            human = said.partition("stop and tell the human")[2]  # the human's part
            assert human and place in human, (said, place)
            if transport and chain.rpc_source == DEVCHAIN_SOURCE:
                assert "change the RPC" not in said and said.startswith("call "), said
            assert not _terminal_steps(said) and not _human_steps(said), said
            if chain.rpc_source != "env":
                # Named where it was set, if at all: never plain KINT_RPC_URL.
                assert "KINT_RPC_URL" not in said or (
                    any(rpc_setting(chain, another=another) in said for another in (False, True))
                    and rpc_setting(chain) != "KINT_RPC_URL"), said
            if chain.rpc_source != "file":
                assert "config.toml)" not in said or "[spaces." in said, said
