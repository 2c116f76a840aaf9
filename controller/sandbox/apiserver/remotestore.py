"""The `ObjectStore` surface the test suites use, served by any API server over REST.

`RemoteStore(api_client)` offers `create`, `get`, `list`, `update`, `patch`, `delete`,
`finalize_delete` and `wait_for` with the emulator store's signatures and meanings, so a test
written against `ApiServer.store` runs unchanged against a real kube-apiserver. Resources are
named as in `controller.sandbox.apiserver.resources.RESOURCES` ("pods", "subnets", ...). Every
failure is an `ApiError` carrying the server's code, reason and message.

Where the emulator's in-process calls do more than one REST request could, this does it in two:

* `create` of a kind with a status subresource sends the body, then (as the in-process store
  keeps the status a test seeds) patches the status it was given through `/status`;
* `patch` of the main resource with a `status` in the body also sends that status to
  `/status` (a real server ignores it on the main resource, and so does the emulator's store:
  there the two differ); a patch names only the fields it changes, so at least it carries no
  stale copy of a status it never read;
* `delete` of a pod with `immediate_pod_delete` set (the default, as the emulator's) asks for
  grace period 0, since no kubelet is assumed; with it cleared the server's graceful deletion
  runs and a kubelet (or `finalize_delete`) finishes it.

`update` (a PUT of the whole object) writes the main resource only, as the emulator's store and
the real server do for a kind with a status subresource: the status in the body is ignored, and
the one stored stays. Its body is a copy of an earlier read, so its status is the read's; sending
it on to `/status` would replace a status another writer (the kubelet, the controller) wrote
since, the resourceVersion of the main PUT's answer vouching for it. A caller that means to write
status says so: `update(..., subresource="status")`.

`wait_for` polls (every 50 ms, with a deadline): a REST client has no store condition to wait on.
`created` records every object this store created, for a test bed's clean-up between tests.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
from kubernetes.client.exceptions import ApiException

from controller.sandbox.apiserver.patch import MERGE_PATCH
from controller.sandbox.apiserver.resources import RESOURCES, ApiError, JsonDict, ResourceType
from controller.sandbox.apiserver.selectors import Selector

_TIMEOUT = (5.0, 30.0)
_BY_PLURAL = {rt.plural: rt for rt in RESOURCES}


def resource_type(resource: ResourceType | str) -> ResourceType:
    if isinstance(resource, ResourceType):
        return resource
    rt = _BY_PLURAL.get(resource)
    if rt is None:
        raise ValueError(f"unknown resource {resource!r}")
    return rt


def resource_path(rt: ResourceType, namespace: str | None, name: str | None = None) -> str:
    base = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    if rt.namespaced and namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    base += f"/{rt.plural}"
    if name is not None:
        base += f"/{quote(name, safe='')}"
    return base


def _api_error(exc: ApiException) -> ApiError:
    try:
        body = json.loads(exc.body) if exc.body else {}
    except (TypeError, ValueError):
        body = {}
    if not isinstance(body, dict):
        body = {}
    return ApiError(
        int(exc.status or 0),
        str(body.get("reason") or exc.reason or ""),
        str(body.get("message") or exc.reason or ""),
        details=body.get("details"),
    )


class RemoteStore:
    """See the module docstring."""

    def __init__(self, api_client: Any, *, immediate_pod_delete: bool = True) -> None:
        self._api = api_client
        self.immediate_pod_delete = immediate_pod_delete
        self._lock = threading.Lock()
        self.created: list[tuple[ResourceType, str | None, str]] = []

    # ------------------------------------------------------------------ plumbing

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> JsonDict:
        url = path + ("?" + urlencode(query) if query else "")
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            resp = self._api.call_api(
                method,
                self._api.configuration.host + url,
                header_params=self._auth(headers),
                body=body,
                _request_timeout=_TIMEOUT,
            )
            resp.read()
        except urllib3.exceptions.HTTPError as exc:
            raise ApiError(0, "ServiceUnavailable", f"{method} {path}: {exc}") from exc
        if not 200 <= resp.status <= 299:
            raise _api_error(ApiException(status=resp.status, reason=resp.reason,
                                          body=resp.data.decode(errors="replace")))  # fmt: skip
        data = json.loads(resp.data) if resp.data else {}
        return data if isinstance(data, dict) else {}

    def _auth(self, headers: dict[str, str]) -> dict[str, str]:
        # NOTE: call_api takes fully built headers; the bearer token (if any) comes from the
        # configuration as the generated API classes would add it.
        cfg = self._api.configuration
        token = cfg.get_api_key_with_prefix("authorization") if cfg.api_key else None
        if token:
            headers["Authorization"] = token
        return headers

    # ------------------------------------------------------------------ reads

    def get(self, resource: ResourceType | str, namespace: str | None, name: str) -> JsonDict:
        rt = resource_type(resource)
        return self.request("GET", resource_path(rt, namespace, name))

    def list(
        self,
        resource: ResourceType | str,
        namespace: str | None = None,
        selector: Selector | None = None,
    ) -> list[JsonDict]:
        rt = resource_type(resource)
        if selector is not None:
            raise ValueError("RemoteStore.list takes no Selector; filter the result")
        data = self.request("GET", resource_path(rt, namespace if rt.namespaced else None))
        items = [i for i in data.get("items") or [] if isinstance(i, dict)]
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        return items

    def wait_for(
        self,
        resource: ResourceType | str,
        namespace: str | None,
        name: str,
        predicate: Callable[[JsonDict | None], bool],
        timeout: float = 10.0,
    ) -> JsonDict | None:
        deadline = time.monotonic() + timeout
        last: JsonDict | None = None
        while True:
            try:
                last = self.get(resource, namespace, name)
            except ApiError as exc:
                if exc.code != 404:
                    raise
                last = None
            if predicate(copy.deepcopy(last)):
                return last
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{resource_type(resource).group_resource} {namespace or ''}/{name}: "
                    f"condition not met within {timeout}s; last state: {last}"
                )
            time.sleep(0.05)

    # ------------------------------------------------------------------ writes

    def create(
        self,
        resource: ResourceType | str,
        obj: JsonDict,
        namespace: str | None = None,
        *,
        keep_status: bool = True,
    ) -> JsonDict:
        rt = resource_type(resource)
        body = copy.deepcopy(obj)
        body.setdefault("apiVersion", rt.api_version)
        body.setdefault("kind", rt.kind)
        meta = body.setdefault("metadata", {})
        ns = namespace or meta.get("namespace") or ("default" if rt.namespaced else None)
        if rt.namespaced:
            meta["namespace"] = ns
        status = body.get("status") if keep_status and rt.has_status else None
        created = self.request("POST", resource_path(rt, ns), body)
        name = created["metadata"]["name"]
        with self._lock:
            self.created.append((rt, ns if rt.namespaced else None, name))
        if status:
            created = self.request(
                "PATCH", resource_path(rt, ns, name) + "/status", {"status": status},
                content_type=MERGE_PATCH,
            )  # fmt: skip
        return created

    def update(
        self,
        resource: ResourceType | str,
        obj: JsonDict,
        namespace: str | None = None,
        name: str | None = None,
        *,
        subresource: str | None = None,
    ) -> JsonDict:
        rt = resource_type(resource)
        body = copy.deepcopy(obj)
        body.setdefault("apiVersion", rt.api_version)
        body.setdefault("kind", rt.kind)
        meta = body["metadata"]
        ns = namespace or meta.get("namespace")
        path = resource_path(rt, ns, name or meta["name"])
        if subresource:
            return self.request("PUT", f"{path}/{subresource}", body)
        return self.request("PUT", path, body)

    def patch(
        self,
        resource: ResourceType | str,
        namespace: str | None,
        name: str,
        patch_body: Any,
        patch_type: str = MERGE_PATCH,
        *,
        subresource: str | None = None,
    ) -> JsonDict:
        rt = resource_type(resource)
        path = resource_path(rt, namespace, name)
        if subresource:
            return self.request("PATCH", f"{path}/{subresource}", patch_body,
                                content_type=patch_type)  # fmt: skip
        status = None
        body = patch_body
        if rt.has_status and isinstance(patch_body, dict) and "status" in patch_body:
            body = {k: v for k, v in patch_body.items() if k != "status"}
            status = {"status": patch_body["status"]}
        out = self.request("PATCH", path, body, content_type=patch_type) if body else {}
        if status is not None:
            out = self.request("PATCH", path + "/status", status, content_type=patch_type)
        return out

    def delete(
        self,
        resource: ResourceType | str,
        namespace: str | None,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        preconditions: JsonDict | None = None,
        propagation_policy: str | None = None,
    ) -> tuple[JsonDict, bool]:
        """Delete; returns (the answer's object or the last state, whether it is gone now)."""
        rt = resource_type(resource)
        if grace_period_seconds is None and rt.plural == "pods" and self.immediate_pod_delete:
            grace_period_seconds = 0
        options: JsonDict = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions:
            options["preconditions"] = preconditions
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        answer = self.request("DELETE", resource_path(rt, namespace, name), options)
        try:
            current = self.get(rt, namespace, name)
        except ApiError as exc:
            if exc.code == 404:
                return answer, True
            raise
        return current, False

    def finalize_delete(self, resource: ResourceType | str, namespace: str | None,
                        name: str) -> bool:  # fmt: skip
        """Finish a graceful deletion as a kubelet would: delete with grace period 0."""
        try:
            return self.delete(resource, namespace, name, grace_period_seconds=0)[1]
        except ApiError as exc:
            if exc.code == 404:
                return True
            raise
