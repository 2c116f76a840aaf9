"""The per-node CNI daemon stand-in: kube-ovn-cni's cniserver, serving the CNI plugin.

`CniDaemon(wiring, pods, socket_path, node_name, ips=ip_crs)` serves HTTP on a unix socket as
kube-ovn v1.8.18's daemon does (pkg/daemon/server.go lines 19-58; its default socket is
/run/openvswitch/kube-ovn-daemon.sock, pkg/daemon/config.go line 61): the plugin (cni_plugin.py)
POSTs a JSON `CniRequest` (pkg/request/cniserver.go lines 24-36: `cni_type`, `pod_name`,
`pod_namespace`, `container_id`, `net_ns`, `if_name`, `provider`) to

* `/api/v1/add`: after the provider check (handler.go lines 37-68: a provider that is not
  `ovn`/`*.ovn` must be some Subnet's `spec.provider`, else 400), polls the pod until the
  controller has allocated its network, written valid annotations and, for `eth0`, routed it
  (handler.go lines 74-128: one look a second for 20 tries), records its node in the pod's IP
  CR (below), then wires the interface into the runtime's namespace with
  `CniWiring.wire_container` and answers 200 with a `CniResponse` (cniserver.go lines 39-48:
  `protocol`, `address`, `mac_address`, `cidr`, `gateway` (eth0 only, handler.go line 231),
  `mtu`, `nicname`). A provider that is not `ovn`/`*.ovn` (kube-ovn as another plugin's IPAM)
  gets the addresses without any wiring (handler.go line 155). A pod
  that never gets there is a 500 whose `error` names what is missing (kube-ovn's words: "no
  address allocated to pod ...", "route is not ready for pod ..."); a pod that does not exist
  is a 500 at once (handler.go lines 75-81).
* The IP CR write of an ADD (handler.go lines 139-144 and `UpdateIPCr`, lines 239-260): once the
  pod is allocated, for every provider (IPAM-only ones too), the daemon GETs the IP CR
  `PodNameToPortName(<pod or its VM>, <ns>, <provider>)` and PUTs it back with `spec.nodeName` =
  its node, the attach lists emptied and the label `<logical_switch>: ""` (`ip_cr_on_node`).
  A pod still not routed at the deadline gets this write too, under its own name, before the
  "route is not ready" refusal, as kube-ovn's loop leaves it. A CR that is missing, or a GET or
  PUT the API refuses (a 409 when someone wrote it since the GET), fails the ADD with a 500
  ("failed to get/update ip crd for <ip>, ..."); the runtime retries the ADD. DEL and CHECK
  do not touch it.
* The pod's UID (`K8S_POD_UID`) is neither sent nor checked: kube-ovn's plugin reads only
  K8S_POD_NAME and K8S_POD_NAMESPACE (cmd/cni/cni.go lines 37-44, 129-136), its request has no
  UID field and its handler acts on whichever pod has that name now; so does this daemon.
* `/api/v1/del`: deletes the container's interface; 204 also when there is nothing to delete
  (no pod, no port, no namespace, a second DEL). Unlike kube-ovn (handler.go lines 284-287,
  which skips the port of a pod already gone) the port is deleted whether the pod exists or not:
  the host end's name comes from the container id alone.
* `/api/v1/check` (not in kube-ovn v1.8, whose plugin has no CHECK): 204 when the interface is
  wired as the pod's annotations say, else 500 with the difference.

Errors are JSON `{"error": msg}` with the status kube-ovn uses (400 for a bad request, 500
otherwise), plus `cni_code`, the CNI error code the plugin reports (11, try again later, when
the controller did not annotate the pod in time; 999 otherwise).

The node: `start()` creates its namespace (`node_netns`, where its ovn0 will be, so that a
kubelet can be started in it at once); its ovn0 is wired there as soon as the controller has
annotated the Node (on each Subnet event, and before the node's first pod at the latest), and
with `CniDaemon.for_cluster(api_client, ...)` (or `for_kubeconfig(path, ...)`) a `SubnetWatch`
keeps the node-route rule (`CniWiring.set_subnets`). `start()` binds the socket (a stale file is
replaced) and serves from a thread; `stop()` ends it, also interrupting ADDs still waiting, and
removes the socket file.
"""

from __future__ import annotations

import contextlib
import http.server
import ipaddress
import json
import logging
import socketserver
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from controller.core.constants import (
    IP_ADDRESS_ANNOTATION_TEMPLATE,
    LOGICAL_SWITCH_ANNOTATION_TEMPLATE,
)
from controller.core.naming import pod_name_to_port_name
from controller.sandbox.cluster.subnetwatch import SubnetWatch
from controller.sandbox.cluster.wiring import WiringError
from controller.sandbox.ovn.cni import MTU, CniWiring, NicPlan, plan_pod_nic
from controller.sandbox.ovn.cni_plan import ip_cr_on_node
from controller.sandbox.ovn.dataplane import DataPlane

LOG = logging.getLogger(__name__)

DEFAULT_SOCKET = "/run/openvswitch/kube-ovn-daemon.sock"
ADD_TIMEOUT = 20.0  # kube-ovn: 20 looks at the pod, one a second
POLL = 1.0
OVN_PROVIDER = "ovn"
CNI_TYPE = "kube-ovn"
TRY_AGAIN_LATER = 11  # the CNI spec's error code


class PodSource(Protocol):
    """Where the daemon reads pods (kube-ovn: its pod informer's lister)."""

    def get_pod(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...


class IpCrs(Protocol):
    """The daemon's IP CR client (kube-ovn: its kubeovn clientset, no cache)."""

    def get_ip(self, name: str) -> Mapping[str, Any] | None: ...

    def update_ip(self, body: Mapping[str, Any]) -> Mapping[str, Any]: ...


class ContainerWiring(Protocol):
    """What the daemon needs of the wiring (`CniWiring`)."""

    def wire_container(
        self, pod: Mapping[str, Any], netns: str, container_id: str, ifname: str, provider: str
    ) -> NicPlan: ...

    def unwire_container(self, container_id: str, ifname: str) -> None: ...

    def check_container(
        self, pod: Mapping[str, Any], netns: str, container_id: str, ifname: str, provider: str
    ) -> NicPlan: ...

    def set_subnets(self, subnets: list[Mapping[str, Any]]) -> None: ...

    def prepare_node(self, name: str) -> str: ...

    def ensure_node(self, name: str) -> bool: ...


IP_CRD = ("kubeovn.io", "v1", "ips")


class ApiObjects:
    """Pods, Nodes and IP CRs through the official client, as the API server returns them."""

    def __init__(self, api_client: Any) -> None:
        self._core = k8s_client.CoreV1Api(api_client)
        self._custom = k8s_client.CustomObjectsApi(api_client)

    def get_pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._read(self._core.read_namespaced_pod, name, namespace)

    def get_node(self, name: str) -> Mapping[str, Any] | None:
        return self._read(self._core.read_node, name)

    def get_ip(self, name: str) -> Mapping[str, Any] | None:
        return self._read(self._custom.get_cluster_custom_object, *IP_CRD, name)

    def update_ip(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        name = body["metadata"]["name"]
        resp: Any = self._custom.replace_cluster_custom_object(
            *IP_CRD, name, dict(body), _preload_content=False
        )
        obj: Mapping[str, Any] = json.loads(resp.data)
        return obj

    @staticmethod
    def _read(fn: Any, *args: str) -> Mapping[str, Any] | None:
        try:
            resp = fn(*args, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        obj: Mapping[str, Any] = json.loads(resp.data)
        return obj


@dataclass(frozen=True, slots=True)
class CniRequest:
    """What the plugin sends (kube-ovn's request.CniRequest, the fields used here)."""

    pod_name: str
    pod_namespace: str
    container_id: str
    net_ns: str = ""
    if_name: str = "eth0"
    provider: str = OVN_PROVIDER
    cni_type: str = CNI_TYPE

    @classmethod
    def from_json(cls, body: bytes) -> CniRequest:
        try:
            raw = json.loads(body or b"{}")
        except ValueError as exc:
            raise DaemonError(400, f"parse request failed: {exc}") from None
        if not isinstance(raw, dict):
            raise DaemonError(400, "parse request failed: not a JSON object")
        req = cls(
            pod_name=str(raw.get("pod_name") or ""),
            pod_namespace=str(raw.get("pod_namespace") or ""),
            container_id=str(raw.get("container_id") or ""),
            net_ns=str(raw.get("net_ns") or ""),
            if_name=str(raw.get("if_name") or "eth0"),
            provider=str(raw.get("provider") or OVN_PROVIDER),
            cni_type=str(raw.get("cni_type") or CNI_TYPE),
        )
        if not req.pod_name or not req.pod_namespace or not req.container_id:
            raise DaemonError(400, "pod_name, pod_namespace and container_id are required")
        return req


class DaemonError(Exception):
    """A refusal: the HTTP status and, for the plugin, the CNI error code (999 unless the
    runtime should simply try again later, 11)."""

    def __init__(self, status: int, message: str, cni_code: int = 999) -> None:
        super().__init__(message)
        self.status = status
        self.cni_code = cni_code


def cni_response(plan: NicPlan) -> dict[str, Any]:
    """kube-ovn's CniResponse for a wired interface (handler.go lines 224-233)."""
    nets = [ipaddress.ip_interface(a) for a in plan.addresses]
    versions = {n.version for n in nets}
    protocol = "Dual" if len(versions) == 2 else ("IPv6" if versions == {6} else "IPv4")
    return {
        "protocol": protocol,
        "address": plan.ips,
        "mac_address": plan.mac,
        "cidr": ",".join(str(n.network) for n in nets),
        "gateway": ",".join(plan.gateways) if plan.default_route else "",
        "mtu": MTU,
        "nicname": plan.ifname,
    }


class CniDaemon:
    """Serves the CNI plugin on `socket_path` for the pods of node `node_name`."""

    def __init__(
        self,
        wiring: ContainerWiring,
        pods: PodSource,
        socket_path: Path | str,
        node_name: str,
        *,
        ips: IpCrs,
        add_timeout: float = ADD_TIMEOUT,
        poll: float = POLL,
    ) -> None:
        self.wiring = wiring
        self.pods = pods
        self.ips = ips
        self.socket_path = Path(socket_path)
        self.node_name = node_name
        self.add_timeout = add_timeout
        self.poll = poll
        self._subnets: list[Mapping[str, Any]] = []
        self._stop = threading.Event()
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._thread: threading.Thread | None = None
        self._watch: SubnetWatch | None = None
        self.node_netns = ""  # the node's namespace (its ovn0), made by start()
        self._owned_client: Any = None

    @classmethod
    def for_cluster(
        cls,
        api_client: Any,
        dataplane: DataPlane,
        node_name: str,
        socket_path: Path | str = DEFAULT_SOCKET,
        **kwargs: float,
    ) -> CniDaemon:
        """A daemon reading pods, its Node and the Subnets through `api_client`."""
        objects = ApiObjects(api_client)
        wiring = CniWiring(dataplane, node_lookup=objects.get_node)
        daemon = cls(wiring, objects, socket_path, node_name, ips=objects, **kwargs)
        custom = k8s_client.CustomObjectsApi(api_client)
        daemon._watch = SubnetWatch(custom, daemon.set_subnets)
        return daemon

    @classmethod
    def for_kubeconfig(
        cls,
        kubeconfig: Path | str,
        dataplane: DataPlane,
        node_name: str,
        socket_path: Path | str = DEFAULT_SOCKET,
        **kwargs: float,
    ) -> CniDaemon:
        """`for_cluster` with a client of its own from `kubeconfig` (closed by `stop()`)."""
        load = k8s_config.new_client_from_config
        api_client = load(config_file=str(kubeconfig))  # type: ignore[no-untyped-call,unused-ignore]
        daemon = cls.for_cluster(api_client, dataplane, node_name, socket_path, **kwargs)
        daemon._owned_client = api_client
        return daemon

    def set_subnets(self, subnets: list[Mapping[str, Any]]) -> None:
        """The cluster's Subnets (for the provider check and the node routes); the node's ovn0
        is wired here too once the controller has annotated the Node."""
        self._subnets = list(subnets)
        try:
            self.wiring.ensure_node(self.node_name)
        except WiringError as exc:
            LOG.info("node %s not wired yet: %s", self.node_name, exc)
        self.wiring.set_subnets(subnets)

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> CniDaemon:
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()  # a stale socket of a daemon that died
        self._stop.clear()
        self.node_netns = self.wiring.prepare_node(self.node_name)
        server = socketserver.ThreadingUnixStreamServer(str(self.socket_path), _handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name=f"cni-daemon-{self.node_name}", daemon=True
        )
        self._thread.start()
        if self._watch is not None:
            self._watch.start()
        LOG.info("CNI daemon of node %s listening on %s", self.node_name, self.socket_path)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(10.0)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        client, self._owned_client = self._owned_client, None
        if client is not None:
            client.close()

    def __enter__(self) -> CniDaemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the three calls -------------------------------------------------------------------------
    def add(self, req: CniRequest) -> dict[str, Any]:
        if not self._provider_exists(req.provider):
            raise DaemonError(400, f"provider {req.provider} not bind to any subnet")
        if not req.net_ns.startswith("/"):
            raise DaemonError(400, f"net_ns {req.net_ns!r} is not a namespace path")
        pod, plan = self._wait_for_annotations(req)
        self._record_node(req, pod, plan.port)
        if not req.provider.endswith(OVN_PROVIDER):
            # kube-ovn as another plugin's IPAM: the addresses only, that plugin makes the
            # interface (handler.go line 155 wires only `*ovn` providers)
            return cni_response(plan)
        try:
            plan = self.wiring.wire_container(
                pod, req.net_ns, req.container_id, req.if_name, req.provider
            )
        except WiringError as exc:
            raise DaemonError(500, f"configure nic failed: {exc}") from None
        return cni_response(plan)

    def delete(self, req: CniRequest) -> None:
        try:
            self.wiring.unwire_container(req.container_id, req.if_name)
        except WiringError as exc:
            raise DaemonError(500, f"del nic failed: {exc}") from None

    def check(self, req: CniRequest) -> None:
        pod = self._get_pod(req)
        try:
            self.wiring.check_container(
                pod, req.net_ns, req.container_id, req.if_name, req.provider
            )
        except WiringError as exc:
            raise DaemonError(500, str(exc)) from None

    # --- steps -----------------------------------------------------------------------------------
    def _provider_exists(self, provider: str) -> bool:
        if not provider or provider.endswith(OVN_PROVIDER):
            return True
        return any((s.get("spec") or {}).get("provider") == provider for s in self._subnets)

    def _get_pod(self, req: CniRequest) -> Mapping[str, Any]:
        what = f"{req.pod_namespace}/{req.pod_name}"
        try:
            pod = self.pods.get_pod(req.pod_namespace, req.pod_name)
        except Exception as exc:  # any API failure is the runtime's to retry
            raise DaemonError(500, f"get pod {what} failed: {exc}") from None
        if pod is None:
            raise DaemonError(500, f"get pod {what} failed: not found")
        return pod

    def _record_node(self, req: CniRequest, pod: Mapping[str, Any], name: str) -> None:
        """kube-ovn's `UpdateIPCr`: this node, no attachments and the subnet label on the IP CR
        `name`; `DaemonError` (500) when it cannot be read or written (module docstring)."""
        ann = (pod.get("metadata") or {}).get("annotations") or {}
        ip = ann.get(IP_ADDRESS_ANNOTATION_TEMPLATE.format(provider=req.provider), "")
        subnet = ann.get(LOGICAL_SWITCH_ANNOTATION_TEMPLATE.format(provider=req.provider), "")
        try:
            current = self.ips.get_ip(name)
        except Exception as exc:  # any API failure fails the ADD, as kube-ovn's does
            raise DaemonError(500, f"failed to get ip crd for {ip}, {exc}") from None
        if current is None:
            missing = f'ips.kubeovn.io "{name}" not found'
            raise DaemonError(500, f"failed to get ip crd for {ip}, {missing}")
        try:
            self.ips.update_ip(ip_cr_on_node(current, self.node_name, subnet))
        except Exception as exc:
            raise DaemonError(500, f"failed to update ip crd for {ip}, {exc}") from None
        LOG.info("IP CR %s (%s) recorded on node %s", name, ip, self.node_name)

    def _wait_for_annotations(self, req: CniRequest) -> tuple[Mapping[str, Any], NicPlan]:
        """The pod once its network is allocated (and routed, for eth0) with valid annotations;
        `DaemonError` at the deadline saying what is still missing."""
        deadline = time.monotonic() + self.add_timeout
        what = f"{req.pod_namespace}/{req.pod_name}"
        while True:
            pod = self._get_pod(req)
            try:
                return pod, plan_pod_nic(pod, req.provider, req.if_name)
            except WiringError as exc:
                reason = str(exc)
            LOG.info("waiting for the controller: %s", reason)
            if time.monotonic() >= deadline or self._stop.wait(self.poll):
                break
        if "not allocated" in reason:
            msg = f"no address allocated to pod {what}, please see kube-ovn-controller logs"
        elif "not routed" in reason:
            # kube-ovn's loop gives up before it swaps in a VM's name, and writes the IP CR
            # before it refuses the unrouted pod (handler.go lines 117-127 and 139-153)
            self._record_node(
                req, pod, pod_name_to_port_name(req.pod_name, req.pod_namespace, req.provider)
            )
            msg = f"route is not ready for pod {what} provider {req.provider}, please see "
            msg += "kube-ovn-controller logs"
        else:
            msg = f"invalid network annotations of pod {what}"
        raise DaemonError(500, f"{msg} ({reason}, after {self.add_timeout:g}s)", TRY_AGAIN_LATER)


def _handler(daemon: CniDaemon) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            route = self.path.split("?")[0]
            try:
                req = CniRequest.from_json(body)
                LOG.info("%s %s", route, req)
                if route == "/api/v1/add":
                    self._reply(200, daemon.add(req))
                elif route == "/api/v1/del":
                    daemon.delete(req)
                    self._reply(204, None)
                elif route == "/api/v1/check":
                    daemon.check(req)
                    self._reply(204, None)
                else:
                    self._reply(404, {"error": f"no route {route}"})
            except DaemonError as exc:
                LOG.warning("%s: %s", route, exc)
                self._reply(exc.status, {"error": str(exc), "cni_code": exc.cni_code})
            except Exception as exc:  # a bug must answer the plugin, not hang it
                LOG.exception("%s failed", route)
                self._reply(500, {"error": f"{type(exc).__name__}: {exc}"})

        def _reply(self, status: int, body: Mapping[str, Any] | None) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            try:
                self.send_response(status)
                if data:
                    self.send_header("Content-Type", "application/json")
                if status != 204:  # a 204 carries no body and no length (RFC 9110 8.6)
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if data:
                    self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                # the plugin is gone (the runtime killed it at its own timeout): nobody to tell
                LOG.info("the plugin left before the answer %d to %s", status, self.path)
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            LOG.debug("cni daemon: " + format, *args)

        def address_string(self) -> str:
            return "unix"

    return Handler
