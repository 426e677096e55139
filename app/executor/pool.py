"""Pooled isolation: long-lived task processes, forked from the zygote and reused across attempts.

A job with `isolation = pool` skips the fork per attempt. The zygote keeps a few *pool processes*
(forked from itself, so they start warm, with the task catalog imported) and hands each attempt
to an idle one; a pool process runs attempts one after another until it is replaced. This is
for cheap, trusted tasks: the fork, exit and reap of process mode are most of what a no-op
attempt costs, and a pool process pays them once per `max_tasks` attempts.

What pooling gives up (docs/job-policies.md, "Isolation"): attempts share an interpreter, so module
globals, caches, open files, threads, signal handlers, the working directory and environment a
task changes are still there for the next attempt in that process; memory a task leaks stays
leaked until the process is replaced; a task that corrupts the interpreter breaks the next
attempts in that process. The bounds below keep that finite.

What it keeps, so the worker and the history cannot tell the difference:
- every attempt is still reported once, with its output (stdout and stderr merged, bounded the
  same way), its traceback, a status and an exit code (0 succeeded, 1 raised), and the pid of
  the process that ran it; the worker records an Attempt for each exactly as in process mode;
- a hard timeout, a cancel or a kill request still kills: the pool process's whole group gets
  SIGTERM, then SIGKILL after the grace period, and a new process replaces it at the next
  attempt (killing is the only way to stop Python code that does not cooperate);
- an attempt that takes its process down (os._exit, SIGSEGV, the OOM killer) fails alone, with
  its exit status as the reason; the process is replaced, and no other attempt is affected.

Replacement: after each attempt the pool process reports its resident size; it is retired
(its group SIGKILLed, which also ends anything the task left running) once it has run
`max_tasks` attempts or its RSS exceeds `max_memory_mb`. Processes are forked lazily, at most
one per attempt running at once, so the worker's slots bound the pool's size; the idle process
that ran last is reused first (its pages are warm).

Wire: each pool process has three pipes to the zygote. Requests go down one (a framed JSON
request, `protocol.encode_message`), reports come back on another (framed JSON, one per
attempt), and fds 1 and 2 are the output pipe. A task's output is written before its report,
so when the report arrives all of the attempt's output is already in the pipe: the zygote reads
the pipe dry and then closes the attempt. Output written later (by a grandchild still running)
belongs to no attempt and is dropped.

The zygote side (`Pool`) runs inside the zygote's single-threaded selector loop; the pool
process side (`serve_in_pool_process`) runs only in a forked child and never returns.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import selectors
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NoReturn

from app.executor.outcome import classify_exit
from app.executor.output import BoundedCapture, truncate_text
from app.executor.pipes import killpg_quietly, read_into
from app.executor.pool_limits import PoolLimits
from app.executor.protocol import _HEADER, MessageReader, ProtocolError, TaskResult, encode_message
from app.executor.task_child import RESULT_FD, _flush_quietly, _max_fd, _write_all, leave_zygote, run_request

if TYPE_CHECKING:
    from app.executor.zygote import TaskChild, Zygote

# fds in a pool process: 0 /dev/null, 1 and 2 the output pipe, 3 the report pipe, 4 requests.
REQUEST_FD = RESULT_FD + 1


@dataclass(eq=False)
class PoolProcess:
    """The zygote's book-keeping for one pool process."""

    pid: int
    pidfd: int | None
    request_fd: int | None
    out_fd: int | None
    res_fd: int | None
    reader: MessageReader = field(default_factory=MessageReader)
    tasks_run: int = 0
    task: TaskChild | None = None  # the attempt it is running
    report: dict | None = None  # the running attempt's report, kept while its kill is under way
    retired: str | None = None  # why it is being replaced (its group was SIGKILLed)


class Pool:
    """The zygote's pool processes: dispatch, reports, exits, retirement."""

    def __init__(self, zygote: Zygote, limits: PoolLimits, task_child: type[TaskChild]) -> None:
        self.zygote = zygote
        # The zygote's TaskChild class: the zygote runs as __main__, so importing it here would
        # load a second copy of the module.
        self.task_child = task_child
        self.limits = limits
        self.processes: dict[int, PoolProcess] = {}  # by pid
        self.idle: list[PoolProcess] = []  # the most recently used last
        self.retired: dict[str, int] = {"max_tasks": 0, "max_memory": 0, "exited": 0}

    # -- dispatch ------------------------------------------------------------------------------

    def start_task(self, request: dict, received_at: float) -> None:
        """Hand `request` to an idle pool process (forking one if none is idle)."""
        execution_id = request["execution_id"]
        frame = encode_message(request)
        proc = None
        for _ in range(2):  # an idle process that died a moment ago gets one replacement
            try:
                proc = self.idle.pop() if self.idle else self._spawn()
            except OSError as exc:  # EMFILE, EAGAIN (process limit), ENOMEM: fail this task only
                self.zygote._reject(execution_id, f"could not start a pool process: {exc}")
                return
            if self._send(proc, frame):
                break
            self._retire(proc, "exited")
            proc = None
        if proc is None:
            self.zygote._reject(execution_id, "could not hand the task to a pool process")
            return
        now = time.monotonic()
        timeout = request.get("timeout_seconds")
        timeout = timeout if timeout and timeout > 0 else None
        child = self.task_child(
            execution_id=execution_id,
            pid=proc.pid,
            pidfd=None,  # the pool process's fds are the Pool's, not the attempt's
            out_fd=None,
            res_fd=None,
            received_at=received_at,
            forked_at=now,
            started_at=time.time(),
            timeout_seconds=timeout,
            deadline=now + timeout if timeout else None,
            output=BoundedCapture(self.zygote.output_limit),
        )
        proc.task = child
        proc.report = None
        self.zygote.children[execution_id] = child
        self.zygote.send({"type": "started", "execution_id": execution_id, "pid": proc.pid})

    def _send(self, proc: PoolProcess, frame: bytes) -> bool:
        # Blocking write: the process is idle, so it is reading; a request bigger than the pipe
        # buffer only waits for it to read.
        try:
            _write_all(proc.request_fd, frame)
        except OSError:  # EPIPE: it died while idle (killed from outside); its exit is pending
            return False
        return True

    def _spawn(self) -> PoolProcess | None:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()  # or the child would inherit and re-print the zygote's buffer
        fds: list[int] = []
        try:
            for _ in range(3):
                fds += os.pipe2(os.O_CLOEXEC)
            req_r, req_w, out_r, out_w, res_r, res_w = fds
            pid = os.fork()
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        if pid == 0:
            serve_in_pool_process(req_r, out_w, res_w, self.zygote.pid, self.zygote.output_limit)
        try:
            os.setpgid(pid, pid)  # also done by the child; doing both closes the race with killpg
        except OSError:
            pass
        for fd in (req_r, out_w, res_w):
            os.close(fd)
        os.set_blocking(out_r, False)
        os.set_blocking(res_r, False)
        proc = PoolProcess(pid=pid, pidfd=os.pidfd_open(pid), request_fd=req_w, out_fd=out_r, res_fd=res_r)
        self.processes[pid] = proc
        selector = self.zygote.selector
        selector.register(out_r, selectors.EVENT_READ, ("pool", (proc, "out")))
        selector.register(res_r, selectors.EVENT_READ, ("pool", (proc, "res")))
        selector.register(proc.pidfd, selectors.EVENT_READ, ("pool", (proc, "exit")))
        return proc

    # -- events from the selector ---------------------------------------------------------------

    def on_event(self, proc: PoolProcess, what: str) -> None:
        if what == "out" and proc.out_fd is not None:
            self._read_output(proc)
        elif what == "res" and proc.res_fd is not None:
            self._read_reports(proc)
        elif what == "exit" and proc.pidfd is not None:
            self._on_exit(proc)

    def _read_output(self, proc: PoolProcess) -> None:
        sink = proc.task.output.add if proc.task is not None else _drop
        if read_into(proc.out_fd, sink) == "eof":
            self._close(proc, "out_fd")

    def _read_reports(self, proc: PoolProcess) -> None:
        chunks: list[bytes] = []
        eof = read_into(proc.res_fd, chunks.append) == "eof"
        try:
            reports = proc.reader.feed(b"".join(chunks)) if chunks else []
        except (ProtocolError, ValueError):  # garbage on fd 3 (a task wrote to it): not trusted again
            reports = []
            self._retire(proc, "exited")
        for report in reports:
            self._on_report(proc, report)
        if eof:
            self._close(proc, "res_fd")

    def _on_report(self, proc: PoolProcess, report: dict) -> None:
        child = proc.task
        if child is None or report.get("execution_id") != child.execution_id:
            return  # a report for nothing running here: the process is suspect, its exit settles it
        if proc.out_fd is not None:
            self._read_output(proc)  # the attempt's output was written before its report
        if child.kill_reason is not None:
            proc.report = report  # being killed: the kill decides the status, at the exit
            return
        proc.tasks_run += 1
        proc.task = None
        self._finish(child, proc, 0 if report.get("ok") else 1, report)
        why = self.limits.retire(proc.tasks_run, int(report.get("rss_kb") or 0))
        if why is not None:
            self._retire(proc, why)
        else:
            self.idle.append(proc)

    def _on_exit(self, proc: PoolProcess) -> None:
        """The pool process exited (killed, crashed, retired): reap it and settle its attempt."""
        # A zombie's pid (= its group id) cannot be reused before it is reaped: this killpg
        # reaches only what its tasks left running.
        killpg_quietly(proc.pid, signal.SIGKILL)
        try:
            _, status = os.waitpid(proc.pid, 0)
            exit_code = os.waitstatus_to_exitcode(status)
        except ChildProcessError:  # already reaped by kill_everything
            exit_code = -signal.SIGKILL
        child = proc.task
        if child is not None:
            if proc.out_fd is not None:
                read_into(proc.out_fd, child.output.add)
            if proc.res_fd is not None:
                self._read_reports(proc)
        self._discard(proc)
        if child is not None and child.execution_id in self.zygote.children:
            self._finish(child, proc, exit_code, proc.report)

    def _finish(self, child: TaskChild, proc: PoolProcess, exit_code: int, report: dict | None) -> None:
        status, error = classify_exit(child.kill_reason, child.timeout_seconds, exit_code, report)
        ready = report.get("ready") if report else None
        fork_ms = ((ready if ready is not None else child.forked_at) - child.received_at) * 1000
        result = TaskResult(
            execution_id=child.execution_id,
            status=status,
            exit_code=exit_code,
            output=child.output.text(),
            error=truncate_text(error, self.zygote.output_limit, what="error"),
            pid=proc.pid,
            started_at=child.started_at,
            finished_at=time.time(),
            fork_ms=round(max(0.0, fork_ms), 3),
            result=report.get("result") if status == "succeeded" and report else None,
        )
        del self.zygote.children[child.execution_id]
        self.zygote.send({"type": "result", **result.to_dict()})

    # -- retirement ----------------------------------------------------------------------------

    def _retire(self, proc: PoolProcess, why: str) -> None:
        """Replace `proc`: SIGKILL its group now; its exit event reaps it."""
        if proc.retired is None:
            proc.retired = why
            self.retired[why] = self.retired.get(why, 0) + 1
        if proc in self.idle:
            self.idle.remove(proc)
        killpg_quietly(proc.pid, signal.SIGKILL)

    def retire_idle(self) -> None:
        """Shutting down: no more attempts will come, so the idle processes go now."""
        for proc in list(self.idle):
            self._retire(proc, "exited")

    def close(self) -> None:
        """SIGKILL and reap every pool process (the zygote is exiting)."""
        for proc in list(self.processes.values()):
            killpg_quietly(proc.pid, signal.SIGKILL)
        for proc in list(self.processes.values()):
            try:
                os.waitpid(proc.pid, 0)
            except ChildProcessError:
                pass
            self._discard(proc)

    def _discard(self, proc: PoolProcess) -> None:
        self._close(proc, "out_fd")
        self._close(proc, "res_fd")
        self._close(proc, "pidfd")
        if proc.request_fd is not None:
            os.close(proc.request_fd)
            proc.request_fd = None
        if proc in self.idle:
            self.idle.remove(proc)
        self.processes.pop(proc.pid, None)

    def _close(self, proc: PoolProcess, attr: str) -> None:
        fd = getattr(proc, attr)
        if fd is not None:
            try:
                self.zygote.selector.unregister(fd)
            except (KeyError, ValueError):
                pass
            os.close(fd)
            setattr(proc, attr, None)


def _drop(chunk: bytes) -> None:
    pass


# -- inside a pool process ---------------------------------------------------------------------


def serve_in_pool_process(req_r: int, out_w: int, res_w: int, zygote_pid: int, error_limit: int) -> NoReturn:
    """Become a pool process: run one request after another until the request pipe closes."""
    exit_code = 1
    try:
        _become_pool_process(req_r, out_w, res_w, zygote_pid)
        statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
        streams = _Streams()
        while True:
            request = _read_request(REQUEST_FD)
            if request is None:
                exit_code = 0  # the zygote closed the pipe
                break
            ready = time.monotonic()
            report = _run(request, error_limit, streams)
            report["ready"] = ready
            report["rss_kb"] = int(os.pread(statm, 64, 0).split()[1]) * page_kb
            _write_all(RESULT_FD, encode_message(report))
    finally:
        os._exit(exit_code)


def _become_pool_process(req_r: int, out_w: int, res_w: int, zygote_pid: int) -> None:
    leave_zygote(zygote_pid)  # a timeout kills the pool process *and* anything its task started
    # Park the sources above the target numbers first, so no dup2 overwrites one still needed.
    devnull = os.open(os.devnull, os.O_RDONLY)
    sources = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, REQUEST_FD + 1) for fd in (devnull, out_w, out_w, res_w, req_r)]
    for target, source in enumerate(sources):
        os.dup2(source, target)  # the targets are inheritable, the sources close below
    os.closerange(REQUEST_FD + 1, _max_fd())


class _Streams:
    """The attempt's sys.stdout/stderr on fds 1 and 2, put back before every attempt (a task
    that replaced or closed them must not take the next attempt's output with it)."""

    def __init__(self) -> None:
        self.stdout = self.stderr = None

    def install(self) -> None:
        if self.stdout is None or self.stdout.closed:
            self.stdout = _text_stream(1)
        if self.stderr is None or self.stderr.closed:
            self.stderr = _text_stream(2)
        sys.stdout = sys.__stdout__ = self.stdout
        sys.stderr = sys.__stderr__ = self.stderr
        sys.stdin = sys.__stdin__ = None


def _text_stream(fd: int) -> io.TextIOWrapper:
    # Line buffering keeps partial output visible if the attempt is killed at its timeout.
    return io.TextIOWrapper(
        io.FileIO(fd, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
    )


def _run(request: dict, error_limit: int, streams: _Streams) -> dict:
    streams.install()
    saved_env = dict(os.environ) if request.get("env") is not None else None
    report = run_request(request, error_limit) or {"ok": True}
    report["execution_id"] = request["execution_id"]
    if saved_env is not None:  # the next attempt in this process is another task's
        os.environ.clear()
        os.environ.update(saved_env)
    _flush_quietly(sys.stdout, sys.stderr, streams.stdout, streams.stderr)
    return report


def _read_request(fd: int) -> dict | None:
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    body = _read_exact(fd, length)
    return None if body is None else json.loads(body)


def _read_exact(fd: int, size: int) -> bytes | None:
    buffer = bytearray()
    while len(buffer) < size:
        chunk = os.read(fd, size - len(buffer))
        if not chunk:
            return None
        buffer += chunk
    return bytes(buffer)
