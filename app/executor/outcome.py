"""How a task process ended -> (status, error): one table of rules, no I/O.

The zygote knows three things about a finished task process: whether *it* signalled the process
(timeout, kill request, shutdown), the exit status, and what the child wrote to its result pipe.
A signal the zygote sent wins over everything else: a task killed at its timeout is `timed_out`
even if it caught SIGTERM and raised. Otherwise the child's own report decides, and a child that
died without a report (os._exit, a signal such as SIGSEGV) is described by its exit status.
"""

from __future__ import annotations

import json
import signal

from app.executor.protocol import TaskStatus
from app.executor.task_child import READY_STAMP


def describe_exit_code(exit_code: int) -> str:
    """'exit code 3' or 'killed by signal SIGKILL' (negative codes are signals, as in subprocess)."""
    if exit_code < 0:
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = f"signal {-exit_code}"
        return f"killed by signal {name}"
    return f"exit code {exit_code}"


def parse_result_pipe(data: bytes) -> tuple[float | None, dict | None]:
    """Split what a child wrote to its result pipe into (ready monotonic time, report or None)."""
    if len(data) < READY_STAMP.size:
        return None, None
    (ready_at,) = READY_STAMP.unpack_from(data)
    try:
        report = json.loads(data[READY_STAMP.size :]) if len(data) > READY_STAMP.size else None
    except ValueError:  # cut short by a kill mid-write
        report = None
    return ready_at, report if isinstance(report, dict) else None


def classify_exit(
    kill_reason: str | None, timeout_seconds: float | None, exit_code: int, report: dict | None
) -> tuple[TaskStatus, str]:
    """Decide the attempt's status and error text."""
    how = describe_exit_code(exit_code)
    if kill_reason == "timeout":
        return "timed_out", f"task timed out after {timeout_seconds:g} s ({how})"
    if kill_reason == "killed":
        return "failed", f"task was killed on request ({how})"
    if kill_reason == "cancelled":
        return "cancelled", f"task was cancelled ({how})"
    if kill_reason == "shutdown":
        return "failed", f"task was stopped because the executor shut down ({how})"
    if report is not None and report.get("ok") and exit_code == 0:
        return "succeeded", ""
    if report is not None and not report.get("ok"):
        return "failed", str(report.get("error", ""))
    if exit_code < 0:
        return "failed", f"task process was {how} without reporting a result"
    return "failed", f"task process exited with code {exit_code} without reporting a result"
