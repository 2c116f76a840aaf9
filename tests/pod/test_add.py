"""handleAddPod: allocation, annotations, IP CR, LSP, one patch, and its Warning Events."""

from __future__ import annotations

from typing import Any

from controller.ovn.api import OvnError
from tests.pod.env import (
    DEFAULT_SUBNET,
    ROUTER,
    Env,
    raw_pod,
    raw_subnet,
    standard_env,
)

LS = "ovn.kubernetes.io/logical_switch"
IP = "ovn.kubernetes.io/ip_address"
MAC = "ovn.kubernetes.io/mac_address"
POOL = "ovn.kubernetes.io/ip_pool"


def test_pod_gets_default_network(env: Env) -> None:
    env.create_pod(raw_pod("web"))
    assert env.drain(env.queues.add) == ["default/web"]
    env.controller.handle_add_pod("default/web")

    got = env.annotations("default/web")
    assert got["ovn.kubernetes.io/ip_address"] == "10.16.0.2"
    mac = got["ovn.kubernetes.io/mac_address"]
    assert mac.startswith("00:00:00:")
    assert got["ovn.kubernetes.io/cidr"] == "10.16.0.0/16"
    assert got["ovn.kubernetes.io/gateway"] == "10.16.0.1"
    assert got["ovn.kubernetes.io/logical_switch"] == DEFAULT_SUBNET
    assert got["ovn.kubernetes.io/allocated"] == "true"
    assert got["ovn.kubernetes.io/network_type"] == "geneve"
    assert got["ovn.kubernetes.io/pod_nic_type"] == "veth-pair"
    assert got["ovn.kubernetes.io/logical_router"] == ROUTER
    # One annotation write for the whole allocation.
    assert sum(c.startswith("patch_pod_annotations") for c in env.kube.calls) == 1

    port = env.nb.get_port("web.default")
    assert port is not None
    assert port.switch == DEFAULT_SUBNET
    assert port.addresses == (f"{mac.lower()} 10.16.0.2",)
    assert port.external_ids["pod"] == "default/web"
    assert port.external_ids["vendor"] == "kube-ovn"

    ip_cr = env.kube.ips["web.default"]
    assert ip_cr["metadata"]["labels"] == {
        "ovn.kubernetes.io/subnet": DEFAULT_SUBNET,
        DEFAULT_SUBNET: "",
    }
    assert ip_cr["spec"]["ipAddress"] == "10.16.0.2"
    assert ip_cr["spec"]["macAddress"] == mac
    assert ip_cr["spec"]["podName"] == "web"
    assert [(a.subnet, a.ip) for a in env.ipam.get_pod_address("default/web")] == [
        (DEFAULT_SUBNET, "10.16.0.2")
    ]
    assert env.reasons() == []


def test_add_is_idempotent_and_keeps_foreign_annotations(env: Env) -> None:
    env.create_pod(raw_pod("web", annotations={"team": "a"}))
    env.controller.handle_add_pod("default/web")
    env.controller.handle_add_pod("default/web")  # cache still shows the unallocated pod
    got = env.annotations("default/web")
    assert got["team"] == "a"
    assert got[IP] == "10.16.0.2"
    assert len(env.pod_ports()) == 1
    assert len(env.ipam.get_pod_address("default/web")) == 1


def test_random_allocation_skips_node_addresses() -> None:
    env = standard_env()
    try:
        env.add_node("node2", "10.16.0.2", "100.64.0.3")  # a node inside the pod subnet
        env.create_pod(raw_pod("web"))
        env.converge()
        assert env.annotations("default/web")[IP] == "10.16.0.3"
        assert not env.ipam.contain_address("10.16.0.2")
    finally:
        env.close()


def test_namespace_subnet_list_skips_exhausted_subnets() -> None:
    env = Env()
    try:
        env.add_subnet(raw_subnet("full", "10.17.0.0/16", gateway="10.17.0.1", available=0))
        env.add_subnet(raw_subnet(DEFAULT_SUBNET, "10.16.0.0/16", gateway="10.16.0.1"))
        env.add_namespace("default", "full,ovn-default")
        env.create_pod(raw_pod("web"))
        env.converge()
        assert env.annotations("default/web")[LS] == DEFAULT_SUBNET
    finally:
        env.close()


def test_pod_logical_switch_annotation_picks_the_subnet() -> None:
    env = standard_env()
    try:
        env.add_subnet(raw_subnet("other", "10.18.0.0/16", gateway="10.18.0.1"))
        env.create_pod(raw_pod("web", annotations={LS: "other"}))
        env.converge()
        got = env.annotations("default/web")
        assert (got[LS], got[IP]) == ("other", "10.18.0.2")
        port = env.nb.get_port("web.default")
        assert port is not None and port.switch == "other"
    finally:
        env.close()


def test_static_ip_and_mac_are_honoured(env: Env) -> None:
    env.create_pod(raw_pod("web", annotations={IP: "10.16.0.50", MAC: "00:00:00:AA:BB:CC"}))
    env.converge()
    got = env.annotations("default/web")
    assert got[IP] == "10.16.0.50"
    assert got[MAC].lower() == "00:00:00:aa:bb:cc"
    port = env.nb.get_port("web.default")
    assert port is not None and port.addresses == ("00:00:00:aa:bb:cc 10.16.0.50",)


def test_static_ip_conflict_is_acquire_address_failed(env: Env) -> None:
    env.create_pod(raw_pod("a", annotations={IP: "10.16.0.50"}))
    env.converge()
    env.create_pod(raw_pod("b", annotations={IP: "10.16.0.50"}))
    env.converge()
    assert "ovn.kubernetes.io/allocated" not in env.annotations("default/b")
    messages = env.event_messages("AcquireAddressFailed")
    assert len(messages) == 1 and "AddressConflict" in messages[0]
    assert env.nb.get_port("b.default") is None
    # A conflict is retried with backoff (someone may release the address).
    assert env.queues.add.num_requeues("default/b") == 1


def test_static_ip_out_of_range_is_acquire_address_failed(env: Env) -> None:
    env.create_pod(raw_pod("a", annotations={IP: "192.168.1.5"}))
    env.converge()
    messages = env.event_messages("AcquireAddressFailed")
    assert len(messages) == 1 and "AddressOutOfRange" in messages[0]


def test_network_and_broadcast_addresses_are_validate_pod_network_failed(env: Env) -> None:
    env.create_pod(raw_pod("a", annotations={IP: "10.16.0.0"}))
    env.create_pod(raw_pod("b", annotations={IP: "10.16.255.255"}))
    env.converge()
    assert env.reasons() == ["ValidatePodNetworkFailed", "ValidatePodNetworkFailed"]
    assert env.ipam.get_pod_address("default/a") == []
    # Permanent: forgotten, not retried until the pod changes.
    assert env.queues.add.num_requeues("default/a") == 0
    assert env.queues.add.pending() == 0


def test_invalid_annotation_warns_and_a_fixing_edit_converges(env: Env) -> None:
    env.create_pod(raw_pod("web", annotations={IP: "not-an-ip"}))
    env.converge()
    assert env.reasons() == ["ValidatePodNetworkFailed"]
    assert "not-an-ip" in env.event_messages("ValidatePodNetworkFailed")[0]
    assert env.queues.add.pending() == 0 and env.nb.get_port("web.default") is None

    def fix(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"][IP] = "10.16.0.9"

    env.edit_pod("default/web", fix)
    env.converge()
    assert env.annotations("default/web")["ovn.kubernetes.io/allocated"] == "true"
    assert env.annotations("default/web")[IP] == "10.16.0.9"


def test_ip_pool_of_an_ordinary_pod_skips_addresses_held_by_others(env: Env) -> None:
    pool = "10.16.0.20,10.16.0.21,10.16.0.22"
    env.create_pod(raw_pod("a", annotations={IP: "10.16.0.20"}))
    env.converge()
    env.create_pod(raw_pod("b", annotations={POOL: pool}))
    env.create_pod(raw_pod("c", annotations={POOL: pool}))
    env.converge()
    assert env.annotations("default/b")[IP] == "10.16.0.21"
    assert env.annotations("default/c")[IP] == "10.16.0.22"
    env.create_pod(raw_pod("d", annotations={POOL: pool}))
    env.converge()
    messages = env.event_messages("AcquireAddressFailed")
    assert len(messages) == 1 and "NoAvailableAddress" in messages[0]


def test_ip_pool_of_a_statefulset_pod_uses_its_ordinal(env: Env) -> None:
    pool = "10.16.0.30,10.16.0.31"
    env.statefulsets.add(
        {"metadata": {"name": "db", "namespace": "default"}, "spec": {"replicas": 3}}
    )
    for ordinal in (1, 2):
        env.create_pod(
            raw_pod(
                f"db-{ordinal}", annotations={POOL: pool}, owner=("apps/v1", "StatefulSet", "db")
            )
        )
    env.converge()
    assert env.annotations("default/db-1")[IP] == "10.16.0.31"
    assert env.kube.ips["db-1.default"]["spec"]["podType"] == "StatefulSet"
    # Ordinal 2 has no pool entry: no random fallback.
    assert "ovn.kubernetes.io/allocated" not in env.annotations("default/db-2")
    assert env.reasons() == ["AcquireAddressFailed"]


def test_create_port_failure_is_create_ovn_port_failed_and_retried(env: Env) -> None:
    env.nb.fail_next("create_port", OvnError("transaction error: boom"))
    env.create_pod(raw_pod("web"))
    env.converge()
    assert env.reasons() == ["CreateOVNPortFailed"]
    assert "boom" in env.event_messages("CreateOVNPortFailed")[0]
    assert "ovn.kubernetes.io/allocated" not in env.annotations("default/web")
    assert env.queues.add.pending() == 1  # backoff: 5 ms
    env.advance(0.005)
    env.converge()
    got = env.annotations("default/web")
    assert got["ovn.kubernetes.io/allocated"] == "true"
    assert got[IP] == "10.16.0.2"  # the retry got the same address
    assert env.nb.get_port("web.default") is not None


def test_missing_vlan_is_get_vlan_info_failed() -> None:
    env = Env()
    try:
        env.add_subnet(
            raw_subnet("underlay", "192.168.0.0/24", gateway="192.168.0.1", vlan="vlan10")
        )
        env.add_namespace("default", "underlay")
        env.create_pod(raw_pod("web"))
        env.converge()
        assert env.reasons() == ["GetVlanInfoFailed"]
        env.vlans.add({"metadata": {"name": "vlan10"}, "spec": {"id": 10, "provider": "physnet1"}})
        env.advance(0.005)
        env.converge()
        got = env.annotations("default/web")
        assert got["ovn.kubernetes.io/network_type"] == "vlan"
        assert got["ovn.kubernetes.io/vlan_id"] == "10"
        assert got["ovn.kubernetes.io/provider_network"] == "physnet1"
        assert "ovn.kubernetes.io/logical_router" not in got
    finally:
        env.close()


def test_pod_deleted_between_allocation_and_patch_is_cleaned_up(env: Env) -> None:
    env.create_pod(raw_pod("web"))
    env.drain(env.queues.add)
    env.kube.delete_pod("default", "web")  # gone on the server, still in the cache
    env.controller.handle_add_pod("default/web")
    assert env.nb.get_port("web.default") is not None  # written before the patch failed
    env.advance(0.005)  # rate limited: the informer's delete event may come first
    assert env.drain(env.queues.delete) == ["default/web"]
    env.controller.handle_delete_pod("default/web")
    assert env.nb.get_port("web.default") is None
    assert "web.default" not in env.kube.ips
    assert env.ipam.get_pod_address("default/web") == []


def test_ipam_only_and_ovn_attachments(env: Env) -> None:
    ovn_conf = '{"cniVersion": "0.3.1", "type": "kube-ovn", "server_socket": "/run/k.sock"}'
    mv_conf = '{"cniVersion": "0.3.1", "type": "macvlan", "ipam": {"type": "kube-ovn"}}'
    env.nads.add(
        {"metadata": {"name": "net1", "namespace": "default"}, "spec": {"config": ovn_conf}}
    )
    env.nads.add({"metadata": {"name": "mv", "namespace": "default"}, "spec": {"config": mv_conf}})
    env.add_subnet(
        raw_subnet("attach", "10.20.0.0/16", gateway="10.20.0.1", provider="net1.default.ovn")
    )
    env.add_subnet(
        raw_subnet("macvlan", "172.30.0.0/24", gateway="172.30.0.1", provider="mv.default")
    )
    env.create_pod(raw_pod("web", annotations={"k8s.v1.cni.cncf.io/networks": "net1,mv"}))
    env.converge()
    got = env.annotations("default/web")
    assert got["net1.default.ovn.kubernetes.io/ip_address"] == "10.20.0.2"
    assert got["mv.default.kubernetes.io/ip_address"] == "172.30.0.2"
    assert got[IP] == "10.16.0.2"
    assert env.nb.get_port("web.default.net1.default.ovn") is not None
    assert env.nb.get_port("web.default.mv.default") is None  # IPAM-only: no LSP
    assert {"web.default", "web.default.net1.default.ovn", "web.default.mv.default"} <= set(
        env.kube.ips
    )
    # Delete releases every network and every IP CR.
    env.remove_pod("default/web")
    env.converge()
    assert env.pod_ports() == []
    assert not set(env.kube.ips)
    assert env.ipam.get_pod_address("default/web") == []


def test_missing_nad_without_indexer_uses_the_api() -> None:
    env = standard_env(with_owner_indexers=False)
    try:
        env.create_pod(raw_pod("web", annotations={"k8s.v1.cni.cncf.io/networks": "net1"}))
        env.converge()
        assert "ovn.kubernetes.io/allocated" not in env.annotations("default/web")
        assert env.queues.add.pending() == 1  # not ready: retried
        env.kube.add_network_attachment_definition(
            {
                "metadata": {"name": "net1", "namespace": "default"},
                "spec": {"config": '{"cniVersion": "0.3.1", "type": "kube-ovn"}'},
            }
        )
        env.advance(0.005)
        env.converge()
        got = env.annotations("default/web")
        # No subnet of provider net1.default.ovn: the namespace's subnet serves the attachment,
        # which then conflicts with the default network (kube-ovn's rule): add a subnet.
        assert "ovn.kubernetes.io/allocated" not in got
        env.add_subnet(
            raw_subnet("attach", "10.20.0.0/16", gateway="10.20.0.1", provider="net1.default.ovn")
        )
        env.advance(1)
        env.converge()
        assert env.annotations("default/web")["net1.default.ovn.kubernetes.io/allocated"] == (
            "true"
        )
    finally:
        env.close()


def test_malformed_multus_annotation_is_validate_pod_network_failed(env: Env) -> None:
    env.create_pod(raw_pod("web", annotations={"k8s.v1.cni.cncf.io/networks": "a/b/c"}))
    env.converge()
    assert env.reasons() == ["ValidatePodNetworkFailed"]
    assert env.queues.add.pending() == 0  # permanent until the pod changes
    assert env.ipam.get_pod_address("default/web") == []


def test_a_nad_that_appears_later_requeues_the_pods_waiting_for_it(env: Env) -> None:
    # kube-ovn relies on the retry backoff alone, which grows while the NAD is missing; the NAD
    # event re-queues the waiting pods at once (and leaves allocated pods alone)
    env.add_subnet(
        raw_subnet("attach", "10.20.0.0/16", gateway="10.20.0.1", provider="late.default.ovn")
    )
    env.create_pod(raw_pod("early", annotations={"k8s.v1.cni.cncf.io/networks": "late"}))
    env.create_pod(raw_pod("other", annotations={"k8s.v1.cni.cncf.io/networks": "elsewhere"}))
    env.create_pod(raw_pod("plain"))
    env.converge()
    assert "ovn.kubernetes.io/allocated" not in env.annotations("default/early")
    assert len(env.queues.add) == 0  # only the rate-limited retries are waiting
    nad = {
        "metadata": {"name": "late", "namespace": "default"},
        "spec": {"config": '{"cniVersion": "0.3.1", "type": "kube-ovn"}'},
    }
    env.nads.add(nad)
    handler = env.controller.nad_event_handler()
    handler.on_add(nad, False)
    assert env.drain(env.queues.add) == ["default/early"]
    env.controller.handle_add_pod("default/early")
    env.converge()
    got = env.annotations("default/early")
    assert got["late.default.ovn.kubernetes.io/ip_address"] == "10.20.0.2"
    changed = {**nad, "spec": {"config": '{"cniVersion": "0.4.0", "type": "kube-ovn"}'}}
    handler.on_update(nad, changed)
    assert len(env.queues.add) == 0  # allocated already: nothing to do
    env.leader = False
    handler.on_add(
        {"metadata": {"name": "elsewhere", "namespace": "default"}, "spec": {"config": "{}"}},
        False,
    )
    assert len(env.queues.add) == 0  # a follower enqueues nothing


def test_a_subnet_registered_before_its_formatted_spec_is_cached_gives_the_formatted_gateway(
    env: Env,
) -> None:
    # the subnet controller registers a subnet in IPAM as it writes the formatted spec back; a
    # pod handled before that write reaches the cache must still get the gateway and the CIDR
    # the subnet will have, never an empty gateway the CNI daemon would route nothing through
    raw = raw_subnet("fresh", "10.77.0.9/16", gateway="", exclude=[], namespaces=["default"])
    del raw["spec"]["gateway"]
    env.subnets.add(raw)
    env.ipam.add_or_update_subnet("fresh", "10.77.0.0/16", ["10.77.0.1"])
    env.nb.ensure_logical_switch("fresh", ROUTER, "10.77.0.0/16", "10.77.0.1", {})
    env.create_pod(raw_pod("early", annotations={LS: "fresh"}))
    env.controller.handle_add_pod("default/early")

    got = env.annotations("default/early")
    assert got["ovn.kubernetes.io/gateway"] == "10.77.0.1"
    assert got["ovn.kubernetes.io/cidr"] == "10.77.0.0/16"
    assert got[IP] == "10.77.0.2"
