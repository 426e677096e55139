"""job kinds and policies, part 1 (issue 14): run limits, retry kinds, result/queued TTLs, no-limit timeouts, the `expired` status

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 01:00:00

Reserved in the chain so that work on several issues at once can each fill in its own revision
without racing for the head. Empty until its issue lands its schema.
"""

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
