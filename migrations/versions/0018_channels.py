"""alert channels: Slack and Microsoft Teams kinds beside webhook and email

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04 18:10:00

A channel's kind is checked by the database; `slack` (an incoming-webhook URL, Block Kit message)
and `teams` (an incoming-webhook or workflow URL, Adaptive Card) join `webhook` and `email`.
Downgrading refuses nothing: Slack and Teams channels are deleted first (their deliveries go with
them, by the foreign key's cascade), since the old check cannot hold them.

On SQLite the check changes by a rebuild of the table, which keeps its AUTOINCREMENT and the
counter where it was (migration 0010): ids of deleted channels are never handed out again.
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

KINDS_NEW = "kind IN ('webhook', 'email', 'slack', 'teams')"
KINDS_OLD = "kind IN ('webhook', 'email')"


def _replace_kind_check(kinds: str) -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    saved = None
    options = {}
    if sqlite:
        count = "SELECT seq FROM sqlite_sequence WHERE name = 'alert_channels'"
        saved = bind.execute(sa.text(count)).scalar()
        options = {"recreate": "always", "table_kwargs": {"sqlite_autoincrement": True}}
    with op.batch_alter_table("alert_channels", **options) as batch:
        batch.drop_constraint(op.f("ck_alert_channels_kind"), type_="check")
        batch.create_check_constraint(op.f("ck_alert_channels_kind"), sa.text(kinds))
    if saved is not None:
        # The copy's counter restarts at the highest id copied; put it back past every id seen.
        bind.execute(
            sa.text("UPDATE sqlite_sequence SET seq = max(seq, :seq) WHERE name = 'alert_channels'"), {"seq": saved}
        )
        bind.execute(
            sa.text(
                "INSERT INTO sqlite_sequence (name, seq) SELECT 'alert_channels', :seq"
                " WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'alert_channels')"
            ),
            {"seq": saved},
        )


def upgrade():
    _replace_kind_check(KINDS_NEW)


def downgrade():
    bind = op.get_bind()
    bind.execute(
        sa.text(
            "DELETE FROM alert_deliveries WHERE channel_id IN (SELECT id FROM alert_channels WHERE kind IN ('slack', 'teams'))"
        )
    )
    bind.execute(sa.text("DELETE FROM alert_channels WHERE kind IN ('slack', 'teams')"))
    _replace_kind_check(KINDS_OLD)
