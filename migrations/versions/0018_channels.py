"""alert channels: Slack and Microsoft Teams kinds beside webhook and email

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04 18:10:00

A channel's kind is checked by the database; `slack` (an incoming-webhook URL, Block Kit message)
and `teams` (an incoming-webhook or workflow URL, Adaptive Card) join `webhook` and `email`.
Downgrading refuses nothing: Slack and Teams channels are deleted first (their deliveries go with
them, by the foreign key's cascade), since the old check cannot hold them.
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

KINDS_NEW = "kind IN ('webhook', 'email', 'slack', 'teams')"
KINDS_OLD = "kind IN ('webhook', 'email')"


def upgrade():
    with op.batch_alter_table("alert_channels") as batch:
        batch.drop_constraint(op.f("ck_alert_channels_kind"), type_="check")
        batch.create_check_constraint(op.f("ck_alert_channels_kind"), sa.text(KINDS_NEW))


def downgrade():
    bind = op.get_bind()
    bind.execute(
        sa.text(
            "DELETE FROM alert_deliveries WHERE channel_id IN (SELECT id FROM alert_channels WHERE kind IN ('slack', 'teams'))"
        )
    )
    bind.execute(sa.text("DELETE FROM alert_channels WHERE kind IN ('slack', 'teams')"))
    with op.batch_alter_table("alert_channels") as batch:
        batch.drop_constraint(op.f("ck_alert_channels_kind"), type_="check")
        batch.create_check_constraint(op.f("ck_alert_channels_kind"), sa.text(KINDS_OLD))
