"""Work queues: a Python mirror of client-go's `util/workqueue`, one module per layer.

* `queue`: `Queue`, the fair, stingy FIFO with dirty/processing sets (add/get/done).
* `delaying_queue`: `DelayingQueue`, plus `add_after`.
* `rate_limiting_queue`: `RateLimitingQueue`, plus `add_rate_limited`/`forget`/`num_requeues`.
* `default_rate_limiters`: the rate limiters and `default_controller_rate_limiter()`.
* `metrics`: the `MetricsProvider` protocol and a no-op provider (the Prometheus one is
  `controller.runtime.queue_metrics`).
* `clock`: the injectable `Clock` of every background loop and `RealClock` (the virtual
  `FakeClock` for tests is `controller.testing.clock.FakeClock`).

The package imports no client library.

The worker idiom (kube-ovn processNextWorkItem)::

    queue = RateLimitingQueue[str](
        default_controller_rate_limiter(), name="AddOrUpdatePod", metrics_provider=provider
    )
    while True:
        key, shutdown = queue.get()
        if shutdown or key is None:
            return
        try:
            handle(key)
        except Exception:
            queue.add_rate_limited(key)
        else:
            queue.forget(key)
        finally:
            queue.done(key)
"""

from controller.queues.clock import REAL_CLOCK, Clock, RealClock, WallClock, utcnow
from controller.queues.default_rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
    default_item_based_rate_limiter,
)
from controller.queues.delaying_queue import DelayingQueue
from controller.queues.metrics import (
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    MetricsProvider,
    NoopMetricsProvider,
    SettableGaugeMetric,
)
from controller.queues.queue import Queue
from controller.queues.rate_limiting_queue import RateLimitingQueue

__all__ = [
    "REAL_CLOCK",
    "BucketRateLimiter",
    "Clock",
    "CounterMetric",
    "DelayingQueue",
    "GaugeMetric",
    "HistogramMetric",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "MetricsProvider",
    "NoopMetricsProvider",
    "Queue",
    "RateLimiter",
    "RateLimitingQueue",
    "RealClock",
    "SettableGaugeMetric",
    "WallClock",
    "WithMaxWaitRateLimiter",
    "default_controller_rate_limiter",
    "default_item_based_rate_limiter",
    "utcnow",
]
