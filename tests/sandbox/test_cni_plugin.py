"""The CNI plugin stand-in's protocol, run as the installed executable (as a runtime execs it,
with nothing but the CNI variables in its environment) against the daemon serving a fake
wiring and an in-memory IP CR store: VERSION, the spec's error codes, the ADD result, DEL and
CHECK, the daemon's wait for the controller's annotations and its deadline, and its write of
the pod's IP CR (kube-ovn v1.8.18 pkg/daemon/handler.go `UpdateIPCr`)."""

from __future__ import annotations

import copy
import json
import logging
import os
import stat
import subprocess
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from controller.sandbox.cluster.wiring import WiringError
from controller.sandbox.ovn.cni_daemon import CniDaemon
from controller.sandbox.ovn.cni_install import CONFLIST, install_plugin, write_conflist
from controller.sandbox.ovn.cni_plan import NicPlan, host_nic_name, plan_pod_nic

NETNS = "/var/run/netns/cni-test"
CID = "0123456789abcdef0123"
DUAL = {
    "ovn.kubernetes.io/allocated": "true",
    "ovn.kubernetes.io/routed": "true",
    "ovn.kubernetes.io/ip_address": "10.16.0.5,fd00:10:16::5",
    "ovn.kubernetes.io/mac_address": "00:00:00:AA:BB:CC",
    "ovn.kubernetes.io/cidr": "10.16.0.0/16,fd00:10:16::/64",
    "ovn.kubernetes.io/gateway": "10.16.0.1,fd00:10:16::1",
    "ovn.kubernetes.io/logical_switch": "ovn-default",
}


def pod(annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta = {"name": "web", "namespace": "default", "uid": "u1"}
    return {"metadata": {**meta, "annotations": dict(annotations or {})}, "spec": {}}


@dataclass
class FakeWiring:
    """Records what the daemon asks; plans from the pod's annotations as the real one does."""

    wired: list[tuple[str, str, str, str]] = field(default_factory=list)
    unwired: list[tuple[str, str]] = field(default_factory=list)
    check_error: str = ""

    def wire_container(
        self, pod: Mapping[str, Any], netns: str, container_id: str, ifname: str, provider: str
    ) -> NicPlan:
        self.wired.append((netns, container_id, ifname, provider))
        return plan_pod_nic(pod, provider, ifname)

    def unwire_container(self, container_id: str, ifname: str) -> None:
        self.unwired.append((container_id, ifname))

    def check_container(
        self, pod: Mapping[str, Any], netns: str, container_id: str, ifname: str, provider: str
    ) -> NicPlan:
        if self.check_error:
            raise WiringError(self.check_error)
        return plan_pod_nic(pod, provider, ifname)

    def set_subnets(self, subnets: list[Mapping[str, Any]]) -> None:
        return None

    def prepare_node(self, name: str) -> str:
        return f"ns-{name}"

    def ensure_node(self, name: str) -> bool:
        return False


def ip_cr(name: str, pod_name: str = "web", subnet: str = "ovn-default") -> dict[str, Any]:
    """An IP CR as the controller writes it for a pod it allocated before it was scheduled."""
    return {
        "apiVersion": "kubeovn.io/v1",
        "kind": "IP",
        "metadata": {
            "name": name,
            "resourceVersion": "1",
            "labels": {"ovn.kubernetes.io/subnet": subnet},
        },
        "spec": {
            "podName": pod_name,
            "namespace": "default",
            "subnet": subnet,
            "nodeName": "",
            "ipAddress": "10.16.0.5,fd00:10:16::5",
            "macAddress": "00:00:00:AA:BB:CC",
            "attachIps": ["10.17.0.9"],
            "attachSubnets": ["old"],
            "attachMacs": ["00:00:00:00:00:09"],
        },
    }


class IpCrs:
    """IP CRs with the API server's optimistic concurrency: a PUT must carry the stored
    resourceVersion. `race` makes another writer change the CR right after each GET."""

    def __init__(self, *crs: dict[str, Any]) -> None:
        self.crs = {cr["metadata"]["name"]: cr for cr in crs}
        self.race = False
        self.lock = threading.Lock()

    def get_ip(self, name: str) -> Mapping[str, Any] | None:
        with self.lock:
            cr = copy.deepcopy(self.crs.get(name))
            if cr is not None and self.race:
                self._bump(self.crs[name])
            return cr

    def update_ip(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        with self.lock:
            name = body["metadata"]["name"]
            have = self.crs.get(name)
            if have is None:
                raise RuntimeError(f'(404) ips.kubeovn.io "{name}" not found')
            if body["metadata"].get("resourceVersion") != have["metadata"]["resourceVersion"]:
                raise RuntimeError(f'(409) Operation cannot be fulfilled on ips "{name}"')
            new = copy.deepcopy(dict(body))
            self._bump(new)
            self.crs[name] = new
            return new

    @staticmethod
    def _bump(cr: dict[str, Any]) -> None:
        cr["metadata"]["resourceVersion"] = str(int(cr["metadata"]["resourceVersion"]) + 1)


class Pods:
    """The pod as the API would return it; `after` looks return the annotated version."""

    def __init__(self, first: dict[str, Any] | None, then: dict[str, Any] | None, after: int):
        self.first, self.then, self.after = first, then, after
        self.looks = 0
        self.lock = threading.Lock()

    def get_pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        with self.lock:
            self.looks += 1
            return self.then if self.looks > self.after else self.first


@dataclass
class Bed:
    plugin: Path
    socket: Path
    conf: dict[str, Any]
    wiring: FakeWiring
    pods: Pods
    ips: IpCrs
    daemon: CniDaemon

    def run(
        self, command: str, *, conf: Any = None, env: Mapping[str, str | None] | None = None
    ) -> tuple[int, Any]:
        base = {
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": CID,
            "CNI_NETNS": NETNS,
            "CNI_IFNAME": "eth0",
            "CNI_PATH": str(self.plugin.parent),
            "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web",
        }
        merged = {k: v for k, v in {**base, **(env or {})}.items() if v is not None}
        stdin = conf if isinstance(conf, str) else json.dumps(self.conf if conf is None else conf)
        out = subprocess.run(
            [str(self.plugin)],
            input=stdin,
            env=merged,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 0 or out.stdout, out.stderr
        return out.returncode, json.loads(out.stdout) if out.stdout.strip() else None


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[Bed]:
    plugin = install_plugin(tmp_path / "bin", loopback=False)
    socket = tmp_path / "kube-ovn-daemon.sock"
    conflist = json.loads(write_conflist(tmp_path / "net.d", socket).read_text())
    wiring = FakeWiring()
    pods = Pods(pod(DUAL), pod(DUAL), 0)
    ips = IpCrs(ip_cr("web.default"))
    daemon = CniDaemon(wiring, pods, socket, "node1", ips=ips, add_timeout=1.0, poll=0.01)
    conf = {**conflist["plugins"][0], "cniVersion": "1.0.0"}
    with daemon:
        yield Bed(plugin, socket, conf, wiring, pods, ips, daemon)


def test_the_installed_plugin_and_conflist(tmp_path: Path) -> None:
    plugin = install_plugin(tmp_path / "bin", loopback=False)
    assert plugin.name == "kube-ovn" and plugin.stat().st_mode & stat.S_IXUSR
    path = write_conflist(tmp_path / "net.d", "/run/x.sock")
    assert path.name == CONFLIST
    assert json.loads(path.read_text()) == {
        "cniVersion": "1.0.0",
        "name": "kube-ovn",
        "plugins": [{"type": "kube-ovn", "server_socket": "/run/x.sock"}],
    }
    # VERSION with nothing else in the environment, as a runtime may exec it
    out = subprocess.run(
        [str(plugin)],
        env={"CNI_COMMAND": "VERSION"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "cniVersion": "1.0.0",
        "supportedVersions": ["0.3.0", "0.3.1", "0.4.0", "1.0.0"],
    }
    assert os.access(plugin, os.X_OK)


def test_add_returns_the_spec_result_from_the_annotations(bed: Bed) -> None:
    rc, result = bed.run("ADD")
    assert rc == 0, result
    assert result == {
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "eth0", "mac": "00:00:00:aa:bb:cc", "sandbox": NETNS}],
        "ips": [
            {"address": "10.16.0.5/16", "interface": 0, "gateway": "10.16.0.1"},
            {"address": "fd00:10:16::5/64", "interface": 0, "gateway": "fd00:10:16::1"},
        ],
        "routes": [
            {"dst": "0.0.0.0/0", "gw": "10.16.0.1"},
            {"dst": "::/0", "gw": "fd00:10:16::1"},
        ],
        "dns": {},
    }
    assert bed.wiring.wired == [(NETNS, CID, "eth0", "ovn")]


def test_an_older_cni_version_gets_its_result_shape(bed: Bed) -> None:
    rc, result = bed.run("ADD", conf={**bed.conf, "cniVersion": "0.4.0"})
    assert rc == 0, result
    assert result["cniVersion"] == "0.4.0"
    assert [ip["version"] for ip in result["ips"]] == ["4", "6"]


def test_add_waits_for_the_controller_then_succeeds(bed: Bed) -> None:
    allocated_not_routed = {**DUAL, "ovn.kubernetes.io/routed": ""}
    bed.pods.first, bed.pods.then, bed.pods.after = pod(allocated_not_routed), pod(DUAL), 3
    bed.daemon.add_timeout = 30.0
    rc, result = bed.run("ADD")
    assert rc == 0, result
    assert bed.pods.looks == 4  # three looks waiting, the fourth saw the route
    assert result["ips"][0]["address"] == "10.16.0.5/16"


@pytest.mark.parametrize(
    ("annotations", "words"),
    [
        ({}, "no address allocated to pod default/web"),
        ({**DUAL, "ovn.kubernetes.io/routed": ""}, "route is not ready for pod default/web"),
    ],
)
def test_add_gives_up_at_the_deadline_with_try_again_later(
    bed: Bed, annotations: dict[str, str], words: str
) -> None:
    bed.pods.first = bed.pods.then = pod(annotations)
    rc, error = bed.run("ADD")
    assert rc == 1
    assert error["code"] == 11 and error["cniVersion"] == "1.0.0"
    assert words in error["msg"] and "after 1s" in error["msg"]
    assert bed.wiring.wired == []


def test_add_of_a_pod_that_does_not_exist_fails_at_once(bed: Bed) -> None:
    bed.pods.first = bed.pods.then = None
    bed.daemon.add_timeout = 60.0
    rc, error = bed.run("ADD")
    assert rc == 1 and error["code"] == 999
    assert "get pod default/web failed: not found" in error["msg"]
    assert bed.pods.looks == 1


def test_del_is_idempotent_and_needs_no_netns(bed: Bed, caplog: pytest.LogCaptureFixture) -> None:
    assert bed.run("DEL") == (0, None)
    assert bed.run("DEL", env={"CNI_NETNS": None}) == (0, None)
    bed.pods.first = bed.pods.then = None  # the pod is gone: the port still goes
    assert bed.run("DEL") == (0, None)
    assert bed.wiring.unwired == [(CID, "eth0")] * 3
    # the daemon answered each one cleanly (no body written after the plugin hung up)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_check(bed: Bed) -> None:
    assert bed.run("CHECK") == (0, None)
    bed.wiring.check_error = "eth0 has mac 00:00:00:00:00:01"
    rc, error = bed.run("CHECK")
    assert rc == 1 and error["code"] == 999 and "00:00:00:00:00:01" in error["msg"]


def test_a_provider_no_subnet_serves_is_refused(bed: Bed) -> None:
    rc, error = bed.run("ADD", conf={**bed.conf, "provider": "nad.ns.other"})
    assert rc == 1 and "provider nad.ns.other not bind to any subnet" in error["msg"]
    bed.daemon.set_subnets([{"spec": {"provider": "nad.ns.other"}}])
    assert bed.run("ADD", conf={**bed.conf, "provider": "nad.ns.other"})[0] == 1  # not allocated
    assert bed.wiring.wired == []


@pytest.mark.parametrize(
    ("conf", "env", "code", "words"),
    [
        ("{not json", {}, 6, "failed to load netconf"),
        ({"cniVersion": "1.0.0", "type": "kube-ovn"}, {}, 7, "server_socket is required"),
        ({"cniVersion": "9.9.9", "server_socket": "/x"}, {}, 1, "incompatible CNI versions"),
        (None, {"CNI_CONTAINERID": None}, 4, "CNI_CONTAINERID is required"),
        (None, {"CNI_NETNS": None}, 4, "CNI_NETNS is required"),
        (None, {"CNI_PATH": None}, 4, "CNI_PATH is required"),
        (None, {"CNI_ARGS": "K8S_POD_NAMESPACE=default"}, 4, "K8S_POD_NAME is required"),
        (None, {"CNI_COMMAND": None}, 4, "CNI_COMMAND is required"),
        (None, {"CNI_COMMAND": "GC"}, 4, "unknown CNI_COMMAND 'GC'"),
    ],
)
def test_bad_input_is_the_spec_error(
    bed: Bed, conf: Any, env: dict[str, str | None], code: int, words: str
) -> None:
    rc, error = bed.run("ADD", conf=conf, env=env)
    assert rc == 1
    assert error["code"] == code and words in error["msg"], error
    assert bed.wiring.wired == []


def test_a_daemon_that_is_not_there_is_an_io_failure(bed: Bed) -> None:
    rc, error = bed.run("ADD", conf={**bed.conf, "server_socket": str(bed.socket) + ".none"})
    assert rc == 1 and error["code"] == 5 and "cannot reach the CNI daemon" in error["msg"]


def test_ipam_mode_takes_the_socket_and_provider_from_the_ipam_section(bed: Bed) -> None:
    conf = {
        "cniVersion": "1.0.0",
        "type": "macvlan",
        "ipam": {"type": "kube-ovn", "server_socket": str(bed.socket), "provider": "m.ns.ovn"},
    }
    ann = {k.replace("ovn.kubernetes.io", "m.ns.ovn.kubernetes.io"): v for k, v in DUAL.items()}
    bed.pods.first = bed.pods.then = pod(ann)
    bed.ips.crs["web.default.m.ns.ovn"] = ip_cr("web.default.m.ns.ovn")
    rc, result = bed.run("ADD", conf=conf, env={"CNI_IFNAME": "net1"})
    assert rc == 0, result
    assert result["routes"] == [] and "gateway" not in result["ips"][0]
    assert bed.wiring.wired == [(NETNS, CID, "net1", "m.ns.ovn")]


def test_host_nic_names_are_kube_ovns_and_fit_ifnamsiz() -> None:
    assert host_nic_name(CID, "eth0") == "0123456789ab_h"
    assert host_nic_name(CID, "net1") == "01234567_net1_h"
    assert all(len(host_nic_name(CID, i)) <= 15 for i in ("eth0", "net1", "a-very-long-if"))


def ipam_only(bed: Bed) -> dict[str, Any]:
    """A macvlan conflist entry with kube-ovn as its IPAM (provider `mv.ns`), the pod allocated
    on that provider and its IP CR made; returns the network config."""
    bed.daemon.set_subnets([{"spec": {"provider": "mv.ns"}}])
    ann = {k.replace("ovn.kubernetes.io", "mv.ns.kubernetes.io"): v for k, v in DUAL.items()}
    bed.pods.first = bed.pods.then = pod(ann)
    bed.ips.crs["web.default.mv.ns"] = ip_cr("web.default.mv.ns")
    return {
        "cniVersion": "1.0.0",
        "type": "macvlan",
        "ipam": {"type": "kube-ovn", "server_socket": str(bed.socket), "provider": "mv.ns"},
    }


def test_a_provider_kube_ovn_serves_as_ipam_only_gets_addresses_and_no_wiring(bed: Bed) -> None:
    conf = ipam_only(bed)
    rc, result = bed.run("ADD", conf=conf, env={"CNI_IFNAME": "net1"})
    assert rc == 0, result
    assert [ip["address"] for ip in result["ips"]] == ["10.16.0.5/16", "fd00:10:16::5/64"]
    assert bed.wiring.wired == []


def recorded(cr: Mapping[str, Any], node: str = "node1") -> dict[str, Any]:
    """`cr` once the daemon of `node` wrote it back (one write: resourceVersion + 1)."""
    out = copy.deepcopy(dict(cr))
    meta, spec = out["metadata"], out["spec"]
    meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
    meta["labels"][spec["subnet"]] = ""
    spec.update(nodeName=node, attachIps=[], attachSubnets=[], attachMacs=[])
    return out


def test_add_records_the_node_in_the_pods_ip_cr(bed: Bed) -> None:
    before = copy.deepcopy(bed.ips.crs["web.default"])
    rc, result = bed.run("ADD")
    assert rc == 0, result
    assert bed.ips.crs["web.default"] == recorded(before)


def test_add_names_the_ip_cr_after_the_provider_and_the_vm(bed: Bed) -> None:
    conf = ipam_only(bed)
    before = copy.deepcopy(bed.ips.crs)
    # kube-ovn as another plugin's IPAM: no wiring, but the IP CR write all the same
    assert bed.run("ADD", conf=conf, env={"CNI_IFNAME": "net1"})[0] == 0
    assert bed.ips.crs == {**before, "web.default.mv.ns": recorded(before["web.default.mv.ns"])}

    # a KubeVirt VM's pod: the CR (and port) of the VM
    vm = {**DUAL, "ovn.kubernetes.io/virtualmachine": "vm1"}
    bed.pods.first = bed.pods.then = pod(vm)
    bed.ips.crs["vm1.default"] = ip_cr("vm1.default", "vm1")
    before = copy.deepcopy(bed.ips.crs)
    assert bed.run("ADD")[0] == 0
    assert bed.ips.crs == {**before, "vm1.default": recorded(before["vm1.default"])}


def test_add_without_an_ip_cr_fails_and_wires_nothing(bed: Bed) -> None:
    del bed.ips.crs["web.default"]
    rc, error = bed.run("ADD")
    assert rc == 1 and error["code"] == 999
    assert error["msg"].endswith(
        'failed to get ip crd for 10.16.0.5,fd00:10:16::5, ips.kubeovn.io "web.default" not found'
    ), error
    assert bed.wiring.wired == [] and bed.ips.crs == {}


def test_add_fails_when_the_ip_cr_changed_since_the_daemon_read_it(bed: Bed) -> None:
    bed.ips.race = True
    before = copy.deepcopy(bed.ips.crs["web.default"])
    rc, error = bed.run("ADD")
    assert rc == 1 and error["code"] == 999
    assert "failed to update ip crd for 10.16.0.5,fd00:10:16::5, (409)" in error["msg"], error
    assert bed.wiring.wired == []
    # only the other writer's change is there; the runtime's retry then goes through
    assert bed.ips.crs["web.default"]["spec"] == before["spec"]
    bed.ips.race = False
    assert bed.run("ADD")[0] == 0
    assert bed.ips.crs["web.default"]["spec"] == recorded(before)["spec"]


def test_a_pod_never_routed_still_gets_its_ip_cr_written_before_the_refusal(bed: Bed) -> None:
    bed.pods.first = bed.pods.then = pod({**DUAL, "ovn.kubernetes.io/routed": ""})
    before = copy.deepcopy(bed.ips.crs["web.default"])
    rc, error = bed.run("ADD")
    assert rc == 1 and "route is not ready for pod default/web" in error["msg"]
    assert bed.ips.crs["web.default"] == recorded(before)
    assert bed.wiring.wired == []


def test_a_pod_never_allocated_leaves_its_ip_cr_alone(bed: Bed) -> None:
    bed.pods.first = bed.pods.then = pod({})
    before = copy.deepcopy(bed.ips.crs)
    assert bed.run("ADD")[0] == 1
    assert bed.ips.crs == before


def test_del_and_check_leave_the_ip_cr_alone(bed: Bed) -> None:
    before = copy.deepcopy(bed.ips.crs)
    assert bed.run("CHECK") == (0, None)
    assert bed.run("DEL") == (0, None)
    assert bed.ips.crs == before


def test_the_pod_uid_is_not_checked(bed: Bed) -> None:
    # kube-ovn v1.8.18's plugin reads only K8S_POD_NAME and K8S_POD_NAMESPACE: the pod that has
    # that name now is the one networked, whatever UID the runtime names
    args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_UID=not-u1"
    rc, result = bed.run("ADD", env={"CNI_ARGS": args})
    assert rc == 0, result
    assert bed.wiring.wired == [(NETNS, CID, "eth0", "ovn")]
