"""Settings of CPython's cyclic garbage collector for the controller process.

Contract: `tune()` (once, when the process starts, before the caches load) raises the
allocation threshold of the youngest generation to `YOUNG_THRESHOLD` and spaces the older
collections out; `freeze_loaded()` (once, when the start-up has loaded the caches, rebuilt the
IPAM and run its gc) moves every object the collector then tracks into the permanent
generation, which later collections do not walk. Neither changes what is freed
by reference counting, which is nearly all of the controller's garbage: a frozen object whose
last reference goes is freed as any other.

Why: the process holds a large, long-lived heap (every pod, node and subnet of the informer
caches, the NB replica: about 790,000 objects the collector tracks at 20,000 pods) and
allocates far more than it leaves in reference cycles. With CPython's default threshold (700)
the start-up spends about a third of its CPU in collections walking objects that stay alive
(an NB sync of 20,000 ports: 1.35 s of CPU with the defaults, 0.74 s with these), and every
full collection afterwards walks the whole heap again.

Only `main()` applies them: tests run many controllers in one interpreter, whose garbage a
freeze would keep.
"""

from __future__ import annotations

import gc
import logging

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


def freeze_loaded() -> int:
    """Freeze every object now tracked by the collector; returns how many.

    No collection first: at that point the young generations hold no cyclic garbage worth
    walking them for (at 20,000 pods a collection of both found none and took 0.13 s); what
    might be there stays allocated for the life of the process.
    """
    gc.freeze()
    frozen = gc.get_freeze_count()
    LOG.info("start-up heap frozen: %d objects left out of later garbage collections", frozen)
    return frozen
