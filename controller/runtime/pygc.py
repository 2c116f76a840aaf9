"""Settings of CPython's cyclic garbage collector for the controller process.

Contract:

* `tune()` (once, when the process starts) raises the allocation threshold of the youngest
  generation to `YOUNG_THRESHOLD` and spaces the older collections out.
* `loading()` is a context manager around the leader's start-up load (informer lists, IPAM
  rebuild, start-up gc): no collection runs inside it, and when it ends normally every object
  the collector then tracks is moved to the permanent generation, which later collections do
  not walk. The collector is enabled again however it ends. What the load leaves in reference
  cycles is not collected (about 300 objects at 20,000 pods: a full collection after it found
  307 and took 0.24 s) and stays allocated for the life of the process.

Neither changes what is freed by reference counting, which is nearly all of the controller's
garbage: a frozen object whose last reference goes is freed as any other.

Why: the process holds a large, long-lived heap (every pod, node and subnet of the informer
caches, the NB replica: about 790,000 objects the collector tracks at 20,000 pods) and
allocates far more than it leaves in reference cycles. Each object the start-up allocates is
walked by a young, a middle and a full collection while it stays alive: with CPython's default
threshold (700) a third of the start-up's CPU went there (an NB sync of 20,000 ports: 1.35 s
of CPU with the defaults, 0.74 s with these thresholds), and with the thresholds alone the
collections of a 20,000-pod controller's life (start-up to exit) still took 0.5 s, 0.04 s with
the start-up's load inside `loading()`.

Only `main()` applies them: tests run many controllers in one interpreter, whose garbage a
freeze would keep.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator
from contextlib import contextmanager

LOG = logging.getLogger(__name__)

# Allocations (net of deallocations) between collections of the youngest generation; each
# collection costs in proportion to the objects it walks, not to this number.
YOUNG_THRESHOLD = 50_000
# Young collections per middle one, middle ones per full one (CPython: 10 and 10; a full one
# also waits until the survivors grew by a quarter of the long-lived heap).
MIDDLE_EVERY = 20
FULL_EVERY = 100


def tune() -> None:
    """Raise the collection thresholds (see the module docstring)."""
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_EVERY, FULL_EVERY)


@contextmanager
def loading() -> Iterator[None]:
    """No collections while the block runs; its heap frozen after it (module docstring)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
        LOG.info(
            "start-up heap frozen: %d objects left out of later garbage collections",
            gc.get_freeze_count(),
        )
    finally:
        if was_enabled:
            gc.enable()
