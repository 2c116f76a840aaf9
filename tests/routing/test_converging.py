"""`Converging`: which routing keys are queued and not yet handled, and which were queued
after a mark (the backstop's question)."""

from __future__ import annotations

from controller.routing.converging import Converging


def test_a_key_stops_converging_once_a_handle_started_after_its_last_enqueue_settles() -> None:
    c = Converging()
    c.enqueued("a")
    seen = c.handling("a")
    c.enqueued("a")  # queued again while its handler runs
    c.settled("a", seen)
    assert c.has("a")
    c.settled("a", c.handling("a"))
    assert not c.has("a") and c.keys() == set()


def test_since_names_the_keys_queued_after_the_mark_and_forgets_the_older_ones() -> None:
    c = Converging()
    c.enqueued("before")
    mark = c.mark()
    c.enqueued("after")
    assert c.since(mark) == {"after"}
    later = c.mark()
    assert c.since(later) == set()  # "after" too is older than this mark
    c.enqueued("before")
    assert c.since(later) == {"before"}


def test_an_untracked_reconciler_records_nothing() -> None:
    c = Converging(tracking=False)
    mark = c.mark()
    c.enqueued("a")
    assert not c.has("a") and c.since(mark) == set()
