"""A loopback HTTP server playing the far end of the `http_request` task: every request kept as
it arrived on the wire, answers chosen by path.

    /echo            200, JSON: method, path, query, body as text
    /status/NNN      status NNN, body "status NNN body ..." (longer than 500 bytes)
    /bytes/N         200, N bytes of text/plain, Content-Length set
    /stream/N        200, N bytes of text/plain in 64 KiB chunks, no Content-Length
    /redirect?to=U   302 (or &status=S) to U
    /hang            holds the request until the server closes (a server that never answers)
"""

from __future__ import annotations

import json
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes


class Origin:
    """The server; `url(path)` addresses it on 127.0.0.1. Use as a context manager."""

    def __init__(self, tls: tuple[str, str] | None = None) -> None:
        """`tls`: (certificate file, key file) to answer HTTPS instead of HTTP."""
        self.requests: list[Seen] = []
        self.closing = threading.Event()
        origin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                origin.requests.append(
                    Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                route = parts.path.strip("/").split("/")
                if route[0] == "echo":
                    payload = {"method": self.command, "path": parts.path, "query": query, "body": body.decode()}
                    self._answer(200, json.dumps(payload).encode(), "application/json")
                elif route[0] == "status":
                    status = int(route[1])
                    self._answer(status, f"status {status} body ".encode() + b"x" * 600, "text/plain")
                elif route[0] == "bytes":
                    self._answer(200, b"a" * int(route[1]), "text/plain")
                elif route[0] == "stream":
                    self._stream(int(route[1]))
                elif route[0] == "redirect":
                    self.send_response(int(query.get("status", ["302"])[0]))
                    self.send_header("Location", query["to"][0])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif route[0] == "hang":
                    origin.closing.wait(30)
                else:
                    self._answer(404, b"no such route", "text/plain")

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _any  # noqa: N815

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Set-Cookie", "session=abc")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _stream(self, size: int) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Connection", "close")
                self.end_headers()
                sent = 0
                try:
                    while sent < size:
                        chunk = b"s" * min(65536, size - sent)
                        self.wfile.write(chunk)
                        sent += len(chunk)
                except OSError:
                    pass  # the client stopped reading, as it should
                origin.streamed = sent
                self.close_connection = True

            def log_message(self, *args) -> None:
                pass

        self.streamed = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def url(self, path: str = "/echo", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def __enter__(self) -> Origin:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()
