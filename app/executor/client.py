"""The worker's handle on its zygote: submit task requests, collect results, never block for long.

    with ForkServer() as executor:              # spawns the zygote, waits until it is warm
        executor.submit(TaskRequest(...))
        for result in executor.poll(timeout=1.0):
            ...

`fileno()` is the control socket, so a worker can `select` on it together with its PostgreSQL
LISTEN connection and call `poll(0)` when it is readable. Not thread-safe: one worker loop owns it.

Call `start()` from a thread that lives as long as the executor (normally the main thread): the
zygote's parent-death signal fires when the *thread* that spawned it exits.

If the zygote dies unexpectedly, `poll` (or `submit`) raises `ExecutorCrashed`, whose `results`
report every request that was running as failed (plus any results received just before); the
executor is then stopped and `start()` may be called again.
"""

from __future__ import annotations

import math
import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from app.executor.output import OUTPUT_LIMIT_CHARS
from app.executor.pool_limits import PoolLimits
from app.executor.protocol import KILL_REASONS, MessageReader, TaskRequest, TaskResult, encode_message
from app.sensitive import task_environment

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RECV_CHUNK = 1024 * 1024


class ExecutorCrashed(RuntimeError):
    """The zygote died or could not start. `results` holds the failed reports of running requests."""

    def __init__(self, message: str, results: list[TaskResult] | None = None) -> None:
        super().__init__(message)
        self.results = list(results or [])


@dataclass
class _Pending:
    submitted_at: float  # epoch seconds
    pid: int | None = None  # known once the zygote reports the fork


class ForkServer:
    """Runs each task in its own process, forked from a pre-warmed zygote."""

    def __init__(
        self,
        preload: tuple[str, ...] | list[str] = ("app.tasks.catalog",),
        output_limit: int = OUTPUT_LIMIT_CHARS,
        kill_grace_seconds: float = 2.0,
        *,
        start_timeout_seconds: float = 30.0,
        python: str = sys.executable,
        pool: PoolLimits | None = None,
        result_max_bytes: int = 65536,
        withhold: tuple[str, ...] | list[str] | frozenset[str] = (),
    ) -> None:
        self.preload = tuple(preload)
        self.result_max_bytes = result_max_bytes
        # Variables the zygote starts without though they are not secret-looking: the ones
        # deployer tasks declare, which reach only their own task processes (in the request).
        self.withhold = frozenset(withhold)
        self.pool = pool or PoolLimits()  # when the zygote replaces a pool process
        self.output_limit = output_limit
        self.kill_grace_seconds = kill_grace_seconds
        self.start_timeout_seconds = start_timeout_seconds
        self.python = python
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._poller: select.poll | None = None
        self._reader = MessageReader()
        self._pending: dict[int, _Pending] = {}
        self._finished: list[TaskResult] = []
        self._bye = False

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Spawn the zygote (a fresh interpreter) and wait until it has preloaded the tasks."""
        if self._proc is not None:
            raise RuntimeError("ForkServer is already started")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        command = [
            self.python,
            "-m",
            "app.executor.zygote",
            "--control-fd",
            str(theirs.fileno()),
            "--parent-pid",
            str(os.getpid()),
            "--output-limit",
            str(self.output_limit),
            "--kill-grace-seconds",
            str(self.kill_grace_seconds),
            "--pool-max-tasks",
            str(self.pool.max_tasks),
            "--pool-max-memory-mb",
            str(self.pool.max_memory_mb),
            "--result-max-bytes",
            str(self.result_max_bytes),
        ]
        for module in self.preload:
            command += ["--preload", module]
        # The zygote, and so every task forked from it, starts without secrets: no database or
        # Redis URL, SECRET_KEY, CLI secret, token or password (app/sensitive.py).
        env = {name: value for name, value in task_environment(os.environ).items() if name not in self.withhold}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
        try:
            self._proc = subprocess.Popen(command, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env)
        finally:
            theirs.close()
        self._sock = ours
        self._poller = select.poll()
        self._poller.register(ours, select.POLLIN)
        self._reader = MessageReader()
        self._pending.clear()
        self._finished.clear()
        self._bye = False
        self._await_ready()

    def _await_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._discard_zygote()
                raise ExecutorCrashed(f"zygote did not become ready within {self.start_timeout_seconds:g} s")
            if not self._wait_readable(remaining):
                continue
            data = self._recv()
            if not data:
                code = self._discard_zygote()
                raise ExecutorCrashed(f"zygote exited during start-up (exit code {code})")
            for message in self._reader.feed(data):
                if message["type"] == "ready":
                    return
                if message["type"] == "fatal":
                    self._discard_zygote()
                    raise ExecutorCrashed(f"zygote failed to preload {', '.join(self.preload)}:\n{message['error']}")

    def stop(self, grace_seconds: float = 0.0) -> list[TaskResult]:
        """Let running tasks finish for up to `grace_seconds`, then kill the rest and the zygote.

        Tasks still running after the grace period get SIGTERM, then SIGKILL after
        `kill_grace_seconds`, and are reported as failed. Returns every result collected here.
        """
        if self._proc is None:
            return []
        results: list[TaskResult] = []
        try:
            deadline = time.monotonic() + grace_seconds
            while self._pending and time.monotonic() < deadline:
                results += self.poll(deadline - time.monotonic())
            self._send({"op": "shutdown"})
            bye_deadline = time.monotonic() + self.kill_grace_seconds + 10.0
            while not self._bye and time.monotonic() < bye_deadline:
                self._pump(bye_deadline - time.monotonic())
            results += self._take_finished()
        except ExecutorCrashed as crash:
            return results + crash.results
        self._discard_zygote()
        return results

    def __enter__(self) -> ForkServer:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- requests ------------------------------------------------------------------------------

    def submit(self, request: TaskRequest, *, within: int | None = None) -> None:
        """Ask the zygote to fork a process for `request`; returns at once.

        With `within`, the zygote forks it only while fewer than `within` of its tasks run, and
        otherwise queues it until one ends (app/executor/zygote.py, "Why a queue"). `kill` and
        `stop` withdraw a queued run: its result then has `forked` False.
        """
        self._require_started()
        if request.execution_id in self._pending:
            raise ValueError(f"execution {request.execution_id} is already running")
        message = {"op": "run", "request": request.to_dict()}
        if within is not None:
            message["within"] = within
        frame = encode_message(message)  # TypeError before any state
        self._pending[request.execution_id] = _Pending(submitted_at=time.time())
        self._send_frame(frame)

    def poll(self, timeout: float = 0.0) -> list[TaskResult]:
        """Return finished results, waiting at most `timeout` seconds for the first one."""
        self._require_started()
        deadline = time.monotonic() + timeout
        while not self._finished:
            remaining = deadline - time.monotonic()
            if not self._pump(max(0.0, remaining)) and remaining <= 0:
                break
        while self._pump(0):  # and whatever else has already arrived
            pass
        return self._take_finished()

    def kill(self, execution_id: int, *, reason: str = "killed") -> None:
        """Terminate a running task's process group (SIGTERM, then SIGKILL after the grace period),
        or withdraw it from the zygote's queue if it is not forked yet (its result: `forked` False).

        Its result reports it as failed, or as cancelled with reason="cancelled".
        """
        self._require_started()
        if reason not in KILL_REASONS:
            raise ValueError(f"kill reason must be one of {', '.join(KILL_REASONS)}, got {reason!r}")
        if execution_id in self._pending:
            self._send({"op": "kill", "execution_id": execution_id, "reason": reason})

    def running(self) -> set[int]:
        """Execution ids submitted whose results have not been returned by `poll` yet."""
        return set(self._pending) - {result.execution_id for result in self._finished}

    def pid_of(self, execution_id: int) -> int | None:
        """The task process id, once the zygote has reported the fork (seen by `poll`)."""
        pending = self._pending.get(execution_id)
        return pending.pid if pending else None

    def fileno(self) -> int:
        """The control socket: readable when `poll(0)` has something to return."""
        self._require_started()
        return self._sock.fileno()

    @property
    def zygote_pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -- socket plumbing -----------------------------------------------------------------------

    def _require_started(self) -> None:
        if self._proc is None:
            raise RuntimeError("ForkServer is not started")

    def _send(self, message: dict) -> None:
        self._send_frame(encode_message(message))

    def _send_frame(self, frame: bytes) -> None:
        try:
            self._sock.sendall(frame)
        except OSError:
            self._crashed()

    def _wait_readable(self, timeout: float) -> bool:
        return bool(self._poller.poll(math.ceil(timeout * 1000)))

    def _recv(self) -> bytes:
        try:
            return self._sock.recv(RECV_CHUNK)
        except ConnectionResetError:
            return b""

    def _pump(self, timeout: float) -> bool:
        """Read what the zygote sent, waiting up to `timeout`; False if nothing arrived."""
        if self._bye or not self._wait_readable(timeout):
            return False
        data = self._recv()
        if not data:
            self._crashed()
        for message in self._reader.feed(data):
            kind = message["type"]
            if kind == "started":
                pending = self._pending.get(message["execution_id"])
                if pending is not None:
                    pending.pid = message["pid"]
            elif kind == "result":
                self._finished.append(TaskResult.from_dict(message))
            elif kind == "bye":
                self._bye = True
        return True

    def _take_finished(self) -> list[TaskResult]:
        finished, self._finished = self._finished, []
        for result in finished:
            self._pending.pop(result.execution_id, None)
        return finished

    def _crashed(self) -> None:
        """The zygote is gone: report running requests as failed, clean up, raise."""
        code = self._discard_zygote()
        how = f"killed by signal {signal.Signals(-code).name}" if code and code < 0 else f"exit code {code}"
        results = self._take_finished()
        now = time.time()
        for execution_id, pending in self._pending.items():
            if pending.pid:
                # Task processes die with the zygote (PDEATHSIG); their grandchildren do not.
                # The group id cannot be reused while any member is alive, so this only reaches them.
                try:
                    os.killpg(pending.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            results.append(
                TaskResult(
                    execution_id=execution_id,
                    status="failed",
                    exit_code=None,
                    output="",
                    error=f"executor zygote died ({how}) while the task was running",
                    pid=pending.pid or 0,
                    started_at=pending.submitted_at,
                    finished_at=now,
                    fork_ms=0.0,
                )
            )
        self._pending.clear()
        raise ExecutorCrashed(f"executor zygote died unexpectedly ({how})", results)

    def _discard_zygote(self) -> int | None:
        """Close the socket and reap the zygote (killing it if it lingers); return its exit code."""
        proc, self._proc = self._proc, None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if proc is None:
            return None
        try:
            return proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()
