"""Pure domain rules: execution states, policies and retry maths.

No I/O, no Flask, no SQLAlchemy and no `datetime.now()` here: every function takes the instant
it reasons about as a parameter, so the rules are trivially testable with literal datetimes.
"""
