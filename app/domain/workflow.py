"""A workflow's graph of steps: order, readiness and what a failure holds back. No I/O here.

A step names the steps it waits for (`after`); a step with none is a root. The graph must be
acyclic and name only its own steps; `check_graph` says what is wrong, naming the step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# Step statuses as the graph reads them: a step that ended any other way than succeeded holds
# back everything downstream of it.
SUCCEEDED = "succeeded"
UPSTREAM_FAILED = "upstream_failed"
ENDED_BADLY = frozenset({"failed", "timed_out", "cancelled", "dead_lettered", "expired", UPSTREAM_FAILED})


class GraphError(ValueError):
    """A graph that cannot run: a step named twice, an unknown step in `after`, a cycle."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"step {step!r}: {message}")
        self.step = step


@dataclass(frozen=True)
class Node:
    name: str
    after: tuple[str, ...] = ()


def check_graph(nodes: Sequence[Node]) -> list[str]:
    """The names in a topological order (each after everything it waits for, ties in the given
    order); raises GraphError naming the first step at fault."""
    names = [node.name for node in nodes]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise GraphError(name, "is named twice")
        seen.add(name)
    for node in nodes:
        for upstream in node.after:
            if upstream not in seen:
                raise GraphError(node.name, f"waits for unknown step {upstream!r}")
            if upstream == node.name:
                raise GraphError(node.name, "waits for itself")
    order: list[str] = []
    placed: set[str] = set()
    pending = list(nodes)
    while pending:
        ready = [node for node in pending if set(node.after) <= placed]
        if not ready:
            raise GraphError(pending[0].name, f"is part of a cycle: {' -> '.join(_cycle(pending))}")
        for node in ready:
            order.append(node.name)
            placed.add(node.name)
        pending = [node for node in pending if node.name not in placed]
    return order


def _cycle(pending: Sequence[Node]) -> list[str]:
    """One cycle among `pending` (every one of which waits for another of them), as a path."""
    by_name = {node.name: node for node in pending}
    path: list[str] = []
    current = pending[0].name
    while current not in path:
        path.append(current)
        current = next(name for name in by_name[current].after if name in by_name)
    return [*path[path.index(current) :], current]


def roots(nodes: Iterable[Node]) -> list[str]:
    """The steps that wait for nothing: they start with the run."""
    return [node.name for node in nodes if not node.after]


def ready_steps(nodes: Sequence[Node], statuses: Mapping[str, str]) -> list[str]:
    """Steps not started yet (no status) whose every `after` step succeeded."""
    return [
        node.name
        for node in nodes
        if node.name not in statuses and all(statuses.get(up) == SUCCEEDED for up in node.after)
    ]


def downstream(nodes: Sequence[Node], step: str) -> list[str]:
    """Every step that waits for `step`, directly or not, in the nodes' order."""
    below: set[str] = {step}
    changed = True
    while changed:
        changed = False
        for node in nodes:
            if node.name not in below and below & set(node.after):
                below.add(node.name)
                changed = True
    return [node.name for node in nodes if node.name in below and node.name != step]


def held_back(nodes: Sequence[Node], statuses: Mapping[str, str]) -> list[str]:
    """Steps not started yet that can never start because a step upstream ended badly: each is
    to be marked `upstream_failed`."""
    failed = [name for name, status in statuses.items() if status in ENDED_BADLY]
    marked: set[str] = set()
    for name in failed:
        marked.update(downstream(nodes, name))
    return [node.name for node in nodes if node.name in marked and node.name not in statuses]


def run_status(nodes: Sequence[Node], statuses: Mapping[str, str]) -> str:
    """A workflow run's status from its steps': succeeded when all did, failed when every step
    has ended and one did not succeed, running otherwise."""
    if all(statuses.get(node.name) == SUCCEEDED for node in nodes):
        return SUCCEEDED
    ended = all(statuses.get(node.name) in ENDED_BADLY | {SUCCEEDED} for node in nodes)
    return "failed" if ended else "running"
