"""wait_for: the first truthy value, a WaitTimeout past the deadline, tolerated errors retried."""

from __future__ import annotations

import itertools

import pytest

from controller.testing.wait import WaitTimeout, wait_for


def test_returns_the_first_truthy_value() -> None:
    values = iter([None, 0, "", "ready"])
    assert wait_for(lambda: next(values), timeout=5) == "ready"


def test_times_out_with_the_message() -> None:
    with pytest.raises(WaitTimeout, match="the moon"):
        wait_for(lambda: False, timeout=0.01, message="the moon")


def test_wait_timeout_is_an_assertion_error() -> None:
    assert issubclass(WaitTimeout, AssertionError)


def test_tolerated_errors_count_as_not_yet_and_are_named_on_timeout() -> None:
    calls = itertools.count()

    def flaky() -> int:
        n = next(calls)
        if n < 3:
            raise KeyError(f"missing {n}")
        return n

    assert wait_for(flaky, timeout=5, tolerate=(KeyError,)) == 3

    def missing() -> None:
        raise KeyError("never there")

    with pytest.raises(WaitTimeout, match="never there"):
        wait_for(missing, timeout=0.01, tolerate=(KeyError,))


def test_other_errors_propagate_at_once() -> None:
    def broken() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        wait_for(broken, timeout=5, tolerate=(KeyError,))


@pytest.mark.parametrize(("timeout", "interval"), [(-1.0, 0.01), (1.0, 0.0)])
def test_bad_arguments_are_a_clear_error(timeout: float, interval: float) -> None:
    with pytest.raises(ValueError, match="timeout"):
        wait_for(lambda: True, timeout=timeout, interval=interval)
