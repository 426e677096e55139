"""operator console: ids never reused on SQLite, server-side sessions, alert grouping

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 01:00:00

- SQLite gave a new row the id of the newest deleted one (a table without AUTOINCREMENT reuses
  max(rowid) + 1), so a bookmark, a script's `flask job trigger 4` or an event's job_id could name
  another job. jobs, executions, alerts and users are rebuilt with AUTOINCREMENT, and their
  `sqlite_sequence` starts past every id the event log still mentions (ids of rows deleted before
  this migration are not handed out again either). PostgreSQL sequences never go back: nothing to do.
  The tables are reflected, not spelled here, because earlier revisions add columns to them; their
  indexes (partial ones included) are put back from their exact stored SQL.
- `web_sessions`: one row per signed-in browser (the sha256 of the token its cookie carries), so
  sign-out, a password change, a disabled account or a role change can end sessions server-side.
- `ix_executions_trigger_id`: the executions list filtered by trigger at a million rows.
- alert grouping: alerts count `occurrences` and keep `last_seen_at`; `alert_mutes` holds a job's
  "no alerts until" instant.
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# Tables whose ids people and scripts hold, and the event-log column that may remember older ids.
_NEVER_REUSED = {"jobs": "job_id", "executions": "execution_id", "alerts": None, "users": None}


def _rebuild_sqlite_table(bind, table: str, autoincrement: bool) -> None:
    """Copy `table` into a new one created with (or without) AUTOINCREMENT, keeping its indexes."""
    indexes = bind.execute(
        sa.text("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = :t AND sql IS NOT NULL"),
        {"t": table},
    ).fetchall()
    for name, _sql in indexes:
        op.drop_index(name, table_name=table)
    with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}):
        pass
    for _name, sql in indexes:
        bind.exec_driver_sql(sql)


def _seed_sequence(bind, table: str, event_column: str | None) -> None:
    """Start the table's AUTOINCREMENT counter past every id it or the event log has seen."""
    highest = bind.execute(sa.text(f"SELECT coalesce(max(id), 0) FROM {table}")).scalar()
    if event_column is not None:
        remembered = bind.execute(sa.text(f"SELECT coalesce(max({event_column}), 0) FROM events")).scalar()
        highest = max(highest, remembered)
    bind.execute(sa.text("DELETE FROM sqlite_sequence WHERE name = :t"), {"t": table})
    if highest:
        bind.execute(sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES (:t, :seq)"), {"t": table, "seq": highest})


def upgrade():
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for table, event_column in _NEVER_REUSED.items():
            _rebuild_sqlite_table(bind, table, autoincrement=True)
            _seed_sequence(bind, table, event_column)

    op.create_table(
        "web_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_web_sessions_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_web_sessions")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_web_sessions_token_hash")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_web_sessions_user_id"), "web_sessions", ["user_id"], unique=False)
    # The executions list filtered by trigger, newest first (few manual runs among many scheduled).
    op.create_index("ix_executions_trigger_id", "executions", ["trigger", "id"])

    # Alert grouping: repeats counted on the open alert; per-job mutes.
    op.add_column("alerts", sa.Column("occurrences", sa.Integer(), server_default="1", nullable=False))
    op.add_column("alerts", sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE alerts SET last_seen_at = created_at")
    op.create_table(
        "alert_mutes",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("muted_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_alert_mutes_job_id_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_alert_mutes")),
    )


def downgrade():
    op.drop_table("alert_mutes")
    # Plain DROP COLUMN on both databases (SQLite >= 3.35): no rebuild, the indexes stay as they are.
    op.execute("ALTER TABLE alerts DROP COLUMN last_seen_at")
    op.execute("ALTER TABLE alerts DROP COLUMN occurrences")
    op.drop_index("ix_executions_trigger_id", table_name="executions")
    op.drop_index(op.f("ix_web_sessions_user_id"), table_name="web_sessions")
    op.drop_table("web_sessions")
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for table in reversed(list(_NEVER_REUSED)):
            _rebuild_sqlite_table(bind, table, autoincrement=False)
            bind.execute(sa.text("DELETE FROM sqlite_sequence WHERE name = :t"), {"t": table})
