"""Readiness and heartbeat health, shared by /readyz, the health page and `flask health`."""

from __future__ import annotations

from datetime import datetime, timedelta

from flask import current_app
from sqlalchemy import select, text

from app.cache import get_cache
from app.clock import utcnow
from app.extensions import SCHEMA_HEAD, db
from app.models import Heartbeat
from app.services.engine import heartbeats


def readiness(now: datetime | None = None) -> dict:
    """Check the database, Redis (when configured), migrations and required heartbeats."""
    now = now or utcnow()
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
    for kind, required in (
        ("scheduler", cfg["READYZ_REQUIRE_HEARTBEATS"]),
        ("worker", cfg["READYZ_REQUIRE_HEARTBEATS"] or cfg["READYZ_REQUIRE_WORKER_HEARTBEAT"]),
    ):
        if required and checks["database"]["ok"]:
            fresh = db.session.scalar(
                select(Heartbeat.id)
                .where(Heartbeat.kind == kind, Heartbeat.last_seen >= now - stale_after, heartbeats.not_stopped())
                .limit(1)
            )
            checks[f"{kind}_heartbeat"] = (
                {"ok": True} if fresh else {"ok": False, "error": f"no {kind} seen in {stale_after.seconds}s"}
            )
    return {"ready": all(c["ok"] for c in checks.values()), "checks": checks}


def _migrations_check() -> dict:
    try:
        with db.engine.connect() as conn:
            current = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except Exception:  # no alembic_version table: never migrated
        current = None
    if current != SCHEMA_HEAD:
        return {
            "ok": False,
            "error": f"database at revision {current}, code expects {SCHEMA_HEAD}; run `flask db upgrade`",
        }
    return {"ok": True}
