"""What kube-ovn's CNI (multus, then the kube-ovn plugin and daemon) waits for before a pod's
sandbox is networked, read from the pod's annotations and NetworkAttachmentDefinitions.

`cni_requests(pod, get_nad)` lists the CNI ADDs multus makes (default network first);
`check_network(annotations, request)` says whether an ADD would go through now (kube-ovn's
pkg/daemon/handler.go `handleAdd` waits for `allocated`, valid addresses and, on the interface
carrying the default route, `routed`); `pod_ips` reads the addresses the ADD reports.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.core.address import check_cidrs, cidr_contain_ip, is_valid_mac, parse_cidr, parse_ip
from controller.core.constants import (
    ALLOCATED_ANNOTATION_TEMPLATE,
    ATTACHMENT_NETWORK_ANNOTATION,
    CIDR_ANNOTATION_TEMPLATE,
    CNI_TYPE_NAME,
    DEFAULT_NETWORK_ANNOTATION,
    IP_ADDRESS_ANNOTATION_TEMPLATE,
    MAC_ADDRESS_ANNOTATION_TEMPLATE,
    OVN_PROVIDER,
    ROUTED_ANNOTATION_TEMPLATE,
    annotation_key,
)
from controller.core.errors import InvalidPodNetworkError
from controller.core.model import NetworkSelectionElement
from controller.core.network_attachment import (
    ipam_provider_name,
    ovn_provider_name,
    parse_pod_network_annotation,
)

JsonDict = dict[str, Any]

DEFAULT_ROUTE_ANNOTATION_TEMPLATE = "{provider}.kubernetes.io/default_route"
DEFAULT_INTERFACE = "eth0"


@dataclass(frozen=True, slots=True)
class CniRequest:
    """One CNI ADD the pod needs: the kube-ovn provider whose annotations it reads."""

    provider: str
    interface: str
    default_route: bool


class PodNotReady(Exception):
    """The pod cannot be started yet for a reason worth an Event (the message says which)."""


class NadMissing(Exception):
    """A NetworkAttachmentDefinition the pod asks for cannot be read yet (retried)."""


def text(obj: Any, *path: str) -> str:
    for key in path:
        if not isinstance(obj, Mapping):
            return ""
        obj = obj.get(key)
    return obj if isinstance(obj, str) else ""


def annotations_of(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    ann = (pod.get("metadata") or {}).get("annotations")
    return ann if isinstance(ann, Mapping) else {}


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


# ----------------------------------------------------------------- what the CNI waits for


NadGetter = Callable[[str, str], Mapping[str, Any] | None]


def _nad_providers(nad: Mapping[str, Any], element: NetworkSelectionElement) -> str | None:
    """The kube-ovn provider the CNI is called with for `element`, or None when kube-ovn does
    not serve this attachment (another CNI and another IPAM). Raises PodNotReady on a config
    that is not a CNI conf."""
    where = f"network-attachment-definition {element.namespace}/{element.name}"
    config = text(nad, "spec", "config")
    try:
        conf = json.loads(config) if config else {}
    except ValueError as exc:
        raise PodNotReady(f"{where}: spec.config is not JSON: {exc}") from None
    if not isinstance(conf, Mapping):
        raise PodNotReady(f"{where}: spec.config is not a JSON object")
    plugins = conf.get("plugins") if not conf.get("type") else [conf]
    if not isinstance(plugins, list):
        raise PodNotReady(f"{where}: spec.config has neither 'type' nor 'plugins'")
    for plugin in plugins:
        if not isinstance(plugin, Mapping):
            continue
        if plugin.get("type") == CNI_TYPE_NAME:
            provider = plugin.get("provider")
            return (
                provider if isinstance(provider, str) and provider else (ovn_provider_name(element))
            )
        ipam = plugin.get("ipam")
        if isinstance(ipam, Mapping) and ipam.get("type") == CNI_TYPE_NAME:
            provider = ipam.get("provider")
            return (
                provider
                if isinstance(provider, str) and provider
                else (ipam_provider_name(element))
            )
    return None


def _default_route(annotations: Mapping[str, Any], provider: str, interface: str) -> bool:
    value = annotations.get(annotation_key(DEFAULT_ROUTE_ANNOTATION_TEMPLATE, provider))
    if value == "true":
        return True
    if value == "false":
        return False
    return interface == DEFAULT_INTERFACE


def cni_requests(pod: Mapping[str, Any], get_nad: NadGetter) -> list[CniRequest]:
    """The CNI ADDs multus makes for `pod`, default network first.

    `get_nad(namespace, name)` returns the NAD or None when it does not exist (NadMissing is
    raised then: multus fails the sandbox and the kubelet retries). Raises PodNotReady on a
    malformed network annotation."""
    annotations = annotations_of(pod)
    namespace = text(pod, "metadata", "namespace")
    out: list[CniRequest] = []

    def elements(key: str) -> list[NetworkSelectionElement]:
        value = annotations.get(key)
        if not value:
            return []
        if not isinstance(value, str):
            raise PodNotReady(f"annotation {key} is not a string")
        try:
            return parse_pod_network_annotation(value, namespace)
        except InvalidPodNetworkError as exc:
            raise PodNotReady(f"invalid annotation {key}: {exc}") from None

    def provider_of(element: NetworkSelectionElement) -> str | None:
        nad = get_nad(element.namespace, element.name)
        if nad is None:
            raise NadMissing(
                f"network-attachment-definition {element.namespace}/{element.name} not found"
            )
        return _nad_providers(nad, element)

    defaults = elements(DEFAULT_NETWORK_ANNOTATION)
    if defaults:
        provider = provider_of(defaults[0])
        if provider is not None:
            out.append(
                CniRequest(
                    provider,
                    DEFAULT_INTERFACE,
                    _default_route(annotations, provider, DEFAULT_INTERFACE),
                )
            )
    else:
        out.append(
            CniRequest(
                OVN_PROVIDER,
                DEFAULT_INTERFACE,
                _default_route(annotations, OVN_PROVIDER, DEFAULT_INTERFACE),
            )
        )
    for index, element in enumerate(elements(ATTACHMENT_NETWORK_ANNOTATION), start=1):
        provider = provider_of(element)
        if provider is None:
            continue
        interface = element.interface or f"net{index}"
        out.append(
            CniRequest(provider, interface, _default_route(annotations, provider, interface))
        )
    return out


def check_network(annotations: Mapping[str, Any], request: CniRequest) -> bool:
    """Whether the CNI ADD of `request` would go through now: allocated, valid and (for the
    default-route interface) routed. False: not yet (the controller has work to do); raises
    PodNotReady when the controller says allocated but the addresses are unusable."""
    provider = request.provider

    def value(template: str) -> str:
        raw = annotations.get(annotation_key(template, provider), "")
        return raw if isinstance(raw, str) else ""

    if value(ALLOCATED_ANNOTATION_TEMPLATE) != "true":
        return False
    errors: list[str] = []
    ip_key = annotation_key(IP_ADDRESS_ANNOTATION_TEMPLATE, provider)
    ips = value(IP_ADDRESS_ANNOTATION_TEMPLATE)
    cidr = value(CIDR_ANNOTATION_TEMPLATE)
    if not ips:
        errors.append(f"{ip_key} is empty")
    for ip in ips.split(",") if ips else ():
        ok = parse_cidr(ip) is not None if "/" in ip else parse_ip(ip) is not None
        if not ok:
            errors.append(f"{ip!r} is not a valid {ip_key}")
        elif cidr and (not check_cidrs(cidr) or not cidr_contain_ip(cidr, ip)):
            errors.append(f"{ip} is not in cidr {cidr!r}")
    mac = value(MAC_ADDRESS_ANNOTATION_TEMPLATE)
    if mac and not is_valid_mac(mac):
        errors.append(
            f"{mac!r} is not a valid {annotation_key(MAC_ADDRESS_ANNOTATION_TEMPLATE, provider)}"
        )
    if errors:
        raise PodNotReady(f"provider {provider}: " + "; ".join(errors))
    return not request.default_route or value(ROUTED_ANNOTATION_TEMPLATE) == "true"


def pod_ips(annotations: Mapping[str, Any], provider: str) -> list[str]:
    raw = annotations.get(annotation_key(IP_ADDRESS_ANNOTATION_TEMPLATE, provider), "")
    if not isinstance(raw, str):
        return []
    return [ip.split("/", 1)[0] for ip in raw.split(",") if ip]
