"""Shared helpers of the end-to-end tests: deadline waits, object builders, consistency checks."""

import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from controller.app import Controller
from controller.core.constants import ALLOCATED_ANNOTATION, IP_ADDRESS_ANNOTATION
from controller.sandbox.apiserver.remotestore import RemoteStore
from controller.sandbox.apiserver.resources import ApiError
from controller.sandbox.apiserver.store import ObjectStore
from controller.testing import builders
from controller.testing import wait as waiting

T = TypeVar("T")

#: The store a test reads and writes: the emulator's in-process one, or the same surface over
#: REST on the real plane (`RemoteStore`).
Store = ObjectStore | RemoteStore


class HasStore(Protocol):
    """An API server as the helpers use it: the emulator's `ApiServer` or the real plane's
    `RealServer` (tests/e2e/conftest.py)."""

    @property
    def store(self) -> Store: ...


DEFAULT_TIMEOUT = 15.0
NODE = "node1"
NODE_IP = "172.18.0.2"
#: Why a scenario built on hand-made StatefulSet pods runs on the emulator alone.
HANDMADE_STS = (
    "hand-made StatefulSet pods: on the real plane kube-controller-manager runs StatefulSets "
    "(test_real_workloads.py covers them)"
)


def wait_for(
    cond: Callable[[], T | None],
    timeout: float = DEFAULT_TIMEOUT,
    message: str = "condition",
    interval: float = 0.05,
) -> T:
    """`controller.testing.wait.wait_for` with this tier's defaults: a longer deadline (a whole
    controller starts and syncs in it), and a lookup or assertion error raised by `cond` (an
    object not there yet) counts as "not yet"."""
    return waiting.wait_for(
        cond,
        timeout,
        message,
        interval=interval,
        tolerate=(KeyError, LookupError, AssertionError),
    )


def running(
    controller: Controller, message: str = "workers started", timeout: float = DEFAULT_TIMEOUT
) -> Controller:
    """`controller` once its workers run (it leads and its caches synced)."""
    wait_for(controller.workers_started.is_set, timeout=timeout, message=message)
    return controller


def node(name: str = NODE, ip: str = NODE_IP) -> dict[str, Any]:
    return builders.node(name, ip)


def pod(
    name: str,
    namespace: str = "default",
    *,
    annotations: dict[str, str] | None = None,
    node_name: str = "",
    owner: dict[str, Any] | None = None,
    grace: int | None = None,
) -> dict[str, Any]:
    """A pod with one busybox container; empty options leave their fields out, `grace` sets
    terminationGracePeriodSeconds."""
    extra: dict[str, Any] = {} if grace is None else {"terminationGracePeriodSeconds": grace}
    return builders.pod(
        name,
        namespace,
        annotations=annotations or None,
        owner=owner or None,
        node=node_name or None,
        **extra,
    )


def get_or_none(server: HasStore, resource: str, namespace: str | None, name: str) -> Any:
    try:
        return server.store.get(resource, namespace, name)
    except ApiError as exc:
        if exc.code == 404:
            return None
        raise


def annotations_of(
    server: HasStore, resource: str, namespace: str | None, name: str
) -> dict[str, str]:
    obj = get_or_none(server, resource, namespace, name)
    return dict(((obj or {}).get("metadata") or {}).get("annotations") or {})


def annotations_once(
    server: HasStore,
    resource: str,
    namespace: str | None,
    name: str,
    key: str,
    value: str | None = None,
) -> dict[str, str] | None:
    """The object's annotations once `key` is set (to `value`, when given), else None: a
    `wait_for` condition that returns what the test asserts on next."""
    ann = annotations_of(server, resource, namespace, name)
    got = ann.get(key)
    return ann if got and (value is None or got == value) else None


def rewrite(
    server: HasStore,
    resource: str,
    namespace: str | None,
    name: str,
    change: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Read the object, `change` it in place and write it back (PUT, with the read's
    resourceVersion); on a 409 Conflict, another writer got in between (a leader renewing its
    Lease, the kubelet or the controller writing a pod), so read and change it again, as
    client-go's RetryOnConflict does. Returns what the server stored."""
    store = server.store
    written: list[dict[str, Any]] = []

    def attempt() -> bool:
        obj = store.get(resource, namespace, name)
        change(obj)
        try:
            written.append(store.update(resource, obj, namespace))
        except ApiError as exc:
            if exc.code != 409:
                raise
            return False
        return True

    wait_for(attempt, message=f"{resource} {name} written without a conflict")
    return written[-1]


def allocated_pods(store: Store, namespace: str = "default") -> dict[str, str]:
    """name -> IP address of every pod in `namespace` annotated as allocated."""
    out = {}
    for obj in store.list("pods", namespace):
        ann = obj["metadata"].get("annotations") or {}
        if ann.get(ALLOCATED_ANNOTATION) == "true":
            out[obj["metadata"]["name"]] = ann.get(IP_ADDRESS_ANNOTATION, "")
    return out


def ipam_released(controller: Controller, pod_key: str) -> bool:
    """The in-process controller's IPAM holds no address of `pod_key` ("namespace/name")."""
    return not controller.ipam.get_pod_address(pod_key)


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def audit_clean(argv: list[str], *, strict: bool = True) -> bool:
    """Run the read-only `check` audit (controller.audit.check); fail with its report if unclean,
    else True (so it is a `wait_for` condition as it is)."""
    import io

    from controller.audit.check import run_check
    from controller.config import parse_args

    out = io.StringIO()
    code = run_check(
        parse_args(["check", *argv], {"KUBE_NAMESPACE": "kube-system"}), out=out, strict=strict
    )
    assert code == 0, out.getvalue()
    return True
