"""Memory: peak RSS of the scheduler, the worker parent, its zygote, task processes and a web worker.

Real processes on the benchmark database: `flask scheduler run`, `flask worker run` (4 slots),
gunicorn with one worker on a loopback port, 100k executions of history, 100 interval jobs
every 1-5 s plus sleeping jobs (so task processes live long enough to be sampled), and the web
pages requested in a loop. Peak RSS is the kernel's VmHWM, read just before each process stops;
task processes are sampled every 50 ms while alive (their VmHWM, and USS: the memory that is
theirs alone, since a forked child shares the zygote's pages until it writes to them).
The same-run limit for a task process is the zygote it was forked from.
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

from app.clock import utcnow
from bench import loaders
from bench.harness import (
    PROJECT_ROOT,
    VENV_BIN,
    BenchDatabase,
    Figure,
    children_of,
    flask_process,
    proc_status,
    stop_process,
    wait_for,
)

NAME = "memory"
HISTORY_ROWS = 100_000
PAGES = ["/dashboard/", "/jobs/", "/executions/", "/executions/?status=failed", "/jobs/1", "/alerts/", "/health/"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _create_jobs(app) -> None:
    from app.extensions import db
    from app.services.use_cases.jobs import create_job

    now = utcnow()
    with app.app_context():
        for i in range(100):
            create_job(
                {
                    "name": f"mem-{i}",
                    "task": "always_succeed",
                    "schedule_type": "interval",
                    "schedule": {"every": f"{i % 5 + 1}s"},
                    "max_attempts": 1,
                    "alert_mode": "log_only",
                },
                now=now,
                actor="bench",
            )
        for i in range(4):
            create_job(
                {
                    "name": f"mem-sleep-{i}",
                    "task": "sleep_for_seconds",
                    "config": {"seconds": 1.5},
                    "schedule_type": "interval",
                    "schedule": {"every": "2s"},
                    "max_attempts": 1,
                    "alert_mode": "log_only",
                },
                now=now,
                actor="bench",
            )
        db.session.remove()


def run(db: BenchDatabase, options) -> list[Figure]:
    db.reset()
    with db.connect() as conn:
        loaders.load_history(conn, HISTORY_ROWS, 1000, now=utcnow() - timedelta(minutes=1))
    _create_jobs(db.app())
    port = _free_port()
    env = db.env(WEBUI_AUTH="0", GUNICORN_WORKERS="1", GUNICORN_BIND=f"127.0.0.1:{port}", LOG_LEVEL="WARNING")
    logs = Path(tempfile.mkdtemp(prefix="cronwell_bench_memory_"))
    scheduler = flask_process(["scheduler", "run"], env, log_path=logs / "scheduler.log")
    worker = flask_process(["worker", "run", "--workers", "4"], env, log_path=logs / "worker.log")
    web = subprocess.Popen(
        [str(VENV_BIN / "gunicorn"), "--config", "gunicorn.conf.py", "wsgi:app"],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=open(logs / "web.log", "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    tasks: dict[int, dict] = {}
    peaks: dict = {}
    requests = 0
    try:
        wait_for(lambda: _get(port, "/healthz") == 200, 30, what="gunicorn to answer")
        deadline = time.monotonic() + (8.0 if options.quick else 20.0)
        while time.monotonic() < deadline:
            for zygote in children_of(worker.pid):
                for pid in children_of(zygote):
                    facts = proc_status(pid)
                    if facts:
                        old = tasks.get(pid, {})
                        tasks[pid] = {k: max(v, old.get(k, 0.0)) for k, v in facts.items()}
            if requests % 5 == 0:
                for path in PAGES:
                    _get(port, path)
            requests += 1
            time.sleep(0.05)
        zygotes = children_of(worker.pid)
        web_workers = children_of(web.pid)
        peaks = {
            "scheduler": proc_status(scheduler.pid),
            "worker_parent": proc_status(worker.pid),
            "zygote": proc_status(zygotes[0]) if zygotes else {},
            "web_master": proc_status(web.pid),
            "web_worker": proc_status(web_workers[0]) if web_workers else {},
        }
    finally:
        for proc in (web, worker, scheduler):
            stop_process(proc)
    task_hwm = [t["VmHWM"] for t in tasks.values() if "VmHWM" in t]
    task_uss = [t["USS"] for t in tasks.values() if "USS" in t]
    zygote_hwm = peaks["zygote"].get("VmHWM")
    figures = [
        Figure(
            NAME,
            "worker parent peak RSS",
            peaks["worker_parent"].get("VmHWM"),
            "MB",
            "zygote peak RSS",
            zygote_hwm,
            note="flask worker run, 4 slots",
        ).judge("<= 80"),
        Figure(
            NAME,
            "scheduler peak RSS",
            peaks["scheduler"].get("VmHWM"),
            "MB",
            "worker parent",
            peaks["worker_parent"].get("VmHWM"),
        ),
        Figure(NAME, "zygote peak RSS", zygote_hwm, "MB", "worker parent", peaks["worker_parent"].get("VmHWM")),
        Figure(
            NAME,
            "task process peak RSS (max)",
            max(task_hwm) if task_hwm else None,
            "MB",
            "zygote peak RSS",
            zygote_hwm,
            note=f"{len(task_hwm)} task processes sampled; most pages shared with the zygote",
        ),
        Figure(
            NAME,
            "task process private (USS, max)",
            max(task_uss) if task_uss else None,
            "MB",
            "zygote peak RSS",
            zygote_hwm,
            note="what each extra running task really costs",
        ),
        Figure(
            NAME,
            "web worker peak RSS",
            peaks["web_worker"].get("VmHWM"),
            "MB",
            "worker parent",
            peaks["worker_parent"].get("VmHWM"),
            note=f"gunicorn gthread worker after {requests // 5 * len(PAGES)} page requests at {HISTORY_ROWS:,} rows",
        ),
    ]
    figures[0].extra = {"peaks": peaks, "tasks_sampled": len(tasks), "logs": str(logs)}
    return figures


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy


def _get(port: int, path: str) -> int:
    try:
        with _OPENER.open(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            response.read()
            return response.status
    except Exception:
        return 0
