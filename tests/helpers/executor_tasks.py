"""Test-only tasks for the executor tests: each one misbehaves in a specific way.

Preloaded into the zygote by `ForkServer(preload=("tests.helpers.executor_tasks",))`. Names start with
`test_exec_` so they can never collide with the built-in catalog.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import time
from pathlib import Path

from app.tasks.registry import TaskContext, task

ANY_CONFIG = {"type": "object"}


@task("test_exec_echo", description="Print a line and return a value.", schema=ANY_CONFIG)
def echo(config: dict, ctx: TaskContext):
    print(f"hello from execution {ctx.execution_id}")
    print("to stderr", file=sys.stderr)
    return config.get("returns", "returned text")


@task("test_exec_noop", description="Do nothing.", schema=ANY_CONFIG)
def noop(config: dict, ctx: TaskContext) -> None:
    return None


@task("test_exec_raise", description="Raise an exception.", schema=ANY_CONFIG)
def raise_error(config: dict, ctx: TaskContext) -> None:
    print("about to fail")
    raise RuntimeError("task exploded on purpose")


@task("test_exec_sleep", description="Sleep for config['seconds'].", schema=ANY_CONFIG)
def sleep(config: dict, ctx: TaskContext) -> None:
    print("sleeping", flush=True)
    time.sleep(config.get("seconds", 60))


@task("test_exec_exit3", description="Leave through os._exit(3) without a result.", schema=ANY_CONFIG)
def exit3(config: dict, ctx: TaskContext) -> None:
    os._exit(3)


@task("test_exec_segfault", description="Die of SIGSEGV.", schema=ANY_CONFIG)
def segfault(config: dict, ctx: TaskContext) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file in the test's cwd
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(10)


@task("test_exec_flood", description="Print config['megabytes'] MB in 1 MB chunks.", schema=ANY_CONFIG)
def flood(config: dict, ctx: TaskContext) -> None:
    chunk = ("x" * 1023 + "\n") * 1024
    for _ in range(config.get("megabytes", 100)):
        sys.stdout.write(chunk)


@task("test_exec_grandchildren", description="Fork 3 SIGTERM-ignoring sleepers, then sleep.", schema=ANY_CONFIG)
def grandchildren(config: dict, ctx: TaskContext) -> None:
    pids = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(3600)
        pids.append(pid)
    pid_file = Path(ctx.artifact_dir) / "grandchildren.pids"
    pid_file.write_text(" ".join(str(pid) for pid in pids))
    time.sleep(config.get("seconds", 60))


@task("test_exec_ignore_sigterm", description="Ignore SIGTERM and sleep.", schema=ANY_CONFIG)
def ignore_sigterm(config: dict, ctx: TaskContext) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ignoring SIGTERM", flush=True)
    time.sleep(config.get("seconds", 60))


@task("test_exec_unicode", description="Print non-ASCII text.", schema=ANY_CONFIG)
def unicode_output(config: dict, ctx: TaskContext) -> str:
    print("héllo wörld — ☃ 日本語 🚀")
    return {"emoji": "🚀"}  # a non-string return value is JSON-encoded


@task("test_exec_describe_process", description="Return facts about the task process.", schema=ANY_CONFIG)
def describe_process(config: dict, ctx: TaskContext) -> dict:
    libc = ctypes.CDLL(None)
    pdeathsig = ctypes.c_int(0)
    libc.prctl(2, ctypes.byref(pdeathsig), 0, 0, 0)  # PR_GET_PDEATHSIG
    return {
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "pdeathsig": pdeathsig.value,
        "sigterm_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
        "open_fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
        "stdin_is_devnull": os.path.samestat(os.fstat(0), os.stat(os.devnull)),
        "stdout_seekable": sys.stdout.seekable(),
    }


@task("test_exec_environment", description="Report what of its environment and context could leak.", schema=ANY_CONFIG)
def environment(config: dict, ctx: TaskContext) -> dict:
    """Which of config['look_for'] occur in its environment (names or values), and its database URL."""
    haystack = [f"{name}={value}" for name, value in os.environ.items()]
    return {
        "found": sorted(s for s in config.get("look_for", []) if any(s in entry for entry in haystack)),
        "names": sorted(os.environ),
        "database_url": ctx.database_url,
    }


@task("test_exec_touch", description="Create artifact_dir/touched-<execution_id>.", schema=ANY_CONFIG)
def touch(config: dict, ctx: TaskContext) -> None:
    Path(ctx.artifact_dir, f"touched-{ctx.execution_id}").write_text(str(os.getpid()))
