"""Jitter: a per-job deterministic offset that spreads top-of-the-minute bursts.

Pure. A job with `jitter_seconds = w` has every run become available `jitter_offset(id, w)` after
its nominal time, an offset in [0, w) taken from a hash of the job id: the same for every run of
the job (so its runs stay evenly spaced) and different between jobs (so a thousand `0 * * * *`
jobs do not all start in the same instant). The occurrence keeps its nominal time as its identity
(`scheduled_for` and the idempotency key), so deduplication across schedulers is unchanged; only
`available_at`, when a worker may claim it, moves.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta


def jitter_offset(job_id: int, window_seconds: int) -> timedelta:
    """The job's offset in [0, window_seconds), to the millisecond; zero when there is no window."""
    if window_seconds <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"cronwell-jitter:{job_id}".encode()).digest()
    milliseconds = int.from_bytes(digest[:8], "big") % (window_seconds * 1000)
    return timedelta(milliseconds=milliseconds)
