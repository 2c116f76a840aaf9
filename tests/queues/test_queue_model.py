"""Queue against a plain reference model of client-go's util/workqueue queue.go, driven by
Hypothesis through random add/get/done/shut_down sequences (single thread, never blocking)."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from controller.queues import Queue

ITEMS = st.sampled_from("abcd")


class QueueModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.q: Queue[str] = Queue()
        self.fifo: list[str] = []
        self.dirty: set[str] = set()
        self.processing: set[str] = set()
        self.shutting_down = False

    def teardown(self) -> None:
        self.q.shut_down()

    @rule(item=ITEMS)
    def add(self, item: str) -> None:
        self.q.add(item)
        if self.shutting_down or item in self.dirty:
            return
        self.dirty.add(item)
        if item not in self.processing:
            self.fifo.append(item)

    @precondition(lambda self: self.fifo or self.shutting_down)
    @rule()
    def get(self) -> None:
        got = self.q.get()
        if not self.fifo:
            assert got == (None, True)
            return
        item = self.fifo.pop(0)
        assert got == (item, False)
        self.processing.add(item)
        self.dirty.discard(item)

    @precondition(lambda self: self.processing)
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        item = data.draw(st.sampled_from(sorted(self.processing)))
        self.q.done(item)
        self.processing.discard(item)
        if item in self.dirty:
            self.fifo.append(item)

    @rule()
    def shut_down(self) -> None:
        self.q.shut_down()
        self.shutting_down = True

    @invariant()
    def same_length_and_flags(self) -> None:
        assert len(self.q) == len(self.fifo)
        assert self.q.shutting_down() == self.shutting_down
        # client-go's invariant: every queued item is dirty and not processing.
        assert all(i in self.dirty and i not in self.processing for i in self.fifo)


QueueModel.TestCase.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
TestQueueModel = QueueModel.TestCase
