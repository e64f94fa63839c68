"""What an agent sees of kint-server: the server's name, its instructions, and kint's six
tools served beside Sibyl's eight.

Sibyl's `build_server()` gives a FastMCP server whose eight tools (names, schemas,
descriptions, error handling) kint serves exactly as shipped; only an error's text loses
the SDK's prefix, so it is the JSON Sibyl raised (kint.agent_server.sibyl_errors). kint's
tools are served one layer out, on the SDK's lowlevel `Server` under it, the layer Sibyl's
own argument guard wraps too: `tools/list` answers Sibyl's list plus kint's, and a
`tools/call` for a kint tool never reaches FastMCP. That is what lets each kint tool's
pydantic model (kint.agent_server.tool_args) be both the schema a harness shows and the
check a call meets, unknown arguments included; FastMCP builds its models from a
function's signature and drops arguments it does not know.

The line between an answer and an error: every kint result carries `ok`, and `isError` is
exactly `not ok`. An error is a call that did not do what it was called for: arguments
refused here (VALIDATION_ERROR, before anything reaches the worker), the supervisor or the
worker unreachable, BUSY, HELD, NOT_CONNECTED, a pull that stopped. An answer the call was
made for is never an error, however unwelcome: memory_verify's `refuse`,
memory_connect's `human_steps`, memory_history's null version.

Tool calls run one at a time, kint's and Sibyl's alike (a pull swaps the client Sibyl's
tools write through), but a kint call waits on the worker in a thread of its own
(kint.agent_server.one_call), so the event loop goes on answering `ping`, `tools/list` and
`notifications/cancelled` for the up to 100 s such a call may take (a restore too),
and sends a pull's or push's progress lines to a client that asked for them.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any, Callable

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.fastmcp import FastMCP
from pydantic import ValidationError

from kint import __version__
from kint.agent_server import progress, results, sibyl_errors
from kint.agent_server.agent_notices import agent_notices
from kint.agent_server.one_call import Gate
from kint.agent_server.tools import KintTool
from kint.client import KintError
from kint.protocol.errors import ErrorCode, split_notices
from kint.tx_text import with_tx_0x

log = logging.getLogger("kint.server")

SERVER_NAME = "kint"

INSTRUCTIONS = """\
kint keeps this Sibyl memory anchored on Base: Sibyl's memory_* tools read and write it, \
kint's tools (memory_status, memory_connect, memory_pull, memory_push, memory_verify, \
memory_history) check it against the chain and anchor it.
- Before you act on anything recalled from memory, call memory_verify with a query for \
it. Act only when its decision is proceed; on refuse, tell the human its reason and do \
not act.
- At the start of a session call memory_status: when connected or data_key_cached is \
false, call memory_connect with no arguments and give the human its human_steps; when \
in_step is false, call memory_pull; when held is not null, tell the human its message.
- Writes need no push: kint anchors them after a quiet period. Call memory_push when a \
change must be on the chain now.
- A kint tool's result has ok; when ok is false the result is an error (isError) with \
error, message and hint. On HELD or FORK, stop and ask the human.
"""

# What Sibyl's argument guard answers for a call its schema refuses (`code` and `error`).
VALIDATION_CODE = "VALIDATION_ERROR"
VALIDATION_ERROR = "ValidationError"

# Every kint result is an object with `ok`; the rest depends on the tool.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean", "description": "false when the call failed: "
                                                            "then `error`, `message`, `hint`"}},
    "required": ["ok"],
    "additionalProperties": True,
}


def serve(mcp: FastMCP, tools: list[KintTool],
          before_call: Callable[[str, bool], dict[str, Any] | None] = lambda _t, _s: None,
          progress_line: Callable[[str, float], str | None] | None = None) -> None:
    """Name the server, give it its instructions and add kint's tools to Sibyl's.
    `before_call(tool, sibyls)` runs before every tool call, `sibyls` saying whether `tool`
    is one of Sibyl's (kint-server: build Sibyl's client when
    the store could not be opened before, so Sibyl's tools never build an unwrapped one);
    what it returns, when not None, is the call's answer instead (a store deleted under
    the server: kint.agent_server.wrapped_client). `progress_line(op, sent_at)` reads the
    worker's progress line of `op` begun since `sent_at`, sent to a client that asked for
    progress (kint.agent_server.progress)."""
    low = mcp._mcp_server  # the SDK's lowlevel Server under FastMCP
    low.name = SERVER_NAME
    low.version = __version__
    low.instructions = INSTRUCTIONS
    by_name = {tool.name: tool for tool in tools}
    list_sibyls = low.request_handlers[types.ListToolsRequest]
    call_sibyls = low.request_handlers[types.CallToolRequest]
    listed = [definition(tool) for tool in tools]

    async def list_tools(req: types.ListToolsRequest) -> types.ServerResult:
        result = await list_sibyls(req)
        sibyls: types.ListToolsResult = result.root
        clash = {t.name for t in sibyls.tools} & set(by_name)
        if clash:  # a Sibyl release that adds one of these names must not be shadowed
            raise RuntimeError(f"Sibyl now serves {sorted(clash)} itself")
        return types.ServerResult(sibyls.model_copy(update={"tools": [*sibyls.tools,
                                                                       *listed]}))

    gate = Gate()
    sibyl_names: list[str] = []

    async def sibyls_names() -> list[str]:
        """The names of Sibyl's tools, as its server lists them (asked once)."""
        if not sibyl_names:
            sibyl_names.extend(t.name for t in await mcp.list_tools())
        return sibyl_names

    def run_kints(tool: KintTool, arguments: dict[str, Any]) -> types.CallToolResult:
        refused = before_call(tool.name, False)
        return result(refused) if refused is not None else call(tool, arguments)

    async def call_tool(req: types.CallToolRequest) -> types.ServerResult:
        name, arguments = req.params.name, req.params.arguments or {}
        tool = by_name.get(name)
        if tool is not None:  # kint's: in a thread, while the loop answers the rest
            sent_at = time.monotonic()  # before the worker can have begun this call's op
            work = gate.off_loop(name, lambda: run_kints(tool, arguments))
            token = req.params.meta.progressToken if req.params.meta else None
            if token is None or progress_line is None or name not in progress.REPORTED:
                return types.ServerResult(await work)
            context = low.request_context

            async def send(sent: float, line: str) -> None:
                await context.session.send_progress_notification(
                    token, sent, message=line, related_request_id=context.request_id)

            async with anyio.create_task_group() as reports:
                op, read = progress.REPORTED[name], progress_line
                reports.start_soon(progress.report, lambda: read(op, sent_at), send)
                answer = await work
                reports.cancel_scope.cancel()
            return types.ServerResult(answer)
        if name not in await sibyls_names():
            return types.ServerResult(result(unknown_tool(name, [*sibyl_names, *by_name])))
        # Sibyl's run on the loop, as FastMCP runs its synchronous tools, and behind the
        # gate with the check before them: a Sibyl write never overlaps a kint call (a pull
        # swaps or closes the client it writes to). The check may ask the worker (a store
        # deleted under the client), so it runs in a thread; cancelled, it is waited for.
        await gate.enter()
        try:
            refused = await anyio.to_thread.run_sync(before_call, name, True)
            if refused is not None:
                return types.ServerResult(result(refused))
            answer = await call_sibyls(req)
            return types.ServerResult(sibyl_errors.as_json(name, answer.root))
        finally:
            gate.leave()

    low.request_handlers[types.ListToolsRequest] = list_tools
    low.request_handlers[types.CallToolRequest] = call_tool


def definition(tool: KintTool) -> types.Tool:
    return types.Tool(name=tool.name, title=tool.title, description=tool.description,
                      inputSchema=tool.args.model_json_schema(), outputSchema=OUTPUT_SCHEMA,
                      annotations=tool.annotations)


def call(tool: KintTool, arguments: dict[str, Any]) -> types.CallToolResult:
    try:
        args = tool.args.model_validate(arguments)
    except ValidationError as err:
        return result(refusal(tool, err))
    try:
        # Each transaction hash as the CLI's --json gives it, `0x` and 64 hex digits.
        payload = {"ok": True, **with_tx_0x(tool.run(args))}
        if isinstance(payload.get("notices"), list):  # the worker's lines about settings
            payload["notices"] = agent_notices(payload["notices"])
    except KintError as err:
        err = results.agent_error(tool.name, err)
        hint, notices = split_notices(err.hint)  # the worker's lines about unused settings
        payload = {"ok": False, "error": err.code, "message": err.message, "hint": hint,
                   **({"notices": agent_notices(notices)} if notices else {})}
    except Exception:  # noqa: BLE001 - a fault in kint is an error result, not a dead server
        log.exception("%s failed", tool.name)
        payload = {"ok": False, "error": ErrorCode.INTERNAL.value,
                   "message": f"{tool.name} failed inside kint-server",
                   "hint": "this is a bug in kint; kint.log under KINT_HOME has the details"}
    return result(payload)


def result(payload: dict[str, Any]) -> types.CallToolResult:
    text = json.dumps(payload, indent=2, ensure_ascii=False, default=str)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structuredContent=payload, isError=not payload["ok"])


def unknown_tool(name: str, served: list[str]) -> dict[str, Any]:
    """A call of a tool this server does not have, refused as a bad argument is (the SDK's
    own answer is a bare `Unknown tool` line without a code or a next step)."""
    shown = name if len(name) <= 64 else name[:64] + "..."
    return {"ok": False, "code": VALIDATION_CODE, "error": VALIDATION_ERROR,
            "message": f"kint-server has no tool {shown!r}",
            "hint": f"nothing was done; call one of the tools tools/list gives: "
                    f"{', '.join(served)}"}


def refusal(tool: KintTool, err: ValidationError) -> dict[str, Any]:
    """Arguments the tool's model refused, each reason by the argument's name, under the
    codes Sibyl's own argument guard answers with (v0.3.0's 08-tools.md: that guard covered
    kint's tools too), so an agent meets one refusal for a bad argument whichever tool it
    called. The value itself is never repeated: an agent may have put a secret in the
    wrong argument."""
    takes = ", ".join(tool.args.model_fields) or "no arguments"
    reasons = [_reason(e, takes) for e in err.errors(include_input=False, include_url=False)]
    return {"ok": False, "code": VALIDATION_CODE, "error": VALIDATION_ERROR,
            "message": f"{tool.name}: {'; '.join(reasons)}",
            "hint": f"nothing was done; call {tool.name} again with the arguments its input "
                    f"schema lists ({takes})"}


_SHOULD = re.compile(r"^(Input|String|Value) should ")


def _reason(error: Any, takes: str) -> str:
    where = error["loc"]
    if not where:  # a rule across arguments (kint.agent_server.tool_args)
        return str(error["ctx"]["error"])
    name = str(where[0])
    if error["type"] == "extra_forbidden":
        return f"unknown argument {name!r} (it takes {takes})"
    if error["type"] == "missing":
        return f"argument {name!r} is required"
    message = str(error["msg"])
    if _SHOULD.match(message):
        return f"argument {name!r} {_SHOULD.sub('must ', message)}"
    return f"argument {name!r}: {message}"
