"""Every hint a worker or the supervisor sends reaches an agent as its own next step or as the
human's: never as a command of a terminal the agent is to run itself.

The worker writes its hints for a person at a terminal (`run kint pull`, `move the file
aside`); kint-server hands them to an agent through kint.agent_server.agent_hints. A hint
that no rule there knew reached the agent as it was, and the agent was sent to run `kint
pull` (or to move a state file aside, the human's). The guard below reads every hint the
worker's and the supervisor's refusals are written with (their source, by AST) and runs
each through memory_push's, memory_pull's and every other tool's translation. In process:
the translation is plain functions, and the hints are read where they are written.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from types import ModuleType

import click
import pytest

from kint.agent_server.agent_hints import AGENT_COMMANDS, KINT_COMMANDS, agent_error
from kint.agent_server.results import pull_error, push_error
from kint.client import KintError
from kint.protocol.errors import ProtocolError

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
    if isinstance(node, ast.JoinedStr):
        parts = [_text(module, part.value) if isinstance(part, ast.FormattedValue)
                 else _text(module, part) for part in node.values]
        return "".join("X" if part is None else part for part in parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(module, node.left), _text(module, node.right)
        return None if left is None or right is None else left + right
    return None


def _worker_hints() -> list[tuple[str, int, str, str]]:
    """(file, line, code, hint) of every ProtocolError and KintError the worker and the
    supervisor raise with a hint the source gives."""
    found = []
    for folder in ("tenant_worker", "supervisor"):
        for path in sorted((KINT / folder).glob("*.py")):
            module = importlib.import_module(f"kint.{folder}.{path.stem}")
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Call) or getattr(
                        node.func, "id", getattr(node.func, "attr", None)) not in (
                        "ProtocolError", "KintError"):
                    continue
                hint = node.args[2] if len(node.args) > 2 else next(
                    (k.value for k in node.keywords if k.arg == "hint"), None)
                said = None if hint is None else _text(module, hint)
                if said is not None and node.args:
                    code = ast.unparse(node.args[0]).rpartition(".")[2]
                    found.append((f"{folder}/{path.name}", node.lineno, code, said))
    return found


def _terminal_steps(said: str) -> list[str]:
    """The commands of kint's CLI `said` names before it hands anything to the human, less
    those the agent runs itself."""
    asked = HANDED_OVER.split(said, maxsplit=1)[0]
    for command in AGENT_RUNS:
        asked = asked.replace(command, "")
    commands = "|".join(map(re.escape, _cli_commands()))
    return re.findall(rf"\bkint (?:{commands})\b", asked)


def test_the_agents_view_of_the_cli_is_the_clis():
    """The translation knows a terminal's command by the CLI's own list: a command added to
    the CLI and named in a hint would otherwise pass to the agent as its next step."""
    assert sorted(KINT_COMMANDS) == sorted(_cli_commands())
    assert all(f"kint {command}" in AGENT_RUNS for command in AGENT_COMMANDS)


def test_no_worker_hint_hands_an_agent_a_terminals_command():
    hints = _worker_hints()
    assert len(hints) > 80, len(hints)  # the source read, not a folder missed
    bad = []
    for where, line, code, hint in hints:
        for tool, mapped in (("memory_push", push_error), ("memory_pull", pull_error),
                             ("memory_status", None)):
            err = KintError(code, "refused", hint)
            if mapped is not None:
                err = mapped(err, lambda: True)
            said = agent_error(tool, err).hint or ""
            if _terminal_steps(said):
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
    from kint.protocol.errors import REREAD_HINT

    for tool, mapped in (("memory_push", push_error), ("memory_pull", pull_error)):
        said = agent_error(tool, mapped(KintError("INTERNAL", "epoch 3 landed but ...",
                                                  REREAD_HINT), lambda: True)).hint
        assert said == "call memory_pull to re-read it", said
