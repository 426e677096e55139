"""web sessions (issue 18): an absolute age limit and pruning of ended sessions

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01 05:00:00

Reserved in the chain so that work on several issues at once can each fill in its own revision
without racing for the head. Empty until its issue lands its schema.
"""

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
