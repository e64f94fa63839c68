"""A tool result's lines in an agent's words: a pull's warnings of a journal it dropped, and
the same notice among a push's `notices` (their last step, the agent's own tools for the
rows or the human's), and the lines about a call's settings not used (the way to change
one, the human's).

Apart from kint.agent_server.agent_hints, which turns a refusal's hint into the agent's
next call, because these shape lines of a result (warnings, notices) where a command's
step is said at their end or inside them, not a refusal's hint.
"""

from __future__ import annotations

from kint.protocol.hints import (OVERTAKEN_NOTICE_TAIL, ROTATED_KEY_NOTICE_TAIL, UNAUTHORIZED_HINT,
                                 UNAUTHORIZED_PUSH_HINT, WRITE_BACK, WRITE_BACK_TAIL)
from kint.settings.secret_proof import GIVE_SAME, GIVE_THIS
from kint.settings.wire import CHANGE_IT

# What a pull's warning of a journal it dropped (kint.tenant_worker's overtaken.py,
# unauthorized_journal.py) says last, for a terminal, about the rows the journal carried:
# the agent's tools for them, and the owner's authorization handed to the human.
ASK_WANTED = "ask the human what of it is still wanted"
_WRITTEN_BACK = f"{ASK_WANTED}; once that is written back, memory_push anchors it"
_NOTICE_TAILS = {
    OVERTAKEN_NOTICE_TAIL: "memory_status counts them, and memory_push anchors them",
    WRITE_BACK_TAIL: _WRITTEN_BACK,
    ROTATED_KEY_NOTICE_TAIL: "memory_push anchors them with this machine's current session "
                             "key",
    UNAUTHORIZED_PUSH_HINT: f"tell the human: {UNAUTHORIZED_HINT}; after that, memory_push "
                            f"anchors them",
}
# The same for rows in a store the pull moved aside (`--discard-local`), which the warning
# says as WRITE_BACK then the step after it: what is written back from that store is the
# human's to say, as for a journal the chain passed, and no push anchors rows still in it.
_MOVED_ASIDE_TAILS = {
    f"{WRITE_BACK}; {ROTATED_KEY_NOTICE_TAIL}": f"{_WRITTEN_BACK} with this machine's "
                                                f"current session key",
    f"{WRITE_BACK}; {UNAUTHORIZED_PUSH_HINT}": f"{ASK_WANTED}; tell the human too: "
                                               f"{UNAUTHORIZED_HINT}; once both are done, "
                                               f"memory_push anchors it",
}


def agent_notice(said: str) -> str:
    """A pull's warning with its last step in an agent's words; any other as it is."""
    for tail, words in (*_MOVED_ASIDE_TAILS.items(), *_NOTICE_TAILS.items()):
        if said.endswith(f"; {tail}"):
            return said.removesuffix(tail) + words
    return said


# The lines about settings of the call that were not used (kint.settings.wire's reports,
# secret_proof's), which every tool's result and refusal carries as `notices`: the way to
# change a value or give the supervisor a secret (kint-server's MCP configuration, the
# service's environment file, the config file, `kint supervisor stop`) is the human's, so
# it is handed over where it begins. The other lines name no step (a value that does not
# parse, one with no effect on this platform, a refused config file still serving its last
# good values; and the push's REANCHOR_UNUSED, OVER_SKIPPED_UNUSED and dry run lines, which
# memory_push never asks for), and pass as they are.
_SETTING_STEPS = ((CHANGE_IT, "; to change it, tell the human: "),
                  (GIVE_SAME, "; tell the human to give the supervisor the same ("),
                  (GIVE_THIS, "; to use this one, tell the human to give it to the supervisor ("))


def agent_notices(lines: list[str]) -> list[str]:
    """`notices` with the human's way to change a setting handed to the human, and a
    settled push journal's notice (memory_push says one the store was pulled past since,
    which may name a store a discarding pull moved aside) ending in the agent's tools, as a
    pull's warning does (`agent_notice`): it told the agent "`kint push`"."""
    out = []
    for line in map(agent_notice, lines):
        for step, words in _SETTING_STEPS:
            if step in line:
                line = line.replace(step, words, 1)
                break
        out.append(line)
    return out
