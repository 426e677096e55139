"""gunicorn settings for the web process: `gunicorn --config gunicorn.conf.py wsgi:app`.

Used by compose.yaml, scripts/run_all.py and docs/deployment.md. Every value can be overridden
by environment variables (GUNICORN_*, see .env.example). Logs are Cronwell's own formatters
(app.gunicorn_logs.GunicornLogger): one JSON object per line with LOG_FORMAT=json, including one
`http_request` event per request. Metrics: each gunicorn worker is a process, so
prometheus_client's multiprocess mode sums them through files in PROMETHEUS_MULTIPROC_DIR
(a fresh temporary directory unless set; emptied at start-up).
"""

import glob
import os
import shutil
import tempfile

from config import InsecureSettings, load_settings, refuse_insecure_start

_settings = load_settings()  # validates the environment once, in the master, before any worker starts

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = _settings["GUNICORN_WORKERS"]
# Threads let one worker overlap requests that wait on the database; sessions are per thread.
worker_class = "gthread"
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
# A request that takes longer than this is stuck: the worker is killed and replaced.
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = int(os.environ.get("GUNICORN_GRACEFUL_TIMEOUT", "20"))
keepalive = 5
# The longest request line gunicorn reads (its hard cap). The API refuses URLs over 4096 bytes
# itself, with a problem document (app/api/openapi.py); above this cap gunicorn refuses them, also
# as a problem document (post_worker_init).
limit_request_line = 8190
# Recycle workers now and then so a slow leak never becomes an outage.
max_requests = int(os.environ.get("GUNICORN_MAX_REQUESTS", "1000"))
max_requests_jitter = max_requests // 10
# Trust X-Forwarded-* only from the reverse proxy in front (comma-separated addresses).
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
# Worker heartbeats on a memory filesystem: a disk-backed /tmp can stall them under I/O load.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
accesslog = "-"
errorlog = "-"
loglevel = _settings["LOG_LEVEL"].lower()
logger_class = "app.gunicorn_logs.GunicornLogger"
# gunicorn's control socket lives at one path per user: several gunicorns on a host would clash.
control_socket_disable = True

_created_metrics_dir = None
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    # Must be in the environment before a worker imports prometheus_client.
    _created_metrics_dir = os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="cronwell-prometheus-")


def on_starting(server):
    """Refuse production mode with the development SECRET_KEY; start metrics from zero."""
    try:
        refuse_insecure_start(_settings)
    except InsecureSettings as exc:
        server.log.critical(str(exc), extra={"event": "refused_to_start"})
        raise SystemExit(1) from None
    directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    os.makedirs(directory, exist_ok=True)
    for stale in glob.glob(os.path.join(directory, "*.db")):
        os.remove(stale)


def post_worker_init(worker):
    """What gunicorn refuses itself (a request line over 8190 bytes, malformed headers) is answered
    as a problem document, like everything the API answers (app/api/server_errors.py)."""
    from app.api.server_errors import answer_problem_documents

    answer_problem_documents()


def child_exit(server, worker):
    """Fold a dead worker's live gauges out of the multiprocess metrics."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    """Remove the metrics directory if this config created it."""
    if _created_metrics_dir:
        shutil.rmtree(_created_metrics_dir, ignore_errors=True)
