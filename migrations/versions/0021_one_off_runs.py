"""one-off runs: executions of a task without a job

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06 01:00:00

A one-off run (`flask task run`, `POST /api/v1/runs`) is an execution with no job:
- `executions.job_id` becomes nullable; a row without a job carries its own `task`, its
  `project_id` (what tenancy scopes it by) and the per-run policies a job would otherwise give:
  `timeout_seconds`, `queued_ttl_seconds`, `success_ttl_seconds`, `failure_ttl_seconds`
  (the settings' defaults when the run was created). The CHECK `job_or_task` keeps every row
  either a job's or a task's with its project.
- `ix_executions_one_off` (project_id, id) for the lists scoped by project, `ix_executions_task`
  (task, id) for the lists filtered by task; both partial (job rows leave them empty).
- `dead_letters.job_id` becomes nullable: a one-off run can be dead-lettered too.

Downgrading deletes the one-off runs (they cannot exist without a job) and restores NOT NULL.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_ONE_OFF = sa.text("job_id IS NULL")
_HAS_TASK = sa.text("task IS NOT NULL")
_COLUMNS = ("timeout_seconds", "queued_ttl_seconds", "success_ttl_seconds", "failure_ttl_seconds")


@contextmanager
def _rebuilding(table: str) -> Iterator[Any]:
    """`batch_alter_table` for a change SQLite can only make by copying the table (a column's NOT
    NULL): the copy keeps the table's AUTOINCREMENT (migration 0008: an id is never handed out
    twice) and its counter, which a plain batch copy would drop and restart at the highest id."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        with op.batch_alter_table(table) as batch:
            yield batch
        return
    saved = bind.execute(sa.text("SELECT seq FROM sqlite_sequence WHERE name = :t"), {"t": table}).scalar()
    with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": True}) as batch:
        yield batch
    if saved is not None:
        bind.execute(sa.text("UPDATE sqlite_sequence SET seq = max(seq, :seq) WHERE name = :t"), {"seq": saved, "t": table})
        bind.execute(
            sa.text("INSERT INTO sqlite_sequence (name, seq) SELECT :t, :seq WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = :t)"),
            {"seq": saved, "t": table},
        )


def upgrade():
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("task", sa.String(length=100), nullable=True))
        batch.add_column(sa.Column("project_id", sa.Integer(), nullable=True))
        for name in _COLUMNS:
            batch.add_column(sa.Column(name, sa.Integer(), nullable=True))
    with _rebuilding("executions") as batch:
        batch.alter_column("job_id", existing_type=sa.Integer(), nullable=True)
        batch.create_foreign_key(
            op.f("fk_executions_project_id_projects"), "projects", ["project_id"], ["id"], ondelete="CASCADE"
        )
        batch.create_check_constraint(
            op.f("ck_executions_job_or_task"), "job_id IS NOT NULL OR (task IS NOT NULL AND project_id IS NOT NULL)"
        )
    op.create_index(
        "ix_executions_one_off", "executions", ["project_id", "id"], postgresql_where=_ONE_OFF, sqlite_where=_ONE_OFF
    )
    op.create_index(
        "ix_executions_task", "executions", ["task", "id"], postgresql_where=_HAS_TASK, sqlite_where=_HAS_TASK
    )
    with op.batch_alter_table("dead_letters") as batch:
        batch.alter_column("job_id", existing_type=sa.Integer(), nullable=True)


def downgrade():
    op.execute("DELETE FROM dead_letters WHERE job_id IS NULL")
    op.execute("DELETE FROM alerts WHERE execution_id IN (SELECT id FROM executions WHERE job_id IS NULL)")
    op.execute("DELETE FROM attempts WHERE execution_id IN (SELECT id FROM executions WHERE job_id IS NULL)")
    op.execute("DELETE FROM executions WHERE job_id IS NULL")
    with op.batch_alter_table("dead_letters") as batch:
        batch.alter_column("job_id", existing_type=sa.Integer(), nullable=False)
    op.drop_index("ix_executions_task", table_name="executions", postgresql_where=_HAS_TASK, sqlite_where=_HAS_TASK)
    op.drop_index("ix_executions_one_off", table_name="executions", postgresql_where=_ONE_OFF, sqlite_where=_ONE_OFF)
    with _rebuilding("executions") as batch:
        batch.drop_constraint(op.f("ck_executions_job_or_task"), type_="check")
        batch.drop_constraint(op.f("fk_executions_project_id_projects"), type_="foreignkey")
    with _rebuilding("executions") as batch:
        batch.alter_column("job_id", existing_type=sa.Integer(), nullable=False)
        for name in reversed(_COLUMNS):
            batch.drop_column(name)
        batch.drop_column("project_id")
        batch.drop_column("task")
