"""Memory: peak RSS of the scheduler, the worker parent, its zygote, task processes and a web worker.

Real processes on the benchmark database: `flask scheduler run`, `flask worker run` (4 slots),
gunicorn with one worker on a loopback port, 100k executions of history, 100 interval jobs
every 1-5 s plus sleeping jobs (so task processes live long enough to be sampled), and the web
pages requested in a loop. Peak RSS is the kernel's VmHWM, read just before each process stops;
task processes are sampled every 50 ms while alive (their VmHWM, and USS: the memory that is
theirs alone, since a forked child shares the zygote's pages until it writes to them).
The same-run limit for a task process is the zygote it was forked from.

Then the drain: `flask worker run --workers 4` drains N pending no-op
executions (default 3000, `--throughput-n`) on PostgreSQL, the peaks read while it is still
alive, and the worker parent's peak is printed as a ratio to Celery's prefork main process on
this machine (51 MB, the target). Each round runs it three times, interleaved: as `flask worker run`
and as `python -m cli worker run` (both check their options, then exec `python -m
app.worker_process`, which holds neither Flask nor SQLAlchemy: ADR 0012), and in-process: the same
worker engine (`worker_process.serve`) run inside a process that built the Flask app, which is
what the worker parent was before the exec. So what the exec saves is measured in the same run.
VmHWM is per address space, so after the exec it is the new program's own peak.
"""

from __future__ import annotations

import os
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
# Peak RSS of Celery 5.7's prefork main process on this machine (`python -m bench peers`).
CELERY_MAIN_MB = 51.0
DRAIN_SLOTS = 4
# The worker engine inside a process holding the Flask app (the worker app kind, SQLAlchemy, the
# models), as `flask worker run` ran it before it exec'd app.worker_process.
_IN_PROCESS = (
    "import sys\n"
    "from app import WORKER, create_app\n"
    "from app.services.engine.runtime import WorkerRuntime\n"
    "from app.worker_process import serve\n"
    "app = create_app(kind=WORKER)\n"
    "with app.app_context():\n"
    "    sys.exit(serve(WorkerRuntime.from_app(app), slots=int(sys.argv[1]), once=False, worker_id=None,\n"
    "                   queues=None, metrics_port=None, metrics_host='127.0.0.1'))\n"
)
HISTORY_ROWS = 100_000
PAGES = ["/dashboard/", "/jobs/", "/executions/", "/executions/?status=failed", "/jobs/1", "/alerts/", "/health/"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _create_jobs(app, count: int = 100) -> None:
    from app.extensions import db
    from app.services.use_cases.jobs import create_job

    now = utcnow()
    with app.app_context():
        for i in range(count):
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
    history_rows = min(options.rows, HISTORY_ROWS) if options.smoke else HISTORY_ROWS
    with db.connect() as conn:
        loaders.load_history(conn, history_rows, 1000, now=utcnow() - timedelta(minutes=1))
    _create_jobs(db.app(kind="scheduler"), 4 if options.smoke else 100)  # setup: no web stack needed
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
    requests = pages_requested = 0
    try:
        wait_for(lambda: _get(port, "/healthz") == 200, 30, what="gunicorn to answer")
        sampling = 2.0 if options.smoke else 8.0 if options.quick else 20.0
        began = time.monotonic()
        # A smoke run samples on until it has seen a task process (30 s at most on a busy machine).
        while time.monotonic() - began < (sampling if tasks or not options.smoke else 30.0):
            for zygote in children_of(worker.pid):
                for pid in children_of(zygote):
                    facts = proc_status(pid)
                    if facts:
                        old = tasks.get(pid, {})
                        tasks[pid] = {k: max(v, old.get(k, 0.0)) for k, v in facts.items()}
            if requests % 5 == 0:
                for path in PAGES:
                    _get(port, path)
                pages_requested += len(PAGES)
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
            "Celery prefork main process",
            CELERY_MAIN_MB,
            note="flask worker run, 4 slots, next to the scheduler and the web",
        ).judge("ratio <= 1.0"),
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
            note=f"gunicorn gthread worker after {pages_requested} page requests at {history_rows:,} rows",
        ),
    ]
    figures[0].extra = {"peaks": peaks, "tasks_sampled": len(tasks), "logs": str(logs)}
    return figures + _drain_figures(db, options, logs)


# How each drain variant starts the worker: `flask`, `python -m cli` (both exec), or in-process.
DRAIN_VARIANTS = ("lean", "cli", "inprocess")


def _drain(db: BenchDatabase, count: int, *, variant: str, log_path: Path) -> dict:
    """Drain `count` pending no-op executions with one 4-slot worker; peaks of its processes."""
    db.reset()
    with db.connect() as conn:
        job = loaders.insert_job(conn, "memory-drain", now=utcnow(), overlap_policy="allow")
        loaders.insert_pending(conn, job, count, now=utcnow())
        conn.execute("VACUUM ANALYZE executions")
    env = db.env(LOG_LEVEL="WARNING")
    args = ["worker", "run", "--workers", str(DRAIN_SLOTS)]
    if variant in ("inprocess", "cli"):
        program = ["-c", _IN_PROCESS, str(DRAIN_SLOTS)] if variant == "inprocess" else ["-m", "cli", *args]
        worker = subprocess.Popen(
            [str(VENV_BIN / "python"), *program],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=open(log_path, "wb"),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    else:
        worker = flask_process(args, env, log_path=log_path)
    tasks: dict[int, dict] = {}
    zygote: dict = {}
    done = 0
    try:
        deadline = time.monotonic() + 600
        next_count = 0.0
        while time.monotonic() < deadline and worker.poll() is None:
            for pid in children_of(worker.pid):
                zygote = proc_status(pid) or zygote
                for child in children_of(pid):
                    facts = proc_status(child)
                    if facts:
                        old = tasks.get(child, {})
                        tasks[child] = {k: max(v, old.get(k, 0.0)) for k, v in facts.items()}
            if time.monotonic() >= next_count:
                next_count = time.monotonic() + 0.25
                with db.connect() as conn:
                    done = conn.execute("SELECT count(*) FROM executions WHERE status = 'succeeded'").fetchone()[0]
                if done >= count:
                    break
            time.sleep(0.02)
        parent = proc_status(worker.pid)
    finally:
        stop_process(worker)
    return {
        "done": done,
        "parent": parent,
        "zygote": zygote,
        "task_hwm": max((t["VmHWM"] for t in tasks.values() if "VmHWM" in t), default=None),
        "task_uss": max((t["USS"] for t in tasks.values() if "USS" in t), default=None),
        "tasks_sampled": len(tasks),
    }


def _median(values: list) -> float | None:
    values = sorted(v for v in values if v is not None)
    return values[len(values) // 2] if values else None


def _drain_figures(db: BenchDatabase, options, logs: Path) -> list[Figure]:
    count = getattr(options, "throughput_n", None) or 3000
    rounds = 1 if options.quick else max(1, getattr(options, "rounds", 3) or 3)
    runs: dict[str, list[dict]] = {variant: [] for variant in DRAIN_VARIANTS}
    for i in range(rounds):
        for kind in DRAIN_VARIANTS:  # interleaved, so all see the same machine
            runs[kind].append(_drain(db, count, variant=kind, log_path=logs / f"drain-{kind}-{i}.log"))

    def med(kind: str, process: str, key: str) -> float | None:
        return _median([run[process].get(key) for run in runs[kind]])

    lean_parent = med("lean", "parent", "VmHWM")
    cli_parent = med("cli", "parent", "VmHWM")
    inprocess_parent = med("inprocess", "parent", "VmHWM")
    note = f"1 worker x {DRAIN_SLOTS} slots draining {count} no-op jobs on PostgreSQL, median of {rounds}"
    figures = [
        Figure(
            NAME,
            "drain: worker parent peak RSS",
            lean_parent,
            "MB",
            "Celery prefork main process",
            CELERY_MAIN_MB,
            note=note + "; each round: " + ", ".join(f"{r['parent'].get('VmHWM', 0):.1f}" for r in runs["lean"]),
        ).judge("ratio <= 1.0"),
        Figure(
            NAME,
            "drain: worker parent peak RSS, python -m cli",
            cli_parent,
            "MB",
            "Celery prefork main process",
            CELERY_MAIN_MB,
            note="without Flask's plugin scan; each round: "
            + ", ".join(f"{r['parent'].get('VmHWM', 0):.1f}" for r in runs["cli"]),
        ),
        Figure(NAME, "drain: python -m cli / flask parent peak", cli_parent, "MB", "flask worker run", lean_parent),
        Figure(
            NAME,
            "drain: worker parent peak RSS, in-process",
            inprocess_parent,
            "MB",
            "Celery prefork main process",
            CELERY_MAIN_MB,
            note="the same engine in a process holding the Flask app and SQLAlchemy (before the exec); each round: "
            + ", ".join(f"{r['parent'].get('VmHWM', 0):.1f}" for r in runs["inprocess"]),
        ),
        Figure(NAME, "drain: exec'd / in-process parent peak", lean_parent, "MB", "in-process", inprocess_parent),
        Figure(
            NAME,
            "drain: worker parent PSS / USS",
            med("lean", "parent", "Pss"),
            "MB",
            "USS",
            med("lean", "parent", "USS"),
        ),
        Figure(NAME, "drain: zygote peak RSS", med("lean", "zygote", "VmHWM"), "MB", "worker parent", lean_parent),
        Figure(
            NAME, "drain: zygote PSS / USS", med("lean", "zygote", "Pss"), "MB", "USS", med("lean", "zygote", "USS")
        ),
        Figure(
            NAME,
            "drain: task process peak RSS (max)",
            _median([run["task_hwm"] for run in runs["lean"]]),
            "MB",
            "zygote peak RSS",
            med("lean", "zygote", "VmHWM"),
            note=f"{sum(run['tasks_sampled'] for run in runs['lean'])} task processes sampled",
        ),
        Figure(
            NAME,
            "drain: task process private (USS, max)",
            _median([run["task_uss"] for run in runs["lean"]]),
            "MB",
            "zygote peak RSS",
            med("lean", "zygote", "VmHWM"),
        ),
    ]
    figures[0].extra = {"runs": runs, "loadavg_after": os.getloadavg()}
    return figures


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy


def _get(port: int, path: str) -> int:
    try:
        with _OPENER.open(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            response.read()
            return response.status
    except Exception:
        return 0
