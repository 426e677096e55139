"""The zygote: a small, pre-warmed, single-threaded process that forks one child per task.

(Attempts of `isolation = pool` jobs go to reused pool processes the zygote forks and manages in
the same loop instead: app/executor/pool.py.)

Why a zygote. Starting a fresh interpreter per task re-imports Python, Flask and the task catalog
(300-500 ms); forking an already-warm process costs about a millisecond. Forking the *worker*
itself would be unsafe: it holds a Flask app, database connections, threads and locks whose state
a child would inherit half-way. So the worker starts this module as a fresh interpreter
(`python -m app.executor.zygote`) that imports only the task catalog and then does nothing but fork.

Why single-threaded with a selector. `os.fork()` is only safe in a process with one thread. One
`selectors` loop watches the control socket, each child's output and result pipes, and a pidfd per
child (`os.pidfd_open`), which becomes readable when that child exits: reaping without SIGCHLD
handlers and their races. The loop's timeout is the nearest task deadline.

Why process groups. Each task child calls `setpgid(0, 0)`, so `killpg` reaches anything the task
started. At a timeout the group gets SIGTERM, then SIGKILL after `kill_grace_seconds`; after any
child exits its group is SIGKILLed, so stray grandchildren never outlive their task. (A grandchild
that leaves the group with setsid/setpgid escapes this; containing that needs cgroups.)

Why PDEATHSIG. The zygote asks the kernel for SIGTERM when its parent (the worker) dies, and on
SIGTERM kills every task group and exits; each task child asks for SIGKILL when the zygote dies.
So a SIGKILLed worker leaves no task process behind. The zygote also exits when the control socket
closes.

Why a queue. Between a child's exit and the next fork used to sit a round trip through the worker
(the result message, the worker's wake-up, its `submit`), during which the zygote idled. So the
worker may hand over a few runs beyond its free slots as `run` with `within` (its slot count): such
a run is forked at once while fewer than `within` tasks run here, and otherwise waits in `queued`
(first in, first out) until a task ends, when the zygote forks it in the same loop turn that
reaped the task, with no message in between. Everything that reaches a forked run reaches a
queued one: `kill` (cancel, operator kill, a lost lease, a claim given back) takes it out of the
queue and `shutdown` empties the queue, each reported as a `result` with `forked: false` (no
process ever ran), which the worker settles as a run that never left its claim-ahead buffer.

Never fork for a worker that is gone. The worker hands over only runs whose claim and Attempt row
committed, so every process forked from the queue has its Attempt whenever the worker dies. And
nothing is forked once the worker is gone: `_fork_queued` and `_start_task` refuse once SIGTERM
has been handled (PDEATHSIG: the worker died), the control socket has hit EOF, or `getppid()` no
longer names the worker (the kernel reparents a child before it sends the parent-death signal, so
this also covers the moment between the signal's delivery and the run of its Python handler, which
runs only between bytecodes). A fork that slips between that check and the `fork` syscall started
while the worker was still alive; its child is SIGKILLed with its group when the handler runs
(`kill_everything`), and its run stays `running` under the dead worker's lease, so recovery
retries it only after the lease ends, when no copy is left: never twice at once.

Why bounded output. Pipes are drained continuously (a task never blocks on a full pipe) but only
the first bytes that could be shown are kept; see `app.executor.output`.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field

from app.executor import task_child
from app.executor.outcome import classify_exit, parse_result_pipe
from app.executor.output import OUTPUT_LIMIT_CHARS, BoundedCapture, truncate_text
from app.executor.pipes import READ_CHUNK, killpg_quietly, read_into
from app.executor.pool import Pool
from app.executor.pool_limits import DEFAULT_MAX_MEMORY_MB, DEFAULT_MAX_TASKS, PoolLimits
from app.executor.protocol import KILL_REASONS, MessageReader, TaskResult, encode_message, encode_started
from app.executor.task_child import prepare_in_zygote, run_task_in_child, set_parent_death_signal

# A result report is one JSON object (with the task's result, at most RESULT_MAX_BYTES); more
# than this is a misbehaving task writing to fd 3. Raised at start for a larger RESULT_MAX_BYTES.
RESULT_LIMIT_BYTES = 1024 * 1024


@dataclass(eq=False, slots=True)
class TaskChild:
    """Book-keeping for one running task process (slots: no per-instance dict to allocate and
    write right after each fork)."""

    execution_id: int
    pid: int
    pidfd: int | None
    out_fd: int | None
    res_fd: int | None
    received_at: float  # monotonic, when the request arrived
    forked_at: float  # monotonic, when fork() returned in the zygote
    started_at: float  # epoch seconds, just before fork()
    timeout_seconds: float | None
    deadline: float | None  # monotonic
    output: BoundedCapture
    result: bytearray = field(default_factory=bytearray)
    kill_reason: str | None = None  # "timeout" | "killed" | "cancelled" | "shutdown" once signalled
    sigkill_at: float | None = None  # monotonic, when SIGTERM escalates to SIGKILL


# Why a queued run leaves the queue without a process, by the reason of the request that took it.
WITHDRAWN = {
    "cancelled": ("cancelled", "cancelled before its task process started"),
    "killed": ("failed", "withdrawn before its task process started"),
    "shutdown": ("failed", "the executor shut down before the task process started"),
}


class Zygote:
    """Serves run/kill/shutdown requests from one control socket until told to stop."""

    def __init__(
        self,
        control: socket.socket,
        *,
        output_limit: int,
        kill_grace_seconds: float,
        pool_limits: PoolLimits | None = None,
        parent_pid: int | None = None,
    ) -> None:
        self.control = control
        self.parent_pid = parent_pid if parent_pid is not None else os.getppid()  # the worker
        self.output_limit = output_limit
        self.kill_grace_seconds = kill_grace_seconds
        self.children: dict[int, TaskChild] = {}  # by execution_id
        # Runs handed over beyond the worker's free slots, in arrival order: execution_id ->
        # (request, within); forked when fewer than `within` tasks run (see "Why a queue").
        self.queued: dict[int, tuple[dict, int]] = {}
        self.selector = selectors.DefaultSelector()
        self.reader = MessageReader()
        self.outbox = bytearray()
        self.shutting_down = False
        self.control_closed = False
        self.terminated = False  # SIGTERM received (normally: PDEATHSIG, the worker died)
        self.pid = os.getpid()  # task children compare it with getppid()
        self._wakeup_r, self._wakeup_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._control_events = selectors.EVENT_READ  # what the control socket is registered for
        # Attempts of `isolation = pool` jobs run in reused processes (app/executor/pool.py); they
        # appear in `children` like forked ones, so deadlines, kills and shutdown treat both alike.
        self.pool = Pool(self, pool_limits or PoolLimits(), TaskChild)

    # -- lifecycle -----------------------------------------------------------------------------

    def serve_forever(self) -> None:
        """Run the loop until shut down (and every child reaped) or terminated."""
        self.control.setblocking(False)
        self.selector.register(self.control, selectors.EVENT_READ, ("control", None))
        self.selector.register(self._wakeup_r, selectors.EVENT_READ, ("wakeup", None))
        signal.set_wakeup_fd(self._wakeup_w)
        signal.signal(signal.SIGTERM, self._on_sigterm)
        self.send({"type": "ready", "pid": os.getpid()})
        self._flush_outbox()
        while not self.terminated:
            self.run_once(self.next_timeout())
            if (self.shutting_down or self.control_closed) and not self.children:
                break
        if self.terminated:
            self.kill_everything()
            return
        self.pool.close()
        self.send({"type": "bye"})
        self._flush_outbox_blocking()

    def _on_sigterm(self, signum, frame) -> None:
        self.terminated = True

    def kill_everything(self) -> None:
        """SIGKILL every task's process group and reap the task processes; fork nothing queued."""
        self.queued.clear()
        for child in self.children.values():
            killpg_quietly(child.pid, signal.SIGKILL)
        for child in list(self.children.values()):
            try:
                os.waitpid(child.pid, 0)
            except ChildProcessError:
                pass
        self.pool.close()

    # -- the loop ------------------------------------------------------------------------------

    def next_timeout(self) -> float | None:
        """Seconds until the nearest deadline or escalation; None if nothing is pending."""
        moments = []
        for child in self.children.values():
            if child.sigkill_at is not None:
                moments.append(child.sigkill_at)
            elif child.deadline is not None and child.kill_reason is None:
                moments.append(child.deadline)
        if not moments:
            return None
        return max(0.0, min(moments) - time.monotonic())

    def run_once(self, timeout: float | None) -> None:
        """Wait for one batch of events (at most `timeout` s), handle them, enforce deadlines."""
        if self.outbox and self._control_events == selectors.EVENT_READ:
            self._flush_outbox()  # what the last batch queued, in one send
        for key, mask in self.selector.select(timeout):
            kind, child = key.data
            if kind == "control":
                if mask & selectors.EVENT_WRITE:
                    self._flush_outbox()
                if mask & selectors.EVENT_READ:
                    self._read_control()
            elif kind == "wakeup":
                read_into(self._wakeup_r, lambda chunk: None)  # just a wake-up; the flag is set
            # A child finished earlier in this batch has closed its fds (set to None); skip them.
            elif kind == "out" and child.out_fd is not None:
                self._read_output(child)
            elif kind == "res" and child.res_fd is not None:
                self._read_result(child)
            elif kind == "exit" and child.pidfd is not None:
                self._finish(child)
            elif kind == "pool":
                self.pool.on_event(*child)
        self._enforce_deadlines(time.monotonic())
        if self.queued:
            self._fork_queued()

    def may_fork(self) -> bool:
        """False once the worker is gone or stopping us: then nothing more is forked."""
        return not (self.terminated or self.control_closed or self.shutting_down or os.getppid() != self.parent_pid)

    def _fork_queued(self) -> None:
        """Fork queued runs, oldest first, while fewer tasks run than the run's `within` allows."""
        while self.queued and self.may_fork():
            execution_id, (request, within) = next(iter(self.queued.items()))
            if len(self.children) >= within:
                return
            del self.queued[execution_id]
            self._start_task(request, received_at=time.monotonic())  # fork_ms counts from here

    def _withdraw(self, execution_id: int, reason: str) -> None:
        """Take a queued run out of the queue and report it as never forked."""
        del self.queued[execution_id]
        status, error = WITHDRAWN[reason]
        self._reject(execution_id, error, status=status, forked=False)

    def _enforce_deadlines(self, now: float) -> None:
        for child in self.children.values():
            if child.sigkill_at is not None and now >= child.sigkill_at:
                killpg_quietly(child.pid, signal.SIGKILL)
                child.sigkill_at = None
            elif child.kill_reason is None and child.deadline is not None and now >= child.deadline:
                self._terminate(child, "timeout")

    def _terminate(self, child: TaskChild, reason: str) -> None:
        """SIGTERM the task's group now, SIGKILL it after the grace period."""
        if child.kill_reason is not None:
            return
        child.kill_reason = reason
        killpg_quietly(child.pid, signal.SIGTERM)
        child.sigkill_at = time.monotonic() + self.kill_grace_seconds

    # -- control messages ----------------------------------------------------------------------

    def _read_control(self) -> None:
        try:
            data = self.control.recv(READ_CHUNK)
        except BlockingIOError:
            return
        except ConnectionResetError:
            data = b""
        if not data:
            # The worker is gone or closed us: stop everything, nobody will read the results.
            self.control_closed = True
            self.selector.unregister(self.control)
            self.queued.clear()  # never forked: nobody would read their results
            for child in self.children.values():
                killpg_quietly(child.pid, signal.SIGKILL)
            return
        for message in self.reader.feed(data):
            op = message.get("op")
            if op == "run":
                request, within = message["request"], message.get("within")
                if within is not None and (self.queued or len(self.children) >= within):
                    self._queue(request, within)
                else:
                    self._start_task(request, received_at=time.monotonic())
            elif op == "kill":
                execution_id = message["execution_id"]
                reason = message.get("reason")
                reason = reason if reason in KILL_REASONS else "killed"
                child = self.children.get(execution_id)
                if child is not None:
                    self._terminate(child, reason)
                elif execution_id in self.queued:
                    self._withdraw(execution_id, reason)
            elif op == "shutdown":
                for execution_id in list(self.queued):
                    self._withdraw(execution_id, "shutdown")
                self.shutting_down = True
                for child in self.children.values():
                    self._terminate(child, "shutdown")

    def send(self, message: dict | bytes) -> None:
        """Queue a message (or one already framed) for the worker; never blocks (the worker may be
        busy submitting).

        Sent before the loop next waits (`run_once`), so the messages of one batch of events (a
        fork's "started", another task's result) leave in one send and wake the worker once.
        """
        if self.control_closed:
            return
        self.outbox += message if isinstance(message, bytes) else encode_message(message)

    def _flush_outbox(self) -> None:
        try:
            while self.outbox:
                sent = self.control.send(self.outbox)
                del self.outbox[:sent]
        except BlockingIOError:
            pass
        except (BrokenPipeError, ConnectionResetError):
            self.outbox.clear()
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.outbox else 0)
        if events == self._control_events:
            return  # unchanged: no epoll_ctl for every message sent
        try:
            self.selector.modify(self.control, events, ("control", None))
            self._control_events = events
        except KeyError:
            pass

    def _flush_outbox_blocking(self) -> None:
        if self.outbox and not self.control_closed:
            self.control.setblocking(True)
            try:
                self.control.sendall(self.outbox)
            except OSError:
                pass
            self.outbox.clear()

    # -- task processes ------------------------------------------------------------------------

    def _queue(self, request: dict, within: int) -> None:
        execution_id = request["execution_id"]
        if execution_id in self.children or execution_id in self.queued:
            self._reject(execution_id, f"execution {execution_id} is already running; not started again")
            return
        if self.shutting_down:
            self._reject(execution_id, "the executor is shutting down; task not started", forked=False)
            return
        self.queued[execution_id] = (request, within)

    def _start_task(self, request: dict, received_at: float) -> None:
        execution_id = request["execution_id"]
        if not self.may_fork() and not self.shutting_down:
            return  # the worker is gone (see "Never fork for a worker that is gone")
        if execution_id in self.children or execution_id in self.queued:
            self._reject(execution_id, f"execution {execution_id} is already running; not started again")
            return
        if self.shutting_down:
            self._reject(execution_id, "the executor is shutting down; task not started")
            return
        if request.get("isolation") == "pool":
            self.pool.start_task(request, received_at)
            return
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()  # or the child would inherit and re-print the zygote's buffer
        fds: list[int] = []
        try:
            out_r, out_w = os.pipe2(os.O_CLOEXEC)
            fds += (out_r, out_w)
            res_r, res_w = os.pipe2(os.O_CLOEXEC)
            fds += (res_r, res_w)
            started_at = time.time()
            pid = os.fork()
        except OSError as exc:  # EMFILE, EAGAIN (process limit), ENOMEM: fail this task, keep serving
            for fd in fds:
                os.close(fd)
            self._reject(execution_id, f"could not start a task process: {exc}")
            return
        if pid == 0:
            run_task_in_child(request, out_w, res_w, self.pid, self.output_limit)
        forked_at = time.monotonic()
        try:
            os.setpgid(pid, pid)  # also done by the child; doing both closes the race with killpg
        except OSError:
            pass
        os.close(out_w)
        os.close(res_w)
        os.set_blocking(out_r, False)
        os.set_blocking(res_r, False)
        timeout = request.get("timeout_seconds")
        timeout = timeout if timeout and timeout > 0 else None
        child = TaskChild(
            execution_id=execution_id,
            pid=pid,
            pidfd=os.pidfd_open(pid),
            out_fd=out_r,
            res_fd=res_r,
            received_at=received_at,
            forked_at=forked_at,
            started_at=started_at,
            timeout_seconds=timeout,
            deadline=forked_at + timeout if timeout else None,
            output=BoundedCapture(self.output_limit),
        )
        self.children[execution_id] = child
        self.selector.register(out_r, selectors.EVENT_READ, ("out", child))
        self.selector.register(res_r, selectors.EVENT_READ, ("res", child))
        self.selector.register(child.pidfd, selectors.EVENT_READ, ("exit", child))
        self.send(encode_started(execution_id, pid))

    def _reject(self, execution_id: int, error: str, *, status: str = "failed", forked: bool = True) -> None:
        """Report a run that got no process. `forked=False` promises that none ever ran for it
        (withdrawn from the queue); a failed fork keeps the default, as before."""
        now = time.time()
        self.send(
            {
                "type": "result",
                **TaskResult(
                    execution_id=execution_id,
                    status=status,  # type: ignore[arg-type]
                    exit_code=None,
                    output="",
                    error=error,
                    pid=0,
                    started_at=now,
                    finished_at=now,
                    fork_ms=0.0,
                    forked=forked,
                ).to_dict(),
            }
        )

    def _read_output(self, child: TaskChild) -> None:
        if read_into(child.out_fd, child.output.add) == "eof":
            self._close_fd(child, "out_fd")

    def _read_result(self, child: TaskChild) -> None:
        def keep(chunk: bytes) -> None:
            room = _result_limit() - len(child.result)
            if room > 0:
                child.result += chunk[:room]

        if read_into(child.res_fd, keep) == "eof":
            self._close_fd(child, "res_fd")

    def _close_fd(self, child: TaskChild, attr: str) -> None:
        fd = getattr(child, attr)
        if fd is not None:
            self.selector.unregister(fd)
            os.close(fd)
            setattr(child, attr, None)

    def _finish(self, child: TaskChild) -> None:
        """The task process exited: kill its leftovers, reap it, collect the last bytes, report."""
        # The exited child is a zombie until reaped, so its pid (= the group id) cannot be reused
        # yet: killing the group before waitpid cannot hit an unrelated process.
        killpg_quietly(child.pid, signal.SIGKILL)
        _, status = os.waitpid(child.pid, 0)
        finished_at = time.time()
        exit_code = os.waitstatus_to_exitcode(status)
        # Everything the child wrote is in the pipes already; grandchildren were just killed, so
        # read what is there without waiting for EOF (a grandchild may still hold the write end).
        if child.out_fd is not None:
            read_into(child.out_fd, child.output.add)
        if child.res_fd is not None:
            self._read_result(child)
        self._close_fd(child, "out_fd")
        self._close_fd(child, "res_fd")
        self.selector.unregister(child.pidfd)
        os.close(child.pidfd)
        child.pidfd = None
        del self.children[child.execution_id]
        result = self._describe(child, exit_code, finished_at)
        self.send({"type": "result", **result.to_dict()})

    def _describe(self, child: TaskChild, exit_code: int, finished_at: float) -> TaskResult:
        ready_at, report = parse_result_pipe(bytes(child.result))
        fork_ms = ((ready_at if ready_at is not None else child.forked_at) - child.received_at) * 1000
        status, error = classify_exit(child.kill_reason, child.timeout_seconds, exit_code, report)
        return TaskResult(
            execution_id=child.execution_id,
            status=status,
            exit_code=exit_code,
            output=child.output.text(),
            error=truncate_text(error, self.output_limit, what="error"),
            pid=child.pid,
            started_at=child.started_at,
            finished_at=finished_at,
            fork_ms=round(fork_ms, 3),
            result=report.get("result") if status == "succeeded" and report else None,
        )


class PreloadRefused(RuntimeError):
    """A preloaded module broke a rule of the fork server (docs/tasks.md, "Preload rules")."""


def _refuse_threads(module: str) -> None:
    """The zygote must stay single-threaded: `fork()` copies only the calling thread, so a lock
    another thread held (logging's, an import lock, a connection pool's) stays locked for ever
    in every task process. A module that starts a thread when imported is refused."""
    try:
        threads = len(os.listdir("/proc/self/task"))
    except OSError:
        return
    if threads > 1:
        raise PreloadRefused(
            f"task module {module} started {threads - 1} thread(s) when imported; the fork server must stay "
            "single-threaded: start threads (and connection pools) inside the task, not at import"
        )


def _result_limit() -> int:
    # JSON escapes can grow a result inside the report (a quote becomes two bytes).
    return max(RESULT_LIMIT_BYTES, 2 * task_child.RESULT_MAX_BYTES[0] + 4 * 1024 * 1024)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Cronwell task zygote (started by ForkServer)")
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--preload", action="append", default=[])
    parser.add_argument("--output-limit", type=int, default=OUTPUT_LIMIT_CHARS)
    parser.add_argument("--kill-grace-seconds", type=float, default=2.0)
    parser.add_argument("--pool-max-tasks", type=int, default=DEFAULT_MAX_TASKS)
    parser.add_argument("--pool-max-memory-mb", type=int, default=DEFAULT_MAX_MEMORY_MB)
    parser.add_argument("--result-max-bytes", type=int, default=task_child.RESULT_MAX_BYTES[0])
    args = parser.parse_args(argv)
    task_child.RESULT_MAX_BYTES[0] = args.result_max_bytes

    # Die with the worker. prctl only covers deaths after it is called, hence the getppid check.
    set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != args.parent_pid:
        return 1
    # Ctrl-C in the worker's terminal reaches the whole foreground group, zygote included; the
    # worker decides how to shut down and tells us (stop()), so the zygote ignores SIGINT.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    control = socket.socket(fileno=args.control_fd)
    try:
        import app.tasks.registry  # noqa: F401 - every task child needs it

        for module in args.preload:
            importlib.import_module(module)
            _refuse_threads(module)
    except PreloadRefused as exc:
        control.sendall(encode_message({"type": "fatal", "error": str(exc)}))
        return 1
    except BaseException:
        control.sendall(encode_message({"type": "fatal", "error": traceback.format_exc()}))
        return 1
    prepare_in_zygote()
    # Move everything imported so far out of the collector's reach: a collection in a child would
    # otherwise touch (and copy-on-write) every object page inherited from the zygote.
    gc.collect()
    gc.freeze()

    zygote = Zygote(
        control,
        output_limit=args.output_limit,
        kill_grace_seconds=args.kill_grace_seconds,
        pool_limits=PoolLimits(args.pool_max_tasks, args.pool_max_memory_mb),
        parent_pid=args.parent_pid,
    )
    try:
        zygote.serve_forever()
    except BaseException:
        zygote.kill_everything()  # a zygote bug must not leave task processes behind
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
