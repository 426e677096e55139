"""Request rate limits for the REST API and the web sign-in, on the `limits` library.

A limit is a rule in `limits`' syntax ("10 per minute"), read from the config on every request so
a changed setting applies at once, and counted per key (a client address, a credential's hash)
with the moving-window strategy. The counters live in `RATELIMIT_STORAGE_URI`: Redis when
`REDIS_URL` is set, so every gunicorn worker counts alike, else this process's memory. With the
storage unreachable a request goes through (`RATELIMIT_SWALLOW_ERRORS`, on by default): the cache
is never allowed to lock people out. `RATELIMIT_ENABLED=False` turns every limit off (tests that
drive the API at volume).

A route's own limit replaces its blueprint's: the sign-in routes count per address, not per
credential, because they are how a caller gets a credential.

Why not Flask-Limiter, which does this on the same `limits` library: it installs a Flask plugin
command (`flask limiter`), and Flask imports every plugin command before it reads the command
line, so Flask-Limiter, limits, rich and asyncio were loaded into every `flask` process (the CLI,
the scheduler, the worker) that never serves a request (docs/adr/0013-request-limits-on-limits.md).
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from flask import Blueprint, Flask, current_app, g, request
from limits import RateLimitItem, parse
from limits.storage import Storage, storage_from_string
from limits.strategies import MovingWindowRateLimiter
from werkzeug.exceptions import TooManyRequests

log = logging.getLogger("cronwell.web")

EXTENSION = "cronwell_request_limits"
# The mark a route's limit leaves on its view (functools.wraps carries it up through the
# decorators above it), so that its blueprint's limit stands aside.
ROUTE_LIMITED = "_cronwell_route_limited"

Rule = Callable[[], str]
KeyFunc = Callable[[], str]
View = TypeVar("View", bound=Callable[..., Any])


def client_address() -> str:
    """The address a limit is keyed on (put ProxyFix in front when behind a proxy)."""
    return request.remote_addr or "unknown"


class RateLimitExceeded(TooManyRequests):
    """429, carrying the limit that refused the request (for `Retry-After`)."""

    def __init__(self, item: RateLimitItem) -> None:
        super().__init__(description=f"rate limit exceeded: {item}")
        self.limit = item


@dataclass
class _Counters:
    storage: Storage
    window: MovingWindowRateLimiter


class RequestLimiter:
    """The limits of one app and the counters behind them (`init_app` makes the counters)."""

    def init_app(self, app: Flask) -> None:
        storage = storage_from_string(
            app.config.get("RATELIMIT_STORAGE_URI", "memory://"), **app.config.get("RATELIMIT_STORAGE_OPTIONS", {})
        )
        if not isinstance(storage, Storage):  # an `async+...` URI: the web serves requests synchronously
            raise ValueError("RATELIMIT_STORAGE_URI: an async storage cannot count synchronous requests")
        app.extensions[EXTENSION] = _Counters(storage, MovingWindowRateLimiter(storage))

    @property
    def storage(self) -> Storage:
        """The counters' storage (the sign-in throttle keeps its fixed windows there too)."""
        return self._counters().storage

    def limit(self, rule: Rule, key: KeyFunc = client_address) -> Callable[[View], View]:
        """Decorate a view (counted per view) or limit a blueprint (counted per blueprint, for
        every view without a limit of its own)."""

        def decorate(target: View) -> View:
            if isinstance(target, Blueprint):
                scope = target.name

                def check_blueprint() -> None:
                    view = current_app.view_functions.get(request.endpoint or "")
                    if not getattr(view, ROUTE_LIMITED, False):
                        self._hit(rule, key, scope)

                target.before_request(check_blueprint)
                return target
            scope = f"{target.__module__}.{target.__qualname__}"

            @functools.wraps(target)
            def limited(*args: Any, **kwargs: Any) -> Any:
                self._hit(rule, key, scope)
                return target(*args, **kwargs)

            setattr(limited, ROUTE_LIMITED, True)
            return limited  # type: ignore[return-value]

        return decorate

    def retry_after_seconds(self, default: int = 60) -> int:
        """Seconds until the limit that refused this request lets another through."""
        refused = g.get("_refused_limit")
        if refused is None:
            return default
        item, identifiers = refused
        try:
            stats = self._counters().window.get_window_stats(item, *identifiers)
        except Exception:  # noqa: BLE001 - a header must never turn a 429 into a 500
            return int(item.get_expiry())
        seconds = math.ceil(stats.reset_time - time.time())  # noqa: TID251 - the counters' own clock
        return max(1, min(seconds, int(item.get_expiry())))

    def _hit(self, rule: Rule, key: KeyFunc, scope: str) -> None:
        if not current_app.config.get("RATELIMIT_ENABLED", True):
            return
        item = _parsed(rule())
        identifiers = (key(), scope)
        try:
            allowed = self._counters().window.hit(item, *identifiers)
        except Exception:
            if not current_app.config.get("RATELIMIT_SWALLOW_ERRORS", True):
                raise
            log.warning(
                "rate limit storage unavailable; allowing the request", extra={"event": "rate_limit_unavailable"}
            )
            return
        if not allowed:
            g._refused_limit = (item, identifiers)
            raise RateLimitExceeded(item)

    def _counters(self) -> _Counters:
        counters: _Counters = current_app.extensions[EXTENSION]
        return counters


@functools.lru_cache(maxsize=32)
def _parsed(rule: str) -> RateLimitItem:
    return parse(rule)
