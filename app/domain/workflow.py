"""A workflow's graph of steps: order, readiness and what a failure holds back. No I/O here.

A step names the steps it waits for (`after`); a step with none is a root. The graph must be
acyclic and name only its own steps; `check_graph` says what is wrong, naming the step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


def upstream(nodes: Sequence[Node], step: str) -> list[str]:
    """Every step `step` waits for, directly or not, in the nodes' order."""
    by_name = {node.name: node for node in nodes}
    above: set[str] = set()
    frontier = list(by_name[step].after) if step in by_name else []
    while frontier:
        name = frontier.pop()
        if name not in above and name in by_name:
            above.add(name)
            frontier.extend(by_name[name].after)
    return [node.name for node in nodes if node.name in above]


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


# What a workflow run's `state` holds for a step that will never run (a step with an execution
# holds its id instead; a step with neither is waiting).
CANCELLED = "cancelled"
NEVER_RUN = frozenset({UPSTREAM_FAILED, CANCELLED})


@dataclass(frozen=True)
class Advance:
    """What a workflow run does next: steps to start now, steps marked as never to run, and,
    once every step has ended, the run's own outcome (None while it goes on)."""

    start: list[str]
    upstream_failed: list[str]
    cancelled: list[str]
    outcome: str | None


def step_statuses(
    nodes: Sequence[Node], state: Mapping[str, Mapping[str, object]], execution_status: Mapping[int, str]
) -> dict[str, str]:
    """Each step's status as the graph reads it: its execution's status (a step whose execution
    history retention has removed counts as succeeded: only ended runs are pruned, and a run
    whose step failed has ended), or the state it was marked with; waiting steps are absent."""
    statuses: dict[str, str] = {}
    for node in nodes:
        entry = state.get(node.name) or {}
        execution_id = entry.get("execution_id")
        if isinstance(execution_id, int):
            statuses[node.name] = execution_status.get(execution_id, SUCCEEDED)
        elif entry.get("state") in NEVER_RUN:
            statuses[node.name] = str(entry["state"])
    return statuses


def advance(nodes: Sequence[Node], statuses: Mapping[str, str], *, cancelling: bool = False) -> Advance:
    """The next move of a run whose steps stand at `statuses` (`step_statuses`). A step starts
    once every step it waits for succeeded; a step downstream of one that ended any other way
    is marked `upstream_failed`; while the run is being cancelled nothing starts and every
    waiting step is marked `cancelled`. The outcome: succeeded when every step did, cancelled
    when the run was cancelled, failed otherwise."""
    if cancelling:
        held: list[str] = []
        start: list[str] = []
        cancelled = [node.name for node in nodes if node.name not in statuses]
    else:
        held = held_back(nodes, statuses)
        start = ready_steps(nodes, statuses)
        cancelled = []
    after = {**statuses, **{name: UPSTREAM_FAILED for name in held}, **{name: CANCELLED for name in cancelled}}
    status = run_status(nodes, after) if not start else "running"
    if status == "running":
        return Advance(start, held, cancelled, None)
    if status == "failed" and (cancelling or CANCELLED in after.values()):
        status = CANCELLED
    return Advance(start, held, cancelled, status)


def depths(nodes: Sequence[Node]) -> dict[str, int]:
    """Each step's column when the graph is drawn: 0 for a root, else one more than the deepest
    step it waits for (the graph is acyclic: `check_graph`)."""
    by_name = {node.name: node for node in nodes}
    depth: dict[str, int] = {}
    for name in check_graph(nodes):
        depth[name] = 1 + max((depth[up] for up in by_name[name].after), default=-1)
    return depth


def nodes_of(steps: Sequence[Mapping[str, Any]]) -> list[Node]:
    """The graph of a stored steps list (app/definitions/workflow.py's shape)."""
    return [Node(str(step["name"]), tuple(str(up) for up in step.get("after") or ())) for step in steps]
