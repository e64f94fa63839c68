"""What a day of using kint as an agent found (session 21's dogfood lane).

- kint-server stats Sibyl's credential files (Sibyl's own rebuild check) only before
  Sibyl's tools, which make the same check at that call; kint's tools do not reach
  Sibyl's client cache.
"""

from __future__ import annotations

def test_sibyls_files_are_looked_at_only_before_sibyls_tools(tmp_path, monkeypatch):
    """kint-server's check that Sibyl's server will use kint's client (credentials.json and
    entitlement.json unchanged, ~0.1 ms of stats) ran before every tool call; it matters
    only before Sibyl's tools, which make the same check at that call themselves."""
    from sibyl_memory_client import testing

    from kint import sibyl_client
    from kint.agent_server import wrapped_client

    monkeypatch.setattr(sibyl_client, "GATE_FACTORY",
                        lambda _path: testing.NullEntitlementGate())
    looks: list[int] = []
    real = wrapped_client._sibyl_files
    monkeypatch.setattr(wrapped_client, "_sibyl_files", lambda: looks.append(1) or real())
    db = tmp_path / "store" / "memory.db"
    shared = wrapped_client.SharedClient(str(db), "t", tmp_path / "kint", session=None)
    shared.refresh()
    try:
        assert shared.client is not None
        looks.clear()
        for tool in ("memory_status", "memory_verify", "memory_push", "memory_history"):
            assert shared.before_call(tool, False) is None
        assert looks == [], "kint's tools looked at Sibyl's files"
        assert shared.before_call("memory_recall", True) is None
        assert looks == [1]
    finally:
        shared.close()
