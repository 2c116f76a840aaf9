"""Multus network selection annotations and NAD configs (pure; kube-ovn
`pkg/util/network_attachment.go` and pod.go `loadNetConf`).

* `parse_pod_network_annotation(value, default_namespace)` reads
  `k8s.v1.cni.cncf.io/networks` / `v1.multus-cni.io/default-network`, either a JSON list of
  selection elements or a comma list of `[ns/]name[@ifname]`.
* `load_net_conf(config)` reads a NAD's `spec.config`: a single CNI conf, or (when it has no
  `type`) a conflist with `plugins`.
* `is_ovn_network(conf)` / `is_default_net(annotation, element)` decide how an attachment is
  handled (an OVN network gets provider `<nad>.<ns>.ovn` and an LSP; anything else is IPAM-only,
  provider `<nad>.<ns>`).

Every malformed input raises `InvalidPodNetworkError` (pod annotations: the pod must change) or
`ValueError` (NAD config: the NAD must change), with the offending text in the message.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from controller.core.address import is_valid_mac, parse_cidr, parse_ip
from controller.core.constants import CNI_TYPE_NAME
from controller.core.errors import InvalidPodNetworkError
from controller.core.model import NetworkSelectionElement

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _parse_object_name(item: str) -> tuple[str, str, str]:
    """`[ns/]name[@ifname]` -> (ns, name, ifname), multus `parsePodNetworkObjectName`."""
    slash = item.split("/")
    if len(slash) == 2:
        namespace, rest = slash[0].strip(), slash[1]
    elif len(slash) == 1:
        namespace, rest = "", slash[0]
    else:
        raise InvalidPodNetworkError(f"invalid network object {item!r} (failed at '/')")
    at = rest.split("@")
    name = at[0].strip()
    if len(at) == 2:
        interface = at[1].strip()
    elif len(at) == 1:
        interface = ""
    else:
        raise InvalidPodNetworkError(f"invalid network object {item!r} (failed at '@')")
    for part in (namespace, name):
        if part and not _DNS1123_LABEL.match(part):
            raise InvalidPodNetworkError(f"failed to parse network name: {part}")
    return namespace, name, interface


def _element_from_json(index: int, raw: object) -> NetworkSelectionElement:
    if not isinstance(raw, Mapping):
        raise InvalidPodNetworkError(f"network selection element {index} is not an object")

    def text(key: str) -> str:
        value = raw.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise InvalidPodNetworkError(
                f"network selection element {index}: {key!r} must be a string"
            )
        return value

    ips = raw.get("ips")
    if ips is None:
        ips = []
    if not isinstance(ips, list) or not all(isinstance(ip, str) for ip in ips):
        raise InvalidPodNetworkError(
            f"network selection element {index}: 'ips' must be a list of strings"
        )
    interface = text("interface")
    deprecated = text("interfaceRequest")
    return NetworkSelectionElement(
        name=text("name"),
        namespace=text("namespace"),
        interface=deprecated or interface,
        ips=tuple(ips),
        mac=text("mac"),
    )


def parse_pod_network_annotation(
    value: str, default_namespace: str
) -> list[NetworkSelectionElement]:
    """kube-ovn `ParsePodNetworkAnnotation`: the selection elements of one annotation value.

    JSON when the value contains any of `[`, `{` or `"`; otherwise a comma list. An empty
    namespace becomes `default_namespace`. `mac` must be a MAC, `ips` IPs or CIDRs.
    Deviation (listed in docs/deviations.md): an element with an empty name is rejected here
    (kube-ovn would later fail to GET a NAD named "").
    """
    if not value:
        raise InvalidPodNetworkError("network selection annotation is empty")
    elements: list[NetworkSelectionElement] = []
    if any(ch in value for ch in '[{"'):
        try:
            decoded = json.loads(value)
        except ValueError as exc:
            raise InvalidPodNetworkError(
                f"failed to parse pod network selection annotation as JSON: {exc}"
            ) from None
        if not isinstance(decoded, list):
            raise InvalidPodNetworkError(
                "pod network selection annotation JSON must be a list of objects"
            )
        elements = [_element_from_json(i, raw) for i, raw in enumerate(decoded)]
    else:
        for item in value.split(","):
            namespace, name, interface = _parse_object_name(item.strip())
            elements.append(
                NetworkSelectionElement(name=name, namespace=namespace, interface=interface)
            )
    out = []
    for element in elements:
        if not element.name:
            raise InvalidPodNetworkError(f"network selection {value!r} has an empty name")
        if element.mac and not is_valid_mac(element.mac):
            raise InvalidPodNetworkError(f"failed to parse mac address {element.mac!r}")
        for ip in element.ips:
            ok = parse_cidr(ip) is not None if "/" in ip else parse_ip(ip) is not None
            if not ok:
                raise InvalidPodNetworkError(f"failed to parse IP address {ip!r}")
        if not element.namespace:
            element = dataclasses.replace(element, namespace=default_namespace)  # noqa: PLW2901
        out.append(element)
    return out


@dataclass(frozen=True, slots=True)
class NetConf:
    """The parts of a CNI conf (or conflist) the controller reads."""

    type: str = ""
    name: str = ""
    ipam_type: str = ""
    #: Plugin types of a conflist (empty for a single conf).
    plugin_types: tuple[str, ...] = ()


def _conf_fields(raw: Mapping[str, object], where: str) -> tuple[str, str, str]:
    def text(key: str) -> str:
        value = raw.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise ValueError(f"{where}: {key!r} must be a string")
        return value

    ipam = raw.get("ipam")
    ipam_type = ""
    if isinstance(ipam, Mapping):
        value = ipam.get("type")
        ipam_type = value if isinstance(value, str) else ""
    elif ipam is not None:
        raise ValueError(f"{where}: 'ipam' must be an object")
    return text("type"), text("name"), ipam_type


def load_net_conf(config: str) -> NetConf:
    """kube-ovn `loadNetConf`: a single conf, or a conflist when `type` is empty.

    Raises ValueError when the JSON is invalid or a conflist has no plugins.
    """
    try:
        raw = json.loads(config)
    except ValueError as exc:
        raise ValueError(f"error unmarshalling delegate config: {exc}") from None
    if not isinstance(raw, Mapping):
        raise ValueError("delegate config must be a JSON object")
    conf_type, name, ipam_type = _conf_fields(raw, "config")
    if conf_type:
        return NetConf(type=conf_type, name=name, ipam_type=ipam_type)
    plugins = raw.get("plugins")
    if not isinstance(plugins, list) or not plugins:
        raise ValueError("delegate must have the 'type' or 'plugins' field")
    types = []
    for index, plugin in enumerate(plugins):
        if not isinstance(plugin, Mapping):
            raise ValueError(f"plugins[{index}] must be an object")
        types.append(_conf_fields(plugin, f"plugins[{index}]")[0])
    return NetConf(name=name, plugin_types=tuple(types))


def is_ovn_network(conf: NetConf) -> bool:
    """kube-ovn `IsOvnNetwork`: the conf, or any plugin of the conflist, has type `kube-ovn`."""
    return conf.type == CNI_TYPE_NAME or CNI_TYPE_NAME in conf.plugin_types


def is_default_net(default_network_annotation: str, element: NetworkSelectionElement) -> bool:
    """kube-ovn `IsDefaultNet`: the annotation is `name` or `namespace/name` of the element."""
    return default_network_annotation in (element.name, f"{element.namespace}/{element.name}")


def ovn_provider_name(element: NetworkSelectionElement) -> str:
    """Provider of an OVN attachment: `<nad>.<ns>.ovn`."""
    return f"{element.name}.{element.namespace}.ovn"


def ipam_provider_name(element: NetworkSelectionElement) -> str:
    """Provider of an IPAM-only attachment: `<nad>.<ns>`."""
    return f"{element.name}.{element.namespace}"
