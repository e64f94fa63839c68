"""How a rule of kint.agent_server.agent_hints knows a refusal's hint as its own: said word
for word, built from a template, or known by its code, its start or its tail.

Apart from agent_hints, which holds the agent's words and the order the rules are asked
in: a matcher says only whether a hint is the rule's and which of its parts the words
take, so the words can be read (and reviewed against 14-agents.md) without the regular
expressions and tests of a code between them.
"""

from __future__ import annotations

import re
from typing import Callable

from kint.agent_server.human_steps import HANDED_OVER, PULL_STEP, human_only
from kint.client import SupervisorUnavailable
from kint.protocol.errors import RETRY_THEN, UNSETTLED_THEN, ErrorCode


def _pattern(template: str) -> re.Pattern[str]:
    """`template` with each `{name}` a group that takes the value said in its place (the
    same value again where a name comes back)."""
    parts, seen = re.split(r"\{(\w+)\}", template), set()
    out = []
    for n, part in enumerate(parts):
        if n % 2 == 0:
            out.append(re.escape(part))
        else:
            out.append(f"(?P={part})" if part in seen else f"(?P<{part}>.+?)")
            seen.add(part)
    return re.compile("".join(out))


# A rule's matcher: given a refusal's code and its hint, the values the rule's words take
# (the hint's own parts), or None when the rule is not the hint's.
Matcher = Callable[[str, str], "dict[str, str] | None"]


def named(hint: str) -> Matcher:
    """A hint said word for word (agent_hints' _AGENT_HINTS)."""
    return lambda code, said: {} if said == hint else None


def built(template: str) -> Matcher:
    """A hint built from `template` (agent_hint_templates.AGENT_TEMPLATES), its values taken."""
    pattern = _pattern(template)

    def matches(code: str, said: str) -> dict[str, str] | None:
        found = pattern.fullmatch(said)
        return None if found is None else found.groupdict()
    return matches


def pull_first(code: str, said: str) -> dict[str, str] | None:
    """Another machine pushed (push_refusals' head check, an overtaken journal's
    PULL_THEN): the pull is the agent's next call, as v0.3.0's CHAIN_MOVED says."""
    return {} if code == ErrorCode.CHAIN_MOVED.value and said.startswith(PULL_STEP) else None


def unsettled(code: str, said: str) -> dict[str, str] | None:
    """An interrupted push's journal kept while the chain could not be read: known by its
    tail (UNSETTLED_THEN), since the check before it names the endpoint in force
    (kint.tenant_worker.rpc_hint), one of several."""
    return ({"check": said.removesuffix(UNSETTLED_THEN)} if said.endswith(UNSETTLED_THEN)
            else None)


def endpoint_check(code: str, said: str) -> dict[str, str] | None:
    """An endpoint to check, whichever (the generic settings, a space's own, a config
    file's: kint.tenant_worker.rpc_hint), then try again."""
    checked = (code == ErrorCode.RPC_UNAVAILABLE.value and said.startswith("check ")
               and said.endswith(RETRY_THEN))
    return {"said": said} if checked else None


def humans(code: str, said: str) -> dict[str, str] | None:
    """A supervisor that does not start, or runs stopped or stuck; Sibyl refusing the
    store or the account (`Run sibyl init in a terminal`, a store's permissions):
    kint-server cannot put either right, and the hint says what the human does. So does a
    hint naming a step only the human takes (HUMAN_ONLY_STEPS), or a command of a terminal
    kint-server has no tool for (TERMINAL_STEP). One that already hands the rest over is
    left as it is."""
    theirs = not HANDED_OVER.match(said) and (
        code in (SupervisorUnavailable.CODE, ErrorCode.SIBYL_ERROR.value) or human_only(said))
    return {"said": said} if theirs else None
