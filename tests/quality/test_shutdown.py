"""Graceful shutdown and request ids on a live server: SIGTERM lets an in-flight request finish."""

from __future__ import annotations

import json
import signal
import socket
import time

import pytest
from quality_live import LiveServer, ServerFactory

pytestmark = pytest.mark.slow

ESTIMATE = json.dumps(
    {
        "model": "llama-3.1-8b",
        "accelerator": "h100-sxm",
        "input_tokens": 512,
        "output_tokens": 64,
        "batch_sizes": [1, 8],
    }
).encode()
# Time for the server to parse the head and start handling; a wait, not an assertion.
HEAD_SETTLE_S = 1.0


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Read one HTTP/1.1 response with a Content-Length body from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"connection closed after {data!r}")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(status_line.split()[1]), headers, body


def test_sigterm_finishes_the_request_in_flight(live_server_factory: ServerFactory) -> None:
    server: LiveServer = live_server_factory()
    server.start()
    assert server.process is not None
    head = (
        "POST /v1/estimates HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{server.port}\r\n"
        "Content-Type: application/json\r\n"
        "X-Request-ID: shutdown-probe-1\r\n"
        f"Content-Length: {len(ESTIMATE)}\r\n\r\n"
    ).encode()
    half = len(ESTIMATE) // 2
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        # The request is in flight: its head and half its body are in, the rest comes later.
        sock.sendall(head + ESTIMATE[:half])
        time.sleep(HEAD_SETTLE_S)
        server.process.send_signal(signal.SIGTERM)
        time.sleep(HEAD_SETTLE_S)
        sock.sendall(ESTIMATE[half:])
        status, headers, body = read_response(sock)
    assert status == 200, body
    assert [p["batch_size"] for p in json.loads(body)["points"]] == [1, 8]
    assert headers["x-request-id"] == "shutdown-probe-1"
    exit_status = server.process.wait(timeout=60)
    log = server.log()
    assert exit_status in (0, -signal.SIGTERM), log
    assert "Application shutdown complete" in log
    # The JSON access log names the request by its id.
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    probe = [r for r in lines if r.get("request_id") == "shutdown-probe-1"]
    assert [(r["path"], r["status"]) for r in probe] == [("/v1/estimates", 200)]
