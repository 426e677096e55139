"""REST API (issue 16): API tokens, JWT denylist, idempotency keys

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 01:00:00

Reserved in the chain so that work on several issues at once can each fill in its own revision
without racing for the head. Empty until its issue lands its schema.
"""

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
