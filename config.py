"""Settings, read from environment variables when the app is created (never at import time).

Every setting is documented in README.md and .env.example. `load_settings(environ)` is a pure
function of the environment so tests can build apps with any configuration.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent
DEV_SECRET_KEY = "dev-insecure-secret-key-change-me"


def _bool(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"expected a boolean (1/0, true/false), got {value!r}")


def _int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _percent(env: Mapping[str, str], name: str, default: int) -> int:
    value = _int(env, name, default, 1)
    if value > 100:
        raise ValueError(f"{name} must be <= 100, got {value}")
    return value


def _int_from(env: Mapping[str, str], name: str, default: int) -> int:
    """A result TTL setting: -1 (forever) or more."""
    return _int(env, name, default, -1) if env.get(name) not in (None, "") else default


def _optional_int(env: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    """An integer setting that may also be `none` (no limit): unset keeps `default`."""
    raw = env.get(name)
    if raw is not None and raw.strip().lower() == "none":
        return None
    if raw is None or raw == "":
        return default
    return _int(env, name, 0, minimum)


def normalise_database_url(url: str) -> str:
    """Accept postgres:// and postgresql:// as given and point them at psycopg 3. A libpq
    multi-host URL (`postgresql://u@a:5432,b:5432/db?target_session_attrs=read-write`, for a
    primary and its standbys) becomes SQLAlchemy's spelling (`...@/db?host=a:5432&host=b:5432&...`)."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + _multi_host(url[len(prefix) :])
    return url


def _multi_host(rest: str) -> str:
    """`user@a:1,b:2/db?x=y` -> `user@/db?host=a:1&host=b:2&x=y`; anything else unchanged."""
    netloc, slash, tail = rest.partition("/")
    user, at, hosts = netloc.rpartition("@")
    if "," not in hosts:
        return rest
    path, question, query = tail.partition("?")
    params = "&".join(f"host={host}" for host in hosts.split(",") if host)
    return f"{user}{at}/{path}?{params}" + (f"&{query}" if query else "")


# The Flask app's instance folder (create_app), against which Flask-SQLAlchemy resolves a relative
# SQLite path.
APP_INSTANCE_PATH = BASE_DIR / "instance"


def absolute_sqlite_url(url: str) -> str:
    """`sqlite:///relative.db` -> `sqlite:////<project>/instance/relative.db`; anything else unchanged.

    Flask-SQLAlchemy opens a relative SQLite path in the app's instance folder, but every other
    reader of the URL would open it in its own working directory: the worker process on sqlite3
    (app/worker_process.py) and a task's own engine (`TaskContext.database_url`). Resolved once,
    here, they all open the file the web and the scheduler use."""
    scheme, sep, rest = url.partition(":///")
    if not sep or not scheme.startswith("sqlite"):
        return url
    path, question, query = rest.partition("?")
    if not path or path == ":memory:" or path.startswith(("/", "file:")):
        return url
    return f"{scheme}:///{APP_INSTANCE_PATH / path}{question}{query}"


def default_sqlite_url(instance_dir: Path) -> str:
    return f"sqlite:///{instance_dir / 'cronwell.sqlite3'}"


def load_settings(env: Mapping[str, str] | None = None) -> dict:
    """Build the Flask config mapping from environment variables."""
    env = os.environ if env is None else env
    instance_dir = Path(env.get("INSTANCE_DIR") or BASE_DIR / "instance")
    database_url = env.get("DATABASE_URL") or default_sqlite_url(instance_dir)
    debug = _bool(env.get("DEBUG"), True)
    return {
        "DEBUG": debug,
        # DEBUG as configured here: the `flask` command overwrites app.config["DEBUG"] with
        # FLASK_DEBUG when it loads the app, so CLI commands that depend on it read this key.
        "CRONWELL_DEBUG": debug,
        "INSTANCE_DIR": str(instance_dir),
        "SECRET_KEY": env.get("SECRET_KEY") or DEV_SECRET_KEY,
        # Fernet key(s) sealing alert channels' URLs and secrets at rest, comma-separated to rotate
        # (the first seals); required with DEBUG=0 (app/secret_box.py, docs/deployment.md).
        "CHANNEL_SECRET_KEY": env.get("CHANNEL_SECRET_KEY") or None,
        "SQLALCHEMY_DATABASE_URI": absolute_sqlite_url(normalise_database_url(database_url)),
        # The scheduler process pings only connections idle a second instead (app/database.py
        # `ping_when_idle`): its loop retries any database error, and a ping per checkout was
        # half of what an idle scheduler cost the database.
        "SQLALCHEMY_ENGINE_OPTIONS": {"pool_pre_ping": True},
        # DATABASE_URL reaches PostgreSQL through a transaction-pooling PgBouncer: no prepared
        # statements or session settings, and LISTEN on DATABASE_LISTEN_URL (docs/deployment.md).
        "DATABASE_TRANSACTION_POOLING": _bool(env.get("DATABASE_TRANSACTION_POOLING"), False),
        "DATABASE_LISTEN_URL": normalise_database_url(env["DATABASE_LISTEN_URL"])
        if env.get("DATABASE_LISTEN_URL")
        else None,
        "REDIS_URL": env.get("REDIS_URL") or None,
        "CACHE_KEY_PREFIX": env.get("CACHE_KEY_PREFIX", "cronwell:"),
        "WEBUI_AUTH": _bool(env.get("WEBUI_AUTH"), True),
        "WEBUI_PUBLIC_READ": _bool(env.get("WEBUI_PUBLIC_READ"), True),
        "SCHEDULER_CLI_SECRET": env.get("SCHEDULER_CLI_SECRET") or None,
        "LOGIN_RATE_LIMIT_ATTEMPTS": _int(env, "LOGIN_RATE_LIMIT_ATTEMPTS", 10, 1),
        "LOGIN_RATE_LIMIT_WINDOW_SECONDS": _int(env, "LOGIN_RATE_LIMIT_WINDOW_SECONDS", 300, 1),
        # A web session ends this long after sign-in, however active (docs/web.md "Sessions").
        "SESSION_MAX_AGE_HOURS": _int(env, "SESSION_MAX_AGE_HOURS", 168, 1),
        "LEASE_SECONDS": _int(env, "LEASE_SECONDS", 120, 1),
        "LEASE_BUFFER_SECONDS": _int(env, "LEASE_BUFFER_SECONDS", 30, 0),
        # A worker that cannot renew its leases stops its tasks before they lapse (docs/reliability.md).
        "LEASE_WATCHDOG": _bool(env.get("LEASE_WATCHDOG"), True),
        "MISFIRE_CATCH_UP_CAP": _int(env, "MISFIRE_CATCH_UP_CAP", 50, 1),
        # Work that waited this long for a worker jumps to the top priority (0: never).
        "PRIORITY_AGING_SECONDS": _int(env, "PRIORITY_AGING_SECONDS", 300, 0),
        "HEARTBEAT_PRUNE_SECONDS": _int(env, "HEARTBEAT_PRUNE_SECONDS", 86400, 60),
        "HEARTBEAT_STALE_SECONDS": _int(env, "HEARTBEAT_STALE_SECONDS", 60, 5),
        # Alerts (docs/insight.md): a queue_backlog alert when a queue's oldest due run waited this
        # long (0: off); how often the scheduler evaluates alerts; webhook/email delivery.
        "ALERT_QUEUE_BACKLOG_SECONDS": _int(env, "ALERT_QUEUE_BACKLOG_SECONDS", 900, 0),
        "ALERT_EVALUATE_SECONDS": _int(env, "ALERT_EVALUATE_SECONDS", 10, 1),
        # A job's open dead-letter alert is resolved (by `system`) once the job succeeds again.
        "ALERT_RESOLVE_ON_SUCCESS": _bool(env.get("ALERT_RESOLVE_ON_SUCCESS"), True),
        "ALERT_DELIVERY_MAX_ATTEMPTS": _int(env, "ALERT_DELIVERY_MAX_ATTEMPTS", 8, 1),
        "ALERT_DELIVERY_BACKOFF_SECONDS": _int(env, "ALERT_DELIVERY_BACKOFF_SECONDS", 10, 0),
        "ALERT_DELIVERY_TIMEOUT_SECONDS": _int(env, "ALERT_DELIVERY_TIMEOUT_SECONDS", 10, 1),
        "SMTP_HOST": env.get("SMTP_HOST") or "localhost",
        "SMTP_PORT": _int(env, "SMTP_PORT", 25, 1),
        "SMTP_FROM": env.get("SMTP_FROM") or "cronwell@localhost",
        # The installation's public address: Slack, Teams and email alerts link back to it.
        "BASE_URL": env.get("BASE_URL") or None,
        # Audit events older than this are deleted by the retention pass (0: kept forever).
        "AUDIT_RETENTION_DAYS": _int(env, "AUDIT_RETENTION_DAYS", 365, 0),
        "EVENT_RETENTION_DAYS": _int(env, "EVENT_RETENTION_DAYS", 90, 0),
        # The retention pass's pace (app.domain.pacing): at most this many rows per second (0: no
        # cap), working at most this percentage of its time (100: no pauses), so it leaves the
        # claims their share of a small machine (docs/performance.md, "10M executions").
        "RETENTION_ROWS_PER_SECOND": _int(env, "RETENTION_ROWS_PER_SECOND", 11000, 0),
        "RETENTION_DUTY_PERCENT": _percent(env, "RETENTION_DUTY_PERCENT", 75),
        "READYZ_REQUIRE_HEARTBEATS": _bool(env.get("READYZ_REQUIRE_HEARTBEATS"), False),
        "READYZ_REQUIRE_WORKER_HEARTBEAT": _bool(env.get("READYZ_REQUIRE_WORKER_HEARTBEAT"), False),
        "DEV_ADMIN_USERNAME": env.get("DEV_ADMIN_USERNAME", "admin"),
        "DEV_ADMIN_PASSWORD": env.get("DEV_ADMIN_PASSWORD") or None,
        "SECURE_COOKIES": _bool(env.get("SECURE_COOKIES"), False),
        "ARTIFACT_DIR": env.get("ARTIFACT_DIR") or str(instance_dir / "artifacts"),
        "MARKER_DIR": env.get("MARKER_DIR") or str(instance_dir / "markers"),
        "LOG_FORMAT": env.get("LOG_FORMAT", "text" if debug else "json"),
        "LOG_LEVEL": env.get("LOG_LEVEL", "INFO"),
        "SCHEDULER_TICK_SECONDS": _int(env, "SCHEDULER_TICK_SECONDS", 5, 1),
        # With LISTEN/NOTIFY working and no execution waiting or running, the longest sleeps of the
        # scheduler and of a worker: safety nets only, NOTIFY wakes them for every change.
        "SCHEDULER_IDLE_TICK_SECONDS": _int(env, "SCHEDULER_IDLE_TICK_SECONDS", 15, 1),
        "WORKER_IDLE_POLL_SECONDS": _int(env, "WORKER_IDLE_POLL_SECONDS", 5, 1),
        # Occurrences are written this long before their time (claimable only at it; 0: at their time).
        "SCHEDULER_LEAD_MS": _int(env, "SCHEDULER_LEAD_MS", 2000, 0),
        "WORKER_POLL_SECONDS": _int(env, "WORKER_POLL_SECONDS", 1, 1),
        "LISTEN_NOTIFY": _bool(env.get("LISTEN_NOTIFY"), True),
        "WORKER_SHUTDOWN_GRACE_SECONDS": _int(env, "WORKER_SHUTDOWN_GRACE_SECONDS", 30, 0),
        # A pool process (jobs with isolation = pool) is replaced after this many attempts, or when
        # its resident size after an attempt exceeds this many MB (0: no cap). docs/job-policies.md.
        "WORKER_POOL_MAX_TASKS_PER_CHILD": _int(env, "WORKER_POOL_MAX_TASKS_PER_CHILD", 1000, 1),
        "WORKER_POOL_MAX_MEMORY_MB": _int(env, "WORKER_POOL_MAX_MEMORY_MB", 512, 0),
        # Job defaults (a job's own value wins; app/definitions/job.py SETTING_DEFAULTS). `none`: no
        # timeout / no queued TTL; -1: keep results forever.
        "DEFAULT_JOB_TIMEOUT_SECONDS": _optional_int(env, "DEFAULT_JOB_TIMEOUT_SECONDS", 30, 1),
        "DEFAULT_SUCCESS_TTL_SECONDS": _int_from(env, "DEFAULT_SUCCESS_TTL_SECONDS", -1),
        "DEFAULT_FAILURE_TTL_SECONDS": _int_from(env, "DEFAULT_FAILURE_TTL_SECONDS", -1),
        "DEFAULT_QUEUED_TTL_SECONDS": _optional_int(env, "DEFAULT_QUEUED_TTL_SECONDS", None, 1),
        # Rows per page of the executions list (web).
        "EXECUTIONS_PER_PAGE": _int(env, "EXECUTIONS_PER_PAGE", 50, 1),
        # Hard timeout of a callback execution (on_success / on_failure / a batch's on_complete).
        "CALLBACK_TIMEOUT_SECONDS": _int(env, "CALLBACK_TIMEOUT_SECONDS", 60, 1),
        # The deployer's task modules (comma-separated; docs/tasks.md), besides the `cronwell.tasks`
        # entry points, and the largest result (JSON, in bytes) a task may return.
        "CRONWELL_TASK_MODULES": env.get("CRONWELL_TASK_MODULES") or "",
        "RESULT_MAX_BYTES": _int(env, "RESULT_MAX_BYTES", 65536, 2),
        "WTF_CSRF_TIME_LIMIT": None,
        # Observability and deployment (docs/deployment.md). GUNICORN_WORKERS is read here too so
        # `flask check-deploy` can tell when rate limiting would be per process.
        "METRICS_ENABLED": _bool(env.get("METRICS_ENABLED"), False),
        "METRICS_TOKEN": env.get("METRICS_TOKEN") or None,
        "GUNICORN_WORKERS": _int(env, "GUNICORN_WORKERS", 2, 1),
        # REST API (docs/api.md): token lifetimes, open sign-up, rate limits (the `limits` library's syntax).
        "JWT_ACCESS_TOKEN_MINUTES": _int(env, "JWT_ACCESS_TOKEN_MINUTES", 15, 1),
        "JWT_REFRESH_TOKEN_DAYS": _int(env, "JWT_REFRESH_TOKEN_DAYS", 7, 1),
        "REGISTRATION_OPEN": _bool(env.get("REGISTRATION_OPEN"), False),
        "API_AUTH_RATE_LIMIT": env.get("API_AUTH_RATE_LIMIT") or "10 per minute",
        "API_TOKEN_RATE_LIMIT": env.get("API_TOKEN_RATE_LIMIT") or "600 per minute",
    }


class InsecureSettings(RuntimeError):
    """Production settings that must stop a long-running process from starting."""


def refuse_insecure_start(settings: Mapping, *, seals_channels: bool = True) -> None:
    """Raise InsecureSettings when DEBUG=0 runs with the development SECRET_KEY, or (for the
    processes that read alert channels: the web and the scheduler) without a usable
    CHANNEL_SECRET_KEY.

    The web, scheduler and worker call this before they start: with the published development
    key anyone could forge a signed-in session cookie, and without a channel key the channels'
    URLs and secrets could be neither read nor stored. Other commands (migrations, check-deploy)
    still run so an operator can diagnose the deployment.
    """
    debug = settings.get("CRONWELL_DEBUG", settings.get("DEBUG"))
    if not debug and settings.get("SECRET_KEY") in (None, "", DEV_SECRET_KEY):
        raise InsecureSettings(
            "refusing to start: DEBUG=0 but SECRET_KEY is unset or the development default; set SECRET_KEY "
            "to a long random value, e.g. python -c 'import secrets; print(secrets.token_urlsafe(48))'"
        )
    if seals_channels:
        from app.secret_box import key_problem

        problem = key_problem(settings)
        if problem:
            raise InsecureSettings(f"refusing to start: {problem}")
