"""Names of the NB rows and CRs the pod controller owns (pure; kube-ovn `pkg/ovs/util.go`).

The logical switch port of a pod network and that network's IP CR share one name:
`<pod>.<ns>` on the default provider `ovn`, `<pod>.<ns>.<provider>` otherwise (`<pod>` is the VM
name under keep-vm-ip). Node ports are `node-<node>`.

NOTE: security-group names (`ovn.sg.<name>` port groups, `associated_sg_<sg>` keys, address sets)
belong to the OVN package (`controller.ovn.external_ids` on the `ovn` branch) and are not
duplicated here.
"""

from __future__ import annotations

from controller.core.constants import NODE_PORT_PREFIX, OVN_PROVIDER


def pod_name_to_port_name(pod: str, namespace: str, provider: str = OVN_PROVIDER) -> str:
    """kube-ovn `PodNameToPortName`: the LSP and IP CR name of one pod network."""
    if provider == OVN_PROVIDER:
        return f"{pod}.{namespace}"
    return f"{pod}.{namespace}.{provider}"


def node_port_name(node: str) -> str:
    """The join-switch port (and IP CR) of a node: `node-<name>`."""
    return f"{NODE_PORT_PREFIX}{node}"


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
