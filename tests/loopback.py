"""A loopback HTTP receiver for the tests of alert and event delivery (one for every test that counts POSTs)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections import Counter
from typing import Any


class Receiver:
    """Records every POST on 127.0.0.1 (path, headers, body) and counts them per ``Idempotency-Key``.

    ``statuses`` are answered in turn (then 200); each answer waits ``delay`` seconds (the receiver's own latency);
    with ``json_bodies`` the recorded body is the parsed JSON, else the raw bytes.
    """

    def __init__(self, statuses: list[int] | None = None, *, delay: float = 0.0, json_bodies: bool = False) -> None:
        self.requests: list[dict[str, Any]] = []
        self.keys: Counter[str] = Counter()
        self.statuses = list(statuses or [])
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                owner.keys[self.headers.get("Idempotency-Key", "")] += 1
                owner.requests.append({"path": self.path, "headers": dict(self.headers),
                                       "body": json.loads(raw) if json_bodies else raw})
                if delay:
                    time.sleep(delay)  # the receiver's own latency, not a wait in the test
                self.send_response(owner.statuses.pop(0) if owner.statuses else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
