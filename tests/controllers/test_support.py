"""Unit tests of the start-up steps and the minimal support controllers over in-memory fakes."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from controller.cache import Indexer
from controller.config import parse_args
from controller.controllers.bootstrap import init_ipam
from controller.controllers.namespace import desired_namespace_annotations
from controller.controllers.node import NodeController, NodeQueues
from controller.controllers.security_group import SecurityGroupController, SecurityGroupQueues
from controller.controllers.subnet import SubnetController, SubnetQueues
from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    CIDR_ANNOTATION,
    EXCLUDE_IPS_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
)
from controller.core.errors import MalformedObjectError, ResourceNotReadyError
from controller.core.subnet_spec import format_subnet_spec
from controller.ipam import IPAM
from controller.queues import RateLimitingQueue, default_controller_rate_limiter
from controller.runtime.worker import process_next_work_item
from controller.testing.builders import allocated, subnet
from controller.testing.clock import FakeClock
from controller.testing.fake_kube import FakeEventRecorder, FakeKubeApi
from controller.testing.fake_nb import FakeNbClient
from controller.view import CachedObject, CacheView
from tests.controllers.helpers import restored_pod

CONFIG = parse_args(["--ovn-nb-addr=tcp:127.0.0.1:6641", "--leader-elect=false"], {})


def indexer(*objs: dict[str, Any]) -> Indexer:
    idx = Indexer()
    for obj in objs:
        idx.add(obj)
    return idx


# --- format_subnet_spec --------------------------------------------------------------------------


def test_format_subnet_spec_defaults_and_excludes_the_gateway_once() -> None:
    spec = format_subnet_spec("s", {"cidrBlock": "10.1.0.5/24", "excludeIps": ["10.1.0.9"]})
    assert spec["cidrBlock"] == "10.1.0.0/24"
    assert spec["gateway"] == "10.1.0.1"
    assert spec["excludeIps"] == ["10.1.0.9", "10.1.0.1"]
    assert (spec["protocol"], spec["provider"], spec["vpc"]) == ("IPv4", "ovn", "ovn-cluster")
    assert format_subnet_spec("s", spec) == spec  # idempotent


def test_format_subnet_spec_dual_stack() -> None:
    spec = format_subnet_spec("s", {"cidrBlock": "10.1.0.0/24,fd00::/120"})
    assert spec["gateway"] == "10.1.0.1,fd00::1"
    assert spec["excludeIps"] == ["10.1.0.1", "fd00::1"]
    assert spec["protocol"] == "Dual"


@pytest.mark.parametrize(
    "spec",
    [{}, {"cidrBlock": "10.1.0.0/33"}, {"cidrBlock": "10.1.0.0/24", "gateway": "10.2.0.1"}],
)
def test_format_subnet_spec_rejects_bad_input(spec: dict[str, Any]) -> None:
    with pytest.raises(MalformedObjectError):
        format_subnet_spec("bad", spec)


# --- subnet controller ---------------------------------------------------------------------------


class RecordingCluster:
    """The one `ClusterApi` call the subnet add handler makes: writing the formatted spec back."""

    def __init__(self) -> None:
        self.replaced: list[dict[str, Any]] = []

    def replace_subnet(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.replaced.append(dict(body))
        return dict(body)


def test_malformed_subnet_is_one_warning_event_not_a_retry_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    queues = SubnetQueues(
        *(RateLimitingQueue[str](default_controller_rate_limiter(), clock=clock) for _ in "ads")
    )
    bad = {
        "metadata": {"name": "bad", "uid": "u-1", "resourceVersion": "7"},
        "spec": {"cidrBlock": "10.1.0.0/33"},
    }
    subnets, nb, cluster = indexer(bad), FakeNbClient(), RecordingCluster()
    recorder = FakeEventRecorder()
    nb.ensure_logical_router("ovn-cluster")
    ctl = SubnetController(
        config=CONFIG,
        subnets=subnets,
        vpcs=indexer(),
        kube=FakeKubeApi(),
        cluster=cluster,  # type: ignore[arg-type]
        nb=nb,
        ipam=IPAM(),
        recorder=recorder,
        queues=queues,
        is_leader=lambda: True,
    )
    handled: list[str] = []

    def handler(name: str) -> None:
        handled.append(name)
        ctl.handle_add_subnet(name)

    def process() -> None:
        assert process_next_work_item(queues.add, handler, name="AddSubnet", clock=clock)

    ctl.event_handler().on_add(bad)
    with caplog.at_level(logging.INFO):
        process()
        clock.step(3600.0)  # far beyond any backoff: a retried key would be back by now
    assert (len(queues.add), queues.add.pending(), queues.add.num_requeues("bad")) == (0, 0, 0)
    assert handled == ["bad"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    [event] = recorder.events
    assert (event.ref.kind, event.ref.api_version, event.ref.name, event.ref.uid) == (
        "Subnet",
        "kubeovn.io/v1",
        "bad",
        "u-1",
    )
    assert (event.type, event.reason) == ("Warning", "ValidateLogicalSwitchFailed")
    assert "10.1.0.0/33" in event.message
    assert "bad" not in nb.list_logical_switches() and cluster.replaced == []

    # the fix is an update of the Subnet, which queues it again like any spec change
    fixed = {**bad, "metadata": {**bad["metadata"], "resourceVersion": "8"}}
    fixed["spec"] = {"cidrBlock": "10.1.0.0/24"}
    subnets.update(fixed)
    ctl.event_handler().on_update(bad, fixed)
    process()
    assert "bad" in nb.list_logical_switches()
    assert cluster.replaced[0]["spec"]["gateway"] == "10.1.0.1"
    assert len(recorder.events) == 1
    for q in queues.all():
        q.shut_down()


def test_a_subnet_replaced_unseen_with_the_same_spec_is_handled_again() -> None:
    # A relist shows a Subnet deleted and re-created under its name as one update; the
    # successor's status is empty, so it must be handled even though its spec did not change.
    clock = FakeClock()
    queues = SubnetQueues(
        *(RateLimitingQueue[str](default_controller_rate_limiter(), clock=clock) for _ in "ads")
    )
    old = subnet("s1", "10.1.0.0/24", available=253)
    old["metadata"].update(uid="u-1", resourceVersion="7")
    ctl = SubnetController(
        config=CONFIG,
        subnets=indexer(old),
        vpcs=indexer(),
        kube=FakeKubeApi(),
        cluster=RecordingCluster(),  # type: ignore[arg-type]
        nb=FakeNbClient(),
        ipam=IPAM(),
        recorder=FakeEventRecorder(),
        queues=queues,
        is_leader=lambda: True,
    )
    status_only = {**old, "metadata": {**old["metadata"], "resourceVersion": "8"}, "status": {}}
    ctl.event_handler().on_update(old, status_only)
    assert len(queues.add) == 0  # a status write of the same object: nothing to do
    successor = {**old, "metadata": {**old["metadata"], "uid": "u-2", "resourceVersion": "9"}}
    successor["status"] = {}
    ctl.event_handler().on_update(old, successor)
    assert len(queues.add) == 1 and queues.add.get()[0] == "s1"
    for q in queues.all():
        q.shut_down()


def test_a_security_group_replaced_unseen_with_the_same_spec_is_synced_again() -> None:
    queues = SecurityGroupQueues(
        *(RateLimitingQueue[str](default_controller_rate_limiter()) for _ in "ud")
    )
    old = {"metadata": {"name": "sg1", "uid": "u-1"}, "spec": {"ingressRules": []}}
    ctl = SecurityGroupController(
        sgs=indexer(old),
        kube=FakeKubeApi(),
        nb=FakeNbClient(),
        recorder=FakeEventRecorder(),
        queues=queues,
        is_leader=lambda: True,
    )
    ctl.event_handler().on_update(old, {**old, "status": {"portGroup": "ovn.sg.sg1"}})
    assert len(queues.update) == 0
    ctl.event_handler().on_update(old, {**old, "metadata": {"name": "sg1", "uid": "u-2"}})
    assert len(queues.update) == 1 and queues.update.get()[0] == "sg1"
    for q in queues.all():
        q.shut_down()


# --- namespace annotations -----------------------------------------------------------------------


def test_namespace_annotations_bound_subnets_sorted_else_default() -> None:
    default = CachedObject.of(subnet("ovn-default", "10.16.0.0/16"))
    subnets = [
        CachedObject.of(subnet("zeta", "10.3.0.0/24", namespaces=["a"])),
        CachedObject.of(
            subnet(
                "alpha", "10.2.0.0/24", namespaces=["a", "b"], excludeIps=["10.2.0.10..10.2.0.20"]
            )
        ),
    ]
    ann = desired_namespace_annotations("a", subnets, default)
    assert ann[LOGICAL_SWITCH_ANNOTATION] == "alpha,zeta"
    assert ann[CIDR_ANNOTATION] == "10.2.0.0/24;10.3.0.0/24"
    assert ann[EXCLUDE_IPS_ANNOTATION] == "10.2.0.10..10.2.0.20,10.2.0.1;10.3.0.1"
    assert desired_namespace_annotations("c", subnets, default)[LOGICAL_SWITCH_ANNOTATION] == (
        "ovn-default"
    )
    with pytest.raises(ResourceNotReadyError):
        desired_namespace_annotations("c", subnets, None)


# --- init_ipam -----------------------------------------------------------------------------------


def test_init_ipam_restores_pods_sts_crs_and_nodes_and_survives_bad_data() -> None:
    ipam, kube = IPAM(), FakeKubeApi()
    subnets = [subnet("ovn-default", "10.16.0.0/16"), subnet("join", "100.64.0.0/16")]
    ips = indexer(
        {
            "metadata": {"name": "web-0.ns"},
            "spec": {
                "podName": "web-0",
                "namespace": "ns",
                "subnet": "ovn-default",
                "ipAddress": "10.16.0.40",
                "macAddress": "00:00:00:00:00:40",
                "podType": "StatefulSet",
            },
        }
    )
    pods = indexer(
        restored_pod("alive", allocated("10.16.0.5", "00:00:00:00:00:05")),
        restored_pod(
            "done", allocated("10.16.0.6", "00:00:00:00:00:06"), phase="Succeeded", restart="Never"
        ),
        restored_pod("thief", allocated("10.16.0.5", "00:00:00:00:00:07")),  # same address: logged
        {"metadata": {"name": "broken", "namespace": "ns", "annotations": "nope"}},
    )
    nodes = indexer(
        {
            "metadata": {
                "name": "n1",
                "annotations": allocated("100.64.0.2", "00:00:00:00:01:02", "join"),
            }
        }
    )
    report = init_ipam(
        config=CONFIG,
        ipam=ipam,
        kube=kube,
        view=CacheView(ips=ips, pods=pods, nodes=nodes),
        bootstrapped=subnets,
    )
    assert ipam.get_ip_owner("10.16.0.40", "ovn-default") == "ns/web-0"
    assert ipam.get_ip_owner("10.16.0.5", "ovn-default") == "ns/alive"
    assert ipam.get_ip_owner("10.16.0.6", "ovn-default") is None
    assert ipam.get_ip_owner("100.64.0.2", "join") == "node-n1"
    assert ipam.get_ip_owner("10.16.0.1", "ovn-default") is None  # gateway excluded, not held
    assert (report.subnets, report.sts_vm_ips, report.pod_addresses, report.node_addresses) == (
        2,
        1,
        1,
        1,
    )
    assert report.errors == 2  # the thief's conflict and the malformed pod
    assert kube.ips["alive.ns"]["spec"]["ipAddress"] == "10.16.0.5"  # missing CR written back


# --- node controller -----------------------------------------------------------------------------


def test_node_controller_allocates_once_and_releases_on_delete() -> None:
    ipam, kube, nb = IPAM(), FakeKubeApi(), FakeNbClient()
    join = subnet("join", "100.64.0.0/16")
    ipam.add_or_update_subnet("join", "100.64.0.0/16", ["100.64.0.1"])
    nb.ensure_logical_router("ovn-cluster")
    nb.ensure_logical_switch("join", "ovn-cluster", "100.64.0.0/16", "100.64.0.1", {})
    node_obj = kube.add_node({"metadata": {"name": "n1"}})
    nodes, ips = indexer(node_obj), indexer()
    queues = NodeQueues(
        RateLimitingQueue[str](default_controller_rate_limiter()),
        RateLimitingQueue[str](default_controller_rate_limiter()),
    )
    ctl = NodeController(
        config=CONFIG,
        nodes=nodes,
        subnets=indexer(join),
        ips=ips,
        kube=kube,
        nb=nb,
        ipam=ipam,
        queues=queues,
        is_leader=lambda: True,
    )
    ctl.handle_add_node("n1")
    ann = kube.nodes["n1"]["metadata"]["annotations"]
    assert ann[IP_ADDRESS_ANNOTATION] == "100.64.0.2" and ann[ALLOCATED_ANNOTATION] == "true"
    assert ann["ovn.kubernetes.io/port_name"] == "node-n1"
    assert nb.get_port("node-n1") is not None
    assert kube.ips["node-n1"]["spec"]["podName"] == "n1"

    # the informer catches up; a second pass writes nothing
    nodes.update(kube.nodes["n1"])
    ips.add(kube.ips["node-n1"])
    calls = len(kube.calls)
    ctl.handle_add_node("n1")
    assert len(kube.calls) == calls

    nodes.delete(kube.nodes["n1"])
    ctl.handle_delete_node("n1")
    assert ipam.get_pod_address("node-n1") == []
    assert nb.get_port("node-n1") is None and "node-n1" not in kube.ips
    for q in (queues.add, queues.delete):
        q.shut_down()
