"""audit log (issue 15, second part): an append-only table of every change with before/after

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 01:00:00

Reserved in the chain so that work on several issues at once can each fill in its own revision
without racing for the head. Empty until its issue lands its schema.
"""

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
