"""A real MCP client (the `mcp` SDK's stdio client) driving a real kint-server process,
for tests written as plain functions: `AgentProcess` runs one client session on its own
event loop thread and exposes `call(tool, **args) -> dict` (the result's JSON text),
`result(tool, **args)`, the CallToolResult as the client received it, and `failed(tool,
**args)`, the payload of a call that must come back as an error; `submit` sends a call
without waiting for it (noting its progress when asked), `submit_cancellable` with what
cancels it, and `ping` and `list_tools` ask while one is in flight. `initialized` is the
server's initialize result and `listed` its tools, as the client parsed them.
`quiet_agent` runs one on a fresh devchain machine for a test module."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, TextIO

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

SUPPORT = Path(__file__).resolve().parent / "support"


class AgentProcess:
    def __init__(self, env: dict[str, str], command: list[str] | None = None,
                 errlog: TextIO | None = None) -> None:
        self.env = env
        # Where the server's stderr goes (a file, to read what a client's log shows of it);
        # this process's stderr by default, as the SDK's client has it.
        self.errlog = errlog or sys.stderr
        # The test launcher by default (Sibyl's gate trusting the test key); a config's own
        # command (the real `kint-server`) when given.
        self.command = command or [sys.executable, str(SUPPORT / "run_kint_server.py")]
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._session: ClientSession | None = None
        self._stop: asyncio.Event | None = None
        self._done: Any = None
        self.tools: list[str] = []
        self.listed: list[types.Tool] = []
        self.initialized: types.InitializeResult | None = None

    def _run(self, coro: Any, timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self, timeout: float = 120) -> "AgentProcess":
        ready = threading.Event()

        async def main() -> None:
            params = StdioServerParameters(command=self.command[0], args=self.command[1:],
                                           env=self.env)
            self._stop = asyncio.Event()
            async with stdio_client(params, errlog=self.errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    self.initialized = await session.initialize()
                    self.listed = list((await session.list_tools()).tools)
                    self.tools = [t.name for t in self.listed]
                    self._session = session
                    ready.set()
                    await self._stop.wait()

        self._done = asyncio.run_coroutine_threadsafe(main(), self.loop)
        if not ready.wait(timeout):
            if self._done.done():
                self._done.result()
            raise TimeoutError("kint-server did not list its tools in time")
        return self

    def result(self, tool: str, **args: Any) -> types.CallToolResult:
        assert self._session is not None
        return self._run(self._session.call_tool(tool, args))

    def submit(self, tool: str, *, progress: list[tuple[float, str | None]] | None = None,
               **args: Any) -> "concurrent.futures.Future[Any]":
        """Send a tool call and return at once: the future of its CallToolResult. With
        `progress`, the call asks for progress and each notification is appended to it."""
        assert self._session is not None

        async def noted(sent: float, _total: float | None, message: str | None) -> None:
            progress.append((sent, message))

        return asyncio.run_coroutine_threadsafe(self._session.call_tool(
            tool, args, progress_callback=noted if progress is not None else None), self.loop)

    def submit_cancellable(self, tool: str, **args: Any
                           ) -> "tuple[concurrent.futures.Future[Any], Callable[[], None]]":
        """Send a tool call and return its future with what sends `notifications/cancelled`
        for it. The SDK's client has no call for that: the request's id is the session's
        next one (read on the client's loop just before the call goes out)."""
        session = self._session
        assert session is not None

        async def send() -> tuple[Any, Any]:
            request_id = session._request_id  # noqa: SLF001 - the id the call is sent with
            return request_id, asyncio.ensure_future(session.call_tool(tool, args))

        request_id, task = self._run(send())
        answered: concurrent.futures.Future[Any] = concurrent.futures.Future()
        task.add_done_callback(lambda t: answered.set_exception(t.exception())
                               if t.exception() else answered.set_result(t.result()))

        def cancel() -> None:
            note = types.CancelledNotification(params=types.CancelledNotificationParams(
                requestId=request_id, reason="cancelled by the test"))
            self._run(session.send_notification(types.ClientNotification(note)))

        return answered, cancel

    def ping(self) -> None:
        assert self._session is not None
        self._run(self._session.send_ping(), timeout=30)

    def list_tools(self) -> list[str]:
        assert self._session is not None
        return [t.name for t in self._run(self._session.list_tools(), timeout=30).tools]

    @staticmethod
    def payload(result: types.CallToolResult) -> dict[str, Any]:
        """A CallToolResult's JSON text, `isError` added when set (as `call` gives it)."""
        text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
        try:
            payload = json.loads(text)
        except ValueError:
            payload = {"raw": text}
        if result.isError:
            payload.setdefault("isError", True)
        return payload

    def call(self, tool: str, **args: Any) -> dict[str, Any]:
        return self.payload(self.result(tool, **args))

    def failed(self, tool: str, **args: Any) -> dict[str, Any]:
        """The payload of a call that must fail: `isError` set and `ok` false."""
        result = self.result(tool, **args)
        payload = json.loads(result.content[0].text)
        assert result.isError is True and payload["ok"] is False, payload
        return payload

    def close(self, timeout: float = 30) -> None:
        """Close the client: stdin closes, kint-server exits on its own."""
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
            try:
                self._done.result(timeout)
            except Exception:  # noqa: BLE001 - the server may already be gone
                pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def quiet_agent(root: Path, chain_home: Path) -> Iterator[AgentProcess]:
    """A module's agent: a kint-server on a new machine of the session's devchain (as
    `.box`), its watcher quiet so that the tests count what each call anchored."""
    from chain_machines import new_machine

    sb = new_machine(root, chain_home, KINT_QUIET_SECONDS="3600")
    process = AgentProcess(sb.env).start()
    process.box = sb
    yield process
    process.close()
    sb.shutdown()


def a_session_writes_and_closes(sb: Any, env: dict[str, str], **wait: Any) -> None:
    """A kint-server session of machine `sb` (run with `env`) that waits out its start-up
    pull, writes one row and closes: what asks its worker for the exit push."""
    closing = AgentProcess(env).start()
    try:
        sb.wait_for(lambda: closing.call("memory_pull")["ok"],
                    what="the server's start-up pull ended", **wait)
        assert closing.call("memory_remember", category="notes", name="exit-push",
                            body={"text": "written by the closing session"})["ok"] is True
    finally:
        closing.close()  # asks the worker for its exit push


def exit_push_said(sb: Any, **wait: Any) -> str:
    """The supervisor log of machine `sb` once it has the exit push's line: what it
    anchored (or cut), or why it was not made or not started."""
    log_path = sb.kint_home / "supervisor.log"
    return sb.wait_for(lambda: ("exit push: anchored" in (t := log_path.read_text())
                                or "exit push not" in t) and t,
                       what="the exit push's line", **wait)
