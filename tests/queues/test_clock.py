"""FakeClock / RealClock: the waiting primitive the queue loops rely on."""

from __future__ import annotations

import threading

import pytest

from controller.queues.clock import RealClock, join_clock_loop, start_clock_loop
from controller.testing.clock import ClockSettleTimeout, FakeClock
from controller.testing.wait import wait_for


class _Loop:
    """A minimal clock-driven loop: records the clock time of every wake-up until stopped."""

    def __init__(self, clock: FakeClock | RealClock, period: float | None) -> None:
        self.clock = clock
        self.period = period
        self.cond = threading.Condition()
        self.stopped = False
        self.wakes: list[float] = []
        self.thread = start_clock_loop("test-loop", self._run, self.cond)

    def _run(self) -> None:
        deadline = None if self.period is None else self.clock.now() + self.period
        while True:
            self.clock.wait(self.cond, deadline)
            if self.stopped:
                return
            now = self.clock.now()
            self.wakes.append(now)
            if deadline is not None:
                while deadline <= now:
                    deadline += self.period or 0

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.clock.notify(self.cond)
        join_clock_loop(self.thread)


def test_fake_clock_moves_only_on_step() -> None:
    clock = FakeClock(start=5.0)
    assert clock.now() == 5.0
    clock.step(0.25)
    assert clock.now() == 5.25
    with pytest.raises(ValueError, match="negative"):
        clock.step(-1)


def test_step_wakes_due_waiter_and_settles_before_returning() -> None:
    clock = FakeClock()
    loop = _Loop(clock, period=1.0)
    assert clock.has_waiters()
    clock.step(0.5)
    assert loop.wakes == []  # not due yet
    clock.step(0.5)
    assert loop.wakes == [1.0]  # settled: the loop already ran when step() returned
    loop.stop()
    assert not loop.thread.is_alive()
    assert not clock.has_waiters()


def test_ticker_fires_at_most_once_per_step() -> None:
    clock = FakeClock()
    loop = _Loop(clock, period=0.5)
    clock.step(10.0)
    assert loop.wakes == [10.0]
    clock.step(0.4)
    assert loop.wakes == [10.0]
    clock.step(0.1)
    assert loop.wakes == [10.0, 10.5]
    loop.stop()


def test_waiter_without_deadline_is_not_a_timer() -> None:
    clock = FakeClock()
    loop = _Loop(clock, period=None)
    assert clock.waiter_count() == 1
    assert not clock.has_waiters()
    clock.step(100)
    assert loop.wakes == []
    with loop.cond:
        clock.notify(loop.cond)
    clock.settle()
    assert loop.wakes == [100.0]
    loop.stop()


def test_settle_gives_up_on_a_woken_thread_that_never_waits_again() -> None:
    clock = FakeClock(settle_timeout=0.2)
    cond = threading.Condition()
    release = threading.Event()

    def body() -> None:
        clock.wait(cond, clock.now() + 1)
        release.wait(10)  # misbehaving loop: blocks elsewhere instead of waiting on the clock

    thread = start_clock_loop("stuck-loop", body, cond)
    with pytest.raises(ClockSettleTimeout, match="stuck-loop"):
        clock.step(1)
    release.set()
    thread.join(5)
    clock.settle()  # the thread exited: nothing left to wait for


def test_real_clock_wait_returns_at_deadline_and_on_notify() -> None:
    clock = RealClock()
    cond = threading.Condition()
    start = clock.now()
    with cond:
        clock.wait(cond, start + 0.01)
    assert clock.now() - start >= 0.009
    with cond:
        clock.wait(cond, start - 1)  # past deadline: returns at once
    loop = _Loop(clock, period=None)
    with loop.cond:
        clock.notify(loop.cond)
    loop.stop()
    assert not loop.thread.is_alive()


def _sleeper(
    clock: FakeClock, seconds: float, stop: threading.Event
) -> tuple[threading.Thread, list[bool]]:
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(clock.sleep(seconds, stop)), daemon=True)
    thread.start()
    return thread, result


def test_fake_sleep_returns_when_stepped_past_its_deadline_and_records_it() -> None:
    clock = FakeClock()
    stop = threading.Event()
    thread, result = _sleeper(clock, 2.0, stop)
    wait_for(lambda: clock.waiters() == 1, message="sleeper parked")
    clock.step(1.0)
    assert clock.waiters() == 1 and thread.is_alive()
    clock.step(1.0)  # does not settle on sleepers: they go on to block elsewhere
    thread.join(5)
    assert result == [False] and clock.waits == [2.0] and clock.waiters() == 0


def test_fake_sleep_returns_early_on_stop_while_a_queue_loop_settles() -> None:
    clock = FakeClock()
    loop = _Loop(clock, period=1.0)
    stop = threading.Event()
    thread, result = _sleeper(clock, 60.0, stop)
    wait_for(lambda: clock.waiters() == 1, message="sleeper parked")
    clock.step(1.0)
    assert loop.wakes == [1.0]  # the condition waiter settled, the sleeper still sleeps
    assert clock.waiters() == 1
    stop.set()
    thread.join(5)
    assert result == [True]
    loop.stop()


def test_real_clock_sleep_returns_early_on_stop() -> None:
    clock = RealClock()
    stop = threading.Event()
    assert clock.sleep(0, stop) is False
    stop.set()
    assert clock.sleep(60, stop) is True
