"""The packet-test bed: the e2e cluster (API emulator + real NB + the controller) plus a real OVN
data plane (`DataPlane`) on the same NB, the sandbox kubelet for node1 and pods wired into the
data plane by `CniWiring` (the kubelet's `PodWiring`).

`Net` creates pods through the API; the kubelet waits until the controller allocated and routed
them (what kube-ovn's CNI waits for), wires them and reports them Running; `Net` returns once
the pod is Running, and tests send packets. Deleting a pod lets the kubelet unwire it.
Reachability is polled with a deadline (a freshly bound port's flows, ARP and ND settle within a
second or two); non-reachability is one `ping -c1 -W1` (or a TCP connect with a 1 s timeout)
that must get no answer, always next to a positive control so that it cannot pass by accident.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.app import Controller
from controller.core.constants import IP_ADDRESS_ANNOTATION, LOGICAL_SWITCH_ANNOTATION_TEMPLATE
from controller.sandbox.cluster.kubelet import SandboxKubelet, SimNode
from controller.sandbox.ovn.cni import CniWiring, NicPlan, netns_exists
from controller.sandbox.ovn.dataplane import DataPlane
from tests.e2e.conftest import Cluster
from tests.e2e.helpers import NODE, NODE_IP, get_or_none, node, wait_for
from tests.e2e.workloads import graceful, subnet

NS = "default"
NODE2 = "node2"
NODE2_IP = "172.18.0.3"
REACH_TIMEOUT = 15.0
# The default and join subnets are dual stack: every test checks both families.
DUAL_STACK = (
    "--default-cidr=10.16.0.0/16,fd00:10:16::/64",
    "--node-switch-cidr=100.64.0.0/16,fd00:100:64::/64",
)


@dataclass
class WiredPod:
    name: str
    namespace: str
    netns: str
    plans: list[NicPlan]
    obj: dict[str, Any] = field(repr=False)

    @property
    def eth0(self) -> NicPlan:
        return self.plans[0]

    @property
    def switch(self) -> str:
        """The logical switch of eth0, as the controller annotated it."""
        ann = self.obj["metadata"]["annotations"]
        return str(ann[LOGICAL_SWITCH_ANNOTATION_TEMPLATE.format(provider=self.eth0.provider)])

    def ip(self, version: int = 4) -> str:
        for addr in self.eth0.addresses:
            ip = ipaddress.ip_interface(addr).ip
            if ip.version == version:
                return str(ip)
        raise LookupError(f"{self.name} has no IPv{version} address")

    def gateway(self, version: int = 4) -> str:
        for gw in self.eth0.gateways:
            if gw and ipaddress.ip_address(gw).version == version:
                return gw
        raise LookupError(f"{self.name} has no IPv{version} gateway")


@dataclass
class Net:
    cluster: Cluster
    ctl: Controller | None  # None when the controller runs as a separate process
    dp: DataPlane
    cni: CniWiring
    node_netns: dict[str, str] = field(default_factory=dict)

    # --- objects ---------------------------------------------------------------------------------
    def subnet(self, name: str, cidr: str, *, provider: str = "") -> None:
        """Create a subnet and wait until the (in-process) controller's IPAM knows it."""
        assert self.ctl is not None, "subnet() needs the in-process controller"
        subnet(self.cluster, self.ctl, name, cidr, provider=provider)

    # --- pods ------------------------------------------------------------------------------------
    def create(
        self,
        name: str,
        *,
        namespace: str = NS,
        annotations: dict[str, str] | None = None,
        owner: dict[str, Any] | None = None,
        node: str = NODE,
    ) -> WiredPod:
        """Create the pod; return it once the kubelet has wired it and reports it Running."""
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if annotations:
            meta["annotations"] = dict(annotations)
        if owner:
            meta["ownerReferences"] = [owner]
        spec = {
            "containers": [{"name": "app", "image": "busybox"}],
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
        }
        created = self.cluster.server.store.create("pods", {"metadata": meta, "spec": spec})
        return self.started(name, namespace, uid=created["metadata"]["uid"])

    def started(
        self, name: str, namespace: str = NS, *, uid: str = "", timeout: float = 30.0
    ) -> WiredPod:
        """The pod `name` once it is Running (wired by the kubelet)."""

        def running() -> dict[str, Any] | None:
            obj = get_or_none(self.cluster.server, "pods", namespace, name)
            if obj is None or (uid and obj["metadata"]["uid"] != uid):
                return None
            return obj if (obj.get("status") or {}).get("phase") == "Running" else None

        obj = wait_for(running, timeout=timeout, message=f"pod {namespace}/{name} Running")
        # what the kubelet wired (it wires once: later annotation changes do not reach the pod)
        plans = self.cni.wired_plans(obj)
        assert plans is not None, f"{name} is Running but was not wired"
        pod = WiredPod(name, namespace, self.cni.pod_netns(obj), list(plans), obj)
        assert netns_exists(pod.netns), f"{pod.name} is Running but has no namespace"
        return pod

    def delete(self, pod: WiredPod) -> None:
        """Delete the pod through the API; return once the kubelet has unwired it and it is
        gone."""
        server = self.cluster.server
        if get_or_none(server, "pods", pod.namespace, pod.name) is not None:
            server.store.delete("pods", pod.namespace, pod.name)
        wait_for(
            lambda: (
                not netns_exists(pod.netns)
                and get_or_none(server, "pods", pod.namespace, pod.name) is None
            ),
            message=f"pod {pod.name} unwired and deleted",
        )

    # --- nodes -----------------------------------------------------------------------------------
    def wire_node(self, name: str = NODE) -> str:
        def allocated() -> dict[str, Any] | None:
            obj = get_or_none(self.cluster.server, "nodes", None, name)
            ann = ((obj or {}).get("metadata") or {}).get("annotations") or {}
            return obj if ann.get(IP_ADDRESS_ANNOTATION) else None

        node = wait_for(allocated, message=f"node {name} has its join address")
        self.node_netns[name] = self.cni.wire_node(node)
        return self.node_netns[name]

    def node_ip(self, name: str = NODE, version: int = 4) -> str:
        """The node's join address of IP `version`."""
        ann = self.cluster.server.store.get("nodes", None, name)["metadata"]["annotations"]
        for ip in str(ann[IP_ADDRESS_ANNOTATION]).split(","):
            if ipaddress.ip_address(ip).version == version:
                return ip
        raise LookupError(f"node {name} has no IPv{version} join address")

    # --- packets ---------------------------------------------------------------------------------
    def flush_neighbours(self, netns: str) -> None:
        """Forget the ARP/ND cache of `netns` (a kernel keeps a moved address's old MAC for up
        to ~30 s; that is the pod's kernel, not the controller's output)."""
        self.dp.exec_in(netns, ["ip", "neigh", "flush", "all"])

    def ping(self, netns: str, address: str) -> float | None:
        return self.dp.ping(netns, address, wait=1.0)

    def reaches(
        self, netns: str, address: str, timeout: float = REACH_TIMEOUT, *, source: str = ""
    ) -> float:
        """Poll until `address` answers a ping from `netns`; the round-trip time (ms)."""
        deadline = time.monotonic() + timeout
        while True:
            rtt = self.dp.ping(netns, address, wait=0.5, source=source)
            if rtt is not None:
                return rtt
            if time.monotonic() > deadline:
                raise AssertionError(f"{address} did not answer a ping from {netns} in {timeout}s")

    def silent(self, netns: str, address: str, *, source: str = "") -> None:
        """`address` does not answer one ping from `netns` (1 s)."""
        rtt = self.dp.ping(netns, address, wait=1.0, source=source)
        assert rtt is None, f"{address} answered a ping from {netns} ({rtt} ms)"

    def goes_silent(
        self, netns: str, address: str, timeout: float = REACH_TIMEOUT, *, source: str = ""
    ) -> None:
        """Poll until `address` stops answering pings from `netns`."""
        deadline = time.monotonic() + timeout
        while self.dp.ping(netns, address, wait=0.5, source=source) is not None:
            if time.monotonic() > deadline:
                raise AssertionError(f"{address} still answers {netns} after {timeout}s")


@contextmanager
def open_net(cluster: Cluster, ctl: Controller | None, workdir: Path) -> Iterator[Net]:
    """A data plane on `cluster`'s NB, the nodes' ovn0 wired and a sandbox kubelet serving
    them with `CniWiring`; everything stopped at exit. node1 is the cluster's own; node2 is
    added here (both are carried by the one chassis)."""
    graceful(cluster)
    cluster.server.store.create("nodes", node(NODE2, NODE2_IP))
    with DataPlane(workdir, cluster.nb_server.remote) as dp:
        cni = CniWiring(dp)
        net = Net(cluster, ctl, dp, cni)
        for name in (NODE, NODE2):
            net.wire_node(name)
        api = cluster.server.api_client()
        try:
            nodes = [SimNode(NODE, NODE_IP), SimNode(NODE2, NODE2_IP)]
            with SandboxKubelet(api, nodes, wiring=cni):
                yield net
        finally:
            api.close()
