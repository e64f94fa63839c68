"""kint's six MCP tools, forwarded to the space's worker (seed 001, "Write: Sibyl's tools,
unchanged"): memory_status, memory_connect, memory_pull, memory_push, memory_verify,
memory_history. Each returns `ok: true` with its result, or `ok: false` with `error`,
`message` and `hint`."""

from __future__ import annotations

from typing import Any, Callable

from kint.agent_server.session import AgentSession
from kint.agent_server.wrapped_client import SharedClient
from kint.client import KintError


def _forward(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return {"ok": True, **fn()}
    except KintError as err:
        return {"ok": False, "error": err.code, "message": err.message, "hint": err.hint}


def human_steps(owner: str | None) -> list[str]:
    who = owner or "0x..."
    return [
        f"EOA wallet (Ledger, MetaMask, Rabby, keystore): kint canonical-payload --owner {who} "
        f"> kint-canonical.json && cast wallet sign --data --from-file kint-canonical.json "
        f"--ledger | kint connect --owner {who} --signature -",
        f"Base Account / smart wallet owner: kint connect --owner {who} --smart-account "
        f"--passphrase-stdin",
        f"Lost both? kint connect --owner {who} --recovery-code-stdin",
    ]


def connect_tool(session: AgentSession, passphrase: str | None, recovery_code: str | None,
                 owner: str | None, dev: bool) -> dict[str, Any]:
    """memory_connect as v0.3.0's 08-tools.md gives it."""
    if recovery_code is None and passphrase is None and not dev:
        status = session.call("status", {"keys": True}, timeout_s=30)
        known = status.get("owner") or owner
        if status.get("data_key_cached") and status.get("owner"):
            return {"connected": True, "owner": status["owner"]}
        return {"connected": False, "owner": known, "human_steps": human_steps(known)}
    args: dict[str, Any] = {}
    if dev:
        args["dev"] = True
    else:
        known = owner or session.call("status", {"keys": True}, timeout_s=30).get("owner")
        if not known:
            raise KintError("OWNER_REQUIRED", "no owner was passed and none is enrolled",
                            "pass owner=0x... (the owner wallet's address)")
        args["owner"] = known
        if recovery_code is not None:
            args["recovery_code"] = recovery_code
        else:
            args["passphrase"] = passphrase
    result = session.call("connect", args, timeout_s=300)
    out = {"connected": True, "owner": result["owner"], "space": result["space"],
           "kek_tag8": result.get("key_tag") or "none", "fresh_vault": result["fresh_vault"],
           "dek_source": result["source"]}
    if result.get("recovery_file"):
        out["recovery_code_file"] = result["recovery_file"]
        out["note"] = ("a fresh vault: copy the recovery code in that file somewhere that is "
                       "not this machine")
    return out


def install_tools(mcp: Any, session: AgentSession, shared: SharedClient) -> None:
    @mcp.tool()
    def memory_status() -> dict[str, Any]:
        """kint's view of this memory: connected, the anchored head and the chain's
        (`in_step`), unanchored changes, `held` (why server-side pushes are held, or null),
        `interrupted_pull` (a pull stopped half-way through an epoch, which memory_pull
        finishes, or null), `disk_problems` (a full disk under the store or kint's state)
        and `cap` (Sibyl's bytes, kint's bytes, their sum against the cap)."""
        return _forward(lambda: session.call("status", {"chain": True}, timeout_s=30))

    @mcp.tool()
    def memory_connect(passphrase: str | None = None, recovery_code: str | None = None,
                       owner: str | None = None, dev: bool = False) -> dict[str, Any]:
        """Connect this machine to the owner's vault, or say exactly what the human must
        run. `passphrase` is a Base Account owner's vault passphrase, `recovery_code` the
        recovery code (used first when both are given); `owner` is required on the first
        connect. The wallet's derive signature is never accepted here: it travels on stdin
        through `kint connect --signature -`. Anything typed into an agent chat lands in
        the transcript: prefer the terminal. `dev` (a kint extension, devchain only) makes a
        throwaway owner."""
        return _forward(lambda: connect_tool(session, passphrase, recovery_code, owner, dev))

    @mcp.tool()
    def memory_pull(full: bool = False, discard_local: bool = False) -> dict[str, Any]:
        """Restore the chain's epochs into this store through Sibyl's write methods.
        `discard_local` moves the store aside first (the fork way out)."""
        def run() -> dict[str, Any]:
            if discard_local:
                shared.close()  # this server's own connection must not hold the store
            try:
                result = session.call("pull", {"full": full, "discard_local": discard_local},
                                      timeout_s=1800)
            finally:
                if discard_local:
                    shared.install()
            shared.refresh_if_replaced()
            return result
        return _forward(run)

    @mcp.tool()
    def memory_push(snapshot: bool = False) -> dict[str, Any]:
        """Anchor the store's changes on chain now. Held (HELD, nothing anchored, nothing
        dropped) when a row changed behind Sibyl's tools or holds a refused value."""
        return _forward(lambda: session.call("push", {"snapshot": snapshot,
                                                      "hold_reason": "tool"}, timeout_s=900))

    @mcp.tool()
    def memory_verify(query: str, limit: int = 5) -> dict[str, Any]:
        """Before acting on a recalled row: proceed, or refuse with the blocks that prove
        the change. A refusal over a drifted or missing row is written back as a Sibyl
        entity in category kint_refusal."""
        shared.refresh_if_replaced()
        return _forward(lambda: session.call("verify", {"query": query, "limit": limit,
                                                        "write": True}, timeout_s=120))

    @mcp.tool()
    def memory_history(tier: str, key: str, category: str | None = None,
                       block: int | None = None) -> dict[str, Any]:
        """Every anchored version of a row (entity, state or reference), oldest first; with
        `block`, the version live at that block (an upper bound, never a wall-clock time)."""
        args: dict[str, Any] = {"tier": tier, "key": key}
        if category is not None:
            args["category"] = category
        if block is not None:
            args["block"] = block
        return _forward(lambda: session.call("history", args, timeout_s=60))
