"""A pod's networks: its default subnet, its multus attachments, the nets to allocate (pure).

Mirrors kube-ovn v1.8.18 `getPodDefaultSubnet`, `getNsAvailableSubnets`, `getPodAttachmentNet`
and `getPodKubeovnNets` over already-fetched subnets, namespaces and NADs. Errors:
`InvalidPodNetworkError` when the pod's own annotations are wrong, `ResourceNotReadyError` when
something it depends on is missing, a plain `RetryableError` for a NAD whose config does not
parse or a subnet attached twice. Deviation: those failures caused by the pod or the user carry
the Event reason `ValidatePodNetworkFailed` (kube-ovn only logs them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from controller.core import annotations as ann
from controller.core.constants import (
    ATTACHMENT_NETWORK_ANNOTATION,
    DEFAULT_NETWORK_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION,
    LOGICAL_SWITCH_ANNOTATION_TEMPLATE,
    OVN_PROVIDER,
    PROTOCOL_DUAL,
    PROTOCOL_IPV4,
    PROTOCOL_IPV6,
    REASON_VALIDATE_POD_NETWORK_FAILED,
    annotation_key,
)
from controller.core.errors import InvalidPodNetworkError, ResourceNotReadyError, RetryableError
from controller.core.model import (
    Namespace,
    NetworkAttachmentDefinition,
    NetworkSelectionElement,
    Pod,
    PodNet,
    ProviderType,
    Subnet,
)
from controller.core.network_attachment import (
    ipam_provider_name,
    is_default_net,
    is_ovn_network,
    load_net_conf,
    ovn_provider_name,
    parse_pod_network_annotation,
)
from controller.pod_logic.classify import is_pod_alive

# --- subnets and nets ------------------------------------------------------------------------


def _subnet_has_room(subnet: Subnet) -> bool:
    if subnet.protocol in (PROTOCOL_IPV4, PROTOCOL_DUAL):
        return subnet.v4_available_ips != 0
    if subnet.protocol == PROTOCOL_IPV6:
        return subnet.v6_available_ips != 0
    return True


def get_pod_default_subnet(
    pod: Pod, namespace: Namespace | None, subnets: Mapping[str, Subnet]
) -> Subnet:
    """kube-ovn `getPodDefaultSubnet`.

    The pod annotation `ovn.kubernetes.io/logical_switch` names the subnet (even when empty);
    otherwise the namespace's comma list is walked, skipping subnets with no available IPs of
    their protocol; when all are full the last one is returned (IPAM then reports the error).
    """
    if LOGICAL_SWITCH_ANNOTATION in pod.annotations:
        name = pod.annotations[LOGICAL_SWITCH_ANNOTATION]
        subnet = subnets.get(name)
        if subnet is None:
            raise ResourceNotReadyError(
                f"subnet {name!r} of pod {pod.key} not found",
                reason=REASON_VALIDATE_POD_NETWORK_FAILED,
            )
        return subnet
    if namespace is None:
        raise ResourceNotReadyError(f"namespace {pod.namespace} not found")
    if not namespace.has_annotations:
        raise ResourceNotReadyError(f"namespace {pod.namespace} network annotations is nil")
    chosen: Subnet | None = None
    for name in namespace.annotations.get(LOGICAL_SWITCH_ANNOTATION, "").split(","):
        if not name:
            raise ResourceNotReadyError(
                f"namespace {pod.namespace} default logical switch is not found"
            )
        chosen = subnets.get(name)
        if chosen is None:
            raise ResourceNotReadyError(f"subnet {name!r} of namespace {pod.namespace} not found")
        if _subnet_has_room(chosen):
            break
    assert chosen is not None  # the split above always yields at least one name
    return chosen


def get_ns_available_subnets(
    namespace: Namespace | None, subnets: Mapping[str, Subnet]
) -> list[PodNet]:
    """kube-ovn `getNsAvailableSubnets`: every subnet of the namespace annotation, as a net."""
    if namespace is None:
        raise ResourceNotReadyError("namespace not found")
    result = []
    for name in namespace.annotations.get(LOGICAL_SWITCH_ANNOTATION, "").split(","):
        if not name:
            continue
        subnet = subnets.get(name)
        if subnet is None:
            raise ResourceNotReadyError(f"subnet {name!r} of namespace {namespace.name} not found")
        result.append(PodNet(ProviderType.ORIGINAL, subnet.provider, subnet))
    return result


def pod_attachment_requests(pod: Pod) -> list[NetworkSelectionElement]:
    """The multus selections of a pod, default network first: the NADs the caller must fetch."""
    out: list[NetworkSelectionElement] = []
    for key in (DEFAULT_NETWORK_ANNOTATION, ATTACHMENT_NETWORK_ANNOTATION):
        value = pod.annotations.get(key, "")
        if value:
            try:
                out.extend(parse_pod_network_annotation(value, pod.namespace))
            except InvalidPodNetworkError as exc:
                # The Warning Event must say which annotation to fix.
                raise InvalidPodNetworkError(f"invalid annotation {key}: {exc}") from None
    return out


def waits_for_nad(pod: Pod, namespace: str, name: str, now: datetime) -> bool:
    """Is this live pod asking for NAD `namespace/name` without having its network yet?

    Used to re-queue the add when the NAD appears or changes. A malformed selection is False:
    that pod waits for its own edit, not for a NAD.
    """
    if pod.host_network or pod.deletion_timestamp is not None or not is_pod_alive(pod, now):
        return False
    if pod.phase in ("Succeeded", "Failed"):
        return False
    try:
        requests = pod_attachment_requests(pod)
    except InvalidPodNetworkError:
        return False
    for attach in requests:
        if (attach.namespace, attach.name) != (namespace, name):
            continue
        providers = (ovn_provider_name(attach), ipam_provider_name(attach))
        if not any(ann.is_allocated(pod.annotations, p) for p in providers):
            return True
    return False


def may_wait_for_network(raw: Mapping[str, Any]) -> bool:
    """A test on a raw pod object, before it is parsed: False when its annotations say its
    default network is allocated and it asks for no multus network, so that neither
    `waits_for_subnet` nor `waits_for_nad` can hold for it. A registered subnet or NAD is
    checked against every cached pod, nearly all of which are such pods."""
    meta = raw.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(annotations, Mapping):
        return True
    return not (
        ann.is_allocated(annotations)
        and not annotations.get(DEFAULT_NETWORK_ANNOTATION)
        and not annotations.get(ATTACHMENT_NETWORK_ANNOTATION)
    )


def waits_for_subnet(pod: Pod, subnet: str, now: datetime) -> bool:
    """Could this live pod be waiting for subnet `subnet` to become allocatable?

    Used to re-queue the add when a subnet is registered. True when its default network is
    unallocated and the pod names `subnet` or no subnet (its namespace, or the default subnet,
    decides), or when one of its attachments is unallocated (an attachment's subnet is found by
    provider): a needless re-queue only costs one add that finds the same error again.
    """
    if pod.host_network or pod.deletion_timestamp is not None or not is_pod_alive(pod, now):
        return False
    if pod.phase in ("Succeeded", "Failed"):
        return False
    named = pod.annotations.get(LOGICAL_SWITCH_ANNOTATION, "")
    if not ann.is_allocated(pod.annotations) and named in ("", subnet):
        return True
    try:
        requests = pod_attachment_requests(pod)
    except InvalidPodNetworkError:
        return False
    return any(
        not any(
            ann.is_allocated(pod.annotations, p)
            for p in (ovn_provider_name(attach), ipam_provider_name(attach))
        )
        for attach in requests
    )


def get_pod_attachment_nets(
    pod: Pod,
    nads: Mapping[tuple[str, str], NetworkAttachmentDefinition],
    subnets: Sequence[Subnet],
    namespace: Namespace | None,
) -> list[PodNet]:
    """kube-ovn `getPodAttachmentNet` over the fetched NADs, keyed by (namespace, name).

    `subnets` is the lister content; "first subnet of a provider" means first in this order, so
    callers should pass a stable order (e.g. sorted by name). An IPAM-only attachment with no
    subnet of its provider is skipped silently, as in kube-ovn.
    """
    by_name = {s.name: s for s in subnets}
    result: list[PodNet] = []
    default_ann = pod.annotations.get(DEFAULT_NETWORK_ANNOTATION, "")
    for attach in pod_attachment_requests(pod):
        nad = nads.get((attach.namespace, attach.name))
        if nad is None:
            raise ResourceNotReadyError(
                f"network-attachment-definition {attach.namespace}/{attach.name} not found",
                reason=REASON_VALIDATE_POD_NETWORK_FAILED,
            )
        try:
            conf = load_net_conf(nad.config)
        except ValueError as exc:
            raise RetryableError(
                f"failed to load config of net-attach-def {attach.namespace}/{attach.name}: {exc}",
                reason=REASON_VALIDATE_POD_NETWORK_FAILED,
            ) from None
        if is_ovn_network(conf):
            provider = ovn_provider_name(attach)
            name = pod.annotations.get(
                annotation_key(LOGICAL_SWITCH_ANNOTATION_TEMPLATE, provider), ""
            )
            if not name:
                name = next((s.name for s in subnets if s.provider == provider), "")
            if name:
                subnet = by_name.get(name)
                if subnet is None:
                    raise ResourceNotReadyError(
                        f"subnet {name!r} of pod {pod.key} not found",
                        reason=REASON_VALIDATE_POD_NETWORK_FAILED,
                    )
            else:
                subnet = get_pod_default_subnet(pod, namespace, by_name)
            result.append(
                PodNet(ProviderType.ORIGINAL, provider, subnet, is_default_net(default_ann, attach))
            )
        else:
            provider = ipam_provider_name(attach)
            match = next((s for s in subnets if s.provider == provider), None)
            if match is not None:
                result.append(PodNet(ProviderType.IPAM, provider, match))
    return result


def get_pod_kubeovn_nets(
    pod: Pod,
    namespace: Namespace | None,
    subnets: Sequence[Subnet],
    nads: Mapping[tuple[str, str], NetworkAttachmentDefinition],
) -> list[PodNet]:
    """kube-ovn `getPodKubeovnNets`: attachments, then the default `ovn` net unless multus
    replaces the default network; the same subnet twice is an error."""
    by_name = {s.name: s for s in subnets}
    default_subnet = get_pod_default_subnet(pod, namespace, by_name)
    nets = get_pod_attachment_nets(pod, nads, subnets, namespace)
    if DEFAULT_NETWORK_ANNOTATION not in pod.annotations:
        check_default_net_subnet(pod, default_subnet)
        nets.append(PodNet(ProviderType.ORIGINAL, OVN_PROVIDER, default_subnet, True))
    seen: set[str] = set()
    for net in nets:
        if net.subnet.name in seen:
            # NOTE: retryable, as in kube-ovn: creating a subnet for an attachment's provider
            # (a cluster change, not a pod change) resolves it. kube-ovn only logs it; a Warning
            # Event tells the user why the pod has no network.
            raise RetryableError(
                f"subnet conflict, the same subnet {net.subnet.name} should not be attached"
                " repeatedly",
                reason=REASON_VALIDATE_POD_NETWORK_FAILED,
            )
        seen.add(net.subnet.name)
    return nets


def is_ovn_provider(provider: str) -> bool:
    """kube-ovn `isOvnSubnet` on a subnet's provider: `ovn` or an OVN attachment's
    `<nad>.<ns>.ovn`; any other provider is an IPAM-only subnet, which has no logical switch."""
    return provider == OVN_PROVIDER or provider.endswith("." + OVN_PROVIDER)


def is_ovn_subnet(subnet: Subnet) -> bool:
    return is_ovn_provider(subnet.provider)


def check_default_net_subnet(pod: Pod, subnet: Subnet) -> None:
    """The default network needs an OVN subnet (deviation: kube-ovn v1.8 would try to create the
    port on a switch an IPAM-only subnet does not have). Named by the pod itself: the pod must
    change (permanent); inherited from its namespace: a cluster change heals it (retryable)."""
    if is_ovn_subnet(subnet):
        return
    message = (
        f"subnet {subnet.name} has provider {subnet.provider}, not an OVN subnet: it cannot hold"
        f" the default network of pod {pod.key}"
    )
    if LOGICAL_SWITCH_ANNOTATION in pod.annotations:
        raise InvalidPodNetworkError(message)
    raise ResourceNotReadyError(message, reason=REASON_VALIDATE_POD_NETWORK_FAILED)


def default_ovn_net(nets: Iterable[PodNet]) -> PodNet | None:
    """The net handleUpdatePod routes: the first default net of provider `ovn`."""
    return next((n for n in nets if n.is_default and n.provider_name == OVN_PROVIDER), None)
