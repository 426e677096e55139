"""The few steps a freshly forked task process takes before and after calling the task.

Runs only in the child of `os.fork()` inside the zygote, and never returns: every path ends in
`os._exit`, so the child can never fall back into the zygote's loop or run its atexit handlers.

Reports travel over two pipes: fd 1 and 2 (merged stdout and stderr) go to the output pipe, and the
result pipe receives an 8-byte "ready" timestamp followed by one JSON object, {"ok": true} or
{"ok": false, "error": traceback}. A child that dies without writing that object (os._exit, a
signal) is described by its exit status instead.
"""

from __future__ import annotations

import _signal
import ctypes
import io
import json
import os
import signal
import struct
import sys
import time
import traceback
from typing import NoReturn

from app.executor.output import truncate_text

READY_STAMP = struct.Struct("!d")
PR_SET_PDEATHSIG = 1
# fd the result pipe is moved to; everything above it is closed in the child.
RESULT_FD = 3

# Everything below is prepared once, in the zygote, because each fresh task process pays for the
# objects it touches: the first write to an inherited page (a reference count is enough) copies it.
# A ctypes call with declared argtypes, the low-level `_signal.signal` with plain ints and a
# constant report cut the pages a child copies by about a quarter (minor faults, bench/faults in
# docs/performance.md).
_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
_prctl.restype = ctypes.c_int
# The zygote's handlers are not the task's: these go back to their defaults in every child.
_RESET_SIGNALS = tuple(int(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD))
_SIG_DFL = int(signal.SIG_DFL)
_REPORT_OK = json.dumps({"ok": True}).encode("utf-8")
# The largest JSON text a task may return, in bytes: set by the zygote from RESULT_MAX_BYTES.
RESULT_MAX_BYTES = [65536]


def set_parent_death_signal(signum: int) -> None:
    """Ask the kernel to send `signum` to this process when its parent thread dies (Linux prctl)."""
    if _prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(errno)}")


def run_task_in_child(request: dict, out_w: int, res_w: int, zygote_pid: int, error_limit: int) -> NoReturn:
    """Become the task process: isolate, redirect output, run the task, report, `_exit`."""
    exit_code = 1
    try:
        _become_task_process(out_w, res_w, zygote_pid)
        os.write(RESULT_FD, READY_STAMP.pack(time.monotonic()))
        exit_code = _run_and_report(request, error_limit)
    finally:
        os._exit(exit_code)


def leave_zygote(zygote_pid: int) -> None:
    """What a process forked from the zygote does first (a task process or a pool process)."""
    # Own process group: a timeout kills the task *and* anything it started (killpg).
    os.setpgid(0, 0)
    # If the zygote dies, the task dies with it; re-check the parent to close the race where the
    # zygote died before prctl took effect.
    set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != zygote_pid:
        os._exit(1)
    # The zygote's signal handling is not the task's: default dispositions, no wakeup fd.
    # SIGPIPE stays ignored, as in any Python program (writes raise BrokenPipeError instead).
    _signal.set_wakeup_fd(-1)
    for signum in _RESET_SIGNALS:
        _signal.signal(signum, _SIG_DFL)  # not signal.signal: its enum conversions touch many pages


def _become_task_process(out_w: int, res_w: int, zygote_pid: int) -> None:
    leave_zygote(zygote_pid)
    os.dup2(_devnull_fd(), 0)
    os.dup2(out_w, 1)
    os.dup2(out_w, 2)
    if res_w != RESULT_FD:
        os.dup2(res_w, RESULT_FD)
    # Drop every other inherited fd: the control socket, other tasks' pipes, the selector.
    os.closerange(RESULT_FD + 1, _MAX_FD)

    stdout, stderr = _STREAMS or (_text_stream(1), _text_stream(2))
    sys.stdout = sys.__stdout__ = stdout
    sys.stderr = sys.__stderr__ = stderr
    sys.stdin = sys.__stdin__ = None


def _text_stream(fd: int) -> io.TextIOWrapper:
    # Line buffering keeps partial output visible if the task is killed at its timeout; utf-8
    # regardless of the zygote's locale.
    return io.TextIOWrapper(
        io.FileIO(fd, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
    )


def _text_stream_on_a_pipe(fd: int) -> io.TextIOWrapper:
    """A text stream on `fd` built while `fd` is briefly a pipe, as it will be in every child: the
    file object caches "not seekable" and no file position, as if it had been built there."""
    saved = os.dup(fd)  # first: EBADF (fd closed in the zygote) leaves nothing to clean up
    scratch_r, scratch_w = os.pipe()
    try:
        os.dup2(scratch_w, fd)
        return _text_stream(fd)
    finally:
        os.dup2(saved, fd)
        for spare in (saved, scratch_r, scratch_w):
            os.close(spare)


def prepare_in_zygote() -> None:
    """Build once, in the zygote, what every task process would otherwise build for itself: the
    /dev/null fd for stdin and the stdout/stderr text streams (never written in the zygote, so a
    child starts with empty buffers). Saves each child about 60 of its ~370 page copies; keeping
    the zygote's own streams referenced saves about 20 more of the ~255 left."""
    global _STREAMS, _ZYGOTE_STREAMS
    _devnull_fd()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    # A child replaces sys.stdin/stdout/stderr; were these the last references, each child would
    # deallocate (and so finalize and flush) the zygote's three stream objects: about 60 page copies.
    _ZYGOTE_STREAMS = (sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__)
    try:
        _STREAMS = (_text_stream_on_a_pipe(1), _text_stream_on_a_pipe(2))
    except OSError:  # fd 1 or 2 closed in the zygote: each child builds its own
        _STREAMS = None


def _run_and_report(request: dict, error_limit: int) -> int:
    report = run_request(request, error_limit)
    _flush_quietly(sys.stdout, sys.stderr)
    _write_all(RESULT_FD, _REPORT_OK if report is None else json.dumps(report, ensure_ascii=False).encode("utf-8"))
    return 0 if report is None or report.get("ok") else 1


def run_request(request: dict, error_limit: int) -> dict | None:
    """Run the request's task in this process: its report, or None for a success that returned
    nothing. Shared by task processes and pool processes.

    The report is {"ok": true, "result": <the returned value>} or {"ok": false, "error": text}.
    A request with `refused` (a declared variable missing on the worker) fails at once with that
    one line; one with `env` runs with exactly that environment (a deployer task's declared
    variables and the base)."""
    refused = request.get("refused")
    if refused:
        return {"ok": False, "error": refused}
    env = request.get("env")
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    from app.tasks.registry import TaskContext, get_task

    try:
        ctx = TaskContext(**request["context"])
        returned = get_task(request["task_name"]).run(request["config"], ctx)
    except BaseException:  # noqa: BLE001 - SystemExit and KeyboardInterrupt also end the attempt
        return {"ok": False, "error": truncate_text(traceback.format_exc(), error_limit, what="error")}
    if returned is None:
        return None
    try:
        text = json.dumps(returned, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        kind = type(returned).__name__
        return {"ok": False, "error": f"the task returned a {kind} that is not JSON-serialisable: {exc}"}
    size = len(text.encode("utf-8"))
    if size > RESULT_MAX_BYTES[0]:
        return {
            "ok": False,
            "error": f"the task's result is {size} bytes of JSON, over RESULT_MAX_BYTES ({RESULT_MAX_BYTES[0]})",
        }
    return {"ok": True, "result": returned}


def _flush_quietly(*streams: io.TextIOBase) -> None:
    for stream in streams:
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _max_fd() -> int:
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        return 65536


_MAX_FD = _max_fd()  # the zygote does not change its limit; a getrlimit less in every child
_DEVNULL: list[int] = []
_STREAMS: tuple[io.TextIOWrapper, io.TextIOWrapper] | None = None
_ZYGOTE_STREAMS: tuple = ()


def _devnull_fd() -> int:
    """/dev/null, opened once in the zygote (on the first fork) and inherited by every child."""
    if not _DEVNULL:
        _DEVNULL.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
    return _DEVNULL[0]
