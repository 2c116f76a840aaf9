"""How pods of the default VPC are routed on the cluster router: Logical_Router_Policy rows and
per-node address sets (kube-ovn v1.10+ `pkg/controller/subnet.go` / `node.go`; pure).

Why not src-ip static routes (kube-ovn v1.8): upstream ovn-northd ranks static routes by prefix
length, so a pod's `/32` src-ip route outranks every other subnet's route and cross-subnet
traffic leaves through the node; only kube-ovn's patched ovn-northd ranks src-ip routes below
destination routes. Router policies are evaluated after routing and by priority alone, the same
on every OVN version:

* `SUBNET_PRIORITY` (31000): `ip4.dst == <subnet cidr>` allow, for every overlay subnet of the
  default VPC and the join subnet: traffic between pods, and to nodes' join addresses, follows the
  connected routes;
* `NODE_PRIORITY` (30000): `ip4.dst == <node InternalIP>` reroute to that node's join address;
* `POD_PRIORITY` (29250): `ip4.src == <pod ip>` reroute, for a pod with a `north_gateway` or an
  EIP/SNAT (external gateway) next hop;
* `GATEWAY_PRIORITY` (29000): a distributed-gateway subnet's pods on node N,
  `ip4.src == $<set of subnet, N>` reroute to N's join address; a centralized-gateway subnet,
  `ip4.src == <subnet cidr>` reroute to its gateway node's join address.

Every row the controller writes carries external_ids `vendor=kube-ovn` and `kube-ovn-route=<kind>`
(`subnet`, `node`, `pod`, `gateway`), plus `subnet` / `node` / `pod` / `af` as they apply: gc and
the audit only ever look at rows with that mark.
"""

from __future__ import annotations

import hashlib

from controller.core.address import check_protocol

SUBNET_PRIORITY = 31000
NODE_PRIORITY = 30000
POD_PRIORITY = 29250
GATEWAY_PRIORITY = 29000

ROUTE_KIND_KEY = "kube-ovn-route"
KIND_SUBNET = "subnet"
KIND_NODE = "node"
KIND_POD = "pod"
KIND_GATEWAY = "gateway"
SUBNET_KEY = "subnet"
NODE_KEY = "node"
AF_KEY = "af"

SET_PREFIX = "kubeovn."
SET_HASH_LEN = 10


def family(ip_or_cidr: str) -> int:
    """4 or 6."""
    return 6 if check_protocol(ip_or_cidr) == "IPv6" else 4


def set_name(subnet: str, node: str, version: int) -> str:
    """`kubeovn.<subnet>.<node>.<hash>_ip4|_ip6`: every `-` as `.` (an OVN identifier, referenced
    as `$name` in matches, holds only letters, digits, `_` and `.`; the prefix keeps it valid
    when the subnet name starts with a digit), and a hash of the exact (subnet, node) pair, since
    the readable part alone is the same for "prod" + "db-node1" and "prod-db" + "node1". The full
    names are in the set's external_ids."""
    digest = hashlib.sha256(f"{subnet}/{node}".encode()).hexdigest()[:SET_HASH_LEN]
    return f"{SET_PREFIX}{subnet}.{node}".replace("-", ".") + f".{digest}_ip{version}"


def legacy_set_name(subnet: str, node: str, version: int) -> str:
    """The name earlier releases gave the (subnet, node) set (ambiguous; migrated away)."""
    return f"{SET_PREFIX}{subnet}.{node}".replace("-", ".") + f"_ip{version}"


def ids(kind: str, version: int = 0, **keys: str) -> dict[str, str]:
    out = {"vendor": "kube-ovn", ROUTE_KIND_KEY: kind}
    if version:
        out[AF_KEY] = str(version)
    out.update({k: v for k, v in keys.items() if v})
    return out


def dst_match(cidr_or_ip: str) -> str:
    return f"ip{family(cidr_or_ip)}.dst == {cidr_or_ip}"


def src_match(cidr_or_ip: str) -> str:
    return f"ip{family(cidr_or_ip)}.src == {cidr_or_ip}"


def src_set_match(name: str, version: int) -> str:
    return f"ip{version}.src == ${name}"
