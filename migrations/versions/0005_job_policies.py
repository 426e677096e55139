"""job kinds and policies, part 1: run limits, retry kinds, result/queued TTLs, no-limit timeouts, the `expired` status

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 01:00:00

- jobs gain run limits (`start_at`, `end_at`, `max_runs` and the `runs_created` counter; the
  `disabled_reason` a limit writes comes with migration 0010, shared with auto-pause), retry kinds (`retry_kind`,
  `retry_max_delay_seconds`, `retry_jitter`), result TTLs (`success_ttl_seconds`,
  `failure_ttl_seconds`: -1 keep, 0 next retention pass, n seconds) and `queued_ttl_seconds`;
- `timeout_seconds` may be NULL (no hard timeout);
- executions may end `expired` (queued TTL passed): the status vocabulary and the
  finished-at-iff-terminal rule learn it.
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_STATUSES_OLD = (
    "'pending', 'claimed', 'running', 'retry_scheduled', 'succeeded', 'failed', 'timed_out', 'missed', "
    "'cancelled', 'dead_lettered'"
)
_STATUSES_NEW = _STATUSES_OLD + ", 'expired'"
_TERMINAL_OLD = "'cancelled', 'dead_lettered', 'failed', 'missed', 'succeeded', 'timed_out'"
_TERMINAL_NEW = "'cancelled', 'dead_lettered', 'expired', 'failed', 'missed', 'succeeded', 'timed_out'"

_JOB_CHECKS = {
    "max_runs_positive": "max_runs IS NULL OR max_runs >= 1",
    "runs_created_nonnegative": "runs_created >= 0",
    "retry_kind": "retry_kind IN ('fixed', 'linear', 'exponential')",
    "retry_max_delay": "retry_max_delay_seconds IS NULL OR retry_max_delay_seconds >= 1",
    "retry_jitter_fraction": "retry_jitter >= 0 AND retry_jitter <= 1",
    "result_ttl_range": "success_ttl_seconds >= -1 AND failure_ttl_seconds >= -1",
    "queued_ttl_positive": "queued_ttl_seconds IS NULL OR queued_ttl_seconds >= 1",
}


def _executions_statuses(statuses: str, terminal: str) -> None:
    with op.batch_alter_table("executions") as batch:
        batch.drop_constraint(op.f("ck_executions_status"), type_="check")
        batch.drop_constraint(op.f("ck_executions_finished_at_iff_terminal"), type_="check")
    with op.batch_alter_table("executions") as batch:
        batch.create_check_constraint(op.f("ck_executions_status"), sa.text(f"status IN ({statuses})"))
        batch.create_check_constraint(
            op.f("ck_executions_finished_at_iff_terminal"),
            sa.text(f"(status IN ({terminal})) = (finished_at IS NOT NULL)"),
        )


def upgrade():
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("start_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("end_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("max_runs", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("runs_created", sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("retry_kind", sa.String(length=12), server_default="exponential", nullable=False))
        batch.add_column(sa.Column("retry_max_delay_seconds", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("retry_jitter", sa.Float(), server_default="0.0", nullable=False))
        batch.add_column(sa.Column("success_ttl_seconds", sa.Integer(), server_default="-1", nullable=False))
        batch.add_column(sa.Column("failure_ttl_seconds", sa.Integer(), server_default="-1", nullable=False))
        batch.add_column(sa.Column("queued_ttl_seconds", sa.Integer(), nullable=True))
        batch.alter_column("timeout_seconds", existing_type=sa.Integer(), nullable=True)
        batch.drop_constraint(op.f("ck_jobs_timeout_positive"), type_="check")
    with op.batch_alter_table("jobs") as batch:
        batch.create_check_constraint(
            op.f("ck_jobs_timeout_positive"), sa.text("timeout_seconds IS NULL OR timeout_seconds >= 1")
        )
        for name, condition in _JOB_CHECKS.items():
            batch.create_check_constraint(op.f(f"ck_jobs_{name}"), sa.text(condition))
    _executions_statuses(_STATUSES_NEW, _TERMINAL_NEW)


def downgrade():
    # Rows the older schema cannot hold: expired executions become cancelled (both terminal, never
    # ran), jobs with no timeout get the old default.
    op.execute("UPDATE executions SET status = 'cancelled' WHERE status = 'expired'")
    op.execute("UPDATE jobs SET timeout_seconds = 30 WHERE timeout_seconds IS NULL")
    _executions_statuses(_STATUSES_OLD, _TERMINAL_OLD)
    with op.batch_alter_table("jobs") as batch:
        for name in _JOB_CHECKS:
            batch.drop_constraint(op.f(f"ck_jobs_{name}"), type_="check")
        batch.drop_constraint(op.f("ck_jobs_timeout_positive"), type_="check")
    with op.batch_alter_table("jobs") as batch:
        batch.create_check_constraint(op.f("ck_jobs_timeout_positive"), sa.text("timeout_seconds >= 1"))
        batch.alter_column("timeout_seconds", existing_type=sa.Integer(), nullable=False)
        for column in (
            "queued_ttl_seconds",
            "failure_ttl_seconds",
            "success_ttl_seconds",
            "retry_jitter",
            "retry_max_delay_seconds",
            "retry_kind",
            "runs_created",
            "max_runs",
            "end_at",
            "start_at",
        ):
            batch.drop_column(column)
