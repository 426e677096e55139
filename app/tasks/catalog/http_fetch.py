"""One guarded HTTP exchange for the `http_request` task, on httpx.

Each hop (the first URL, then every redirect) goes through the guard, and httpx is pointed at the
address the guard checked, with the name kept in the Host header and in TLS (SNI and certificate
check): the name is resolved exactly once per hop, so a DNS answer that changes between the check
and the connection (rebinding) cannot redirect the request. Redirects are followed here, not by
httpx, for the same reason. No proxy or .netrc from the environment is used.

Imported only inside the running task (httpx brings ssl and hashlib, which the zygote keeps out).
"""

from __future__ import annotations

import ssl
import sys
import time
import types
from dataclasses import dataclass, field
from urllib.parse import urljoin

from app.tasks.catalog import http_guard


def _skip_httpx_command_line() -> None:
    """Keep httpx's command-line client out of the task process.

    `import httpx` also imports `httpx._main` (its CLI) when rich, click and pygments are installed,
    as they are beside Cronwell; that is over a third of the import, paid by every run of the task
    in its fresh process. The task never uses the CLI, so a stand-in takes its place."""
    if "httpx._main" not in sys.modules:
        stand_in = types.ModuleType("httpx._main")

        def main(*args, **kwargs):  # pragma: no cover - never called in a task process
            raise RuntimeError("httpx's command-line client is not loaded in Cronwell task processes")

        stand_in.main = main
        sys.modules["httpx._main"] = stand_in


_skip_httpx_command_line()
import httpx  # noqa: E402 - after the stand-in above

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# identity unless the config asks otherwise: a compressed body is decoded before the size cap
# counts it, so a small gzip bomb could fill the memory the cap protects.
DEFAULT_HEADERS = {"User-Agent": "cronwell-http-request", "Accept-Encoding": "identity"}


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    headers: dict[str, str]
    query: dict
    json_body: object
    has_json: bool
    body: str | None
    timeout_seconds: float
    follow_redirects: bool
    max_redirects: int
    max_response_bytes: int
    verify_tls: bool
    # Dropped when a redirect leaves the first origin, as is Authorization.
    secret_header_names: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Response:
    url: str  # the URL that gave this answer (after redirects)
    status: int
    reason: str
    headers: dict[str, str]  # lower-case names; repeated headers joined with ", "
    body: bytes
    truncated: bool
    elapsed_ms: int


class RequestFailed(ConnectionError):
    """The exchange did not complete (refused, timed out, TLS, too many redirects)."""


def fetch(request: Request, allowance: http_guard.Allowance, resolve=http_guard.system_resolver) -> Response:
    """Send `request`, following redirects if asked, and read at most max_response_bytes."""
    started = time.monotonic()
    deadline = started + request.timeout_seconds
    try:
        url = _with_query(request.url, request.query)
    except httpx.InvalidURL as exc:
        raise RequestFailed(f"{request.method} {request.url}: not a valid URL ({exc})") from None
    method, headers = request.method, dict(request.headers)
    content, json_body, has_json = request.body, request.json_body, request.has_json
    first_origin = None
    needs_tls = request.follow_redirects or url.lower().startswith("https:")
    verify = _tls_context(request.verify_tls) if needs_tls else False
    # No kept-alive connections: httpx pools by the address it connects to, and a TLS connection
    # verified for one name must not carry a redirect to another name on the same address.
    no_reuse = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(verify=verify, trust_env=False, follow_redirects=False, limits=no_reuse) as client:
        for hop in range(request.max_redirects + 1):
            target = http_guard.check_url(url, allowance, resolve)
            first_origin = first_origin or target.origin
            if target.origin != first_origin:
                headers = _without(headers, request.secret_header_names | {"authorization", "cookie"})
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RequestFailed(f"{method} {url} timed out after {request.timeout_seconds:g} s")
            answer = _send_to_checked(
                client,
                target,
                method=method,
                headers=headers,
                content=None if has_json else content,
                json_body=json_body if has_json else None,
                timeout=remaining,
                describe=f"{method} {url}",
                timeout_seconds=request.timeout_seconds,
            )
            try:
                location = answer.headers.get("location")
                if request.follow_redirects and answer.status_code in REDIRECT_STATUSES and location:
                    if hop == request.max_redirects:
                        raise RequestFailed(f"{method} {request.url}: more than {request.max_redirects} redirects")
                    url = urljoin(url, location)
                    if answer.status_code == 303 or (answer.status_code in (301, 302) and method == "POST"):
                        # What browsers and every client do: the body is not sent on.
                        method, content, json_body, has_json = (
                            ("HEAD" if method == "HEAD" else "GET"),
                            None,
                            None,
                            False,
                        )
                        headers = _without(headers, {"content-type"})
                    continue
                body, truncated = _read_capped(answer, request.max_response_bytes, deadline, method, url)
                return Response(
                    url=url,
                    status=answer.status_code,
                    reason=answer.reason_phrase,
                    headers={name: ", ".join(answer.headers.get_list(name)) for name in answer.headers.keys()},
                    body=body,
                    truncated=truncated,
                    elapsed_ms=round((time.monotonic() - started) * 1000),
                )
            finally:
                answer.close()
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover


def _send_to_checked(
    client: httpx.Client,
    target: http_guard.CheckedTarget,
    *,
    method: str,
    headers: dict[str, str],
    content: str | None,
    json_body: object,
    timeout: float,
    describe: str,
    timeout_seconds: float,
) -> httpx.Response:
    """Send to the first checked address that accepts a connection (a name often has an IPv6
    and an IPv4 answer, and only one may listen); any other failure is final."""
    failure = None
    for address in target.addresses:
        outgoing = client.build_request(
            method,
            target.connect_url(address),
            headers=_outgoing_headers(headers, target.host_header()),
            content=content,
            json=json_body,
            timeout=httpx.Timeout(timeout),
            extensions={"sni_hostname": target.host} if target.scheme == "https" else {},
        )
        try:
            return client.send(outgoing, stream=True)
        except httpx.ConnectError as exc:
            failure = exc
        except httpx.TimeoutException:
            raise RequestFailed(f"{describe} timed out after {timeout_seconds:g} s") from None
        except httpx.HTTPError as exc:
            raise RequestFailed(f"{describe} failed: {_reason(exc)}") from None
    raise RequestFailed(f"{describe} failed: {_reason(failure)}")


_TLS_CONTEXTS: dict[bool, ssl.SSLContext] = {}


def _tls_context(verify: bool) -> ssl.SSLContext:
    """One TLS context per process and setting: loading the CA bundle costs more than a request
    to a nearby server, and a pool process (isolation = pool) reuses it across attempts."""
    if verify not in _TLS_CONTEXTS:
        _TLS_CONTEXTS[verify] = httpx.create_ssl_context(verify=verify)
    return _TLS_CONTEXTS[verify]


def _read_capped(answer: httpx.Response, limit: int, deadline: float, method: str, url: str) -> tuple[bytes, bool]:
    """Read the body up to `limit` bytes and stop there (the rest is never downloaded)."""
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in answer.iter_bytes():
            if size + len(chunk) > limit:
                chunks.append(chunk[: limit - size])
                return b"".join(chunks), True
            chunks.append(chunk)
            size += len(chunk)
            if time.monotonic() > deadline:
                raise RequestFailed(f"{method} {url} timed out reading the body")
    except httpx.TimeoutException:
        raise RequestFailed(f"{method} {url} timed out reading the body") from None
    except httpx.HTTPError as exc:
        raise RequestFailed(f"{method} {url} failed reading the body: {_reason(exc)}") from None
    return b"".join(chunks), False


def _with_query(url: str, query: dict) -> str:
    """`url` with the config's query parameters appended to any it already has."""
    if not query:
        return url
    merged = httpx.URL(url)
    for name, value in query.items():
        for item in value if isinstance(value, list) else [value]:
            merged = merged.copy_add_param(name, _query_text(item))
    return str(merged)


def _query_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _outgoing_headers(headers: dict[str, str], host_header: str) -> dict[str, str]:
    given = {name.lower() for name in headers}
    defaults = {name: value for name, value in DEFAULT_HEADERS.items() if name.lower() not in given}
    return {**defaults, **headers, "Host": host_header}


def _without(headers: dict[str, str], names: frozenset[str] | set[str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if name.lower() not in names}


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:300]
