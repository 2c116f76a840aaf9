"""The demo's API side on the real control plane (`python -m controller.sandbox.demo
--control-plane real`).

Contract:

* `RealDemoServer(workdir)` starts a `RealControlPlane` in `<workdir>/control-plane`, installs
  the chart's CRDs and the watched foreign ones, and offers what the demo uses of the emulator:
  `url`, `store` (a `KubeStore`), `write_kubeconfig(path)` (for the controller: its own
  ServiceAccount bound to the chart's rendered ClusterRole/Role, not the admin),
  `write_admin_kubeconfig(path)` (for kubectl), `stop()`.
* `KubeStore` speaks the subset of `ObjectStore` the demo calls (`create`, `get`, `patch`,
  `wait_for`, `watch`) through the official client as the admin, with the emulator's
  `ApiError` for refusals, so the demo's steps read the same on both planes. `create` keeps a
  given status, as the emulator's in-process `store.create` does, by writing it to `/status`
  afterwards (a node's status is how the scheduler learns it is Ready). `watch(...).next(t)`
  only waits `t` seconds: the demo re-reads what it needs after every wake-up.
* `create_workloads(store, replicas)` creates the real workloads (a Deployment, the
  StatefulSet) whose pods kube-controller-manager creates and kube-scheduler binds, and returns
  the names of the pods to expect; the Deployment's pod names are only known once created, so
  it waits (bounded) for them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from controller.sandbox.apiserver.resources import ApiError
from controller.sandbox.cluster.controlplane import RealControlPlane, render_chart
from controller.sandbox.processes import SandboxError

#: resource -> (API path prefix, namespaced, has a status subresource)
_PATHS: dict[str, tuple[str, bool, bool]] = {
    "pods": ("/api/v1", True, True),
    "namespaces": ("/api/v1", False, True),
    "nodes": ("/api/v1", False, True),
    "configmaps": ("/api/v1", True, False),
    "subnets": ("/apis/kubeovn.io/v1", False, True),
    "ips": ("/apis/kubeovn.io/v1", False, False),
    "statefulsets": ("/apis/apps/v1", True, True),
    "deployments": ("/apis/apps/v1", True, True),
}


class _Pause:
    """The demo's watch: `next(timeout)` waits, then the demo re-reads what it shows."""

    def next(self, timeout: float) -> None:
        time.sleep(timeout)

    def close(self) -> None:
        return None


class KubeStore:
    """The `ObjectStore` calls the demo makes, over HTTPS as the admin (module docstring)."""

    def __init__(self, api: Any) -> None:
        self.api = api

    def _path(self, resource: str, namespace: str | None, name: str | None = None) -> str:
        try:
            prefix, namespaced, _ = _PATHS[resource]
        except KeyError:
            raise ApiError(404, "NotFound", f"the demo does not serve {resource!r}") from None
        path = prefix
        if namespaced:
            if not namespace:
                raise ApiError(400, "BadRequest", f"{resource} need a namespace")
            path += f"/namespaces/{namespace}"
        path += f"/{resource}"
        return f"{path}/{name}" if name else path

    def _call(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        headers = {"Accept": "application/json", "Content-Type": content_type}
        _, url, headers, _, _ = self.api.param_serialize(
            method, path, header_params=headers, auth_settings=["BearerToken"]
        )
        try:
            resp = self.api.call_api(method, url, header_params=headers, body=body)
            data = resp.read()
        except (ApiException, OSError) as e:
            raise ApiError(503, "ServiceUnavailable", f"{method} {path}: {e}") from e
        try:
            decoded = json.loads(data) if data else {}
        except ValueError:
            decoded = {}
        if not isinstance(decoded, dict):
            decoded = {}
        if not 200 <= resp.status <= 299:
            raise ApiError(
                int(resp.status), str(decoded.get("reason") or "Error"),
                str(decoded.get("message") or data[:300]),
            )  # fmt: skip
        return decoded

    def create(self, resource: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        meta = obj.get("metadata") or {}
        created = self._call("POST", self._path(resource, meta.get("namespace")), dict(obj))
        if "status" in obj and _PATHS[resource][2]:
            name = created["metadata"]["name"]
            created = self.patch(resource, meta.get("namespace"), name,
                                 {"status": obj["status"]}, subresource="status")  # fmt: skip
        return created

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any]:
        return self._call("GET", self._path(resource, namespace, name))

    def patch(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        body: Mapping[str, Any],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        path = self._path(resource, namespace, name)
        if subresource:
            path += f"/{subresource}"
        return self._call("PATCH", path, dict(body), "application/merge-patch+json")

    def list(self, resource: str, namespace: str | None, label_selector: str = "") -> list[Any]:
        path = self._path(resource, namespace)
        if label_selector:
            path += f"?labelSelector={label_selector}"
        items: list[Any] = self._call("GET", path).get("items") or []
        return items

    def wait_for(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        predicate: Callable[[Any], bool],
        timeout: float,
    ) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                obj: Any = self.get(resource, namespace, name)
            except ApiError as e:
                if e.code != 404:
                    raise
                obj = None
            if predicate(obj):
                return obj
            if time.monotonic() > deadline:
                raise TimeoutError(f"{resource} {name}: condition not met in {timeout}s")
            time.sleep(min(0.1, timeout))

    def watch(self, resource: str, selector: object, rv: object) -> _Pause:
        return _Pause()


class RealDemoServer:
    """The real control plane with the demo's view of it (module docstring)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.plane = RealControlPlane(workdir / "control-plane")
        self._api: Any = None
        self._store: KubeStore | None = None
        self._chart: list[dict[str, Any]] = []

    @property
    def store(self) -> KubeStore:
        if self._store is None:
            raise SandboxError("the real control plane is not started")
        return self._store

    def start(self) -> RealDemoServer:
        self._chart = render_chart()
        self.plane.start()
        self.plane.install_crds(self._chart)
        self._api = self.plane.api_client()
        self._store = KubeStore(self._api)
        return self

    def stop(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None
            self._store = None
        self.plane.stop()

    @property
    def url(self) -> str:
        return self.plane.url

    def write_kubeconfig(self, path: Path) -> Path:
        return self.plane.write_controller_kubeconfig(path, self._chart)

    def write_admin_kubeconfig(self, path: Path) -> Path:
        return self.plane.write_admin_kubeconfig(path)


def deployment_object(
    name: str, namespace: str, replicas: int, pod_spec: Mapping[str, Any]
) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": dict(pod_spec)},
        },
    }


def create_workloads(
    store: KubeStore,
    namespace: str,
    deployment: Mapping[str, Any],
    statefulset: Mapping[str, Any],
    timeout: float,
) -> list[str]:
    """Create the Deployment and the StatefulSet; the pod names to expect (see module doc)."""
    store.create("deployments", deployment)
    store.create("statefulsets", statefulset)
    replicas = int(deployment["spec"]["replicas"])
    labels = deployment["spec"]["selector"]["matchLabels"]
    selector = ",".join(f"{k}={v}" for k, v in labels.items())
    deadline = time.monotonic() + timeout
    while True:
        names = sorted(p["metadata"]["name"] for p in store.list("pods", namespace, selector))
        if len(names) >= replicas:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(names)} of {replicas} Deployment pods after {timeout}s")
        time.sleep(0.1)
    sts_name = statefulset["metadata"]["name"]
    return [*names, *(f"{sts_name}-{i}" for i in range(int(statefulset["spec"]["replicas"])))]
