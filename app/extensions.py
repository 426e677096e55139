"""Extension singletons, bound to an app in create_app via init_app."""

import threading
from typing import TYPE_CHECKING

from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import MetaData

from config import BASE_DIR

# Named constraints so Alembic migrations are deterministic on PostgreSQL and SQLite alike.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# The Alembic migrations that build `db`'s schema, read by `flask db` (cli/db.py), which imports
# Alembic only when it runs (see docs/adr/0007).
MIGRATIONS_DIR = BASE_DIR / "migrations"
# The newest migration this code expects the database to be at. The readiness check compares it
# with the alembic_version table in plain SQL, so web processes never import Alembic (about
# 11 MB each); tests/integration/test_schema.py fails if a new migration does not update it.
SCHEMA_HEAD = "0029"

db = SQLAlchemy(metadata=MetaData(naming_convention=NAMING_CONVENTION))

if TYPE_CHECKING:
    from typing import ClassVar

    from flask_sqlalchemy.model import Model as _FlaskModel
    from sqlalchemy import Table
    from sqlalchemy.orm import DeclarativeBase

    class Model(_FlaskModel, DeclarativeBase):
        """What `db.Model` is, for the type checker, which cannot take a base class from an
        attribute: a declarative base with Flask-SQLAlchemy's model mixin (each model maps a Table)."""

        __table__: ClassVar[Table]

else:
    Model = db.Model  # the models' base class


def _login_manager():
    from flask_login import LoginManager

    return LoginManager()


def _csrf():
    from flask_wtf import CSRFProtect

    return CSRFProtect()


# The REST API's JWTs (app/api/security.py configures them) and the rate limiter shared by the
# API and the web sign-in (storage: Redis when REDIS_URL is set, else memory).
def _jwt():
    from flask_jwt_extended import JWTManager

    return JWTManager()


def _limiter():
    from app.request_limits import RequestLimiter

    return RequestLimiter()


# The web's extensions are made on first use (`from app.extensions import csrf` works as ever):
# every model and service imports `db` from here, and the worker and scheduler, which use none of
# these, would otherwise carry Flask-Login, Flask-WTF, WTForms, flask-jwt-extended, PyJWT and
# limits (about 5 MB each process).
_LAZY = {"login_manager": _login_manager, "csrf": _csrf, "jwt": _jwt, "limiter": _limiter}


_LAZY_LOCK = threading.Lock()


def __getattr__(name: str):
    make = _LAZY.get(name)
    if make is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _LAZY_LOCK:  # one instance per process, like the module-level singletons were
        if name not in globals():
            globals()[name] = make()
    return globals()[name]
