"""The vocabulary of a step only the human takes: what kint-server's translation of hints
(kint.agent_server.agent_hints) asks last of a hint no named rule gave the agent's words,
to tell the agent to stop and hand it over rather than pass it on as its own next step.

Apart from the rules because it is a list of words and commands held to the CLI and to
v0.3.0's "What must go back to the human" (tests/test_worker_hints_for_agents.py mirrors
it as its guard), not a rule; the rules import it.
"""

from __future__ import annotations

import re

# Words of a step that is the human's though it names no command of kint's: a setting
# (the config file, or a KINT_ one to set, unset, check, correct or point: in the
# environment kint-server or the supervisor was started with, which the agent cannot
# change; the macOS Keychain's item that gives the endpoint while none is set), ETH to
# send, a process to signal, a file's mode, space on the disk. kint-server has no tool
# for any, and a hint passed on as it was gave them to the agent as its own
# next step (tests/test_worker_hints_for_agents.py holds every hint to them). A KINT_ name
# alone is no step: `KINT_HOME` as a place, a setting named as what sets a bound, in a hint
# whose step is a retry, stopped the agent where the retry was its own.
HUMAN_ONLY_WORDS = ("send ETH", "MCP configuration", "environment file", "`kill ", "`chmod ",
                    "point kint at", "free some space", "config.toml", "config file",
                    "macOS Keychain")
HUMAN_SETTING = re.compile(r"\b(?:check|correct|point|set|unset|change) KINT_|\bKINT_\w+=")


# Steps v0.3.0 keeps for the human's own terminal (14-agents.md, "Anti-patterns to avoid"):
# anchoring over an epoch that will never open, moving the store aside, rotating the data
# key; and the owner's authorization of a session key ("What must go back to the human",
# the worker's hints for a journal its unauthorized key left: UNAUTHORIZED_HINT and what
# to run after it). A hint the worker wrote for a terminal that names one of them (a
# header no kint reads, a store that cannot be read) is the human's to act on: the agent
# is told to stop and hand it over, never to run it. Not so a hint whose first step is a
# pull, the agent's own memory_pull (14-agents.md), with the human's step only as the way
# past a fork the pull may meet: that pull's own refusal says so when it comes. Such hints
# are known by their code (CHAIN_MOVED) or named (_AGENT_HINTS), and mapped before any word
# they hold could turn them into "stop" (here, or TERMINAL_STEP below).
HUMAN_ONLY_STEPS = ("--over-skipped", "pull --discard-local", "kint rekey", "`kint authorize`",
                    # and the human's steps no command names: ETH to send, a setting where
                    # kint-server or the supervisor was started, an endpoint to point a
                    # setting at, a process to signal, a file's mode, space on the disk
                    *HUMAN_ONLY_WORDS)
PULL_STEP = "run `kint pull`"

# Every command of kint's CLI (tests/test_worker_hints_for_agents.py holds it to the CLI's
# list), and those an agent runs itself: the diagnostics, the session key it may make, the
# recovery code file written again, the payloads the human signs, the harnesses set up
# (14-agents.md, "What you can do for the user"). Any other a hint still names once the
# rules of agent_hints had their say (a hint no one named: a corrupt epoch cache, a
# previous key's keystore to put back) is a terminal's step, which kint-server has no tool
# for or keeps for the human: the agent is told to stop and hand it over, never given it as
# its own next step. Stopping where a memory_ call would have done is the safe way to be
# wrong; a hint worth a call of the agent's own is named in agent_hints' _AGENT_HINTS or
# agent_hint_templates' AGENT_TEMPLATES.
KINT_COMMANDS = ("authorize", "canonical-payload", "compact", "config", "connect", "demo",
                 "devchain", "doctor", "export", "history", "join", "pull", "push",
                 "recovery-code", "rekey", "session-key", "setup", "status", "supervisor",
                 "verify")
AGENT_COMMANDS = ("session-key create", "session-key show", "doctor", "status",
                  "supervisor status", "config show", "recovery-code", "canonical-payload",
                  "authorize payload", "setup")
TERMINAL_STEP = re.compile(r"\bkint (?!(?:%s)\b)(?:%s)\b" % (
    "|".join(map(re.escape, AGENT_COMMANDS)), "|".join(map(re.escape, KINT_COMMANDS))))


# Where a hint already hands the rest to the human (kint-server's own refusals, written for
# an agent: `memory_connect` with dev and a passphrase): what follows is the human's.
HANDED_OVER = re.compile(r"(?:stop and )?(?:tell|ask) the human")


def human_only(said: str) -> bool:
    """Whether a hint no earlier rule gave the agent's words names, before anything it
    hands to the human, a step of the human's terminal (HUMAN_ONLY_STEPS, HUMAN_SETTING), or
    any command of kint's CLI the agent does not run itself (TERMINAL_STEP). The CHAIN_MOVED
    pull and the named hints are mapped before this is asked, so a hint that starts with a
    pull and names one of those steps stops the agent."""
    asked = HANDED_OVER.split(said, maxsplit=1)[0]
    return (any(step in asked for step in HUMAN_ONLY_STEPS) or bool(HUMAN_SETTING.search(asked))
            or bool(TERMINAL_STEP.search(asked)))
