"""Real processes for integration tests: `flask worker run` / `flask scheduler run` subprocesses
started with the test app's environment, bounded waits, and process-table inspection.

Nothing here sleeps to let time pass: `wait_for` polls a condition until a deadline and fails
with a message that says what never happened.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def wait_for(condition: Callable[[], T], *, within: float, what: str | Callable[[], str], interval: float = 0.05) -> T:
    """Poll `condition` until it returns something truthy; fail after `within` seconds.

    `what` describes the condition; a callable is evaluated only on failure (e.g. process output).
    """
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {within:g} s waiting for {what() if callable(what) else what}")
        time.sleep(interval)


# --- the process table (Linux /proc) ------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a process, or None when it no longer exists."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name is in parentheses and may contain spaces: split after the last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])


def is_alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (a zombie runs nothing any more)."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def children_of(pid: int) -> list[int]:
    """Live direct children of `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[1] == pid and stat[0] not in ("Z", "X"):
                found.append(int(entry))
    return sorted(found)


def descendants_of(pid: int) -> list[int]:
    """Live children, grandchildren, ... of `pid`."""
    result: list[int] = []
    frontier = [pid]
    while frontier:
        children = [child for parent in frontier for child in children_of(parent)]
        result += children
        frontier = children
    return result


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except (FileNotFoundError, ProcessLookupError):
        return ""


# --- flask subprocesses -------------------------------------------------------------------------


def flask_env(app_env: Mapping[str, str], overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a `flask ...` subprocess that talks to the test app's database."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("FLASK_", "PYTEST_"))}
    env.update(app_env)
    env.update({"FLASK_APP": "app", "PYTHONUNBUFFERED": "1"})
    env.update(overrides or {})
    return env


@dataclass
class FlaskProcess:
    """One `flask ...` subprocess; its stdout and stderr go to a log file (never a pipe that fills)."""

    args: tuple[str, ...]
    popen: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def signal(self, signum: int) -> None:
        if self.popen.poll() is None:
            os.kill(self.pid, signum)

    def wait_exit(self, within: float) -> int:
        """Wait (bounded) for the process to exit and return its exit code."""
        try:
            return self.popen.wait(timeout=within)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`flask {' '.join(self.args)}` did not exit within {within:g} s; output:\n{self.output()}")

    def describe(self) -> str:
        return f"`flask {' '.join(self.args)}` (pid {self.pid}, exit {self.popen.poll()}):\n{self.output()}"


@dataclass
class FlaskProcesses:
    """Starts `flask ...` subprocesses for one test and makes sure none outlives it."""

    app_env: Mapping[str, str]
    log_dir: Path
    started: list[FlaskProcess] = field(default_factory=list)

    def start(self, *args: str, env: Mapping[str, str] | None = None) -> FlaskProcess:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"flask-{len(self.started) + 1}-{'-'.join(args[:2])}.log"
        with open(log_path, "wb") as log_file:
            popen = subprocess.Popen(
                [sys.executable, "-m", "flask", *args],
                cwd=PROJECT_ROOT,
                env=flask_env(self.app_env, env),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        process = FlaskProcess(tuple(args), popen, log_path)
        self.started.append(process)
        return process

    def start_worker(self, *extra: str, env: Mapping[str, str] | None = None) -> FlaskProcess:
        return self.start("worker", "run", *extra, env=env)

    def wait_all(self, within: float) -> list[int]:
        """Wait (bounded, shared deadline) for every started process; return their exit codes."""
        deadline = time.monotonic() + within
        return [process.wait_exit(max(0.1, deadline - time.monotonic())) for process in self.started]

    def outputs(self) -> str:
        return "\n".join(process.describe() for process in self.started)

    def cleanup(self) -> None:
        """Kill whatever is still running, with its descendants (zygotes, task processes)."""
        for process in self.started:
            if process.popen.poll() is None:
                family = descendants_of(process.pid)
                process.popen.kill()
                process.popen.wait(timeout=10)
                for pid in family:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
