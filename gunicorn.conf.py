"""gunicorn settings for the web process; every value can be overridden by environment."""
import os

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", "2"))
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
worker_class = "gthread"
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = 20
keepalive = 5
accesslog = "-"
errorlog = "-"
# One JSON object per request, like the rest of Cronwell's logs.
access_log_format = (
    '{"time": "%(t)s", "event": "http_request", "method": "%(m)s", "path": "%(U)s", "status": %(s)s, '
    '"bytes": "%(B)s", "duration_ms": %(M)s, "remote": "%(h)s"}'
)
