"""Why each step of a workflow run stands where it does (app/domain/workflow_explain.py): the
upstream steps a step waits for, the steps whose bad end holds it back (not those marked after
them), and what its execution says: running where, ended how, queued and why."""

from __future__ import annotations

from datetime import UTC, datetime

from app.domain.explain import Fate
from app.domain.workflow import Node, upstream
from app.domain.workflow_explain import (
    StepEvidence,
    explain_step,
    failure_causes,
    steps_summary,
    why_upstream_failed,
    why_waiting,
)

# export -> report-a, report-b -> mail -> notify; archive after export.
GRAPH = [
    Node("export"),
    Node("report-a", ("export",)),
    Node("report-b", ("export",)),
    Node("mail", ("report-a", "report-b")),
    Node("notify", ("mail",)),
    Node("archive", ("export",)),
]
T = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def fate_of(name: str, statuses: dict[str, str], **evidence):
    node = next(node for node in GRAPH if node.name == name)
    status = statuses.get(name, "waiting")
    return explain_step(GRAPH, statuses, StepEvidence(name, node.after, status, **evidence))


def test_upstream_is_every_step_a_step_waits_for_directly_or_not():
    assert upstream(GRAPH, "notify") == ["export", "report-a", "report-b", "mail"]
    assert upstream(GRAPH, "export") == []
    assert upstream(GRAPH, "nope") == []


def test_a_step_waits_for_the_upstream_steps_that_have_not_succeeded_yet():
    statuses = {"export": "succeeded", "report-a": "running"}
    mail = fate_of("mail", statuses)
    assert (mail.fate, mail.status) == ("waiting_for_upstream", "waiting")
    assert mail.summary == "waiting for `report-a`, `report-b`"
    assert mail.waiting_for == ["report-a", "report-b"]
    assert fate_of("notify", statuses).summary == "waiting for `mail`"
    assert why_waiting(("export",), {"export": "succeeded"}) == "about to start"


def test_upstream_failed_names_the_step_that_failed_and_how_not_the_ones_marked_after_it():
    statuses = {
        "export": "succeeded",
        "report-a": "succeeded",
        "report-b": "timed_out",
        "mail": "upstream_failed",
        "notify": "upstream_failed",
    }
    mail = fate_of("mail", statuses)
    assert mail.summary == "upstream_failed: `report-b` timed_out"
    assert mail.failed_upstream == [{"step": "report-b", "status": "timed_out"}]
    notify = fate_of("notify", statuses)
    assert notify.summary == "upstream_failed: `report-b` timed_out (through `mail`)"
    assert failure_causes(GRAPH, statuses, "notify") == [("report-b", "timed_out")]
    both = {**statuses, "report-a": "failed"}
    assert why_upstream_failed(GRAPH, both, "mail", ("report-a", "report-b")) == (
        "upstream_failed: `report-a` failed, `report-b` timed_out"
    )
    # History retention removed the executions that said why: the direct upstream is named.
    assert why_upstream_failed(GRAPH, {"mail": "upstream_failed"}, "notify", ("mail",)) == (
        "upstream_failed: `mail` did not succeed"
    )


def test_a_step_with_an_execution_says_where_it_runs_how_it_ended_or_why_it_is_queued():
    statuses = {"export": "running"}
    running = fate_of("export", statuses, execution_id=7, attempts=1, max_attempts=3, worker="w1")
    assert (running.fate, running.summary) == ("running", "running on `w1`, attempt 1 of 3 (execution #7)")
    stopping = fate_of("export", statuses, execution_id=7, attempts=1, worker="w1", cancel_requested_by="alice")
    assert stopping.summary.endswith("cancel requested by alice: its worker is stopping it")
    ended = fate_of("export", {"export": "failed"}, execution_id=7, attempts=2, max_attempts=2)
    assert (ended.fate, ended.summary) == ("failed", "failed after 2 attempts (execution #7)")
    retry = fate_of("export", {"export": "retry_scheduled"}, execution_id=7, attempts=1, max_attempts=3, available_at=T)
    assert retry.summary == "retry_scheduled: attempt 2 of 3 at 2026-06-01T12:00:00Z (execution #7)"
    paused = Fate(T, "queue_paused", "Waiting: queue 'slow' is paused (by bob).", details={"queue": "slow"})
    queued = fate_of("export", {"export": "pending"}, execution_id=7, queued=paused)
    assert (queued.fate, queued.summary, queued.details) == ("queue_paused", paused.summary, {"queue": "slow"})
    kept = fate_of("export", {"export": "succeeded"}, execution_id=7, attempts=1, kept_from_run=3)
    assert kept.summary == "taken over from workflow run 3, where it succeeded (execution #7)"
    cancelled = fate_of("mail", {"mail": "cancelled"}, cancel_requested_by="carol")
    assert (cancelled.fate, cancelled.summary) == ("cancelled", "will not run: the run was cancelled by carol")
    assert steps_summary([running, ended, kept, cancelled]) == "1 running, 1 failed, 1 succeeded, 1 cancelled"
