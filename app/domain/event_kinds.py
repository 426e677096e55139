"""What each kind of event in the event log means, in one sentence an operator can act on.

Pure data: the events page shows it beside the list, `flask event list --kind` and the API's
`kind` filter accept these names. A kind written by code but missing here still lists (with no
explanation); `tests/unit/test_event_kinds.py` fails when one is missing. Also the rule for the
worker an event names (`worker_named`), which the writers store beside the payload.
"""

from __future__ import annotations

from typing import Any

WORKER_ID_MAX = 200  # a worker id is at most this long (heartbeats.id, events.worker_id)

EVENT_KINDS: dict[str, str] = {
    # The scheduler and the workers: what happened to scheduled work, and why.
    "misfire_coalesced": "The scheduler reached a job late (downtime, a long pause) and folded the missed occurrences into one run, as the coalesce misfire policy says.",
    "misfire_skipped": "Occurrences more than the misfire grace late were recorded as missed (misfire policy skip); the event counts those without a row of their own.",
    "overlap_skipped": "An occurrence was recorded as missed because an earlier run of the job was still active (overlap policy skip).",
    "worker_lost": "A worker stopped heartbeating without saying it stopped (killed, hung, cut off); lease recovery settles the runs it held.",
    "worker_reloaded": "A worker re-imported its task modules and restarted its fork server (flask worker reload, SIGHUP or the workers page) after its running tasks finished; the event lists the tasks added, removed and changed.",
    "worker_reload_failed": "A worker's reload could not import the task modules or start a fork server: it goes on with the code it had, and the event gives the error.",
    "lease_recovered": "A worker stopped renewing the lease of a run it held (killed, hung, cut off): the run was settled, retried or dead-lettered.",
    "retry_scheduled": "A try failed or timed out and the run waits for its backoff before the next attempt.",
    "dead_lettered": "A run used up its attempts: a dead letter (and an alert, per the job's alert mode) flags it.",
    "execution_expired": "Queued work was not started within its queued TTL and ended expired instead of running late.",
    "execution_cancelled": "A run was cancelled (by an operator, or because its job was disabled).",
    "execution_cancel_requested": "An operator asked for a running task to be stopped; its worker kills it within about a second.",
    "execution_retried": "An operator retried a finished run: a new execution was created for it.",
    "callback_created": "A run ended and its on_success / on_failure callback was queued as its own execution.",
    "run_limit_reached": "A job reached max_runs or end_at: the scheduler creates nothing more for it.",
    "history_pruned": "Retention removed old finished executions (and events); the counts are per job.",
    "audit_pruned": "Audit events older than AUDIT_RETENTION_DAYS were removed.",
    # What operators changed.
    "job_created": "A job was created (enabled or disabled).",
    "job_updated": "A job's fields were changed; the event names them.",
    "job_enabled": "A job was enabled: its schedule resumes from now.",
    "job_disabled": "A job was disabled (by an operator, a run limit or auto-pause): its queued runs were cancelled.",
    "job_deleted": "A job was deleted.",
    "job_triggered": "A run was started by hand (run now or run later).",
    "job_backfilled": "Past occurrences of a job were run as a backfill.",
    "deduplicated": "A trigger or an occurrence of a unique job found a run of its key waiting or running and returned that run instead of adding one.",
    "one_off_runs_created": "Runs of a task without a job (flask task run, POST /api/v1/runs) were created.",
    "jobs_applied": "A job file was applied: jobs created, updated or pruned.",
    "batch_submitted": "A batch of runs was submitted.",
    "batch_completed": "Every run of a batch ended.",
    "workflow_started": "A workflow job's run started: its first steps were queued (a retry names the run it resumes).",
    "workflow_finished": "Every step of a workflow run ended; the status is the run's, the steps marked upstream_failed are named.",
    "workflow_cancelled": "An operator cancelled a workflow run: its waiting steps will not run, its running ones are stopped.",
    "workflow_retried": "An operator resumed a failed workflow run as a new run, keeping the steps that succeeded.",
    "batch_cancelled": "A batch was cancelled with its queued runs.",
    "queue_created": "A queue was created.",
    "queue_updated": "A queue's settings were changed.",
    "queue_deleted": "A queue was deleted.",
    "queue_paused": "A queue was paused: no new starts, running work finishes.",
    "queue_resumed": "A paused queue was resumed.",
    "alerts_resolved": "Alerts were resolved.",
    "alerts_muted": "A job's alerts were muted.",
    "alerts_unmuted": "A job's alerts were unmuted.",
    "alert_channel_created": "An alert channel was added.",
    "alert_channel_updated": "An alert channel's name, target, alert kinds or secret was changed.",
    "alert_channel_deleted": "An alert channel was removed.",
    "alert_channel_tested": "A test message was sent to an alert channel.",
    "alert_channels_resealed": "Every channel's URL and secret was encrypted again with the first CHANNEL_SECRET_KEY.",
    "organization_created": "An organization was created.",
    "organization_renamed": "An organization was renamed (its id, and so every reference, stays).",
    "organization_deleted": "An organization was deleted with everything in it.",
    "project_created": "A project was created.",
    "project_renamed": "A project was renamed (its id stays).",
    "project_deleted": "A project was deleted with everything in it.",
    "user_created": "A user account was created.",
    "user_registered": "A user registered (open registration or an invitation).",
    "user_enabled": "A user account was enabled again.",
    "user_disabled": "A user account was disabled: no sign-in, sessions ended.",
    "user_role_changed": "A member's role was changed.",
    "user_password_reset": "An admin reset a user's password.",
    "user_time_zone_changed": "A user chose another display time zone.",
    "password_changed": "A user changed their own password.",
    "invitation_created": "An admin invited someone to register.",
    "api_token_created": "An API token was created.",
    "api_token_revoked": "An API token was revoked.",
    "api_signed_out": "An API session was signed out (its tokens revoked).",
}


def explain_kind(kind: str) -> str:
    """The sentence for `kind`, or an empty string for a kind this list does not know."""
    return EVENT_KINDS.get(kind, "")


def worker_named(payload: dict[str, Any] | None) -> str | None:
    """The worker an event's payload names (its `worker_id`: lease recovery, cancels, a worker's
    own events), or None."""
    worker = (payload or {}).get("worker_id")
    return str(worker)[:WORKER_ID_MAX] if worker else None
