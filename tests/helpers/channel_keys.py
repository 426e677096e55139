"""Channel values that do not decrypt, planted for real: a process running with another
CHANNEL_SECRET_KEY than the one that sealed them, or a ciphertext damaged in the database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text

from app import secret_box
from app.extensions import db
from tests.helpers.databases import CHANNEL_SECRET_KEY

# Another valid Fernet key: what a deployment whose key was replaced runs with.
OTHER_KEY = "3H9NjK_KsCsvBJcGB35pyR-DYTOfPuGNzwIaQgPgorA="


@contextmanager
def channel_key(app, key: str) -> Iterator[None]:
    """Run the block as a process whose CHANNEL_SECRET_KEY is `key` (the test key again after)."""
    app.config["CHANNEL_SECRET_KEY"] = key
    secret_box.init_app(app)
    db.session.rollback()
    db.session.expire_all()  # values read under the old key are read again under this one
    try:
        yield
    finally:
        app.config["CHANNEL_SECRET_KEY"] = CHANNEL_SECRET_KEY
        secret_box.init_app(app)
        db.session.rollback()
        db.session.expire_all()


def stored(channel_id: int) -> dict:
    """The channel's row as the database holds it (target and secret sealed)."""
    db.session.rollback()
    row = db.session.execute(text("SELECT * FROM alert_channels WHERE id = :id"), {"id": channel_id}).mappings().one()
    return dict(row)


def damage(channel_id: int, column: str = "target") -> str:
    """Change one character inside the sealed value of `column` (its MAC no longer matches);
    returns the damaged value as stored."""
    value = stored(channel_id)[column]
    assert value.startswith(secret_box.PREFIX), value
    middle = len(secret_box.PREFIX) + (len(value) - len(secret_box.PREFIX)) // 2
    damaged = value[:middle] + ("A" if value[middle] != "A" else "B") + value[middle + 1 :]
    db.session.execute(
        text(f"UPDATE alert_channels SET {column} = :value WHERE id = :id"), {"value": damaged, "id": channel_id}
    )
    db.session.commit()
    db.session.expire_all()
    return damaged
