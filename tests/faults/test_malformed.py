"""Malformed input, end to end: one controller run, a table of bad pods.

One real controller (in-process), the API server emulator and a real NB ovsdb-server (the
tests/e2e fixtures) are shared by the whole module. Before the controller starts, the cluster
holds a few awkward objects: an exhausted subnet, a subnet with an invalid CIDR, one whose spec
has the wrong types (only a schema-less CRD lets that in), a subnet of an IPAM-only provider (the
last two bound to namespaces of their own), and NetworkAttachmentDefinitions, one of them with a
config that is not JSON. Then the `BAD` pods (each wrong in one way: annotations, namespace or
the subnet they name) are created interleaved with the `GOOD` ones.

Each bad pod must get a Warning Event with kube-ovn's reason (controller.core.constants.REASON_*)
and a message that says what is wrong, and a log line (ERROR/WARNING, naming the pod) saying the
same; it must stay unallocated, without a logical switch port. Every good pod must converge
(allocated, its port, routed once scheduled) and the consistency audit must find nothing but
the bad pods pending (plus the two malformed subnets, which it reports itself).
No handler may crash.

Decisions recorded here (kube-ovn v1.8.18 pkg/controller/pod.go getPodKubeovnNets,
handleAddPod and acquireAddress, pkg/util/validator.go, pkg/ipam):

* `ip_address` and `ip_pool` both set: `ip_address` wins, the pool is ignored (kube-ovn
  acquireAddress takes the static path first); such a pod is good.
* a static IP inside `excludeIps` is allowed (kube-ovn's IPAM lets a static request take a
  reserved address); such a pod is good. Deviation: the subnet's gateway is not (the pod's port
  would answer for the router's address): ValidatePodNetworkFailed
  (controller/pod_logic/request_check.py lists every refusal made before allocating).
* a v6 address on a v4 subnet is not an address of any candidate subnet: NoAvailableAddress (the
  reference IPAM behaviour), Event AcquireAddressFailed.
* deviation: kube-ovn emits no Event when the pod's networks cannot be resolved (unknown subnet,
  missing NAD, NAD config that is not JSON, the same subnet twice); a user then only sees a
  pending pod. Those errors carry ValidatePodNetworkFailed here, and stay retryable (creating
  the subnet or fixing the NAD heals the pod without touching it).
* deviation: the default network on a subnet that is not an OVN subnet (kube-ovn isOvnSubnet:
  provider "ovn" or "<nad>.<ns>.ovn") is refused with ValidatePodNetworkFailed; kube-ovn v1.8
  would create a port on a switch that must not exist. Named by the pod's `logical_switch`: a
  permanent error (the pod must change); inherited from its namespace: retryable.
* reference quirk kept: a static IP is tried on the namespace's subnets before the one the pod
  names, so `ip_address` of ovn-default with `logical_switch: full` lands on ovn-default.
* a malformed subnet (bad CIDR, wrong types) is skipped by every other pod; a pod naming it gets
  ValidatePodNetworkFailed saying what is wrong with it (retryable: fixing the subnet heals it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest

from controller.app import Controller
from controller.audit.audit import AuditReport, audit
from controller.audit.check import collect_snapshot
from controller.config import parse_args
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    ATTACHMENT_NETWORK_ANNOTATION,
    CIDR_ANNOTATION,
    EGRESS_RATE_ANNOTATION,
    EVENT_TYPE_WARNING,
    INGRESS_RATE_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    IP_POOL_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
    REASON_ACQUIRE_ADDRESS_FAILED,
    REASON_VALIDATE_POD_NETWORK_FAILED,
    ROUTED_ANNOTATION,
)
from controller.kube.client import KubeClient, load_api_client
from controller.testing import builders
from tests.e2e.conftest import Cluster, launch_controller, open_cluster
from tests.e2e.egress import egress_routes
from tests.e2e.helpers import NODE, annotations_of, get_or_none, pod, wait_for

pytestmark = pytest.mark.e2e

NS = "faults"
#: namespaces bound (subnet spec.namespaces) to the exhausted subnet and to an IPAM-only one
CROWDED_NS = "crowded"
FOREIGN_NS = "foreign"
VALIDATE = REASON_VALIDATE_POD_NETWORK_FAILED
ACQUIRE = REASON_ACQUIRE_ADDRESS_FAILED

HOLDER_IP = "10.16.0.50"
HOLDER_MAC = "00:00:00:aa:bb:cc"
IPAM_PROVIDER = f"macvlan.{NS}"

# --- cluster set-up (created before the controller starts) -----------------------------------

SUBNETS: tuple[dict[str, Any], ...] = (
    # no free address: .1 is the gateway, .2-.6 are excluded
    {
        "metadata": {"name": "full"},
        "spec": {
            "cidrBlock": "10.70.0.0/29",
            "excludeIps": ["10.70.0.2..10.70.0.6"],
            "namespaces": [CROWDED_NS],
        },
    },
    {"metadata": {"name": "bad-cidr"}, "spec": {"cidrBlock": "10.80.0.0/33"}},
    # a schema-less CRD would let this in; no other pod may suffer from it
    {"metadata": {"name": "typo"}, "spec": {"cidrBlock": ["10.81.0.0/24"]}},
    # an IPAM-only provider (macvlan attachments with kube-ovn IPAM)
    {
        "metadata": {"name": "macvlan"},
        "spec": {
            "cidrBlock": "10.72.0.0/24",
            "provider": IPAM_PROVIDER,
            "namespaces": [FOREIGN_NS],
        },
    },
)


def nad(name: str, config: str) -> dict[str, Any]:
    return builders.nad(name, NS, config)


NADS = (
    nad(
        "macvlan",
        '{"cniVersion": "0.3.1", "type": "macvlan", "master": "eth0",'
        f' "ipam": {{"type": "kube-ovn", "provider": "{IPAM_PROVIDER}"}}}}',
    ),
    nad("broken", '{"cniVersion": "0.3.1", "type": '),
    # an OVN attachment with no subnet of its own provider: it falls back to the pod's default
    # subnet, which the default network already uses
    nad("ovn-dup", '{"cniVersion": "0.3.1", "type": "kube-ovn"}'),
)


@dataclass(frozen=True)
class Bad:
    name: str
    annotations: dict[str, str]
    reason: str
    message: str  # a substring the Event message must contain (case-insensitive)
    namespace: str = NS

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Good:
    name: str
    annotations: dict[str, str] = field(default_factory=dict)
    ip: str = ""  # the address it must get ("" = any address of `subnet`)
    subnet: str = "ovn-default"


def ip(address: str, **more: str) -> dict[str, str]:
    return {IP_ADDRESS_ANNOTATION: address, **more}


def on(subnet: str, **more: str) -> dict[str, str]:
    return {LOGICAL_SWITCH_ANNOTATION: subnet, **more}


BAD: tuple[Bad, ...] = (
    # bad IPs
    Bad("ip-garbage", ip("not-an-ip"), VALIDATE, "not-an-ip is not a valid"),
    Bad("ip-octet", ip("10.16.0.300"), VALIDATE, "10.16.0.300 is not a valid"),
    Bad("ip-pair-garbage", ip("10.16.0.40,zz::1::2"), VALIDATE, "zz::1::2 is not a valid"),
    Bad("ip-network", ip("10.16.0.0"), VALIDATE, "network number"),
    Bad("ip-broadcast", ip("10.16.255.255"), VALIDATE, "broadcast"),
    # outside the CIDR / wrong family
    Bad("ip-outside", ip("10.99.0.5"), ACQUIRE, "AddressOutOfRange"),
    Bad("ip-of-another-subnet", ip("10.70.0.4"), ACQUIRE, "10.70.0.4 is outside 10.16.0.0/16"),
    Bad("ip-v6-on-v4", ip("fd00::5"), ACQUIRE, "NoAvailableAddress"),
    # conflicting annotations
    Bad(
        "ip-not-in-cidr-annotation",
        ip("10.16.0.42", **{CIDR_ANNOTATION: "10.17.0.0/16"}),
        VALIDATE,
        "not in cidr 10.17.0.0/16",
    ),
    Bad(
        "cidr-annotation-garbage",
        ip("10.16.0.43", **{CIDR_ANNOTATION: "10.16.0.0/99"}),
        VALIDATE,
        "invalid cidr",
    ),
    # taken addresses and MACs
    Bad("ip-taken", ip(HOLDER_IP), ACQUIRE, "AddressConflict"),
    Bad(
        "mac-taken",
        ip("10.16.0.44", **{MAC_ADDRESS_ANNOTATION: HOLDER_MAC}),
        ACQUIRE,
        "AddressConflict",
    ),
    # bad MACs
    Bad(
        "mac-garbage",
        {MAC_ADDRESS_ANNOTATION: "00:00:00:zz:11:22"},
        VALIDATE,
        "is not a valid ovn.kubernetes.io/mac_address",
    ),
    Bad(
        "mac-short",
        ip("10.16.0.45", **{MAC_ADDRESS_ANNOTATION: "00:00:00:aa:bb"}),
        VALIDATE,
        "00:00:00:aa:bb is not a valid",
    ),
    Bad("gateway-ip", ip("10.70.0.1", **on("full")), VALIDATE, "is the gateway of subnet full"),
    # bad pool entries
    Bad(
        "pool-garbage",
        {IP_POOL_ANNOTATION: "10.16.0.46,garbage"},
        VALIDATE,
        "garbage in ovn.kubernetes.io/ip_pool is not a valid address",
    ),
    Bad("pool-taken", {IP_POOL_ANNOTATION: HOLDER_IP}, ACQUIRE, "NoAvailableAddress"),
    Bad(
        "pool-outside", {IP_POOL_ANNOTATION: "10.99.0.1, 10.99.0.2"}, ACQUIRE, "NoAvailableAddress"
    ),
    Bad(
        "rate-garbage",
        {INGRESS_RATE_ANNOTATION: "fast", EGRESS_RATE_ANNOTATION: "1.5"},
        VALIDATE,
        "fast is not a valid ovn.kubernetes.io/ingress_rate",
    ),
    # unknown, malformed, foreign and exhausted subnets
    Bad("subnet-unknown", on("no-such-subnet"), VALIDATE, "no-such-subnet"),
    Bad("subnet-bad-cidr", on("bad-cidr"), VALIDATE, "'10.80.0.0/33' is not a valid CIDR"),
    Bad("subnet-typo", on("typo"), VALIDATE, "spec.cidrBlock must be a string"),
    Bad("subnet-foreign-provider", on("macvlan"), VALIDATE, IPAM_PROVIDER),
    Bad("subnet-exhausted", on("full"), ACQUIRE, "NoAvailableAddress"),
    # the same, inherited from the namespace
    Bad("ns-subnet-exhausted", {}, ACQUIRE, "NoAvailableAddress", CROWDED_NS),
    Bad("ns-subnet-foreign-provider", {}, VALIDATE, "not an OVN subnet", FOREIGN_NS),
    # malformed attachments, missing or broken NADs
    Bad(
        "attach-json",
        {ATTACHMENT_NETWORK_ANNOTATION: '[{"name": "macvlan"'},
        VALIDATE,
        "failed to parse pod network selection annotation as JSON",
    ),
    Bad(
        "attach-not-list",
        {ATTACHMENT_NETWORK_ANNOTATION: '{"name": "macvlan"}'},
        VALIDATE,
        "must be a list",
    ),
    Bad(
        "attach-bad-name",
        {ATTACHMENT_NETWORK_ANNOTATION: "Mac_Vlan"},
        VALIDATE,
        "failed to parse network name",
    ),
    Bad(
        "attach-bad-ip",
        {ATTACHMENT_NETWORK_ANNOTATION: '[{"name": "macvlan", "ips": ["x"]}]'},
        VALIDATE,
        "failed to parse IP address",
    ),
    Bad(
        "attach-missing-nad",
        {ATTACHMENT_NETWORK_ANNOTATION: "nowhere"},
        VALIDATE,
        f"network-attachment-definition {NS}/nowhere not found",
    ),
    Bad(
        "attach-broken-nad",
        {ATTACHMENT_NETWORK_ANNOTATION: "broken"},
        VALIDATE,
        f"config of net-attach-def {NS}/broken",
    ),
    Bad(
        "attach-same-subnet",
        {ATTACHMENT_NETWORK_ANNOTATION: "ovn-dup"},
        VALIDATE,
        "subnet conflict",
    ),
)

GOOD: tuple[Good, ...] = (
    Good("plain"),
    Good("static", ip("10.16.0.51"), "10.16.0.51"),
    # decided per reference: ip_address wins over ip_pool
    Good("ip-and-pool", ip("10.16.0.52", **{IP_POOL_ANNOTATION: "10.16.0.53"}), "10.16.0.52"),
    Good("pool-skips-taken", {IP_POOL_ANNOTATION: f"{HOLDER_IP},10.16.0.54"}, "10.16.0.54"),
    Good("excluded-ip", ip("10.70.0.3", **on("full")), "10.70.0.3", "full"),
    # reference quirk (see the module docstring)
    Good("static-from-ns-subnet", ip("10.16.0.41", **on("full")), "10.16.0.41"),
    Good("with-ipam-attachment", {ATTACHMENT_NETWORK_ANNOTATION: "macvlan"}),
    Good("mac-dashes", {MAC_ADDRESS_ANNOTATION: "00-00-00-aa-bb-01"}),
)
HOLDER = Good("holder", ip(HOLDER_IP, **{MAC_ADDRESS_ANNOTATION: HOLDER_MAC}), HOLDER_IP)


# --- the run ---------------------------------------------------------------------------------


class _Records(logging.Handler):
    """Keeps every WARNING+ record of the controller's loggers."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def lines(self) -> list[str]:
        return [r.getMessage() for r in self.records]


@dataclass
class Run:
    cluster: Cluster
    controller: Controller
    log: _Records


def _events(cluster: Cluster, name: str, ns: str = NS) -> list[dict[str, Any]]:
    events = cluster.server.store.list("events", ns)
    return [e for e in events if e["involvedObject"]["name"] == name]


def _allocated(cluster: Cluster, name: str, ns: str = NS) -> bool:
    return annotations_of(cluster.server, "pods", ns, name).get(ALLOCATED_ANNOTATION) == "true"


def _bound(cluster: Cluster, namespace: str, subnet: str) -> bool:
    ns = annotations_of(cluster.server, "namespaces", None, namespace)
    return ns.get(LOGICAL_SWITCH_ANNOTATION) == subnet


def _routed(cluster: Cluster, name: str) -> bool:
    return annotations_of(cluster.server, "pods", NS, name).get(ROUTED_ANNOTATION) == "true"


def contains(items: Callable[[], Iterable[str]], item: str) -> bool:
    return item in items()


@pytest.fixture(scope="module")
def run() -> Iterator[Run]:
    log = _Records()
    logger = logging.getLogger("controller")
    logger.addHandler(log)
    try:
        with open_cluster() as cluster:
            store = cluster.server.store
            for ns in (NS, CROWDED_NS, FOREIGN_NS):
                store.create("namespaces", {"metadata": {"name": ns}})
            for subnet_obj in SUBNETS:
                store.create("subnets", subnet_obj)
            for obj in NADS:
                store.create("network-attachment-definitions", obj)
            controller = launch_controller(cluster)
            try:
                wait_for(controller.workers_started.is_set, message="workers started")
                bindings = ((NS, "ovn-default"), (CROWDED_NS, "full"), (FOREIGN_NS, "macvlan"))
                for ns, subnet in bindings:
                    wait_for(partial(_bound, cluster, ns, subnet), message=f"namespace {ns} bound")
                for name in ("full", "macvlan"):
                    wait_for(
                        partial(contains, controller.ipam.subnet_names, name),
                        message=f"subnet {name} in IPAM",
                    )
                store.create("pods", pod(HOLDER.name, NS, annotations=HOLDER.annotations))
                wait_for(lambda: _allocated(cluster, HOLDER.name), message="holder allocated")
                # bad and good pods interleaved
                goods = iter(GOOD)
                for case in BAD:
                    store.create(
                        "pods", pod(case.name, case.namespace, annotations=case.annotations)
                    )
                    good = next(goods, None)
                    if good is not None:
                        store.create("pods", pod(good.name, NS, annotations=good.annotations))
                for good in goods:
                    store.create("pods", pod(good.name, NS, annotations=good.annotations))
                yield Run(cluster, controller, log)
            finally:
                controller.stop()
    finally:
        logger.removeHandler(log)


# --- the verdicts ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.name)
def test_bad_pod_gets_a_warning_event_and_a_log_line(run: Run, case: Bad) -> None:
    cluster = run.cluster
    ns = case.namespace
    found = wait_for(
        lambda: [e for e in _events(cluster, case.name, ns) if e["reason"] == case.reason],
        message=f"{case.reason} event of {case.key}",
    )
    event = found[0]
    assert event["type"] == EVENT_TYPE_WARNING
    assert case.message.lower() in event["message"].lower(), event["message"]
    lines = [line for line in run.log.lines() if case.key in line]
    assert any(case.message.lower() in line.lower() for line in lines), lines
    assert not _allocated(cluster, case.name, ns)
    assert cluster.nb.get_port(f"{case.name}.{ns}") is None
    assert get_or_none(cluster.server, "ips", None, f"{case.name}.{ns}") is None
    assert run.controller.ipam.get_pod_address(case.key) == []


def test_good_pods_converge(run: Run) -> None:
    cluster = run.cluster
    store = cluster.server.store
    for good in (HOLDER, *GOOD):
        wait_for(partial(_allocated, cluster, good.name), message=f"{good.name} allocated")
        store.patch("pods", NS, good.name, {"spec": {"nodeName": NODE}})
    for good in (HOLDER, *GOOD):
        wait_for(partial(_routed, cluster, good.name), message=f"{good.name} routed")
        ann = annotations_of(cluster.server, "pods", NS, good.name)
        assert ann[LOGICAL_SWITCH_ANNOTATION] == good.subnet, good.name
        if good.ip:
            assert ann[IP_ADDRESS_ANNOTATION] == good.ip, good.name
        port = cluster.nb.get_port(f"{good.name}.{NS}")
        assert port is not None and port.switch == good.subnet, good.name
        routes = {r[0] for r in egress_routes(cluster.nb)}
        assert ann[IP_ADDRESS_ANNOTATION] in routes, good.name
    # the IPAM-only attachment: an address of its subnet and an IP CR, no port
    ann = annotations_of(cluster.server, "pods", NS, "with-ipam-attachment")
    assert ann[f"{IPAM_PROVIDER}.kubernetes.io/allocated"] == "true"
    assert ann[f"{IPAM_PROVIDER}.kubernetes.io/ip_address"].startswith("10.72.0.")
    name = f"with-ipam-attachment.{NS}.{IPAM_PROVIDER}"
    assert get_or_none(cluster.server, "ips", None, name) is not None
    assert cluster.nb.get_port(name) is None


def test_audit_reports_only_the_bad_pods_refused(run: Run) -> None:
    test_good_pods_converge(run)  # idempotent: waits for the good pods if run alone
    test_no_handler_crashed(run)  # every bad pod has its Event
    report = _audit(run.cluster)
    # the audit flags the two malformed subnets itself, and the refused pods with the reason
    # of their Event, and nothing else: none of them is "pending"
    assert {(f.kind, f.object) for f in report.findings} == {
        ("malformed-object", "Subnet 'typo'"),
        ("ipam-disagrees", "subnet bad-cidr"),
        *(("pod-refused", f"pod {c.key}") for c in BAD),
    }, report.render()
    refused = {f.object: f.message for f in report.findings if f.kind == "pod-refused"}
    for case in BAD:
        assert f"{case.reason}: " in refused[f"pod {case.key}"], refused[f"pod {case.key}"]
    assert report.pending == (), report.render()


def test_no_handler_crashed(run: Run) -> None:
    for case in BAD:
        wait_for(partial(_events, run.cluster, case.name, case.namespace), message=case.key)
    assert run.controller.wait(0) is None  # still running
    crashes = [r for r in run.log.records if r.exc_info]  # tracebacks are logged for bugs only
    assert not crashes, [r.getMessage() for r in crashes]


def _audit(cluster: Cluster) -> AuditReport:
    config = parse_args(["check", *cluster.argv()], {"KUBE_NAMESPACE": "kube-system"})
    api = load_api_client(str(cluster.kubeconfig), worker_threads=1)
    try:
        snapshot = collect_snapshot(KubeClient(api), cluster.nb, cluster_router="ovn-cluster")
    finally:
        api.close()
    return audit(snapshot, config)


def test_only_ovn_subnets_get_a_logical_switch(run: Run) -> None:
    # kube-ovn handleAddOrUpdateSubnet stops after IPAM for a non-OVN subnet: an IPAM-only
    # provider has no switch, and a pod's default network cannot land there
    switches = wait_for(
        lambda: s if "full" in (s := run.cluster.nb.list_logical_switches()) else None,
        message="the switch of subnet full",
    )
    assert "macvlan" not in switches
    assert run.controller.ipam.has_subnet("macvlan")
