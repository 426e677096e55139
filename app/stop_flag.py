"""Graceful stop for the long-running processes (the scheduler, the worker): SIGTERM and SIGINT set a flag the loops read."""

from __future__ import annotations

import signal
import threading


class StopFlag:
    """Set by SIGTERM/SIGINT; a second signal is not needed (the loop exits after its grace)."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def install(self) -> StopFlag:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, _frame) -> None:
        self._event.set()

    def __call__(self) -> bool:
        return self._event.is_set()
