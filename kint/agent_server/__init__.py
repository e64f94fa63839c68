"""kint-server's parts (the entry point is `kint.mcp_server`): the session that talks to the
space's worker, the wrapped Sibyl client whose writes are noted, and kint's six tools."""
