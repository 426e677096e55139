"""Every benchmark runs: `python -m bench NAME --smoke` for each NAME, and `python -m bench peers`
on Cronwell's side, each in its own process at its smallest size, so that a change which breaks a
benchmark fails here instead of waiting for the next person who measures.

What is asserted is only that the run completes (exit 0), prints its table and writes its JSON
with the benchmark's figures; never a timing. Every run starts from a copy of one migrated
template database (`--template-db`), and must leave nothing behind: no process (each run's
processes carry a marker in their environment, looked for in /proc afterwards) and no database.
The peers run is Cronwell's side only (`--systems cronwell,cronwell-pool,fork`): the peers
themselves would need their virtual environment from PyPI, so the suite never needs the network.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from bench.__main__ import BENCHMARKS
from bench.child import InstantExecutor
from bench.peers import VENV_DIR as PEERS_VENV
from tests.helpers.databases import PG_ADMIN_URL, migrate, require_postgres
from tests.helpers.processes import cmdline

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
MARKER = "CRONWELL_BENCH_SMOKE_RUN"  # in the environment of every process a run starts
RUN_TIMEOUT = 240  # seconds: a run that takes this long is broken or the machine is swamped
PEER_SYSTEMS = ("cronwell", "cronwell-pool", "fork")
FIGURE_KEYS = {"bench", "name", "value", "unit", "limit_name", "limit_value", "target", "met", "note", "ratio"}


@pytest.fixture(scope="module")
def template_db(tmp_path_factory):
    """One migrated database that every run copies (and nobody stays connected to)."""
    require_postgres()
    name = f"cronwell_bench_smoke_{os.getpid()}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        migrate(PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}", tmp_path_factory.mktemp("bench-template"))
        yield name
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _marked(token: str) -> list[int]:
    """Live processes (not zombies) whose environment carries this run's marker."""
    needle = f"{MARKER}={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if needle not in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                continue
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if state not in ("Z", "X"):
            found.append(int(entry))
    return found


def _leftover_processes(token: str) -> list[str]:
    """What the run left running (given a few seconds to finish exiting), killed here."""
    deadline = time.monotonic() + 5
    while (pids := _marked(token)) and time.monotonic() < deadline:
        time.sleep(0.1)
    described = [f"{pid}: {cmdline(pid)}" for pid in pids]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return described


def _leftover_databases(pid: int) -> list[str]:
    """The databases a run with this pid creates that still exist, dropped here."""
    names = [f"cronwell_bench_{pid}", f"cronwell_peers_{pid}", f"peers_procrastinate_{pid}"]
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        found = [row[0] for row in conn.execute("SELECT datname FROM pg_database WHERE datname = ANY(%s)", (names,))]
        for name in found:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return found


def _run(args: list[str], tmp_path: Path) -> str:
    """`python -m bench ARGS` in its own session; its output, after checking that it exited 0 and
    left no process or database behind."""
    token = uuid.uuid4().hex
    env = {key: value for key, value in os.environ.items() if not key.startswith(("FLASK_", "PYTEST_"))}
    env.update(
        {
            MARKER: token,
            "CRONWELL_BENCH_PG_URL": PG_ADMIN_URL,  # the server the template is on
            "TMPDIR": str(tmp_path),  # logs and instance directories go with the test's files
            "PYTHONUNBUFFERED": "1",
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", *args],
        cwd=PROJECT_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # the harness stops what it started on SIGTERM
        try:
            output, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
        output = f"(killed after {RUN_TIMEOUT} s)\n{output}"
    processes, databases = _leftover_processes(token), _leftover_databases(proc.pid)
    assert proc.returncode == 0, f"python -m bench {' '.join(args)} exited {proc.returncode}:\n{output}"
    assert not processes, f"processes left running (killed now): {processes}\n{output}"
    assert not databases, f"databases left behind (dropped now): {databases}\n{output}"
    return output


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_benchmark_runs_and_writes_its_figures(name, template_db, tmp_path):
    result_file = tmp_path / "result.json"
    output = _run([name, "--smoke", "--template-db", template_db, "--output", str(result_file)], tmp_path)

    result = json.loads(result_file.read_text())
    assert {"started_at", "finished_at", "machine", "options", "postgres", "benchmarks"} <= set(result)
    assert list(result["benchmarks"]) == [name]
    ran = result["benchmarks"][name]
    assert "error" not in ran, ran.get("error")
    figures = ran["figures"]
    assert figures, f"{name} wrote no figures"
    for figure in figures:
        assert FIGURE_KEYS <= set(figure), figure
        assert figure["bench"] == name
    assert any(isinstance(figure["value"], int | float) for figure in figures), f"{name}: no figure has a value"
    # Pages and requests that answer with an error are recorded as a figure without a value.
    assert not [f for f in figures if f["value"] is None and f["note"].startswith("HTTP")]

    assert f"== {name}:" in output and "== all results" in output
    table = output.split("== all results", 1)[1]
    assert table.count(f"\n{name} ") == len(figures), table
    assert f"JSON: {result_file}" in output


def test_peers_runs_cronwells_side_and_writes_its_table(template_db, tmp_path):
    result_file = tmp_path / "peers.json"
    venv_existed = PEERS_VENV.exists()
    args = ["peers", "--systems", ",".join(PEER_SYSTEMS), "--peers-n", "8", "--rounds", "1"]
    output = _run([*args, "--template-db", template_db, "--output", str(result_file)], tmp_path)

    result = json.loads(result_file.read_text())
    assert {"started_at", "finished_at", "machine", "postgres", "systems", "summary"} <= set(result)
    assert list(result["systems"]) == list(PEER_SYSTEMS)
    for system in PEER_SYSTEMS:
        (only,) = result["systems"][system]["rounds"]
        assert "error" not in only, only.get("error")
        assert only["done"] == 8
        assert result["summary"][system]["rate_median"] > 0
    assert "jobs/s median" in output
    for system in PEER_SYSTEMS:
        assert result["systems"][system]["label"] in output
    assert PEERS_VENV.exists() == venv_existed, "the run touched the peers' virtual environment"


def test_the_null_executor_answers_every_call_of_the_fork_server():
    """The throughput benchmark's stand-in executor (no processes) must keep up with the real one:
    a method the worker calls that it lacks makes that benchmark stall."""
    from app.executor import ForkServer

    def public(cls) -> dict[str, list[str]]:
        return {
            name: list(inspect.signature(member).parameters)
            for name, member in inspect.getmembers(cls, callable)
            if not name.startswith("_")
        }

    ours, real = public(InstantExecutor), public(ForkServer)
    assert set(real) <= set(ours), f"missing: {sorted(set(real) - set(ours))}"
    for name, parameters in real.items():
        assert ours[name] == parameters, f"{name}{tuple(ours[name])} differs from ForkServer's {tuple(parameters)}"
