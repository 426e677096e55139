"""The zygote's small pipe and process-group helpers, shared by fresh task processes and the pool."""

from __future__ import annotations

import os
from collections.abc import Callable

READ_CHUNK = 64 * 1024


def read_into(fd: int, sink: Callable[[bytes], None]) -> str:
    """Read everything currently available from a non-blocking fd; return "eof" or "again"."""
    while True:
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return "again"
        if not chunk:
            return "eof"
        sink(chunk)


def killpg_quietly(pgid: int, signum: int) -> None:
    """Signal a process group that may already be gone."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass
