"""The bench's HTTP side (pod creators, watches) and the throughput figures drawn from them."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import harness
import urllib3

from bench.e2e.children import TLS_BY_URL
from bench.e2e.model import CREATORS, DEADLINE, NODES, NS
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    ROUTED_ANNOTATION,
)
from tests.e2e.helpers import pod as pod_obj

# --- the bench's HTTP side -----------------------------------------------------------------------


class _TokenPool(urllib3.HTTPSConnectionPool):
    """An https pool whose every request carries its bearer token (a request's own headers
    replace a pool's in urllib3)."""

    def urlopen(self, method: str, url: str, *args: Any, **kw: Any) -> Any:
        kw["headers"] = {**self.headers, **(kw.get("headers") or {})}
        return super().urlopen(method, url, *args, **kw)


def connection_pool(url: str, maxsize: int = 1) -> urllib3.HTTPConnectionPool:
    if url in TLS_BY_URL:
        ca, token = TLS_BY_URL[url]
        host, port = url.removeprefix("https://").split(":")
        return _TokenPool(
            host,
            int(port),
            maxsize=maxsize,
            retries=False,
            timeout=urllib3.Timeout(connect=5, read=60),
            headers={"Authorization": f"Bearer {token}"},
            cert_reqs="CERT_REQUIRED",
            ca_certs=ca,
        )
    host, port = url.removeprefix("http://").split(":")
    return urllib3.HTTPConnectionPool(
        host,
        int(port),
        maxsize=maxsize,
        retries=False,
        timeout=urllib3.Timeout(connect=5, read=60),
        headers={"Authorization": "Bearer bench"},
    )


def _stream_lines(resp: Any) -> Iterator[bytes]:
    buf = b""
    for chunk in resp.stream(65536):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line


class PodWatch(threading.Thread):
    """Watches the bench namespace; receipt times of ADDED, allocated and routed per pod."""

    def __init__(
        self, url: str, expected: int, on_added: Callable[[str], None] | None = None
    ) -> None:
        super().__init__(name="bench-watch", daemon=True)
        self.url = url
        self.expected = expected
        self.on_added = on_added
        self.added: dict[str, float] = {}
        self.allocated: dict[str, float] = {}
        self.routed: dict[str, float] = {}
        self.done = threading.Event()
        self.opened = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            pool = connection_pool(self.url)
            listed = json.loads(pool.request("GET", f"/api/v1/namespaces/{NS}/pods?limit=1").data)
            rv = listed["metadata"]["resourceVersion"]
            resp = pool.request(
                "GET",
                f"/api/v1/namespaces/{NS}/pods?watch=true&resourceVersion={rv}",
                preload_content=False,
                timeout=urllib3.Timeout(connect=5, read=None),
            )
            self.opened.set()
            for line in _stream_lines(resp):
                self._event(json.loads(line), time.monotonic())
                if len(self.routed) >= self.expected:
                    self.done.set()
        except BaseException as exc:  # reported by the waiter, never lost in a thread
            if not self.done.is_set():
                self.error = exc
        finally:
            self.opened.set()
            self.done.set()

    def _event(self, event: dict[str, Any], now: float) -> None:
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        if event.get("type") == "ADDED" and name not in self.added:
            self.added[name] = now
            if self.on_added is not None:
                self.on_added(name)
        annotations = meta.get("annotations") or {}
        if annotations.get(ALLOCATED_ANNOTATION) == "true":
            self.allocated.setdefault(name, now)
        if annotations.get(ROUTED_ANNOTATION) == "true":
            self.routed.setdefault(name, now)

    def close(self) -> None:
        # NOTE: closing the response from here blocks on the reader's buffer lock; the stream
        # ends (and the thread with it) when the emulator stops.
        self.done.set()

    def wait(self, timeout: float = DEADLINE) -> None:
        if not self.done.wait(timeout):
            raise RuntimeError(f"only {len(self.routed)}/{self.expected} pods routed in {timeout}s")
        if self.error is not None:
            raise RuntimeError(f"pod watch failed: {self.error!r}")
        if len(self.routed) < self.expected:
            raise RuntimeError(f"pod watch ended after {len(self.routed)}/{self.expected} routed")


class RawWatch(threading.Thread):
    """An informer-like watch that reads and discards (the fan-out cost on the server)."""

    def __init__(self, url: str, path: str) -> None:
        super().__init__(name=f"raw-watch{path}", daemon=True)
        self.url, self.path = url, path
        self.stop = threading.Event()

    def run(self) -> None:
        pool = connection_pool(self.url)
        try:
            resp = pool.request(
                "GET",
                f"{self.path}?watch=true&resourceVersion=0",
                preload_content=False,
                timeout=urllib3.Timeout(connect=5, read=2),
            )
            while not self.stop.is_set():
                try:
                    if not resp.read(65536):
                        return
                except urllib3.exceptions.ReadTimeoutError:
                    continue
        except urllib3.exceptions.HTTPError:
            return


def create_pods(
    url: str, names: list[str], sent: dict[str, float], rate: float | None = None
) -> None:
    """POST the pods from CREATORS threads; `sent[name]` = monotonic time just before the POST.

    With `rate` (pods/s) pod i is POSTed at start + i / rate, not earlier (a steady arrival
    rate, as a deployment scaling up would make): the latency then is the controller's own, not
    the time a pod waited behind a burst."""
    work: queue.SimpleQueue[tuple[int, str]] = queue.SimpleQueue()
    for item in enumerate(names):
        work.put(item)
    errors: list[str] = []
    start = time.monotonic() + 0.1

    def creator() -> None:
        pool = connection_pool(url)
        while True:
            try:
                i, name = work.get_nowait()
            except queue.Empty:
                return
            body = json.dumps(pod_obj(name, NS, node_name=f"node-{i % NODES}")).encode()
            if rate is not None:
                # pacing a load generator is what this wait is for (not synchronisation)
                time.sleep(max(0.0, start + i / rate - time.monotonic()))
            sent[name] = time.monotonic()
            resp = pool.request(
                "POST",
                f"/api/v1/namespaces/{NS}/pods",
                body=body,
                headers={"Content-Type": "application/json"},
            )
            if resp.status != 201:
                errors.append(f"{name}: {resp.status} {resp.data[:200]!r}")

    threads = [threading.Thread(target=creator, daemon=True) for _ in range(CREATORS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} pod creates failed, first: {errors[0]}")


# --- results -------------------------------------------------------------------------------------


@dataclass
class Throughput:
    n: int
    to_allocated: float  # pods/s
    to_routed: float
    p50_allocated: float  # seconds
    p99_allocated: float
    p50_routed: float
    p99_routed: float
    wall: float  # first POST to last routed
    extra: dict[str, float] = field(default_factory=dict)


def throughput(sent: dict[str, float], watch: PodWatch) -> Throughput:
    start = min(sent.values())
    alloc = [watch.allocated[n] - sent[n] for n in sent]
    routed = [watch.routed[n] - sent[n] for n in sent]
    t_alloc = max(watch.allocated[n] for n in sent) - start
    t_routed = max(watch.routed[n] for n in sent) - start
    n = len(sent)
    return Throughput(
        n,
        n / t_alloc,
        n / t_routed,
        harness.percentile(alloc, 0.5),
        harness.percentile(alloc, 0.99),
        harness.percentile(routed, 0.5),
        harness.percentile(routed, 0.99),
        t_routed,
    )
