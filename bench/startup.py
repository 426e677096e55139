"""CLI start-up: the wall time of `flask --help` and `flask job add`, next to `flask --version`.

Each command is a fresh `flask` process on the benchmark database, as an operator or a script runs
it; the figure is the median of `--startup-runs` runs (default 10), judged against its limit
(`flask --help` <= 0.3 s, `flask job add` <= 0.5 s). `flask --version` runs in the same rounds: it
loads no app (the interpreter, Flask, Click and Flask's plugin scan), so it is the floor every
`flask` command pays on this machine, and each figure's note gives its ratio to that floor. A
`flask job add` creates one job per run (named startup-N); the database is the run's own.
"""

from __future__ import annotations

import statistics
import subprocess
import time

from bench.harness import PROJECT_ROOT, VENV_BIN, BenchDatabase, Figure

NAME = "startup"
LIMITS = {"flask --help": 0.3, "flask job add": 0.5}


def _seconds(args: list[str], env: dict) -> float:
    started = time.perf_counter()
    result = subprocess.run(
        [str(VENV_BIN / "flask"), *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    took = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"flask {' '.join(args)} exited {result.returncode}:\n{result.stderr[-2000:]}")
    return took


def run(db: BenchDatabase, options) -> list[Figure]:
    env = db.env()
    samples: dict[str, list[float]] = {"flask --version": [], **{name: [] for name in LIMITS}}
    for n in range(options.startup_runs):  # interleaved: a busy moment costs every command alike
        samples["flask --version"].append(_seconds(["--version"], env))
        samples["flask --help"].append(_seconds(["--help"], env))
        samples["flask job add"].append(
            _seconds(["job", "add", f"startup-{n}", "always_succeed", "interval", "--every", "1h"], env)
        )
    floor = statistics.median(samples["flask --version"])
    figures = [
        Figure(
            NAME,
            "flask --version (the floor)",
            round(floor, 3),
            "s",
            note=f"median of {len(samples['flask --version'])}",
        )
    ]
    for name, limit in LIMITS.items():
        value = statistics.median(samples[name])
        figure = Figure(
            NAME,
            name,
            round(value, 3),
            "s",
            limit_name="limit",
            limit_value=limit,
            note=f"median of {len(samples[name])}, max {max(samples[name]):.3f} s; {value / floor:.2f}x flask --version",
        )
        figures.append(figure.judge("ratio <= 1"))
    return figures
