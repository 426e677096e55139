"""alert channels: URLs, addresses and signing secrets sealed at rest

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07 10:00:00

`alert_channels.target` and `alert_channels.secret` become TEXT (a sealed value, `fernet:` and a
Fernet token, is longer than the plaintext limits of 500 and 200 characters, which the use case
still checks) and every plaintext value is sealed with the app's CHANNEL_SECRET_KEY
(app/secret_box.py). A database without channels needs no key to migrate; one with channels and
DEBUG=0 needs CHANNEL_SECRET_KEY set, or the migration stops saying so.

Downgrading opens every sealed value again (with the same key) and restores the old lengths. A
value no listed key opens (sealed under another key, or damaged) stays as stored, or is cleared
when it is longer than the old column holds; its channel is disabled, so the older code sends
nothing with a ciphertext for a URL or a key, and a warning names the channel. Upgrading again
leaves a kept ciphertext as it is: it opens once its key is listed.

On SQLite the type changes by a rebuild of the table, which keeps its AUTOINCREMENT and the
counter where it was (as in migrations 0018 and 0023).
"""

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from alembic import op
from flask import current_app

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

PREFIX = "fernet:"
# The columns before this revision: (name, what a person calls it, the length it held).
COLUMNS = (("target", "URL", 500), ("secret", "signing secret", 200))


@contextmanager
def _rebuilding(table: str) -> Iterator[Any]:
    """`batch_alter_table` that, on SQLite, copies the table keeping its AUTOINCREMENT and counter."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        with op.batch_alter_table(table) as batch:
            yield batch
        return
    saved = bind.execute(sa.text("SELECT seq FROM sqlite_sequence WHERE name = :t"), {"t": table}).scalar()
    with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": True}) as batch:
        yield batch
    if saved is not None:
        bind.execute(
            sa.text("UPDATE sqlite_sequence SET seq = max(seq, :seq) WHERE name = :t"), {"seq": saved, "t": table}
        )
        bind.execute(
            sa.text(
                "INSERT INTO sqlite_sequence (name, seq) SELECT :t, :seq"
                " WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = :t)"
            ),
            {"seq": saved, "t": table},
        )


def _rewrite(*, seal: bool) -> None:
    """Seal every plaintext target and secret (or open every sealed one), row by row."""
    from app.secret_box import SealedValueUnreadable

    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT id, target, secret FROM alert_channels ORDER BY id")).fetchall()
    if not rows:
        return
    box = current_app.extensions["cronwell.secret_box"]  # the app's key (app/secret_box.py)
    for row in rows:
        values: dict[str, Any] = {}
        unreadable = []
        for column, label, length in COLUMNS:
            value = getattr(row, column)
            if value is None or value.startswith(PREFIX) == seal:
                continue
            if seal:
                values[column] = box.seal(value)
                continue
            try:
                values[column] = box.open(value)
            except SealedValueUnreadable:  # a missing or bad key still stops the downgrade
                if len(value) <= length:
                    unreadable.append(f"its {label} cannot be decrypted with CHANNEL_SECRET_KEY: kept encrypted")
                else:  # the target is NOT NULL
                    values[column] = "" if column == "target" else None
                    unreadable.append(
                        f"its {label} cannot be decrypted with CHANNEL_SECRET_KEY: cleared (too long for the column)"
                    )
        if unreadable:
            values["enabled"] = False
            print(f"Warning: alert channel {row.id}: {'; '.join(unreadable)}; the channel is disabled", file=sys.stderr)
        if values:
            assignments = ", ".join(f"{column} = :{column}" for column in values)
            bind.execute(sa.text(f"UPDATE alert_channels SET {assignments} WHERE id = :id"), {**values, "id": row.id})


def upgrade():
    with _rebuilding("alert_channels") as batch:
        batch.alter_column("target", type_=sa.Text(), existing_type=sa.String(length=500), existing_nullable=False)
        batch.alter_column("secret", type_=sa.Text(), existing_type=sa.String(length=200), existing_nullable=True)
    _rewrite(seal=True)


def downgrade():
    _rewrite(seal=False)
    with _rebuilding("alert_channels") as batch:
        batch.alter_column("secret", type_=sa.String(length=200), existing_type=sa.Text(), existing_nullable=True)
        batch.alter_column("target", type_=sa.String(length=500), existing_type=sa.Text(), existing_nullable=False)
