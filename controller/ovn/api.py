"""The contract between the pod controller and OVN's Northbound database.

`NbClient` lists domain verbs, one per kube-ovn `pkg/ovs/ovn-nbctl.go` function the pod controller
calls, not raw OVSDB commands. Every verb:

* runs as exactly one NB transaction, with errors checked (nothing fails silently);
* is idempotent: calling it twice leaves the same rows as calling it once;
* raises only `OvnError` subclasses, within the configured timeout, never hangs.

Two implementations keep each other honest through one contract test suite: the real client over
ovsdbapp's IDL (`impl_idl.py`) and an in-memory fake (`controller/testing/fake_nb.py`) for fast unit
tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from controller.core.constants import VENDOR
from controller.core.errors import ControllerError
from controller.core.security_group import Acl


class OvnError(ControllerError):
    """Any failure talking to, or refused by, the Northbound database."""


class OvnTimeoutError(OvnError):
    """A transaction did not complete within --ovn-timeout (includes 'not connected')."""


class OvnConflictError(OvnError):
    """The request contradicts existing rows (same address twice on a switch, port elsewhere)."""


class DuplicateAddressError(OvnConflictError):
    """An address is already used by another port of the same logical switch (as ovn-nbctl)."""


class OvnNotFoundError(OvnError):
    """A row the verb needs (switch, router, port group) does not exist."""


class InvalidRequestError(OvnError, ValueError):
    """The arguments are malformed (bad MAC, IP, CIDR, NAT type...); nothing was written."""


@dataclass(frozen=True, slots=True)
class PortSpec:
    """A pod's logical switch port, as kube-ovn's CreatePort builds it.

    `ips` holds one bare address per family (v4 first); `cidrs` the subnet CIDR of each, used for
    the masked port_security entries of dual stack, as kube-ovn does.
    """

    name: str
    switch: str
    mac: str
    ips: tuple[str, ...]
    cidrs: tuple[str, ...] = ()
    pod_name: str = ""
    pod_namespace: str = ""
    port_security: bool = False
    security_groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PortInfo:
    """What the controller reads back about a logical switch port."""

    name: str
    switch: str
    addresses: tuple[str, ...]
    port_security: tuple[str, ...] = ()
    external_ids: Mapping[str, str] = field(default_factory=dict)
    type: str = ""  # the LSP type column: "" for a VIF, "router", "localnet", "remote", ...


@dataclass(frozen=True, slots=True)
class StaticRoute:
    router: str
    ip_prefix: str
    nexthop: str
    policy: str = "dst-ip"


@dataclass(frozen=True, slots=True)
class NatRule:
    router: str
    type: str
    external_ip: str
    logical_ip: str
    logical_port: str = ""
    external_mac: str = ""


@dataclass(frozen=True, slots=True)
class RouterPolicy:
    """A Logical_Router_Policy row of a router; one per (priority, match)."""

    router: str
    priority: int
    match: str
    action: str
    nexthops: tuple[str, ...] = ()
    external_ids: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AddressSetInfo:
    """An Address_Set row: its name, addresses (sorted) and external_ids."""

    name: str
    addresses: tuple[str, ...] = ()
    external_ids: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PortGroupInfo:
    """A security group's port group (external_ids type=security_group) and its member ports."""

    name: str
    sg: str
    ports: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SecurityGroupRows:
    """The NB rows of one security group: its port group ("" when absent) with its ports and
    ACLs, and the address sets whose external_ids name it (name -> sorted addresses)."""

    sg: str
    port_group: str = ""
    ports: tuple[str, ...] = ()
    acls: tuple[Acl, ...] = ()
    address_sets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SetChange:
    """An address set's entries added and removed (the set is created with `external_ids` when
    missing, and those keys are merged in), or, with `delete`, the whole set removed."""

    name: str
    add: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    external_ids: Mapping[str, str] = field(default_factory=dict)
    delete: bool = False


@dataclass(frozen=True, slots=True)
class NatChange:
    """One NAT rule of (type, logical_ip) made to translate to `external_ip`; "" removes it."""

    type: str
    logical_ip: str
    external_ip: str
    logical_mac: str = ""
    port: str = ""


@dataclass(frozen=True, slots=True)
class RoutingChange:
    """What `apply_routing` writes on a router in ONE transaction: router policies created or
    rewritten (external_ids merged), policies removed by (priority, match), address-set changes,
    NAT rules, src-ip static routes removed by prefix (any next hop), and dst-ip static routes
    removed by (prefix, next hop)."""

    policies: tuple[RouterPolicy, ...] = ()
    delete_policies: tuple[tuple[int, str], ...] = ()
    sets: tuple[SetChange, ...] = ()
    nats: tuple[NatChange, ...] = ()
    delete_src_routes: tuple[str, ...] = ()
    delete_dst_routes: tuple[tuple[str, str], ...] = ()

    def empty(self) -> bool:
        return not (
            self.policies
            or self.delete_policies
            or self.sets
            or self.nats
            or self.delete_src_routes
            or self.delete_dst_routes
        )


class NbClient(Protocol):
    # Logical switch ports: CreatePort, DeleteLogicalSwitchPort, ListPodLogicalSwitchPorts.
    def create_port(self, spec: PortSpec) -> None: ...

    # Batches: all specs/names in ONE transaction (all or nothing); same effects as one by one.
    def create_ports(self, specs: Sequence[PortSpec]) -> None: ...

    def delete_port(self, name: str) -> None: ...

    def delete_ports(self, names: Sequence[str]) -> None: ...

    def get_port(self, name: str) -> PortInfo | None: ...

    def list_pod_ports(self, pod_name: str, pod_namespace: str) -> list[str]: ...

    def list_ports(self, vendor: str = VENDOR) -> list[PortInfo]:
        """Ports with that vendor that are pod, node or router ports (not localnet & co)."""
        ...

    # Routes (AddStaticRoute / DeleteStaticRoute), one canonical stored prefix form.
    def add_static_route(self, policy: str, cidr: str, nexthop: str, router: str) -> None: ...

    # `policy` "" deletes the prefix's routes of every policy (ovn-nbctl lr-route-del).
    def delete_static_route(self, cidr: str, router: str, policy: str = "") -> None: ...

    def list_static_routes(self, router: str) -> list[StaticRoute]: ...

    # Router policies (Logical_Router_Policy), one row per (router, priority, match): `add`
    # creates it or rewrites its action / nexthops and merges `external_ids`; both verbs are
    # free (no transaction) when there is nothing to change.
    def add_router_policy(
        self,
        router: str,
        priority: int,
        match: str,
        action: str,
        nexthops: Sequence[str] = (),
        external_ids: Mapping[str, str] | None = None,
    ) -> None: ...

    def delete_router_policy(self, router: str, priority: int, match: str) -> None: ...

    def list_router_policies(self, router: str) -> list[RouterPolicy]: ...

    # Address sets: entries added / removed in place (the set is created on the first add);
    # free when there is nothing to change. `list_address_sets` returns the sets whose
    # external_ids contain every pair of `external_ids`.
    def add_address_set_addresses(
        self, name: str, addresses: Sequence[str], external_ids: Mapping[str, str] | None = None
    ) -> None: ...

    def remove_address_set_addresses(self, name: str, addresses: Sequence[str]) -> None: ...

    def delete_address_set(self, name: str) -> None: ...

    def list_address_sets(self, external_ids: Mapping[str, str]) -> list[AddressSetInfo]: ...

    # NAT (UpdateNatRule / DeleteNatRule).
    def update_nat_rule(
        self,
        policy: str,
        logical_ip: str,
        external_ip: str,
        router: str,
        logical_mac: str = "",
        port: str = "",
    ) -> None: ...

    def delete_nat_rule(self, logical_ip: str, router: str) -> None: ...

    def list_nat_rules(self, router: str) -> list[NatRule]: ...

    # Routing rows of one reconciler key, all in ONE transaction (nothing when `change` is
    # empty); the same row rules as the verbs above.
    def apply_routing(self, router: str, change: RoutingChange) -> None: ...

    # Security groups on port groups (ovn.sg.<name>). The deny-all group (kubeovn_deny_all)
    # also carries its two priority-2003 drop ACLs.
    def create_sg_port_group(self, sg: str) -> None: ...

    def reconcile_port_sg(self, port: str, security_groups: Sequence[str]) -> list[str]: ...

    # The group's ports and v4/v6 address sets, then the deny-all group's ports (every port
    # with security groups and port security); `sync_sg_ports("kubeovn_deny_all")` does only
    # the latter.
    def sync_sg_ports(self, sg: str) -> None: ...

    def list_sg_port_groups(self) -> list[PortGroupInfo]: ...

    # SecurityGroup CRs (controller/ovn/security_groups.py). One transaction: the group's port
    # group with kube-ovn's external_ids, its v4/v6 address sets and those of `remote_groups`
    # (created empty when missing), and exactly `acls` on the port group (any other ACL of it
    # removed). Members and address set contents are sync_sg_ports' job.
    def apply_security_group(
        self, sg: str, acls: Sequence[Acl], remote_groups: Sequence[str] = ()
    ) -> None: ...

    # One transaction: the group's port group (its ACLs with it) and its address sets.
    def delete_security_group(self, sg: str) -> None: ...

    # Every group that has a port group or an address set, sorted by name (gc, audit).
    def list_security_groups(self) -> list[SecurityGroupRows]: ...

    # Switches and routers the pod flow needs to exist.
    def ensure_logical_router(self, name: str) -> None: ...

    def ensure_logical_switch(
        self, name: str, router: str, cidr: str, gateway: str, external_ids: Mapping[str, str]
    ) -> None: ...

    def delete_logical_switch(self, name: str) -> None: ...

    def list_logical_switches(self) -> list[str]: ...
