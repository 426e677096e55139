"""The worker's committer: one thread that runs a turn's database work while the worker's main
thread keeps its slots fed from the runs already claimed (app/services/engine/turns.py).

A turn waits for its commit (a WAL flush on PostgreSQL) whatever its size. psycopg releases the
GIL while it waits, so running the turn here lets the main thread go on forking runs whose claim
committed in an earlier turn. The main thread hands over one turn at a time and waits for it
(selecting on `fileno()` together with the executor's socket) before it uses anything the turn
produced: the thread never touches the executor or the worker's buffers, and the main thread
never touches the turn's connection while a turn is in flight.

    committer.submit(work)           # runs work() on the thread
    while not committer.poll(0.5):   # True once work() returned or raised
        ...                          # fork, gather results
    value = committer.result()       # work()'s return value, or its exception raised here
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from queue import SimpleQueue
from typing import Any


class Committer:
    """`context` is entered on the thread around all its work (the worker's Flask app context:
    the turn may open its connection through `db.engine`)."""

    def __init__(self, context: Callable[[], AbstractContextManager[Any]] = nullcontext) -> None:
        self._context = context
        self._todo: SimpleQueue[Callable[[], Any] | None] = SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        self._thread: threading.Thread | None = None
        self._outcome: tuple[Any, BaseException | None] | None = None
        self._in_flight = False
        self._done = False  # the wake-up byte of the work in flight has been read

    def submit(self, work: Callable[[], Any]) -> None:
        if self._in_flight:
            raise RuntimeError("a turn is already in flight")
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="worker-committer", daemon=True)
            self._thread.start()
        self._in_flight = True
        self._todo.put(work)

    def fileno(self) -> int:
        """Readable once the submitted work has finished."""
        return self._wake_r

    def poll(self, timeout: float) -> bool:
        """Whether the submitted work has finished, waiting up to `timeout` seconds for it."""
        if self._done:
            return True
        if not select.select([self._wake_r], [], [], timeout)[0]:
            return False
        os.read(self._wake_r, 1)
        self._done = True
        return True

    def result(self) -> Any:
        """What the finished work returned (its exception is raised here, in the caller's thread)."""
        while not self.poll(1.0):
            pass
        outcome, self._outcome, self._in_flight, self._done = self._outcome, None, False, False
        assert outcome is not None  # poll() said the work is done
        value, error = outcome
        if error is not None:
            raise error
        return value

    def close(self) -> None:
        if self._thread is not None:
            self._todo.put(None)
            self._thread.join(timeout=5)
            self._thread = None
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _serve(self) -> None:
        with self._context():
            self._serve_in_context()

    def _serve_in_context(self) -> None:
        while (work := self._todo.get()) is not None:
            try:
                outcome: tuple[Any, BaseException | None] = (work(), None)
            except BaseException as exc:  # handed to the main thread, which raises it
                outcome = (None, exc)
            self._outcome = outcome
            os.write(self._wake_w, b"x")
