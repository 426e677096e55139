"""A workflow run as people and programs read it: each step's status, timing, result and why it
is where it is (the run page, `flask workflow show`, the API all print this one shape)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from app.clock import iso_z
from app.domain.workflow import CANCELLED, UPSTREAM_FAILED, Node, depths, nodes_of, step_statuses
from app.domain.workflow_explain import WAITING, why_upstream_failed, why_waiting
from app.models import Execution, WorkflowRun


def step_views(run: WorkflowRun, executions: dict[int, Execution]) -> list[dict[str, Any]]:
    """One dict per step, in the definition's order."""
    nodes = nodes_of(run.steps)
    statuses = step_statuses(nodes, run.state, {row.id: row.status for row in executions.values()})
    column = depths(nodes)
    views = []
    for step in run.steps:
        name = step["name"]
        after = list(step.get("after") or [])
        entry = run.state.get(name) or {}
        execution = executions.get(entry["execution_id"]) if isinstance(entry.get("execution_id"), int) else None
        status = statuses.get(name, WAITING)
        kept = execution is not None and execution.workflow_run_id != run.id
        views.append(
            {
                "name": name,
                "task": step["task"],
                "after": after,
                "status": status,
                "execution_id": execution.id if execution is not None else entry.get("execution_id"),
                "kept_from_run": execution.workflow_run_id if kept and execution is not None else None,
                "attempts": execution.attempts if execution is not None else 0,
                "started_at": iso_z(execution.started_at) if execution is not None else None,
                "finished_at": iso_z(execution.finished_at) if execution is not None else None,
                "duration_ms": _duration_ms(execution),
                "result": _result(execution),
                "depth": column[name],
                "explain": _explain(nodes, name, after, status, statuses, execution, kept),
            }
        )
    return views


def run_view(run: WorkflowRun, executions: dict[int, Execution]) -> dict[str, Any]:
    """The whole run: its anchor's status and times, where it came from, and its steps."""
    anchor = run.anchor
    steps = step_views(run, executions)
    return {
        "id": run.id,
        "job_id": run.job_id,
        "job": run.job.name,
        "status": anchor.status,
        "trigger": anchor.trigger,
        "scheduled_for": iso_z(anchor.scheduled_for),
        "started_at": iso_z(anchor.started_at),
        "finished_at": iso_z(anchor.finished_at),
        "cancel_requested_by": anchor.cancel_requested_by,
        "retry_of": run.retry_of_id,
        "retry_from": run.retry_from,
        "error": anchor.error or "",
        "counts": dict(Counter(step["status"] for step in steps)),
        "steps": steps,
    }


def run_summary(run: WorkflowRun) -> dict[str, Any]:
    """A run in a list: no step details beyond how many stand where."""
    anchor = run.anchor
    marked = Counter(entry.get("state") for entry in run.state.values() if entry.get("state"))
    return {
        "id": run.id,
        "job_id": run.job_id,
        "status": anchor.status,
        "trigger": anchor.trigger,
        "scheduled_for": iso_z(anchor.scheduled_for),
        "started_at": iso_z(anchor.started_at),
        "finished_at": iso_z(anchor.finished_at),
        "steps": len(run.steps),
        "started_steps": sum(1 for entry in run.state.values() if "execution_id" in entry),
        "upstream_failed": marked.get(UPSTREAM_FAILED, 0),
        "retry_of": run.retry_of_id,
    }


def _explain(
    nodes: list[Node],
    name: str,
    after: list[str],
    status: str,
    statuses: dict[str, str],
    execution: Execution | None,
    kept: bool,
) -> str:
    if status == WAITING:
        return why_waiting(after, statuses)
    if status == UPSTREAM_FAILED:
        return why_upstream_failed(nodes, statuses, name, after)
    if status == CANCELLED:
        return "will not run: the run was cancelled"
    if execution is None:
        return status  # its execution was removed by history retention
    if kept:
        return f"taken over from workflow run {execution.workflow_run_id}, where it succeeded"
    if status in ("pending", "retry_scheduled"):
        return f"queued in {execution.queue or 'its queue'}, waiting for a worker (execution {execution.id})"
    if status == "running":
        return f"running, attempt {execution.attempts} of {execution.max_attempts}"
    return f"{status} after {execution.attempts} attempt{'s' if execution.attempts != 1 else ''}"


def _duration_ms(execution: Execution | None) -> int | None:
    if execution is None or execution.started_at is None or execution.finished_at is None:
        return None
    return int((execution.finished_at - execution.started_at).total_seconds() * 1000)


def _result(execution: Execution | None) -> Any:
    if execution is None or execution.result is None:
        return None
    try:
        return json.loads(execution.result)
    except ValueError:
        return None


# The graph as drawn on the run page: steps in columns by depth, edges from each step it waits for.
NODE_WIDTH, NODE_HEIGHT, COLUMN_GAP, ROW_GAP, MARGIN = 170, 46, 56, 16, 8


def graph_layout(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Boxes and edges for a server-rendered SVG of `step_views`: each step a box at (x, y) in its
    depth's column, each edge a cubic path from the right of an upstream box to the left of its step."""
    columns: dict[int, list[dict[str, Any]]] = {}
    for step in steps:
        columns.setdefault(step["depth"], []).append(step)
    boxes: dict[str, dict[str, Any]] = {}
    for depth, members in columns.items():
        for row, step in enumerate(members):
            boxes[step["name"]] = {
                "step": step,
                "x": MARGIN + depth * (NODE_WIDTH + COLUMN_GAP),
                "y": MARGIN + row * (NODE_HEIGHT + ROW_GAP),
            }
    edges = []
    for step in steps:
        to = boxes[step["name"]]
        for up in step["after"]:
            start = boxes[up]
            x1, y1 = start["x"] + NODE_WIDTH, start["y"] + NODE_HEIGHT / 2
            x2, y2 = to["x"], to["y"] + NODE_HEIGHT / 2
            middle = (x1 + x2) / 2
            edges.append(
                {
                    "from": up,
                    "to": step["name"],
                    "d": f"M{x1:g},{y1:g} C{middle:g},{y1:g} {middle:g},{y2:g} {x2:g},{y2:g}",
                }
            )
    width = MARGIN * 2 + (max(columns) + 1) * NODE_WIDTH + max(columns) * COLUMN_GAP if columns else 0
    rows = max((len(members) for members in columns.values()), default=0)
    height = MARGIN * 2 + rows * NODE_HEIGHT + max(rows - 1, 0) * ROW_GAP
    return {
        "boxes": list(boxes.values()),
        "edges": edges,
        "width": width,
        "height": height,
        "node_width": NODE_WIDTH,
        "node_height": NODE_HEIGHT,
    }
