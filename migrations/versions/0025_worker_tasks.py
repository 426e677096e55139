"""what each worker can run, and the order to reload

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07 10:00:00

- `heartbeats.tasks`: the tasks a worker advertises, each with its code version (its
  distribution's version or its module file's hash): {name: version}. NULL for a scheduler, and
  for a worker of an older release (which claims every task).
- `worker_commands.command` may be `reload`: finish what runs, restart the fork server with the
  code now on disk, advertise again, go on.

The column is added and dropped in place. On SQLite the command check changes by a rebuild of
`worker_commands`, which keeps its AUTOINCREMENT and the counter where it was (as migration 0018
does for the channels). Downgrading deletes the reload orders first, which the old check cannot hold.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

COMMANDS_NEW = "command IN ('drain', 'stop', 'reload')"
COMMANDS_OLD = "command IN ('drain', 'stop')"


def _replace_command_check(commands: str) -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    saved = None
    options = {}
    if sqlite:
        saved = bind.execute(sa.text("SELECT seq FROM sqlite_sequence WHERE name = 'worker_commands'")).scalar()
        options = {"recreate": "always", "table_kwargs": {"sqlite_autoincrement": True}}
    with op.batch_alter_table("worker_commands", **options) as batch:
        batch.drop_constraint(op.f("ck_worker_commands_command"), type_="check")
        batch.create_check_constraint(op.f("ck_worker_commands_command"), sa.text(commands))
    if saved is not None:
        # The copy's counter restarts at the highest id copied; put it back past every id seen.
        bind.execute(
            sa.text("UPDATE sqlite_sequence SET seq = max(seq, :seq) WHERE name = 'worker_commands'"), {"seq": saved}
        )
        bind.execute(
            sa.text(
                "INSERT INTO sqlite_sequence (name, seq) SELECT 'worker_commands', :seq"
                " WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'worker_commands')"
            ),
            {"seq": saved},
        )


def upgrade():
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    op.add_column("heartbeats", sa.Column("tasks", json_type, nullable=True))
    _replace_command_check(COMMANDS_NEW)


def downgrade():
    op.get_bind().execute(sa.text("DELETE FROM worker_commands WHERE command = 'reload'"))
    _replace_command_check(COMMANDS_OLD)
    op.execute('ALTER TABLE heartbeats DROP COLUMN "tasks"')
