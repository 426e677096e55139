"""Task execution: each task attempt runs in its own OS process, forked from a warm zygote.

`ForkServer` (client.py) is what the worker uses; `zygote.py` is the forking process it spawns;
`task_child.py` is what a forked task process does; `output.py` bounds captured output;
`protocol.py` frames the messages between worker and zygote. See zygote.py for the why.
"""
from app.executor.client import ExecutorCrashed, ForkServer
from app.executor.protocol import TaskRequest, TaskResult

__all__ = ["ExecutorCrashed", "ForkServer", "TaskRequest", "TaskResult"]
