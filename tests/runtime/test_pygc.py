"""The controller process's garbage-collector settings."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from controller.runtime import pygc


@pytest.fixture
def restore_gc() -> Iterator[None]:
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()
    if enabled:
        gc.enable()


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


@pytest.mark.usefixtures("restore_gc")
def test_tune_spaces_collections_out() -> None:
    pygc.tune()
    assert gc.get_threshold() == (pygc.YOUNG_THRESHOLD, pygc.MIDDLE_EVERY, pygc.FULL_EVERY)
    assert gc.isenabled()


@pytest.mark.usefixtures("restore_gc")
def test_loading_collects_nothing_then_freezes_what_it_loaded() -> None:
    with pygc.loading():
        assert not gc.isenabled()
        loaded = [Node() for _ in range(100)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= 100
    ids = {id(n) for n in loaded}
    assert not ids & {id(o) for o in gc.get_objects()}  # frozen: not walked any more
    cycles = [Node() for _ in range(10)]
    del cycles
    assert gc.collect() >= 10  # what is made after the load is collected as before


@pytest.mark.usefixtures("restore_gc")
def test_a_failed_load_freezes_nothing_and_enables_the_collector_again() -> None:
    with pytest.raises(RuntimeError), pygc.loading():
        raise RuntimeError("start-up failed")
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
