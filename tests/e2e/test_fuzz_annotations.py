"""Fuzzing the pod annotations kube-ovn reads, against the real controller (in-process), the API
server emulator and a real NB ovsdb-server.

Three subnets a pod may name (ovn-default, a custom IPv4 one, a dual-stack one), the node
switch, and an OVN attachment (NAD `att`, provider `att.fuzz.ovn`, its own subnet) whose
`<provider>.kubernetes.io/*` keys are fuzzed too. Each example is a batch of pods. Every pod is
built from one input class per dimension (`SWITCH`, `ADDRESS`, `MAC`, `SECURITY`, `RATE`,
`ATTACHMENT`, or the hand-allocated ghost), and each class says whether it is acceptable and, if
not, which Warning Event reasons may refuse it. A batch is created at once, scheduled on the
node; then, once every pod has converged:

* every good pod has its network: allocated and routed, its port on the subnet it asked for
  with its address, its IP CR (and the same for its attachment);
* every bad pod has a Warning Event with one of its classes' reasons, and nothing else: not
  allocated, no port, no IP CR, no address in IPAM;
* the nodes' IP CRs are untouched, and no pod holds a subnet's gateway;
* `check --strict` (controller.audit.check) exits 1 exactly when the batch has a bad pod, its
  findings are `pod-refused` for exactly the bad pods, nothing is pending, and its last line
  agrees.

Then the batch is deleted and everything it held must be gone before the next one.

Bounded and deterministic for CI: `derandomize=True` (the examples are a function of the test),
a fixed number of examples, no shrinking, no example database. Set FUZZ_CLASS_REPORT to a file
path to get the table of every input class tried and what it got.
"""

from __future__ import annotations

import copy
import io
import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from controller.app import Controller
from controller.audit.check import EXIT_CLEAN, EXIT_FINDINGS, check
from controller.config import parse_args
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    ATTACHMENT_NETWORK_ANNOTATION,
    EGRESS_RATE_ANNOTATION,
    INGRESS_RATE_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    IP_POOL_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
    PORT_SECURITY_ANNOTATION,
    REASON_ACQUIRE_ADDRESS_FAILED,
    REASON_VALIDATE_POD_NETWORK_FAILED,
    ROUTED_ANNOTATION,
    SECURITY_GROUP_ANNOTATION_TEMPLATE,
    annotation_key,
)
from controller.kube.client import KubeClient, load_api_client
from controller.testing import builders
from tests.e2e.conftest import Cluster, launch_controller, open_cluster
from tests.e2e.helpers import NODE, annotations_of, get_or_none, ipam_released, pod, wait_for

pytestmark = pytest.mark.timeout(170)

NS = "fuzz"
VALIDATE = REASON_VALIDATE_POD_NETWORK_FAILED
ACQUIRE = REASON_ACQUIRE_ADDRESS_FAILED
SECURITY_GROUP_ANNOTATION = annotation_key(SECURITY_GROUP_ANNOTATION_TEMPLATE, "ovn")
REFUSALS = frozenset({VALIDATE, ACQUIRE, "GetVlanInfoFailed", "CreateOVNPortFailed"})

DEFAULT, CUSTOM, DUAL, JOIN, ATT = "ovn-default", "custom", "dual", "join", "att-subnet"
#: the provider of the OVN attachment `att` (a NetworkAttachmentDefinition of type kube-ovn)
ATT_PROVIDER = f"att.{NS}.ovn"
#: (cidr, gateway) of the subnets a pod may name
SUBNETS = {
    DEFAULT: ("10.16.0.0/16", "10.16.0.1"),
    CUSTOM: ("10.120.0.0/16", "10.120.0.1"),
    DUAL: ("10.130.0.0/16,fd00:130::/112", "10.130.0.1,fd00:130::1"),
    ATT: ("10.140.0.0/16", "10.140.0.1"),
}
GATEWAYS = frozenset(g for _, gws in SUBNETS.values() for g in gws.split(",")) | {"100.64.0.1"}
HOLDER_IP, HOLDER_MAC = "10.16.0.250", "0a:ff:ff:ff:ff:01"
EXAMPLES = 40
BATCH = 8


@dataclass(frozen=True)
class Slot:
    """Where a pod sits: its batch and index, which make its good addresses unique."""

    batch: int
    index: int

    @property
    def name(self) -> str:
        return f"b{self.batch}-p{self.index}"

    def host(self, subnet: str, offset: int = 0) -> str:
        base = SUBNETS[subnet][0].split(".")
        return f"{base[0]}.{base[1]}.{self.batch % 200 + 1}.{10 + 2 * self.index + offset}"

    @property
    def mac(self) -> str:
        return f"0a:00:00:00:{self.batch % 256:02x}:{self.index:02x}"


@dataclass
class Spec:
    """One pod of a batch: its class per dimension and the annotations they make."""

    classes: dict[str, str]
    annotations: dict[str, str] = field(default_factory=dict)
    reasons: set[str] = field(default_factory=set)  # empty: a good pod
    subnet: str = DEFAULT  # where a good pod's network must be
    attached: bool = False  # asks for the OVN attachment `att` too

    @property
    def bad(self) -> bool:
        return bool(self.reasons)


# --- input classes: (name, good?) per dimension; the values come from `build` ----------------

SWITCH = ("namespace", "ovn-default", "custom", "dual", "join", "missing", "empty", "unicode")
ADDRESS = (
    "random",
    "static-free",
    "static-gateway",
    "static-network",
    "static-broadcast",
    "static-outside",
    "static-taken",
    "static-v6-on-v4",
    "static-garbage",
    "pool-free",
    "pool-gateway",
    "pool-garbage",
    "pool-taken",
)
MAC = ("none", "unique", "unique-dashes", "taken", "multicast", "zero", "short", "eui64", "garbage")
SECURITY = ("none", "port-security", "ps-valid-sgs", "ps-invalid-sgs", "sgs-without-ps", "ps-yes")
RATE = ("none", "valid", "garbage")
ATTACHMENT = (
    "none",
    "json-garbage",
    "missing-nad",
    "ovn-nad",
    "ovn-nad-static-free",
    "ovn-nad-gateway",
    "ovn-nad-garbage-ip",
    "ovn-nad-multicast-mac",
    "ovn-nad-on-join",
    "ovn-nad-invalid-sgs",
)

#: the class of each dimension a pod has when the example is about another dimension
NEUTRAL = {
    "switch": "namespace",
    "address": "random",
    "mac": "none",
    "security": "none",
    "rate": "none",
    "attachment": "none",
}
CLASSES = {
    "switch": SWITCH,
    "address": ADDRESS,
    "mac": MAC,
    "security": SECURITY,
    "rate": RATE,
    "attachment": ATTACHMENT,
}


def _one_class_each() -> list[list[tuple[dict[str, str], str]]]:
    """Explicit examples: every class alone (the other dimensions neutral), and the hand-
    allocated ghost, in batches of BATCH pods; the generated batches then mix them."""
    pods: list[tuple[dict[str, str], str]] = [({"ghost": "allocated-on-missing-switch"}, "")]
    for dimension, classes in CLASSES.items():
        for cls in classes:
            if cls != NEUTRAL[dimension]:
                pods.append(({**NEUTRAL, dimension: cls}, "x-ünïcode\u2028$@"))
    for switch in ("custom", "dual"):  # every address class on the other subnets too
        pods.extend(({**NEUTRAL, "switch": switch, "address": cls}, "x") for cls in ADDRESS)
    pods.append((dict(NEUTRAL), ""))
    return [pods[i : i + BATCH] for i in range(0, len(pods), BATCH)]


# garbage: text no parser takes for an address or a MAC, unicode included
garbage = st.text(min_size=0, max_size=12).map(lambda t: "x" + t.replace(",", ";"))


@st.composite
def pod_classes(draw: st.DrawFn) -> tuple[dict[str, str], str]:
    if draw(st.integers(0, 14)) == 0:
        return {"ghost": "allocated-on-missing-switch"}, ""
    classes = {
        "switch": draw(st.sampled_from(SWITCH)),
        "address": draw(st.sampled_from(ADDRESS)),
        "mac": draw(st.sampled_from(MAC)),
        "security": draw(st.sampled_from(SECURITY)),
        "rate": draw(st.sampled_from(RATE)),
        "attachment": draw(st.sampled_from(ATTACHMENT)),
    }
    return classes, draw(garbage)


def build(slot: Slot, classes: dict[str, str], text: str) -> Spec:
    """The annotations of `classes` for the pod at `slot`, and what must become of it."""
    spec = Spec(dict(classes))
    a = spec.annotations
    if "ghost" in classes:
        a.update(
            {
                ALLOCATED_ANNOTATION: "true",
                LOGICAL_SWITCH_ANNOTATION: "ghost-subnet",
                IP_ADDRESS_ANNOTATION: "10.99.0.9",
                MAC_ADDRESS_ANNOTATION: "00:00:00:09:09:09",
            }
        )
        spec.reasons.add(VALIDATE)  # from the inspection: its subnet does not exist
        return spec

    def bad(*reasons: str) -> None:
        spec.reasons.update(reasons)

    switch = classes["switch"]
    target = {"custom": CUSTOM, "dual": DUAL}.get(switch, DEFAULT)
    spec.subnet = target
    if switch == "ovn-default":
        a[LOGICAL_SWITCH_ANNOTATION] = DEFAULT
    elif switch in ("custom", "dual"):
        a[LOGICAL_SWITCH_ANNOTATION] = target
    elif switch == "join":
        a[LOGICAL_SWITCH_ANNOTATION] = JOIN
        bad(VALIDATE)
    elif switch == "missing":
        a[LOGICAL_SWITCH_ANNOTATION] = "no-such-subnet"
        bad(VALIDATE)
    elif switch == "empty":
        a[LOGICAL_SWITCH_ANNOTATION] = ""
        bad(VALIDATE)
    elif switch == "unicode":
        a[LOGICAL_SWITCH_ANNOTATION] = "sübnet-ü"
        bad(VALIDATE)

    cidr, gateway = SUBNETS[target]
    network = cidr.split("/")[0]
    if target == DUAL:  # its IPv6 gateway, next to a free IPv4 address
        gateway = f"{slot.host(target)},{gateway.split(',')[1]}"
    broadcast = network.rsplit(".", 2)[0] + ".255.255"
    address = classes["address"]
    values = {
        "static-free": (IP_ADDRESS_ANNOTATION, slot.host(target), ()),
        "static-gateway": (IP_ADDRESS_ANNOTATION, gateway, (VALIDATE,)),
        "static-network": (IP_ADDRESS_ANNOTATION, network, (VALIDATE,)),
        "static-broadcast": (IP_ADDRESS_ANNOTATION, broadcast, (VALIDATE,)),
        "static-outside": (IP_ADDRESS_ANNOTATION, f"10.99.{slot.batch % 200}.5", (ACQUIRE,)),
        "static-taken": (IP_ADDRESS_ANNOTATION, HOLDER_IP, (ACQUIRE,)),
        "static-v6-on-v4": (IP_ADDRESS_ANNOTATION, "fd00::5", (ACQUIRE,)),
        "static-garbage": (IP_ADDRESS_ANNOTATION, text, (VALIDATE,)),
        "pool-free": (
            IP_POOL_ANNOTATION,
            f"{slot.host(target)},{slot.host(target, 1)}",
            (),
        ),
        "pool-gateway": (IP_POOL_ANNOTATION, f"{gateway},{slot.host(target)}", (VALIDATE,)),
        "pool-garbage": (IP_POOL_ANNOTATION, f"{text},{slot.host(target)}", (VALIDATE,)),
        "pool-taken": (IP_POOL_ANNOTATION, HOLDER_IP, (ACQUIRE,)),
    }
    if address in values:
        key, value, reasons = values[address]
        a[key] = value
        bad(*reasons)

    mac = classes["mac"]
    macs = {
        "unique": (slot.mac, ()),
        "unique-dashes": (slot.mac.replace(":", "-").upper(), ()),
        "taken": (HOLDER_MAC, (ACQUIRE,)),
        "multicast": ("01:00:5e:00:00:01", (VALIDATE,)),
        "zero": ("00:00:00:00:00:00", (VALIDATE,)),
        "short": ("0a:00:00:00:01", (VALIDATE,)),
        "eui64": ("0a:00:00:00:00:00:00:01", (VALIDATE,)),
        "garbage": (text, (VALIDATE,)),
    }
    if mac in macs:
        a[MAC_ADDRESS_ANNOTATION], reasons = macs[mac]
        bad(*reasons)

    security = classes["security"]
    if security in ("port-security", "ps-valid-sgs", "ps-invalid-sgs", "ps-yes"):
        a[PORT_SECURITY_ANNOTATION] = "yes" if security == "ps-yes" else "true"
    if security == "ps-valid-sgs":
        a[SECURITY_GROUP_ANNOTATION] = "web,db"
    elif security in ("ps-invalid-sgs", "sgs-without-ps"):
        a[SECURITY_GROUP_ANNOTATION] = f"web,bad sg!,{text}"
        if security == "ps-invalid-sgs":
            bad(VALIDATE)

    rate = classes["rate"]
    if rate == "valid":
        a[INGRESS_RATE_ANNOTATION] = "100"
    elif rate == "garbage":
        a[EGRESS_RATE_ANNOTATION] = "1.5fast"
        bad(VALIDATE)

    attachment = classes["attachment"]
    if attachment == "json-garbage":
        a[ATTACHMENT_NETWORK_ANNOTATION] = '[{"name": '
        bad(VALIDATE)
    elif attachment == "missing-nad":
        a[ATTACHMENT_NETWORK_ANNOTATION] = "nowhere"
        bad(VALIDATE)
    elif attachment.startswith("ovn-nad"):
        a[ATTACHMENT_NETWORK_ANNOTATION] = "att"
        spec.attached = True

        def att(key: str, value: str) -> None:
            a[f"{ATT_PROVIDER}.kubernetes.io/{key}"] = value

        if attachment == "ovn-nad-static-free":
            att("ip_address", slot.host(ATT))
        elif attachment == "ovn-nad-gateway":
            att("ip_address", SUBNETS[ATT][1])
            bad(VALIDATE)
        elif attachment == "ovn-nad-garbage-ip":
            att("ip_address", text)
            bad(VALIDATE)
        elif attachment == "ovn-nad-multicast-mac":
            att("mac_address", "33:33:00:00:00:01")
            bad(VALIDATE)
        elif attachment == "ovn-nad-on-join":
            att("logical_switch", JOIN)
            bad(VALIDATE)
        elif attachment == "ovn-nad-invalid-sgs":
            att("port_security", "true")
            att("security_groups", "Not_A_Name")
            bad(VALIDATE)
    return spec


# --- the run ---------------------------------------------------------------------------------


@dataclass
class Bed:
    cluster: Cluster
    controller: Controller
    node_ips: dict[str, Any]  # the nodes' IP CRs as the controller first wrote them
    batches: int = 0
    # input class -> what it got: "accepted" or the refusal reasons seen
    outcomes: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


def _allocated(cluster: Cluster, name: str) -> bool:
    got = annotations_of(cluster.server, "pods", NS, name)
    return got.get(ALLOCATED_ANNOTATION) == "true" and got.get(ROUTED_ANNOTATION) == "true"


def _refusals(cluster: Cluster, name: str) -> set[str]:
    return {
        e["reason"]
        for e in cluster.server.store.list("events", NS)
        if e["involvedObject"].get("name") == name
        and e["type"] == "Warning"
        and e["reason"] in REFUSALS
    }


def _node_ips(cluster: Cluster) -> dict[str, Any]:
    return {
        ip["metadata"]["name"]: ip["spec"]
        for ip in cluster.server.store.list("ips")
        if ip["metadata"]["name"].startswith("node-")
    }


@pytest.fixture(scope="module")
def bed() -> Iterator[Bed]:
    with open_cluster() as cluster:
        store = cluster.server.store
        store.create("namespaces", {"metadata": {"name": NS}})
        for name in (CUSTOM, DUAL, ATT):
            spec = {"cidrBlock": SUBNETS[name][0]}
            if name == ATT:
                spec["provider"] = ATT_PROVIDER
            store.create("subnets", {"metadata": {"name": name}, "spec": spec})
        store.create("network-attachment-definitions", builders.nad("att", NS))
        controller = launch_controller(cluster)
        try:
            wait_for(controller.workers_started.is_set, message="workers started")
            wait_for(
                lambda: (
                    annotations_of(cluster.server, "namespaces", None, NS).get(
                        LOGICAL_SWITCH_ANNOTATION
                    )
                    == DEFAULT
                ),
                message="namespace bound",
            )
            for name in (CUSTOM, DUAL, ATT):
                wait_for(
                    partial(contains, controller.ipam.subnet_names, name),
                    message=f"{name} in IPAM",
                )
            wait_for(lambda: f"node-{NODE}" in _node_ips(cluster), message="node IP CR")
            holder = {IP_ADDRESS_ANNOTATION: HOLDER_IP, MAC_ADDRESS_ANNOTATION: HOLDER_MAC}
            store.create("pods", pod("holder", NS, annotations=holder, node_name=NODE))
            wait_for(partial(_allocated, cluster, "holder"), message="holder allocated")
            yield Bed(cluster, controller, copy.deepcopy(_node_ips(cluster)))
        finally:
            controller.stop()


def contains(items: Callable[[], list[str]], item: str) -> bool:
    return item in items()


def _converged(cluster: Cluster, specs: Mapping[str, Spec]) -> bool:
    for name, spec in specs.items():
        if spec.bad and not _refusals(cluster, name):
            return False
        if not spec.bad and not _allocated(cluster, name):
            return False
    return True


def _check(bed: Bed, *, strict: bool) -> tuple[int, str]:
    cluster = bed.cluster
    config = parse_args(["check", *cluster.argv()], {"KUBE_NAMESPACE": "kube-system"})
    api = load_api_client(str(cluster.kubeconfig), worker_threads=1)
    out = io.StringIO()
    try:
        code = check(KubeClient(api), cluster.nb, config, out=out, strict=strict)
    finally:
        api.close()
    return code, out.getvalue()


def _assert_batch(bed: Bed, specs: Mapping[str, Spec]) -> None:
    cluster, server = bed.cluster, bed.cluster.server
    for name, spec in specs.items():
        key, port_name = f"{NS}/{name}", f"{name}.{NS}"
        port = cluster.nb.get_port(port_name)
        ip_cr = get_or_none(server, "ips", None, port_name)
        got = annotations_of(server, "pods", NS, name)
        if spec.bad:
            seen = _refusals(cluster, name)
            assert seen and seen <= spec.reasons, (name, spec.classes, seen, spec.reasons)
            assert port is None and ip_cr is None, (name, spec.classes)
            att_name = f"{port_name}.{ATT_PROVIDER}"
            assert cluster.nb.get_port(att_name) is None, (name, spec.classes)
            assert get_or_none(server, "ips", None, att_name) is None, (name, spec.classes)
            assert bed.controller.ipam.get_pod_address(key) == [], (name, spec.classes)
            if "ghost" not in spec.classes:
                assert got.get(ALLOCATED_ANNOTATION) != "true", (name, spec.classes)
            # the table says what one class alone gets (on another good subnet, if named)
            alone = [
                c
                for c in spec.classes.items()
                if c[1] not in NEUTRAL.values() and c[1] not in ("custom", "dual")
            ]
            if len(alone) == 1:
                bed.outcomes[_label(alone[0], spec)].update(seen)
            continue
        address = got[IP_ADDRESS_ANNOTATION]
        assert got[LOGICAL_SWITCH_ANNOTATION] == spec.subnet, (name, spec.classes, got)
        assert port is not None and port.switch == spec.subnet, (name, spec.classes)
        parts = address.split(",")
        assert set(parts) <= set(port.addresses[0].split()), (name, port.addresses)
        assert ip_cr is not None and ip_cr["spec"]["ipAddress"] == address, (name, ip_cr)
        assert not set(parts) & GATEWAYS, (name, spec.classes)
        assert len(parts) == len(SUBNETS[spec.subnet][0].split(",")), (name, address)
        if spec.classes.get("mac", "none") in ("unique", "unique-dashes"):
            assert got[MAC_ADDRESS_ANNOTATION].lower().replace("-", ":") == spec.annotations[
                MAC_ADDRESS_ANNOTATION
            ].lower().replace("-", ":"), (name, got)
        if spec.classes.get("address", "").startswith(("static-free", "pool-free")):
            assert parts[0] == spec.annotations.get(
                IP_ADDRESS_ANNOTATION, spec.annotations.get(IP_POOL_ANNOTATION, "").split(",")[0]
            ), (name, address)
        if spec.attached:
            _assert_attachment(bed, name, spec, got)
        for cls in spec.classes.items():
            bed.outcomes[_label(cls, spec)].add("accepted")
    # nobody's record was taken over and no pod holds a gateway
    assert _node_ips(cluster) == bed.node_ips
    for port in cluster.nb.list_ports():
        if "pod" in port.external_ids and port.addresses:
            assert not set(port.addresses[0].split()[1:]) & GATEWAYS, port
    for subnet, (_, gateways) in SUBNETS.items():
        for gateway in gateways.split(","):
            assert bed.controller.ipam.get_ip_owner(gateway, subnet) is None, (subnet, gateway)
    # the audit names exactly the refused pods, and its verdict agrees with its exit status
    bad = {f"pod {NS}/{name}" for name, spec in specs.items() if spec.bad}
    code, report = _check(bed, strict=True)
    lines = report.splitlines()
    findings = {line.strip().split(":")[0] for line in lines if line.startswith(f"  pod {NS}/")}
    assert findings == bad, report
    assert "pending (not converged yet):" not in lines, report
    kinds = [line for line in lines if line and not line.startswith((" ", "cluster audit:"))]
    assert kinds in ([], [f"pod-refused ({len(bad)}):"]), report
    assert code == (EXIT_FINDINGS if bad else EXIT_CLEAN), report
    assert lines[-1].startswith("cluster audit: OK") == (code == EXIT_CLEAN), report


def _assert_attachment(bed: Bed, name: str, spec: Spec, got: Mapping[str, str]) -> None:
    """A good pod's OVN attachment: allocated on its subnet, its port and IP CR."""
    key = f"{ATT_PROVIDER}.kubernetes.io"
    assert got.get(f"{key}/allocated") == "true", (name, got)
    assert got.get(f"{key}/logical_switch") == ATT, (name, got)
    address = got[f"{key}/ip_address"]
    assert address not in GATEWAYS, (name, address)
    wanted = spec.annotations.get(f"{key}/ip_address")
    assert wanted is None or address == wanted, (name, address, wanted)
    att_name = f"{name}.{NS}.{ATT_PROVIDER}"
    port = bed.cluster.nb.get_port(att_name)
    assert port is not None and port.switch == ATT, (name, port)
    assert address in port.addresses[0].split(), (name, port.addresses)
    ip_cr = get_or_none(bed.cluster.server, "ips", None, att_name)
    assert ip_cr is not None and ip_cr["spec"]["ipAddress"] == address, (name, ip_cr)


def _label(cls: tuple[str, str], spec: Spec) -> str:
    on = f" on {spec.subnet}" if cls[0] != "switch" and spec.subnet != DEFAULT else ""
    return "=".join(cls) + on


def _delete_batch(bed: Bed, specs: Mapping[str, Spec]) -> None:
    cluster = bed.cluster
    for name in specs:
        cluster.server.store.delete("pods", NS, name, grace_period_seconds=0)
    for name in specs:
        for port_name in (f"{name}.{NS}", f"{name}.{NS}.{ATT_PROVIDER}"):

            def cleaned_up(n: str = port_name) -> bool:
                return (
                    cluster.nb.get_port(n) is None
                    and get_or_none(cluster.server, "ips", None, n) is None
                )

            wait_for(cleaned_up, message=f"{port_name} cleaned up")
        wait_for(
            partial(ipam_released, bed.controller, f"{NS}/{name}"),
            message=f"{name} released",
        )


def _with_examples(test: Any) -> Any:
    for batch in _one_class_each():
        test = example(batch=batch)(test)
    return test


@_with_examples
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large),
)
@given(batch=st.lists(pod_classes(), min_size=1, max_size=BATCH))
def test_bad_input_never_corrupts_state(bed: Bed, batch: list[tuple[dict[str, str], str]]) -> None:
    bed.batches += 1
    specs: dict[str, Spec] = {}
    for index, (classes, text) in enumerate(batch):
        slot = Slot(bed.batches, index)
        specs[slot.name] = build(slot, classes, text)
    store = bed.cluster.server.store
    for name, spec in specs.items():
        store.create("pods", pod(name, NS, annotations=spec.annotations, node_name=NODE))
    try:
        wait_for(partial(_converged, bed.cluster, specs), message="the batch converged")
        _assert_batch(bed, specs)
    finally:
        _delete_batch(bed, specs)


def test_every_input_class_was_tried(bed: Bed) -> None:
    """Runs after the fuzz test (file order): every class met at least once, and the table for
    the report when FUZZ_CLASS_REPORT names a file."""
    if not bed.batches:
        pytest.skip("the fuzz test did not run")
    everything = {f"{d}={c}" for d, classes in CLASSES.items() for c in classes}
    everything.add("ghost=allocated-on-missing-switch")
    tried = {label.split(" on ")[0] for label in bed.outcomes}
    assert tried == everything, sorted(everything ^ tried)
    path = os.environ.get("FUZZ_CLASS_REPORT")
    if path:
        table = {cls: sorted(got) for cls, got in sorted(bed.outcomes.items())}
        with open(path, "w", encoding="utf-8") as out:
            json.dump(table, out, indent=1, ensure_ascii=False)
