"""The controller process's garbage-collector settings."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from controller.runtime import pygc


@pytest.fixture
def restore_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()


@pytest.mark.usefixtures("restore_gc")
def test_tune_spaces_collections_out() -> None:
    pygc.tune()
    assert gc.get_threshold() == (pygc.YOUNG_THRESHOLD, pygc.MIDDLE_EVERY, pygc.FULL_EVERY)
    assert gc.isenabled()


@pytest.mark.usefixtures("restore_gc")
def test_frozen_objects_are_left_out_of_collections_but_freed_by_refcount() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it

    alive = [Node() for _ in range(100)]
    frozen = pygc.freeze_loaded()
    assert frozen == gc.get_freeze_count() and frozen >= 100
    ids = {id(n) for n in alive}
    assert not ids & {id(o) for o in gc.get_objects()}  # frozen: not walked
    plain = [[] for _ in range(10)]
    del plain  # acyclic garbage still goes at once
    cycles = [Node() for _ in range(10)]
    del cycles
    assert gc.collect() >= 10  # what is made after the freeze is collected as before
