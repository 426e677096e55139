"""The store: every SQL statement that creates, claims or moves an execution lives here.

Functions take a SQLAlchemy Connection inside a transaction the caller owns, and `now` as a
parameter. Transitions are guarded (`WHERE id = :id AND status IN (...)`): zero rows changed
means another process got there first, and the caller treats the row as lost.
"""
