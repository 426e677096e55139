"""Why each step of a workflow run stands where it does. Pure: no I/O and no clock.

A step with no execution yet is waiting for the steps it names in `after` that have not
succeeded (`waiting for \\`export\\``), will never run because a step upstream of it ended badly
(`upstream_failed: \\`export\\` failed`, naming the steps that ended badly on their own, not the
ones marked after them), or was cancelled with its run. A step with an execution is running,
ended (how, after how many attempts), waits to retry, or waits in its queue: then the reason is
the queue's, as app/domain/explain.py says it for any run (queue paused, no live worker serving
the queue or offering the task, rate limit reached, waiting for a free slot).

The read models gather the statuses and the evidence: app/services/read/workflows.py for the run
page and `flask workflow show` (the graph reasons), app/services/read/workflow_explain.py for
`flask job explain` and `flask execution explain` (every reason, per step).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.clock import iso_z
from app.domain.explain import Fate
from app.domain.workflow import CANCELLED, ENDED_BADLY, SUCCEEDED, UPSTREAM_FAILED, Node, upstream

WAITING = "waiting"  # a step with no execution and no mark: its upstream has not all succeeded
WAITING_FOR_UPSTREAM = "waiting_for_upstream"  # its fate
QUEUED = frozenset({"pending", "claimed"})


@dataclass(frozen=True)
class StepEvidence:
    """One step as the read model found it: its status (step_statuses' reading, or `waiting`)
    and, when it has one, what its execution says."""

    name: str
    after: tuple[str, ...]
    status: str
    execution_id: int | None = None
    attempts: int = 0
    max_attempts: int = 1
    worker: str | None = None  # the worker running it
    available_at: datetime | None = None
    reason: str | None = None  # why it was cancelled or expired
    cancel_requested_by: str | None = None
    kept_from_run: int | None = None  # taken over from the run a retry resumed
    pruned: bool = False  # its execution was removed by history retention
    queued: Fate | None = None  # explain's fate while it waits in its queue (pending, claimed)


@dataclass
class StepFate:
    """Why one step stands where it does: a code, a sentence, and the steps behind it."""

    step: str
    status: str
    fate: str
    summary: str
    execution_id: int | None = None
    waiting_for: list[str] = field(default_factory=list)
    failed_upstream: list[dict[str, str]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "status": self.status,
            "fate": self.fate,
            "summary": self.summary,
            "execution_id": self.execution_id,
            "waiting_for": self.waiting_for,
            "failed_upstream": self.failed_upstream,
            "details": self.details,
        }


def waiting_for(after: Sequence[str], statuses: Mapping[str, str]) -> list[str]:
    """The steps of `after` that have not succeeded (yet)."""
    return [up for up in after if statuses.get(up) != SUCCEEDED]


def failure_causes(nodes: Sequence[Node], statuses: Mapping[str, str], step: str) -> list[tuple[str, str]]:
    """The steps upstream of `step` that ended badly on their own (not marked `upstream_failed`
    after another), with how they ended, in the graph's order."""
    return [
        (name, statuses[name])
        for name in upstream(nodes, step)
        if statuses.get(name) in ENDED_BADLY and statuses.get(name) != UPSTREAM_FAILED
    ]


def why_waiting(after: Sequence[str], statuses: Mapping[str, str]) -> str:
    """`waiting for \\`export\\``: the upstream steps it still waits for."""
    names = waiting_for(after, statuses)
    return "waiting for " + _names(names) if names else "about to start"


def why_upstream_failed(nodes: Sequence[Node], statuses: Mapping[str, str], step: str, after: Sequence[str]) -> str:
    """`upstream_failed: \\`export\\` failed`: the steps whose bad end holds it back, and, when
    none of them is one it waits for directly, the steps it waits for that they held back."""
    causes = failure_causes(nodes, statuses, step)
    direct = waiting_for(after, statuses)
    if not causes:  # their executions were removed by history retention
        return "upstream_failed: " + _names(direct) + " did not succeed"
    text = "upstream_failed: " + ", ".join(f"`{name}` {status}" for name, status in causes)
    through = [name for name in direct if name not in {cause for cause, _ in causes}]
    return text + (f" (through {_names(through)})" if through else "")


def explain_step(nodes: Sequence[Node], statuses: Mapping[str, str], step: StepEvidence) -> StepFate:
    """Why `step` stands where it does, given every step's status in its run."""
    fate = StepFate(step.name, step.status, step.status, "", execution_id=step.execution_id)
    if step.status == WAITING:
        fate.fate = WAITING_FOR_UPSTREAM
        fate.waiting_for = waiting_for(step.after, statuses)
        fate.summary = why_waiting(step.after, statuses)
        return fate
    if step.status == UPSTREAM_FAILED and step.execution_id is None:
        fate.waiting_for = waiting_for(step.after, statuses)
        fate.failed_upstream = [
            {"step": name, "status": how} for name, how in failure_causes(nodes, statuses, step.name)
        ]
        fate.summary = why_upstream_failed(nodes, statuses, step.name, step.after)
        return fate
    if step.status == CANCELLED and step.execution_id is None:
        by = step.cancel_requested_by
        fate.summary = "will not run: the run was cancelled" + (f" by {by}" if by else "")
        return fate
    fate.summary = _with_execution(step, fate)
    return fate


def explain_steps(nodes: Sequence[Node], statuses: Mapping[str, str], steps: Sequence[StepEvidence]) -> list[StepFate]:
    """`explain_step` for each step, in the order given (the definition's)."""
    return [explain_step(nodes, statuses, step) for step in steps]


def steps_summary(fates: Sequence[StepFate]) -> str:
    """`2 succeeded, 1 running, 1 waiting`: how many steps stand where, in the order first seen."""
    counts = Counter(fate.status for fate in fates)
    return ", ".join(f"{count} {status}" for status, count in counts.items())


def _with_execution(step: StepEvidence, fate: StepFate) -> str:
    execution = f"execution #{step.execution_id}"
    tries = f"{step.attempts} attempt{'s' if step.attempts != 1 else ''}"
    status = step.status
    if step.pruned:
        return f"{status} (its execution was removed by history retention)"
    if step.kept_from_run is not None:
        return f"taken over from workflow run {step.kept_from_run}, where it succeeded ({execution})"
    if status == "running":
        text = f"running on `{step.worker}`, attempt {step.attempts} of {step.max_attempts} ({execution})"
        if step.cancel_requested_by:
            fate.details["cancel_requested_by"] = step.cancel_requested_by
            text += f"; cancel requested by {step.cancel_requested_by}: its worker is stopping it"
        return text
    if status == SUCCEEDED or status in ("failed", "timed_out", "dead_lettered"):
        return f"{status} after {tries} ({execution})"
    if status == "retry_scheduled":
        when = f" at {iso_z(step.available_at)}" if step.available_at else ""
        return f"retry_scheduled: attempt {step.attempts + 1} of {step.max_attempts}{when} ({execution})"
    if status in QUEUED and step.queued is not None:
        fate.fate = step.queued.fate
        fate.details = dict(step.queued.details)
        return step.queued.summary
    if status in ("cancelled", "expired"):
        return f"{status} ({execution})" + (f": {step.reason}" if step.reason else "")
    return f"{status} ({execution})"


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)
