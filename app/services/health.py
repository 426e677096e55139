"""Readiness and heartbeat health, shared by /readyz, the health page and `flask health`."""
from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from functools import lru_cache

from flask import current_app
from sqlalchemy import select, text

from app.cache import get_cache
from app.extensions import db
from app.models import Heartbeat


def readiness(now: datetime | None = None) -> dict:
    """Check the database, Redis (when configured), migrations and required heartbeats."""
    now = now or datetime.now(timezone.utc)
    cfg = current_app.config
    checks: dict[str, dict] = {}
    try:
        db.session.execute(text("SELECT 1"))
        checks["database"] = {"ok": True}
    except Exception as exc:  # any driver error means not ready
        db.session.rollback()
        checks["database"] = {"ok": False, "error": type(exc).__name__}
    if checks["database"]["ok"]:
        checks["migrations"] = _migrations_check()
    if cfg.get("REDIS_URL"):
        ok = get_cache().ping()
        checks["redis"] = {"ok": ok} if ok else {"ok": False, "error": "unreachable"}
    stale_after = timedelta(seconds=cfg["HEARTBEAT_STALE_SECONDS"])
    for kind, required in (("scheduler", cfg["READYZ_REQUIRE_HEARTBEATS"]),
                           ("worker", cfg["READYZ_REQUIRE_HEARTBEATS"] or cfg["READYZ_REQUIRE_WORKER_HEARTBEAT"])):
        if required and checks["database"]["ok"]:
            fresh = db.session.scalar(
                select(Heartbeat.id).where(Heartbeat.kind == kind, Heartbeat.last_seen >= now - stale_after).limit(1)
            )
            checks[f"{kind}_heartbeat"] = {"ok": True} if fresh else {"ok": False, "error": f"no {kind} seen in {stale_after.seconds}s"}
    return {"ready": all(c["ok"] for c in checks.values()), "checks": checks}


def _migrations_check() -> dict:
    from alembic.runtime.migration import MigrationContext

    from app.extensions import MIGRATIONS_DIR

    head = _code_head(os.path.abspath(MIGRATIONS_DIR))
    with db.engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    if current != head:
        return {"ok": False, "error": f"database at revision {current}, code expects {head}; run `flask db upgrade`"}
    return {"ok": True}


@lru_cache(maxsize=None)
def _code_head(directory: str) -> str | None:
    """The newest migration this code ships. Reading it parses every migration file (about 6 ms
    per request on the health page), and the files only change with a deploy, which restarts
    the process."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory(directory).get_current_head()
