"""Examples of what each operation receives and answers, for the OpenAPI document.

One small world, consistent across operations: alice (an admin of `default`) creates the job
`nightly report` (id 12) on the queue `reports`, triggers it (execution 346), follows the run that
finished earlier (345), submits batch 7 and creates the API token `ci-deploy`. Ids and names agree
from one example to the next, so following a link in the document leads to the matching example.

These are checked, not trusted: tests/api/test_api_document.py validates every example against the
schema it illustrates and fails when a response example leaves out a field the schema declares (or
shows one it does not), so a field added to a schema without its example fails there. The job's
defaults come from the job definition itself (`job_example`).
"""

from __future__ import annotations

from typing import Any

from marshmallow.utils import missing

from app.domain.event_kinds import explain_kind

NOW = "2026-06-01T02:00:00Z"
EARLIER = "2026-05-28T09:14:03Z"

# --- people, organizations, projects ------------------------------------------------------------

USER = {
    "id": 3,
    "username": "alice",
    "active": True,
    "superuser": False,
    "memberships": [{"organization": "default", "role": "admin"}],
    "created_at": "2026-05-02T08:30:00Z",
}
ME = {
    "user": USER,
    "actor": "api:alice",
    "credential": "jwt",
    "organization": "default",
    "project": None,
    "role": "admin",
    "superuser": False,
    "time_zone": "Asia/Tokyo",
}
ME_UPDATE = {"time_zone": "Asia/Tokyo"}
ORGANIZATION = {"id": 1, "name": "default", "projects": 2, "members": 4, "created_at": "2026-05-01T07:00:00Z"}
PROJECT = {
    "id": 1,
    "name": "default",
    "organization": "default",
    "full_name": "default/default",
    "description": "",
    "created_at": "2026-05-01T07:00:00Z",
}
NEW_PROJECT = {
    "id": 2,
    "name": "reports",
    "organization": "default",
    "full_name": "default/reports",
    "description": "Reports for finance.",
    "created_at": NOW,
}
RENAMED_ORGANIZATION = {**ORGANIZATION, "name": "finance"}
RENAMED_PROJECT = {**NEW_PROJECT, "name": "finance", "full_name": "default/finance"}
RENAME = {"name": "finance"}
DELETION = {
    "deleted": "project default/reports",
    "projects": ["default/reports"],
    "jobs": 1,
    "queues": 0,
    "executions": 346,
    "running": 0,
}
PROJECT_CREATE = {"organization": "default", "name": "reports", "description": "Reports for finance."}
INVITATION = {
    "invitation": "eyJvcmciOjEsInJvbGUiOiJvcGVyYXRvciJ9.aw5LUQ.FkUHo8FV1SuHGTraoamY0cHTuvU",
    "role": "operator",
    "expires_at": "2026-06-08T02:00:00Z",
}

# --- sign-in ------------------------------------------------------------------------------------

LOGIN = {"username": "alice", "password": "correct horse battery staple", "organization": "default"}
TOKEN_PAIR = {
    "access_token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIzIiwidHlwZSI6ImFjY2VzcyJ9.eV-ooYwbedW53Ob",
    "refresh_token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIzIiwidHlwZSI6InJlZnJlc2gifQ.x0dRSdKg0oZLF",
    "token_type": "Bearer",
    "expires_in": 900,
}
ACCESS_TOKEN = {key: TOKEN_PAIR[key] for key in ("access_token", "token_type", "expires_in")}
PASSWORD_CHANGE = {"current_password": "correct horse battery staple", "new_password": "a-long-new-secret"}
REGISTER = {"username": "carol", "password": "carol-secret-1", "invitation": INVITATION["invitation"]}
REGISTERED = {
    "id": 4,
    "username": "carol",
    "active": True,
    "superuser": False,
    "memberships": [{"organization": "default", "role": "operator"}],
    "created_at": NOW,
}

# --- tokens -------------------------------------------------------------------------------------

TOKEN_CREATE = {"name": "ci-deploy", "project": "default/default", "role": "operator", "expires_in_days": 90}
TOKEN = {
    "id": 5,
    "name": "ci-deploy",
    "prefix": "cw_FguGz0p",
    "project": "default/default",
    "role": "operator",
    "user": "alice",
    "created_at": NOW,
    "expires_at": "2026-08-30T02:00:00Z",
    "last_used_at": "2026-06-01T02:05:12Z",
    "revoked_at": None,
    "revoked_by": None,
}
NEW_TOKEN = {
    **TOKEN,
    "last_used_at": None,
    "token": "cw_FguGz0p4Wc3eJxcYwUjabIb4VAMeYpbr6loNz2ze",
}
REVOKED_TOKEN = {**TOKEN, "revoked_at": "2026-06-01T03:00:00Z", "revoked_by": "api:alice"}

# --- queues -------------------------------------------------------------------------------------

QUEUE_STATS = {
    "pending": 3,
    "scheduled_later": 10,
    "retrying": 1,
    "running": 2,
    "succeeded_last_hour": 118,
    "failed_last_hour": 2,
    "oldest_pending_seconds": 4.2,
    "throughput_per_minute": 2.1,
    "lateness_p50_seconds": 0.4,
    "lateness_p95_seconds": 1.3,
}
QUEUE = {
    "id": 2,
    "name": "reports",
    "project": "default/default",
    "description": "Nightly reports; two at a time.",
    "concurrency_limit": 2,
    "rate_limit": None,
    "rate_window": None,
    "priority": 0,
    "paused": False,
    "paused_by": None,
    "paused_at": None,
    "paused_reason": None,
    "created_at": "2026-05-02T08:31:00Z",
    "updated_at": "2026-05-02T08:31:00Z",
    "stats": QUEUE_STATS,
}
QUEUE_CREATE = {"name": "reports", "description": "Nightly reports; two at a time.", "concurrency_limit": 2}
QUEUE_EDIT = {"concurrency_limit": 4}
EDITED_QUEUE = {**QUEUE, "concurrency_limit": 4, "updated_at": NOW}
PAUSE = {"reason": "deploying"}
PAUSED_QUEUE = {**QUEUE, "paused": True, "paused_by": "api:alice", "paused_at": NOW, "paused_reason": "deploying"}

# --- jobs ---------------------------------------------------------------------------------------

JOB_CREATE = {
    "name": "nightly report",
    "task": "generate_report",
    "config": {"title": "Nightly report", "hours": 24},
    "schedule_type": "cron",
    "schedule": {"expression": "0 2 * * *"},
    "timezone": "Europe/Paris",
    "queue": "reports",
}
JOB_EDIT = {"description": "Runs nightly.", "max_attempts": 5}
# What the server sets; a job field the server sets that is missing here fails the document test.
_JOB_SERVER_FIELDS = {
    "id": 12,
    "project_id": 1,
    "next_run_at": "2026-06-02T00:00:00Z",
    "runs_created": 41,
    "disabled_reason": None,
    "managed_by": None,
    "rate_starts": None,
    "created_at": "2026-04-21T16:45:10Z",
    "updated_at": "2026-05-30T11:02:00Z",
}


def job_example(**changes) -> dict:
    """A job as the API answers it: JOB_CREATE over the job definition's defaults, and the fields
    the server sets. Generated from `JobSchema`, so a new job field appears here with its default."""
    from app.definitions import JobSchema

    document = {}
    for name, field in JobSchema().fields.items():
        if field.dump_only:
            continue
        if field.load_default is missing:
            if not field.allow_none:
                continue
            default = None  # an optional field left out: no limit, no callback, no window
        else:
            default = field.load_default() if callable(field.load_default) else field.load_default
        document[field.data_key or name] = default
    return {**document, **JOB_CREATE, **_JOB_SERVER_FIELDS, **changes}


JOB = job_example()
EDITED_JOB = job_example(**JOB_EDIT, updated_at=NOW)
DISABLED_JOB = job_example(enabled=False, updated_at=NOW)  # next_run_at is kept: enabling resumes
TRIGGER = {"in": "10m", "config_override": {"hours": 48}}
JOB_PREVIEW = {
    "next_runs": ["2026-06-02T00:00:00Z", "2026-06-03T00:00:00Z", "2026-06-04T00:00:00Z"],
    "timezone": "Europe/Paris",
    "notes": [],
}
LINT = [
    {
        "code": "dst_fold",
        "field": "schedule",
        "message": "on 2026-10-25 a fire time falls in a DST fold of Europe/Paris (DST fold: 02:00 occurs twice, "
        "runs at the first (CEST)); pick a time the change does not touch, or use UTC",
    },
    {
        "code": "dst_gap",
        "field": "schedule",
        "message": "on 2027-03-28 a fire time falls in a DST gap of Europe/Paris (DST gap: 02:00 does not exist, "
        "runs at 03:00); pick a time the change does not touch, or use UTC",
    },
]
SCHEDULE_PREVIEW = {
    "schedule_type": "cron",
    "schedule": {"expression": "30 2 * * *"},
    "timezone": "Europe/Paris",
    "count": 3,
    "after": "2026-03-27T00:00:00Z",
}
SCHEDULE_PREVIEW_ANSWER = {
    "next_runs": ["2026-03-27T01:30:00Z", "2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z"],
    "timezone": "Europe/Paris",
    "notes": ["DST gap: 02:30 does not exist, runs at 03:00"],
}
EXPLAIN: dict[str, Any] = {
    "job": {"id": 12, "name": "nightly report", "enabled": True, "timezone": "Europe/Paris"},
    "now": NOW,
    "at": "2026-05-31T00:00:00Z",
    "occurrence": {
        "scheduled_for": "2026-05-31T00:00:00Z",
        "local": "2026-05-31T02:00:00+02:00",
        "dst": None,
        "fate": "fired",
        "execution_id": 345,
        "status": "succeeded",
        "summary": "Fired on time: execution 345 succeeded.",
        "details": {},
    },
    "nearest": None,
}
BACKFILL = {"from": "2026-05-25T00:00:00Z", "to": "2026-05-28T00:00:00Z", "dry_run": True}
BACKFILL_PLAN = {
    "job_id": 12,
    "from": "2026-05-25T00:00:00Z",
    "to": "2026-05-28T00:00:00Z",
    "dry_run": True,
    "overlap": "skip",
    "occurrences": ["2026-05-26T00:00:00Z", "2026-05-27T00:00:00Z"],
    "existing": 1,
    "created": 0,
    "capped": False,
}
BACKFILL_CREATED = {**BACKFILL_PLAN, "dry_run": False, "created": 2}

# --- executions ---------------------------------------------------------------------------------


def _execution(**fields) -> dict:
    return {
        "id": 345,
        "job_id": 12,
        "job_name": "nightly report",
        "task": "generate_report",
        "one_off": False,
        "scheduled_for": "2026-05-31T00:00:00Z",
        "trigger": "schedule",
        "idempotency_key": "job:12:2026-05-31T00:00:00Z",
        "status": "succeeded",
        "reason": None,
        "attempts": 1,
        "max_attempts": 3,
        "queue": "reports",
        "priority": 0,
        "available_at": "2026-05-31T00:00:00Z",
        "claimed_by": None,
        "lease_expires_at": None,
        "started_at": "2026-05-31T00:00:00.412Z",
        "finished_at": "2026-05-31T00:00:03.118Z",
        "duration_seconds": 2.706,
        "exit_code": 0,
        "retry_of_id": None,
        "config_override": None,
        "batch_id": None,
        "parent_id": None,
        "callback_task": None,
        "project_id": 1,
        "timeout_seconds": 300,
        "cancel_requested_at": None,
        "cancel_requested_by": None,
        "created_at": "2026-05-31T00:00:00Z",
        "updated_at": "2026-05-31T00:00:03.118Z",
        "task_version": "sha256:3f9c2a71d0be",
        "output": "Nightly report: 118 succeeded, 2 failed in the last 24 h\n",
        "error": "",
        "result": {"succeeded": 118, "failed": 2},
        **fields,
    }


EXECUTION = _execution()
EXECUTION_EXPLAINED = {
    "execution": {"id": 346, "job_id": None, "job_name": "one-off", "task": "generate_report", "one_off": True},
    "now": "2026-05-31T00:05:00Z",
    "scheduled_for": "2026-05-31T00:00:30Z",
    "fate": "queue_paused",
    "summary": "Waiting: queue 'reports' is paused (by web:alice at 2026-05-31T00:00:00Z: deploy).",
    "dst": None,
    "execution_id": 346,
    "status": "pending",
    "details": {"trigger": "manual", "queue": "reports", "available_at": "2026-05-31T00:00:30Z"},
}
ONE_OFF_RUN = {
    "task": "generate_report",
    "config": {"hours": 24},
    "in": "30s",
    "queue": "reports",
    "idempotency_key": "report-for-user-42-2026-05-31",
}
ONE_OFF_CREATED = _execution(
    id=346,
    job_id=None,
    job_name="one-off",
    one_off=True,
    trigger="manual",
    idempotency_key="run:1:report-for-user-42-2026-05-31",
    status="pending",
    scheduled_for="2026-05-31T00:00:30Z",
    available_at="2026-05-31T00:00:30Z",
    attempts=0,
    started_at=None,
    finished_at=None,
    duration_seconds=None,
    exit_code=None,
    config_override={"hours": 24},
    timeout_seconds=30,
    output="",
    updated_at="2026-05-31T00:00:00Z",
)
EXECUTION_LISTED = {key: value for key, value in EXECUTION.items() if key not in ("output", "error", "result")}
_NOT_STARTED = {
    "attempts": 0,
    "started_at": None,
    "finished_at": None,
    "duration_seconds": None,
    "exit_code": None,
    "output": "",
    "updated_at": NOW,
}
TRIGGERED = _execution(
    id=346,
    trigger="manual",
    idempotency_key="job:12:manual:6967ecf8681943aca30d5c8b51d240a4",
    status="pending",
    scheduled_for="2026-06-01T02:10:00Z",
    available_at="2026-06-01T02:10:00Z",
    created_at=NOW,
    **_NOT_STARTED,
)
RETRIED = _execution(
    id=347,
    trigger="retry",
    idempotency_key="job:12:retry:11ee7bf126f94ccbbc0792717c28dfa8",
    status="pending",
    retry_of_id=344,
    scheduled_for=NOW,
    available_at=NOW,
    created_at=NOW,
    **_NOT_STARTED,
)
CANCEL = {"reason": "wrong input"}
CANCELLED = {
    **TRIGGERED,
    "status": "cancelled",
    "reason": "wrong input",
    "finished_at": NOW,
    "cancel_requested_at": NOW,
    "cancel_requested_by": "api:alice",
}
ATTEMPTS = [
    {
        "id": 501,
        "execution_id": 345,
        "number": 1,
        "worker_id": "worker-sched-2-4242",
        "pid": 4242,
        "status": "succeeded",
        "started_at": "2026-05-31T00:00:00.412Z",
        "finished_at": "2026-05-31T00:00:03.118Z",
        "duration_seconds": 2.706,
        "exit_code": 0,
        "output": EXECUTION["output"],
        "error": "",
    }
]
OUTPUT = {"execution_id": 345, "status": "succeeded", "output": EXECUTION["output"], "error": ""}

# --- batches ------------------------------------------------------------------------------------

BATCH_SUBMIT = {
    "job_id": 12,
    "items": [{"title": "Report EU"}, {"title": "Report US"}],
    "on_complete": "echo",
    "on_complete_config": {"message": "both reports are done"},
}
_BATCH_COUNTS = dict.fromkeys(
    (
        "pending",
        "claimed",
        "running",
        "retry_scheduled",
        "succeeded",
        "failed",
        "timed_out",
        "dead_lettered",
        "cancelled",
        "expired",
        "missed",
    ),
    0,
)
BATCH = {
    "id": 7,
    "job_id": 12,
    "job_name": "nightly report",
    "status": "running",
    "items": 2,
    "counts": {**_BATCH_COUNTS, "pending": 1, "succeeded": 1},
    "on_complete": "echo",
    "on_complete_config": {"message": "both reports are done"},
    "callback_execution_id": None,
    "created_by": "api:alice",
    "created_at": NOW,
    "cancelled_at": None,
    "cancelled_by": None,
    "completed_at": None,
}
NEW_BATCH = {**BATCH, "counts": {**_BATCH_COUNTS, "pending": 2}}
CANCELLED_BATCH = {
    **BATCH,
    "status": "cancelled",
    "counts": {**_BATCH_COUNTS, "succeeded": 1, "cancelled": 1},
    "cancelled_at": "2026-06-01T02:01:00Z",
    "cancelled_by": "api:alice",
    "completed_at": "2026-06-01T02:01:00Z",
}
BATCH_ITEMS = [
    {**EXECUTION_LISTED, "id": 350, "trigger": "batch", "idempotency_key": "batch:7:item:1", "created_at": NOW},
    {
        **{key: value for key, value in TRIGGERED.items() if key not in ("output", "error")},
        "id": 351,
        "trigger": "batch",
        "idempotency_key": "batch:7:item:2",
        "scheduled_for": NOW,
        "available_at": NOW,
    },
]

# --- alerts, workers, audit -----------------------------------------------------------------------

ALERT = {
    "id": 31,
    "job_id": 12,
    "job_name": "nightly report",
    "execution_id": 344,
    "kind": "dead_letter",
    "message": "nightly report: execution 344 dead-lettered after 3 attempts (RuntimeError: database is locked)",
    "created_at": "2026-05-30T00:00:09Z",
    "resolved_at": None,
    "resolved_by": None,
}
RESOLVED_ALERT = {**ALERT, "resolved_at": NOW, "resolved_by": "api:alice"}
NOTIFY_BODY = {"events": ["failure", "dead_letter", "overdue", "recovery"], "channels": ["ops-slack"]}
PROJECT_NOTIFY = {
    "project": "default/default",
    "project_id": 1,
    "events": ["failure", "dead_letter", "overdue", "recovery"],
    "channels": ["ops-slack"],
    "source": "project",
}
JOB_NOTIFY = {
    "job_id": 12,
    "job": "nightly report",
    "override": {"events": ["failure", "recovery", "success"], "channels": None, "source": "job"},
    "effective": {"events": ["failure", "recovery", "success"], "channels": ["ops-slack"], "source": "job"},
}
JOB_NOTIFY_FOLLOWING = {
    **JOB_NOTIFY,
    "override": None,
    "effective": {
        "events": ["failure", "dead_letter", "overdue", "recovery"],
        "channels": ["ops-slack"],
        "source": "project",
    },
}
CHANNEL = {
    "id": 3,
    "project_id": 1,
    "name": "ops-slack",
    "kind": "slack",
    "target": "https://hooks.slack.com/…XXXX",
    "kinds": [],
    "enabled": True,
    "group_minutes": 10,
    "quiet": "22:00-07:00",
    "quiet_timezone": "Europe/Paris",
    "created_at": "2026-05-01T07:00:00Z",
    "unreadable": None,
}
CHANNEL_EDIT = {"target": "https://hooks.slack.com/services/T0/B0/YYYY", "kinds": ["dead_letter"], "enabled": False}
EDITED_CHANNEL = {**CHANNEL, "target": "https://hooks.slack.com/…YYYY", "kinds": ["dead_letter"], "enabled": False}
CHANNEL_CREATE = {
    "name": "ops-hook",
    "kind": "webhook",
    "target": "https://hooks.example.com/cronwell",
    "kinds": ["dead_letter", "overdue"],
    "group_minutes": 10,
}
CHANNEL_CREATED = {
    **CHANNEL,
    "name": "ops-hook",
    "kind": "webhook",
    "target": "https://hooks.example.com/…well",
    "kinds": ["dead_letter", "overdue"],
    "quiet": None,
    "quiet_timezone": "UTC",
    "secret": "7cQx3XbL0x8m2VJt9sGz1aY4nWqPe6Rk5uHdTfBoC0E",
}
TEST_DELIVERY = {
    "id": 88,
    "channel_id": 3,
    "alert_id": None,
    "kind": "test",
    "grouped": 1,
    "status": "delivered",
    "attempts": 1,
    "response_status": 200,
    "last_error": None,
    "next_attempt_at": NOW,
    "created_at": NOW,
    "delivered_at": NOW,
}
WORKER = {
    "id": "worker-sched-2-4242",
    "host": "sched-2",
    "pid": 4242,
    "state": "running",
    "status": "alive",
    "busy": 1,
    "idle": 3,
    "slots": 4,
    "queues": ["default", "reports"],
    "started_at": "2026-05-31T22:00:00Z",
    "last_seen": "2026-06-01T01:59:58Z",
    "age_seconds": 2.1,
    "pending_command": None,
    "executions": [
        {"id": 346, "job_id": 12, "job_name": "nightly report", "attempt": 1, "started_at": "2026-06-01T01:59:40Z"}
    ],
    "lost": [],
}
WORKER_STOP = {"now": False}
EVENT = {
    "id": 88120,
    "kind": "lease_recovered",
    "created_at": "2026-06-01T01:58:31Z",
    "actor": "system",
    "job_id": 12,
    "execution_id": 346,
    "worker_id": "worker-sched-2-4242",
    "payload": {"worker_id": "worker-sched-2-4242", "from_status": "running", "to_status": "retry_scheduled"},
    "explanation": explain_kind("lease_recovered"),
}
DRAINING_WORKER = {**WORKER, "pending_command": "drain"}  # until the worker takes the command
AUDIT_EVENT = {
    "id": 9120,
    "created_at": EARLIER,
    "actor": "api:alice",
    "source": "api",
    "object_kind": "job",
    "object_id": "12",
    "object_label": "nightly report",
    "action": "updated",
    "changes": {"max_attempts": {"before": 3, "after": 5}},
    "address": "203.0.113.7",
    "job_id": 12,
    "project_id": 1,
    "organization_id": 1,
}


def page(item: dict, path: str) -> dict:
    """A page of one item with the link to the next page."""
    return {"items": [item], "next": f"{path}?limit=1&cursor={item['id']}"}


# Jobs as code: a job file applied over the API, its plan, and the file's JSON Schema (abridged).
APPLY = {
    "project": "default/default",
    "queues": [{"name": "reports", "concurrency_limit": 2}],
    "jobs": [
        {
            "name": "nightly-report",
            "task": "generate_report",
            "schedule_type": "cron",
            "schedule": {"expression": "30 1 * * *"},
            "timezone": "Europe/Paris",
            "queue": "reports",
            "max_attempts": 5,
        }
    ],
    "dry_run": True,
    "prune": False,
    "source": "deploy:web",
}
PLAN = {
    "project": "default/default",
    "dry_run": True,
    "prune": False,
    "changed": True,
    "created": [],
    "updated": [
        {
            "name": "nightly-report",
            "id": 12,
            "source": "deploy:web",
            "changes": {"max_attempts": {"before": 3, "after": 5}},
        }
    ],
    "unchanged": [{"name": "cleanup", "id": 4}],
    "deleted": [],
    "adopted": [],
    "queues": {"created": [], "updated": [], "unchanged": ["reports"]},
}
JOB_FILE_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Cronwell job file",
    "description": "The jobs (and queues) of one project; apply with `flask job apply FILE`.",
    "type": "object",
    "additionalProperties": False,
    "required": ["jobs"],
    "properties": {
        "project": {"type": "string", "pattern": "^[^/\\s]+/[^/\\s]+$"},
        "queues": {"type": "array", "items": {"type": "object", "required": ["name"]}},
        "jobs": {
            "type": "array",
            "items": {"type": "object", "required": ["name", "task", "schedule_type", "schedule"]},
        },
    },
}

TASK = {
    "name": "nightly_export",
    "description": "Export yesterday's orders to the partner.",
    "module": "acme_tasks.export",
    "builtin": False,
    "async": False,
    "env": [{"name": "PARTNER_TOKEN", "set": True}],
    "schema": {
        "type": "object",
        "properties": {"days": {"type": "integer", "minimum": 1, "default": 1}},
        "additionalProperties": False,
    },
    "example": {"days": 1},
    "version": "1.4.0",
}


# Workflow runs: a diamond (export -> two reports -> mail) halfway through, and one resumed.
def _step(
    name: str, task: str, after: list[str], status: str, execution_id: int | None, depth: int, explain: str
) -> dict:
    done = status == "succeeded"
    return {
        "name": name,
        "task": task,
        "after": after,
        "status": status,
        "execution_id": execution_id,
        "kept_from_run": None,
        "attempts": 1 if execution_id else 0,
        "started_at": "2026-06-01T02:00:01Z" if execution_id else None,
        "finished_at": "2026-06-01T02:00:04Z" if done else None,
        "duration_ms": 3000 if done else None,
        "result": {"rows": 1200} if done else None,
        "depth": depth,
        "explain": explain,
    }


WORKFLOW_RUN = {
    "id": 91,
    "job_id": 12,
    "job": "nightly reports",
    "status": "running",
    "trigger": "schedule",
    "scheduled_for": "2026-06-01T02:00:00Z",
    "started_at": "2026-06-01T02:00:00Z",
    "finished_at": None,
    "cancel_requested_by": None,
    "retry_of": None,
    "retry_from": None,
    "error": "",
    "counts": {"succeeded": 1, "running": 1, "pending": 1, "waiting": 1},
    "steps": [
        _step("export", "http_request", [], "succeeded", 92, 0, "succeeded after 1 attempt"),
        _step("report-a", "report", ["export"], "running", 93, 1, "running, attempt 1 of 3"),
        _step(
            "report-b", "report", ["export"], "pending", 94, 1, "queued in default, waiting for a worker (execution 94)"
        ),
        _step("mail", "send_mail", ["report-a", "report-b"], "waiting", None, 2, "waiting for `report-a`, `report-b`"),
    ],
}
WORKFLOW_RUN_SUMMARY = {
    "id": 91,
    "job_id": 12,
    "status": "running",
    "trigger": "schedule",
    "scheduled_for": "2026-06-01T02:00:00Z",
    "started_at": "2026-06-01T02:00:00Z",
    "finished_at": None,
    "steps": 4,
    "started_steps": 3,
    "upstream_failed": 0,
    "retry_of": None,
}
WORKFLOW_RETRY = {"from": "report-b"}
WORKFLOW_RETRIED = {**WORKFLOW_RUN, "id": 97, "trigger": "retry", "retry_of": 91, "retry_from": "report-b"}
WORKFLOW_CANCEL = {"reason": "the export was wrong"}
WORKFLOW_CANCELLED = {
    **WORKFLOW_RUN,
    "status": "cancelled",
    "finished_at": "2026-06-01T02:01:00Z",
    "cancel_requested_by": "api:alice",
}
