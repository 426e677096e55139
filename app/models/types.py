"""Column types shared by the models."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import JSON, DateTime, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeDecorator

# JSONB on PostgreSQL (indexable, compact), plain JSON text on SQLite.
JSONType = JSON().with_variant(JSONB(), "postgresql")


class UTCDateTime(TypeDecorator):
    """Aware UTC datetimes in Python, whatever the backend stores.

    PostgreSQL stores timestamptz. SQLite has no time zones, so values are stored as naive UTC
    text ("YYYY-MM-DD HH:MM:SS.ffffff"), which still sorts and compares correctly.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r} given where an aware UTC datetime is required")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class SealedText(TypeDecorator):
    """Text stored encrypted (app/secret_box.py): Python sees the plaintext, the database only
    `fernet:<token>`. A stored value without that prefix (from before sealing) reads as it is; one
    that no key opens reads as an `Unreadable` marker, which writes back the stored value as it was."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect):
        if value is None:
            return None
        from app.secret_box import Unreadable, installed

        if isinstance(value, Unreadable):
            return value.stored  # never seal the marker's text over the value it stands for
        return installed().seal(value)

    def process_result_value(self, value: str | None, dialect):
        if value is None:
            return None
        from app.secret_box import installed

        return installed().open_or_mark(value)
