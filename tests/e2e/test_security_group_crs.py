"""SecurityGroup objects end to end: the real controller, the API server emulator and a real NB
ovsdb-server; ACLs, port groups and address sets are read back with ovn-nbctl.

Covers create / edit / delete of a group, its status, bad rules (Warning Event and a status
naming the rule while the other rules and groups keep working), a remote group that appears
later, members following pods, and a controller restart (a group deleted while no controller
ran is collected, the others are left as they are).
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.app import Controller
from controller.core.constants import IP_ADDRESS_ANNOTATION, PORT_SECURITY_ANNOTATION
from controller.core.security_group import rules_md5
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import audit_clean, get_or_none, pod, rewrite, running, wait_for
from tests.e2e.nbrows import nb_row, nb_rows
from tests.e2e.workloads import allocated, warning

pytestmark = pytest.mark.e2e

NS = "default"
SG_ANNOTATION = "ovn.kubernetes.io/security_groups"
DENY_ALL_PG = "ovn.sg.kubeovn_deny_all"
REASON = "ValidateSecurityGroupFailed"


def rule(
    priority: int,
    *,
    protocol: str = "all",
    address: str = "",
    group: str = "",
    ports: tuple[int, int] = (0, 0),
    policy: str = "allow",
    version: str = "ipv4",
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ipVersion": version,
        "protocol": protocol,
        "priority": priority,
        "policy": policy,
        "remoteType": "securityGroup" if group else "address",
    }
    if group:
        out["remoteSecurityGroup"] = group
    else:
        out["remoteAddress"] = address
    if ports != (0, 0):
        out["portRangeMin"], out["portRangeMax"] = ports
    return out


def create_sg(cluster: Cluster, name: str, **kw: Any) -> None:
    body = {"apiVersion": "kubeovn.io/v1", "kind": "SecurityGroup", "metadata": {"name": name}}
    cluster.server.store.create("security-groups", {**body, "spec": _spec(**kw)})


def _spec(
    ingress: list[dict[str, Any]] | None = None,
    egress: list[dict[str, Any]] | None = None,
    same: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"allowSameGroupTraffic": same}
    if ingress is not None:
        spec["ingressRules"] = ingress
    if egress is not None:
        spec["egressRules"] = egress
    return spec


def edit_sg(cluster: Cluster, name: str, **kw: Any) -> None:
    """Replace the group's spec; the controller writes the group's status after each sync, so
    the write retries on a Conflict (`rewrite`)."""
    spec = _spec(**kw)

    def change(obj: dict[str, Any]) -> None:
        obj["spec"] = spec

    rewrite(cluster.server, "security-groups", None, name, change)


def acls(cluster: Cluster, pg: str) -> set[tuple[str, int, str, str]] | None:
    remote = cluster.nb_server.remote
    row = nb_row(remote, "Port_Group", pg)
    if row is None:
        return None
    mine = set(row["acls"])
    return {
        (a["direction"], a["priority"], a["match"], a["action"])
        for a in nb_rows(remote, "ACL")
        if a["_uuid"] in mine
    }


def nb_calls(ctl: Controller, method: str) -> float:
    """How many times the controller ran NB verb `method` (its latency histogram's count)."""
    return sum(
        sample.value
        for family in ctl.registry.collect()
        for sample in family.samples
        if sample.name == "ovs_client_request_latency_milliseconds_count"
        and sample.labels.get("method") == method
    )


def acl_uuids(cluster: Cluster, pg: str) -> set[str]:
    row = nb_row(cluster.nb_server.remote, "Port_Group", pg)
    assert row is not None, pg
    return set(row["acls"])


def all_acl_rows(cluster: Cluster) -> int:
    return len(nb_rows(cluster.nb_server.remote, "ACL"))


def pg_ports(cluster: Cluster, pg: str) -> set[str] | None:
    row = nb_row(cluster.nb_server.remote, "Port_Group", pg)
    return None if row is None else set(row["ports"])


def address_set(cluster: Cluster, name: str) -> set[str] | None:
    row = nb_row(cluster.nb_server.remote, "Address_Set", name)
    return None if row is None else set(row["addresses"])


def status(cluster: Cluster, name: str) -> dict[str, Any]:
    obj = get_or_none(cluster.server, "security-groups", None, name)
    return (obj or {}).get("status") or {}


def synced(cluster: Cluster, name: str, *, ingress: bool = True, egress: bool = True) -> None:
    """The group's status says it was reconciled with this outcome for its current spec."""

    def done() -> bool:
        st = status(cluster, name)
        obj = cluster.server.store.get("security-groups", None, name)
        return (
            st.get("ingressMd5") == rules_md5((obj.get("spec") or {}).get("ingressRules"))
            and st.get("egressMd5") == rules_md5((obj.get("spec") or {}).get("egressRules"))
            and st.get("ingressLastSyncSuccess") is ingress
            and st.get("egressLastSyncSuccess") is egress
        )

    wait_for(done, message=f"status of {name}")


def secured_pod(cluster: Cluster, name: str, groups: str) -> str:
    cluster.server.store.create(
        "pods",
        pod(name, annotations={PORT_SECURITY_ANNOTATION: "true", SG_ANNOTATION: groups}),
    )
    return allocated(cluster, name)[IP_ADDRESS_ANNOTATION]


def test_create_edit_delete(ctl: Controller, cluster: Cluster) -> None:
    web_ip = secured_pod(cluster, "web1", "web-a")
    create_sg(
        cluster,
        "web-a",
        ingress=[rule(10, protocol="icmp", address="10.0.0.0/24")],
        egress=[rule(1, address="10.9.0.7", policy="drop")],
        same=True,
    )
    synced(cluster, "web-a")
    pg = "ovn.sg.web.a"
    assert acls(cluster, pg) == {
        (
            "to-lport",
            2290,
            f"outport==@{pg} && ip4 && ip4.src==10.0.0.0/24 && icmp4",
            "allow-related",
        ),
        ("from-lport", 2299, f"inport==@{pg} && ip4 && ip4.dst==10.9.0.7", "drop"),
        (
            "to-lport",
            2004,
            f"outport==@{pg} && ip4 && ip4.src==${pg}.associated.v4",
            "allow-related",
        ),
        (
            "to-lport",
            2004,
            f"outport==@{pg} && ip6 && ip6.src==${pg}.associated.v6",
            "allow-related",
        ),
        (
            "from-lport",
            2004,
            f"inport==@{pg} && ip4 && ip4.dst==${pg}.associated.v4",
            "allow-related",
        ),
        (
            "from-lport",
            2004,
            f"inport==@{pg} && ip6 && ip6.dst==${pg}.associated.v6",
            "allow-related",
        ),
    }
    st = status(cluster, "web-a")
    assert st["portGroup"] == pg and st["allowSameGroupTraffic"] is True
    assert st["conditions"][0]["status"] == "True"
    row = nb_row(cluster.nb_server.remote, "Port_Group", pg)
    assert row is not None
    assert row["external_ids"] == {"type": "security_group", "sg": "web-a", "name": pg}
    assert pg_ports(cluster, pg) == {f"web1.{NS}"}
    assert address_set(cluster, f"{pg}.associated.v4") == {web_ip}
    assert address_set(cluster, f"{pg}.associated.v6") == set()

    # an edit replaces exactly this group's ACLs; the deny-all ACLs stay as they are
    before = all_acl_rows(cluster)
    edit_sg(
        cluster, "web-a", ingress=[rule(10, protocol="tcp", address="10.0.0.0/24", ports=(80, 89))]
    )
    synced(cluster, "web-a")
    assert acls(cluster, pg) == {
        (
            "to-lport",
            2290,
            f"outport==@{pg} && ip4 && ip4.src==10.0.0.0/24 && 80<=tcp.dst<=89",
            "allow-related",
        )
    }
    assert all_acl_rows(cluster) == before - 5
    assert len(acls(cluster, DENY_ALL_PG) or ()) == 2

    # delete: ACLs, port group and address sets go; the pod keeps its port
    cluster.server.store.delete("security-groups", None, "web-a")
    wait_for(lambda: acls(cluster, pg) is None, message="port group deleted")
    assert address_set(cluster, f"{pg}.associated.v4") is None
    assert address_set(cluster, f"{pg}.associated.v6") is None
    assert all_acl_rows(cluster) == 2  # only the deny-all group's
    assert cluster.nb.get_port(f"web1.{NS}") is not None
    # re-created under the same name: the members come back
    create_sg(cluster, "web-a", ingress=[rule(5, address="10.0.0.1")])
    synced(cluster, "web-a")
    wait_for(lambda: pg_ports(cluster, pg) == {f"web1.{NS}"}, message="members back")
    audit_clean(cluster.argv())


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (rule(3, protocol="sctp", address="10.0.0.1"), "unknown protocol 'sctp'"),
        (rule(3, address="10.0.0.300/24"), "invalid CIDR '10.0.0.300/24'"),
        (rule(3, address="fd00::1"), "not an ipv4 address"),
        (rule(0, address="10.0.0.1"), "priority 0 is not in the range 1 to 200"),
        (rule(201, address="10.0.0.1"), "priority 201 is not in the range 1 to 200"),
        (
            rule(3, protocol="tcp", address="10.0.0.1", ports=(0, 80)),
            "portRangeMin 0 is out of range",
        ),
        (rule(3, protocol="udp", address="10.0.0.1", ports=(90, 80)), "portRangeMin 90 is greater"),
        (rule(3, protocol="udp", address="10.0.0.1", ports=(1, 70000)), "portRangeMax 70000"),
        (rule(3, group="nobody"), "remote security group 'nobody' does not exist"),
    ],
)
def test_bad_rule_is_reported_and_the_rest_works(
    ctl: Controller, cluster: Cluster, bad: dict[str, Any], message: str
) -> None:
    create_sg(cluster, "fine", ingress=[rule(1, address="10.1.0.0/16")])
    good = rule(7, protocol="icmp", address="10.2.0.0/16")
    create_sg(cluster, "mixed", ingress=[good, bad], egress=[rule(2, address="10.3.0.1")])
    synced(cluster, "mixed", ingress=False, egress=True)
    event = warning(cluster, "mixed", REASON)
    assert event["involvedObject"]["kind"] == "SecurityGroup"
    assert "ingressRules[1]" in event["message"] and message in event["message"], event["message"]
    cond = status(cluster, "mixed")["conditions"][0]
    assert cond["status"] == "False" and cond["reason"] == "InvalidRules"
    assert "ingressRules[1]" in cond["message"] and message in cond["message"]
    pg = "ovn.sg.mixed"
    assert acls(cluster, pg) == {
        (
            "to-lport",
            2293,
            f"outport==@{pg} && ip4 && ip4.src==10.2.0.0/16 && icmp4",
            "allow-related",
        ),
        ("from-lport", 2298, f"inport==@{pg} && ip4 && ip4.dst==10.3.0.1", "allow-related"),
    }
    synced(cluster, "fine")
    assert acls(cluster, "ovn.sg.fine") == {
        ("to-lport", 2299, "outport==@ovn.sg.fine && ip4 && ip4.src==10.1.0.0/16", "allow-related")
    }
    # fixing the rule heals the group
    edit_sg(cluster, "mixed", ingress=[good], egress=[rule(2, address="10.3.0.1")])
    synced(cluster, "mixed")
    assert status(cluster, "mixed")["conditions"][0]["status"] == "True"


def test_remote_group_appearing_later_and_members(ctl: Controller, cluster: Cluster) -> None:
    create_sg(cluster, "app", ingress=[rule(1, protocol="tcp", group="db", ports=(5432, 5432))])
    synced(cluster, "app", ingress=False)
    assert acls(cluster, "ovn.sg.app") == set()
    db_ip = secured_pod(cluster, "db1", "db")
    create_sg(cluster, "db")
    synced(cluster, "db")
    synced(cluster, "app")  # re-queued by the appearance of its remote group
    assert acls(cluster, "ovn.sg.app") == {
        (
            "to-lport",
            2299,
            "outport==@ovn.sg.app && ip4 && ip4.src==$ovn.sg.db.associated.v4"
            " && 5432<=tcp.dst<=5432",
            "allow-related",
        )
    }
    wait_for(lambda: address_set(cluster, "ovn.sg.db.associated.v4") == {db_ip}, message="db set")
    # a second member, then the first leaves the group by an annotation change
    db2_ip = secured_pod(cluster, "db2", "db")
    wait_for(
        lambda: address_set(cluster, "ovn.sg.db.associated.v4") == {db_ip, db2_ip},
        message="two members",
    )
    store = cluster.server.store

    def to_app(p: dict[str, Any]) -> None:
        p["metadata"]["annotations"][SG_ANNOTATION] = "app"

    # on the real plane the scheduler, the controller and the kubelet write the pod as well
    rewrite(cluster.server, "pods", NS, "db1", to_app)
    wait_for(lambda: address_set(cluster, "ovn.sg.db.associated.v4") == {db2_ip}, message="left")
    wait_for(lambda: pg_ports(cluster, "ovn.sg.app") == {f"db1.{NS}"}, message="joined app")
    store.delete("pods", NS, "db2")
    wait_for(lambda: address_set(cluster, "ovn.sg.db.associated.v4") == set(), message="pod gone")
    # the remote group goes: the rule naming it is rejected again, its ACL removed
    store.delete("security-groups", None, "db")
    synced(cluster, "app", ingress=False)
    assert acls(cluster, "ovn.sg.app") == set()
    audit_clean(cluster.argv())


def test_restart_keeps_groups_and_collects_deleted_ones(
    cluster: Cluster, start_controller: StartController
) -> None:
    first = running(start_controller())
    create_sg(cluster, "stay", ingress=[rule(1, address="10.5.0.0/16")])
    create_sg(cluster, "going", egress=[rule(1, address="10.6.0.0/16")])
    synced(cluster, "stay")
    synced(cluster, "going")
    stay = acls(cluster, "ovn.sg.stay")
    stay_rows = acl_uuids(cluster, "ovn.sg.stay")
    first.stop()
    # deleted while no controller runs: its rows are orphans now
    cluster.server.store.delete("security-groups", None, "going")
    second = running(
        start_controller(identity="controller-b"), "second controller started", timeout=30
    )
    wait_for(lambda: nb_calls(second, "apply_security_group") >= 1, message="stay re-applied")
    wait_for(lambda: acls(cluster, "ovn.sg.going") is None, message="orphan group collected")
    assert address_set(cluster, "ovn.sg.going.associated.v4") is None
    assert acls(cluster, "ovn.sg.stay") == stay
    # the new leader re-applied the group (its status is rewritten only if it differs) without
    # rewriting one ACL row: OVN recomputes nothing for an unchanged group
    assert acl_uuids(cluster, "ovn.sg.stay") == stay_rows
    assert address_set(cluster, "ovn.sg.stay.associated.v4") == set()
    audit_clean(cluster.argv())


@pytest.mark.emulator_only(
    "kube-apiserver's CRD schema refuses a non-list spec.ingressRules (422) before the controller "
    "sees it; the emulator does not validate schemas, so the controller's own check is tested here"
)
def test_a_rule_list_that_is_not_a_list(ctl: Controller, cluster: Cluster) -> None:
    create_sg(
        cluster,
        "lists",
        ingress=[rule(1, address="10.7.0.0/16")],
        egress=[rule(2, address="10.8.0.1")],
    )
    synced(cluster, "lists")

    def garble(obj: dict[str, Any]) -> None:
        obj["spec"]["ingressRules"] = "allow everything"

    rewrite(cluster.server, "security-groups", None, "lists", garble)
    synced(cluster, "lists", ingress=False, egress=True)
    event = warning(cluster, "lists", REASON)
    assert "ingressRules: ingressRules must be a list" in event["message"], event["message"]
    assert acls(cluster, "ovn.sg.lists") == {
        ("from-lport", 2298, "inport==@ovn.sg.lists && ip4 && ip4.dst==10.8.0.1", "allow-related")
    }
