"""http_request: call a URL, check the status, return what came back.

The request itself (guard, redirects, the capped read) is app/tasks/catalog/http_fetch.py; this
module declares the config, checks what the schema cannot say, and turns a response into the
task's result or its failure. Standard library only at import time (the zygote imports it).

Secret headers name environment variables, never values: the deployer lists the variables a job
may use in HTTP_TASK_SECRETS, the worker's environment holds the values, and neither the job, the
output, the result nor the logs ever hold them. Cronwell's own credentials (DATABASE_URL,
SECRET_KEY...) are refused even when listed, so an operator cannot mail them to a server of their
choosing.
"""

from __future__ import annotations

import json
import os
import re

from app.sensitive import HTTP_TASK_SECRETS, http_task_secret_names, is_own_secret
from app.tasks.catalog import http_guard
from app.tasks.registry import TaskContext, task

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
DEFAULT_TIMEOUT_SECONDS = 30
MAX_TIMEOUT_SECONDS = 3600
MAX_REDIRECTS = 5
DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
MAX_URL_LENGTH = 2048
TEXT_BODY_LIMIT = 4096  # bytes of a non-JSON body kept in the result
JSON_BODY_LIMIT = 32 * 1024  # a larger JSON body is kept as its first TEXT_BODY_LIMIT bytes of text
ERROR_BODY_LIMIT = 500  # bytes of the body an unexpected status quotes in the error
# Response headers worth keeping in the result; Set-Cookie and the like are not.
RESULT_HEADERS = (
    "content-type",
    "content-length",
    "content-encoding",
    "location",
    "etag",
    "last-modified",
    "date",
    "server",
    "retry-after",
    "cache-control",
    "x-request-id",
)
# Headers the client owns: setting them by hand would desynchronise the request framing or
# send it somewhere other than the address the guard checked.
MANAGED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "upgrade", "te"})
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_STATUS_PATTERN = r"^(?:[1-5]xx|[1-5][0-9]{2}(?:-[1-5][0-9]{2})?)$"
_STATUS_ITEM = {
    "oneOf": [
        {"type": "integer", "minimum": 100, "maximum": 599},
        {"type": "string", "pattern": _STATUS_PATTERN},
    ]
}
_SCALAR = {"type": ["string", "integer", "number", "boolean"]}

SCHEMA = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "minLength": 1, "maxLength": MAX_URL_LENGTH},
        "method": {"enum": list(METHODS), "default": "GET"},
        "headers": {
            "type": "object",
            "additionalProperties": {"type": "string", "maxLength": 8192},
            "maxProperties": 64,
        },
        "query": {
            "type": "object",
            "additionalProperties": {"anyOf": [_SCALAR, {"type": "array", "items": _SCALAR, "maxItems": 100}]},
            "maxProperties": 100,
        },
        "json": {},
        "body": {"type": "string", "maxLength": 1024 * 1024},
        "timeout_seconds": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": MAX_TIMEOUT_SECONDS,
            "default": DEFAULT_TIMEOUT_SECONDS,
        },
        "expect_status": {
            "anyOf": [_STATUS_ITEM, {"type": "array", "items": _STATUS_ITEM, "minItems": 1, "maxItems": 50}],
            "default": "2xx",
        },
        "follow_redirects": {"type": "boolean", "default": False},
        "max_response_bytes": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_RESPONSE_BYTES,
            "default": DEFAULT_MAX_RESPONSE_BYTES,
        },
        "verify_tls": {"type": "boolean", "default": True},
        "secret_headers": {
            "type": "object",
            "additionalProperties": {"type": "string", "pattern": _ENV_NAME.pattern},
            "maxProperties": 16,
        },
    },
    "required": ["url"],
    "additionalProperties": False,
}


def status_matcher(expect) -> list[tuple[int, int]]:
    """`expect_status` (200, "2xx", "200-204" or a list of those) as inclusive ranges."""
    items = expect if isinstance(expect, list) else [expect]
    ranges = []
    for item in items:
        if isinstance(item, int):
            ranges.append((item, item))
        elif item.endswith("xx"):
            ranges.append((int(item[0]) * 100, int(item[0]) * 100 + 99))
        else:
            low, _, high = item.partition("-")
            low_code, high_code = int(low), int(high or low)
            if low_code > high_code:
                raise ValueError(f"key 'expect_status': range {item!r} runs backwards")
            ranges.append((low_code, high_code))
    return ranges


def describe_expected(expect) -> str:
    items = expect if isinstance(expect, list) else [expect]
    return ", ".join(str(item) for item in items)


def secret_header_values(secret_headers: dict, environ=None) -> dict[str, str]:
    """The values of the secret headers, from the environment; ValueError for a variable that is
    not listed in HTTP_TASK_SECRETS, is one of Cronwell's own, or is not set."""
    environ = os.environ if environ is None else environ
    check_secret_names(secret_headers, environ)
    values = {}
    for header, variable in secret_headers.items():
        value = environ.get(variable)
        if not value:
            raise ValueError(f"key 'secret_headers': variable {variable!r} is not set in the worker's environment")
        values[header] = value
    return values


def check_secret_names(secret_headers: dict, environ=None) -> None:
    """Refuse a secret header whose variable the deployer did not list, or that is Cronwell's own."""
    listed = http_task_secret_names(environ)
    for header, variable in secret_headers.items():
        if is_own_secret(variable):
            raise ValueError(
                f"key 'secret_headers.{header}': {variable!r} is one of Cronwell's own secrets and is never sent"
            )
        if variable not in listed:
            raise ValueError(
                f"key 'secret_headers.{header}': variable {variable!r} is not listed in {HTTP_TASK_SECRETS}"
            )


def _check_config(config: dict) -> None:
    """What the JSON Schema cannot say: the URL's shape, header names, status ranges, secrets."""
    try:
        http_guard.validate_url_shape(config["url"])
    except http_guard.RefusedTarget as exc:
        raise ValueError(f"key 'url': {exc}") from None
    if "json" in config and "body" in config:
        raise ValueError("give 'json' or 'body', not both")
    headers = config.get("headers", {})
    secret_headers = config.get("secret_headers", {})
    for key, names in (("headers", headers), ("secret_headers", secret_headers)):
        for name in names:
            if not _HEADER_NAME.match(name):
                raise ValueError(f"key '{key}': {name!r} is not a valid header name")
            if name.lower() in MANAGED_HEADERS:
                raise ValueError(f"key '{key}': header {name!r} is set by the client, not by the config")
    for name, value in headers.items():
        if "\r" in value or "\n" in value or "\0" in value:
            raise ValueError(f"key 'headers.{name}': a header value must not hold a line break")
    both = {name.lower() for name in headers} & {name.lower() for name in secret_headers}
    if both:
        raise ValueError(f"header(s) {', '.join(sorted(both))} given in both 'headers' and 'secret_headers'")
    status_matcher(config.get("expect_status", "2xx"))
    check_secret_names(secret_headers)


@task(
    "http_request",
    description=(
        "Send one HTTP(S) request to `url` and fail unless the status is in `expect_status` (default "
        "2xx). Config: method (GET), headers, query, json or body, timeout_seconds (30), "
        "follow_redirects (off; at most 5), max_response_bytes (1 MiB; the read stops there), "
        "verify_tls (on), secret_headers (header -> name of a variable listed in HTTP_TASK_SECRETS). "
        "Loopback, private, link-local/metadata, multicast and unspecified addresses are refused "
        "unless HTTP_TASK_ALLOW allows them. Returns status, elapsed_ms, headers and body."
    ),
    schema=SCHEMA,
)
def http_request(config: dict, ctx: TaskContext) -> dict:
    """Send the request, print a one-line summary, and return the result (or raise on a bad status)."""
    from app.tasks.catalog import http_fetch  # httpx and ssl: keep them out of the zygote

    _check_config(config)  # again: the worker's HTTP_TASK_SECRETS may be stricter than the web's
    secrets = secret_header_values(config.get("secret_headers", {}))
    allowance = http_guard.parse_allowance(os.environ.get(http_guard.ALLOW_VARIABLE))
    expect = config.get("expect_status", "2xx")
    method = config.get("method", "GET")
    response = http_fetch.fetch(
        http_fetch.Request(
            method=method,
            url=config["url"],
            headers={**config.get("headers", {}), **secrets},
            query=config.get("query", {}),
            json_body=config.get("json"),
            has_json="json" in config,
            body=config.get("body"),
            timeout_seconds=config.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS),
            follow_redirects=config.get("follow_redirects", False),
            max_redirects=MAX_REDIRECTS,
            max_response_bytes=config.get("max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES),
            verify_tls=config.get("verify_tls", True),
            secret_header_names=frozenset(name.lower() for name in secrets),
        ),
        allowance,
    )
    body = _redact(response.body, secrets.values())
    truncated = " (read stopped at max_response_bytes)" if response.truncated else ""
    print(
        f"{method} {response.url} -> {response.status} {response.reason} in {response.elapsed_ms} ms, "
        f"{len(response.body)} bytes{truncated}"
    )
    if not any(low <= response.status <= high for low, high in status_matcher(expect)):
        excerpt = body[:ERROR_BODY_LIMIT].decode("utf-8", errors="replace")
        raise UnexpectedStatus(
            f"{method} {response.url} answered {response.status} {response.reason}, expected "
            f"{describe_expected(expect)}: {excerpt!r}"
        )
    return {
        "status": response.status,
        "elapsed_ms": response.elapsed_ms,
        "headers": {
            name: _redact(value.encode(), secrets.values()).decode()
            for name, value in response.headers.items()
            if name in RESULT_HEADERS
        },
        "body": _result_body(body, response.headers.get("content-type", ""), response.truncated),
    }


http_request.extra_validation = _check_config


class UnexpectedStatus(RuntimeError):
    """The server answered, with a status the job does not expect: the attempt fails (and may be
    retried by the job's policy)."""


def _result_body(body: bytes, content_type: str, truncated: bool):
    """Parsed JSON for a complete JSON body of reasonable size; otherwise text, up to 4 KB."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    if (
        not truncated
        and len(body) <= JSON_BODY_LIMIT
        and (media_type == "application/json" or media_type.endswith("+json"))
    ):
        try:
            return json.loads(body)
        except ValueError:
            pass
    return body[:TEXT_BODY_LIMIT].decode("utf-8", errors="ignore" if len(body) > TEXT_BODY_LIMIT else "replace")


def _redact(data: bytes, secrets) -> bytes:
    """`data` with every secret header value replaced: a server that echoes request headers
    (httpbin and friends) would otherwise copy them into the result."""
    for value in secrets:
        data = data.replace(value.encode(), b"[redacted]")
    return data
