"""A small MCP server built on the official Python SDK (`mcp`, pinned in
scripts/mcp-servers.sh), used by the MCP client integration tests.

    python python_server.py stdio
    python python_server.py http --port N [--json-response] [--stateless]

`http` serves streamable HTTP on http://127.0.0.1:N/mcp and, once the socket
listens, prints one line `listening http://127.0.0.1:N/mcp` on stdout (with
`--port 0` the OS picks N and that line names it). `--json-response` answers
POSTs with a JSON body instead of an SSE stream; `--stateless` drops sessions
(no Mcp-Session-Id). Both ends of the SDK's protocol eras are served: the
2025 `initialize` handshake and the 2026-07-28 per-request envelope
(`server/discover`). Logs go to stderr only.

Tools: echo, add (structured output), fail (isError result), progress,
sleep (for cancellation), add_tool (registers a tool and announces
notifications/tools/list_changed), image. Tools registered by add_tool are
process-wide: every session/connection served by this process sees them.
"""

import argparse
import base64
import socket
import struct
import sys
import zlib
from typing import TypedDict

import anyio
import mcp.types as types
from mcp.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS


def _tiny_png() -> bytes:
    """A valid 2x2 RGB PNG (red, green / blue, white)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"\x00\xff\x00\x00\x00\xff\x00" + b"\x00\x00\x00\xff\xff\xff\xff"
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


TINY_PNG_BASE64 = base64.b64encode(_tiny_png()).decode("ascii")

server = MCPServer(
    "omni-python-test-server",
    version="1.0.0",
    instructions="Test server for the omni MCP client.",
    log_level="WARNING",
)

# MCPServer builds its `initialize` answer from the low-level server's
# create_initialization_options() with default NotificationOptions, which
# advertise `tools.listChanged: false`; both the stdio and the streamable-HTTP
# paths call this method, so wrapping it is the one place to turn it on.
# (At 2026-07-28, `server/discover` derives listChanged from whether
# `subscriptions/listen` is served, which MCPServer does by default.)
_lowlevel = server._lowlevel_server  # noqa: SLF001
_default_init_options = _lowlevel.create_initialization_options


def _init_options(notification_options=None, experimental_capabilities=None, extensions=None):
    return _default_init_options(
        notification_options or NotificationOptions(tools_changed=True),
        experimental_capabilities,
        extensions,
    )


_lowlevel.create_initialization_options = _init_options


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Returns `text` unchanged."""
    return text


class Sum(TypedDict):
    sum: int


@server.tool()
def add(a: int, b: int) -> Sum:
    """Adds two integers; the result is structured content {"sum": a+b}."""
    return {"sum": a + b}


@server.tool()
def fail(reason: str) -> types.CallToolResult:
    """Always fails: a tool result with isError true and `reason` as its text."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=reason)], is_error=True)


@server.tool(structured_output=False)
async def progress(steps: int, ctx: Context) -> str:
    """Sends `steps` progress notifications (when the request has a progressToken), ~50 ms apart."""
    for i in range(1, steps + 1):
        await anyio.sleep(0.05)
        # A no-op when the request carried no progressToken.
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
    return f"done {steps}"


@server.tool(structured_output=False)
async def sleep(seconds: float) -> str:
    """Sleeps `seconds`, then answers "slept"; notifications/cancelled aborts it."""
    await anyio.sleep(seconds)
    return "slept"


@server.tool(structured_output=False)
async def add_tool(name: str, ctx: Context) -> str:
    """Registers a new tool `name` (answering "I am {name}") and announces notifications/tools/list_changed."""

    def added() -> str:
        return f"I am {name}"

    server.add_tool(
        added,
        name=name,
        description=f"Added at run time by add_tool; answers 'I am {name}'.",
        structured_output=False,
    )
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        # 2026-07-28: change notifications only travel on subscriptions/listen streams.
        await ctx.notify_tools_changed()
    else:
        # Handshake era: send it on this request's own channel, so that over
        # streamable HTTP it arrives on the POST's SSE stream before the result
        # (a standalone notification would need an open GET stream).
        await ctx.session.send_notification(types.ToolListChangedNotification(), related_request_id=ctx.request_id)
    return "added"


@server.tool()
def image() -> types.CallToolResult:
    """Returns a tiny PNG image content plus a text content."""
    return types.CallToolResult(
        content=[
            types.ImageContent(type="image", data=TINY_PNG_BASE64, mimeType="image/png"),
            types.TextContent(type="text", text="a 2x2 PNG"),
        ]
    )


async def _serve_http(port: int, json_response: bool, stateless: bool) -> None:
    import uvicorn

    app = server.streamable_http_app(
        streamable_http_path="/mcp", json_response=json_response, stateless_http=stateless, host="127.0.0.1"
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.setblocking(False)
    bound = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))

    async def announce() -> None:
        while not uv.started:
            await anyio.sleep(0.01)
        print(f"listening http://127.0.0.1:{bound}/mcp", flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await uv.serve(sockets=[sock])
        tg.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="transport", required=True)
    sub.add_parser("stdio", help="serve one connection on stdin/stdout")
    http = sub.add_parser("http", help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    http.add_argument("--port", type=int, required=True, help="TCP port; 0 picks a free one")
    http.add_argument("--json-response", action="store_true", help="answer POSTs with JSON, not SSE")
    http.add_argument("--stateless", action="store_true", help="no sessions (no Mcp-Session-Id)")
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        try:
            anyio.run(_serve_http, args.port, args.json_response, args.stateless)
        except KeyboardInterrupt:
            pass
    sys.exit(0)


if __name__ == "__main__":
    main()
