#!/usr/bin/env python3
"""Shows the raw JSON-RPC exchange with the real MCP test servers.

Standard library only. Needs the servers installed and their environment:

    bash scripts/mcp-servers.sh install
    eval "$(bash scripts/mcp-servers.sh env)"
    python3 conformance/mcp/probe.py [everything-stdio everything-http python-stdio python-http ...]

For each target it sends the 2026-07-28 `server/discover` probe (with the
per-request `_meta` envelope and, over HTTP, the `MCP-Protocol-Version` and
`Mcp-Method` headers, as the official SDK clients send it), prints the answer,
then runs the 2025 handshake (`initialize` at 2025-11-25,
`notifications/initialized`), `tools/list` and a few `tools/call`s, printing
every message each way. Where the server answered `server/discover` on a
stdio connection (which then serves only the 2026 era), it also shows the
modern-era calls and starts a second process for the handshake.

`>>` is a message sent, `<<` one received; HTTP lines show status and headers.
"""

import json
import os
import queue
import shlex
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

HANDSHAKE_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
CLIENT_INFO = {"name": "omni-probe", "version": "0.1.0"}
TIMEOUT = 15.0


def modern_meta(extra=None):
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    meta.update(extra or {})
    return meta


def show(prefix, obj, limit=1500):
    text = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    if len(text) > limit:
        text = text[:limit] + f"... [{len(text)} chars]"
    print(f"{prefix} {text}", flush=True)


def section(title):
    print(f"\n==== {title}", flush=True)


# ---------------------------------------------------------------- stdio


class StdioPeer:
    def __init__(self, argv, label):
        self.label = label
        show("$", " ".join(shlex.quote(a) for a in argv))
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        self.lines = queue.Queue()
        self.stderr = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()
        self.next_id = 0

    @staticmethod
    def _pump(stream, q):
        for line in stream:
            q.put(line)
        q.put(None)

    def _pump_err(self):
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def send(self, msg):
        show(">>", msg)
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params=None, timeout=TIMEOUT):
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.wait_for(rid, timeout)

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def wait_for(self, rid, timeout=TIMEOUT):
        """Prints every message until the response to `rid`; answers server requests with an error."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                print(f"!! no answer to id {rid} within {timeout}s", flush=True)
                return None
            if line is None:
                print("!! stdout closed", flush=True)
                return None
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                show("<< (not JSON on stdout!)", line)
                continue
            show("<<", msg)
            if "method" in msg and "id" in msg:
                # A server-initiated request (roots/list, sampling, ...): refuse it.
                self.send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "not supported"}})
            elif msg.get("id") == rid and "method" not in msg:
                return msg

    def drain(self, seconds):
        """Prints whatever arrives within `seconds` (late notifications)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            if line is None:
                return
            if line.strip():
                show("<<", line.strip())

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            rc = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                rc = self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait()
        time.sleep(0.05)
        for line in self.stderr:
            show("   [stderr]", line, 300)
        print(f"   [exit {rc} after stdin closed]", flush=True)


def probe_stdio(argv, calls):
    section("server/discover (2026-07-28 probe), then the handshake on the same connection")
    peer = StdioPeer(argv, "stdio")
    answer = peer.request("server/discover", {"_meta": modern_meta()})
    discovered = answer is not None and "result" in answer
    if discovered:
        section("modern era on the same connection (each request carries the _meta envelope)")
        peer.request("tools/list", {"_meta": modern_meta()})
        for name, arguments, token in calls:
            meta = modern_meta({"progressToken": token} if token else None)
            peer.request("tools/call", {"name": name, "arguments": arguments, "_meta": meta})
        section("initialize on the connection that answered server/discover")
    handshake(peer, calls, discovered)
    if discovered:
        peer.close()
        section("handshake on a fresh process (no server/discover first)")
        peer = StdioPeer(argv, "stdio")
        handshake(peer, calls, False)
    peer.drain(1.0)
    peer.close()


def handshake(peer, calls, expect_refusal):
    init = peer.request(
        "initialize",
        {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO},
    )
    if init is None or "result" not in init:
        if expect_refusal:
            return
        print("!! initialize failed", flush=True)
        return
    peer.notify("notifications/initialized")
    peer.drain(0.5)  # e.g. list_changed sent once the server saw `initialized`
    peer.request("tools/list")
    for name, arguments, token in calls:
        params = {"name": name, "arguments": arguments}
        if token:
            params["_meta"] = {"progressToken": token}
        peer.request("tools/call", params)


# ---------------------------------------------------------------- HTTP


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} not listening after {timeout}s")


class HttpPeer:
    def __init__(self, url):
        self.url = url
        self.session_id = None
        self.protocol_version = None
        self.next_id = 0

    def post(self, msg, extra_headers=None, wait_id=None):
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        headers.update(extra_headers or {})
        show(">> POST", f"{self.url} {json.dumps(headers)}")
        show(">>", msg)
        req = urllib.request.Request(self.url, data=json.dumps(msg).encode(), headers=headers, method="POST")
        try:
            resp = urllib.request.urlopen(req, timeout=TIMEOUT)
        except urllib.error.HTTPError as e:
            body = e.read().decode(errors="replace")
            show("<< HTTP", f"{e.code} {dict(e.headers)}")
            show("<<", body)
            return e.code, dict(e.headers), [json.loads(body)] if body.strip().startswith("{") else []
        status = resp.status
        hdrs = {k.lower(): v for k, v in resp.headers.items()}
        show("<< HTTP", f"{status} content-type={hdrs.get('content-type')} mcp-session-id={hdrs.get('mcp-session-id')}")
        ctype = hdrs.get("content-type", "")
        messages = []
        if ctype.startswith("text/event-stream"):
            for event in sse_events(resp):
                show("<< [sse]", event)
                try:
                    m = json.loads(event["data"])
                except (KeyError, ValueError):
                    continue
                messages.append(m)
                if wait_id is not None and m.get("id") == wait_id and "method" not in m:
                    break
            resp.close()
        else:
            body = resp.read().decode(errors="replace")
            if body.strip():
                show("<<", body)
                messages.append(json.loads(body))
            else:
                show("<<", "(empty body)")
        return status, hdrs, messages

    def request(self, method, params=None, extra_headers=None):
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        return self.post(msg, extra_headers, wait_id=rid)

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        return self.post(msg)

    def open_get_stream(self, seconds):
        """Listens on the standalone GET SSE stream for `seconds` in a thread; returns the thread."""
        headers = {"Accept": "text/event-stream", "Mcp-Session-Id": self.session_id}
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version

        def run():
            req = urllib.request.Request(self.url, headers=headers, method="GET")
            try:
                resp = urllib.request.urlopen(req, timeout=seconds)
                show("<< GET", f"{resp.status} content-type={resp.headers.get('content-type')}")
                for event in sse_events(resp):
                    show("<< [GET sse]", event)
            except urllib.error.HTTPError as e:
                show("<< GET HTTP", f"{e.code} {e.read().decode(errors='replace')}")
            except (TimeoutError, socket.timeout, OSError):
                pass

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def delete(self):
        headers = {"Mcp-Session-Id": self.session_id}
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        req = urllib.request.Request(self.url, headers=headers, method="DELETE")
        try:
            resp = urllib.request.urlopen(req, timeout=TIMEOUT)
            show("<< DELETE", resp.status)
        except urllib.error.HTTPError as e:
            show("<< DELETE", f"{e.code} {e.read().decode(errors='replace')}")


def sse_events(resp):
    """Yields SSE events (dicts of event/id/data/retry) from a response read line by line."""
    event = {}
    data = []
    while True:
        raw = resp.readline()
        if not raw:
            break
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if line == "":
            if data or event:
                if data:
                    event["data"] = "\n".join(data)
                yield event
            event, data = {}, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field in ("event", "id", "retry"):
            event[field] = value


def probe_http(url, calls):
    section("server/discover (2026-07-28 probe: _meta envelope, MCP-Protocol-Version: 2026-07-28, Mcp-Method)")
    peer = HttpPeer(url)
    status, _, messages = peer.request(
        "server/discover",
        {"_meta": modern_meta()},
        {"MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": "server/discover"},
    )
    discovered = status == 200 and any("result" in m for m in messages)
    if discovered:
        section("modern era: stateless requests, each with the envelope and the headers")
        peer.request(
            "tools/list", {"_meta": modern_meta()}, {"MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": "tools/list"}
        )
        for name, arguments, token in calls[:2]:
            meta = modern_meta({"progressToken": token} if token else None)
            peer.request(
                "tools/call",
                {"name": name, "arguments": arguments, "_meta": meta},
                {"MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": "tools/call", "Mcp-Name": name},
            )

    section("server/discover without the 2026 header (as a 2025 server sees it)")
    HttpPeer(url).request("server/discover", {"_meta": modern_meta()})

    section("handshake: initialize, notifications/initialized, tools/list, tools/call")
    peer = HttpPeer(url)
    status, hdrs, messages = peer.request(
        "initialize", {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO}
    )
    peer.session_id = hdrs.get("mcp-session-id")
    result = next((m["result"] for m in messages if "result" in m), None)
    if result is None:
        print("!! initialize failed", flush=True)
        return
    peer.protocol_version = result.get("protocolVersion")
    peer.notify("notifications/initialized")
    getter = peer.open_get_stream(2.0) if peer.session_id else None
    time.sleep(0.5)
    peer.request("tools/list")
    for name, arguments, token in calls:
        params = {"name": name, "arguments": arguments}
        if token:
            params["_meta"] = {"progressToken": token}
        peer.request("tools/call", params)
    if getter:
        getter.join()
    if peer.session_id:
        section("a request without Mcp-Session-Id after initialize")
        HttpPeer(url).request("tools/list", None, {"MCP-Protocol-Version": HANDSHAKE_VERSION})
        peer.delete()


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- targets

EVERYTHING_CALLS = [
    ("echo", {"message": "hello"}, None),
    ("trigger-long-running-operation", {"duration": 0.4, "steps": 2}, "tok-1"),
    ("get-sum", {"a": 1, "b": 2}, None),
]
PYTHON_CALLS = [
    ("echo", {"text": "hello"}, None),
    ("progress", {"steps": 2}, "tok-1"),
    ("add", {"a": 2, "b": 3}, None),
    ("add_tool", {"name": "extra"}, None),
    ("extra", {}, None),
]


def env_cmd(var):
    value = os.environ.get(var)
    if not value:
        sys.exit(f"{var} is not set: run `eval \"$(bash scripts/mcp-servers.sh env)\"` first")
    return value


def everything_stdio():
    probe_stdio(shlex.split(env_cmd("OMNI_MCP_EVERYTHING")) + ["stdio"], EVERYTHING_CALLS)


def everything_http():
    port = free_port()
    argv = shlex.split(env_cmd("OMNI_MCP_EVERYTHING")) + ["streamableHttp"]
    show("$", f"PORT={port} " + " ".join(shlex.quote(a) for a in argv))
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, env={**os.environ, "PORT": str(port)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_port(port, proc)
        print(f"   [listening after {time.monotonic() - started:.2f}s]", flush=True)
        probe_http(f"http://127.0.0.1:{port}/mcp", EVERYTHING_CALLS)
    finally:
        stop(proc)


def python_argv():
    return [env_cmd("OMNI_MCP_PYTHON"), env_cmd("OMNI_MCP_PYSERVER")]


def python_stdio():
    probe_stdio(python_argv() + ["stdio"], PYTHON_CALLS)


def python_http(extra=()):
    argv = python_argv() + ["http", "--port", "0", *extra]
    show("$", " ".join(shlex.quote(a) for a in argv))
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline().strip()
        print(f"   [stdout: {line!r} after {time.monotonic() - started:.2f}s]", flush=True)
        if not line.startswith("listening "):
            raise RuntimeError("python server did not start")
        probe_http(line.split(" ", 1)[1], PYTHON_CALLS)
    finally:
        stop(proc)


TARGETS = {
    "everything-stdio": everything_stdio,
    "everything-http": everything_http,
    "python-stdio": python_stdio,
    "python-http": python_http,
    "python-http-json": lambda: python_http(["--json-response"]),
    "python-http-stateless": lambda: python_http(["--stateless"]),
}


def main():
    names = sys.argv[1:] or ["everything-stdio", "everything-http", "python-stdio", "python-http"]
    for name in names:
        if name not in TARGETS:
            sys.exit(f"unknown target {name}; known: {', '.join(TARGETS)}")
    for name in names:
        print(f"\n######## {name}", flush=True)
        TARGETS[name]()


if __name__ == "__main__":
    main()
