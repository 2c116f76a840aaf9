"""The single owner of the pod network annotation format (pure).

Two directions:

* what a user *asks* for (`PodNetworkRequest`: static `ip_address`/`mac_address`, `ip_pool`,
  `logical_switch`, `port_security`, `security_groups`), read by the add flow;
* what the controller *writes* after allocation (`PodNetworkAnnotations`), which is the contract
  with the kube-ovn CNI daemon: it waits for `<provider>.kubernetes.io/allocated == "true"`, then
  reads `ip_address` ("v4,v6"), `mac_address`, `cidr`, `gateway`, `logical_switch`,
  `provider_network`, `virtualmachine` and `ovn.kubernetes.io/pod_nic_type`; for eth0 it also
  waits for `ovn.kubernetes.io/routed == "true"`.

`from_annotations(to_annotations(x)) == x` for every value (a unit test).

Writing is not here: the kube adapter (`controller.kube.api.annotation_merge_patch`) turns the
maps built here into a merge patch of only the controller's keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.core.constants import (
    ALLOCATED_ANNOTATION_SUFFIX,
    ALLOCATED_ANNOTATION_TEMPLATE,
    CIDR_ANNOTATION_TEMPLATE,
    GATEWAY_ANNOTATION_TEMPLATE,
    IP_ADDRESS_ANNOTATION_TEMPLATE,
    IP_POOL_ANNOTATION_TEMPLATE,
    LOGICAL_ROUTER_ANNOTATION_TEMPLATE,
    LOGICAL_SWITCH_ANNOTATION_TEMPLATE,
    MAC_ADDRESS_ANNOTATION_TEMPLATE,
    NETWORK_TYPE_ANNOTATION_TEMPLATE,
    OVN_PROVIDER,
    POD_NIC_ANNOTATION,
    PORT_SECURITY_ANNOTATION_TEMPLATE,
    PROVIDER_NETWORK_ANNOTATION_TEMPLATE,
    ROUTED_ANNOTATION_TEMPLATE,
    SECURITY_GROUP_ANNOTATION_TEMPLATE,
    VLAN_ID_ANNOTATION_TEMPLATE,
    VM_ANNOTATION_TEMPLATE,
    annotation_key,
)
from controller.core.errors import InvalidPodNetworkError

TRUE = "true"


def is_allocated(annotations: Mapping[str, str], provider: str = OVN_PROVIDER) -> bool:
    return annotations.get(annotation_key(ALLOCATED_ANNOTATION_TEMPLATE, provider)) == TRUE


def is_routed(annotations: Mapping[str, str], provider: str = OVN_PROVIDER) -> bool:
    return annotations.get(annotation_key(ROUTED_ANNOTATION_TEMPLATE, provider)) == TRUE


def get(annotations: Mapping[str, str], template: str, provider: str = OVN_PROVIDER) -> str:
    """The value of one templated key for `provider`, "" when absent."""
    return annotations.get(annotation_key(template, provider), "")


def split_csv(value: str) -> tuple[str, ...]:
    """Comma list -> trimmed non-empty items (ip_pool, security_groups, logical_switch lists)."""
    return tuple(item.strip() for item in value.split(",") if item.strip())


@dataclass(frozen=True, slots=True)
class PodNetworkRequest:
    """What the pod's annotations ask of one network (inputs of kube-ovn `acquireAddress`)."""

    ip_address: str = ""
    mac_address: str = ""
    ip_pool: tuple[str, ...] = ()
    logical_switch: str = ""
    port_security: bool = False
    #: The raw comma list, as kube-ovn passes it to CreatePort / reconcilePortSg.
    security_groups: str = ""

    @classmethod
    def from_annotations(
        cls, annotations: Mapping[str, str], provider: str = OVN_PROVIDER
    ) -> PodNetworkRequest:
        return cls(
            ip_address=get(annotations, IP_ADDRESS_ANNOTATION_TEMPLATE, provider),
            mac_address=get(annotations, MAC_ADDRESS_ANNOTATION_TEMPLATE, provider),
            ip_pool=split_csv(get(annotations, IP_POOL_ANNOTATION_TEMPLATE, provider)),
            logical_switch=get(annotations, LOGICAL_SWITCH_ANNOTATION_TEMPLATE, provider),
            port_security=get(annotations, PORT_SECURITY_ANNOTATION_TEMPLATE, provider) == TRUE,
            security_groups=get(annotations, SECURITY_GROUP_ANNOTATION_TEMPLATE, provider),
        )

    @property
    def is_random(self) -> bool:
        """Neither a static address nor a pool: IPAM picks (and generates the MAC)."""
        return not self.ip_address and not self.ip_pool

    def security_group_names(self) -> tuple[str, ...]:
        return split_csv(self.security_groups)


@dataclass(frozen=True, slots=True)
class PodNetworkAnnotations:
    """The allocation of one pod network, as written for the CNI daemon (kube-ovn handleAddPod).

    Optional fields are "" / None when absent and are then not written.
    """

    ip_address: str
    mac_address: str
    cidr: str
    gateway: str
    logical_switch: str
    network_type: str = ""
    allocated: bool = True
    logical_router: str = ""
    vlan_id: int | None = None
    provider_network: str = ""
    virtualmachine: str = ""

    _FIELDS = (
        ("ip_address", IP_ADDRESS_ANNOTATION_TEMPLATE),
        ("mac_address", MAC_ADDRESS_ANNOTATION_TEMPLATE),
        ("cidr", CIDR_ANNOTATION_TEMPLATE),
        ("gateway", GATEWAY_ANNOTATION_TEMPLATE),
        ("logical_switch", LOGICAL_SWITCH_ANNOTATION_TEMPLATE),
        ("network_type", NETWORK_TYPE_ANNOTATION_TEMPLATE),
        ("logical_router", LOGICAL_ROUTER_ANNOTATION_TEMPLATE),
        ("provider_network", PROVIDER_NETWORK_ANNOTATION_TEMPLATE),
        ("virtualmachine", VM_ANNOTATION_TEMPLATE),
    )

    def to_annotations(self, provider: str = OVN_PROVIDER) -> dict[str, str]:
        out: dict[str, str] = {}
        for attr, template in self._FIELDS:
            value = getattr(self, attr)
            if value:
                out[annotation_key(template, provider)] = value
        if self.vlan_id is not None:
            out[annotation_key(VLAN_ID_ANNOTATION_TEMPLATE, provider)] = str(self.vlan_id)
        if self.allocated:
            out[annotation_key(ALLOCATED_ANNOTATION_TEMPLATE, provider)] = TRUE
        return out

    @classmethod
    def from_annotations(
        cls, annotations: Mapping[str, str], provider: str = OVN_PROVIDER
    ) -> PodNetworkAnnotations:
        """Read back what `to_annotations` wrote; a malformed vlan_id is InvalidPodNetworkError."""
        values = {attr: get(annotations, template, provider) for attr, template in cls._FIELDS}
        vlan_text = get(annotations, VLAN_ID_ANNOTATION_TEMPLATE, provider)
        vlan_id: int | None = None
        if vlan_text:
            try:
                vlan_id = int(vlan_text, 10)
            except ValueError:
                key = annotation_key(VLAN_ID_ANNOTATION_TEMPLATE, provider)
                raise InvalidPodNetworkError(f"{vlan_text} is not a valid {key}") from None
        return cls(
            **values,
            allocated=is_allocated(annotations, provider),
            vlan_id=vlan_id,
        )


def apply_allocation(
    annotations: Mapping[str, str],
    allocation: PodNetworkAnnotations,
    provider: str = OVN_PROVIDER,
    *,
    pod_nic_type: str = "",
) -> dict[str, str]:
    """A new map: `annotations` plus `allocation` for `provider`.

    `ovn.kubernetes.io/pod_nic_type` is set to `pod_nic_type` only when the pod has none (kube-ovn
    keeps a user's choice). Existing keys the allocation leaves empty (e.g. a stale vlan_id) are
    kept, as kube-ovn's in-place map update does.
    """
    out = dict(annotations)
    out.update(allocation.to_annotations(provider))
    if pod_nic_type and not out.get(POD_NIC_ANNOTATION):
        out[POD_NIC_ANNOTATION] = pod_nic_type
    return out


def allocation_state_keys(provider: str = OVN_PROVIDER) -> tuple[str, str]:
    """The `allocated` and `routed` keys of `provider` (what inspection removes)."""
    return (
        annotation_key(ALLOCATED_ANNOTATION_TEMPLATE, provider),
        annotation_key(ROUTED_ANNOTATION_TEMPLATE, provider),
    )


def allocated_providers(annotations: Mapping[str, str]) -> list[str]:
    """Providers with `<provider>.kubernetes.io/allocated == "true"`, in key order."""
    return [
        key[: -len(ALLOCATED_ANNOTATION_SUFFIX)]
        for key, value in annotations.items()
        if key.endswith(ALLOCATED_ANNOTATION_SUFFIX)
        and value == TRUE
        and len(key) > len(ALLOCATED_ANNOTATION_SUFFIX)
    ]


def attachment_providers_to_release(annotations: Mapping[str, str]) -> list[str]:
    """kube-ovn `deleteAttachmentNetWorkIP`: the allocated providers other than `ovn`."""
    return [p for p in allocated_providers(annotations) if p != OVN_PROVIDER]


def changed_keys(old: Mapping[str, str], new: Mapping[str, str], keys: Iterable[str]) -> list[str]:
    """The given keys whose value differs between two annotation maps (absent == "")."""
    return [k for k in keys if old.get(k, "") != new.get(k, "")]
