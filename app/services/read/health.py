"""Readiness and heartbeat health, shared by /readyz, the health page and `flask health`."""

from __future__ import annotations

from datetime import datetime

from flask import current_app
from sqlalchemy import select, text

from app.cache import get_cache
from app.clock import utcnow
from app.domain.states import ProcessStatus, process_state, process_status, serves
from app.extensions import SCHEMA_HEAD, db
from app.models import Heartbeat


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
    report: dict = {"ready": False, "checks": checks}
    if checks["database"]["ok"]:
        processes = process_statuses(now, cfg["HEARTBEAT_STALE_SECONDS"])
        report.update(processes)
        for kind, required in (
            ("scheduler", cfg["READYZ_REQUIRE_HEARTBEATS"]),
            ("worker", cfg["READYZ_REQUIRE_HEARTBEATS"] or cfg["READYZ_REQUIRE_WORKER_HEARTBEAT"]),
        ):
            if not required:
                continue
            if kind == "scheduler":
                ok = any(p["status"] == ProcessStatus.ALIVE.value for p in processes["schedulers"])
                error = f"no scheduler seen in {cfg['HEARTBEAT_STALE_SECONDS']}s"
            else:
                ok = processes["serving_workers"] > 0
                error = f"no worker serving: none alive and running in {cfg['HEARTBEAT_STALE_SECONDS']}s"
            checks[f"{kind}_heartbeat"] = {"ok": True} if ok else {"ok": False, "error": error}
    report["ready"] = all(c["ok"] for c in checks.values())
    return report


def process_statuses(now: datetime, stale_after_seconds: int) -> dict:
    """Each scheduler and worker with its status word (alive | stopped | lost, as `flask worker
    list` says it) and state, and how many workers serve: alive and not draining."""
    found: dict[str, list[dict]] = {"scheduler": [], "worker": []}
    for beat in db.session.scalars(select(Heartbeat).order_by(Heartbeat.kind, Heartbeat.id)):
        age = max(0.0, (now - beat.last_seen).total_seconds())
        state = process_state((beat.info or {}).get("state"), age, stale_after_seconds)
        found.setdefault(beat.kind, []).append(
            {"id": beat.id, "status": process_status(state).value, "state": state.value, "serving": serves(state)}
        )
    return {
        "schedulers": found["scheduler"],
        "workers": found["worker"],
        "serving_workers": sum(1 for w in found["worker"] if w["serving"]),
    }


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
