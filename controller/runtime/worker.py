"""The work-queue worker loop (client-go `processNextWorkItem`, kube-ovn `processNext*WorkItem`).

`process_next_work_item(queue, handler, ...)` takes one item and applies the controller's error
policy (`controller.core.errors`):

* `get()`; `(None, True)` means the queue shut down: return False;
* the handler returns -> `forget(item)` (its backoff starts over);
* `PermanentError` -> log, `forget(item)`: retrying cannot help until the object changes (the
  handler has already emitted its Warning Event, and the object's next update re-queues it);
* `RetryableError` with a `delay` -> `add_after(item, delay)`;
* any other exception -> `add_rate_limited(item)` and log "error syncing ..., requeuing";
* `done(item)` always runs, in `finally`.

Each item logs exactly one line: "take N ms to handle <queue> <item>" (kube-ovn's line) at
INFO when it succeeded, the same line followed by the error and what happens next (requeuing,
giving up) at ERROR / WARNING when it failed. Every line carries the structured fields `queue`
and `key` (and `pod` for the pod queues), which the JSON log format prints as fields. With
`metrics` it also feeds
`ControllerMetrics.observe_pod_handler(<queue>, <result>, seconds)`, result being one of
`RESULT_SUCCESS`, `RESULT_REQUEUE`, `RESULT_DROP`.

`run_worker` loops until the queue shuts down or `stop` is set. A worker blocked in `get()` only
notices `stop` once the queue is shut down, so whoever sets `stop` shuts the queues down too
(`PodController.run_workers` starts a thread that does exactly that).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Protocol, TypeVar

from controller.apiclient.errors import KubeApiError
from controller.core.constants import (
    QUEUE_ADD_POD,
    QUEUE_DELETE_POD,
    QUEUE_UPDATE_POD,
    QUEUE_UPDATE_POD_SECURITY,
)
from controller.core.errors import ControllerError, PermanentError, RetryableError
from controller.ipam.errors import IPAMError
from controller.ovn.api import OvnError
from controller.queues.clock import REAL_CLOCK, Clock
from controller.runtime.metrics import ControllerMetrics

LOG = logging.getLogger(__name__)

RESULT_SUCCESS = "success"
RESULT_REQUEUE = "requeue"
RESULT_DROP = "drop"

T = TypeVar("T", bound=Hashable)

POD_QUEUES = frozenset(
    {QUEUE_ADD_POD, QUEUE_UPDATE_POD, QUEUE_DELETE_POD, QUEUE_UPDATE_POD_SECURITY}
)


def log_fields(name: str, item: object) -> dict[str, object]:
    """The structured fields of a worker's log lines for `item` of queue `name`."""
    fields: dict[str, object] = {"queue": name, "key": str(item)}
    if name in POD_QUEUES:
        fields["pod"] = str(item)
    return fields


class WorkQueue(Protocol[T]):
    """The part of `controller.queues.RateLimitingQueue` a worker uses."""

    def get(self) -> tuple[T | None, bool]: ...

    def done(self, item: T) -> None: ...

    def forget(self, item: T) -> None: ...

    def add_rate_limited(self, item: T) -> None: ...

    def add_after(self, item: T, seconds: float) -> None: ...


class NamedWorkQueue(WorkQueue[T], Protocol[T]):
    """A work queue with the name its workers and metrics go by."""

    @property
    def name(self) -> str | None: ...


def process_next_work_item(
    queue: WorkQueue[T],
    handler: Callable[[T], None],
    *,
    name: str,
    log: logging.Logger | logging.LoggerAdapter[logging.Logger] = LOG,
    on_error: Callable[[T, BaseException], None] | None = None,
    metrics: ControllerMetrics | None = None,
    clock: Clock = REAL_CLOCK,
    done_level: int = logging.INFO,
) -> bool:
    """Process one item; False once the queue has shut down (see the module docstring).

    A handled item is logged at `done_level` ("take N ms to handle ..."); failures always at
    WARNING or ERROR.

    `on_error(item, exc)` is called for every failure, before the item is requeued or dropped;
    an exception it raises is logged and ignored.
    """
    item, shutdown = queue.get()
    if shutdown or item is None:
        return False
    start = clock.now()
    result = RESULT_SUCCESS
    fields = log_fields(name, item)
    failure: BaseException | None = None
    try:
        log.debug("handle %s %s", name, item, extra=fields)
        handler(item)
    except PermanentError as exc:
        result, failure = RESULT_DROP, exc
        _notify(on_error, item, exc, log)
        queue.forget(item)
    except Exception as exc:
        result, failure = RESULT_REQUEUE, exc
        _notify(on_error, item, exc, log)
        delay = exc.delay if isinstance(exc, RetryableError) else None
        if delay is not None:
            queue.add_after(item, delay)
        else:
            queue.add_rate_limited(item)
    else:
        queue.forget(item)
    finally:
        queue.done(item)
        elapsed = max(clock.now() - start, 0.0)
        ms = int(elapsed * 1000)
        if failure is None:
            log.log(done_level, "take %d ms to handle %s %s", ms, name, item, extra=fields)
        elif result == RESULT_DROP:
            log.warning(
                "take %d ms to handle %s %s: %s, giving up until it changes",
                *(ms, name, item, failure),
                extra=fields,
            )
        else:
            log.error(
                "take %d ms to handle %s %s: %s, requeuing",
                *(ms, name, item, failure),
                exc_info=failure if _is_bug(failure) else None,
                extra=fields,
            )
        if metrics is not None:
            metrics.observe_pod_handler(name, result, elapsed)
    return True


def _notify(
    hook: Callable[[T, BaseException], None] | None,
    item: T,
    exc: BaseException,
    log: logging.Logger | logging.LoggerAdapter[logging.Logger],
) -> None:
    if hook is None:
        return
    try:
        hook(item, exc)
    except Exception:
        log.exception("on_error hook failed for %r", item)


_EXPECTED: tuple[type[BaseException], ...] = (
    ControllerError,
    IPAMError,
    KubeApiError,
    OvnError,
    OSError,
)


def _is_bug(exc: BaseException) -> bool:
    """A traceback is worth logging for programming errors, not for expected failures."""
    return not isinstance(exc, _EXPECTED)


def run_worker(
    queue: WorkQueue[T],
    handler: Callable[[T], None],
    *,
    name: str,
    stop: threading.Event,
    log: logging.Logger | logging.LoggerAdapter[logging.Logger] = LOG,
    on_error: Callable[[T, BaseException], None] | None = None,
    metrics: ControllerMetrics | None = None,
    clock: Clock = REAL_CLOCK,
    done_level: int = logging.INFO,
) -> None:
    """Process items until the queue shuts down or `stop` is set (checked between items)."""
    while not stop.is_set():
        try:
            more = process_next_work_item(
                queue,
                handler,
                name=name,
                log=log,
                on_error=on_error,
                metrics=metrics,
                clock=clock,
                done_level=done_level,
            )
        except Exception:
            # NOTE: kube-ovn restarts a crashed loop through wait.Until; the policy above already
            # catches handler errors, so this only guards the queue calls themselves.
            log.exception("worker of %s crashed, continuing", name)
            continue
        if not more:
            return


def start_workers(
    plan: Iterable[tuple[NamedWorkQueue[T], Callable[[T], None], int]],
    stop: threading.Event,
    *,
    metrics: ControllerMetrics | None = None,
    clock: Clock = REAL_CLOCK,
    done_level: int = logging.INFO,
) -> list[threading.Thread]:
    """Start `count` daemon `run_worker` threads per (queue, handler, count), named by queue."""
    threads = []
    for queue, handler, count in plan:
        for i in range(count):
            t = threading.Thread(
                target=run_worker,
                args=(queue, handler),
                kwargs={
                    "name": queue.name,
                    "stop": stop,
                    "metrics": metrics,
                    "clock": clock,
                    "done_level": done_level,
                },
                name=f"{queue.name}-{i}",
                daemon=True,
            )
            t.start()
            threads.append(t)
    return threads
