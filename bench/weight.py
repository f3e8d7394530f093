#!/usr/bin/env python3
"""Weight of a hello-stream program per driver, against a bare reqwest SSE loop (issue 25).

    python3 bench/weight.py            # every build, then the table
    python3 bench/weight.py --keep     # keep the target directories (in $WEIGHT_DIR or a temp dir)

For each program of bench/weight/ and feature set: a clean `cargo build --release` (stripped:
the weight workspace's release profile) in a target directory of its own; its CPU (user +
system of cargo and every compiler it ran, the kernel's account of the waited-for children),
the binary's size, and both as ratios to the baseline's. Each binary is then run once
against a loopback Chat Completions server, and must print the reply.
"""
import http.server
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WEIGHT = os.path.join(HERE, "weight")

# (label, package, cargo feature arguments)
BUILDS = [
    ("baseline: reqwest + tokio SSE loop", "baseline", []),
    ("omni-tokio, default features", "hello-tokio", []),
    ("omni-tokio, minimal", "hello-tokio", ["--no-default-features", "--features", "minimal"]),
    ("omni-smol, default features", "hello-smol", []),
    ("omni-smol, minimal", "hello-smol", ["--no-default-features", "--features", "minimal"]),
    ("omni-blocking, default features", "hello-blocking", []),
    ("omni-blocking, minimal", "hello-blocking", ["--no-default-features", "--features", "minimal"]),
]

REPLY = ["Hel", "lo", ", world"]


class Sse(http.server.BaseHTTPRequestHandler):
    """A Chat Completions stream of REPLY, whatever the request."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        events = [{"choices": [{"index": 0, "delta": {"content": t}}]} for t in REPLY]
        events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def build(package, features, target):
    env = dict(os.environ, CARGO_TARGET_DIR=target, CARGO_INCREMENTAL="0")
    before = children_cpu()
    start = time.monotonic()
    subprocess.run(
        ["cargo", "build", "--release", "--locked", "-q", "-p", package, *features],
        cwd=WEIGHT, env=env, check=True,
    )
    return children_cpu() - before, time.monotonic() - start


def main():
    keep = "--keep" in sys.argv
    root = os.environ.get("WEIGHT_DIR") or tempfile.mkdtemp(prefix="omni-weight-")
    # Dependencies fetched once, outside the timed builds.
    subprocess.run(["cargo", "fetch", "--locked"], cwd=WEIGHT, check=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    rows = []
    for i, (label, package, features) in enumerate(BUILDS):
        target = os.path.join(root, f"{i}-{package}")
        shutil.rmtree(target, ignore_errors=True)
        cpu, wall = build(package, features, target)
        binary = os.path.join(target, "release", package)
        size = os.path.getsize(binary)
        out = subprocess.run([binary, url], capture_output=True, text=True, timeout=60)
        if out.returncode != 0 or "".join(REPLY) not in out.stdout:
            sys.exit(f"{label}: the program did not print the reply: {out.stdout!r} {out.stderr!r}")
        rows.append((label, size, cpu, wall))
        print(f"{label}: {size / 1e6:.2f} MB, build {cpu:.0f} s CPU ({wall:.0f} s)", file=sys.stderr, flush=True)
        if not keep:
            shutil.rmtree(target, ignore_errors=True)
    server.shutdown()
    base_size, base_cpu = rows[0][1], rows[0][2]
    print(f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, `python3 bench/weight.py`:\n")
    print("| program | stripped size | × baseline | release build CPU | × baseline |")
    print("|---|---:|---:|---:|---:|")
    for label, size, cpu, _ in rows:
        print(f"| {label} | {size / 1e6:.2f} MB | {size / base_size:.2f} | {cpu:.0f} s | {cpu / base_cpu:.2f} |")
    if keep:
        print(f"\ntarget directories kept in {root}", file=sys.stderr)
    elif not os.environ.get("WEIGHT_DIR"):
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
