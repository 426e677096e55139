"""operator console (issue 18): ids never reused on SQLite, server-side sessions, alert grouping

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 01:00:00

Reserved in the chain so that work on several issues at once can each fill in its own revision
without racing for the head. Empty until its issue lands its schema.
"""

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
