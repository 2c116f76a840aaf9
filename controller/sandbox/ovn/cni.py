"""The CNI stand-in: wires pods (and nodes' `ovn0`) into a `DataPlane` as kube-ovn's CNI does.

`CniWiring(dataplane)` re-implements what kube-ovn v1.8's CNI daemon does for a pod
(pkg/daemon/handler.go `handleAdd`/`handleDel`, pkg/daemon/ovs.go `configureNic`/
`configureContainerNic`/`deleteNic`/`configureNodeNic`), on two paths that share every wiring
step (`_wire_into`):

* The sandbox kubelet's `PodWiring` (cluster/wiring.py): `wire(pod)` creates the pod's namespace
  itself (there is no container runtime) and wires every OVN network `plan_pod` (cni_plan.py)
  finds; `unwire(pod)` deletes the pod's OVS ports, veths and namespace (a pod never wired is a
  no-op).
* The CNI daemon (cni_daemon.py), for a real runtime: `wire_container(pod, netns, container_id,
  ifname, provider)` wires the one interface a CNI ADD asks for into the namespace the runtime
  made (`CNI_NETNS`, a path; never created here), the host end named as kube-ovn names it
  (`<container id[:12]>_h`, ovs.go line 130); `unwire_container(container_id, ifname)` deletes
  it (idempotent); `check_container` verifies it.

Wiring an interface: a veth whose host end is plugged into br-int (`--may-exist add-port`,
`external_ids:iface-id=<port>`, `pod_name`, `pod_namespace`, `ip`, `pod_netns`, as kube-ovn)
with the host end up and txqueuelen 1000; inside the pod the MAC, MTU (1400, kube-ovn's geneve
default), the addresses with the subnet's prefix lengths and, on `eth0` only, the default
route(s) via the gateway(s). It returns once every port is bound (`external_ids:ovn-installed=
true`, set by ovn-controller) or raises `WiringError` at the deadline. Idempotent: a second call
reconciles addresses and routes in place. `wire_node(node)` / `unwire_node(name)`: the node's
join port `node-<name>` as `ovn0` in a node namespace `kop-<run>-n<hash>`; with `node_lookup`
(name -> Node), a pod's node is wired first when it is not yet. `set_subnets(subnets)` keeps the
daemon's node-route rule (pkg/daemon/controller.go lines 549-603): a route on ovn0 via the join
gateway for each CIDR of a Ready, default-VPC, non-VLAN Subnet (`node_route_cidrs`), no other
route, no default route (so a subnet that is not Ready is unreachable from the node).

Where this differs from kube-ovn v1.8, and why:

* On the kubelet path the namespace is `kop-<run>-<hash of the pod UID>` and the host end
  `<run><hash>_h`. On both paths the veth is created with its final names, the host end inside
  the OVS namespace (not `<id>_c` plus a move and rename), and the OVS interface also carries
  `external_ids:pod_uid`, so a pod re-created under the same name is told apart.
* A stale interface claiming the same iface-id is removed with its veth (kube-ovn's
  `CleanDuplicatePort` only clears its iface-id).
* `pod_nic_type: internal-port` is wired as a veth: an OVS internal port of the userspace
  datapath is a tap device that cannot leave ovs-vswitchd's namespace; ovn0 is a veth too.
* Transmit checksum offload is off on the pod's end (`ethtool -K <if> tx off`): the userspace
  datapath forwards a veth's partially checksummed packets unchanged and the receiver drops them.
* The host end is set up before `add-port` and checked once bound: ovs-vswitchd writes a
  device's flags back from a cached copy when it adds the port, which can undo a racing `up`.
* IPv6 addresses are added with `nodad` (OVN already guarantees uniqueness per switch).
* No gateway check by default (kube-ovn pings the gateway up to 200 times unless the subnet
  disables it); `check_gateway=True` turns it on (one ping per second until the deadline).
* ovn0's connected routes (the join subnet's) are left as the kernel made them.
* Not done: QoS rate limits, mirroring, SR-IOV/offload, custom routes from the CNI request, the
  IP CR's nodeName update (the controller and the tests do not read it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from controller.sandbox.cluster.wiring import WiringError
from controller.sandbox.ovn.cni_plan import (
    MTU,
    NODE_NIC,
    NicPlan,
    first_address,
    host_nic_name,
    ip_batch,
    managed_routes,
    node_route_cidrs,
    ovn0_routes,
    plan_node,
    plan_pod,
    plan_pod_nic,
)
from controller.sandbox.ovn.dataplane import BRIDGE, NETNS_DIR, DataPlane
from controller.sandbox.processes import SandboxError

__all__ = [
    "MTU",
    "NODE_NIC",
    "CniWiring",
    "NicPlan",
    "first_address",
    "host_nic_name",
    "netns_exists",
    "node_route_cidrs",
    "plan_node",
    "plan_pod",
    "plan_pod_nic",
]

LOG = logging.getLogger(__name__)
_ip_batch = ip_batch  # the name the plan tests use


def _hash(*parts: str, size: int = 8) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:size]


def _in_netns_path(path: str, argv: Sequence[str], stdin: str = "") -> str:
    """Run `argv` in the network namespace bound at `path` (a runtime's CNI_NETNS)."""
    args = ["nsenter", f"--net={path}", *argv]
    try:
        out = subprocess.run(
            args, input=stdin, capture_output=True, text=True, timeout=10.0, check=False
        )
    except subprocess.TimeoutExpired as e:
        raise SandboxError(f"{' '.join(argv)} in {path} timed out") from e
    if out.returncode != 0:
        raise SandboxError(f"{' '.join(argv)} in {path} failed: {out.stderr.strip()}")
    return out.stdout


class CniWiring:
    """Wires pods into `dataplane` (see the module docstring)."""

    def __init__(
        self,
        dataplane: DataPlane,
        *,
        bind_timeout: float = 20.0,
        check_gateway: bool = False,
        node_lookup: Callable[[str], Mapping[str, Any] | None] | None = None,
    ) -> None:
        self.dp = dataplane
        self.bind_timeout = bind_timeout
        self.check_gateway = check_gateway
        self.node_lookup = node_lookup
        self._nodes: dict[str, str] = {}  # node name -> its namespace
        self._node_plans: dict[str, NicPlan] = {}  # node name -> its ovn0
        self._subnets: list[Mapping[str, Any]] = []  # the last set_subnets()
        # The kubelet wires pods from several threads; a node is wired by one of them only.
        self._node_lock = threading.Lock()
        self._plans: dict[str, tuple[NicPlan, ...]] = {}  # pod identity -> what was wired
        self._plans_lock = threading.Lock()

    # --- names -----------------------------------------------------------------------------------
    def pod_netns(self, pod: Mapping[str, Any]) -> str:
        """The namespace of `pod` (exists once `wire` ran)."""
        return self.dp.netns_name(_hash(self._identity(pod)))

    def node_netns(self, name: str) -> str:
        return self.dp.netns_name(self._node_tag(name))

    @staticmethod
    def _node_tag(name: str) -> str:
        return "n" + _hash("node", name, size=6)

    @staticmethod
    def _identity(pod: Mapping[str, Any]) -> str:
        meta = pod.get("metadata") or {}
        return str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")

    def _host_nic(self, key: str, ifname: str) -> str:
        return f"{self.dp.run_id}{_hash(key, ifname)}_h"  # 4 + 8 + 2 < IFNAMSIZ (15)

    # --- PodWiring (the sandbox kubelet) ----------------------------------------------------------
    def wire(self, pod: Mapping[str, Any]) -> None:
        plans = plan_pod(pod)
        self._ensure_node(pod)
        identity = self._identity(pod)
        try:
            netns = self.dp.add_netns(_hash(identity))
        except SandboxError as exc:
            raise WiringError(f"{_what(pod)}: {exc}") from None
        hosts = [self._host_nic(identity, plan.ifname) for plan in plans]
        self._wire_into(pod, netns, list(zip(plans, hosts, strict=True)))
        with self._plans_lock:
            self._plans[identity] = tuple(plans)

    def wired_plans(self, pod: Mapping[str, Any]) -> tuple[NicPlan, ...] | None:
        """The interfaces the last successful `wire` of this pod (by UID) set up, or None."""
        with self._plans_lock:
            return self._plans.get(self._identity(pod))

    def unwire(self, pod: Mapping[str, Any]) -> None:
        identity = self._identity(pod)
        with self._plans_lock:
            self._plans.pop(identity, None)
        try:
            for iface in self._interfaces("pod_uid", identity):
                self._unplug(iface)
            self.dp.delete_netns(self.dp.netns_name(_hash(identity)))
        except SandboxError as exc:
            raise WiringError(f"{_what(pod)}: {exc}") from None

    # --- the CNI daemon (a real container runtime) ---------------------------------------------
    def wire_container(
        self,
        pod: Mapping[str, Any],
        netns: str,
        container_id: str,
        ifname: str = "eth0",
        provider: str = "ovn",
    ) -> NicPlan:
        """Wire interface `ifname` of `pod` (its `provider` network) into the runtime's namespace
        `netns` (a path, which must exist); returns what was wired."""
        plan = plan_pod_nic(pod, provider, ifname)
        if not container_id or not netns.startswith("/"):
            raise WiringError(f"{_what(pod)}: a container id and a netns path are required")
        self._ensure_node(pod)
        self._wire_into(pod, netns, [(plan, host_nic_name(container_id, plan.ifname))])
        return plan

    def unwire_container(self, container_id: str, ifname: str = "eth0") -> None:
        """Delete the host end of a container's interface and its OVS port (which takes the pod
        end with it); nothing to delete is success (a second DEL, a namespace already gone)."""
        try:
            self._unplug(host_nic_name(container_id, ifname))
        except SandboxError as exc:
            raise WiringError(f"container {container_id[:12]}: {exc}") from None

    def check_container(
        self,
        pod: Mapping[str, Any],
        netns: str,
        container_id: str,
        ifname: str = "eth0",
        provider: str = "ovn",
    ) -> NicPlan:
        """`WiringError` unless the interface `wire_container` would make is there as planned:
        the host end on br-int for the pod's port and the pod end with its MAC and addresses."""
        plan = plan_pod_nic(pod, provider, ifname)
        host = host_nic_name(container_id, plan.ifname)
        ids = self.interfaces().get(host)
        if ids is None or ids.get("iface-id") != plan.port:
            raise WiringError(f"{_what(pod)}: {host} is not plugged for port {plan.port}")
        try:
            out = self._exec_pod(netns, ["ip", "-j", "addr", "show", "dev", plan.ifname])
        except SandboxError as exc:
            raise WiringError(f"{_what(pod)}: {exc}") from None
        link = (json.loads(out or "[]") or [{}])[0]
        have = {f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", [])}
        missing = [a for a in plan.addresses if a not in have]
        if str(link.get("address", "")).lower() != plan.mac or missing:
            raise WiringError(
                f"{_what(pod)}: {plan.ifname} has mac {link.get('address')} and "
                f"{sorted(have)}, wanted {plan.mac} and {list(plan.addresses)}"
            )
        return plan

    # --- the shared wiring path ------------------------------------------------------------------
    def _ensure_node(self, pod: Mapping[str, Any]) -> None:
        node = (pod.get("spec") or {}).get("nodeName", "")
        if node:
            self.ensure_node(node)

    def ensure_node(self, name: str) -> bool:
        """Wire node `name`'s ovn0 through `node_lookup` unless it is wired; whether it is."""
        if name not in self._nodes and self.node_lookup is not None:
            node_obj = self.node_lookup(name)
            if node_obj is not None:
                self.wire_node(node_obj)
        return name in self._nodes

    def _wire_into(
        self, pod: Mapping[str, Any], netns: str, nics: Sequence[tuple[NicPlan, str]]
    ) -> None:
        """Plug each (plan, host end) into `netns` (a name under /run/netns or a path), then
        wait until every port is bound."""
        meta = pod.get("metadata") or {}
        ids = {
            "pod_name": str(meta.get("name")),
            "pod_namespace": str(meta.get("namespace")),
            "pod_uid": self._identity(pod),
        }
        try:
            if any(":" in a for plan, _ in nics for a in plan.addresses):
                # a runtime may create the namespace with IPv6 off (ovs.go 179-192)
                sysctls = (
                    "net.ipv6.conf.all.disable_ipv6=0",
                    "net.ipv6.conf.default.disable_ipv6=0",
                )
                self._exec_pod(netns, ["sysctl", "-q", "-w", *sysctls])
            for plan, host in nics:
                self._plug(plan, host, netns, ids)
            deadline = time.monotonic() + self.bind_timeout
            for plan, host in nics:
                self._wait_bound(plan.port, host, deadline)
                self._ensure_up(host)
            if self.check_gateway:
                for plan, _ in nics:
                    if plan.default_route:
                        self._gateway_check(netns, plan, deadline)
        except SandboxError as exc:
            raise WiringError(f"{_what(pod)}: {exc}") from None

    def _exec_pod(self, netns: str, argv: Sequence[str], stdin: str = "") -> str:
        if netns.startswith("/"):
            return _in_netns_path(netns, argv, stdin)
        return self.dp.exec_in(netns, argv, stdin=stdin)

    # --- nodes -----------------------------------------------------------------------------------
    def prepare_node(self, name: str) -> str:
        """Create node `name`'s namespace (idempotent), before its ovn0 can be wired: what runs
        "on the node" (a kubelet) can be started in it at once; returns its name."""
        try:
            return self.dp.add_netns(self._node_tag(name))
        except SandboxError as exc:
            raise WiringError(f"node {name}: {exc}") from None

    def wire_node(self, node: Mapping[str, Any]) -> str:
        """Wire `node`'s ovn0 (idempotent); returns its namespace."""
        with self._node_lock:
            return self._wire_node(node)

    def _wire_node(self, node: Mapping[str, Any]) -> str:
        plan = plan_node(node)
        name = node["metadata"]["name"]
        netns = self.node_netns(name)
        try:
            self.dp.add_netns(self._node_tag(name))
            host = self._host_nic("node:" + name, NODE_NIC)
            self._plug(plan, host, netns, {"node_name": name})
            self._wait_bound(plan.port, host, time.monotonic() + self.bind_timeout)
            self._ensure_up(host)
        except SandboxError as exc:
            raise WiringError(f"node {name}: {exc}") from None
        self._nodes[name] = netns
        self._node_plans[name] = plan
        self._sync_node_routes(name)
        return netns

    def set_subnets(self, subnets: Iterable[Mapping[str, Any]]) -> None:
        """The cluster's Subnets changed: every wired node's ovn0 routes follow them."""
        with self._node_lock:
            self._subnets = list(subnets)
            for name in list(self._nodes):
                self._sync_node_routes(name)

    def node_routes(self, name: str) -> dict[str, str]:
        """The routes on the node's ovn0 this stand-in manages: destination -> gateway."""
        netns = self._nodes.get(name)
        return {} if netns is None else self._ovn0_routes(netns)

    def _ovn0_routes(self, netns: str) -> dict[str, str]:
        routes: dict[str, str] = {}
        for family in ("-4", "-6"):
            out = self.dp.exec_in(netns, ["ip", "-j", family, "route", "show", "dev", NODE_NIC])
            routes.update(managed_routes(json.loads(out or "[]")))
        return routes

    def _sync_node_routes(self, name: str) -> None:
        plan, netns = self._node_plans.get(name), self._nodes.get(name)
        if plan is None or netns is None:
            return
        wanted = ovn0_routes(plan, self._subnets)
        try:
            have = self._ovn0_routes(netns)
            for dst in have:
                if dst not in wanted:
                    self.dp.exec_in(netns, ["ip", "route", "del", dst, "dev", NODE_NIC])
            for dst, gw in wanted.items():
                if have.get(dst) != gw:
                    argv = ["ip", "route", "replace", dst, "via", gw, "dev", NODE_NIC]
                    self.dp.exec_in(netns, argv)
        except (SandboxError, ValueError) as exc:
            LOG.warning("node %s: ovn0 routes: %s", name, exc)

    def unwire_node(self, name: str) -> None:
        with self._node_lock:
            self._unwire_node(name)

    def _unwire_node(self, name: str) -> None:
        try:
            for iface in self._interfaces("node_name", name):
                self._unplug(iface)
            self.dp.delete_netns(self.node_netns(name))
        except SandboxError as exc:
            raise WiringError(f"node {name}: {exc}") from None
        self._nodes.pop(name, None)
        self._node_plans.pop(name, None)

    # --- steps -----------------------------------------------------------------------------------
    def _plug(self, plan: NicPlan, host: str, netns: str, ids: Mapping[str, str]) -> None:
        ovs_ns = self.dp.ovs_netns
        if not self._link_exists(ovs_ns, host):
            self.dp.exec_in(
                ovs_ns,
                [
                    *("ip", "link", "add", host, "mtu", str(MTU), "type", "veth", "peer"),
                    *("name", plan.ifname, "netns", netns),
                ],
            )
        self._clean_duplicates(plan.port, host)
        # Up before OVS opens it (kube-ovn sets it up right after add-port): ovs-vswitchd writes
        # the device flags back from its own cached copy when it turns promiscuous mode on, so an
        # `up` racing with the port's addition can be undone and leave the pod without carrier.
        self.dp.exec_in(ovs_ns, ["ip", "link", "set", host, "up", "txqueuelen", "1000"])
        external_ids = {"iface-id": plan.port, **ids, "ip": plan.ips, "pod_netns": netns}
        # without --no-wait: returns once ovs-vswitchd has added the port
        self.dp.vsctl(
            "--may-exist",
            "add-port",
            BRIDGE,
            host,
            "--",
            "set",
            "interface",
            host,
            *(f'external_ids:{k}="{v}"' for k, v in external_ids.items()),
        )
        self._exec_pod(netns, ["ip", "-batch", "-"], stdin=ip_batch(plan))
        # A veth hands TCP/UDP packets to its peer with the checksum left to the NIC; the
        # userspace datapath forwards them as they are, so the receiver would drop them.
        self._exec_pod(netns, ["ethtool", "-K", plan.ifname, "tx", "off"])

    def _ensure_up(self, host: str) -> None:
        """The host end is administratively up once OVS has the port (see `_plug`)."""
        link = self.dp.exec_in(self.dp.ovs_netns, ["ip", "-o", "link", "show", "dev", host])
        flags = link.partition("<")[2].partition(">")[0].split(",")
        if "UP" not in flags:
            LOG.warning("interface %s went down while OVS added it; setting it up again", host)
            self.dp.exec_in(self.dp.ovs_netns, ["ip", "link", "set", host, "up"])

    def _link_exists(self, netns: str, name: str) -> bool:
        try:
            self.dp.exec_in(netns, ["ip", "link", "show", "dev", name])
        except SandboxError:
            return False
        return True

    def interfaces(self) -> dict[str, dict[str, str]]:
        """Every OVS interface: name -> its external_ids."""
        out = json.loads(
            self.dp.vsctl("--format=json", "--columns=name,external_ids", "list", "interface")
        )
        result: dict[str, dict[str, str]] = {}
        for name, ids in out.get("data", []):
            # ovsdb's JSON map: ["map", [[k, v], ...]]
            result[str(name)] = {str(k): str(v) for k, v in ids[1]}
        return result

    def _interfaces(self, key: str, value: str) -> list[str]:
        return sorted(n for n, ids in self.interfaces().items() if ids.get(key) == value)

    def _clean_duplicates(self, port: str, host: str) -> None:
        for iface in self._interfaces("iface-id", port):
            if iface != host:
                LOG.info("removing stale interface %s that claimed port %s", iface, port)
                self._unplug(iface)

    def _unplug(self, iface: str) -> None:
        self.dp.vsctl("--if-exists", "--with-iface", "del-port", BRIDGE, iface)
        if self._link_exists(self.dp.ovs_netns, iface):
            self.dp.exec_in(self.dp.ovs_netns, ["ip", "link", "del", iface])

    def _wait_bound(self, port: str, host: str, deadline: float) -> None:
        while True:
            out = self.dp.vsctl(
                "--if-exists", "get", "interface", host, "external_ids:ovn-installed"
            ).strip()
            if out == '"true"':
                return
            if time.monotonic() > deadline:
                raise WiringError(
                    f"port {port} (interface {host}) not bound after {self.bind_timeout}s "
                    "(no external_ids:ovn-installed; is the port in the NB?)"
                )
            time.sleep(0.02)

    def _gateway_check(self, netns: str, plan: NicPlan, deadline: float) -> None:
        for gw in (g for g in plan.gateways if g):
            while True:
                try:
                    self._exec_pod(netns, ["ping", "-n", "-q", "-c1", "-W1", gw])
                    break
                except SandboxError:
                    if time.monotonic() > deadline:
                        raise WiringError(f"{plan.port}: gateway {gw} does not answer") from None

    # --- introspection (tests, demo) -------------------------------------------------------------
    def wired_ports(self) -> dict[str, str]:
        """iface-id -> interface of every pod or node interface plugged into br-int."""
        return {
            ids["iface-id"]: name
            for name, ids in self.interfaces().items()
            if "iface-id" in ids and ("pod_uid" in ids or "node_name" in ids)
        }


def _what(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"pod {meta.get('namespace')}/{meta.get('name')}"


def netns_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()
