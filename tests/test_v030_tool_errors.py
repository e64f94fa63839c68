"""memory_push's refusal when this machine's session key cannot be loaded is v0.3.0's
`KeyError_` (08-tools.md, "memory_push": an exception class, `KeyError_` for no session key
on this machine), where the worker and the CLI say NO_SESSION_KEY. The agent is still told
that the next step is the human's. In process: the translation is kint.agent_server.results."""

from __future__ import annotations

from kint.agent_server.results import agent_error, pull_error, push_error
from kint.client import KintError
from kint.protocol.errors import DEFAULT_HINTS, ErrorCode

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
    from kint.protocol.errors import ARCHIVE_HINT, REORG_HINT

    walked = agent_error("memory_pull", pull_error(
        KintError(ErrorCode.RPC_UNAVAILABLE.value, "cannot walk back to epoch 4", ARCHIVE_HINT),
        lambda: True))
    assert walked.hint.startswith("call memory_pull again in a minute; if it stops at the "
                                  "same epoch, stop and tell the human"), walked.hint
    lost = agent_error("memory_push", push_error(
        KintError(ErrorCode.STALE_RPC.value, "a reorganisation dropped epoch 2", REORG_HINT),
        lambda: True))
    assert lost.hint == f"stop and tell the human: {REORG_HINT}", lost.hint
