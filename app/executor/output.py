"""Bounded capture of task output: keep the head, count the rest, never grow with the task.

A task that prints 100 MB must not cost the zygote (or the worker, or the database row) 100 MB.
The zygote keeps reading the pipe so the task never blocks on a full pipe, but it only keeps the
first bytes it could ever show; the rest is counted and dropped. The text that leaves the executor
is at most `limit` characters, truncation marker included, so it fits the execution row as is.

Pure logic: no I/O here.
"""

from __future__ import annotations

from app.domain.limits import OUTPUT_LIMIT_CHARS  # noqa: F401 - the one limit, re-exported for the executor

# UTF-8 needs at most 4 bytes per character, so this many bytes always decode to >= limit chars.
BYTES_PER_CHAR = 4


def truncate_text(text: str, limit: int, *, what: str = "output", total: str | None = None) -> str:
    """Return `text` if it fits in `limit` characters, else its head plus a truncation marker.

    Passing `total` (the full size, for the marker) means the caller already knows `text` is only
    a head of something longer, so the marker is always added.
    """
    if total is None:
        if len(text) <= limit:
            return text
        total = f"{len(text)} characters"
    marker = f"\n[... {what} truncated: {total} total]"
    if len(marker) >= limit:
        return marker[:limit]
    return text[: limit - len(marker)] + marker


class BoundedCapture:
    """Bytes from a pipe: keeps the first `limit * 4` bytes, counts everything."""

    def __init__(self, limit_chars: int) -> None:
        self.limit_chars = limit_chars
        self._keep_bytes = limit_chars * BYTES_PER_CHAR
        self._head = bytearray()
        self.total_bytes = 0

    def add(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        room = self._keep_bytes - len(self._head)
        if room > 0:
            self._head += chunk[:room]

    @property
    def truncated(self) -> bool:
        return self.total_bytes > len(self._head)

    def text(self) -> str:
        """The captured output as at most `limit_chars` characters (utf-8, errors replaced)."""
        decoded = self._head.decode("utf-8", errors="replace")
        if self.truncated or len(decoded) > self.limit_chars:
            return truncate_text(decoded, self.limit_chars, total=f"{self.total_bytes} bytes")
        return decoded
