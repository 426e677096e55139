"""What every benchmark shares: the throw-away database, figures, statistics and processes.

`BenchDatabase` creates `cronwell_bench_<pid>` on the loopback PostgreSQL server, migrates it
with the real `flask db upgrade`, hands out apps and environments pointing at it, and drops it at
the end (also on Ctrl-C). A `Figure` is one measured number with the limit it is compared with
and the target it is judged against; targets are reported, never asserted.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

PROJECT_ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
PG_ADMIN_URL = os.environ.get("CRONWELL_BENCH_PG_URL") or os.environ.get(
    "CRONWELL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = os.environ.get("CRONWELL_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
# DEBUG=0 below: a Fernet key for alert channels, as production must have (any fixed one will do).
BENCH_CHANNEL_KEY = "Bs5nq0H0Zq0bm2pP3cVq8mY3p0pBy6fJXkH3wq6j0r8="
TABLES = "users, jobs, executions, attempts, dead_letters, alerts, events, heartbeats, worker_commands"


# --- figures ----------------------------------------------------------------------------------


@dataclass
class Figure:
    """One measured number, optionally next to a limit measured in the same run and a target."""

    bench: str
    name: str
    value: float | None
    unit: str
    limit_name: str | None = None
    limit_value: float | None = None
    target: str | None = None  # e.g. ">= 300", "<= 25", "ratio >= 0.5"
    met: bool | None = None
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.value is None or not self.limit_value:
            return None
        return self.value / self.limit_value

    def judge(self, target: str) -> Figure:
        """Record `target` ("<= 25", ">= 300", "ratio >= 0.5", "ratio <= 1.5") and whether it is met."""
        self.target = target
        words = target.split()
        subject = self.ratio if words[0] == "ratio" else self.value
        op, bound = words[-2], float(words[-1])
        if subject is not None:
            self.met = subject <= bound if op == "<=" else subject >= bound
        return self

    def to_json(self) -> dict:
        data = asdict(self)
        data["ratio"] = self.ratio
        return data


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile (0 <= fraction <= 1); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


def summary(values: Sequence[float]) -> dict:
    """p50/p95/p99/max/mean of `values` (None when empty)."""
    if not values:
        return {"n": 0, "p50": None, "p95": None, "p99": None, "max": None, "mean": None}
    return {
        "n": len(values),
        "p50": percentile(values, 0.5),
        "p95": percentile(values, 0.95),
        "p99": percentile(values, 0.99),
        "max": max(values),
        "mean": statistics.fmean(values),
    }


def timed(fn: Callable[[], Any], repeat: int, warmup: int = 1) -> list[float]:
    """Milliseconds per call of `fn`, `repeat` times after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


# --- the database -----------------------------------------------------------------------------


class BenchDatabase:
    """A dedicated, migrated PostgreSQL database for one run of the suite.

    With `template` (a database already migrated to the head, which nobody is connected to) it is
    created as a copy of that one instead of being migrated: what the test suite's smoke runs do,
    so that a dozen runs pay for one migration."""

    def __init__(self, admin_url: str = PG_ADMIN_URL, name: str | None = None, template: str | None = None) -> None:
        self.admin_url = admin_url
        self.name = name or f"cronwell_bench_{os.getpid()}"
        self.url = admin_url.rsplit("/", 1)[0] + f"/{self.name}"
        self.template = template
        self.instance_dir = Path(tempfile.gettempdir()) / f"{self.name}_instance"
        self.created = False

    def create(self, *, reuse: bool = False) -> BenchDatabase:
        """Create the database afresh and migrate it; with `reuse`, keep it when it exists (and
        migrate it to the head), so that a history loaded by an earlier run can be read again."""
        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.name,)).fetchone()
            if not (reuse and exists):
                conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
                template = f' TEMPLATE "{self.template}"' if self.template else ""
                conn.execute(f'CREATE DATABASE "{self.name}"{template}')
        self.created = True
        self.instance_dir.mkdir(parents=True, exist_ok=True)
        if self.template and not (reuse and exists):
            return self  # a copy of a migrated database
        result = subprocess.run(
            [str(VENV_BIN / "flask"), "db", "upgrade"],
            cwd=PROJECT_ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=3600,  # a migration of a reused 10M-row history may rewrite the table
        )
        if result.returncode != 0:
            raise RuntimeError(f"flask db upgrade failed:\n{result.stdout}\n{result.stderr}")
        return self

    def drop(self) -> None:
        if not self.created:
            return
        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        shutil.rmtree(self.instance_dir, ignore_errors=True)
        self.created = False

    def env(self, **extra: str) -> dict:
        """The environment a Cronwell process (or `create_app(env=...)`) runs with here."""
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
        env.update(
            {
                "FLASK_APP": "app",
                "DATABASE_URL": self.url,
                "INSTANCE_DIR": str(self.instance_dir),
                "DEBUG": "0",
                "LOG_FORMAT": "json",
                "LOG_LEVEL": "WARNING",
                "SECRET_KEY": "bench-secret-key",
                "CHANNEL_SECRET_KEY": BENCH_CHANNEL_KEY,
                "PYTHONPATH": str(PROJECT_ROOT),
            }
        )
        env.update(extra)
        return env

    def app(self, kind: str = "web", **extra_env: str):
        """A Cronwell app of this kind on this database (push its context yourself): the whole app,
        or the scheduler's, which has the database without the web stack and is built in half the
        time."""
        from app import create_app

        return create_app({"TESTING": True}, env=self.env(**extra_env), kind=kind)

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.url, autocommit=True)

    def reset(self) -> None:
        """Empty every table (leaving the `default` queue, as it was migrated) and refresh planner
        statistics (this server may run without autovacuum)."""
        with self.connect() as conn:
            conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
            conn.execute("DELETE FROM queues WHERE name <> 'default'")
            conn.execute(
                "UPDATE queues SET slots_taken = 0, concurrency_limit = NULL, paused = false, paused_by = NULL,"
                " paused_at = NULL, paused_reason = NULL"
            )
            conn.execute("VACUUM ANALYZE")

    def __enter__(self) -> BenchDatabase:
        return self.create()

    def __exit__(self, *exc) -> None:
        self.drop()


def server_facts(url: str) -> dict:
    """The PostgreSQL settings that decide these numbers."""
    with psycopg.connect(url, autocommit=True) as conn:
        facts = {"version": conn.execute("SHOW server_version").fetchone()[0]}
        for name in (
            "shared_buffers",
            "work_mem",
            "fsync",
            "synchronous_commit",
            "autovacuum",
            "max_connections",
            "idle_in_transaction_session_timeout",
            "jit",
        ):
            facts[name] = conn.execute(f"SHOW {name}").fetchone()[0]
    return facts


def machine_facts() -> dict:
    """CPU, memory, kernel, Python: what a reader needs to compare runs."""
    facts = {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "loadavg_at_start": os.getloadavg(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                facts["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                facts["memory_mb"] = int(line.split()[1]) // 1024
    except OSError:
        pass
    return facts


# --- processes --------------------------------------------------------------------------------


def flask_process(args: list[str], env: dict, *, log_path: Path | None = None) -> subprocess.Popen:
    """Start `flask <args>` as its own process group, output to `log_path` (or discarded)."""
    out = open(log_path, "wb") if log_path else subprocess.DEVNULL
    return subprocess.Popen(
        [str(VENV_BIN / "flask"), *args],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop_process(proc: subprocess.Popen, timeout: float = 20.0) -> int:
    """SIGTERM the process (a graceful stop), SIGKILL its group if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return proc.wait(timeout=5)
    return proc.returncode


def proc_status(pid: int) -> dict:
    """VmRSS / VmHWM (peak) in MB from /proc, plus PSS/USS when smaps_rollup is readable."""
    facts: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                facts[key] = int(rest.split()[0]) / 1024
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("Pss", "Private_Clean", "Private_Dirty"):
                facts[key] = int(rest.split()[0]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    if "Private_Clean" in facts:
        facts["USS"] = facts.pop("Private_Clean") + facts.pop("Private_Dirty", 0.0)
    return facts


def children_of(pid: int) -> list[int]:
    """Direct children of `pid` (from /proc)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def heartbeating(db: BenchDatabase, kinds: Sequence[str] = ("scheduler", "worker")) -> bool:
    """Whether a process of each kind has written its heartbeat: started and talking to `db`."""
    with db.connect() as conn:
        found = {row[0] for row in conn.execute("SELECT kind FROM heartbeats")}
    return set(kinds) <= found


def wait_for(predicate: Callable[[], bool], timeout: float, interval: float = 0.1, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")


def run_children(
    specs: list[list[str]],
    env: dict,
    *,
    timeout: float = 600.0,
    before_go: Callable[[], None] | None = None,
    progress: Callable[[], Any] | None = None,
    stall_seconds: float = 90.0,
) -> tuple[float, list[dict]]:
    """Start `python -m bench.child ARGS` for each spec, wait until all are ready, release them at
    once; returns the go time (epoch seconds) and each child's JSON report. With `progress`, a
    run whose progress value has not changed for `stall_seconds` is killed (broken code must not
    hold the suite for the whole timeout)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.child", *spec],
            cwd=PROJECT_ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for spec in specs
    ]
    try:
        for proc in procs:
            line = proc.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"benchmark child {proc.args} did not get ready: {line!r}")
        if before_go:
            before_go()
        go = time.time()
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        deadline = time.monotonic() + timeout
        last_value, last_change = None, time.monotonic()
        while any(proc.poll() is None for proc in procs):
            time.sleep(0.2)
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(f"benchmark children still running after {timeout:g} s")
            if progress is not None and now - last_change > 5:
                value = progress()
                if value != last_value:
                    last_value, last_change = value, now
                elif now - last_change > stall_seconds:
                    raise RuntimeError(f"no progress for {stall_seconds:g} s (stuck at {value!r}); see stderr")
        reports = []
        for proc in procs:
            out = proc.stdout.read()
            if proc.returncode != 0:
                raise RuntimeError(f"benchmark child {proc.args} exited {proc.returncode}")
            reports.append(json.loads(out.strip().splitlines()[-1]))
        return go, reports
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
