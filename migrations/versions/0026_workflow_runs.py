"""workflow runs: one row per occurrence of a workflow job, step executions point at it

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-06 20:00:00

A workflow job's occurrence is an execution like any other (the run's anchor: the scheduler,
misfire, overlap, unique keys and the runs grid see it as one run). When it starts, a
`workflow_runs` row with the anchor's id holds the steps as they were then (`steps`) and what
became of each (`state`: step name -> its execution id, or `upstream_failed` / `cancelled`).
Each step runs as an execution with `trigger` 'workflow', `workflow_run_id`, its `step` name and
the results of the steps it waited for (`upstream_results`). `workflow_run_id` is a plain
column, not a foreign key: `workflow_runs.id` already references executions, and a key each way
would make the two tables a cycle no create or drop order satisfies. Both go with their job.

Downgrading deletes the workflow runs and their step executions.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), "postgresql")
_TRIGGERS_BEFORE = "'schedule', 'catch_up', 'manual', 'retry', 'callback', 'batch', 'backfill'"
_TRIGGERS_AFTER = _TRIGGERS_BEFORE + ", 'workflow'"
_IS_STEP = sa.text("workflow_run_id IS NOT NULL")


@contextmanager
def _rebuilding(table: str) -> Iterator[Any]:
    """`batch_alter_table` for a change SQLite can only make by copying the table (a CHECK, a
    foreign key): the copy keeps the table's AUTOINCREMENT (an id is never handed out twice) and
    its counter, which a plain batch copy would drop and restart at the highest id."""
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
            sa.text(
                "INSERT INTO sqlite_sequence (name, seq) SELECT :t, :seq"
                " WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = :t)"
            ),
            {"seq": saved, "t": table},
        )


def upgrade():
    op.create_table(
        "workflow_runs",
        # The anchor execution's id: one workflow run per occurrence, removed with it.
        sa.Column("id", sa.Integer(), sa.ForeignKey("executions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("job_id", sa.Integer(), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("retry_of_id", sa.Integer(), nullable=True),
        sa.Column("retry_from", sa.String(length=64), nullable=True),
        sa.Column("steps", _JSON, nullable=False),
        sa.Column("state", _JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_workflow_runs_job_id", "workflow_runs", ["job_id", "id"])
    op.create_index(
        "ix_workflow_runs_unfinished",
        "workflow_runs",
        ["id"],
        postgresql_where=sa.text("finished_at IS NULL"),
        sqlite_where=sa.text("finished_at IS NULL"),
    )
    op.create_index(
        "ix_jobs_workflows",
        "jobs",
        ["id"],
        postgresql_where=sa.text("steps IS NOT NULL"),
        sqlite_where=sa.text("steps IS NOT NULL"),
    )
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("step", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("upstream_results", _JSON, nullable=True))
        batch.add_column(sa.Column("workflow_run_id", sa.Integer(), nullable=True))
    with _rebuilding("executions") as batch:
        batch.drop_constraint(op.f("ck_executions_trigger"), type_="check")
        batch.create_check_constraint(op.f("ck_executions_trigger"), sa.text(f"trigger IN ({_TRIGGERS_AFTER})"))
    op.create_index(
        "ix_executions_workflow_run",
        "executions",
        ["workflow_run_id", "id"],
        postgresql_where=_IS_STEP,
        sqlite_where=_IS_STEP,
    )


def downgrade():
    bind = op.get_bind()
    for statement in (
        "DELETE FROM attempts WHERE execution_id IN (SELECT id FROM executions WHERE workflow_run_id IS NOT NULL)",
        "DELETE FROM dead_letters WHERE execution_id IN (SELECT id FROM executions WHERE workflow_run_id IS NOT NULL)",
        "DELETE FROM alerts WHERE execution_id IN (SELECT id FROM executions WHERE workflow_run_id IS NOT NULL)",
        "DELETE FROM executions WHERE workflow_run_id IS NOT NULL",
        "DELETE FROM workflow_runs",
    ):
        bind.execute(sa.text(statement))
    op.drop_index(
        "ix_executions_workflow_run", table_name="executions", postgresql_where=_IS_STEP, sqlite_where=_IS_STEP
    )
    with _rebuilding("executions") as batch:
        batch.drop_constraint(op.f("ck_executions_trigger"), type_="check")
        batch.create_check_constraint(op.f("ck_executions_trigger"), sa.text(f"trigger IN ({_TRIGGERS_BEFORE})"))
        batch.drop_column("workflow_run_id")
        batch.drop_column("upstream_results")
        batch.drop_column("step")
    op.drop_index("ix_jobs_workflows", table_name="jobs")
    op.drop_index("ix_workflow_runs_unfinished", table_name="workflow_runs")
    op.drop_index("ix_workflow_runs_job_id", table_name="workflow_runs")
    op.drop_table("workflow_runs")
