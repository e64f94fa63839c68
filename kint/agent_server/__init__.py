"""kint-server's parts (the entry point is `kint.mcp_server`): the session that talks to the
space's worker, the wrapped Sibyl client whose writes are noted, kint's six tools, their
argument models, and the surface that serves them beside Sibyl's eight (whose errors reach
the agent as the JSON Sibyl raised: sibyl_errors); kint's hints and result lines in an
agent's words (agent_hints, the rules; agent_hint_templates, the words of hints built at
run time; hint_matchers, how a rule knows its hint; human_steps, the words of a step only
the human takes; agent_notices, a result's warnings and notices)."""
