"""Rate limiter math (client-go util/workqueue/default_rate_limiters.go)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controller.queues import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
    default_item_based_rate_limiter,
)
from controller.testing.clock import FakeClock


def test_exponential_doubles_from_base_and_caps_at_max() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    delays = [limiter.when("a") for _ in range(21)]
    # The failure count *before* the increment is the exponent: the first delay is the base.
    expected = [0.005 * 2**k for k in range(18)] + [1000.0] * 3
    assert delays == expected
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[17] == 655.36
    assert limiter.num_requeues("a") == 21
    assert limiter.num_requeues("b") == 0


def test_exponential_is_per_item_and_forget_resets() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.001, 1.0)
    assert [limiter.when("a") for _ in range(3)] == [0.001, 0.002, 0.004]
    assert limiter.when("b") == 0.001
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.001
    limiter.forget("never-seen")


def test_exponential_survives_thousands_of_failures() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    for _ in range(5000):
        delay = limiter.when("a")
    assert delay == 1000.0
    assert limiter.num_requeues("a") == 5000
    # A huge max is still returned (not inf, not an OverflowError) once Go's int64 ns overflows.
    huge = ItemExponentialFailureRateLimiter(1.0, 1e300)
    delays = [huge.when("a") for _ in range(2000)]
    assert delays[33] == 2.0**33  # 2**33 s is still below 2**63 ns
    assert delays[34] == 1e300  # 2**34 s overflows int64 nanoseconds: Go returns max
    assert delays[-1] == 1e300


def test_exponential_with_zero_base() -> None:
    limiter = ItemExponentialFailureRateLimiter(0, 10)
    assert [limiter.when("a") for _ in range(100)] == [0.0] * 100


def test_default_item_based_limiter() -> None:
    limiter = default_item_based_rate_limiter()
    assert [limiter.when("a") for _ in range(3)] == [0.001, 0.002, 0.004]


def test_fast_slow_switches_after_max_fast_attempts() -> None:
    limiter = ItemFastSlowRateLimiter(0.005, 10.0, 3)
    assert [limiter.when("a") for _ in range(5)] == [0.005, 0.005, 0.005, 10.0, 10.0]
    assert limiter.when("b") == 0.005
    assert limiter.num_requeues("a") == 5
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.005


def test_bucket_burst_then_qps_spacing() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(10, 100, clock=clock)
    # Starts full: the burst is free, whatever the item.
    assert [limiter.when(f"item-{i}") for i in range(100)] == [0.0] * 100
    # Then every reservation queues behind the previous ones, 1/qps apart.
    delays = [limiter.when("x") for _ in range(3)]
    assert delays == pytest.approx([0.1, 0.2, 0.3])
    assert limiter.num_requeues("x") == 0
    limiter.forget("x")  # no effect on the bucket
    assert limiter.when("x") == pytest.approx(0.4)


def test_bucket_refills_with_clock_time_up_to_burst() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(10, 5, clock=clock)
    assert [limiter.when("a") for _ in range(5)] == [0.0] * 5
    assert limiter.when("a") == pytest.approx(0.1)  # debt of one token
    clock.step(0.6)  # pays the debt and refills 5 tokens
    assert [limiter.when("a") for _ in range(5)] == [0.0] * 5
    assert limiter.when("a") == pytest.approx(0.1)
    clock.step(3600)  # refill is capped at the burst
    assert [limiter.when("a") for _ in range(5)] == [0.0] * 5
    assert limiter.when("a") == pytest.approx(0.1)


def test_max_of_calls_every_limiter_and_returns_the_largest() -> None:
    clock = FakeClock()
    exponential = ItemExponentialFailureRateLimiter(0.001, 1.0)
    bucket = BucketRateLimiter(1, 2, clock=clock)
    limiter = MaxOfRateLimiter(exponential, bucket)
    assert limiter.when("a") == 0.001  # exponential dominates, bucket token still consumed
    assert limiter.when("a") == 0.002
    assert limiter.when("b") == pytest.approx(1.0)  # bucket now empty: it dominates
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert exponential.num_requeues("a") == 0
    assert limiter.num_requeues("a") == 0
    assert MaxOfRateLimiter().when("a") == 0.0


def test_max_of_num_requeues_is_the_largest() -> None:
    fast_slow = ItemFastSlowRateLimiter(0.001, 1, 1)
    exponential = ItemExponentialFailureRateLimiter(0.001, 1)
    limiter = MaxOfRateLimiter(fast_slow, exponential)
    limiter.when("a")
    fast_slow.when("a")
    assert limiter.num_requeues("a") == 2


def test_with_max_wait_caps_the_delay() -> None:
    limiter = WithMaxWaitRateLimiter(ItemExponentialFailureRateLimiter(1, 1000), 3)
    assert [limiter.when("a") for _ in range(4)] == [1, 2, 3, 3]
    assert limiter.num_requeues("a") == 4
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


def test_default_controller_rate_limiter() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock=clock)
    # 100 distinct failing items: within the burst, each gets the 5 ms exponential base.
    assert [limiter.when(f"pod-{i}") for i in range(100)] == [0.005] * 100
    # The 101st failure in the same instant waits for the bucket: 100 ms at 10 qps.
    assert limiter.when("pod-100") == pytest.approx(0.1)
    # One item failing over and over ends at the 1000 s cap.
    for _ in range(30):
        delay = limiter.when("stuck")
    assert delay == 1000.0
    assert limiter.num_requeues("stuck") == 30
    limiter.forget("stuck")
    assert limiter.num_requeues("stuck") == 0


@pytest.mark.parametrize(
    ("build", "error"),
    # the TypeError cases pass an argument of the wrong type on purpose (hence their ignores)
    [
        (lambda: ItemExponentialFailureRateLimiter(-1, 1), ValueError),
        (lambda: ItemExponentialFailureRateLimiter(0.1, float("inf")), ValueError),
        (lambda: ItemExponentialFailureRateLimiter("5ms", 1), TypeError),  # type: ignore[arg-type]
        (lambda: ItemFastSlowRateLimiter(0.1, 1, -1), ValueError),
        (lambda: ItemFastSlowRateLimiter(0.1, 1, 2.5), TypeError),  # type: ignore[arg-type]
        (lambda: BucketRateLimiter(0, 10), ValueError),
        (lambda: BucketRateLimiter(10, 0), ValueError),
        (lambda: BucketRateLimiter(10, 1.5), TypeError),  # type: ignore[arg-type]
        (lambda: MaxOfRateLimiter(object()), TypeError),  # type: ignore[arg-type]
        (lambda: WithMaxWaitRateLimiter(default_item_based_rate_limiter(), -1), ValueError),
    ],
)
def test_bad_parameters_are_clear_errors(
    build: Callable[[], object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        build()
