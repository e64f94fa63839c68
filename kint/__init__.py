"""kint: check a remembered Sibyl fact against the chain before acting on it.

The package is split the way the processes are split (README, "How it runs" and "Code
layout", which gives every package a line):

- ``kint.protocol``: the wire format every process speaks. Imports nothing else of kint.
- ``kint.supervisor``: one daemon per KINT_HOME that routes requests and keeps workers alive.
- ``kint.tenant_worker``: one process per tenant space, owning that space's state.
- ``kint.cli``: the ``kint`` command, a thin client of the supervisor.
- ``kint.mcp_server`` and ``kint.agent_server``: ``kint-server``, the MCP server agents run.
"""

__version__ = "0.1.0"
