"""Names of the NB rows and CRs the pod controller owns (pure; kube-ovn `pkg/ovs/util.go`).

The logical switch port of a pod network and that network's IP CR share one name:
`<pod>.<ns>` on the default provider `ovn`, `<pod>.<ns>.<provider>` otherwise (`<pod>` is the VM
name under keep-vm-ip). Node ports are `node-<node>`; a subnet's localnet port `localnet.<subnet>`.

Security groups live in port groups `ovn.sg.<name>` with every `-` of the *whole* name turned
into `.` (OVN port group names cannot hold `-`), and address sets
`ovn.sg.<name>.associated.v4|v6`. NOTE: the OVN client helper may own these two once its branch
lands (`controller/ovn/`); until then they live here, and callers should import them from here.
"""

from __future__ import annotations

from controller.constants import (
    LOCALNET_PORT_PREFIX,
    NODE_PORT_PREFIX,
    OVN_PROVIDER,
    SG_PORT_GROUP_PREFIX,
)


def pod_name_to_port_name(pod: str, namespace: str, provider: str = OVN_PROVIDER) -> str:
    """kube-ovn `PodNameToPortName`: the LSP and IP CR name of one pod network."""
    if provider == OVN_PROVIDER:
        return f"{pod}.{namespace}"
    return f"{pod}.{namespace}.{provider}"


def node_port_name(node: str) -> str:
    """The join-switch port (and IP CR) of a node: `node-<name>`."""
    return f"{NODE_PORT_PREFIX}{node}"


def localnet_port_name(subnet: str) -> str:
    return f"{LOCALNET_PORT_PREFIX}{subnet}"


def ip_cr_name(
    pod_name: str,
    namespace: str,
    provider: str,
    *,
    subnet: str = "",
    node_switch: str = "",
    node_name: str = "",
) -> str:
    """The IP CR name `createOrUpdateCrdIPs` uses: the port name, or `node-<node>` on the join
    switch (`subnet == node_switch`)."""
    if node_switch and subnet == node_switch:
        return node_port_name(node_name)
    return pod_name_to_port_name(pod_name, namespace, provider)


def pod_key(namespace: str, name: str) -> str:
    """The work-queue / IPAM key of a pod: `ns/name` (client-go MetaNamespaceKeyFunc)."""
    return f"{namespace}/{name}" if namespace else name


def sg_port_group_name(sg: str) -> str:
    """`ovn.sg.<sg>` with every `-` replaced by `.` (kube-ovn GetSgPortGroupName)."""
    return f"{SG_PORT_GROUP_PREFIX}{sg}".replace("-", ".")


def sg_address_set_name(sg: str, family: str) -> str:
    """`ovn.sg.<sg>.associated.<family>` with `-` -> `.`; family is "v4" or "v6"."""
    if family not in ("v4", "v6"):
        raise ValueError(f"address family must be 'v4' or 'v6', not {family!r}")
    return f"{SG_PORT_GROUP_PREFIX}{sg}.associated.{family}".replace("-", ".")


def associated_sg_key(sg: str) -> str:
    """The LSP `external_ids` key marking membership of one security group."""
    return f"associated_sg_{sg}"
