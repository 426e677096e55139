"""`python -m bench peers`: Cronwell side by side with the peers people would pick instead.

Installs pinned Procrastinate, rq and Celery into a separate virtual environment
(bench/.peers-venv, gitignored; `--skip-install` reuses it as it is), then runs the same N no-op
jobs (`--peers-n`, default 3000) on each system, interleaved, for `--rounds` rounds (default 3):

- Cronwell 1 worker x 4 slots (process per task: the real `Worker.run(burst=True)`), PostgreSQL;
- Cronwell in pool isolation, 1 worker x 2 slots (two reused pool processes, as Celery's -c 2),
  the same worker and durable history;
- the same-run fork + exit + wait limit with 4 in flight (`bench.child fork`);
- Procrastinate, concurrency 4 (in-process), PostgreSQL;
- rq, 2 `Worker` processes (a fork per job), Redis;
- Celery prefork -c 2, Redis broker, no result backend.

Each system's queue is loaded before its worker starts. The rate is N over the system's own first
start to last finish (Cronwell's executions, Procrastinate's events, rq's job hashes; Celery keeps
none without a result backend, so its pool stamps them from task_prerun/task_postrun). CPU per job
is the workers' process trees (/proc, go to done, reaped children included) plus the database
server's share (the PostgreSQL backends of the system's database, or the Redis server). Parent RSS
is the peak (VmHWM) of each worker's main process. PostgreSQL at CRONWELL_BENCH_PG_URL (a
database per system, created and dropped here) and Redis at CRONWELL_BENCH_REDIS_URL's server, db
`--redis-db` (flushed before and after): loopback only. Never part of `make test`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from app.clock import utcnow
from bench.harness import PG_ADMIN_URL, PROJECT_ROOT, REDIS_URL, machine_facts, server_facts

VENV_DIR = PROJECT_ROOT / "bench" / ".peers-venv"
RESULTS_DIR = PROJECT_ROOT / "bench" / "results"
PINS = (
    "procrastinate==3.10.0",
    "rq==2.12.0",
    "celery[redis]==5.7.0",
    "redis==8.1.0",
    "psycopg[binary]==3.3.9",
)
ORDER = ("cronwell", "cronwell-one-off", "cronwell-pool", "fork", "procrastinate", "rq", "celery")
PEERS = ("procrastinate", "rq", "celery")
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench peers", description=__doc__.splitlines()[0])
    parser.add_argument("--peers-n", type=int, default=3000, help="no-op jobs per system and round (default 3000)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument(
        "--systems",
        default=",".join(ORDER),
        help=f"comma-separated subset of {','.join(ORDER)} (default all; cronwell is always run)",
    )
    parser.add_argument("--redis-db", type=int, default=13, help="Redis database number for rq and Celery (default 13)")
    parser.add_argument("--venv", type=Path, default=VENV_DIR, help=f"peer virtual environment (default {VENV_DIR})")
    parser.add_argument("--skip-install", action="store_true", help="use the peer environment as it is")
    parser.add_argument(
        "--template-db",
        default=None,
        metavar="NAME",
        help="create Cronwell's database as a copy of NAME (migrated to the head) instead of migrating it",
    )
    parser.add_argument("--output", type=Path, default=None, help="JSON file to write (default bench/results/...)")
    options = parser.parse_args(argv)
    systems = [s.strip() for s in options.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in ORDER]
    if unknown:
        parser.error(f"unknown system {', '.join(unknown)}; choose from {', '.join(ORDER)}")
    options.systems = [s for s in ORDER if s in systems or s == "cronwell"]
    if options.peers_n < 1 or options.rounds < 1:
        parser.error("--peers-n and --rounds must be at least 1")
    if not 0 <= options.redis_db <= 15:
        parser.error("--redis-db must be between 0 and 15")
    return options


# --- summary and table (pure) -------------------------------------------------------------------


def summarise(result: dict) -> dict:
    """Per system: medians over the rounds, and Cronwell's ratio to it (jobs/s over jobs/s), for
    process isolation (`cronwell_ratio`) and pool isolation (`pool_ratio`)."""
    found: dict = {}
    for name, system in result["systems"].items():
        rounds = [r for r in system["rounds"] if "rate" in r]
        if not rounds:
            found[name] = {"label": system["label"], "isolation": system["isolation"], "rounds": 0}
            continue
        rss = [r["parent_rss_mb"] for r in rounds if r.get("parent_rss_mb") is not None]
        found[name] = {
            "label": system["label"],
            "isolation": system["isolation"],
            "rounds": len(rounds),
            "rate_median": statistics.median(r["rate"] for r in rounds),
            "rate_min": min(r["rate"] for r in rounds),
            "rate_max": max(r["rate"] for r in rounds),
            "cpu_ms_median": statistics.median(r["cpu_ms_per_job"] for r in rounds) if name != "fork" else None,
            "rss_mb": max(rss) if rss else None,
        }
    ours = found.get("cronwell", {}).get("rate_median")
    pooled = found.get("cronwell-pool", {}).get("rate_median")
    for name, row in found.items():
        theirs = row.get("rate_median")
        peer = theirs and name not in ("cronwell", "cronwell-pool")
        row["cronwell_ratio"] = ours / theirs if ours and peer else None
        row["pool_ratio"] = pooled / theirs if pooled and peer else None
    return found


def _fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def render_table(result: dict) -> str:
    """The side-by-side table: one row per system, Cronwell's ratio to each (process and pool)."""
    rows = [("system", "isolation", "jobs/s median (min-max)", "CPU ms/job", "parent RSS", "Cronwell /", "pool /")]
    for name, row in summarise(result).items():
        if not row["rounds"]:
            rows.append((row["label"], row["isolation"], "no result", "-", "-", "-", "-"))
            continue
        rate = f"{_fmt(row['rate_median'])} ({_fmt(row['rate_min'])}-{_fmt(row['rate_max'])})"
        rss = f"{row['rss_mb']:.1f} MB" if row["rss_mb"] is not None else "-"
        ratio = (
            f"{row['cronwell_ratio']:.2f}x"
            if row["cronwell_ratio"] is not None
            else ("1" if name == "cronwell" else "-")
        )
        pool = f"{row['pool_ratio']:.2f}x" if row["pool_ratio"] is not None else "-"
        rows.append((row["label"], row["isolation"], rate, _fmt(row["cpu_ms_median"], 2), rss, ratio, pool))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    right = {2, 3, 4, 5, 6}
    lines = []
    for index, row in enumerate(rows):
        cells = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# --- the run ------------------------------------------------------------------------------------


def _require_loopback(url: str, what: str) -> None:
    host = urlsplit(url).hostname or ""
    if host not in LOOPBACK:
        raise SystemExit(f"error: {what} must be on loopback (127.0.0.1), not {host!r}")


def ensure_venv(path: Path, skip_install: bool) -> Path:
    """The peer environment's Python, created and filled with PINS unless already so."""
    python = path / "bin" / "python"
    marker = path / "peers-pins.txt"
    wanted = "\n".join(PINS) + "\n"
    if skip_install and python.exists():
        return python
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    print(f"creating the peer environment {path} ({', '.join(PINS)}) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(path)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *PINS], check=True)
    marker.write_text(wanted)
    return python


def _interrupt(signum, frame) -> None:  # noqa: ARG001
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    from bench.harness import BenchDatabase
    from bench.peers import measure
    from bench.peers.systems import SYSTEMS, Context

    options = parse_args(sys.argv[1:] if argv is None else argv)
    _require_loopback(PG_ADMIN_URL, "PostgreSQL")
    _require_loopback(REDIS_URL, "Redis")
    signal.signal(signal.SIGTERM, _interrupt)
    # Cronwell's side alone (`--systems cronwell,cronwell-pool,fork`) needs neither the peer
    # environment nor Redis: the test suite's smoke run never reaches for the network.
    peers = [name for name in options.systems if name in PEERS]
    peer_python = ensure_venv(options.venv, options.skip_install) if peers else Path(sys.executable)
    on_redis = any(name in ("rq", "celery") for name in peers)
    started = utcnow()
    pid = os.getpid()
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    redis_url = REDIS_URL.rsplit("/", 1)[0] + f"/{options.redis_db}"
    log_dir = Path(tempfile.mkdtemp(prefix=f"cronwell_peers_{pid}_"))
    cronwell_db = BenchDatabase(name=f"cronwell_peers_{pid}", template=options.template_db)
    ctx = Context(
        count=options.peers_n,
        peer_python=peer_python,
        cronwell_db=cronwell_db,
        procrastinate_url=f"{base}/peers_procrastinate_{pid}",
        admin_url=PG_ADMIN_URL,
        redis_url=redis_url,
        log_dir=log_dir,
    )
    result: dict = {
        "started_at": started.isoformat(),
        "machine": machine_facts(),
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(options).items()},
        "pins": list(PINS),
        "logs": str(log_dir),
        "systems": {
            name: {"label": SYSTEMS[name][0], "isolation": SYSTEMS[name][1], "rounds": []} for name in options.systems
        },
    }
    failed = False
    try:
        print(f"creating {cronwell_db.name} (migrated) ...", flush=True)
        cronwell_db.create()
        result["postgres"] = server_facts(cronwell_db.url)
        if on_redis:
            _flush(redis_url)
        for round_no in range(options.rounds):
            order = (
                options.systems[round_no % len(options.systems) :] + options.systems[: round_no % len(options.systems)]
            )
            for name in order:
                print(f"round {round_no + 1}/{options.rounds}: {name} ({options.peers_n} jobs) ...", flush=True)
                try:
                    found = SYSTEMS[name][2](ctx, round_no)
                except KeyboardInterrupt:
                    raise
                except Exception as exc:  # noqa: BLE001 - one system failing must not hide the others
                    failed = True
                    print(f"  {name} failed: {exc}", file=sys.stderr, flush=True)
                    found = {"error": f"{type(exc).__name__}: {exc}"}
                else:
                    print(
                        f"  {found['rate']:,.0f} jobs/s, {found['cpu_ms_per_job']:.2f} CPU ms/job, "
                        f"load {found['loadavg'][0]:.1f}",
                        flush=True,
                    )
                result["systems"][name]["rounds"].append({"round": round_no + 1, **found})
    except KeyboardInterrupt:
        print("interrupted: stopping everything", file=sys.stderr)
        failed = True
    finally:
        measure.stop_all()
        cleanup_errors = _cleanup(ctx, redis=on_redis)
    result["finished_at"] = utcnow().isoformat()
    result["loadavg_at_end"] = os.getloadavg()
    result["summary"] = summarise(result)
    print("\n" + render_table(result))
    output = options.output or RESULTS_DIR / f"peers-{started.strftime('%Y%m%dT%H%M%SZ')}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2, default=str))
    print(f"\nJSON: {output}\nlogs: {log_dir}")
    for error in cleanup_errors:
        print(f"cleanup: {error}", file=sys.stderr)
    return 1 if failed else 0


def _flush(redis_url: str) -> None:
    from redis import Redis

    Redis.from_url(redis_url).flushdb()


def _cleanup(ctx, *, redis: bool) -> list[str]:
    import psycopg

    errors = []
    try:
        ctx.cronwell_db.drop()
    except Exception as exc:  # noqa: BLE001
        errors.append(f"dropping {ctx.cronwell_db.name}: {exc}")
    name = ctx.procrastinate_url.rsplit("/", 1)[1]
    try:
        with psycopg.connect(ctx.admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception as exc:  # noqa: BLE001
        errors.append(f"dropping {name}: {exc}")
    if redis:
        try:
            _flush(ctx.redis_url)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"flushing {ctx.redis_url}: {exc}")
    return errors
