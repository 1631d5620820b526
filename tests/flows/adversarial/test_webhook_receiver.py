"""The Label Studio webhook receiver against strangers and slow or oversized senders, on a real loopback server.

Raw sockets, so that the test controls when (and whether) the body is sent: a stranger must be answered 401 from
its headers alone, an authorised body is cut at the limit as it streams in, and a stalled body times out.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from labelgate.flows import label_studio_webhook as receiving

SECRET = "s3cret-for-tests"


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[receiving.WebhookReceiver, int]]:
    monkeypatch.setattr(receiving, "MAX_BODY_BYTES", 64 * 1024)
    monkeypatch.setattr(receiving, "BODY_TIMEOUT_SECONDS", 1.0, raising=False)
    receiver = receiving.WebhookReceiver(SECRET, quiet_seconds=60)
    stop, started = threading.Event(), threading.Event()
    ports: list[int] = []

    def on_started(port: int) -> None:
        ports.append(port)
        started.set()

    thread = threading.Thread(target=receiver.serve, args=("127.0.0.1", 0, stop),
                              kwargs={"on_started": on_started}, daemon=True)
    thread.start()
    assert started.wait(60), "the receiver did not start"
    yield receiver, ports[0]
    stop.set()
    thread.join(timeout=30)


def _open(port: int, headers: dict[str, str]) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    lines = [f"POST {receiving.ROUTE} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    return sock


def _status(sock: socket.socket) -> int:
    """The status code of the answer (waits at most the socket's timeout)."""
    data = b""
    while b"\r\n" not in data:
        piece = sock.recv(4096)
        if not piece:
            break
        data += piece
    return int(data.split(b" ", 2)[1])


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


@pytest.mark.parametrize("framing", ["chunked", "content-length"])
def test_a_stranger_is_refused_from_its_headers_before_its_body_is_read(served, framing):
    # The review's probe: chunked bodies were buffered whole (300 MB each) and JSON parsed before the 401. Here the
    # body is never sent at all: the 401 must come anyway, at once.
    receiver, port = served
    framing_header = ({"Transfer-Encoding": "chunked"} if framing == "chunked"
                      else {"Content-Length": str(20 * 1024 * 1024)})
    sock = _open(port, {"Content-Type": "application/json", **framing_header})
    try:
        if framing == "chunked":
            sock.sendall(_chunk(b'{"action": "ANNOTATION_CREATED", '))  # ...and nothing more
        assert _status(sock) == 401
    finally:
        sock.close()
    assert receiver.received == 0 and receiver.refused >= 1


def test_an_authorised_chunked_body_is_cut_at_the_limit_as_it_streams(served):
    receiver, port = served
    sock = _open(port, {"X-LabelGate-Secret": SECRET, "Transfer-Encoding": "chunked"})
    sent = 0
    try:
        block = _chunk(b"x" * 8192)
        sock.settimeout(0.05)
        status = None
        while status is None and sent < 50 * 1024 * 1024:  # far past the limit: the server must stop before
            try:
                sock.sendall(block)
                sent += len(block)
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                pass
            try:
                status = _status(sock)
            except TimeoutError:
                continue
        assert status == 413
    finally:
        sock.close()
    assert receiver.received == 0
    assert sent < 50 * 1024 * 1024


def test_a_stalled_body_times_out(served):
    receiver, port = served
    sock = _open(port, {"X-LabelGate-Secret": SECRET, "Content-Length": "1000"})
    try:
        sock.sendall(b'{"action": ')  # then silence
        sock.settimeout(20)
        assert _status(sock) == 408
    finally:
        sock.close()
    assert receiver.received == 0


def test_an_authorised_delivery_is_still_queued(served):
    receiver, port = served
    body = json.dumps({"action": "ANNOTATION_CREATED", "project": {"id": 3}, "task": {"id": 8},
                       "annotation": {"id": 80, "task": 8}}).encode()
    sock = _open(port, {"X-LabelGate-Secret": SECRET, "Content-Type": "application/json",
                        "Content-Length": str(len(body))})
    try:
        sock.sendall(body)
        assert _status(sock) == 202
    finally:
        sock.close()
    assert receiver.received == 1
