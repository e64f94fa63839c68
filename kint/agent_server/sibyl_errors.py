"""Sibyl's own tool errors as the JSON object an agent parses.

Sibyl's eight tools fail by raising FastMCP's ToolError with a JSON payload (`error`,
`message`, `code`, and for some codes `recovery`, `next`, `human_action`), and v0.3.0's
reference says so (08-tools.md, "Sibyl's eight", Errors: the text is JSON). The MCP SDK
wraps that message as `Error executing tool NAME: {...}` on its way out, so the text an
agent got did not parse; Sibyl's own dispatch guard unwraps only its account-gate
envelope. Here every error result of Sibyl's tools becomes that JSON object alone, with
Sibyl's keys as Sibyl wrote them, plus what every kint error carries and Sibyl's lack:
`ok: false` and a `hint` naming the agent's next step. A text that is not Sibyl's JSON
(a fault under Sibyl's own handler) is carried as the message of an `ERROR` object, so
the agent never meets anything but JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mcp import types

_SDK_PREFIX = re.compile(r"^Error executing tool [A-Za-z0-9_\-]+: ", re.DOTALL)

# The next step for each of Sibyl's codes when Sibyl gives none the agent can follow
# (a `human_action` is the human's step, said as such).
_HINTS = {
    "NOT_FOUND": "nothing was changed; memory_list or memory_search shows what the store holds",
    "VALIDATION_ERROR": "nothing was done; call {tool} again with the arguments its input "
                        "schema lists",
    "ERROR": "call {tool} again; if it fails again, stop and tell the human (kint.log under "
             "KINT_HOME has kint-server's log)",
}
_HUMAN = "stop and tell the human: {what}"


def as_json(tool: str, result: types.CallToolResult) -> types.CallToolResult:
    """`result` of Sibyl's `tool` with each error text made the JSON object alone; a result
    that is not an error is returned as it is."""
    if not result.isError:
        return result
    content: list[Any] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            payload = error_payload(tool, block.text)
            block = types.TextContent(type="text", text=json.dumps(payload, indent=2,
                                                                   ensure_ascii=False))
        content.append(block)
    return result.model_copy(update={"content": content})


def error_payload(tool: str, text: str) -> dict[str, Any]:
    """The JSON object an error text of Sibyl's `tool` carries, with `ok` and `hint`."""
    bare = _SDK_PREFIX.sub("", text, count=1)
    try:
        payload = json.loads(bare)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        payload = {"error": "ToolError", "code": "ERROR", "message": bare}
    out = {"ok": False, **payload}
    out["ok"] = False  # first in the reply, and never a payload's own `ok` in its place
    if not out.get("hint"):
        out["hint"] = _hint(tool, out)
    return out


def _hint(tool: str, payload: dict[str, Any]) -> str:
    human = payload.get("human_action") or payload.get("recovery")
    if isinstance(human, str) and human and payload.get("code") not in _HINTS:
        return _HUMAN.format(what=human)
    return _HINTS.get(str(payload.get("code")), _HINTS["ERROR"]).format(tool=tool)
