"""Adopting a cluster exactly as kube-ovn v1.8 leaves it (the migration path in the README).

The NB database is written the way kube-ovn v1.8's ovn-nbctl calls write it (pkg/ovs/ovn-nbctl.go:
CreateLogicalRouter, CreateLogicalSwitch + createRouterPort, CreatePort, CreateLocalnetPort,
the cluster load balancers, a NetworkPolicy's port group with its ACLs and address sets, a
security group's port group and address set, the deny-all group, the pods' src-ip routes; and
node.go handleAddNode's route to the node); the
API server holds its CRs (Vpc, Subnets with status, IPs, a Vlan) and pods and nodes with
kube-ovn's annotations. Then this controller starts on it and:

* replaces kube-ovn v1.8's src-ip static route of each existing pod by the pod's entry in an
  address set of the node's reroute policy (`controller/pod/migration.py`), and v1.8's dst-ip
  route to the node's InternalIP by the node's priority-30000 reroute, and otherwise
  deletes no row that was there, and changes no column of rows it does not manage (load
  balancers, NetworkPolicy and security-group port groups, ACLs and address sets, localnet
  ports, other routes); rows it manages (switches, router ports, pod and node ports) may gain keys
  in their maps but keep every value kube-ovn wrote;
* keeps every existing pod's address, MAC and port;
* gives new pods addresses no existing pod, node or gateway holds;
* leaves `check` clean.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.core.constants import (
    ALLOCATED_ANNOTATION,
    CIDR_ANNOTATION,
    GATEWAY_ANNOTATION,
    IP_ADDRESS_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    MAC_ADDRESS_ANNOTATION,
    PORT_SECURITY_ANNOTATION,
    ROUTED_ANNOTATION,
)
from tests.e2e.conftest import Cluster, StartController
from tests.e2e.helpers import NODE, NODE_IP, allocated_pods, audit_clean, pod, running, wait_for
from tests.e2e.nbrows import _nbctl, nb_rows
from tests.e2e.workloads import lsp

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SCHEMA = Path("/usr/share/ovn/ovn-nb.ovsschema")
NODE_JOIN_IP, NODE_MAC = "100.64.0.2", "00:00:00:5e:1c:2a"
PODS = {  # name -> (ip, mac), as kube-ovn v1.8 allocated them
    "web-0": ("10.16.0.5", "00:00:00:a1:b2:05"),
    "web-1": ("10.16.0.6", "00:00:00:a1:b2:06"),
    "db-0": ("10.16.0.9", "00:00:00:a1:b2:09"),
}
SG_MEMBERS = ("db-0",)
#: rows this controller owns as kube-ovn-controller's successor: they may gain map keys
MANAGED_TABLES = ("Logical_Switch", "Logical_Router", "Logical_Router_Port", "Logical_Switch_Port")
V18 = "kube-ovn"
SECURITY_GROUP_ANNOTATION = "ovn.kubernetes.io/security_groups"


def _kube_ovn_v18_nb(remote: str) -> None:
    """kube-ovn v1.8's NB writes for this cluster, in ovn-nbctl's own syntax."""
    cmds: list[list[str]] = [
        ["lr-add", "ovn-cluster"],
        ["set", "Logical_Router", "ovn-cluster", f"external_ids:vendor={V18}"],
    ]
    for ls, cidr, gw, mac in (
        ("ovn-default", "16", "10.16.0.1", "00:00:00:6c:1d:01"),
        ("join", "16", "100.64.0.1", "00:00:00:6c:1d:02"),
    ):
        cmds += [
            ["ls-add", ls],
            ["set", "logical_switch", ls, f"external_ids:vendor={V18}"],
            ["lsp-add", ls, f"{ls}-ovn-cluster"],
            ["set", "logical_switch_port", f"{ls}-ovn-cluster", "type=router"],
            ["lsp-set-addresses", f"{ls}-ovn-cluster", "router"],
            [
                "set",
                "logical_switch_port",
                f"{ls}-ovn-cluster",
                f"options:router-port=ovn-cluster-{ls}",
            ],
            ["set", "logical_switch_port", f"{ls}-ovn-cluster", f"external_ids:vendor={V18}"],
            ["lrp-add", "ovn-cluster", f"ovn-cluster-{ls}", mac, f"{gw}/{cidr}"],
        ]
    # the node's join port (CreatePort without a pod and without port security: vendor only)
    cmds += [
        ["lsp-add", "join", f"node-{NODE}"],
        ["lsp-set-addresses", f"node-{NODE}", f"{NODE_MAC} {NODE_JOIN_IP}"],
        ["set", "logical_switch_port", f"node-{NODE}", f"external_ids:vendor={V18}"],
        # handleAddNode's dst-ip route to the node's InternalIP (v1.8.18 node.go l.254-268)
        ["lr-route-add", "ovn-cluster", NODE_IP, NODE_JOIN_IP],
    ]
    for name, (ip, mac) in PODS.items():
        port = f"{name}.default"
        cmds += [
            ["lsp-add", "ovn-default", port],
            ["lsp-set-addresses", port, f"{mac} {ip}"],
            ["set", "logical_switch_port", port, f"external_ids:pod=default/{name}"],
            ["set", "logical_switch_port", port, f"external_ids:vendor={V18}"],
            # routed: the distributed gateway's src-ip route to the node's join address
            ["--policy=src-ip", "lr-route-add", "ovn-cluster", ip, NODE_JOIN_IP],
        ]
        if name in SG_MEMBERS:  # CreatePort with port security and a security group
            cmds += [
                ["lsp-set-port-security", port, f"{mac} {ip}"],
                ["set", "logical_switch_port", port, "external_ids:security_groups=sg1"],
                ["set", "logical_switch_port", port, "external_ids:associated_sg_sg1=true"],
            ]
    # an underlay subnet's localnet port (CreateLocalnetPort)
    cmds += [
        ["ls-add", "vlan-sub"],
        ["set", "logical_switch", "vlan-sub", f"external_ids:vendor={V18}"],
        ["lsp-add", "vlan-sub", "ln-vlan-sub"],
        ["lsp-set-addresses", "ln-vlan-sub", "unknown"],
        ["lsp-set-type", "ln-vlan-sub", "localnet"],
        ["lsp-set-options", "ln-vlan-sub", "network_name=provider"],
        ["set", "logical_switch_port", "ln-vlan-sub", f"external_ids:vendor={V18}", "tag=100"],
    ]
    # the cluster load balancers (kube-ovn's service handling; kube-proxy's job after migration)
    cmds += [
        ["lb-add", "cluster-tcp-loadbalancer", "10.96.0.1:443", f"{NODE_IP}:6443", "tcp"],
        ["lb-add", "cluster-udp-loadbalancer", "10.96.0.10:53", "10.16.0.9:53", "udp"],
        ["ls-lb-add", "ovn-default", "cluster-tcp-loadbalancer"],
        ["ls-lb-add", "ovn-default", "cluster-udp-loadbalancer"],
        ["ls-lb-add", "join", "cluster-tcp-loadbalancer"],
    ]
    # a NetworkPolicy (CreateNpPortGroup, CreateAddressSet, its ACLs)
    cmds += [
        ["pg-add", "allow.web.default", "web-0.default", "web-1.default"],
        ["set", "port_group", "allow.web.default", "external_ids:np=default/allow-web"],
        [
            "create",
            "address_set",
            "name=allow.web.default.ingress.allow.IPv4.0",
            "addresses=10.16.0.9",
            "external_ids:np=default/allow-web",
        ],
        [
            "--type=port-group",
            "acl-add",
            "allow.web.default",
            "to-lport",
            "2001",
            "outport == @allow.web.default && ip",
            "drop",
        ],
        [
            "--type=port-group",
            "acl-add",
            "allow.web.default",
            "to-lport",
            "2002",
            "ip4.src == $allow.web.default.ingress.allow.IPv4.0 && outport == @allow.web.default",
            "allow-related",
        ],
    ]
    # a security group with one member and its associated address set (CreateSgPortGroup, ...)
    cmds += [
        ["pg-add", "ovn.sg.sg1", "db-0.default"],
        [
            "set",
            "port_group",
            "ovn.sg.sg1",
            "external_ids:type=security_group",
            "external_ids:sg=sg1",
            "external_ids:name=ovn.sg.sg1",
        ],
        [
            "create",
            "address_set",
            "name=ovn.sg.sg1.associated.v4",
            "addresses=10.16.0.9",
            "external_ids:sg=sg1",
        ],
        [
            "--type=port-group",
            "acl-add",
            "ovn.sg.sg1",
            "to-lport",
            "2299",
            "outport==@ovn.sg.sg1 && ip4 && ip4.src==0.0.0.0/0 && 5432<=tcp.dst<=5432",
            "allow-related",
        ],
    ]
    script: list[str] = []
    for cmd in cmds:
        if script:
            script.append("--")
        script.extend(cmd)
    _nbctl(remote, *script)


def _crs_and_pods(cluster: Cluster) -> None:
    store = cluster.server.store
    store.create(
        "vpcs",
        {
            "apiVersion": "kubeovn.io/v1",
            "kind": "Vpc",
            "metadata": {"name": "ovn-cluster"},
            "spec": {},
            "status": {
                "router": "ovn-cluster",
                "defaultLogicalSwitch": "ovn-default",
                "default": True,
                "standby": True,
            },
        },
    )
    for name, cidr, gw, extra, status in (
        (
            "ovn-default",
            "10.16.0.0/16",
            "10.16.0.1",
            {"default": True, "natOutgoing": True, "gatewayType": "distributed"},
            {"v4usingIPs": 3, "v4availableIPs": 65530},
        ),
        (
            "join",
            "100.64.0.0/16",
            "100.64.0.1",
            {"gatewayType": "distributed"},
            {"v4usingIPs": 1, "v4availableIPs": 65532},
        ),
    ):
        store.create(
            "subnets",
            {
                "apiVersion": "kubeovn.io/v1",
                "kind": "Subnet",
                "metadata": {"name": name},
                "spec": {
                    "cidrBlock": cidr,
                    "gateway": gw,
                    "excludeIps": [gw],
                    "protocol": "IPv4",
                    "provider": "ovn",
                    "vpc": "ovn-cluster",
                    **extra,
                },
                "status": status,
            },
        )
    # the SecurityGroup whose rule kube-ovn v1.8's security_group.go turned into the ACL above
    store.create(
        "security-groups",
        {
            "apiVersion": "kubeovn.io/v1",
            "kind": "SecurityGroup",
            "metadata": {"name": "sg1"},
            "spec": {
                "ingressRules": [
                    {
                        "ipVersion": "ipv4",
                        "protocol": "tcp",
                        "portRangeMin": 5432,
                        "portRangeMax": 5432,
                        "remoteType": "address",
                        "remoteAddress": "0.0.0.0/0",
                        "policy": "allow",
                        "priority": 1,
                    }
                ]
            },
        },
    )
    store.create(
        "vlans",
        {
            "apiVersion": "kubeovn.io/v1",
            "kind": "Vlan",
            "metadata": {"name": "vlan100"},
            "spec": {"id": 100, "provider": "provider"},
        },
    )
    store.create(
        "subnets",
        {
            "apiVersion": "kubeovn.io/v1",
            "kind": "Subnet",
            "metadata": {"name": "vlan-sub"},
            "spec": {
                "cidrBlock": "192.168.100.0/24",
                "gateway": "192.168.100.1",
                "excludeIps": ["192.168.100.1"],
                "protocol": "IPv4",
                "provider": "ovn",
                "vpc": "ovn-cluster",
                "vlan": "vlan100",
                "underlayGateway": True,
                "gatewayType": "distributed",
            },
            "status": {"v4usingIPs": 0, "v4availableIPs": 253},
        },
    )
    for name, (ip, mac) in PODS.items():
        ann = {
            ALLOCATED_ANNOTATION: "true",
            ROUTED_ANNOTATION: "true",
            IP_ADDRESS_ANNOTATION: ip,
            MAC_ADDRESS_ANNOTATION: mac,
            CIDR_ANNOTATION: "10.16.0.0/16",
            GATEWAY_ANNOTATION: "10.16.0.1",
            LOGICAL_SWITCH_ANNOTATION: "ovn-default",
            "ovn.kubernetes.io/pod_nic_type": "veth-pair",
        }
        if name in SG_MEMBERS:
            ann |= {PORT_SECURITY_ANNOTATION: "true", SECURITY_GROUP_ANNOTATION: "sg1"}
        store.create("pods", pod(name, annotations=ann, node_name=NODE))
        store.create(
            "ips",
            {
                "apiVersion": "kubeovn.io/v1",
                "kind": "IP",
                "metadata": {
                    "name": f"{name}.default",
                    "labels": {"ovn.kubernetes.io/subnet": "ovn-default", "ovn-default": ""},
                },
                "spec": {
                    "podName": name,
                    "namespace": "default",
                    "subnet": "ovn-default",
                    "nodeName": NODE,
                    "ipAddress": ip,
                    "v4IpAddress": ip,
                    "v6IpAddress": "",
                    "macAddress": mac,
                    "attachSubnets": [],
                    "attachIps": [],
                    "attachMacs": [],
                    "containerID": "",
                    "podType": "",
                },
            },
        )
    node_obj = store.get("nodes", None, NODE)
    node_obj["metadata"]["annotations"] = {
        ALLOCATED_ANNOTATION: "true",
        IP_ADDRESS_ANNOTATION: NODE_JOIN_IP,
        MAC_ADDRESS_ANNOTATION: NODE_MAC,
        CIDR_ANNOTATION: "100.64.0.0/16",
        GATEWAY_ANNOTATION: "100.64.0.1",
        LOGICAL_SWITCH_ANNOTATION: "join",
        "ovn.kubernetes.io/chassis": "7f6d4bd4-0f0f-4c1d-9a6e-2b7c4e1b1d3a",
    }
    store.update("nodes", node_obj)
    store.create(
        "ips",
        {
            "apiVersion": "kubeovn.io/v1",
            "kind": "IP",
            "metadata": {
                "name": f"node-{NODE}",
                "labels": {"ovn.kubernetes.io/subnet": "join", "join": ""},
            },
            "spec": {
                "podName": NODE,
                "namespace": "",
                "subnet": "join",
                "nodeName": NODE,
                "ipAddress": NODE_JOIN_IP,
                "v4IpAddress": NODE_JOIN_IP,
                "v6IpAddress": "",
                "macAddress": NODE_MAC,
                "attachSubnets": [],
                "attachIps": [],
                "attachMacs": [],
                "containerID": "",
                "podType": "",
            },
        },
    )


def _snapshot(remote: str) -> dict[str, dict[str, dict[str, Any]]]:
    tables = json.loads(SCHEMA.read_text())["tables"]
    return {t: {str(r["_uuid"]): r for r in nb_rows(remote, t)} for t in tables}


def _grown(old: Any, new: Any) -> bool:
    if isinstance(old, dict) and isinstance(new, dict):
        return all(new.get(k) == v for k, v in old.items())
    if isinstance(old, list) and isinstance(new, list):
        return all(v in new for v in old)
    return False


def _members(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value in (None, "") else [value]


def _pod_src_ip_routes(snapshot: dict[str, dict[str, dict[str, Any]]]) -> dict[str, str]:
    """uuid -> pod address of kube-ovn v1.8's src-ip host routes of the pods in `PODS`."""
    pod_ips = {ip for ip, _ in PODS.values()}
    router = next(r for r in snapshot["Logical_Router"].values() if r["name"] == "ovn-cluster")
    routes = snapshot["Logical_Router_Static_Route"]
    out = {}
    for uuid in _members(router["static_routes"]):
        route = routes[str(uuid)]
        ip = str(route["ip_prefix"]).removesuffix("/32")
        if route.get("policy") == "src-ip" and ip in pod_ips and route["nexthop"] == NODE_JOIN_IP:
            out[str(uuid)] = ip
    return out


def _node_routes(snapshot: dict[str, dict[str, dict[str, Any]]]) -> dict[str, str]:
    """uuid -> InternalIP of kube-ovn v1.8's dst-ip route to the node (`NODE_IP` via its join)."""
    router = next(r for r in snapshot["Logical_Router"].values() if r["name"] == "ovn-cluster")
    routes = snapshot["Logical_Router_Static_Route"]
    out = {}
    for uuid in _members(router["static_routes"]):
        route = routes[str(uuid)]
        ip = str(route["ip_prefix"]).removesuffix("/32")
        if route.get("policy") != "src-ip" and ip == NODE_IP and route["nexthop"] == NODE_JOIN_IP:
            out[str(uuid)] = ip
    return out


def _node_rerouted(after: dict[str, dict[str, dict[str, Any]]], ip: str) -> bool:
    """`ip` has its priority-30000 `ip4.dst == <ip>` reroute to the node's join address."""
    router = next(r for r in after["Logical_Router"].values() if r["name"] == "ovn-cluster")
    for uuid in _members(router["policies"]):
        policy = after["Logical_Router_Policy"][str(uuid)]
        hops = _members(policy.get("nexthops")) + _members(policy.get("nexthop"))
        if (
            int(policy["priority"]) == 30000
            and str(policy["match"]).strip() == f"ip4.dst == {ip}"
            and NODE_JOIN_IP in hops
        ):
            return True
    return False


def _rerouted(after: dict[str, dict[str, dict[str, Any]]], ip: str) -> bool:
    """`ip` is in an address set that a reroute policy of ovn-cluster sends to the node."""
    router = next(r for r in after["Logical_Router"].values() if r["name"] == "ovn-cluster")
    sets = {str(a["name"]) for a in after["Address_Set"].values() if ip in _members(a["addresses"])}
    for uuid in _members(router["policies"]):
        policy = after["Logical_Router_Policy"][str(uuid)]
        hops = _members(policy.get("nexthops")) + _members(policy.get("nexthop"))
        names = (f"${name}" for name in sets)
        if (
            policy["action"] == "reroute"
            and NODE_JOIN_IP in hops
            and any(name in str(policy["match"]) for name in names)
        ):
            return True
    return False


def _migrated(before: dict[str, Any], after: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """The sanctioned removals (uuid -> address) and what is wrong with them: the src-ip host
    routes of the pods this controller manages, each replaced by the pod's address-set entry
    under the node's reroute policy, and the node's dst-ip route, replaced by the node's own
    reroute policy."""
    pod_routes, node_routes = _pod_src_ip_routes(before), _node_routes(before)
    out = []
    for uuid, ip in pod_routes.items():
        if uuid in after["Logical_Router_Static_Route"]:
            out.append(f"src-ip route of {ip}: not migrated")
        if not _rerouted(after, ip):
            out.append(f"{ip}: in no address set of a reroute policy to {NODE_JOIN_IP}")
    if not node_routes:
        out.append(f"the seeded route to {NODE_IP} via {NODE_JOIN_IP} is not in the snapshot")
    for uuid, ip in node_routes.items():
        if uuid in after["Logical_Router_Static_Route"]:
            out.append(f"dst-ip route to node {ip}: not migrated")
        if not _node_rerouted(after, ip):
            out.append(f"{ip}: no 30000 reroute policy to {NODE_JOIN_IP}")
    return {**pod_routes, **node_routes}, out


def _changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    migrated, out = _migrated(before, after)
    for table, rows in before.items():
        for uuid, row in rows.items():
            new = after[table].get(uuid)
            label = f"{table} {row.get('name', uuid)}"
            if new is None:
                if uuid not in migrated:
                    out.append(f"{label}: deleted")
                continue
            for col, was in row.items():
                value, now = was, new.get(col)
                if table == "Logical_Router" and col == "static_routes":
                    value = [r for r in _members(was) if str(r) not in migrated]
                    now = _members(now)
                if now == value:
                    continue
                if table in MANAGED_TABLES and _grown(value, now):
                    continue  # keys or members added, none changed or lost
                out.append(f"{label}: {col} {value!r} -> {now!r}")
    return out


def test_a_kube_ovn_v18_cluster_is_adopted(
    cluster: Cluster, start_controller: StartController
) -> None:
    _kube_ovn_v18_nb(cluster.nb_server.remote)
    _crs_and_pods(cluster)
    before = _snapshot(cluster.nb_server.remote)
    ctl = running(start_controller())
    store = cluster.server.store
    for i in range(3):
        store.create("pods", pod(f"new-{i}", node_name=NODE))
    ips = wait_for(
        lambda: p if len(p := allocated_pods(store)) == 6 else None, message="new pods allocated"
    )
    wait_for(lambda: audit_clean(cluster.argv()), message="audit clean", interval=0.3)
    # the migration of the existing pods' src-ip routes to policies must finish
    wait_for(
        lambda: (
            not _pod_src_ip_routes(s := _snapshot(cluster.nb_server.remote)) and not _node_routes(s)
        ),
        message="v1.8 routes migrated",
        interval=0.3,
    )
    after = _snapshot(cluster.nb_server.remote)

    changes = _changes(before, after)
    assert changes == [], "\n".join(changes)
    for name, (ip, mac) in PODS.items():
        assert ips[name] == ip
        port = lsp(cluster, f"{name}.default")
        assert port.addresses == (f"{mac} {ip}",)
        ann = store.get("pods", "default", name)["metadata"]["annotations"]
        assert ann[MAC_ADDRESS_ANNOTATION] == mac
    taken = {ip for ip, _ in PODS.values()} | {"10.16.0.1"}
    new = {ips[f"new-{i}"] for i in range(3)}
    assert len(new) == 3 and not new & taken
    assert ctl.ipam.get_ip_owner(NODE_JOIN_IP, "join") == f"node-{NODE}"
