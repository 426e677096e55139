"""Idempotency keys for API requests that create runs, batches or jobs.

The first request with a (caller, key) pair inserts a claim row and commits it before doing the
work; the unique constraint lets exactly one of two concurrent duplicates win. The winner stores
its answer on the row; a later request with the same key and the same body gets that answer
back, one with a different body is refused, and one arriving while the first still runs is told
to retry. Keys live for `KEY_HOURS`, then the retention pass deletes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from app.extensions import db
from app.models import IdempotencyKey

KEY_HOURS = 24


@dataclass(frozen=True)
class Claim:
    outcome: str  # "new" (do the work), "replay", "mismatch", "in_progress"
    row_id: int | None = None
    status_code: int | None = None
    body: str | None = None
    location: str | None = None


def claim(owner: str, key: str, request_hash: str, *, now: datetime) -> Claim:
    """Claim `key` for this request, or say what the earlier request with it did."""
    db.session.rollback()  # start from a clean transaction: the claim must commit on its own
    row = IdempotencyKey(
        caller=owner[:64],
        key=key,
        request_hash=request_hash,
        created_at=now,
        expires_at=now + timedelta(hours=KEY_HOURS),
    )
    db.session.add(row)
    try:
        db.session.commit()
        return Claim("new", row_id=row.id)
    except IntegrityError:
        db.session.rollback()
    existing = db.session.scalar(
        select(IdempotencyKey).where(IdempotencyKey.caller == owner[:64], IdempotencyKey.key == key)
    )
    if existing is None:  # deleted meanwhile (the first request failed): the caller may retry
        return Claim("in_progress")
    if existing.request_hash != request_hash:
        return Claim("mismatch")
    if existing.status_code is None:
        return Claim("in_progress")
    return Claim("replay", existing.id, existing.status_code, existing.response_body, existing.location)


def record(row_id: int, *, status_code: int, body: str, location: str | None) -> None:
    """Store the first request's answer for the duplicates to come."""
    db.session.rollback()
    db.session.execute(
        update(IdempotencyKey)
        .where(IdempotencyKey.id == row_id)
        .values(status_code=status_code, response_body=body, location=location)
    )
    db.session.commit()


def release(row_id: int) -> None:
    """The first request failed: forget the key so that a retry can do the work."""
    db.session.rollback()
    db.session.execute(delete(IdempotencyKey).where(IdempotencyKey.id == row_id))
    db.session.commit()
