"""Which waiting executions a worker may start: the rule both turns read their candidates by
(app/sql/turn.py on SQLite, app/sql/turn_postgresql.py), and the order they are started in."""

from __future__ import annotations

from app.domain.states import CLAIMABLE, IN_FLIGHT, QUEUED_CANCELLABLE
from app.sql.statuses import sql_statuses

# A candidate is claimable when it is due and in the worker's queues, and - for exclusive jobs
# (overlap policy skip/queue) - no run of its job is in flight and no older due row of its job
# is waiting. The second condition keeps queue-policy jobs FIFO even while another worker
# holds the older row locked (SKIP LOCKED would otherwise hand out the next one). Its queue
# (`q`, joined by the caller) must not be paused and must have a free slot as far as the
# statement's snapshot knows; the exact slot count is settled under the queue row's lock
# (PostgreSQL's turn) or the write lock (SQLite). Plain SQL valid on both databases;
# `{queue_filter}` and `{task_filter}` are the dialect's own (`task_filter`: a worker claims only
# runs of the tasks it advertises, the job joined as `j` by TASK_JOIN).
CANDIDATE_WHERE = f"""
    e.status IN ({sql_statuses(CLAIMABLE)})
    AND e.available_at <= :now
    {{queue_filter}}
    {{task_filter}}
    AND q.id = e.queue_id AND NOT q.paused
    AND (q.concurrency_limit IS NULL OR q.slots_taken < q.concurrency_limit)
    AND (NOT e.exclusive OR (
        NOT EXISTS (SELECT 1 FROM executions AS busy
                    WHERE busy.job_id = e.job_id AND busy.exclusive
                      AND busy.status IN ({sql_statuses(IN_FLIGHT)}))
        AND NOT EXISTS (SELECT 1 FROM executions AS older
                        WHERE older.job_id = e.job_id AND older.exclusive
                          AND older.status IN ({sql_statuses(CLAIMABLE)})
                          AND older.available_at <= :now
                          AND (older.available_at < e.available_at
                               OR (older.available_at = e.available_at AND older.id < e.id)))))
"""
CANDIDATE_ORDER = "e.priority, e.available_at, e.id"

# The task a run forks: a callback's own task, a one-off run's or a workflow step's own
# `executions.task`, otherwise its job's (`j`, LEFT JOINed: a one-off run has no job).
TASK_TO_RUN = "COALESCE(e.callback_task, e.task, j.task)"
TASK_JOIN = "LEFT JOIN jobs AS j ON j.id = e.job_id"


def task_filter(tasks_in: str) -> str:
    """The candidates' task condition: the run's task is one of the worker's (`tasks_in`, the
    dialect's membership test of a list parameter, e.g. `= ANY(CAST(:tasks AS text[]))`)."""
    # A workflow step carries its own task (`e.task`); the workflow's run itself has no queue,
    # so it is never a candidate at all.
    return f"AND {TASK_TO_RUN} {tasks_in}"


# The turns cancel candidates of disabled jobs instead of starting them: that must be legal.
assert CLAIMABLE <= QUEUED_CANCELLABLE, "every claimable status must be cancellable"
