"""http_health_check_local: GET a loopback URL and check its status.

Only loopback targets are allowed, so a job cannot be turned into a probe of the internal network
(SSRF). The host must be written literally as `localhost`, a canonical dotted-quad address in
127.0.0.0/8, or `[::1]`; numeric spellings that some resolvers accept (`2130706433`, `0x7f.1`,
`017700000001`) are refused rather than interpreted. The request goes straight to that host with
http.client: no proxy from the environment, and redirects are never followed (a 3xx is just the
status that was received).
"""

from __future__ import annotations

import ipaddress
import re
import time
from typing import NamedTuple
from urllib.parse import urlsplit

from app.tasks.registry import TaskContext, task

DEFAULT_TIMEOUT_SECONDS = 5
DEFAULT_EXPECT_STATUS = 200
MAX_URL_LENGTH = 2048
_DOTTED_QUAD = re.compile(r"(?:0|[1-9][0-9]{0,2})(?:\.(?:0|[1-9][0-9]{0,2})){3}")
_IPV4_LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")
_IPV6_LOOPBACK = ipaddress.IPv6Address("::1")


class LoopbackTarget(NamedTuple):
    scheme: str
    host: str  # without brackets, as http.client wants it
    port: int | None
    request_target: str  # path and query, as sent on the request line


def parse_loopback_url(url: str) -> LoopbackTarget:
    """Return where to connect for `url`, or raise ValueError (naming the key 'url') if not loopback."""
    if not url.isascii() or any(char.isspace() or not char.isprintable() for char in url):
        raise ValueError("key 'url': must be ASCII without spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"key 'url': not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"key 'url': scheme must be http or https, not {parts.scheme or 'missing'!r}")
    if "@" in parts.netloc:
        raise ValueError("key 'url': must not contain a user name or password ('@')")
    host = parts.hostname or ""
    if not _is_loopback_host(host, bracketed=parts.netloc.startswith("[")):
        raise ValueError(f"key 'url': host {host!r} is not loopback (use localhost, 127.x.y.z or [::1])")
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"key 'url': port {port} is outside 1-65535")
    request_target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return LoopbackTarget(parts.scheme, host, port, request_target)


def _is_loopback_host(host: str, *, bracketed: bool) -> bool:
    if host == "localhost":
        return True
    if bracketed:
        try:
            return ipaddress.IPv6Address(host) == _IPV6_LOOPBACK and "%" not in host
        except ValueError:
            return False
    if _DOTTED_QUAD.fullmatch(host):
        try:
            return ipaddress.IPv4Address(host) in _IPV4_LOOPBACK
        except ValueError:  # an octet above 255
            return False
    return False


def _check_config(config: dict) -> None:
    parse_loopback_url(config["url"])


@task(
    "http_health_check_local",
    description=(
        "GET `url` and fail unless it answers `expect_status` (integer 100-599, default 200) within "
        "`timeout_seconds` (number, more than 0 and at most 30, default 5). Loopback only: the host "
        "must be localhost, 127.x.y.z or [::1]; no user info; http or https. Redirects are not "
        "followed and no proxy is used. Prints the status and the elapsed milliseconds."
    ),
    schema={
        "type": "object",
        "properties": {
            "url": {"type": "string", "minLength": 1, "maxLength": MAX_URL_LENGTH},
            "timeout_seconds": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 30,
                "default": DEFAULT_TIMEOUT_SECONDS,
            },
            "expect_status": {
                "type": "integer",
                "minimum": 100,
                "maximum": 599,
                "default": DEFAULT_EXPECT_STATUS,
            },
        },
        "required": ["url"],
        "additionalProperties": False,
    },
)
def http_health_check_local(config: dict, ctx: TaskContext) -> None:
    """Request the loopback URL once and compare the status with the expected one."""
    import http.client  # imports ssl: keep it out of the zygote

    url = config["url"]
    target = parse_loopback_url(url)
    timeout = config.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)
    expected = int(config.get("expect_status", DEFAULT_EXPECT_STATUS))
    connection_class = http.client.HTTPSConnection if target.scheme == "https" else http.client.HTTPConnection
    connection = connection_class(target.host, target.port, timeout=timeout)
    started = time.monotonic()
    try:
        connection.request("GET", target.request_target, headers={"User-Agent": "cronwell-health-check"})
        response = connection.getresponse()
        status, reason = response.status, response.reason
    except TimeoutError:
        raise TimeoutError(f"health check of {url} timed out after {timeout:g} s") from None
    except ConnectionRefusedError:
        raise ConnectionError(f"health check of {url} failed: connection refused") from None
    except (OSError, http.client.HTTPException) as exc:
        raise ConnectionError(f"health check of {url} failed: {exc!r}") from exc
    finally:
        connection.close()
    elapsed_ms = (time.monotonic() - started) * 1000
    print(f"GET {url} -> {status} {reason} in {elapsed_ms:.0f} ms")
    if status != expected:
        raise RuntimeError(f"health check of {url} answered {status} {reason}, expected {expected}")


http_health_check_local.extra_validation = _check_config
