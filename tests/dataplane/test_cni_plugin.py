"""The real CNI plugin executable, exec'd as a container runtime would, against the per-node
daemon on the real data plane: node3 is served by the daemon only (no sandbox kubelet), its
pods' namespaces are made here as containerd makes them (`ip netns add cni-<uuid>`, the path
passed as CNI_NETNS), and the pods answer pods of other nodes and the nodes themselves."""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from controller.core.constants import IP_ADDRESS_ANNOTATION, LOGICAL_SWITCH_ANNOTATION
from controller.sandbox.ovn.cni import CniWiring, host_nic_name
from controller.sandbox.ovn.cni_daemon import CniDaemon, PodSource
from controller.sandbox.ovn.cni_install import install_plugin, write_conflist
from controller.sandbox.processes import run_tool
from tests.dataplane.helpers import NS, Net
from tests.e2e.helpers import NODE, get_or_none, node, pod, wait_for

NODE3, NODE3_IP = "node3", "172.18.0.4"


class CountingPods:
    """The daemon's pod source, counting the looks that found no allocation yet."""

    def __init__(self, inner: PodSource) -> None:
        self.inner = inner
        self.unallocated = 0
        self.lock = threading.Lock()

    def get_pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        obj = self.inner.get_pod(namespace, name)
        ann = ((obj or {}).get("metadata") or {}).get("annotations") or {}
        if obj is not None and ann.get("ovn.kubernetes.io/allocated") != "true":
            with self.lock:
                self.unallocated += 1
        return obj


@dataclass
class Runtime:
    """Plays containerd for node3: namespaces, and the plugin exec'd with the CNI variables."""

    plugin: Path
    conf: dict[str, Any]
    daemon: CniDaemon
    pods: CountingPods
    namespaces: list[str] = field(default_factory=list)

    def sandbox(self, state_dir: Path | None = None) -> str:
        """A new pod namespace: `ip netns add` (under /var/run/netns), or, with `state_dir`,
        bound to a file there as containerd does with `netns_mounts_under_state_dir`."""
        name = f"cni-{uuid.uuid4()}"
        if state_dir is None:
            run_tool(["ip", "netns", "add", name])
            path = f"/var/run/netns/{name}"
        else:
            path = str(state_dir / name)
            Path(path).touch()
            run_tool(["unshare", f"--net={path}", "true"])
        self.namespaces.append(path)
        run_tool(["nsenter", f"--net={path}", "ip", "link", "set", "lo", "up"])
        return path

    def remove(self, netns: str) -> None:
        with contextlib.suppress(Exception):
            if netns.startswith("/var/run/netns/"):
                run_tool(["ip", "netns", "delete", Path(netns).name])
            else:
                run_tool(["umount", netns])
                Path(netns).unlink()
        if netns in self.namespaces:
            self.namespaces.remove(netns)

    def cni(self, command: str, name: str, netns: str, cid: str) -> tuple[int, Any]:
        env = {
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": cid,
            "CNI_NETNS": netns,
            "CNI_IFNAME": "eth0",
            "CNI_PATH": str(self.plugin.parent),
            "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE={NS};K8S_POD_NAME={name}",
        }
        out = subprocess.run(
            [str(self.plugin)],
            input=json.dumps(self.conf),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return out.returncode, json.loads(out.stdout) if out.stdout.strip() else None


@pytest.fixture(scope="module")
def runtime(net: Net) -> Iterator[Runtime]:
    store = net.cluster.server.store
    store.create("nodes", node(NODE3, NODE3_IP))
    wait_for(
        lambda: (store.get("nodes", None, NODE3)["metadata"].get("annotations") or {}).get(
            IP_ADDRESS_ANNOTATION
        ),
        message="node3 has its join address",
    )
    with tempfile.TemporaryDirectory(prefix="cni") as d:
        plugin = install_plugin(Path(d) / "bin")
        socket = Path(d) / "kube-ovn-daemon.sock"
        conflist = json.loads(write_conflist(Path(d) / "net.d", socket).read_text())
        conf = {"cniVersion": conflist["cniVersion"], "name": conflist["name"]}
        conf.update(conflist["plugins"][0])
        kubeconfig = net.cluster.kubeconfig
        daemon = CniDaemon.for_kubeconfig(
            kubeconfig, net.dp, NODE3, socket, add_timeout=60, poll=0.2
        )
        pods = CountingPods(daemon.pods)
        daemon.pods = pods
        rt = Runtime(plugin, conf, daemon, pods)
        try:
            with daemon:
                yield rt
        finally:
            for netns in list(rt.namespaces):
                rt.remove(netns)
            with contextlib.suppress(Exception):
                wiring_of(daemon).unwire_node(NODE3)
            store.delete("nodes", None, NODE3)


def wiring_of(daemon: CniDaemon) -> CniWiring:
    """The data-plane wiring behind `daemon` (the daemon itself sees only its Protocol)."""
    assert isinstance(daemon.wiring, CniWiring)
    return daemon.wiring


def create(net: Net, name: str, annotations: dict[str, str] | None = None) -> None:
    obj = pod(name, NS, annotations=annotations, node_name=NODE3, grace=0)
    net.cluster.server.store.create("pods", obj)


def delete(net: Net, name: str) -> None:
    store = net.cluster.server.store
    if get_or_none(net.cluster.server, "pods", NS, name) is not None:
        store.delete("pods", NS, name, grace_period_seconds=0)


def pings(netns: str, address: str) -> bool:
    """One ping from the namespace at path `netns` is answered."""
    argv = ["nsenter", f"--net={netns}", "ping", "-n", "-q", "-c1", "-W1", address]
    return subprocess.run(argv, capture_output=True, timeout=10, check=False).returncode == 0


def eth0(netns: str) -> dict[str, Any]:
    out = run_tool(["nsenter", f"--net={netns}", "ip", "-j", "addr", "show", "dev", "eth0"])
    link: dict[str, Any] = json.loads(out)[0]
    return link


def addresses(result: Mapping[str, Any], version: int) -> str:
    for ip in result["ips"]:
        addr = ip["address"].split("/")[0]
        if (":" in addr) == (version == 6):
            return str(addr)
    raise LookupError(version)


def test_the_node_is_wired_before_its_first_pod(net: Net, runtime: Runtime) -> None:
    wiring = wiring_of(runtime.daemon)
    assert runtime.daemon.node_netns == wiring.node_netns(NODE3)
    assert Path(f"/run/netns/{runtime.daemon.node_netns}").exists()
    # ovn0 and its routes come with the Subnets, before any ADD
    wait_for(lambda: wiring.node_routes(NODE3).get("10.16.0.0/16"), message="node3's routes")
    probe = net.create("cni-probe0")
    net.reaches(runtime.daemon.node_netns, probe.ip())
    net.delete(probe)


def test_a_pod_wired_by_the_plugin_answers_pods_and_nodes(net: Net, runtime: Runtime) -> None:
    create(net, "cni-a")
    probe = net.create("cni-probe")  # on node1, wired by the sandbox kubelet
    netns, cid = runtime.sandbox(), uuid.uuid4().hex
    rc, result = runtime.cni("ADD", "cni-a", netns, cid)
    assert rc == 0, result
    ann = net.cluster.server.store.get("pods", NS, "cni-a")["metadata"]["annotations"]
    assert [ip["address"].split("/")[0] for ip in result["ips"]] == ann[
        "ovn.kubernetes.io/ip_address"
    ].split(",")
    assert result["interfaces"] == [
        {"name": "eth0", "mac": ann["ovn.kubernetes.io/mac_address"].lower(), "sandbox": netns}
    ]
    assert {r["dst"] for r in result["routes"]} == {"0.0.0.0/0", "::/0"}
    ids = net.cni.interfaces()[host_nic_name(cid, "eth0")]
    assert (ids["iface-id"], ids["pod_name"], ids["pod_namespace"]) == (
        "cni-a.default",
        "cni-a",
        NS,
    )
    assert eth0(netns)["address"] == ann["ovn.kubernetes.io/mac_address"].lower()

    node3_netns = runtime.daemon.node_netns
    for version in (4, 6):
        ip = addresses(result, version)
        net.reaches(probe.netns, ip)  # from a pod of another node
        net.reaches(node3_netns, ip)  # from its own node (ovn0 and the node routes)
        net.reaches(net.node_netns[NODE], ip)  # and from another node
    assert runtime.cni("CHECK", "cni-a", netns, cid) == (0, None)

    assert runtime.cni("DEL", "cni-a", netns, cid) == (0, None)
    assert host_nic_name(cid, "eth0") not in net.cni.interfaces()
    net.silent(probe.netns, addresses(result, 4))
    assert runtime.cni("DEL", "cni-a", netns, cid) == (0, None)  # again: nothing to do
    runtime.remove(netns)
    assert runtime.cni("DEL", "cni-a", netns, cid) == (0, None)  # the namespace is gone too
    delete(net, "cni-a")
    net.delete(probe)


def test_add_waits_for_the_controller_then_succeeds(net: Net, runtime: Runtime) -> None:
    # the pod names a subnet that does not exist yet: the controller cannot allocate it
    create(net, "cni-wait", {LOGICAL_SWITCH_ANNOTATION: "cni-later"})
    netns, cid = runtime.sandbox(), uuid.uuid4().hex
    before = runtime.pods.unallocated
    with ThreadPoolExecutor(1) as pool:
        add = pool.submit(runtime.cni, "ADD", "cni-wait", netns, cid)
        wait_for(
            lambda: runtime.pods.unallocated >= before + 2 or None,
            message="the daemon looked at the unallocated pod",
        )
        assert not add.done()
        net.subnet("cni-later", "10.41.0.0/24")
        rc, result = add.result(timeout=90)
    assert rc == 0, result
    assert addresses(result, 4).startswith("10.41.0.")
    probe = net.create("cni-probe2")
    net.reaches(probe.netns, addresses(result, 4))
    assert runtime.cni("DEL", "cni-wait", netns, cid) == (0, None)
    delete(net, "cni-wait")
    net.delete(probe)


def test_add_times_out_with_a_clear_error(net: Net, runtime: Runtime) -> None:
    create(net, "cni-never", {LOGICAL_SWITCH_ANNOTATION: "cni-nowhere"})
    netns, cid = runtime.sandbox(), uuid.uuid4().hex
    runtime.daemon.add_timeout = 2.0
    try:
        rc, error = runtime.cni("ADD", "cni-never", netns, cid)
    finally:
        runtime.daemon.add_timeout = 60.0
    assert rc == 1
    assert error["code"] == 11, error
    assert "no address allocated to pod default/cni-never" in error["msg"]
    assert host_nic_name(cid, "eth0") not in net.cni.interfaces()
    links = run_tool(["nsenter", f"--net={netns}", "ip", "-o", "link"])
    assert "eth0" not in links
    assert runtime.cni("DEL", "cni-never", netns, cid) == (0, None)
    delete(net, "cni-never")


def test_a_sandbox_made_again_takes_the_port_over(net: Net, runtime: Runtime) -> None:
    """The runtime restarted and made the pod a new sandbox (new container id and namespace)
    while the old one is still there: the new ADD takes the port over, the old sandbox's DEL
    leaves the new one alone."""
    create(net, "cni-again")
    probe = net.create("cni-probe3")
    old_netns, old_cid = runtime.sandbox(), uuid.uuid4().hex
    rc, result = runtime.cni("ADD", "cni-again", old_netns, old_cid)
    assert rc == 0, result
    # the new one bound under a state directory, as the test bed's containerd makes them
    new_netns, new_cid = runtime.sandbox(Path(runtime.plugin).parent.parent), uuid.uuid4().hex
    rc, again = runtime.cni("ADD", "cni-again", new_netns, new_cid)
    assert rc == 0, again
    assert again["ips"] == result["ips"]
    interfaces = net.cni.interfaces()
    assert host_nic_name(old_cid, "eth0") not in interfaces
    assert interfaces[host_nic_name(new_cid, "eth0")]["iface-id"] == "cni-again.default"
    assert runtime.cni("DEL", "cni-again", old_netns, old_cid) == (0, None)
    runtime.remove(old_netns)
    wait_for(lambda: pings(new_netns, probe.ip()), message="the new sandbox on the wire")
    net.reaches(probe.netns, addresses(again, 4))
    assert runtime.cni("CHECK", "cni-again", new_netns, new_cid) == (0, None)
    assert runtime.cni("DEL", "cni-again", new_netns, new_cid) == (0, None)
    delete(net, "cni-again")
    net.delete(probe)
