"""The dashboard cache: Redis when REDIS_URL is set, an in-process dict otherwise.

The cache is never authoritative. Every Redis error is logged and swallowed, and the caller
recomputes from the database. Invalidation deletes named keys only (never a flush) and waits for
the writing transaction to commit, so a reader cannot re-cache pre-commit data.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask

log = logging.getLogger(__name__)

SUMMARY = "dashboard:summary"
QUEUE_DEPTH = "dashboard:queue_depth"
UPCOMING = "dashboard:upcoming"
CATALOG = "tasks:catalog"

# Time to live of each kind of key, in seconds. Short, because invalidation covers writes made
# through the services, while the clock alone moves "due now" and "age" figures.
TTL_SECONDS = {
    SUMMARY: 10,
    QUEUE_DEPTH: 5,
    UPCOMING: 15,
    CATALOG: 300,  # code-defined: never invalidated, it just expires
    "job_stats": 30,
    "job_upcoming": 60,
}


# The dashboard's figures are per organization (and project) where people see them, so each scope
# (`app.services.scoping.cache_scope`) has its own copy: `<key>:<generation>:<scope>`. Writers
# delete the plain key as before; that also moves the key's generation on, which makes every
# scope's copy stale at once without listing the scopes (old copies expire with their TTL).
SCOPED_KEYS = frozenset({SUMMARY, QUEUE_DEPTH, UPCOMING})
GENERATION_TTL = 86_400


def job_stats_key(job_id: int) -> str:
    return f"job:{job_id}:stats"


def job_upcoming_key(job_id: int) -> str:
    return f"job:{job_id}:upcoming"


def keys_for_job_change(job_id: int | None) -> list[str]:
    """The keys a change to one job (or its executions) makes stale."""
    keys = [SUMMARY, QUEUE_DEPTH, UPCOMING]
    if job_id is not None:
        keys += [job_stats_key(job_id), job_upcoming_key(job_id)]
    return keys


def keys_for_jobs(job_ids) -> list[str]:
    """The keys changes to several jobs make stale, each named once."""
    keys = [SUMMARY, QUEUE_DEPTH, UPCOMING]
    for job_id in job_ids:
        if job_id is not None:  # None: a one-off run's change (it has no job figures)
            keys += [job_stats_key(job_id), job_upcoming_key(job_id)]
    return keys


class MemoryBackend:
    """Per-process fallback with TTLs; fine for one web process."""

    def __init__(self) -> None:
        self._data: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            item = self._data.get(key)
            if item is None or item[0] < time.monotonic():
                self._data.pop(key, None)
                return None
            return item[1]

    def set(self, key: str, value: str, ttl: int) -> None:
        with self._lock:
            self._data[key] = (time.monotonic() + ttl, value)

    def delete(self, *keys: str) -> None:
        with self._lock:
            for key in keys:
                self._data.pop(key, None)

    def incr(self, key: str, ttl: int) -> int:
        with self._lock:
            expires, value = self._data.get(key, (time.monotonic() + ttl, "0"))
            if expires < time.monotonic():
                expires, value = time.monotonic() + ttl, "0"
            count = int(value) + 1
            self._data[key] = (expires, str(count))
            return count

    def ping(self) -> bool:
        return True


class RedisBackend:
    def __init__(self, url: str) -> None:
        import redis

        self._client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)

    def get(self, key: str) -> str | None:
        value = self._client.get(key)
        return value.decode() if value is not None else None

    def set(self, key: str, value: str, ttl: int) -> None:
        self._client.set(key, value, ex=ttl)

    def delete(self, *keys: str) -> None:
        if keys:
            self._client.delete(*keys)

    def incr(self, key: str, ttl: int) -> int:
        pipe = self._client.pipeline()
        pipe.incr(key)
        pipe.expire(key, ttl, nx=True)
        count, _ = pipe.execute()
        return int(count)

    def ping(self) -> bool:
        return bool(self._client.ping())


class Cache:
    """Namespaced, failure-tolerant access to the backend.

    After a backend error the cache stays out of the way for `RETRY_AFTER_SECONDS` (every call
    is a miss or a no-op) instead of paying a connect timeout on each of a page's lookups while
    Redis is down. A delete skipped in that window leaves at worst a value that expires within
    its short TTL.
    """

    RETRY_AFTER_SECONDS = 5.0

    def __init__(self, backend: MemoryBackend | RedisBackend, prefix: str) -> None:
        self.backend = backend
        self.prefix = prefix
        self.is_redis = isinstance(backend, RedisBackend)
        self._unavailable_until = 0.0

    @property
    def backend_name(self) -> str:
        return "redis" if self.is_redis else "in-process"

    def _k(self, key: str) -> str:
        return self.prefix + key

    def _call(self, what: str, keys, fn: Callable[[], Any], default: Any = None) -> Any:
        if time.monotonic() < self._unavailable_until:
            return default
        try:
            return fn()
        except Exception:
            self._unavailable_until = time.monotonic() + self.RETRY_AFTER_SECONDS
            log.warning(
                "cache %s failed; carrying on without the cache",
                what,
                extra={"event": "cache_error", "operation": what, "keys": keys},
                exc_info=True,
            )
            return default

    def get(self, key: str) -> Any:
        """The cached JSON value for `key`, or None (missing, expired or backend down)."""
        raw = self._call("read", [key], lambda: self.backend.get(self._k(key)))
        return None if raw is None else json.loads(raw)

    def get_or_compute(self, key: str, ttl: int, compute: Callable[[], Any]) -> Any:
        """Return the cached JSON value for `key`, or compute, store and return it."""
        raw = self._call("read", [key], lambda: self.backend.get(self._k(key)))
        if raw is not None:
            return json.loads(raw)
        raw = json.dumps(compute(), default=str)
        self._call("write", [key], lambda: self.backend.set(self._k(key), raw, ttl))
        # Hand back what a cache hit would have returned, so callers see one shape either way.
        return json.loads(raw)

    def set(self, key: str, value: Any, ttl: int) -> None:
        """Store a JSON-serialisable value; failures are logged and ignored."""
        raw = json.dumps(value, default=str)
        self._call("write", [key], lambda: self.backend.set(self._k(key), raw, ttl))

    def delete(self, keys: Iterable[str]) -> None:
        """Delete exactly these keys (never a pattern, never a flush); a scoped key's per-scope
        copies go stale with it (its generation moves on)."""
        names = list(dict.fromkeys(keys))
        if names:
            self._call("delete", names, lambda: self.backend.delete(*[self._k(k) for k in names]))
        for name in names:
            if name in SCOPED_KEYS:
                self._call("incr", [name], lambda n=name: self.backend.incr(self._k(f"{n}:generation"), GENERATION_TTL))

    def scoped_key(self, key: str, scope: str) -> str:
        """The key of `key`'s copy for one scope (`all`: the key itself)."""
        if scope == "all":
            return key
        generation = self._call("read", [key], lambda: self.backend.get(self._k(f"{key}:generation"))) or "0"
        return f"{key}:{generation}:{scope}"

    def incr(self, key: str, ttl: int) -> int | None:
        """Count within a window (rate limiting); None when the backend is unreachable."""
        return self._call("incr", [key], lambda: self.backend.incr(self._k(key), ttl))

    def ping(self) -> bool:
        """Ask the backend directly (readiness), whatever happened to earlier calls."""
        try:
            ok = bool(self.backend.ping())
        except Exception:
            return False
        if ok:
            self._unavailable_until = 0.0
        return ok


def from_settings(settings) -> Cache:
    """The cache the settings name: Redis at REDIS_URL, else this process's own dict."""
    url = settings.get("REDIS_URL")
    return Cache(RedisBackend(url) if url else MemoryBackend(), settings["CACHE_KEY_PREFIX"])


def init_app(app: Flask, *, sessions: bool = True) -> None:
    """The app's cache; with `sessions`, keys queued on a SQLAlchemy session are deleted when it
    commits (not for the worker app kind, which has no sessions and no SQLAlchemy)."""
    app.extensions["cronwell_cache"] = from_settings(app.config)
    if sessions:
        _install_session_hooks()


def get_cache() -> Cache:
    # Flask imported here, not at the top: the worker parent uses this module without Flask
    # (it deletes its keys through the Cache it holds, docs/adr/0012-worker-parent-on-dbapi.md).
    from flask import current_app

    return current_app.extensions["cronwell_cache"]


_PENDING = "cronwell_cache_pending"
_hooks_installed = False


def invalidate_on_commit(session, keys: Iterable[str]) -> None:
    """Delete `keys` after `session` commits; forget them if it rolls back."""
    session.info.setdefault(_PENDING, set()).update(keys)


def _install_session_hooks() -> None:
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    from sqlalchemy import event
    from sqlalchemy.orm import Session

    @event.listens_for(Session, "after_commit")
    def _after_commit(session):
        keys = session.info.pop(_PENDING, None)
        if keys:
            try:
                get_cache().delete(keys)
            except RuntimeError:  # no app context: nothing cached in this process
                pass

    @event.listens_for(Session, "after_soft_rollback")
    def _after_rollback(session, _previous_transaction):
        session.info.pop(_PENDING, None)
