"""The lease watchdog's rule on a fake monotonic clock: SIGTERM at E - margin, SIGKILL at
E - margin / 2, where E is the lease's end measured from the statement that granted or renewed it;
renewals push E out; a released lease is never signalled; an unknown pid falls back to stopping
every task."""

import signal
from datetime import UTC, datetime, timedelta

from app.services.engine.lease_watchdog import LeaseWatchdog, margin_for, renew_every

T0 = datetime(2030, 1, 1, tzinfo=UTC)


class Fake:
    def __init__(self) -> None:
        self.now = 100.0
        self.sent: list[tuple[int, int]] = []
        self.fallbacks = 0
        self.pids = {1: 1001, 2: 1002}

    def watchdog(self, margin: float = 2.0) -> LeaseWatchdog:
        return LeaseWatchdog(
            margin=margin,
            pid_of=self.pids.get,
            fallback=self.fallback,
            monotonic=lambda: self.now,
            kill=lambda pid, signum: self.sent.append((pid, signum)),
        )

    def fallback(self) -> None:
        self.fallbacks += 1


def test_margin_and_renewal_cadence():
    assert margin_for(120, 2.0) == 7.0  # the kill grace plus five seconds
    assert margin_for(2, 2.0) == 0.5  # a quarter of a short lease
    assert renew_every(120, 5) == 5  # with the heartbeat
    assert renew_every(2, 5) == 0.4  # five times per lease


def test_a_lease_not_renewed_is_stopped_before_it_ends():
    fake = Fake()
    dog = fake.watchdog(margin=2.0)
    # Granted by a statement stamped T0 (read at monotonic 100): lease of 10 s ends at 110.
    dog.hold(1, lease_expires_at=T0 + timedelta(seconds=10), now=T0, read_at=100.0)
    assert dog.check() == 8.0 and fake.sent == []
    fake.now = 107.99
    dog.check()
    assert fake.sent == []
    fake.now = 108.0
    assert dog.check() == 1.0
    assert fake.sent == [(1001, signal.SIGTERM)] and 1 in dog.stopped
    fake.now = 109.0
    assert dog.check() is None
    assert fake.sent == [(1001, signal.SIGTERM), (1001, signal.SIGKILL)]
    fake.now = 200.0
    dog.check()
    assert len(fake.sent) == 2  # signalled once each


def test_renewals_push_the_end_out_and_skew_does_not_matter():
    fake = Fake()
    dog = fake.watchdog(margin=2.0)
    dog.hold(1, lease_expires_at=T0 + timedelta(seconds=10), now=T0, read_at=100.0)
    fake.now = 105.0
    # A worker clock 30 s ahead of the database: only the difference crosses over.
    skewed = T0 + timedelta(seconds=35)
    dog.renewed({1: skewed + timedelta(seconds=10)}, now=skewed, read_at=105.0)
    fake.now = 112.0
    dog.check()
    assert fake.sent == []  # would have been stopped at 108 without the renewal
    assert dog.seconds_left(1) == 1.0
    fake.now = 113.0
    dog.check()
    assert fake.sent == [(1001, signal.SIGTERM)]


def test_a_shorter_renewal_never_shortens_a_lease():
    fake = Fake()
    dog = fake.watchdog()
    dog.hold(1, lease_expires_at=T0 + timedelta(seconds=100), now=T0, read_at=100.0)
    dog.renewed({1: T0 + timedelta(seconds=10)}, now=T0, read_at=100.0)
    assert dog.seconds_left(1) == 98.0


def test_released_leases_are_left_alone_and_unknown_pids_fall_back():
    fake = Fake()
    dog = fake.watchdog()
    dog.hold(1, lease_expires_at=T0 + timedelta(seconds=5), now=T0, read_at=100.0)
    dog.hold(3, lease_expires_at=T0 + timedelta(seconds=5), now=T0, read_at=100.0)  # fork not reported yet
    dog.release(1)
    assert dog.held() == {3}
    fake.now = 103.0
    dog.check()
    assert fake.sent == [] and fake.fallbacks == 1


def test_the_thread_signals_on_its_own():
    import time

    sent = []
    dog = LeaseWatchdog(margin=0.1, pid_of=lambda _: 4242, fallback=lambda: None, kill=lambda p, s: sent.append(s))
    dog.hold(1, lease_expires_at=T0 + timedelta(seconds=0.3), now=T0, read_at=time.monotonic())
    dog.start()
    try:
        deadline = time.monotonic() + 5
        while len(sent) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        dog.stop()
    assert sent == [signal.SIGTERM, signal.SIGKILL]
