"""Sign-in rate limiting on the storage of the API's request limits (app/request_limits.py: Redis
when REDIS_URL is set), so the limit holds across gunicorn workers.

Every sign-in attempt counts against two fixed windows: one per client address and one per
username (so spreading guesses over many addresses does not help). Past
`LOGIN_RATE_LIMIT_ATTEMPTS` in `LOGIN_RATE_LIMIT_WINDOW_SECONDS`, attempts are refused before the
password is even checked. With the storage unreachable the limiter fails open and logs it: the
cache is never allowed to lock operators out.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from flask import current_app, request

from app.extensions import limiter

log = logging.getLogger("cronwell.web")


@dataclass(frozen=True)
class LoginThrottle:
    allowed: bool
    retry_after_seconds: int


def client_address() -> str:
    """The address the limit is keyed on (put ProxyFix in front when behind a proxy)."""
    return request.remote_addr or "unknown"


def login_keys(username: str, address: str) -> list[str]:
    """The two counters an attempt increments (stored under the deployment's CACHE_KEY_PREFIX)."""
    name = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    return [f"login:addr:{address}", f"login:user:{name}"]


def register_login_attempt(username: str) -> LoginThrottle:
    """Count this attempt; say whether it may go ahead."""
    limit = current_app.config["LOGIN_RATE_LIMIT_ATTEMPTS"]
    window = current_app.config["LOGIN_RATE_LIMIT_WINDOW_SECONDS"]
    allowed = True
    for key in login_keys(username, client_address()):
        try:
            # A fixed window: the storage's INCR with an expiry, one counter per key.
            count = limiter.storage.incr(key, window)
        except Exception:  # noqa: BLE001 - any storage failure: fail open
            log.warning(
                "login rate limit unavailable (storage down); allowing the attempt",
                extra={"event": "login_rate_limit_unavailable"},
            )
            continue
        if count > limit:
            allowed = False
    if not allowed:
        log.warning("sign-in attempts rate limited", extra={"event": "login_rate_limited", "address": client_address()})
    return LoginThrottle(allowed=allowed, retry_after_seconds=window)
