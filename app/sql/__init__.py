"""Statements as text on DB-API connections, for the worker parent and everyone else (ADR 0012).

The worker parent is to run these on a bare psycopg or sqlite3 connection, without importing
SQLAlchemy; every other process runs the same statements on the DB-API connection under its
SQLAlchemy `Connection`. So nothing in this package may import SQLAlchemy, Flask or the models
(tests/unit/test_sql_imports.py). `transport` runs a `Statement` and converts its values; each
other module holds the statements of one part of the worker's work.
"""
