"""What the worker and its zygote say to each other, and how it is framed on the socket.

Messages are JSON objects, each sent as a 4-byte big-endian length followed by that many bytes of
UTF-8 JSON. A length prefix (rather than newline-delimited JSON) lets either side read whatever the
socket has and split it into whole messages without scanning for separators.

Client -> zygote ("op"):     run {request (isolation: process | pool), within?}, kill {execution_id, reason: killed|cancelled}, shutdown {}
Zygote -> client ("type"):   ready {pid}, fatal {error}, started {execution_id, pid},
                             result {TaskResult fields}, bye {}

A `run` with `within` (the worker's slot count) is forked once fewer than `within` tasks run in the
zygote, waiting in its queue until then; `kill` and `shutdown` withdraw a queued run, reported as
a result with `forked` false.

No I/O here beyond bytes in, bytes out: both ends of the socket share this module.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any, Literal

_HEADER = struct.Struct("!I")
# A result carries at most output_limit + error limit characters; anything near this is corruption.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

TaskStatus = Literal["succeeded", "failed", "timed_out", "cancelled"]
# Why the worker asks the zygote to kill a task: "cancelled" reports the task as cancelled (an
# operator cancelled the running execution), "killed" as failed.
KILL_REASONS = ("killed", "cancelled")


class ProtocolError(RuntimeError):
    """The byte stream does not hold well-formed messages (a bug, or a corrupted peer)."""


@dataclass
class TaskRequest:
    """One attempt to run a registered task in its own process.

    `context` holds the keyword arguments of `app.tasks.registry.TaskContext`.
    `timeout_seconds` of None (or <= 0) means no timeout. `isolation` is the job's: "process"
    forks a fresh process for the attempt, "pool" hands it to a reused pool process. `env`, for a
    deployer's task, is the whole environment its process runs with (the base and its declared
    variables); `refused`, when set, is why the attempt fails without calling the task (a declared
    variable not set on the worker).
    """

    execution_id: int
    task_name: str
    config: dict
    context: dict
    timeout_seconds: float | None
    isolation: str = "process"
    env: dict[str, str] | None = None
    refused: str | None = None

    def to_dict(self) -> dict[str, Any]:
        # Shallow: the dict is encoded at once. asdict() deep-copies every value, once per task
        # on each side of the socket.
        return self.__dict__.copy()


@dataclass
class TaskResult:
    """How one task process ended.

    `exit_code` is the process exit status, negative for a signal (as in `subprocess`), None if
    unknown. `started_at`/`finished_at` are epoch seconds; `fork_ms` is the time from the zygote
    receiving the request (for a queued run: taking it off the queue) to the forked child being
    ready to call the task. `forked` is False only for a run withdrawn from the zygote's queue: no
    process ever ran for it. `result` is what a succeeded task returned.
    """

    execution_id: int
    status: TaskStatus
    exit_code: int | None
    output: str
    error: str
    pid: int
    started_at: float
    finished_at: float
    fork_ms: float
    forked: bool = True
    # What a succeeded task returned (any JSON value; None when it returned nothing).
    result: Any = None

    @property
    def duration_seconds(self) -> float:
        return max(0.0, self.finished_at - self.started_at)

    def to_dict(self) -> dict[str, Any]:
        # Shallow: the dict is encoded at once. asdict() deep-copies every value, once per task
        # on each side of the socket.
        return self.__dict__.copy()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskResult:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


# One encoder for every message: json.dumps with non-default options builds a new JSONEncoder on
# each call, which cost about a fifth of encoding a message.
_encode_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def encode_message(message: dict[str, Any]) -> bytes:
    """Frame one message: length prefix + compact JSON."""
    body = _encode_json(message).encode("utf-8")
    return _HEADER.pack(len(body)) + body


def encode_started(execution_id: int, pid: int) -> bytes:
    """`encode_message({"type": "started", "execution_id": ..., "pid": ...})`, byte for byte.

    Formatted directly because the zygote sends it right after every fork, when each page it
    writes is copied (the child shares it): a dict through the JSON encoder touched about 10 more
    pages per fork than this.
    """
    if type(execution_id) is not int:  # not the worker's (ids are ints), but keep it a message
        return encode_message({"type": "started", "execution_id": execution_id, "pid": pid})
    body = b'{"type":"started","execution_id":%d,"pid":%d}' % (execution_id, pid)
    return _HEADER.pack(len(body)) + body


class MessageReader:
    """Accumulates received bytes and yields the whole messages among them."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buffer += data
        messages = []
        while len(self._buffer) >= _HEADER.size:
            (length,) = _HEADER.unpack_from(self._buffer)
            if length > MAX_MESSAGE_BYTES:
                raise ProtocolError(f"message of {length} bytes exceeds {MAX_MESSAGE_BYTES}")
            end = _HEADER.size + length
            if len(self._buffer) < end:
                break
            body = bytes(self._buffer[_HEADER.size : end])
            del self._buffer[:end]
            messages.append(json.loads(body))
        return messages
