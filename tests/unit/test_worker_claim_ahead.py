"""How far the worker claims ahead, and the claim sizes its turn statements come in (ADR 0010)."""

from app.services.engine.worker import AHEAD_MAX_PER_SLOT, AHEAD_TASK_SECONDS, Worker, _claim_size


def _worker(slots: int, task_seconds: float | None) -> Worker:
    worker = object.__new__(Worker)  # only the sizing state; no app, no executor
    worker.slots = slots
    worker._task_seconds = task_seconds
    return worker


def test_nothing_is_claimed_ahead_before_a_task_finished_or_while_tasks_are_long():
    assert _worker(4, None)._ahead() == 0
    assert _worker(4, AHEAD_TASK_SECONDS)._ahead() == 0
    assert _worker(4, 3.0)._ahead() == 0


def test_short_tasks_get_a_slots_worth_and_very_short_ones_a_bounded_batch():
    assert _worker(4, 0.2)._ahead() == 4  # the original rule is the floor
    assert _worker(2, 0.01)._ahead() == 10  # what 2 slots run in 50 ms
    assert _worker(2, 0.0002)._ahead() == 2 * AHEAD_MAX_PER_SLOT  # capped per slot
    assert _worker(8, 0.0)._ahead() == 8 * AHEAD_MAX_PER_SLOT


def test_claim_sizes_round_down_to_a_few_statement_texts():
    assert [_claim_size(n) for n in (-1, 0, 1, 4, 5, 6, 7, 11, 12, 13, 33, 47, 48, 130)] == [
        -1,
        0,
        1,
        4,
        4,
        6,
        6,
        8,
        12,
        12,
        32,
        32,
        48,
        128,
    ]
    assert len({_claim_size(n) for n in range(1, 2 * 17 * 8 + 1)}) == 16  # not 272


def test_worker_stats_keep_only_the_most_recent_fork_times():
    # A worker runs for months: its summary must not grow with every execution it has run.
    from app.services.engine.worker import FORK_TIMES_KEPT, WorkerStats

    stats = WorkerStats()
    for ms in range(FORK_TIMES_KEPT + 5):
        stats.fork_ms.append(float(ms))
    assert len(stats.fork_ms) == FORK_TIMES_KEPT
    assert stats.fork_ms[0] == 5.0 and stats.fork_ms[-1] == float(FORK_TIMES_KEPT + 4)
