"""`KubeApi` and `EventSink` over the official `kubernetes` client (v37), raw JSON in and out.

Contract:

* With `controller.apiclient.request` the only modules that touch `kubernetes.client`; it speaks
  JSON dicts and skips the generated API classes (see that module for why).
* Every request carries a (connect, read) timeout, so a dead API server never hangs a worker.
* Every request goes through `controller.apiclient.request`, so every failure is raised as a
  `controller.apiclient.errors.KubeApiError` subclass:
  HTTP errors by status and Status reason, transport errors as `KubeUnavailableError` (status 0).
* Each request reports `on_request(verb, url_template, code, seconds)` (see
  `controller.kube.api.RequestObserver`) so metrics stay out of this module.
* `load_api_client(kubeconfig)` builds the `ApiClient`: in-cluster config when the path is
  empty, and a urllib3 pool large enough that worker threads never queue for a connection.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException

from controller.apiclient.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidError,
    KubeApiError,
    KubeConfigError,
    NotFoundError,
)
from controller.apiclient.request import JSON, MERGE_PATCH, read_object, send
from controller.kube.api import (
    ClusterLister,
    EventSink,
    KubeApi,
    KubeObject,
    RequestObserver,
    annotation_merge_patch,
    check_object_name,
    desired_ip,
    ip_owner_conflict,
    ip_update,
)
from controller.kube.cluster import ClusterApi

LOG = logging.getLogger(__name__)

DEFAULT_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds, per request
LIST_PAGE_SIZE = 500  # client-go's reflector page size

# URL templates double as the `url` metric label (client-go replaces names the same way).
PODS = "/api/v1/namespaces/{namespace}/pods/{name}"
ALL_PODS = "/api/v1/pods"
NAMESPACES = "/api/v1/namespaces"
NODES = "/api/v1/nodes"
VPCS = "/apis/kubeovn.io/v1/vpcs"
ALL_STATEFULSETS = "/apis/apps/v1/statefulsets"
ALL_VIRTUAL_MACHINES = "/apis/kubevirt.io/v1/virtualmachines"
NAMESPACE = "/api/v1/namespaces/{name}"
NODE = "/api/v1/nodes/{name}"
CONFIGMAP = "/api/v1/namespaces/{namespace}/configmaps/{name}"
EVENTS = "/api/v1/namespaces/{namespace}/events"
ALL_EVENTS = "/api/v1/events"
EVENT = "/api/v1/namespaces/{namespace}/events/{name}"
IPS = "/apis/kubeovn.io/v1/ips"
IP = "/apis/kubeovn.io/v1/ips/{name}"
SUBNETS = "/apis/kubeovn.io/v1/subnets"
VPC = "/apis/kubeovn.io/v1/vpcs/{name}"
VPC_STATUS = "/apis/kubeovn.io/v1/vpcs/{name}/status"
SUBNET = "/apis/kubeovn.io/v1/subnets/{name}"
SUBNET_STATUS = "/apis/kubeovn.io/v1/subnets/{name}/status"
SECURITY_GROUPS = "/apis/kubeovn.io/v1/security-groups"
SECURITY_GROUP_STATUS = "/apis/kubeovn.io/v1/security-groups/{name}/status"
STATEFULSET = "/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}"
VIRTUAL_MACHINE = "/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachines/{name}"
NAD = "/apis/k8s.cni.cncf.io/v1/namespaces/{namespace}/network-attachment-definitions/{name}"


def load_api_client(
    kubeconfig: str = "",
    *,
    worker_threads: int = 16,
    context: str | None = None,
) -> Any:
    """Build a `kubernetes.client.ApiClient` from a kubeconfig path, or in-cluster if empty.

    NOTE: urllib3 keeps at most `connection_pool_maxsize` idle connections per host and the
    library default is cpu_count * 5; with more concurrent worker threads than that, extra
    connections are opened and thrown away on every request (and urllib3 logs "Connection pool
    is full"). Size it for every thread that may call the API at once, plus a few spares for the
    event recorder and the periodic loops.
    """
    if worker_threads <= 0:
        raise ValueError("worker_threads must be positive")
    cfg = k8s_client.Configuration()
    try:
        if kubeconfig:
            _load_kubeconfig(kubeconfig, context, cfg)
        else:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call,unused-ignore]
                client_configuration=cfg
            )
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        where = kubeconfig or "in-cluster service account"
        raise KubeConfigError(f"cannot load Kubernetes config from {where}: {exc}") from exc
    cfg.connection_pool_maxsize = max(multiprocessing.cpu_count() * 5, worker_threads + 4)
    return k8s_client.ApiClient(configuration=cfg)


def _load_kubeconfig(path: str, context: str | None, cfg: Any) -> None:
    """`kubernetes.config.load_kube_config` into `cfg`, without its per-request refresh for
    credentials that never expire.

    NOTE: the library installs a refresh hook whenever the user has a token; it runs before
    every request and re-applies the whole kubeconfig to the configuration (host, TLS files,
    proxy: the host setter rescans the proxy environment variables), a few percent of the
    controller's CPU. It only fetches a new token for credentials with an expiry, which only
    `exec` plugins and `auth-provider`s (oidc, gcp) produce; a static token, a token file, basic
    auth or a client certificate keep the values loaded here, so the hook is dropped for them.
    """
    if not os.path.isfile(path):  # the library would say "no configuration found"
        raise ConfigException("no such file" if not os.path.exists(path) else "not a file")
    merger = kube_config.KubeConfigMerger(path)  # type: ignore[no-untyped-call,unused-ignore]
    if merger.config is None:
        raise ConfigException(f"invalid kubeconfig {path}: no configuration found")
    loader = kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call,unused-ignore]
        config_dict=merger.config, active_context=context, config_persister=merger.save_changes
    )
    loader.load_and_set(cfg)  # type: ignore[no-untyped-call,unused-ignore]
    if not _credentials_may_expire(merger.config.value, loader.current_context):
        cfg.refresh_api_key_hook = None


def _credentials_may_expire(config: Any, current_context: Any) -> bool:
    """Whether the context's user gets its token from an exec plugin or an auth-provider."""
    # NOTE: the merger wraps list entries in its ConfigNode (the raw dict is its `.value`).
    user_name = _plain(_plain(current_context).get("context")).get("user")
    for node in _plain(config).get("users") or []:
        entry = _plain(node)
        if entry.get("name") == user_name:
            user = _plain(entry.get("user"))
            return "exec" in user or "auth-provider" in user
    return False


def _plain(node: Any) -> Mapping[str, Any]:
    value = getattr(node, "value", node)
    return value if isinstance(value, Mapping) else {}


class KubeClient:
    """The real `KubeApi` + `EventSink`. Thread-safe: urllib3's pool is, and we keep no state."""

    def __init__(
        self,
        api_client: Any,
        *,
        on_request: RequestObserver | None = None,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        list_page_size: int = LIST_PAGE_SIZE,
    ) -> None:
        if list_page_size <= 0 or min(timeout) <= 0:
            raise ValueError("timeouts and list_page_size must be positive")
        self._api = api_client
        self._on_request = on_request
        self._timeout = timeout
        self._page_size = list_page_size

    # --- transport ------------------------------------------------------------------------------
    def _request(
        self,
        method: str,
        template: str,
        *,
        namespace: str = "",
        name: str = "",
        query: Iterable[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = JSON,
    ) -> KubeObject:
        path = template
        if "{namespace}" in path:
            path = path.replace("{namespace}", _segment("namespace", namespace))
        if "{name}" in path:
            path = path.replace("{name}", _segment("name", name))
        code = "<error>"
        start = time.monotonic()
        try:
            raw = send(
                self._api,
                method,
                path,
                query=query,
                body=body,
                content_type=content_type,
                timeout=self._timeout,
            )
            result = read_object(raw)
            code = str(raw.status)
        except KubeApiError as exc:
            if exc.status:
                code = str(exc.status)
            raise
        finally:
            if self._on_request is not None:
                self._on_request(method, template, code, time.monotonic() - start)
        return result

    def _get_or_none(self, template: str, *, namespace: str = "", name: str) -> KubeObject | None:
        try:
            return self._request("GET", template, namespace=namespace, name=name)
        except NotFoundError:
            return None

    # --- pods -----------------------------------------------------------------------------------
    def patch_pod_annotations(
        self,
        namespace: str,
        name: str,
        annotations: Mapping[str, str],
        *,
        resource_version: str | None = None,
        uid: str | None = None,
    ) -> KubeObject:
        patch = annotation_merge_patch(annotations, resource_version, uid)
        try:
            return self._request(
                "PATCH", PODS, namespace=namespace, name=name, body=patch, content_type=MERGE_PATCH
            )
        except InvalidError as exc:
            # kube-apiserver answers a patched metadata.uid that is not the object's with 422
            # "metadata.uid: ... field is immutable" (a PUT gets 409 "Precondition failed"):
            # either way the pod of that name is another incarnation.
            if uid and "metadata.uid" in exc.message:
                raise ConflictError(409, "Conflict", exc.message) from exc
            raise

    def delete_pod_annotations(
        self,
        namespace: str,
        name: str,
        keys: Iterable[str],
        *,
        resource_version: str | None = None,
    ) -> KubeObject:
        patch = annotation_merge_patch(dict.fromkeys(keys), resource_version)
        return self._request(
            "PATCH", PODS, namespace=namespace, name=name, body=patch, content_type=MERGE_PATCH
        )

    # --- IP CRs ---------------------------------------------------------------------------------
    def create_or_update_ip(
        self, ip_cr: Mapping[str, Any], *, likely_absent: bool = False
    ) -> KubeObject:
        desired = desired_ip(ip_cr)
        name = desired["metadata"]["name"]
        existing = None if likely_absent else self.get_ip(name)
        if existing is None:
            try:
                return self._request("POST", IPS, body=desired)
            except AlreadyExistsError:
                # Lost a create race (another replica, a restart) or the hint was wrong:
                # converge on what is there.
                existing = self.get_ip(name)
                if existing is None:
                    raise
        conflict = ip_owner_conflict(existing, desired)
        if conflict is not None:
            raise AlreadyExistsError(409, "AlreadyExists", conflict)
        updated = ip_update(existing, desired)
        if updated is None:
            return existing
        return self._request("PUT", IP, name=name, body=updated)

    def delete_ip(self, name: str) -> bool:
        try:
            self._request("DELETE", IP, name=name)
        except NotFoundError:
            return False
        return True

    def get_ip(self, name: str) -> KubeObject | None:
        return self._get_or_none(IP, name=name)

    def list_ips(self) -> list[KubeObject]:
        return self._list(IPS)

    def _list(self, template: str) -> list[KubeObject]:
        """Every object of a cluster-wide collection, page by page (`limit` / `continue`)."""
        items: list[KubeObject] = []
        cont = ""
        while True:
            query = [("limit", str(self._page_size))]
            if cont:
                query.append(("continue", cont))
            page = self._request("GET", template, query=query)
            items.extend(page.get("items") or [])
            cont = (page.get("metadata") or {}).get("continue") or ""
            if not cont:
                return items

    # --- ClusterLister (uncached, cluster-wide lists for one-shot tools such as `check`) --------
    def list_pods(self) -> list[KubeObject]:
        return self._list(ALL_PODS)

    def list_namespaces(self) -> list[KubeObject]:
        return self._list(NAMESPACES)

    def list_nodes(self) -> list[KubeObject]:
        return self._list(NODES)

    def list_subnets(self) -> list[KubeObject]:
        return self._list(SUBNETS)

    def list_vpcs(self) -> list[KubeObject]:
        try:
            return self._list(VPCS)
        except NotFoundError:  # the Vpc CRD is not installed: no VPC but the implicit default
            return []

    def list_security_groups(self) -> list[KubeObject]:
        try:
            return self._list(SECURITY_GROUPS)
        except NotFoundError:  # the SecurityGroup CRD is not installed
            return []

    def list_statefulsets(self) -> list[KubeObject]:
        return self._list(ALL_STATEFULSETS)

    def list_virtual_machines(self) -> list[KubeObject]:
        try:
            return self._list(ALL_VIRTUAL_MACHINES)
        except NotFoundError:  # kubevirt is not installed
            return []

    def list_events(self) -> list[KubeObject]:
        return self._list(ALL_EVENTS)

    # --- subnets --------------------------------------------------------------------------------
    def create_subnet(self, body: Mapping[str, Any]) -> KubeObject:
        full = {"apiVersion": "kubeovn.io/v1", "kind": "Subnet", **dict(body)}
        return self._request("POST", SUBNETS, body=full)

    def get_subnet(self, name: str) -> KubeObject | None:
        return self._get_or_none(SUBNET, name=name)

    def update_subnet_status(self, name: str, status_patch: Mapping[str, Any]) -> KubeObject:
        return self._request(
            "PATCH",
            SUBNET_STATUS,
            name=name,
            body={"status": dict(status_patch)},
            content_type=MERGE_PATCH,
        )

    def update_security_group_status(
        self, name: str, status_patch: Mapping[str, Any]
    ) -> KubeObject:
        """Merge-patch a SecurityGroup's status subresource (kube-ovn patchSgStatus)."""
        return self._request(
            "PATCH",
            SECURITY_GROUP_STATUS,
            name=name,
            body={"status": dict(status_patch)},
            content_type=MERGE_PATCH,
        )

    # --- ClusterApi: the default Vpc, Subnet spec writes, API discovery ---------------------------
    # NOTE: whole-object writes are PUTs carrying the resourceVersion that was read, so a
    # concurrent writer makes them a ConflictError (the caller retries) instead of a lost update.
    def get_vpc(self, name: str) -> KubeObject | None:
        return self._get_or_none(VPC, name=name)

    def create_vpc(self, body: Mapping[str, Any]) -> KubeObject:
        full = {"apiVersion": "kubeovn.io/v1", "kind": "Vpc", **dict(body)}
        return self._request("POST", VPCS, body=full)

    def replace_vpc_status(self, vpc: Mapping[str, Any], status: Mapping[str, Any]) -> KubeObject:
        body = {"apiVersion": "kubeovn.io/v1", "kind": "Vpc", **dict(vpc), "status": dict(status)}
        name = str((vpc.get("metadata") or {}).get("name", ""))
        return self._request("PUT", VPC_STATUS, name=name, body=body)

    def replace_subnet(self, subnet: Mapping[str, Any]) -> KubeObject:
        body = {"apiVersion": "kubeovn.io/v1", "kind": "Subnet", **dict(subnet)}
        name = str((subnet.get("metadata") or {}).get("name", ""))
        return self._request("PUT", SUBNET, name=name, body=body)

    def api_group_exists(self, group: str, version: str) -> bool:
        path = f"/apis/{_segment('group', group)}/{_segment('version', version)}"
        try:
            self._request("GET", path)
        except NotFoundError:
            return False
        return True

    # --- namespaces and nodes -------------------------------------------------------------------
    def annotate_namespace(self, name: str, annotations: Mapping[str, str | None]) -> KubeObject:
        patch = annotation_merge_patch(annotations)
        return self._request("PATCH", NAMESPACE, name=name, body=patch, content_type=MERGE_PATCH)

    def annotate_node(self, name: str, annotations: Mapping[str, str | None]) -> KubeObject:
        patch = annotation_merge_patch(annotations)
        return self._request("PATCH", NODE, name=name, body=patch, content_type=MERGE_PATCH)

    # --- uncached reads -------------------------------------------------------------------------
    def get_statefulset(self, namespace: str, name: str) -> KubeObject | None:
        return self._get_or_none(STATEFULSET, namespace=namespace, name=name)

    def get_virtual_machine(self, namespace: str, name: str) -> KubeObject | None:
        return self._get_or_none(VIRTUAL_MACHINE, namespace=namespace, name=name)

    def get_network_attachment_definition(self, namespace: str, name: str) -> KubeObject | None:
        return self._get_or_none(NAD, namespace=namespace, name=name)

    def get_configmap(self, namespace: str, name: str) -> KubeObject | None:
        return self._get_or_none(CONFIGMAP, namespace=namespace, name=name)

    # --- EventSink ------------------------------------------------------------------------------
    def create_event(self, namespace: str, body: Mapping[str, Any]) -> KubeObject:
        return self._request("POST", EVENTS, namespace=namespace, body=dict(body))

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> KubeObject:
        return self._request(
            "PATCH",
            EVENT,
            namespace=namespace,
            name=name,
            body=dict(patch),
            content_type=MERGE_PATCH,
        )


def _segment(what: str, value: str) -> str:
    return quote(check_object_name(what, value), safe="")


if TYPE_CHECKING:  # mypy proves the adapter satisfies both ports

    def _conforms(c: KubeClient) -> tuple[KubeApi, EventSink, ClusterLister, ClusterApi]:
        return c, c, c, c
