"""The compose deployment as real processes: the very commands of compose.yaml (migrate, gunicorn,
scheduler, worker) against a fresh PostgreSQL database and the local Redis, in production mode.

A job is created and triggered with the CLI and must succeed; a one-time job must be fired by the
scheduler and succeed; /readyz (requiring both heartbeats) and /metrics answer over HTTP, and so do
the scheduler's and worker's metrics ports. Every line the web, scheduler and worker wrote must be
one JSON object with an event, and no secret may appear in any output.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from app.clock import utcnow
from tests.helpers.compose import service_command
from tests.helpers.databases import PG_ADMIN_URL, require_postgres
from tests.helpers.processes import PROJECT_ROOT, descendants_of, wait_for
from tests.helpers.servers import REDIS_URL, free_port, require_redis

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SECRETS = {
    "SECRET_KEY": "smoke-secret-key-" + "k" * 40,
    "SCHEDULER_CLI_SECRET": "smoke-cli-secret-value",
    "METRICS_TOKEN": "smoke-metrics-token-value",
    "DEV_ADMIN_PASSWORD": "smoke admin pass phrase",
    "CHANNEL_SECRET_KEY": "3H9NjK_KsCsvBJcGB35pyR-DYTOfPuGNzwIaQgPgorA=",
}


@pytest.fixture
def database_url():
    """A fresh, empty PostgreSQL database for this test (the migrate command builds the schema)."""
    require_postgres()
    name = f"cronwell_smoke_{os.getpid()}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Deployment:
    """The processes of one smoke run, their logs, and HTTP and CLI helpers."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.processes: dict[str, subprocess.Popen] = {}

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def run_once(self, name: str, command: list[str], timeout: float = 120) -> None:
        with open(self.log_dir / f"{name}.log", "wb") as out:
            result = subprocess.run(
                command,
                cwd=PROJECT_ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
        assert result.returncode == 0, f"{name} exited {result.returncode}:\n{self.log(name)}"

    def start(self, name: str, command: list[str]) -> None:
        with open(self.log_dir / f"{name}.log", "wb") as out:
            self.processes[name] = subprocess.Popen(
                command, cwd=PROJECT_ROOT, env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )

    def check_running(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                pytest.fail(f"{name} exited {process.returncode}:\n{self.log(name)}")

    def flask(self, *args: str) -> dict:
        """`flask ARGS --json` as an operator would run it; returns the JSON document."""
        result = subprocess.run(
            ["flask", *args, "--json"], cwd=PROJECT_ROOT, env=self.env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, f"flask {' '.join(args)}: {result.stderr}"
        return json.loads(result.stdout)

    def get(self, url: str, token: str | None = None) -> tuple[int, str]:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except OSError:
            return 0, ""

    def stop(self, within: float = 60) -> dict[str, int]:
        """SIGTERM everything, wait (bounded), and return the exit codes."""
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + within
        codes = {}
        for name, process in self.processes.items():
            try:
                codes[name] = process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                codes[name] = None
        return codes

    def kill_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                family = descendants_of(process.pid)
                process.kill()
                process.wait(timeout=10)
                for pid in family:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass


def metric(body: str, name: str) -> float:
    """The value of one exposition line `name value` (name includes its labels)."""
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_the_compose_processes_run_a_job_end_to_end(database_url, tmp_path):
    require_redis()
    web_port, scheduler_port, worker_port = free_port(), free_port(), free_port()
    bin_dir = str(Path(sys.executable).parent)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("FLASK_", "PYTEST_", "PROMETHEUS_"))}
    env.update(SECRETS)
    env.update(
        {
            "PATH": bin_dir + os.pathsep + env.get("PATH", ""),
            "FLASK_APP": "app",
            "PYTHONUNBUFFERED": "1",
            # as compose.prod.yaml
            "DEBUG": "0",
            "SECURE_COOKIES": "1",
            "LOG_FORMAT": "json",
            "LOG_LEVEL": "INFO",
            "DATABASE_URL": database_url,
            "REDIS_URL": REDIS_URL,
            "CACHE_KEY_PREFIX": f"cronwell-smoke-{os.getpid()}:",
            "INSTANCE_DIR": str(tmp_path / "instance"),
            "ARTIFACT_DIR": str(tmp_path / "artifacts"),
            "MARKER_DIR": str(tmp_path / "markers"),
            # as compose.yaml's web, scheduler and worker
            "GUNICORN_BIND": f"127.0.0.1:{web_port}",
            "GUNICORN_WORKERS": "2",
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
            "METRICS_ENABLED": "1",
            "SCHEDULER_METRICS_PORT": str(scheduler_port),
            "WORKER_METRICS_PORT": str(worker_port),
            "METRICS_HOST": "127.0.0.1",
            "READYZ_REQUIRE_HEARTBEATS": "1",
            "SCHEDULER_TICK_SECONDS": "1",
        }
    )
    (tmp_path / "logs").mkdir()
    deployment = Deployment(env, tmp_path / "logs")
    web = f"http://127.0.0.1:{web_port}"
    secret = ("--cli-secret", SECRETS["SCHEDULER_CLI_SECRET"])
    try:
        deployment.run_once("migrate", service_command("migrate", env))
        web_env = dict(env)
        deployment.start("web", service_command("web", env))
        # The scheduler and worker must not write into the web's multiprocess directory.
        deployment.env = {k: v for k, v in env.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
        deployment.start("scheduler", service_command("scheduler", env))
        deployment.start("worker", service_command("worker", env))
        deployment.env = web_env

        def ready():
            deployment.check_running()
            return deployment.get(f"{web}/readyz")[0] == 200

        wait_for(
            ready, within=60, what="/readyz to answer 200 with fresh scheduler and worker heartbeats", interval=0.25
        )
        status, body = deployment.get(f"{web}/readyz")
        assert json.loads(body)["checks"]["redis"] == {"ok": True}

        # An operator's CLI session: create a job, trigger it, and one that the scheduler fires.
        job = deployment.flask(
            "job",
            "add",
            "smoke-manual",
            "always_succeed",
            "interval",
            "--every",
            "1h",
            "--config",
            '{"message": "hello from the smoke test"}',
            *secret,
        )
        execution = deployment.flask("job", "trigger", str(job["id"]), *secret)
        run_at = (utcnow() + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
        fired = deployment.flask(
            "job", "add", "smoke-scheduled", "always_succeed", "one_time", "--run-at", run_at, *secret
        )

        def finished(execution_id: int):
            deployment.check_running()
            row = deployment.flask("execution", "inspect", str(execution_id))
            return row if row["status"] not in ("pending", "claimed", "running") else None

        row = wait_for(
            lambda: finished(execution["id"]), within=60, what="the triggered execution to finish", interval=0.5
        )
        assert row["status"] == "succeeded", row
        assert "hello from the smoke test" in row["output"]

        def scheduled_execution():
            deployment.check_running()
            rows = deployment.flask("execution", "list", "--job", str(fired["id"]))
            return rows[0] if rows and rows[0]["status"] not in ("pending", "claimed", "running") else None

        scheduled = wait_for(
            scheduled_execution, within=60, what="the scheduler to fire the one-time job", interval=0.5
        )
        assert (scheduled["status"], scheduled["trigger"]) == ("succeeded", "schedule"), scheduled

        # Metrics over HTTP: the web (token-gated, summed over gunicorn workers), scheduler, worker.
        assert deployment.get(f"{web}/metrics")[0] == 401
        status, web_metrics = deployment.get(f"{web}/metrics", token=SECRETS["METRICS_TOKEN"])
        assert status == 200
        assert metric(web_metrics, 'cronwell_http_requests_total{endpoint="/readyz",method="GET",status="200"}') >= 1
        assert "cronwell_queue_depth " in web_metrics and "cronwell_heartbeat_age_seconds{" in web_metrics
        status, scheduler_metrics = deployment.get(f"http://127.0.0.1:{scheduler_port}/metrics")
        assert status == 200
        assert metric(scheduler_metrics, "cronwell_scheduler_tick_duration_seconds_count") >= 1
        assert metric(scheduler_metrics, 'cronwell_executions_created_total{status="pending"}') >= 1
        assert "cronwell_queue_depth " in scheduler_metrics
        status, worker_metrics = deployment.get(f"http://127.0.0.1:{worker_port}/metrics")
        assert status == 200
        assert metric(worker_metrics, 'cronwell_executions_finished_total{status="succeeded"}') >= 2
        assert metric(worker_metrics, "cronwell_executor_fork_seconds_count") >= 2
        assert metric(worker_metrics, 'cronwell_fire_lateness_seconds_count{trigger="schedule"}') >= 1
        assert metric(worker_metrics, 'cronwell_task_duration_seconds_count{status="succeeded"}') >= 2

        codes = deployment.stop()
        assert codes == {"web": 0, "scheduler": 0, "worker": 0}, {n: deployment.log(n)[-2000:] for n in codes}
    finally:
        deployment.kill_all()

    # Logs: one JSON object per line with an event, from all three processes; no secret anywhere.
    events: dict[str, list[dict]] = {}
    for name in ("web", "scheduler", "worker"):
        records = []
        for line in deployment.log(name).splitlines():
            if not line.strip():
                continue
            record = json.loads(line)  # raises on any line that is not one JSON object
            assert isinstance(record, dict) and record.get("event"), (name, line)
            records.append(record)
        events[name] = records
    web_requests = [r for r in events["web"] if r["event"] == "http_request"]
    assert any(r["path"] == "/readyz" and r["status"] == 200 for r in web_requests)
    assert {"scheduler_started", "scheduler_stopped"} <= {r["event"] for r in events["scheduler"]}
    started = [r for r in events["worker"] if r["event"] == "execution_started"]
    finished_events = [r for r in events["worker"] if r["event"] == "execution_finished"]
    assert {r["execution_id"] for r in finished_events} >= {execution["id"], scheduled["id"]}
    assert all(r["job_id"] and r["worker_id"] for r in started + finished_events)
    everything = "".join(deployment.log(name) for name in ("migrate", "web", "scheduler", "worker"))
    for name, value in SECRETS.items():
        assert value not in everything, f"{name} appeared in a log"
