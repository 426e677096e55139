"""Over-long URLs answer 414 as a problem document, whoever refuses them.

Up to MAX_URL_BYTES (4096) the API reads a URL; above it the API refuses it itself (414, with the
URL's path as `instance`); above gunicorn's hard cap on a request line (8190 bytes) gunicorn
refuses it before the app sees it, and answers a problem document too (app/api/server_errors.py),
as it does for anything else it cannot parse. Through a real gunicorn, with raw sockets, so the
bytes on the wire are exactly the ones counted.
"""

from __future__ import annotations

import json
import socket

import pytest

from app.api.openapi import MAX_URL_BYTES
from app.clock import utcnow
from app.services.caller import Caller
from app.services.use_cases import tokens
from tests.factories import make_user


@pytest.fixture
def backend():
    return "sqlite"


def url_of(size: int, path: str = "/api/v1/jobs") -> str:
    """`path` with a padding query parameter (ignored by the API) making the URL `size` bytes long."""
    prefix = f"{path}?pad="
    return prefix + "x" * (size - len(prefix))


def test_the_api_reads_urls_up_to_the_limit_and_refuses_longer_ones(app, api, people):
    api.login("viewer")
    assert api.get(url_of(MAX_URL_BYTES)).status_code == 200
    refused = api.get(url_of(MAX_URL_BYTES + 1))
    assert refused.status_code == 414
    assert refused.headers["Content-Type"] == "application/problem+json"
    body = refused.get_json()
    assert (body["status"], body["title"], body["instance"]) == (414, "URI too long", "/api/v1/jobs")
    assert body["detail"] == f"the URL is {MAX_URL_BYTES + 1} bytes long; the API reads URLs of up to 4096 bytes"
    # Before authentication: the same answer without a credential, and a long path counts as well.
    assert api.get(url_of(MAX_URL_BYTES + 1), token="").status_code == 414
    assert api.get("/api/v1/workers/" + "w" * MAX_URL_BYTES).status_code == 414


def test_the_web_ui_is_not_limited_by_the_api(app, api):
    assert api.get(url_of(MAX_URL_BYTES + 1, path="/auth/login")).status_code == 200


def raw_request(base: str, request_line: str, headers: str = "") -> tuple[int, dict, bytes]:
    """Send one request as bytes; (status, headers, body) of the answer."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(f"{request_line}\r\nHost: {host}\r\n{headers}Connection: close\r\n\r\n".encode("latin-1"))
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in fields.items()}, body


@pytest.mark.slow
def test_through_gunicorn_every_refusal_of_a_long_url_is_a_problem_document(app, api_server):
    base, _log = api_server
    admin = make_user("long-urls", "long-urls-pw", role="admin")
    secret = tokens.create_token(
        Caller.cli(), name="long-urls", project=None, role="viewer", user_id=admin.id, now=utcnow()
    ).secret
    auth = f"Authorization: Bearer {secret}\r\n"

    status, _, body = raw_request(base, f"GET {url_of(MAX_URL_BYTES)} HTTP/1.1", auth)
    assert status == 200 and "items" in json.loads(body)

    # Between the API's limit and gunicorn's cap: the API refuses it, naming the path.
    status, headers, body = raw_request(base, f"GET {url_of(MAX_URL_BYTES + 1)} HTTP/1.1", auth)
    assert (status, headers["content-type"]) == (414, "application/problem+json")
    assert json.loads(body)["instance"] == "/api/v1/jobs"
    # The longest request line gunicorn reads (8190 bytes, the method and version included).
    longest = 8190 - len("GET  HTTP/1.1")
    status, headers, body = raw_request(base, f"GET {url_of(longest)} HTTP/1.1", auth)
    assert (status, headers["content-type"]) == (414, "application/problem+json")
    assert json.loads(body)["detail"].startswith(f"the URL is {longest} bytes long")

    # Past gunicorn's cap: gunicorn refuses it before the app, with a problem document too.
    for size in (longest + 1, 20_000):
        status, headers, body = raw_request(base, f"GET {url_of(size)} HTTP/1.1", auth)
        assert (status, headers["content-type"]) == (414, "application/problem+json"), body[:200]
        problem = json.loads(body)
        assert (problem["status"], problem["title"], problem["type"]) == (414, "URI too long", "about:blank")
        assert int(headers["content-length"]) == len(body)

    # Anything else gunicorn cannot parse is a problem document as well (a malformed header here).
    status, headers, body = raw_request(base, "GET /api/v1/me HTTP/1.1", "Bad Header Name: x\r\n")
    assert (status, headers["content-type"]) == (400, "application/problem+json")
    assert json.loads(body)["status"] == 400
