"""A loopback webhook receiver for alert delivery tests: scripted answers, every request kept."""

from __future__ import annotations

import hashlib
import hmac
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    """A loopback HTTP server answering each POST with the next scripted status (then 200).

    `hold` (an Event) makes the first request wait until it is set: a sender killed meanwhile
    never learns the answer."""

    def __init__(self, statuses=(), hold: threading.Event | None = None):
        self.statuses = list(statuses)
        self.requests: list[tuple[dict, bytes]] = []
        self.hold = hold
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                if receiver.hold is not None and len(receiver.requests) == 1:
                    receiver.hold.wait(30)
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                try:
                    self.send_response(status)
                    self.end_headers()
                except OSError:
                    pass  # the sender is gone

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()


def signature_ok(secret: str, headers: dict, body: bytes) -> bool:
    """Whether X-Cronwell-Signature is the HMAC-SHA256 of "<X-Cronwell-Timestamp>.<body>"."""
    timestamp = headers["x-cronwell-timestamp"]
    expected = "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers.get("x-cronwell-signature", ""), expected)
