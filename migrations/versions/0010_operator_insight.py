"""operator insight (issue 17): dead-man's switch, alert channels, jitter, auto-pause

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 01:00:00

Reserved in the chain so that work on several issues at once can each fill in its own revision
without racing for the head. Empty until its issue lands its schema.
"""

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
