"""How far the worker claims ahead, and the claim sizes its turn statements come in (ADR 0010)."""

from app.services.engine.run_book import AHEAD_MAX_PER_SLOT, AHEAD_TASK_SECONDS, RunBook, claim_size


def _book(slots: int, task_seconds: float | None) -> RunBook:
    book = RunBook(slots)  # the run book alone: no app, no executor
    book.task_seconds = task_seconds
    return book


def test_nothing_is_claimed_ahead_before_a_task_finished_or_while_tasks_are_long():
    assert _book(4, None).ahead() == 0
    assert _book(4, AHEAD_TASK_SECONDS).ahead() == 0
    assert _book(4, 3.0).ahead() == 0


def test_short_tasks_get_a_slots_worth_and_very_short_ones_a_bounded_batch():
    assert _book(4, 0.2).ahead() == 4  # the original rule is the floor
    assert _book(2, 0.01).ahead() == 10  # what 2 slots run in 50 ms
    assert _book(2, 0.0002).ahead() == 2 * AHEAD_MAX_PER_SLOT  # capped per slot
    assert _book(8, 0.0).ahead() == 8 * AHEAD_MAX_PER_SLOT


def test_claim_sizes_round_down_to_a_few_statement_texts():
    assert [claim_size(n) for n in (-1, 0, 1, 4, 5, 6, 7, 11, 12, 13, 33, 47, 48, 130)] == [
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
    assert len({claim_size(n) for n in range(1, 2 * 17 * 8 + 1)}) == 16  # not 272


def test_worker_stats_keep_only_the_most_recent_fork_times():
    # A worker runs for months: its summary must not grow with every execution it has run.
    from app.services.engine.recorder import FORK_TIMES_KEPT, WorkerStats

    stats = WorkerStats()
    for ms in range(FORK_TIMES_KEPT + 5):
        stats.fork_ms.append(float(ms))
    assert len(stats.fork_ms) == FORK_TIMES_KEPT
    assert stats.fork_ms[0] == 5.0 and stats.fork_ms[-1] == float(FORK_TIMES_KEPT + 4)
