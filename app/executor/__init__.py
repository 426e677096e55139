"""Task execution: each task attempt runs in its own OS process, forked from a warm zygote.

`ForkServer` (client.py) is what the worker uses; `zygote.py` is the forking process it spawns;
`task_child.py` is what a forked task process does; `pool.py` runs the attempts of
`isolation = pool` jobs in reused processes instead (`pool_limits.py`: when one is replaced);
`output.py` bounds captured output; `protocol.py` frames the messages between worker and zygote.
See zygote.py for the why.

The names below are loaded on first use (PEP 562) rather than imported here: the zygote imports
this package too, and client.py brings `subprocess` and with it `threading`, whose after-fork
hook runs in every forked child; without them a fork of the zygote costs about 0.3 ms less.
"""

from __future__ import annotations

__all__ = ["ExecutorCrashed", "ForkServer", "TaskRequest", "TaskResult"]

_HOMES = {"ExecutorCrashed": "client", "ForkServer": "client", "TaskRequest": "protocol", "TaskResult": "protocol"}


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{home}"), name)
