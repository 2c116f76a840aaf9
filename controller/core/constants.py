"""Names shared by the pod controller and kube-ovn's other components (pure, no I/O).

Every string here is part of a contract with something outside this process: the kube-ovn CNI
daemon reads the pod annotations, dashboards key on the work queue names, users grep the Event
reasons, and kube-ovn's own tooling reads the IP CR labels. They are therefore spelled exactly as in
kube-ovn v1.8.18 (`pkg/util/const.go`, `pkg/controller/controller.go`), never "improved".

Per-network annotation keys are templates with a `{provider}` field: `ovn` for the default network,
`<nad>.<ns>.ovn` for OVN attachments and `<nad>.<ns>` for IPAM-only attachments. Use
`annotation_key(TEMPLATE, provider)` (or `TEMPLATE.format(provider=...)`); the `*_ANNOTATION`
constants are the templates already filled in with the default provider.
"""

from __future__ import annotations

from typing import Final

# --- providers, vendor, default object names -------------------------------------------------

OVN_PROVIDER: Final = "ovn"
#: CniTypeName: the NAD `type` of an OVN network and the LSP `external_ids:vendor`
CNI_TYPE_NAME: Final = "kube-ovn"
VENDOR: Final = CNI_TYPE_NAME

DEFAULT_VPC: Final = "ovn-cluster"
DEFAULT_CLUSTER_ROUTER: Final = "ovn-cluster"
DEFAULT_LOGICAL_SWITCH: Final = "ovn-default"
DEFAULT_NODE_SWITCH: Final = "join"
DEFAULT_CIDR: Final = "10.16.0.0/16"
DEFAULT_NODE_SWITCH_CIDR: Final = "100.64.0.0/16"
DENY_ALL_SECURITY_GROUP: Final = "kubeovn_deny_all"
EXTERNAL_GATEWAY_CONFIG: Final = "ovn-external-gw-config"
EXTERNAL_GATEWAY_ADDR_KEY: Final = "external-gw-addr"
#: `type` of ConfigMap ovn-external-gw-config whose NAT rules name the pod's port and MAC.
EXTERNAL_GATEWAY_TYPE_DISTRIBUTED: Final = "distributed"
EXTERNAL_GATEWAY_CONFIG_NAMESPACE: Final = "kube-system"
#: Event source component of kube-ovn's recorder.
EVENT_COMPONENT: Final = "ovn-controller"
#: Lease name of kube-ovn >= 1.12 (v1.8 used the ConfigMap `ovn-config`).
LEADER_ELECTION_LOCK_NAME: Final = "kube-ovn-controller"
DEFAULT_CONTROLLER_NAMESPACE: Final = "kube-system"

# --- annotation keys -------------------------------------------------------------------------


def annotation_key(template: str, provider: str = OVN_PROVIDER) -> str:
    """Fill a `{provider}` key template: ("{provider}.kubernetes.io/ip_address", "ovn") -> key."""
    return template.format(provider=provider)


ALLOCATED_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/allocated"
ALLOCATED_ANNOTATION_SUFFIX: Final = ".kubernetes.io/allocated"
ROUTED_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/routed"
MAC_ADDRESS_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/mac_address"
IP_ADDRESS_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/ip_address"
CIDR_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/cidr"
GATEWAY_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/gateway"
IP_POOL_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/ip_pool"
LOGICAL_SWITCH_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/logical_switch"
LOGICAL_ROUTER_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/logical_router"
VLAN_ID_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/vlan_id"
NETWORK_TYPE_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/network_type"
PROVIDER_NETWORK_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/provider_network"
PORT_SECURITY_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/port_security"
SECURITY_GROUP_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/security_groups"
INGRESS_RATE_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/ingress_rate"
EGRESS_RATE_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/egress_rate"
VM_ANNOTATION_TEMPLATE: Final = "{provider}.kubernetes.io/virtualmachine"

ALLOCATED_ANNOTATION: Final = "ovn.kubernetes.io/allocated"
ROUTED_ANNOTATION: Final = "ovn.kubernetes.io/routed"
MAC_ADDRESS_ANNOTATION: Final = "ovn.kubernetes.io/mac_address"
IP_ADDRESS_ANNOTATION: Final = "ovn.kubernetes.io/ip_address"
CIDR_ANNOTATION: Final = "ovn.kubernetes.io/cidr"
GATEWAY_ANNOTATION: Final = "ovn.kubernetes.io/gateway"
IP_POOL_ANNOTATION: Final = "ovn.kubernetes.io/ip_pool"
LOGICAL_SWITCH_ANNOTATION: Final = "ovn.kubernetes.io/logical_switch"
LOGICAL_ROUTER_ANNOTATION: Final = "ovn.kubernetes.io/logical_router"
PORT_SECURITY_ANNOTATION: Final = "ovn.kubernetes.io/port_security"
INGRESS_RATE_ANNOTATION: Final = "ovn.kubernetes.io/ingress_rate"
EGRESS_RATE_ANNOTATION: Final = "ovn.kubernetes.io/egress_rate"
POD_NIC_ANNOTATION: Final = "ovn.kubernetes.io/pod_nic_type"
EIP_ANNOTATION: Final = "ovn.kubernetes.io/eip"
SNAT_ANNOTATION: Final = "ovn.kubernetes.io/snat"
NORTH_GATEWAY_ANNOTATION: Final = "ovn.kubernetes.io/north_gateway"
#: Namespace annotation written by the namespace controller (`;`-joined per subnet).
EXCLUDE_IPS_ANNOTATION: Final = "ovn.kubernetes.io/exclude_ips"
#: Node annotation naming the node's join-switch port.
PORT_NAME_ANNOTATION: Final = "ovn.kubernetes.io/port_name"

#: Multus: secondary networks of a pod, and the replacement of its default network.
ATTACHMENT_NETWORK_ANNOTATION: Final = "k8s.v1.cni.cncf.io/networks"
DEFAULT_NETWORK_ANNOTATION: Final = "v1.multus-cni.io/default-network"

# --- labels ----------------------------------------------------------------------------------

#: IP CR label naming its subnet; the CR also carries a `<subnet>: ""` label, which is what the
#: subnet status counter selects on.
SUBNET_NAME_LABEL: Final = "ovn.kubernetes.io/subnet"

# --- enumerations (values written into annotations / CRs) -----------------------------------

NETWORK_TYPE_GENEVE: Final = "geneve"
NETWORK_TYPE_VLAN: Final = "vlan"
NETWORK_TYPES: Final = (NETWORK_TYPE_GENEVE, NETWORK_TYPE_VLAN)

POD_NIC_VETH_PAIR: Final = "veth-pair"
POD_NIC_INTERNAL_PORT: Final = "internal-port"
POD_NIC_OFFLOAD_PORT: Final = "offload-port"
POD_NIC_TYPES: Final = (POD_NIC_VETH_PAIR, POD_NIC_INTERNAL_PORT, POD_NIC_OFFLOAD_PORT)

PROTOCOL_IPV4: Final = "IPv4"
PROTOCOL_IPV6: Final = "IPv6"
PROTOCOL_DUAL: Final = "Dual"

GATEWAY_TYPE_DISTRIBUTED: Final = "distributed"
GATEWAY_TYPE_CENTRALIZED: Final = "centralized"

#: `spec.podType` of an IP CR, and what `get_pod_type` returns.
POD_TYPE_STATEFULSET: Final = "StatefulSet"
POD_TYPE_VIRTUAL_MACHINE: Final = "VirtualMachine"
#: Owner kinds recognised on pods.
KIND_STATEFULSET: Final = "StatefulSet"
KIND_VM_INSTANCE: Final = "VirtualMachineInstance"

POLICY_SRC_IP: Final = "src-ip"
POLICY_DST_IP: Final = "dst-ip"
NAT_TYPE_SNAT: Final = "snat"
NAT_TYPE_DNAT_AND_SNAT: Final = "dnat_and_snat"

# Security-group ACL priorities (kube-ovn SecurityGroup*Priority).
SECURITY_GROUP_HIGHEST_PRIORITY: Final = 2300
SECURITY_GROUP_ALLOW_PRIORITY: Final = 2004
SECURITY_GROUP_DROP_PRIORITY: Final = 2003

# --- Event reasons (Warning events on the Pod, unless said otherwise) -----------------------

REASON_VALIDATE_POD_NETWORK_FAILED: Final = "ValidatePodNetworkFailed"
REASON_ACQUIRE_ADDRESS_FAILED: Final = "AcquireAddressFailed"
REASON_GET_VLAN_INFO_FAILED: Final = "GetVlanInfoFailed"
REASON_CREATE_OVN_PORT_FAILED: Final = "CreateOVNPortFailed"
#: Warning on a Subnet whose spec cannot be formatted (bad cidrBlock, gateway or excludeIps).
REASON_VALIDATE_LOGICAL_SWITCH_FAILED: Final = "ValidateLogicalSwitchFailed"
EVENT_TYPE_WARNING: Final = "Warning"
EVENT_TYPE_NORMAL: Final = "Normal"

# --- work queue names (the `name` label of the workqueue_* metrics) --------------------------

QUEUE_ADD_POD: Final = "AddPod"
QUEUE_DELETE_POD: Final = "DeletePod"
QUEUE_UPDATE_POD: Final = "UpdatePod"
QUEUE_UPDATE_POD_SECURITY: Final = "UpdatePodSecurity"
# The built-in minimal subnet / namespace / node controllers.
QUEUE_ADD_SUBNET: Final = "AddSubnet"
QUEUE_DELETE_SUBNET: Final = "DeleteSubnet"
QUEUE_UPDATE_SUBNET_STATUS: Final = "UpdateSubnetStatus"
QUEUE_ADD_NAMESPACE: Final = "AddNamespace"
QUEUE_ADD_NODE: Final = "AddNode"
QUEUE_DELETE_NODE: Final = "DeleteNode"
QUEUE_UPDATE_ROUTING: Final = "UpdateRouting"  # the routing reconciler (no kube-ovn queue)
POD_QUEUES: Final = (QUEUE_ADD_POD, QUEUE_DELETE_POD, QUEUE_UPDATE_POD, QUEUE_UPDATE_POD_SECURITY)

# --- API groups and resources the controller talks to ----------------------------------------

KUBEOVN_GROUP: Final = "kubeovn.io"
KUBEOVN_VERSION: Final = "v1"
KUBEOVN_API_VERSION: Final = "kubeovn.io/v1"
RESOURCE_SUBNETS: Final = "subnets"
RESOURCE_IPS: Final = "ips"
RESOURCE_VLANS: Final = "vlans"
RESOURCE_VPCS: Final = "vpcs"
NAD_GROUP: Final = "k8s.cni.cncf.io"
NAD_VERSION: Final = "v1"
RESOURCE_NADS: Final = "network-attachment-definitions"
KUBEVIRT_GROUP: Final = "kubevirt.io"
KUBEVIRT_VERSION: Final = "v1"
RESOURCE_VIRTUAL_MACHINES: Final = "virtualmachines"

# --- NB port naming pieces ------------------------------------------------------------------

NODE_PORT_PREFIX: Final = "node-"
LOCALNET_PORT_PREFIX: Final = "localnet."
